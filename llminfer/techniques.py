"""Chapter 5: a small quantitative model for each optimisation in the article's table.

Each function states its assumptions in its docstring. Costs of steps (prefill, decode, tensor
parallel communication) come from ``llminfer.roofline``; bytes from ``llminfer.memory``; the
batching comparison comes from the simulator in ``llminfer.simulate``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from llminfer.hardware import GPU
from llminfer.memory import (
    allocated_kv_tokens,
    kv_cache_bytes,
    kv_utilization,
    plan_memory,
    weight_bytes,
)
from llminfer.models import Model
from llminfer.roofline import IDEAL, attended_pairs, step_timer
from llminfer.validate import check_int
from llminfer.workload import sample_lengths


def _check_probability(name: str, value: object, allow_one: bool = True) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not (0 <= value <= 1) or (not allow_one and value == 1):
        limit = "[0, 1]" if allow_one else "[0, 1)"
        raise ValueError(f"{name}={value!r} must be a probability in {limit}")
    return float(value)


def _check_positive(name: str, value: object, allow_zero: bool = False) -> float:
    ok = isinstance(value, (int, float, np.floating)) and not isinstance(value, bool)
    if not ok or math.isnan(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name}={value!r} must be a number {'>=' if allow_zero else '>'} 0")
    return float(value)


# --- speculative decoding ------------------------------------------------------------------


def speculative_tokens_per_step(alpha: float, gamma: int) -> float:
    """Expected tokens one verification step yields: ``(1 − α^(γ+1)) / (1 − α)``.

    Leviathan, Kalman & Matias (2023), "Fast Inference from Transformers via Speculative
    Decoding", eq. 1. Assumes each of the ``gamma`` drafted tokens is accepted independently
    with probability ``alpha``; the target model's pass always adds one token of its own (the
    correction at the first rejection, or a bonus token when all γ are accepted), so the
    count runs from 1 (α = 0) to γ + 1 (α = 1). α = 0.8, γ = 4 → 3.36 tokens.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    alpha = _check_probability("alpha", alpha)
    gamma = check_int("gamma", gamma, 0)
    if alpha == 1:
        return float(gamma + 1)
    return (1 - alpha ** (gamma + 1)) / (1 - alpha)


def speculative_speedup(alpha: float, gamma: int, cost_ratio: float) -> float:
    """Wall-time speed-up over plain decoding: ``(1 − α^(γ+1)) / ((1 − α)(γc + 1))``.

    Leviathan et al. (2023), Theorem 3.8. One verification step costs γ draft passes of
    relative cost ``cost_ratio`` = c (draft time ÷ target time per token) plus one target
    pass that checks all γ tokens in parallel, assumed to cost the same as one ordinary decode
    step (true while decode is bandwidth bound: γ + 1 tokens read the weights once). Below 1
    the technique slows generation down.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    cost_ratio = _check_positive("cost_ratio", cost_ratio, allow_zero=True)
    tokens = speculative_tokens_per_step(alpha, gamma)
    return tokens / (gamma * cost_ratio + 1)


def best_draft_length(alpha: float, cost_ratio: float, max_gamma: int = 16) -> tuple[int, float]:
    """The draft length γ in ``0..max_gamma`` with the largest speed-up, and that speed-up.

    γ = 0 means "do not speculate" (speed-up 1); it wins when α is low or the draft is dear.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    max_gamma = check_int("max_gamma", max_gamma, 0)
    speedups = [speculative_speedup(alpha, g, cost_ratio) for g in range(max_gamma + 1)]
    best = int(np.argmax(speedups))
    return best, speedups[best]


@dataclass(frozen=True)
class SpeculativeSample:
    """A Monte-Carlo estimate of tokens per verification step: mean, standard error, draws.

    Introduced in: notebooks/05_optimizations.ipynb
    """

    alpha: float
    gamma: int
    n_steps: int
    mean_tokens: float
    std_error: float
    formula: float

    @property
    def z_score(self) -> float:
        """(sample mean − formula) in standard errors; |z| < 4 means they agree."""
        if self.std_error == 0:
            return 0.0 if self.mean_tokens == self.formula else math.inf
        return (self.mean_tokens - self.formula) / self.std_error


