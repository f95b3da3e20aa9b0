"""FlashAttention's IO analysis: what attention stores and moves between HBM and on-chip SRAM.

Two separate savings, in order of size:

1. **Memory.** Standard attention (Dao et al. 2022, arXiv:2205.14135, Algorithm 0) stores the
   N×N score matrix S (and the probabilities P) in HBM: for Llama-3.1-8B's 32 heads at 16,384
   tokens that is 17.2 GB per layer in BF16, more than the model's weights. FlashAttention
   computes the softmax block by block on chip and never stores S: attention's memory grows as
   N, not N² (``score_matrix_bytes``).
2. **Traffic.** The paper's Algorithm 1 (FlashAttention-1) keeps K and V blocks in SRAM and
   re-reads Q and O once per key block: Θ(N²·d²/M) elements for SRAM of M elements (Theorem 2),
   ``attention_hbm_elements(..., "flash")``. FlashAttention-2 (Dao 2023, arXiv:2307.08691),
   the kernel serving engines run, swaps the loops: one thread block owns a tile of B_r query
   rows and streams every K/V tile past it once, so Q is read and O written once and **K and V
   are streamed (N/B_r) times per head** — ``(N/B_r)·N·d·2·bytes`` per head, about half of it
   for causal attention (``flash2_traffic``).

Each K/V tile a block loads serves B_r query rows, so the tile stream's arithmetic intensity is
about B_r FLOP per byte (128 at head dimension 128): below an H100's ridge (295). What keeps
FlashAttention-2 compute-bound (50–73 % of A100 peak in its paper; 52.9 % in this package's
H200 fit) is that the query tiles of one head run at the same time and read the same K/V tiles
in the same order, so after the first block fetches a tile from HBM the others find it in L2
(one head's K and V at 16k tokens: 8.4 MB, against 50 MB of L2 on an H100). The HBM traffic
therefore lies between two bounds that ``flash2_traffic`` reports: every tile from HBM
(``stream_bytes``, no cache reuse) and every tensor once (``compulsory_bytes``, perfect reuse).
Which one a real kernel is near is a cache-behaviour question we did not measure; the timing fit
says: near the second.

Sources (flash-attention at commit 0251105a, github.com/Dao-AILab/flash-attention):
``csrc/flash_attn/src/flash_fwd_launch_template.h`` (grid ``(num_m_block, batch, heads)``; head
dimension 128 uses ``Flash_fwd_kernel_traits<128, 128, 64, ...>``, B_r = 128, B_c = 64, "good for
H100, A100"; sm86/sm89 use 128×32 non-causal, 64×64 causal), ``flash_fwd_kernel.h`` (one query
tile per block, ``for (; n_block >= n_block_min; --n_block)`` over the K/V tiles, K/V of head
``bidh / h_h_k_ratio``), ``hopper/tile_size.h`` (FlashAttention-3 on H100, head dim 128, 16-bit:
128×176, 128×128 when causal).

GQA: in FlashAttention-2's prefill kernel each block serves one *query* head and reads its
group's K/V head (``bidh / h_h_k_ratio``), so K/V are streamed once per query head; the heads of
a group share them only through L2. FlashAttention-3's ``PackGQA`` packs the group's heads into
the B_r rows of a tile, which leaves the prefill count the same (B_r rows per K/V tile either
way). It matters for decode: with one query token, FlashAttention-2 reshapes the group's heads
into the query rows (``seqlenq_ngroups_swapped`` in ``csrc/flash_attn/flash_api.cpp``) and
FlashAttention-3 packs them (``get_pack_gqa`` in ``hopper/flash_api.cpp``), so a decode step
reads each KV head's cache once, not once per query head.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import pandas as pd

from llminfer.units import bytes_per_element, check_dtype

METHODS = ("standard", "flash")
#: The FlashAttention paper's Figure 2 (left), as the paper states it: forward + backward pass
#: of attention in GPT-2 medium (sequence length 1,024, head dimension 64, 16 heads, batch 64)
#: on an A100: standard attention vs FlashAttention, GFLOP, HBM reads + writes (GB) and
#: runtime (ms). FlashAttention does more FLOPs (it recomputes attention in the backward pass)
#: yet moves 9.2x fewer bytes and runs 5.7x faster. (Dao et al. 2022, arXiv:2205.14135.)
PAPER_FIGURE_2 = {
    "standard": {"gflops": 66.6, "hbm_gb": 40.3, "runtime_ms": 41.7},
    "flash": {"gflops": 75.2, "hbm_gb": 4.4, "runtime_ms": 7.3},
}
#: Shared memory one A100 SM gives a kernel (164 KiB, CUDA compute capability 8.0).
A100_SRAM_BYTES = 164 * 1024
#: Forward-pass tiles (B_r query rows, B_c key rows) at head dimension 128, 16-bit, from the
#: flash-attention sources at commit 0251105a (files named in the module docstring).
FLASH_TILES = {
    "fa2": (128, 64),  # sm80 / sm90 (A100, H100, H200), causal or not
    "fa2-sm89-causal": (64, 64),  # sm86 / sm89 (RTX 30xx/40xx, L4, L40S)
    "fa3": (128, 176),  # FlashAttention-3 on H100, non-causal
    "fa3-causal": (128, 128),
}


def _check_positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}={value!r} must be a positive integer")
    return value


def attention_hbm_elements(
    seq_len: int, head_dim: int, method: str = "standard", sram_elements: int | None = None
) -> int:
    """HBM elements read plus written by one head's attention forward pass over ``seq_len``.

    - ``"standard"`` (Algorithm 0): read Q, K (2Nd), write S (N²); read S, write P (2N²);
      read P and V (N² + Nd), write O (Nd): ``4·N·d + 4·N²``.
    - ``"flash"`` (the paper's Algorithm 1, FlashAttention-1's loop order) with SRAM of
      ``sram_elements`` = M: column blocks of ``B_c = ⌈M/4d⌉`` keys, row blocks of
      ``B_r = min(⌈M/4d⌉, d)`` queries. Initialise O, ℓ, m (``N·d + 2N`` written); load each
      K_j, V_j block once (``2·N·d``); for each of the ``T_c = ⌈N/B_c⌉`` column blocks read
      every Q_i, O_i, ℓ_i, m_i and write O_i, ℓ_i, m_i back (``3·N·d + 4·N``).

    This is the paper's analysis, not what serving engines run: FlashAttention-2 reads Q and
    writes O once and streams K/V per query tile instead (``flash2_traffic``).

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    n = _check_positive_int("seq_len", seq_len)
    d = _check_positive_int("head_dim", head_dim)
    if method not in METHODS:
        raise ValueError(f"method={method!r} must be one of {', '.join(METHODS)}")
    if method == "standard":
        return 4 * n * d + 4 * n * n
    m = _check_positive_int("sram_elements", sram_elements)
    if m < 4 * d:
        raise ValueError(
            f"sram_elements={m} cannot hold one row each of Q, K, V and O (4 × head_dim = {4 * d})"
        )
    block_cols = math.ceil(m / (4 * d))
    column_blocks = math.ceil(n / block_cols)
    return (n * d + 2 * n) + 2 * n * d + column_blocks * (3 * n * d + 4 * n)


