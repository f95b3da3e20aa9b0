"""FlashAttention's IO analysis: how many bytes attention moves between HBM and on-chip SRAM.

Dao et al., "FlashAttention: Fast and Memory-Efficient Exact Attention with IO-Awareness"
(arXiv:2205.14135), count HBM accesses of one attention head over N tokens with head dimension
d. Standard attention (their Algorithm 0) writes the N×N score matrix S to HBM, reads it back
for the softmax, writes P, and reads P again for P·V: Θ(N·d + N²) elements. The tiled
algorithm (Algorithm 1) keeps blocks of Q, K, V in SRAM of M elements and never stores S or
P: Θ(N²·d²/M) elements (Theorem 2), a large saving because d² is far smaller than M.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

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
    - ``"flash"`` (Algorithm 1) with SRAM of ``sram_elements`` = M: column blocks of
      ``B_c = ⌈M/4d⌉`` keys, row blocks of ``B_r = min(⌈M/4d⌉, d)`` queries. Initialise O, ℓ, m
      (``N·d + 2N`` written); load each K_j, V_j block once (``2·N·d``); for each of the
      ``T_c = ⌈N/B_c⌉`` column blocks read every Q_i, O_i, ℓ_i, m_i and write O_i, ℓ_i, m_i
      back (``3·N·d + 4·N``).

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
    default the A100's 164 KiB); only the ``"flash"`` method uses it.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    _check_positive_int("n_heads", n_heads)
    per_element = bytes_per_element(check_dtype(dtype))
    if isinstance(sram_bytes, bool) or not isinstance(sram_bytes, (int, float)) or sram_bytes <= 0:
        raise ValueError(f"sram_bytes={sram_bytes!r} must be a positive number of bytes")
    sram_elements = int(sram_bytes // per_element)
    elements = attention_hbm_elements(seq_len, head_dim, method, sram_elements)
    return elements * n_heads * per_element


def flash_traffic_table(
    seq_lens: Sequence[int],
    head_dim: int = 128,
    n_heads: int = 32,
    dtype: str = "bf16",
    sram_bytes: float = A100_SRAM_BYTES,
) -> pd.DataFrame:
    """HBM bytes of standard and tiled attention for each sequence length, and their ratio.

    Columns: seq_len, standard_bytes, flash_bytes, ratio (standard ÷ flash).

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    rows = []
    for n in seq_lens:
        standard = attention_hbm_bytes(n, head_dim, n_heads, dtype, "standard", sram_bytes)
        flash = attention_hbm_bytes(n, head_dim, n_heads, dtype, "flash", sram_bytes)
        rows.append(
            {
                "seq_len": n,
                "standard_bytes": standard,
                "flash_bytes": flash,
                "ratio": standard / flash,
            }
        )
    return pd.DataFrame(rows)