def speculative_monte_carlo(
    alpha: float, gamma: int, n_steps: int = 100_000, seed: int = 0
) -> SpeculativeSample:
    """Simulate ``n_steps`` verification steps and count the tokens each yields.

    Each drafted token is accepted with probability ``alpha`` (independently, as the formula
    assumes) until the first rejection; the target adds one token, so a step yields
    (accepted prefix length) + 1. Seeded; the mean should match
    ``speculative_tokens_per_step`` within a few standard errors.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    alpha = _check_probability("alpha", alpha)
    gamma = check_int("gamma", gamma, 0)
    n_steps = check_int("n_steps", n_steps, 2)
    rng = np.random.default_rng(seed)
    accepted = rng.random((n_steps, gamma)) < alpha
    # Length of the run of acceptances from the start = number of leading True values.
    prefix = np.cumprod(accepted, axis=1).sum(axis=1) if gamma else np.zeros(n_steps)
    tokens = prefix + 1
    return SpeculativeSample(
        alpha=alpha,
        gamma=gamma,
        n_steps=n_steps,
        mean_tokens=float(tokens.mean()),
        std_error=float(tokens.std(ddof=1) / math.sqrt(n_steps)),
        formula=speculative_tokens_per_step(alpha, gamma),
    )


def speculative_table(
    alphas: Sequence[float], cost_ratio: float, gammas: Sequence[int] = range(0, 9)
) -> pd.DataFrame:
    """Tokens per step and speed-up for each (α, γ): columns alpha, gamma, tokens_per_step,
    speedup.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    rows = [
        {
            "alpha": a,
            "gamma": g,
            "tokens_per_step": speculative_tokens_per_step(a, g),
            "speedup": speculative_speedup(a, g, cost_ratio),
        }
        for a in alphas
        for g in gammas
    ]
    return pd.DataFrame(rows)


# --- PagedAttention: fragmentation -----------------------------------------------------------


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

    Columns: policy, allocated_tokens, used_tokens, utilization, waste.

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


# --- prefill/decode disaggregation --------------------------------------------------------