def attention_hbm_bytes(
    seq_len: int,
    head_dim: int,
    n_heads: int = 1,
    dtype: str = "bf16",
    method: str = "standard",
    sram_bytes: float = A100_SRAM_BYTES,
) -> float:
    """HBM bytes one attention forward pass moves for ``n_heads`` heads over ``seq_len`` tokens.

    ``attention_hbm_elements`` × heads × bytes per element. ``sram_bytes`` is the on-chip
    memory one thread block may use (one SM's shared memory, e.g. ``gpu.shared_memory_per_sm``;
    default the A100's 164 KiB); only the ``"flash"`` method (Algorithm 1) uses it.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    _check_positive_int("n_heads", n_heads)
    per_element = bytes_per_element(check_dtype(dtype))
    if isinstance(sram_bytes, bool) or not isinstance(sram_bytes, (int, float)) or sram_bytes <= 0:
        raise ValueError(f"sram_bytes={sram_bytes!r} must be a positive number of bytes")
    sram_elements = int(sram_bytes // per_element)
    elements = attention_hbm_elements(seq_len, head_dim, method, sram_elements)
    return elements * n_heads * per_element


def score_matrix_bytes(seq_len: int, n_heads: int = 1, dtype: str = "bf16") -> float:
    """Bytes of the N×N score matrix standard attention stores in HBM, ``N²·heads·bytes``.

    FlashAttention never stores it. Llama-3.1-8B (32 heads) at 16,384 tokens in BF16:
    16,384² × 32 × 2 B = 17.2 GB per layer (P, the probabilities, is as large again).

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    n = _check_positive_int("seq_len", seq_len)
    heads = _check_positive_int("n_heads", n_heads)
    return float(n * n * heads * bytes_per_element(check_dtype(dtype)))


