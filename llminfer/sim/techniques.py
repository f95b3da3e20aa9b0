"""Chapter 5: a small quantitative model for each optimisation in the article's table.

Each function states its assumptions in its docstring. Costs of steps (prefill, decode, tensor
parallel communication) come from ``llminfer.cost.roofline``; bytes from ``llminfer.cost.memory``;
the
batching comparison comes from the simulator in ``llminfer.sim.simulate``. Speculative decoding
(``llminfer.sim.speculative``) and prefill/decode disaggregation (``llminfer.sim.disaggregation``)
have modules of their own; import them from there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from llminfer.cost.memory import (
    allocated_kv_tokens,
    kv_cache_bytes,
    kv_capacity_tokens,
    kv_utilization,
    plan_memory,
    weight_bytes,
)
from llminfer.cost.roofline import attended_pairs
from llminfer.cost.steptime import step_timer
from llminfer.sim.speculative import _check_probability
from llminfer.sim.workload import sample_lengths
from llminfer.specs.checks import check_int
from llminfer.specs.hardware import GPU
from llminfer.specs.models import Model
from llminfer.specs.stepmodel import StepModel
from llminfer.units import bytes_per_element

# --- PagedAttention: fragmentation -----------------------------------------------------------

#: KV cache memory holding actual tokens, as Kwon et al. (SOSP 2023, "Efficient Memory
#: Management for Large Language Model Serving with PagedAttention", Fig. 2) measured it:
#: Orca reserving the maximum length ("Max"), the next power of two ("Pow2"), or — an oracle
#: that knows each output's length — exactly the final length ("Oracle"); vLLM's paging.
#: The 20.4–38.2 % band runs from "reserve max" to the oracle, not across "reserve max".
PAGED_ATTENTION_PAPER_UTILIZATION = {
    "reserve max": 0.204,
    "reserve pow2": 0.268,
    "reserve final": 0.382,
    "paged 16": 0.963,
}


def kv_fragmentation(
    current_tokens: Sequence[int],
    final_tokens: Sequence[int],
    max_tokens: int,
    block_sizes: Sequence[int] = (16,),
) -> pd.DataFrame:
    """Share of allocated KV slots holding real tokens, for a snapshot of running requests.

    ``current_tokens`` are the tokens each request holds now, ``final_tokens`` what it will hold
    when done. Policies (one row each):

    - ``reserve max``: contiguous reservation of ``max_tokens`` per request (what systems did
      before PagedAttention, not knowing the output length);
    - ``reserve final``: contiguous reservation of each request's true final length (an oracle;
      still wastes the slots of tokens not generated yet);
    - ``paged b``: blocks of ``b`` tokens allocated on demand; at most b − 1 slots per request
      are wasted.

    Columns: policy, allocated_tokens, used_tokens, utilization, waste, paper_utilization
    (the PagedAttention paper's figure for the same policy, ``PAGED_ATTENTION_PAPER_UTILIZATION``;
    NaN where it reports none).

    Introduced in: notebooks/05_optimizations.ipynb
    """
    current = [int(t) for t in current_tokens]
    final = [int(t) for t in final_tokens]
    if len(current) != len(final):
        raise ValueError("current_tokens and final_tokens must have the same length")
    if any(c > f for c, f in zip(current, final, strict=True)):
        raise ValueError("current_tokens must not exceed final_tokens")
    max_tokens = check_int("max_tokens", max_tokens, 1)
    used = sum(current)
    policies: list[tuple[str, dict]] = [
        ("reserve max", {"reserve_tokens": max_tokens}),
        ("reserve final", {"reserve_tokens": final}),
    ]
    policies += [
        (f"paged {b}", {"block_size": check_int("block_sizes", b, 1)}) for b in block_sizes
    ]
    rows = []
    for name, kwargs in policies:
        allocated = allocated_kv_tokens(current, **kwargs)
        utilization = kv_utilization(current, **kwargs)
        rows.append(
            {
                "policy": name,
                "allocated_tokens": allocated,
                "used_tokens": used,
                "utilization": utilization,
                "waste": 1 - utilization,
                "paper_utilization": PAGED_ATTENTION_PAPER_UTILIZATION.get(name, math.nan),
            }
        )
    return pd.DataFrame(rows)


def fragmentation_simulation(
    prompt_tokens: object,
    output_tokens: object,
    max_tokens: int = 2048,
    block_sizes: Sequence[int] = (16,),
    n_requests: int = 10_000,
    seed: int = 0,
) -> pd.DataFrame:
    """``kv_fragmentation`` for a sampled snapshot of requests mid-generation.

    Each request draws a prompt and an output length (int, ``(low, high)`` or a distribution,
    as in ``Workload``); total length is capped at ``max_tokens``. It is caught at a uniformly
    random point of its generation: it holds its prompt plus a uniform share of its output.
    Seeded.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    n_requests = check_int("n_requests", n_requests, 1)
    prompts = sample_lengths(prompt_tokens, n_requests, seed, "prompt_tokens")
    outputs = sample_lengths(output_tokens, n_requests, seed + 1, "output_tokens")
    final = np.minimum(prompts + outputs, max_tokens)
    prompts = np.minimum(prompts, final)
    progress = np.random.default_rng(seed + 2).random(n_requests)
    current = prompts + np.floor(progress * (final - prompts + 1)).astype(np.int64)
    current = np.minimum(current, final)
    return kv_fragmentation(current.tolist(), final.tolist(), max_tokens, block_sizes)


