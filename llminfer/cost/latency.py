"""Chapter 2's latency estimates: TTFT, TPOT and E2E of a request from the roofline cost model,
and the tables behind chapter 2's plots.

Every figure goes through ``llminfer.cost.steptime.StepTimer`` — the same arithmetic the serving
simulator uses for each step — so an estimate here equals the simulator with one request in
flight.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from llminfer.cost.memory import plan_memory
from llminfer.cost.roofline import IDEAL, Cost, Efficiency, attended_pairs, bound, compute_dtype
from llminfer.cost.splitkv import kv_splits
from llminfer.cost.steptime import StepTimer
from llminfer.specs.checks import check_int
from llminfer.specs.hardware import GPU
from llminfer.specs.models import Model
from llminfer.specs.stepmodel import StepModel, get_profile
from llminfer.units import format_duration


@dataclass(frozen=True)
class Estimate:
    """Latency of ``batch`` identical requests served together, in seconds.

    ``ttft_s``: one prefill step of the whole prompt (the first output token comes from it).
    ``tpot_s``: mean of the N−1 decode steps, step k (k = 1..N−1) attending to prompt + k − 1
    cached tokens (0 when N = 1). ``e2e_s = ttft_s + (N − 1) · tpot_s``. ``*_bound``: the limit
    that sets most of that phase's time. ``ideal``: the same at 100 % of every peak.
    ``fits`` is False when the configuration could not run at all, and ``reason`` (empty when
    it fits) says why: the weights plus the KV cache of the timed batch (``batch`` sequences
    of prompt + output tokens) exceed the GPUs' memory (``plan_memory`` with vLLM's default
    ``gpu_memory_utilization=0.9``), or prompt + output exceed the model's context. The times
    of an estimate that does not fit are what the arithmetic gives, not what any GPU would do.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """

    model: str
    gpu: str
    n_gpus: int
    batch: int
    prompt_tokens: int
    output_tokens: int
    ttft_s: float
    tpot_s: float
    e2e_s: float
    prefill_bound: str
    decode_bound: str
    prefill_cost: Cost
    decode_cost: Cost
    efficiency: Efficiency | StepModel
    ideal: Estimate | None = None
    fits: bool = True
    reason: str = ""

    @property
    def tokens_per_s(self) -> float:
        """Output tokens per second per request while decoding (1 / TPOT)."""
        return 1 / self.tpot_s if self.tpot_s > 0 else math.inf

    def __str__(self) -> str:
        return (
            f"{self.model} on {self.gpu}"
            + (f" ×{self.n_gpus}" if self.n_gpus > 1 else "")
            + f", batch {self.batch}, {self.prompt_tokens:,} in / {self.output_tokens:,} out: "
            f"TTFT {format_duration(self.ttft_s)} ({self.prefill_bound}-bound), "
            f"TPOT {format_duration(self.tpot_s)} ({self.decode_bound}-bound), "
            f"E2E {format_duration(self.e2e_s)}"
            + ("" if self.fits else f"\n  ⚠ DOES NOT FIT: {self.reason}")
        )


def _estimate(timer: StepTimer, batch: int, prompt: int, output: int) -> Estimate:
    pairs = attended_pairs(prompt, 0)
    t_c, t_m, _ = timer.breakdown(batch * prompt, batch * pairs, 0, 0)
    ttft = timer(batch * prompt, batch * pairs, 0, 0)
    prefill_bound = "compute" if t_c >= t_m else "memory"
    if output > 1:
        context = batch * (prompt + np.arange(output - 1, dtype=float))
        total = float(timer.decode_steps(batch, context).sum())
        t_c, t_m, _ = timer.breakdown(0, 0, batch, context)
        compute_time = float(np.where(t_c >= t_m, t_c, 0.0).sum())
        memory_time = float(np.where(t_c >= t_m, 0.0, t_m).sum())
    else:  # no decode step: report the one that would come next
        total = 0.0
        compute_time, memory_time, _ = timer.breakdown(0, 0, batch, batch * prompt)
    tpot = total / (output - 1) if output > 1 else 0.0
    return Estimate(
        model=timer.model.name,
        gpu=timer.gpu.name,
        n_gpus=timer.n_gpus,
        batch=batch,
        prompt_tokens=prompt,
        output_tokens=output,
        ttft_s=ttft,
        tpot_s=tpot,
        e2e_s=ttft + (output - 1) * tpot,
        prefill_bound=prefill_bound,
        decode_bound="compute" if compute_time >= memory_time else "memory",
        prefill_cost=timer.cost(batch * prompt, batch * pairs, 0, 0),
        decode_cost=timer.cost(0, 0, batch, batch * prompt),
        efficiency=timer.efficiency,
    )


def feasibility(
    model: Model,
    gpu: GPU,
    prompt_tokens: int,
    output_tokens: int,
    batch: int = 1,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    n_gpus: int = 1,
) -> str:
    """Why ``batch`` requests of ``prompt_tokens`` + ``output_tokens`` could not run on
    ``n_gpus`` × ``gpu``, or "" when they could.

    ``plan_memory``'s two checks: prompt + output within ``model.max_context``, and weights,
    reserve and the KV cache of ``batch`` sequences of prompt + output tokens, at vLLM's
    default ``gpu_memory_utilization=0.9``, fit. Llama-3.1-405B on one L4 fails the second:
    its 810 GB of BF16 weights are 35 times the card's 22.5 GiB.

    Introduced in: notebooks/01_introduction.ipynb
    """
    total = check_int("prompt_tokens", prompt_tokens, 1) + check_int(
        "output_tokens", output_tokens, 1
    )
    # plan_memory checks both: the context (a server refuses a longer request) and the memory.
    plan = plan_memory(
        model,
        gpu,
        n_gpus=n_gpus,
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
        context_tokens=total,
        concurrency=check_int("batch", batch, 1),
    )
    return "" if plan.fits else plan.reason


def estimate_latency(
    model: Model,
    gpu: GPU,
    prompt_tokens: int,
    output_tokens: int,
    batch: int = 1,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    n_gpus: int = 1,
    efficiency: StepModel | Efficiency | float | tuple | None = None,
    profile: str | StepModel | None = None,
) -> Estimate:
    """TTFT, TPOT and end-to-end latency of ``batch`` identical requests, in seconds.

    Uses ``StepTimer``: one prefill step for the prompt, then ``output_tokens − 1`` decode
    steps (see ``Estimate``). ``profile`` is the engine whose step times are used: ``"vllm"``
    (split-KV decode attention, CUDA graphs; the default, unless the GPU carries its own
    ``step_model`` from ``calibrate``), ``"pytorch"`` (the plain engine the H200 steps were
    measured on) or a ``StepModel``; ``efficiency`` (an ``Efficiency`` or a number) asks for
    the plain roofline at those fractions instead. ``.ideal`` holds the
    physical floor at 100 % of the peaks. Queueing and network time are not included.
    ``.fits`` / ``.reason`` say whether the configuration could run at all (``feasibility``).
    Llama-3.1-8B in BF16 on one H100 SXM at batch 1 reads ≈ 16.06 GB per decode step, so its
    ideal TPOT is ≈ 4.79 ms (≈ 209 tokens/s).

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    check_int("prompt_tokens", prompt_tokens, 1)
    check_int("output_tokens", output_tokens, 1)
    check_int("batch", batch, 1)
    timer = StepTimer(model, gpu, n_gpus, weight_dtype, kv_dtype, efficiency, profile)
    ideal_timer = StepTimer(model, gpu, n_gpus, weight_dtype, kv_dtype, IDEAL)
    reason = feasibility(
        model, gpu, prompt_tokens, output_tokens, batch, weight_dtype, kv_dtype, n_gpus
    )
    ideal = replace(
        _estimate(ideal_timer, batch, prompt_tokens, output_tokens), fits=not reason, reason=reason
    )
    estimate = _estimate(timer, batch, prompt_tokens, output_tokens)
    return replace(estimate, ideal=ideal, fits=not reason, reason=reason)