class Flash2Traffic(NamedTuple):
    """One layer's FlashAttention-2 forward pass over one sequence (``flash2_traffic``).

    ``flops``: 4·d per attended (query, key) pair per query head (QKᵀ and P·V). Bytes:
    ``q_o_bytes`` (Q read, O written, once per query head), ``kv_stream_bytes`` (K and V tiles
    loaded into SRAM: once per query tile per query head), ``kv_once_bytes`` (each KV head's K
    and V once). ``stream_bytes`` = q_o + kv_stream (HBM traffic if no tile is ever found in
    L2); ``compulsory_bytes`` = q_o + kv_once (every tile after the first found in L2).
    Intensities in FLOP/byte.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """

    seq_len: int
    flops: float
    q_o_bytes: float
    kv_stream_bytes: float
    kv_once_bytes: float
    block_rows: int
    block_cols: int
    causal: bool

    @property
    def stream_bytes(self) -> float:
        return self.q_o_bytes + self.kv_stream_bytes

    @property
    def compulsory_bytes(self) -> float:
        return self.q_o_bytes + self.kv_once_bytes

    @property
    def stream_intensity(self) -> float:
        return self.flops / self.stream_bytes

    @property
    def compulsory_intensity(self) -> float:
        return self.flops / self.compulsory_bytes