# --- prefix caching ------------------------------------------------------------------------


def cached_prefix_tokens(
    prompt_tokens: int, shared_prefix_tokens: int, block_size: int = 16
) -> int:
    """Prompt tokens a prefix-cache hit skips: whole blocks of the shared prefix only.

    Engines cache full blocks (vLLM hashes each full block of ``block_size`` tokens), and the
    last prompt token is always recomputed to produce the first output's logits, so the
    reusable part is ``floor(min(prefix, prompt − 1) / block_size) × block_size``.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    prompt_tokens = check_int("prompt_tokens", prompt_tokens, 1)
    shared_prefix_tokens = check_int("shared_prefix_tokens", shared_prefix_tokens, 0)
    block_size = check_int("block_size", block_size, 1)
    reusable = min(shared_prefix_tokens, prompt_tokens - 1)
    return reusable // block_size * block_size


def prefix_cache_savings(
    prompt_tokens: int, shared_prefix_tokens: int, hit_rate: float, block_size: int = 16
) -> dict[str, float]:
    """Expected prefill tokens saved per request with prefix caching.

    A share ``hit_rate`` of requests finds its prefix cached and skips
    ``cached_prefix_tokens`` tokens; the others compute the whole prompt. Returns
    ``cached_tokens_per_hit``, ``saved_tokens_per_request`` and ``saved_share`` (of all prompt
    tokens).

    Introduced in: notebooks/05_optimizations.ipynb
    """
    hit_rate = _check_probability("hit_rate", hit_rate)
    per_hit = cached_prefix_tokens(prompt_tokens, shared_prefix_tokens, block_size)
    saved = hit_rate * per_hit
    return {
        "cached_tokens_per_hit": per_hit,
        "saved_tokens_per_request": saved,
        "saved_share": saved / prompt_tokens,
    }


# --- quantisation ----------------------------------------------------------------------------


def embedding_params(model: Model, tied_embeddings: bool = False) -> int:
    """Parameters of the input embedding table and the LM head: ``vocab × hidden`` each, or
    one shared matrix when ``tied_embeddings`` (Llama-3.2-1B/3B tie them; Llama-3.1-8B does
    not, see its ``config.json`` ``tie_word_embeddings``).

    Introduced in: notebooks/05_optimizations.ipynb
    """
    return (1 if tied_embeddings else 2) * model.vocab_size * model.hidden_size


#: How the weight scales of a quantised checkpoint are laid out, and the bytes each costs per
#: quantised weight:
#:
#: - ``"tensor"``: one FP32 scale per weight matrix (vLLM's ``--quantization fp8`` online
#:   quantisation, most FP8 checkpoints): a few kilobytes in all, counted as 0.
#: - ``"channel"``: one scale per output channel (llm-compressor's FP8-dynamic and INT8 W8A8
#:   checkpoints, vLLM's ``compressed-tensors`` "channel" strategy): about one 2-byte scale
#:   per ``hidden_size`` weights (a row of a matrix is hidden_size or intermediate_size long;
#:   counted as hidden_size, an upper bound — under 0.01 bit per weight either way).
#: - ``"block128"``: one FP32 scale per 128 × 128 block (DeepSeek-V3-style block FP8,
#:   ``weight_block_size = [128, 128]``): 4 bytes per 16,384 weights.
#: - ``"group128"``: one 2-byte scale per 128 consecutive weights of a row (GPTQ and AWQ
#:   INT4 with ``group_size = 128``; ``memory.weight_bytes``' default): 0.125 bit per weight.
#:   Zero-points of asymmetric schemes (AWQ) are not counted.
QUANT_SCALES = ("tensor", "channel", "block128", "group128")

#: The scale layout assumed for each narrow format when none is given: FP8 and INT8 W8A8
#: checkpoints use per-tensor or per-channel scales (``"channel"`` here), INT4 (GPTQ/AWQ,
#: W4A16) groups of 128. Group-128 scales are an INT4 convention, not an FP8 one.
DEFAULT_SCALES = {"fp8": "channel", "int8": "channel", "int4": "group128"}


def scale_bytes(n_weights: float, hidden_size: int, scales: str) -> float:
    """Bytes of quantisation scales for ``n_weights`` quantised weights laid out as
    ``scales`` (one of ``QUANT_SCALES``; ``hidden_size`` sets the row length for
    ``"channel"``).

    Introduced in: notebooks/05_optimizations.ipynb
    """
    if scales not in QUANT_SCALES:
        raise ValueError(f"scales={scales!r} must be one of {', '.join(QUANT_SCALES)}")
    hidden_size = check_int("hidden_size", hidden_size, 1)
    if scales == "tensor":
        return 0.0
    if scales == "channel":
        return math.ceil(n_weights / hidden_size) * 2.0
    if scales == "block128":
        return math.ceil(n_weights / (128 * 128)) * 4.0
    return math.ceil(n_weights / 128) * 2.0


def _scales_for(dtype: str, scales: str | None) -> str | None:
    if bytes_per_element(dtype) >= 2:
        return None
    if scales is None:
        if dtype.lower() not in DEFAULT_SCALES:
            raise ValueError(
                f"scales=None: no default scale layout for dtype={dtype!r}; pass one of "
                f"{', '.join(QUANT_SCALES)}"
            )
        return DEFAULT_SCALES[dtype.lower()]
    if scales not in QUANT_SCALES:
        raise ValueError(f"scales={scales!r} must be one of {', '.join(QUANT_SCALES)}")
    return scales


def quantized_weight_bytes(
    model: Model, dtype: str, scales: str | None = None, tied_embeddings: bool = False
) -> float:
    """Bytes of a quantised checkpoint as it is shipped: the transformer layers' weights in
    ``dtype`` plus their scales (``scales``, one of ``QUANT_SCALES``; by default
    ``DEFAULT_SCALES[dtype]``: per-channel for FP8 and INT8, groups of 128 for INT4), and the
    embedding table and LM head left in 16 bit, as GPTQ/AWQ INT4 and FP8 checkpoints do
    (quantising them costs accuracy and saves little). For a 16-bit or wider ``dtype`` this is
    ``weight_bytes(model, dtype)``.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    layout = _scales_for(dtype, scales)
    if layout is None:
        return weight_bytes(model, dtype)
    embed = embedding_params(model, tied_embeddings)
    body = model.n_params - embed
    return (
        weight_bytes(body, dtype, group_size=None)
        + scale_bytes(body, model.hidden_size, layout)
        + embed * 2
    )