def kv_transfer_seconds(
    model: Model,
    prompt_tokens: int,
    link_bandwidth: float,
    kv_dtype: str = "bf16",
    n_gpus: int = 1,
) -> float:
    """Seconds to move one request's KV cache from a prefill GPU to a decode GPU.

    ``kv_cache_bytes(model, prompt_tokens, tp=n_gpus)`` per GPU over a link of
    ``link_bandwidth`` bytes/s per direction per GPU (each tensor-parallel shard moves over its
    own link, in parallel). Ignores latency and protocol overhead, so it is a lower bound.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    link_bandwidth = _check_positive("link_bandwidth", link_bandwidth)
    return kv_cache_bytes(model, prompt_tokens, kv_dtype, tp=n_gpus) / link_bandwidth


def disaggregation_table(
    model: Model,
    gpu: GPU,
    prompt_tokens: Sequence[int],
    links: dict[str, float] | None = None,
    n_gpus: int = 1,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
) -> pd.DataFrame:
    """KV transfer time against prefill time, per prompt length and link.

    Separating prefill and decode onto different GPUs removes prefill's interference with
    decoding (a colocated step that prefills a prompt stalls every decoding sequence for
    ``prefill_s``), at the price of shipping the prompt's KV cache (``kv_transfer_seconds``)
    before the first decode. ``links`` maps a name to bytes/s per direction; by default the
    GPU's own interconnect and PCIe. Columns: prompt_tokens, link, kv_bytes, transfer_s,
    prefill_s, transfer_over_prefill (below 1: the copy is cheaper than the prefill stall it
    removes from the decode GPU).

    Introduced in: notebooks/05_optimizations.ipynb
    """
    if links is None:
        links = {
            name: bw
            for name, bw in (
                ("NVLink", gpu.interconnect_bandwidth),
                ("PCIe", gpu.pcie_bandwidth),
            )
            if bw
        }
    if not links:
        raise ValueError(f"links: {gpu.name} lists no link; pass links={{'name': bytes_per_s}}")
    timer = step_timer(model, gpu, n_gpus, weight_dtype, kv_dtype)
    rows = []
    for prompt in prompt_tokens:
        prompt = check_int("prompt_tokens", prompt, 1)
        prefill = timer(prompt, attended_pairs(prompt, 0), 0, 0)
        kv = kv_cache_bytes(model, prompt, kv_dtype, tp=n_gpus)
        for name, bandwidth in links.items():
            transfer = kv_transfer_seconds(model, prompt, bandwidth, kv_dtype, n_gpus)
            rows.append(
                {
                    "prompt_tokens": prompt,
                    "link": name,
                    "kv_bytes": kv,
                    "transfer_s": transfer,
                    "prefill_s": prefill,
                    "transfer_over_prefill": transfer / prefill,
                }
            )
    return pd.DataFrame(rows)


# --- quantisation ----------------------------------------------------------------------------


def quantization_table(
    model: Model,
    gpu: GPU,
    dtypes: Sequence[str] = ("bf16", "fp8", "int8", "int4"),
    n_gpus: int = 1,
    kv_dtype: str = "bf16",
    context_tokens: int = 4096,
    group_size: int | None = 128,
) -> pd.DataFrame:
    """Weight bytes, decode floor and KV capacity for each weight format.

    Assumptions: weights are ``memory.weight_bytes`` (int4/int8/fp8 carry one 2-byte scale per
    ``group_size`` weights); the TPOT floor is one decode step of one sequence with
    ``context_tokens`` cached tokens at 100 % of the GPU's bandwidth and FLOP/s
    (``roofline.step_timer`` with ideal efficiency), so fewer weight bytes mean a lower floor;
    KV capacity is ``plan_memory``'s, so the bytes weights give up become KV cache. Accuracy is
    not modelled. Columns: dtype, bits_per_weight, weight_bytes (per GPU), tpot_floor_s,
    kv_capacity_tokens, freed_kv_tokens (vs the first dtype), fits.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    rows = []
    for dtype in dtypes:
        total = weight_bytes(model, dtype, group_size)
        plan = plan_memory(model, gpu, n_gpus, dtype, kv_dtype, context_tokens=context_tokens)
        timer = step_timer(model, gpu, n_gpus, dtype, kv_dtype, efficiency=IDEAL)
        rows.append(
            {
                "dtype": dtype,
                "bits_per_weight": 8 * total / model.n_params,
                "weight_bytes": total / n_gpus,
                "tpot_floor_s": timer(0, 0, 1, context_tokens),
                "kv_capacity_tokens": plan.capacity_tokens,
                "fits": plan.kv_budget_bytes > 0,
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
) -> dict[str, float]:
    """Prefill time (TTFT without queueing) with and without a prefix-cache hit, in seconds.

    A hit prefills only the uncached tail: ``prompt − cached`` new tokens attending to
    themselves and to the ``cached`` tokens read from the KV cache; a miss prefills the whole
    prompt. ``expected_s`` mixes them at ``hit_rate``. Returns ``miss_s``, ``hit_s``,
    ``expected_s``, ``cached_tokens``, ``speedup`` (miss ÷ expected).

    Introduced in: notebooks/05_optimizations.ipynb
    """
    hit_rate = _check_probability("hit_rate", hit_rate)
    cached = cached_prefix_tokens(prompt_tokens, shared_prefix_tokens, block_size)
    timer = step_timer(model, gpu, n_gpus, weight_dtype, kv_dtype)
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
) -> pd.DataFrame:
    """Per-token decode time versus GPU count, over NVLink and over PCIe.

    Each GPU does 1/n of the FLOPs and reads 1/n of the weights, but every layer ends in two
    all-reduces of the activations (after attention and after the MLP) whose time does not
    shrink with n (``roofline.StepTimer`` counts them, not overlapped). "PCIe" is the same GPU
    with its NVLink removed. Columns: link, n_gpus, compute_s, memory_s, comm_s, step_s,
    speedup (vs 1 GPU on that link, or the fewest GPUs listed), efficiency (speedup ÷ n
    relative to that baseline), fits (weights leave KV room).

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
            timer = step_timer(model, chip, n, weight_dtype, kv_dtype)
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
                    "fits": plan.kv_budget_bytes > 0,
                }
            )
    table = pd.DataFrame(rows)
    first = table.groupby("link")["step_s"].transform("first")
    base_n = counts[0]
    table["speedup"] = first / table["step_s"]
    table["efficiency"] = table["speedup"] / (table["n_gpus"] / base_n)
    return table