def kv_keys_streamed(seq_len: int, block_rows: int, block_cols: int, causal: bool) -> int:
    """Key rows FlashAttention-2 loads into SRAM for one query head, summed over query tiles.

    Query tile ``i`` holds rows ``[i·B_r, min((i+1)·B_r, N))``. Without a mask it loads all N
    keys; with the causal mask it stops at the key tile holding its last row, as the kernel's
    ``n_block_max = ⌈min((i+1)·B_r, N) / B_c⌉`` does, so it loads
    ``min(n_block_max·B_c, N)`` keys. Non-causal: ``⌈N/B_r⌉·N``. Causal with B_r a multiple
    of B_c and N a multiple of B_r: ``B_r·T(T+1)/2`` for ``T = N/B_r`` tiles.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    n = _check_positive_int("seq_len", seq_len)
    br = _check_positive_int("block_rows", block_rows)
    bc = _check_positive_int("block_cols", block_cols)
    tiles = math.ceil(n / br)
    if not causal:
        return tiles * n
    return sum(min(math.ceil(min((i + 1) * br, n) / bc) * bc, n) for i in range(tiles))


def flash2_traffic(
    seq_len: int,
    head_dim: int = 128,
    n_heads: int = 32,
    n_kv_heads: int | None = None,
    block_rows: int = FLASH_TILES["fa2"][0],
    block_cols: int = FLASH_TILES["fa2"][1],
    causal: bool = True,
    dtype: str = "bf16",
) -> Flash2Traffic:
    """FLOP and HBM bytes of one layer's FlashAttention-2 forward pass over ``seq_len`` tokens.

    Each of ``n_heads`` query heads is split into ``⌈N/B_r⌉`` tiles of ``block_rows`` rows;
    each tile reads its Q rows once, writes its O rows once, and streams the K and V tiles it
    needs through SRAM (``kv_keys_streamed``). So per query head (Dao 2023's loop order):

    - Q + O: ``2·N·d·bytes``;
    - K + V streamed: ``keys_streamed·d·2·bytes`` = ``(N/B_r)·N·d·2·bytes`` without a mask,
      about half of it causal;
    - K + V once (the lower bound, per KV head): ``2·N·d·bytes``.

    FLOP: ``4·d`` per attended pair per query head, ``N²`` pairs (``N(N+1)/2`` causal); the
    masked half of the diagonal tiles is not counted. ``n_kv_heads`` defaults to ``n_heads``.
    The softmax statistics (one fp32 number per row) are left out (< 1 % at d = 128).

    Llama-3.1-8B layer (32 query / 8 KV heads, d 128) at 16,384 tokens, causal, B_r = 128: the
    K/V tile stream is 32 × 128·129/2 × 128 keys × 128 × 2 × 2 B = 17.3 GB, Q + O 0.27 GB, K/V
    once 0.07 GB; 2.2 TFLOP.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    n = _check_positive_int("seq_len", seq_len)
    d = _check_positive_int("head_dim", head_dim)
    heads = _check_positive_int("n_heads", n_heads)
    kv_heads = heads if n_kv_heads is None else _check_positive_int("n_kv_heads", n_kv_heads)
    if heads % kv_heads:
        raise ValueError(
            f"n_heads={heads} must be a multiple of n_kv_heads={kv_heads} (grouped-query attention)"
        )
    if not isinstance(causal, bool):
        raise ValueError(f"causal={causal!r} must be True or False")
    per = bytes_per_element(check_dtype(dtype))
    keys = kv_keys_streamed(n, block_rows, block_cols, causal)
    pairs = n * (n + 1) // 2 if causal else n * n
    return Flash2Traffic(
        seq_len=n,
        flops=float(4 * d * pairs * heads),
        q_o_bytes=float(2 * n * d * heads * per),
        kv_stream_bytes=float(2 * keys * d * heads * per),
        kv_once_bytes=float(2 * n * d * kv_heads * per),
        block_rows=block_rows,
        block_cols=block_cols,
        causal=causal,
    )


def flash_traffic_table(
    seq_lens: Sequence[int],
    head_dim: int = 128,
    n_heads: int = 32,
    n_kv_heads: int | None = 8,
    dtype: str = "bf16",
    causal: bool = True,
    block_rows: int = FLASH_TILES["fa2"][0],
    block_cols: int = FLASH_TILES["fa2"][1],
) -> pd.DataFrame:
    """One attention layer at each sequence length: what standard attention stores and moves,
    and FlashAttention-2's FLOP, traffic bounds and arithmetic intensity.

    Columns: seq_len; score_matrix_bytes (the N×N matrix standard attention stores, which
    FlashAttention never does); standard_bytes (Algorithm 0's HBM traffic, ``attention_hbm_
    bytes``); flops; fa2_stream_bytes and fa2_compulsory_bytes (``flash2_traffic``'s bounds);
    stream_intensity and compulsory_intensity (FLOP/byte). Defaults: Llama-3.1-8B's layer
    (32 query heads, 8 KV heads, d 128), BF16, causal, FlashAttention-2's 128×64 tiles.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    rows = []
    for n in seq_lens:
        fa2 = flash2_traffic(
            n, head_dim, n_heads, n_kv_heads, block_rows, block_cols, causal, dtype
        )
        rows.append(
            {
                "seq_len": n,
                "score_matrix_bytes": score_matrix_bytes(n, n_heads, dtype),
                "standard_bytes": attention_hbm_bytes(n, head_dim, n_heads, dtype, "standard"),
                "flops": fa2.flops,
                "fa2_stream_bytes": fa2.stream_bytes,
                "fa2_compulsory_bytes": fa2.compulsory_bytes,
                "stream_intensity": fa2.stream_intensity,
                "compulsory_intensity": fa2.compulsory_intensity,
            }
        )
    return pd.DataFrame(rows)