def decode_bytes_per_step(
    model: Model,
    dtype: str = "bf16",
    context_tokens: int = 4096,
    batch: int = 1,
    kv_dtype: str = "bf16",
    scales: str | None = None,
    tied_embeddings: bool = False,
) -> float:
    """HBM bytes one decode step must read: every weight except the input embedding table
    (a step gathers only ``batch`` of its rows; the LM head is read whole), plus each
    sequence's KV cache of ``context_tokens``. With tied embeddings the shared matrix is read
    once, as the LM head.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    batch = check_int("batch", batch, 1)
    weights = quantized_weight_bytes(model, dtype, scales, tied_embeddings)
    table = model.vocab_size * model.hidden_size * 2  # the input table, 16 bit
    rows = batch * model.hidden_size * 2
    unread = 0 if tied_embeddings else table - rows
    return weights - unread + batch * kv_cache_bytes(model, context_tokens, kv_dtype)


def quantization_table(
    model: Model,
    gpu: GPU,
    dtypes: Sequence[str] = ("bf16", "fp8", "int8", "int4"),
    n_gpus: int = 1,
    kv_dtype: str = "bf16",
    context_tokens: int = 4096,
    scales: dict[str, str] | None = None,
    tied_embeddings: bool = False,
) -> pd.DataFrame:
    """Weight bytes, decode floor and KV capacity for each weight format.

    Assumptions: weights are ``quantized_weight_bytes`` (layers in the format with the scale
    layout ``scales[dtype]``, by default ``DEFAULT_SCALES``: per-channel for FP8 and INT8,
    groups of 128 for INT4; embedding table and LM head kept in 16 bit); the TPOT floor is one
    decode step of one sequence with ``context_tokens`` cached tokens reading
    ``decode_bytes_per_step`` at 100 % of the GPUs' bandwidth (the input embedding table is not
    streamed; at batch 1 the FLOPs take well under 1 % of that time); KV capacity is
    ``plan_memory``'s budget less the 16-bit embeddings' extra bytes. Accuracy is not modelled.
    Columns: dtype, scales (the layout, "" for 16 bit), bits_per_weight, weight_bytes (per GPU),
    tpot_floor_s, kv_capacity_tokens, freed_kv_tokens (vs the first dtype), fits.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    scales = {} if scales is None else dict(scales)
    rows = []
    for dtype in dtypes:
        layout = _scales_for(dtype, scales.get(dtype))
        total = quantized_weight_bytes(model, dtype, layout, tied_embeddings)
        plan = plan_memory(model, gpu, n_gpus, dtype, kv_dtype, context_tokens=context_tokens)
        # plan_memory counts every weight in ``dtype`` with group-128 scales
        # (memory.weight_bytes' default); correct it to this checkpoint's bytes.
        extra = (total - weight_bytes(model, dtype)) / n_gpus
        budget = max(plan.kv_budget_bytes - extra, 0.0)
        streamed = decode_bytes_per_step(
            model, dtype, context_tokens, 1, kv_dtype, layout, tied_embeddings
        )
        rows.append(
            {
                "dtype": dtype,
                "scales": layout or "",
                "bits_per_weight": 8 * total / model.n_params,
                "weight_bytes": total / n_gpus,
                "tpot_floor_s": streamed / (n_gpus * gpu.memory_bandwidth),
                "kv_capacity_tokens": kv_capacity_tokens(
                    model, budget, kv_dtype, plan.block_size, tp=n_gpus
                ),
                "fits": budget > 0,
            }
        )
    table = pd.DataFrame(rows)
    table["freed_kv_tokens"] = table["kv_capacity_tokens"] - table["kv_capacity_tokens"].iloc[0]
    return table


