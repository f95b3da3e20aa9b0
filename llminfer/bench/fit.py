"""Fit the step model to a measured load sweep, then predict the loads that were not measured.

``sweep_server`` measures a server's p50 TTFT and TPOT at a few loads; ``fit_to_sweep`` finds
the step-model constants with which ``simulate_sweep`` reproduces them (least squares on
log(predicted ÷ measured), every load and both metrics weighing the same), and returns the
``GPU`` that carries them, for ``simulate`` or ``simulate_sweep`` at any other load.

Why the peaks are fitted, not efficiencies: a ``StepModel`` holds fractions ≤ 1 of the GPU's
peak FLOP/s and bandwidth. For a GPU with a data sheet that bound is physics; for a CPU server
the only "peak" we have is what a numpy micro-benchmark reached (``measure_machine``), and
llama.cpp's kernels beat it, so a fraction fitted against it sticks at 1 and the fit fails.
The timings only ever see the product ``efficiency × peak``. So by default the fit sets the
matmul, attention and bandwidth efficiencies to 1 and fits the *effective* peaks themselves
(``"peak_flops"`` for the weights' compute format, ``"memory_bandwidth"``), unbounded above,
with the fixed cost per layer per step (``"layer_overhead_s"``), the GEMM padding
(``"matmul_pad_tokens"``) and the KV read rate as a fraction of the fitted bandwidth
(``"kv_bandwidth_efficiency"``, the per-sequence cost of decode) — five constants from the six
p50s of a sweep of three loads: few degrees of freedom left, so the held-out loads are the
test. Any other ``StepModel`` constant may be named in ``fit=`` (fractions stay fractions,
through a logit, fitted from at most 0.5 so a start at the bound can move), e.g. for a GPU
whose peaks are known.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import fields, replace

import numpy as np
import pandas as pd

from llminfer.bench.results import simulate_sweep
from llminfer.cost.calibration import _from_free, _to_free, levenberg_marquardt
from llminfer.cost.roofline import compute_dtype
from llminfer.sim.simulate import EngineConfig
from llminfer.sim.workload import Workload
from llminfer.specs.hardware import GPU
from llminfer.specs.models import Model
from llminfer.specs.stepmodel import StepModel, get_profile

#: What ``fit_to_sweep`` fits unless told otherwise: the effective peaks, the fixed cost per
#: layer per step, the GEMM padding (how much more a batch of 8 costs than 1) and the KV read
#: rate as a fraction of the fitted bandwidth (the per-sequence cost of a decode step: on the
#: toy server and llama-server on a CPU a decode step's time grows almost in proportion to the
#: batch, which the weight-streaming terms alone cannot give).
SWEEP_FIT = (
    "peak_flops",
    "memory_bandwidth",
    "layer_overhead_s",
    "matmul_pad_tokens",
    "kv_bandwidth_efficiency",
)
#: The metrics a sweep is fitted on, columns of ``sweep_server``'s table.
SWEEP_METRICS = ("ttft_s_p50", "tpot_s_p50")
_GPU_FIT = ("peak_flops", "memory_bandwidth")
_UNIT_EFFICIENCY = {
    "matmul_efficiency": 1.0,
    "attention_efficiency": 1.0,
    "weight_bandwidth_efficiency": 1.0,
    "kv_bandwidth_efficiency": 1.0,
}


def _effective_start(gpu: GPU, start: StepModel, dtype: str) -> tuple[GPU, StepModel]:
    """The same step times with every efficiency 1: the fractions moved into the peaks (the
    attention and KV fractions are dropped: their share of a step is small on these servers)."""
    flops = gpu.peak_flops(dtype) * start.matmul_efficiency
    bandwidth = gpu.memory_bandwidth * start.weight_bandwidth_efficiency
    gpu = replace(gpu, memory_bandwidth=bandwidth, **{f"{dtype}_flops": flops})
    return gpu, replace(start, **_UNIT_EFFICIENCY)


def fit_to_sweep(
    sweep: pd.DataFrame,
    workload: Workload,
    model: Model,
    gpu: GPU,
    engine: EngineConfig,
    fit: Sequence[str] = SWEEP_FIT,
    start: str | StepModel = "pytorch",
    metrics: Sequence[str] = SWEEP_METRICS,
    iterations: int = 40,
    tol: float = 1e-6,
    **simulate_kwargs,
) -> GPU:
    """Fit the step model so ``simulate_sweep`` reproduces a measured sweep; returns the GPU.

    ``sweep``: ``sweep_server``'s table (a ``concurrency`` or ``rate`` column and the
    ``metrics`` columns, seconds); ``workload``: the workload it was measured with (the load
    points are rebuilt by ``load_workloads``, so pass the same ``requests_per_user`` in
    ``simulate_kwargs``); ``model``, ``engine`` and ``simulate_kwargs`` (``capacity_blocks``,
    ``weight_dtype``, ``kv_dtype``, ``requests_per_user``) as ``simulate`` takes them.
    ``gpu``: a starting point only when ``"peak_flops"``/``"memory_bandwidth"`` are fitted (a
    nominal machine: ``measure_machine()``, or a data sheet); ``start``: the engine profile the
    other constants come from. ``fit``: ``SWEEP_FIT`` (see the module docstring: effective
    peaks, efficiencies set to 1) or any ``StepModel`` constants, with or without the two peaks.
    The fit stops after ``iterations`` or once the mean squared log error is at most ``tol``.

    Returns ``gpu`` with the fitted peaks and ``step_model`` (its ``source`` says what it was
    fitted on): ``simulate_sweep(workload, concurrencies=[...], model=model, gpu=fitted,
    engine=engine, ...)`` then predicts other loads. Raises ValueError for a sweep with fewer
    p50s than constants to fit, or an unknown constant.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    if not isinstance(sweep, pd.DataFrame):
        raise ValueError(f"sweep={type(sweep).__name__} must be sweep_server's table")
    kinds = [k for k in ("concurrency", "rate") if k in sweep.columns]
    if len(kinds) != 1:
        raise ValueError("sweep needs exactly one load column, 'concurrency' or 'rate'")
    kind = kinds[0]
    missing = [m for m in metrics if m not in sweep.columns]
    if missing:
        raise ValueError(f"sweep lacks column(s) {', '.join(missing)}")
    names = {f.name for f in fields(StepModel)} - {"source", "execution", "max_kv_splits"}
    fit = tuple(fit)
    for name in fit:
        if name not in names and name not in _GPU_FIT:
            raise ValueError(f"fit={fit!r}: {name!r} is neither a StepModel constant nor a peak")
    measured = sweep[list(metrics)].to_numpy(dtype=float).ravel()
    if not np.all(np.isfinite(measured) & (measured > 0)):
        raise ValueError(f"sweep's {', '.join(metrics)} must all be finite and > 0 seconds")
    if len(measured) < len(fit):
        raise ValueError(
            f"sweep holds {len(measured)} p50s, fewer than the {len(fit)} constants to fit"
        )
    dtype = compute_dtype(simulate_kwargs.get("weight_dtype", "bf16"), gpu)
    base = get_profile(start)
    if any(name in _GPU_FIT for name in fit):
        gpu, base = _effective_start(gpu, base, dtype)
    loads = sweep[kind].tolist()

    def build(x: np.ndarray) -> tuple[GPU, StepModel]:
        values = dict(zip(fit, x, strict=True))
        chip = gpu
        if "peak_flops" in values:
            chip = replace(chip, **{f"{dtype}_flops": math.exp(values.pop("peak_flops"))})
        if "memory_bandwidth" in values:
            chip = replace(chip, memory_bandwidth=math.exp(values.pop("memory_bandwidth")))
        sm = replace(base, **{n: _from_free(n, v) for n, v in values.items()})
        return chip, sm

    def predict(x: np.ndarray) -> np.ndarray:
        chip, sm = build(x)
        table, _ = simulate_sweep(
            workload,
            **{f"{kind}s" if kind == "rate" else "concurrencies": loads},
            percentiles=(50,),
            model=model,
            gpu=chip,
            engine=engine,
            profile=sm,
            **simulate_kwargs,
        )
        return table[list(metrics)].to_numpy(dtype=float).ravel()

    def residuals(x: np.ndarray) -> np.ndarray:
        return np.log(predict(x) / measured)

    x0 = []
    for name in fit:
        if name == "peak_flops":
            x0.append(math.log(gpu.peak_flops(dtype)))
        elif name == "memory_bandwidth":
            x0.append(math.log(gpu.memory_bandwidth))
        else:
            value = getattr(base, name) or 1e-5
            if name in _UNIT_EFFICIENCY:  # a fraction fitted from the middle, not from its bound
                value = min(value, 0.5)
            x0.append(_to_free(name, value))
    # a step of 1e-3 in log space: p50s of a discrete-event run move in small jumps
    # and a fit within 0.1 % rms (tol: mean squared log error) is as good as timings get
    x = levenberg_marquardt(residuals, np.array(x0), iterations, h=1e-3, tol=tol * measured.size)
    chip, sm = build(x)
    error = float(np.sqrt(np.mean(residuals(x) ** 2)))
    sm = replace(
        sm,
        source=(
            f"fitted to a sweep of {len(loads)} loads ({kind} {', '.join(map(str, loads))}) of "
            f"{model.name}: {', '.join(fit)}; rms log error {error:.3f}"
        ),
    )
    return replace(chip, name=f"{gpu.name} (fitted to a sweep)", step_model=sm)