# --- tables behind chapter 2's plots -------------------------------------------------------


def decode_batch_table(
    model: Model,
    gpu: GPU,
    batches: Sequence[int],
    context_tokens: int,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    n_gpus: int = 1,
    efficiency: StepModel | Efficiency | float | tuple | None = None,
    profile: str | StepModel | None = None,
) -> pd.DataFrame:
    """One decode step's time versus batch size, each sequence holding ``context_tokens``.

    Columns: batch, step_s, ideal_step_s, bound ("compute"/"memory" at peak rates),
    tokens_per_s (batch ÷ step, the whole GPU's output rate), fits (the weights and ``batch``
    sequences of ``context_tokens`` fit the GPUs, see ``feasibility``), reason ("" when it
    fits).

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    check_int("context_tokens", context_tokens, 1)
    timer = StepTimer(model, gpu, n_gpus, weight_dtype, kv_dtype, efficiency, profile)
    ideal = StepTimer(model, gpu, n_gpus, weight_dtype, kv_dtype, IDEAL)
    rows = []
    for b in batches:
        check_int("batch", b, 1)
        step = timer(0, 0, b, b * context_tokens)
        rows.append(
            {
                "batch": b,
                "step_s": step,
                "ideal_step_s": ideal(0, 0, b, b * context_tokens),
                "bound": bound(timer.cost(0, 0, b, b * context_tokens), gpu),
                "tokens_per_s": b / step,
                **_fits(model, gpu, context_tokens, b, weight_dtype, kv_dtype, n_gpus),
            }
        )
    return pd.DataFrame(rows)


def profile_table(
    model: Model,
    gpu: GPU,
    batches: Sequence[int],
    contexts: Sequence[int],
    profiles: Sequence[str | StepModel] = ("pytorch", "vllm"),
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    n_gpus: int = 1,
) -> pd.DataFrame:
    """One decode step under each engine profile, for every batch size × context length.

    Each of the ``batch`` sequences holds ``context_tokens`` cached tokens. Columns: batch,
    context_tokens, ``<name>_ms`` (the step in ms under each profile, named as given, or
    ``"custom"``/its position for a ``StepModel``), ``splits`` (KV splits per sequence the
    *last* profile's decode attention uses, 1 when it does not split, see
    ``llminfer.cost.splitkv.kv_splits``), ``ratio`` (first profile's step ÷ last's: how much
    faster the last engine is), ``floor_ms`` (the roofline floor), fits and reason (see
    ``feasibility``). The profiles agree where the unsplit grid already fills the SMs (large
    batches) and part at small batches with long contexts.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    if len(profiles) < 2:
        raise ValueError(f"profiles={profiles!r} must name at least two engine profiles")
    names = [p if isinstance(p, str) else f"profile{i}" for i, p in enumerate(profiles)]
    if len(set(names)) != len(names):
        raise ValueError(f"profiles={profiles!r} must not repeat a profile")
    timers = [StepTimer(model, gpu, n_gpus, weight_dtype, kv_dtype, profile=p) for p in profiles]
    ideal = StepTimer(model, gpu, n_gpus, weight_dtype, kv_dtype, IDEAL)
    last = get_profile(profiles[-1])
    rows = []
    for b in batches:
        check_int("batch", b, 1)
        for c in contexts:
            check_int("context_tokens", c, 1)
            steps = [t(0, 0, b, b * c) for t in timers]
            kv_heads = timers[-1].cost(0, 0, b, b * c).parts.kv_heads
            splits = kv_splits(b, kv_heads, b * c, gpu.sm_count or 0, last.max_kv_splits)
            rows.append(
                {
                    "batch": b,
                    "context_tokens": c,
                    **{f"{n}_ms": s * 1e3 for n, s in zip(names, steps, strict=True)},
                    "splits": int(splits) if gpu.sm_count else 1,
                    "ratio": steps[0] / steps[-1],
                    "floor_ms": ideal(0, 0, b, b * c) * 1e3,
                    **_fits(model, gpu, c, b, weight_dtype, kv_dtype, n_gpus),
                }
            )
    return pd.DataFrame(rows)