# --- prefix caching: TTFT ------------------------------------------------------------------


def prefix_cache_ttft(
    model: Model,
    gpu: GPU,
    prompt_tokens: int,
    shared_prefix_tokens: int,
    hit_rate: float,
    block_size: int = 16,
    n_gpus: int = 1,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    profile: str | StepModel | None = None,
) -> dict[str, float]:
    """Prefill time (TTFT without queueing) with and without a prefix-cache hit, in seconds,
    timed as the engine ``profile`` runs it (``step_timer``; default ``"vllm"``).

    A hit prefills only the uncached tail: ``prompt − cached`` new tokens attending to
    themselves and to the ``cached`` tokens read from the KV cache; a miss prefills the whole
    prompt. ``expected_s`` mixes them at ``hit_rate``. Returns ``miss_s``, ``hit_s``,
    ``expected_s``, ``cached_tokens``, ``speedup`` (miss ÷ expected).

    Introduced in: notebooks/05_optimizations.ipynb
    """
    hit_rate = _check_probability("hit_rate", hit_rate)
    cached = cached_prefix_tokens(prompt_tokens, shared_prefix_tokens, block_size)
    timer = step_timer(model, gpu, n_gpus, weight_dtype, kv_dtype, profile=profile)
    miss = timer(prompt_tokens, attended_pairs(prompt_tokens, 0), 0, 0)
    new = prompt_tokens - cached
    hit = timer(new, attended_pairs(new, cached), 0, 0, cached)
    expected = hit_rate * hit + (1 - hit_rate) * miss
    return {
        "cached_tokens": cached,
        "miss_s": miss,
        "hit_s": hit,
        "expected_s": expected,
        "speedup": miss / expected,
    }


