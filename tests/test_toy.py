"""The numpy toy transformer: cache equivalence, cache bytes, parameter count, FlashAttention IO."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llminfer import get_gpu, kv_cache_bytes
from llminfer.cost.flash import attention_hbm_bytes, attention_hbm_elements, flash_traffic_table
from llminfer.cost.toy import ToyModel


def test_greedy_tokens_are_the_same_with_and_without_the_cache():
    toy = ToyModel(n_layers=2, hidden_size=64, n_heads=4, n_kv_heads=2, vocab_size=256, seed=3)
    prompt = [5, 17, 42, 99, 7, 1]
    cached = toy.generate(prompt, 24)
    uncached = toy.generate(prompt, 24, use_cache=False)
    assert cached.tokens == uncached.tokens
    assert len(cached.tokens) == 24 and len(cached.decode_s) == 23
    assert uncached.cache_bytes == 0


def test_cached_logits_match_a_full_forward_pass():
    toy = ToyModel(seed=1)
    ids = [3, 1, 4, 1, 5, 9, 2, 6]
    full = toy.forward(ids)
    cache = toy.new_cache(len(ids))
    toy.forward(ids[:5], 0, cache)
    step = toy.forward(ids[5:], 5, cache)
    np.testing.assert_allclose(step, full[5:], rtol=1e-4, atol=1e-4)


@settings(max_examples=15, deadline=None)
@given(
    n_layers=st.integers(1, 3),
    n_kv_heads=st.sampled_from([1, 2, 4]),
    prompt_len=st.integers(1, 12),
    n_new=st.integers(1, 6),
    dtype=st.sampled_from(["float32", "float16"]),
)
def test_cache_bytes_equal_kv_cache_bytes_exactly(n_layers, n_kv_heads, prompt_len, n_new, dtype):
    toy = ToyModel(n_layers, 32, 4, n_kv_heads, vocab_size=64, dtype=dtype)
    out = toy.generate(list(range(prompt_len)), n_new)
    kv_dtype = {"float32": "fp32", "float16": "fp16"}[dtype]
    assert out.cache_tokens == prompt_len + n_new - 1
    assert out.cache_bytes == kv_cache_bytes(toy.config, out.cache_tokens, kv_dtype)


def test_config_matches_the_real_arrays():
    toy = ToyModel(n_layers=3, hidden_size=96, n_heads=6, n_kv_heads=2, vocab_size=500)
    assert toy.config.n_params == toy.n_params
    assert toy.config.attention == "GQA" and toy.config.head_dim == 16
    assert toy.weight_bytes == toy.n_params * 4


def test_same_seed_same_weights_and_tokens():
    a, b = ToyModel(seed=7), ToyModel(seed=7)
    assert a.generate([1, 2, 3], 5).tokens == b.generate([1, 2, 3], 5).tokens
    assert not np.array_equal(a.lm_head, ToyModel(seed=8).lm_head)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"prompt_ids": []}, "prompt_ids"),
        ({"prompt_ids": [1, 999]}, "prompt_ids contains 999"),
        ({"n_new": 0}, "n_new=0"),
        ({"n_new": 5000}, "max_context"),
    ],
)
def test_generate_rejects_bad_input(kwargs, name):
    args = {"prompt_ids": [1, 2], "n_new": 3, **kwargs}
    with pytest.raises(ValueError, match=name):
        ToyModel().generate(**args)


def test_toy_rejects_unknown_dtype():
    with pytest.raises(ValueError, match="dtype='float64'"):
        ToyModel(dtype="float64")


# --- FlashAttention IO (Dao et al. 2022, arXiv:2205.14135) ------------------------------------


def test_standard_attention_moves_4nd_plus_4n2_elements():
    assert attention_hbm_elements(1024, 64, "standard") == 4 * 1024 * 64 + 4 * 1024**2


def test_flash_attention_count_follows_algorithm_1():
    n, d, m = 1024, 64, 32 * 1024
    block = -(-m // (4 * d))  # B_c = ceil(M / 4d) = 128
    column_blocks = -(-n // block)  # T_c = 8
    expected = n * d + 2 * n + 2 * n * d + column_blocks * (3 * n * d + 4 * n)
    assert attention_hbm_elements(n, d, "flash", m) == expected


def test_flash_traffic_scales_as_n2_d2_over_m():
    n, d = 65536, 128
    small, large = (attention_hbm_elements(n, d, "flash", m) for m in (64 * 1024, 128 * 1024))
    assert small / large == pytest.approx(2, rel=0.05)  # twice the SRAM, half the passes
    quadrupled = attention_hbm_elements(2 * n, d, "flash", 64 * 1024)
    assert quadrupled / small == pytest.approx(4, rel=0.05)


def test_flash_moves_fewer_bytes_than_standard_for_long_sequences():
    h100 = get_gpu("h100-sxm")
    table = flash_traffic_table([512, 4096, 32768], sram_bytes=h100.shared_memory_per_sm)
    assert (table["ratio"] > 1).all()
    assert table["ratio"].is_monotonic_increasing
    assert attention_hbm_bytes(4096, 128, 32, "bf16", "standard") == 2 * 32 * (
        4 * 4096 * 128 + 4 * 4096**2
    )


def test_flash_bad_input():
    with pytest.raises(ValueError, match="method='sparse'"):
        attention_hbm_elements(10, 8, "sparse")
    with pytest.raises(ValueError, match="sram_elements=16"):
        attention_hbm_elements(10, 8, "flash", 16)
    with pytest.raises(ValueError, match="seq_len=0"):
        attention_hbm_bytes(0, 8)
    with pytest.raises(ValueError, match="sram_bytes=-1"):
        attention_hbm_bytes(10, 8, method="flash", sram_bytes=-1)