def _fits(model, gpu, context, batch, weight_dtype, kv_dtype, n_gpus) -> dict[str, object]:
    # a decode step over sequences of `context` tokens: check the model holds that context
    # and the memory holds the batch (the first output token is already in the context)
    reason = feasibility(model, gpu, max(1, context - 1), 1, batch, weight_dtype, kv_dtype, n_gpus)
    return {"fits": not reason, "reason": reason}


def prefill_table(
    model: Model,
    gpus: Sequence[GPU],
    prompt_tokens: Sequence[int],
    weight_dtype: str = "bf16",
    efficiency: StepModel | Efficiency | float | tuple | None = None,
    profile: str | StepModel | None = None,
) -> pd.DataFrame:
    """Prefill time (TTFT without queueing) for each GPU and prompt length, batch 1.

    Columns: gpu, prompt_tokens, ttft_s, ms_per_token (ttft ÷ prompt tokens, in ms: flat while
    the weights' matrix multiplies dominate, rising once attention's T² term does), bound
    ("compute"/"memory" at peak rates: short prompts are memory-bound),
    fits, reason (see ``feasibility``).

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    rows = []
    for gpu in gpus:
        timer = StepTimer(model, gpu, 1, weight_dtype, "bf16", efficiency, profile)
        ideal = StepTimer(model, gpu, 1, weight_dtype, "bf16", IDEAL)
        for p in prompt_tokens:
            pairs = attended_pairs(check_int("prompt_tokens", p, 1), 0)
            t_c, t_m, _ = ideal.breakdown(p, pairs, 0, 0)
            ttft = timer(p, pairs, 0, 0)
            rows.append(
                {
                    "gpu": gpu.name,
                    "prompt_tokens": p,
                    "ttft_s": ttft,
                    "ms_per_token": ttft / p * 1e3,
                    "bound": "compute" if t_c >= t_m else "memory",
                    **_fits(model, gpu, p + 1, 1, weight_dtype, "bf16", 1),
                }
            )
    return pd.DataFrame(rows)


def gpu_comparison(
    model: Model,
    gpus: Sequence[GPU],
    prompt_tokens: int,
    output_tokens: int,
    weight_dtype: str = "bf16",
    efficiency: StepModel | Efficiency | float | tuple | None = None,
    profile: str | StepModel | None = None,
) -> pd.DataFrame:
    """TTFT and TPOT of one request on each GPU, beside the two data-sheet numbers behind them.

    Columns: gpu, tflops (dense, the compute format used), bandwidth_tb_s, ttft_s, tpot_s,
    tokens_per_s, prefill_bound, decode_bound, fits, reason (see ``Estimate``). Indexed by
    GPU name.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    rows = []
    for gpu in gpus:
        est = estimate_latency(
            model,
            gpu,
            prompt_tokens,
            output_tokens,
            weight_dtype=weight_dtype,
            efficiency=efficiency,
            profile=profile,
        )
        rows.append(
            {
                "gpu": gpu.name,
                "tflops": gpu.peak_flops(compute_dtype(weight_dtype, gpu)) / 1e12,
                "bandwidth_tb_s": gpu.memory_bandwidth / 1e12,
                "ttft_s": est.ttft_s,
                "tpot_s": est.tpot_s,
                "tokens_per_s": est.tokens_per_s,
                "prefill_bound": est.prefill_bound,
                "decode_bound": est.decode_bound,
                "fits": est.fits,
                "reason": est.reason,
            }
        )
    return pd.DataFrame(rows).set_index("gpu")


def request_breakdown(estimate: Estimate, network_s: float = 0.0, queue_s: float = 0.0):
    """One request's time by stage, seconds: network, queue, prefill, decode.

    ``network_s`` and ``queue_s`` are inputs (the cost model cannot know them); prefill is the
    estimate's TTFT and decode its ``(N − 1) × TPOT``. The stages sum to the end-to-end time
    the user sees.

    Introduced in: notebooks/01_introduction.ipynb
    """
    for name, value in (("network_s", network_s), ("queue_s", queue_s)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise ValueError(f"{name}={value!r} must be a number of seconds >= 0")
    return {
        "network": float(network_s),
        "queue": float(queue_s),
        "prefill": estimate.ttft_s,
        "decode": estimate.e2e_s - estimate.ttft_s,
    }