# --- tensor parallelism ----------------------------------------------------------------------


def tensor_parallel_table(
    model: Model,
    gpu: GPU,
    n_gpus: Sequence[int] = (1, 2, 4, 8),
    batch: int = 1,
    context_tokens: int = 1024,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    profile: str | StepModel | None = None,
) -> pd.DataFrame:
    """Per-token decode time versus GPU count, over NVLink and over PCIe.

    Each GPU does 1/n of the FLOPs and reads 1/n of the weights, but every layer ends in two
    all-reduces of the activations (after attention and after the MLP) whose time does not
    shrink with n (``roofline.StepTimer`` counts them, not overlapped). The compute and memory
    terms are the roofline at the efficiencies of the engine ``profile`` (default ``"vllm"``):
    ``StepTimer.breakdown``, not the full step model's time. "PCIe" is the same GPU
    with its NVLink removed. Columns: link, n_gpus, compute_s, memory_s, comm_s, step_s,
    speedup (vs 1 GPU on that link, or the fewest GPUs listed), efficiency (speedup ÷ n
    relative to that baseline), kv_capacity_tokens, fits (the KV cache holds the timed batch:
    ``batch × context_tokens`` tokens; a step time for a batch that does not fit is not
    achievable).

    Introduced in: notebooks/05_optimizations.ipynb
    """
    batch = check_int("batch", batch, 1)
    links = {}
    if gpu.interconnect_bandwidth:
        links["NVLink"] = gpu
    if gpu.pcie_bandwidth:
        links["PCIe"] = replace(gpu, interconnect_bandwidth=None)
    if not links:
        raise ValueError(f"gpu={gpu.name!r} lists no GPU-to-GPU link")
    counts = sorted(check_int("n_gpus", n, 1) for n in n_gpus)
    rows = []
    for link, chip in links.items():
        for n in counts:
            timer = step_timer(model, chip, n, weight_dtype, kv_dtype, profile=profile)
            compute, memory, comm = timer.breakdown(0, 0, batch, batch * context_tokens)
            plan = plan_memory(
                model, chip, n, weight_dtype, kv_dtype, context_tokens=context_tokens
            )
            rows.append(
                {
                    "link": link,
                    "n_gpus": n,
                    "compute_s": compute,
                    "memory_s": memory,
                    "comm_s": comm,
                    "step_s": max(compute, memory) + comm,
                    "kv_capacity_tokens": plan.capacity_tokens,
                    # the timed step holds batch × context tokens of KV: they must fit
                    "fits": plan.capacity_tokens >= batch * context_tokens,
                }
            )
    table = pd.DataFrame(rows)
    first = table.groupby("link")["step_s"].transform("first")
    base_n = counts[0]
    table["speedup"] = first / table["step_s"]
    table["efficiency"] = table["speedup"] / (table["n_gpus"] / base_n)
    return table
