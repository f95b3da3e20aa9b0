"""FlashAttention's IO analysis (Dao et al. 2022, arXiv:2205.14135; Dao 2023, arXiv:2307.08691).

The FlashAttention-2 counts are checked against the hand formula the module docstring derives
from the kernel's loop order: K and V streamed ``(N/B_r)·N·d·2·bytes`` per query head, about
half of it causal; Q read and O written once.
"""

import pytest

from llminfer.cost.flash import (
    FLASH_TILES,
    attention_hbm_bytes,
    attention_hbm_elements,
    flash2_traffic,
    flash_traffic_table,
    kv_keys_streamed,
    score_matrix_bytes,
)

# --- the paper's Algorithms 0 and 1 ----------------------------------------------------------


def test_standard_attention_moves_4nd_plus_4n2_elements():
    assert attention_hbm_elements(1024, 64, "standard") == 4 * 1024 * 64 + 4 * 1024**2
    assert attention_hbm_bytes(4096, 128, 32, "bf16", "standard") == 2 * 32 * (
        4 * 4096 * 128 + 4 * 4096**2
    )


def test_flash_attention_count_follows_algorithm_1():
    n, d, m = 1024, 64, 32 * 1024
    block = -(-m // (4 * d))  # B_c = ceil(M / 4d) = 128
    column_blocks = -(-n // block)  # T_c = 8
    expected = n * d + 2 * n + 2 * n * d + column_blocks * (3 * n * d + 4 * n)
    assert attention_hbm_elements(n, d, "flash", m) == expected


def test_algorithm_1_traffic_scales_as_n2_d2_over_m():
    n, d = 65536, 128
    small, large = (attention_hbm_elements(n, d, "flash", m) for m in (64 * 1024, 128 * 1024))
    assert small / large == pytest.approx(2, rel=0.05)  # twice the SRAM, half the passes
    quadrupled = attention_hbm_elements(2 * n, d, "flash", 64 * 1024)
    assert quadrupled / small == pytest.approx(4, rel=0.05)


# --- the memory saving -------------------------------------------------------------------------


def test_score_matrix_of_llama_8b_layer_at_16k_is_17_gb():
    # 16,384² scores × 32 heads × 2 bytes = 17,179,869,184 B
    assert score_matrix_bytes(16384, 32, "bf16") == 16384**2 * 32 * 2 == 17_179_869_184


# --- FlashAttention-2: K/V streamed once per query tile ---------------------------------------


def test_fa2_tiles_at_head_dim_128():
    assert FLASH_TILES["fa2"] == (128, 64) and FLASH_TILES["fa3-causal"] == (128, 128)


def test_fa2_non_causal_matches_the_hand_formula():
    n, d, br, heads = 16384, 128, 128, 32
    t = flash2_traffic(n, d, heads, 8, block_rows=br, block_cols=64, causal=False)
    # (N / B_r) · N · d · 2 tensors · 2 bytes per query head
    assert t.kv_stream_bytes == (n // br) * n * d * 2 * 2 * heads == 34_359_738_368
    assert t.q_o_bytes == 2 * n * d * 2 * heads
    assert t.kv_once_bytes == 2 * n * d * 2 * 8  # each of the 8 KV heads once
    assert t.flops == 4 * d * n * n * heads


def test_fa2_causal_streams_about_half():
    n, br = 16384, 128
    tiles = n // br  # 128 query tiles; tile i (from 1) needs i·B_r keys
    assert kv_keys_streamed(n, br, 64, causal=True) == br * tiles * (tiles + 1) // 2
    t = flash2_traffic(n, 128, 32, 8)  # defaults: causal, 128×64 tiles, BF16
    assert t.kv_stream_bytes == br * tiles * (tiles + 1) // 2 * 128 * 2 * 2 * 32
    assert round(t.kv_stream_bytes / 1e9, 1) == 17.3
    assert t.kv_stream_bytes / flash2_traffic(n, causal=False).kv_stream_bytes == pytest.approx(
        (tiles + 1) / (2 * tiles)
    )
    assert t.flops == 4 * 128 * (n * (n + 1) // 2) * 32
    assert round(t.flops / 1e12, 1) == 2.2


def test_fa2_partial_tiles_are_counted_as_the_kernel_loads_them():
    # N = 200, B_r = 128, B_c = 64: tile 0 needs keys < 128 (2 key tiles), tile 1 keys < 200
    # (4 key tiles = 256, capped at 200)
    assert kv_keys_streamed(200, 128, 64, causal=True) == 128 + 200
    assert kv_keys_streamed(200, 128, 64, causal=False) == 2 * 200


def test_fa2_tile_stream_intensity_is_about_b_r():
    # each loaded K/V tile (4·B_c·d bytes) serves 4·B_r·B_c·d FLOP: B_r FLOP per byte
    t = flash2_traffic(65536, causal=False)
    assert t.stream_intensity == pytest.approx(128, rel=0.01)
    half = flash2_traffic(65536, block_rows=64, block_cols=64, causal=False)
    assert half.stream_intensity == pytest.approx(64, rel=0.01)
    assert t.compulsory_intensity > 100 * t.stream_intensity


def test_table_columns_and_order():
    table = flash_traffic_table([1024, 4096, 16384])
    assert list(table.columns) == [
        "seq_len",
        "score_matrix_bytes",
        "standard_bytes",
        "flops",
        "fa2_stream_bytes",
        "fa2_compulsory_bytes",
        "stream_intensity",
        "compulsory_intensity",
    ]
    assert (table["fa2_stream_bytes"] < table["standard_bytes"]).all()
    assert (table["fa2_compulsory_bytes"] < table["fa2_stream_bytes"]).all()
    assert table["compulsory_intensity"].is_monotonic_increasing


def test_flash_bad_input():
    with pytest.raises(ValueError, match="method='sparse'"):
        attention_hbm_elements(10, 8, "sparse")
    with pytest.raises(ValueError, match="sram_elements=16"):
        attention_hbm_elements(10, 8, "flash", 16)
    with pytest.raises(ValueError, match="seq_len=0"):
        attention_hbm_bytes(0, 8)
    with pytest.raises(ValueError, match="sram_bytes=-1"):
        attention_hbm_bytes(10, 8, method="flash", sram_bytes=-1)
    with pytest.raises(ValueError, match="n_heads=32 must be a multiple of n_kv_heads=5"):
        flash2_traffic(128, 128, 32, 5)
    with pytest.raises(ValueError, match="block_rows=0"):
        flash2_traffic(128, block_rows=0)
    with pytest.raises(ValueError, match="causal='yes'"):
        flash2_traffic(128, causal="yes")
