"""How decode attention spreads one step's KV reads over the GPU's SMs — split-KV or not.

A decode attention kernel runs a grid of thread blocks. Without splitting (PyTorch's SDPA, the
measured reference engine) there is one block per (sequence, KV head): Llama-3.1-8B at batch 1
has 8 blocks for an H100's 132 SMs, and a 32k-token context is read at a fraction of the
bandwidth. Split-KV kernels ("flash-decoding": FlashAttention, FlashInfer, TensorRT-LLM's
multi-block mode, SGLang's Triton kernel) cut each sequence's context into chunks, one block
each, and add the partial results — so a small batch still fills the GPU.

``kv_splits`` follows FlashAttention 3's heuristic (``hopper/heuristics.h``, the rule vLLM's
FlashAttention backend uses): no split when ``blocks ≥ 0.8 × SMs`` or when the context is at most
four 128-token KV blocks; otherwise the smallest split count whose wave efficiency
``w / ceil(w)`` (``w = blocks × splits ÷ SMs``) reaches 85 % of the best, at most
``max_splits`` and at most the context's 128-token blocks. (FlashAttention picks among splits up
to the block count; taking the wave choice and then capping it at the block count is our
simplification, equal whenever the context is longer than the wave choice's 128-token blocks.)
``bandwidth_share`` turns the blocks into the fraction of the kernel's full bandwidth they
reach (``StepModel.attention_blocks_per_sm`` blocks per SM saturate it).
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

#: Keys per KV block of FlashAttention's split decode kernel at head_dim ≤ 128 (``block_n``).
SPLIT_BLOCK_TOKENS = 128
#: FlashAttention does not split when the grid already fills this share of the SMs.
FULL_GRID_SHARE = 0.8
#: Nor when the context is this many KV blocks or fewer ("we never split for hdim = 128 and
#: seqlen_k = 512", hopper/heuristics.h).
MIN_SPLIT_BLOCKS = 4
#: The smallest split count reaching this share of the best wave efficiency is taken.
EFFICIENCY_SHARE = 0.85


@cache
def wave_splits(blocks: int, sm_count: int, max_splits: int) -> int:
    """Splits FlashAttention's wave-efficiency rule picks for ``blocks`` unsplit thread blocks on
    ``sm_count`` SMs, at most ``max_splits`` (before the context-length cap of ``kv_splits``).

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    if blocks <= 0 or blocks >= FULL_GRID_SHARE * sm_count or max_splits <= 1:
        return 1
    limit = min(max_splits, sm_count)
    efficiency = []
    for splits in range(1, limit + 1):
        waves = blocks * splits / sm_count
        efficiency.append(waves / math.ceil(waves))
    best = max(efficiency)
    return next(s for s, e in enumerate(efficiency, 1) if e >= EFFICIENCY_SHARE * best)


def kv_splits(seqs: int, kv_heads: int, context_tokens, sm_count: int, max_splits: int):
    """Splits per sequence of a split-KV decode kernel: ``seqs`` sequences holding
    ``context_tokens`` cached tokens in all (a number or a numpy array), ``kv_heads`` KV heads
    per GPU, on ``sm_count`` SMs, at most ``max_splits`` (0 or 1: never split).

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    array = isinstance(context_tokens, np.ndarray)
    if not seqs or not max_splits or max_splits <= 1:
        return np.ones_like(context_tokens) if array else 1
    wave = wave_splits(int(seqs * kv_heads), int(sm_count), int(max_splits))
    if not array:  # the simulator's hot path: plain Python arithmetic, no numpy scalars
        kv_blocks = math.ceil(context_tokens / seqs / SPLIT_BLOCK_TOKENS)
        return 1 if kv_blocks <= MIN_SPLIT_BLOCKS else min(wave, kv_blocks)
    kv_blocks = np.ceil(context_tokens.astype(float) / seqs / SPLIT_BLOCK_TOKENS)
    return np.where(kv_blocks <= MIN_SPLIT_BLOCKS, 1, np.minimum(wave, kv_blocks))


def bandwidth_share(seqs: int, kv_heads: int, context_tokens, sm_count, sm):
    """Fraction in (0, 1] of the decode attention kernel's full bandwidth one step's KV reads
    reach under the ``StepModel`` ``sm``: its thread blocks over ``sm_count ×
    sm.attention_blocks_per_sm`` (1 when the SM count is unknown). ``context_tokens`` may be a
    numpy array (one step each).

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    blocks = seqs * kv_heads
    if not sm_count or not blocks:
        return 1.0
    saturating = sm_count * sm.attention_blocks_per_sm
    if sm.kv_split_tokens:  # the older rule: one more block per kv_split_tokens of context
        return np.minimum(1.0, kv_heads * (seqs + context_tokens / sm.kv_split_tokens) / saturating)
    if sm.max_kv_splits:
        splits = kv_splits(seqs, kv_heads, context_tokens, sm_count, sm.max_kv_splits)
        if isinstance(splits, np.ndarray):
            return np.minimum(1.0, blocks * splits / saturating)
        return min(1.0, blocks * splits / saturating)
    return min(1.0, blocks / saturating)
