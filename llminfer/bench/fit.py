"""Fit the step model to a measured load sweep, then predict the loads that were not measured.

``sweep_server`` measures a server's p50 TTFT, TPOT and ITL at a few loads; ``fit_sweep`` finds
the step-model constants, and the server's time per request outside its engine
(``Workload.request_latency_s``, requests handled one at a time), with which ``simulate``
reproduces them (least squares on log(predicted ÷ measured), every load and metric weighing the
same), and returns a ``SweepFit`` whose ``predict`` simulates any other load; ``fit_to_sweep``
returns only the ``GPU`` carrying the fitted step model. The client's own gap between sends
(``Workload.send_gap_s``) is measured, not fitted: ``measured_send_gap_s(logs)``. Without it
and the latency, simulated users send together and their prompts share one step, where real
ones arrive 0.2-0.5 ms apart and a prompt that misses a step waits for it (see
``benchmarks/bench_fit_sweep.py`` for the measurements). ``fit_steps`` fits the same constants
to timed steps instead (e.g. ``llama-batched-bench``'s table, ``llminfer.bench.llamacpp``);
``read_sweep`` reads a saved sweep (``data/sweeps/``).

For llama.cpp's ``llama-server`` fit ``LLAMA_SERVER_FIT`` with the workload's
``request_handlers`` set to its HTTP threads (``--parallel + 4`` on a small machine): its HTTP
threads parse requests side by side, and its engine thread then sets up every queued request
(``EngineConfig.request_setup_s``) before the step, so requests sent a millisecond apart share
a prefill step (read in its ``-v`` log), where a serial hand-over would split them.

Why the peaks are fitted, not efficiencies: a ``StepModel`` holds fractions ≤ 1 of the GPU's
peak FLOP/s and bandwidth. For a GPU with a data sheet that bound is physics; for a CPU server
the only "peak" we have is what a numpy micro-benchmark reached (``measure_machine``), and
llama.cpp's kernels beat it, so a fraction fitted against it sticks at 1 and the fit fails.
The timings only ever see the product ``efficiency × peak``. So by default the fit sets the
matmul, attention and bandwidth efficiencies to 1 and fits the *effective* peaks themselves
(``"peak_flops"`` for the weights' compute format, ``"memory_bandwidth"``), unbounded above,
with the fixed cost per layer per step (``"layer_overhead_s"``), the GEMM padding
(``"matmul_pad_tokens"``) and the KV read rate as a fraction of the fitted bandwidth
(``"kv_bandwidth_efficiency"``, the per-sequence cost of decode) — five step constants, and
``fit_sweep``'s request latency a sixth, from the nine p50s (TTFT, TPOT, ITL) of a sweep of
three loads: few degrees of freedom left, so the held-out loads are the test. Add
``"single_row_matmul_factor"`` (``ONE_ROW_FIT``) for a server whose steps of one token row take
another kernel, as numpy's one-row matmul is a GEMV: time its steps first (the toy server:
``benchmarks/measure_toy_steps.py``; llama.cpp: ``llama-batched-bench``) and fit the factor only
where they show the kink, since a fit free to use it will, kink or not. The constants
trade off against each other (a longer fit can land on very different peaks with the same
predictions): read the step times they give (``step_timer`` on the fitted GPU), not the
peaks. Any other ``StepModel`` constant may be named in ``fit=`` (fractions stay fractions,
through a logit, fitted from at most 0.5 so a start at the bound can move), e.g. for a GPU
whose peaks are known.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import numpy as np
import pandas as pd

from llminfer.bench.results import load_workloads, simulate_sweep
from llminfer.cost.calibration import (
    _from_free,
    _to_free,
    levenberg_marquardt,
    read_measurements,
)
from llminfer.cost.roofline import compute_dtype
from llminfer.cost.steptime import step_timer
from llminfer.sim.engines import EngineConfig
from llminfer.sim.records import token_times
from llminfer.sim.scheduler import Scheduler
from llminfer.sim.simulate import run_scheduler
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
#: The one-row factor, to add to a fit (``fit=(*SWEEP_LATENCY_FIT, *ONE_ROW_FIT)``) for a server
#: whose one-row steps take another kernel. The toy server's numpy decode steps, timed
#: in-process on 2026-12-02 (``data/measurements/toy_small_steps.csv``): 1.43 ms for 1 sequence,
#: 2.63 ms for 2, 3.16 ms for 4, where a line in the batch fitted to them is 20 % high at 1 and
#: 15 % low at 2; llama-batched-bench's decode steps of the tiny GGUF grow in proportion to the
#: batch (no kink: leave the factor at 1). See ``benchmarks/bench_fit_sweep.py``.
ONE_ROW_FIT = ("single_row_matmul_factor",)
#: What ``fit_sweep`` fits unless told otherwise: ``SWEEP_FIT`` and the workload's
#: ``request_latency_s`` (a request's time outside the engine: HTTP, parsing, tokenizing).
SWEEP_LATENCY_FIT = (*SWEEP_FIT, "request_latency_s")
#: The metrics a sweep is fitted on, columns of ``sweep_server``'s table: p50 TTFT and TPOT,
#: and the p50 inter-token gap where the table has it (a decode step's time at that load,
#: without the prefill stalls TPOT averages in).
SWEEP_METRICS = ("ttft_s_p50", "tpot_s_p50", "itl_s_p50")
_GPU_FIT = ("peak_flops", "memory_bandwidth")
#: ``read_measurements``' columns that are a step's ``StepTimer`` arguments, in order.
STEP_ARGS = (
    "prefill_tokens",
    "prefill_attended",
    "decode_seqs",
    "decode_context_tokens",
    "prefill_cached_tokens",
)
#: Constants of the ``Workload`` rather than of the step model that a fit may name.
_WORKLOAD_FIT = ("request_latency_s",)
#: Constants of the ``EngineConfig`` a fit may name: the engine thread's time per new request.
_ENGINE_FIT = ("request_setup_s",)
#: ``SWEEP_LATENCY_FIT`` for llama.cpp's ``llama-server``: its loop sets up each new request
#: on the engine's thread before the step (``EngineConfig.request_setup_s``), and its HTTP
#: threads parse requests beside the engine.
LLAMA_SERVER_FIT = (*SWEEP_LATENCY_FIT, "request_setup_s")
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


def fit_sweep(
    sweep: pd.DataFrame,
    workload: Workload,
    model: Model,
    gpu: GPU,
    engine: EngineConfig,
    fit: Sequence[str] = SWEEP_LATENCY_FIT,
    start: str | StepModel = "pytorch",
    metrics: Sequence[str] | None = None,
    iterations: int = 40,
    tol: float = 1e-6,
    starts: int = 3,
    **simulate_kwargs,
) -> SweepFit:
    """Fit the step model (and the request latency) so ``simulate_sweep`` reproduces a
    measured sweep; returns a ``SweepFit`` whose ``predict`` simulates any other load.

    ``sweep``: ``sweep_server``'s table (a ``concurrency`` or ``rate`` column and the
    ``metrics`` columns, seconds); ``workload``: the workload it was measured with (the load
    points are rebuilt by ``load_workloads``, so pass the same ``requests_per_user`` in
    ``simulate_kwargs``; for a closed loop set its ``send_gap_s`` to the client's,
    ``measured_send_gap_s(logs)``); ``model``, ``engine`` and ``simulate_kwargs``
    (``capacity_blocks``, ``weight_dtype``, ``kv_dtype``, ``requests_per_user``) as
    ``simulate`` takes them.
    ``gpu``: a starting point only when ``"peak_flops"``/``"memory_bandwidth"`` are fitted (a
    nominal machine: ``measure_machine()``, or a data sheet; both peaks are first rescaled so
    the lightest load's TTFT and decode gap match); ``start``: the engine profile the other
    constants come from. ``fit``: ``SWEEP_FIT`` (see the module docstring: effective peaks,
    efficiencies set to 1, and the workload's ``request_latency_s``) or any ``StepModel``
    constants, with or without the two peaks and the latency, and the engine's
    ``request_setup_s`` (``LLAMA_SERVER_FIT``). ``metrics``: the p50 columns
    to fit (default ``SWEEP_METRICS``, the inter-token gap only where the table has it). The
    fit stops after ``iterations`` or once the mean squared log error is at most ``tol``;
    it runs from ``starts`` (1 to 3) starting points and keeps the best (see the code: p50s
    jump between queueing regimes, so one start can stall).

    Returns a ``SweepFit``: ``gpu`` with the fitted peaks and ``step_model`` (its ``source``
    says what it was fitted on), ``workload`` with the fitted ``request_latency_s``, ``engine``
    with the fitted ``request_setup_s``, the rms
    log error, and ``predict(concurrencies=[...])`` for other loads. Raises ValueError for a
    sweep with fewer p50s than constants to fit, or an unknown constant.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    if not isinstance(sweep, pd.DataFrame):
        raise ValueError(f"sweep={type(sweep).__name__} must be sweep_server's table")
    kinds = [k for k in ("concurrency", "rate") if k in sweep.columns]
    if len(kinds) != 1:
        raise ValueError("sweep needs exactly one load column, 'concurrency' or 'rate'")
    kind = kinds[0]
    fixed = sorted({"profile", "step_time"} & set(simulate_kwargs))
    if fixed:
        raise ValueError(
            f"{', '.join(fixed)}: the fit times every step with the profile it fits; give the "
            "profile it starts from as start="
        )
    if metrics is None:
        metrics = [m for m in SWEEP_METRICS if m in sweep.columns or m != "itl_s_p50"]
    missing = [m for m in metrics if m not in sweep.columns]
    if missing:
        raise ValueError(f"sweep lacks column(s) {', '.join(missing)}")
    names = {f.name for f in fields(StepModel)} - {"source", "execution", "max_kv_splits"}
    fit = tuple(fit)
    for name in fit:
        if name not in names and name not in (*_GPU_FIT, *_WORKLOAD_FIT, *_ENGINE_FIT):
            raise ValueError(
                f"fit={fit!r}: {name!r} is neither a StepModel constant, a peak, "
                "request_latency_s nor request_setup_s"
            )
    measured = sweep[list(metrics)].to_numpy(dtype=float)
    if not np.all(np.isfinite(measured) & (measured > 0)):
        raise ValueError(f"sweep's {', '.join(metrics)} must all be finite and > 0 seconds")
    if measured.size < len(fit):
        raise ValueError(
            f"sweep holds {measured.size} p50s, fewer than the {len(fit)} constants to fit"
        )
    dtype = compute_dtype(simulate_kwargs.get("weight_dtype", "bf16"), gpu)
    base = get_profile(start)
    if any(name in _GPU_FIT for name in fit):
        gpu, base = _effective_start(gpu, base, dtype)
    loads = sweep[kind].tolist()

    def build(x: np.ndarray) -> tuple[GPU, StepModel, Workload, EngineConfig]:
        values = dict(zip(fit, x, strict=True))
        work, eng = workload, engine
        if "request_latency_s" in values:
            work = replace(work, request_latency_s=math.exp(values.pop("request_latency_s")))
        if "request_setup_s" in values:
            eng = replace(eng, request_setup_s=math.exp(values.pop("request_setup_s")))
        return (*_build(values, gpu, base, dtype), work, eng)

    requests_per_user = simulate_kwargs.pop("requests_per_user", None)
    load_kwargs = {f"{kind}s" if kind == "rate" else "concurrencies": loads}
    if requests_per_user is not None:
        load_kwargs["requests_per_user"] = requests_per_user

    def predict(x: np.ndarray) -> np.ndarray:
        chip, sm, work, eng = build(x)
        _, points = load_workloads(work, **load_kwargs)
        kwargs = dict(simulate_kwargs, profile=sm)
        runs = (run_scheduler(point, model, chip, eng, **kwargs) for _, point in points)
        return np.array([_p50s(run, metrics) for run in runs])

    def residuals(x: np.ndarray) -> np.ndarray:
        return np.log(predict(x) / measured).ravel()

    x0 = []
    # the latencies start as small shares of the lightest load's TTFT
    ttft = float(sweep["ttft_s_p50"].min()) if "ttft_s_p50" in sweep else 1e-3
    for name in fit:
        if name == "request_latency_s":
            x0.append(math.log(workload.request_latency_s or 0.1 * ttft))
        elif name == "request_setup_s":
            x0.append(math.log(engine.request_setup_s or 0.02 * ttft))
        else:
            x0.append(_start(name, gpu, base, dtype))
    # p50s of a discrete-event run move in jumps as the constants move (a prompt joins a step
    # or misses it), so a fit from one start can stall in the wrong regime: it starts
    # ``starts`` times, the other constants as given, e times larger and e times smaller
    # (in free coordinates), each with its peaks rescaled, and keeps the best
    others = np.array([name not in _GPU_FIT for name in fit], dtype=float)
    best = None
    for shift in (0.0, 1.0, -1.0)[: max(1, starts)]:
        start_x = _rescale_peaks(
            np.array(x0) + shift * others, fit, predict, measured, list(metrics), loads
        )
        # a step of 1e-3 in log space: p50s move in small jumps; a fit within 0.1 % rms
        # (tol: mean squared log error) is as good as timings get
        x = levenberg_marquardt(residuals, start_x, iterations, h=1e-3, tol=tol * measured.size)
        r = residuals(x)
        if best is None or r @ r < best[0]:
            best = (float(r @ r), x)
        if best[0] <= tol * measured.size:
            break
    x = best[1]
    chip, sm, work, eng = build(x)
    error = float(np.sqrt(best[0] / measured.size))
    latency = (
        f"; request latency {work.request_latency_s * 1e3:.2f} ms"
        if "request_latency_s" in fit
        else ""
    )
    if "request_setup_s" in fit:
        latency += f"; request setup {eng.request_setup_s * 1e3:.2f} ms"
    sm = replace(
        sm,
        source=(
            f"fitted to a sweep of {len(loads)} loads ({kind} {', '.join(map(str, loads))}) of "
            f"{model.name}: {', '.join(fit)}; rms log error {error:.3f}{latency}"
        ),
    )
    return SweepFit(
        gpu=replace(chip, name=f"{gpu.name} (fitted to a sweep)", step_model=sm),
        workload=work,
        rms_log_error=error,
        model=model,
        engine=eng,
        simulate_kwargs=dict(simulate_kwargs)
        if requests_per_user is None
        else {**simulate_kwargs, "requests_per_user": requests_per_user},
    )


def fit_to_sweep(
    sweep: pd.DataFrame,
    workload: Workload,
    model: Model,
    gpu: GPU,
    engine: EngineConfig,
    fit: Sequence[str] = SWEEP_FIT,
    **kwargs,
) -> GPU:
    """``fit_sweep(...).gpu`` with ``fit=SWEEP_FIT`` by default (the step model only, the
    workload's ``request_latency_s`` as given; the other arguments as ``fit_sweep`` takes
    them): the GPU carrying the fitted step model, for ``simulate`` or ``simulate_sweep`` at
    other loads with the same ``workload``.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    return fit_sweep(sweep, workload, model, gpu, engine, fit, **kwargs).gpu


@dataclass(frozen=True)
class SweepFit:
    """What ``fit_sweep`` found: ``gpu`` (effective peaks and the fitted ``step_model``),
    ``workload`` (the sweep's, with the fitted ``request_latency_s``, s), ``engine`` (with the
    fitted ``request_setup_s``, s, where it was fitted), ``rms_log_error``
    (of the fitted p50s, natural log), and what ``predict`` simulates with.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """

    gpu: GPU
    workload: Workload
    rms_log_error: float
    model: Model
    engine: EngineConfig
    simulate_kwargs: dict = field(default_factory=dict)

    def predict(self, concurrencies=None, rates=None, percentiles=(50,)) -> pd.DataFrame:
        """``simulate_sweep``'s table at other loads (same columns as ``sweep_server``'s)."""
        return self.simulate_sweep(concurrencies, rates, percentiles)[0]

    def simulate_sweep(
        self, concurrencies=None, rates=None, percentiles=(50,)
    ) -> tuple[pd.DataFrame, dict]:
        """``simulate_sweep`` with the fitted constants: (table, logs), logs mapping each load
        to its simulated requests (``start_ts``, ``first_token_ts``, ``end_ts``, seconds), to
        look inside a p50 (e.g. how a load's TTFTs group by step)."""
        return simulate_sweep(
            self.workload,
            concurrencies=concurrencies,
            rates=rates,
            percentiles=percentiles,
            model=self.model,
            gpu=self.gpu,
            engine=self.engine,
            **self.simulate_kwargs,
        )


#: What ``fit_steps`` fits unless told otherwise: the effective peaks, the fixed cost per
#: layer per step, the GEMM padding and the KV read rate (as ``SWEEP_FIT``; add
#: ``ONE_ROW_FIT`` where the timed steps show a one-row kink).
STEP_FIT = SWEEP_FIT


def fit_steps(
    steps: pd.DataFrame | str,
    model: Model,
    gpu: GPU,
    fit: Sequence[str] = STEP_FIT,
    start: str | StepModel = "pytorch",
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    iterations: int = 100,
) -> GPU:
    """Fit the step model to timed steps, with the peaks themselves fitted (no bound at a
    nominal peak): ``calibrate``'s table route for a server whose "peak" is only a guess.

    ``steps``: a measurement table in ``read_measurements``' schema (a DataFrame or CSV path;
    ``llminfer.bench.llamacpp.batched_bench_steps`` turns a ``llama-batched-bench`` run into
    one). ``gpu``: the starting point (``measure_machine()``); ``fit``: ``STEP_FIT`` (the
    effective ``"peak_flops"`` and ``"memory_bandwidth"`` with every efficiency set to 1,
    ``layer_overhead_s``, ``matmul_pad_tokens``, ``kv_bandwidth_efficiency``; with
    ``ONE_ROW_FIT`` added, ``single_row_matmul_factor`` too) or any
    ``StepModel`` constants; ``start``: the profile the other constants come from. Minimises
    the squared log ratio predicted ÷ measured step time (every step weighs the same).

    Returns ``gpu`` with the fitted peaks and ``step_model``, for ``simulate``, or as the
    start of ``fit_sweep(..., fit=("request_latency_s",), start=fitted.step_model)`` to add
    what a server costs outside its steps. Raises ValueError for fewer steps than constants.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    table = read_measurements(steps)
    fit = tuple(fit)
    names = {f.name for f in fields(StepModel)} - {"source", "execution", "max_kv_splits"}
    for name in fit:
        if name not in names and name not in _GPU_FIT:
            raise ValueError(f"fit={fit!r}: {name!r} is neither a StepModel constant nor a peak")
    if len(table) < len(fit):
        raise ValueError(f"steps has {len(table)} timed steps, fewer than the {len(fit)} to fit")
    dtype = compute_dtype(weight_dtype, gpu)
    base = get_profile(start)
    if any(name in _GPU_FIT for name in fit):
        gpu, base = _effective_start(gpu, base, dtype)
    args = table[list(STEP_ARGS)].to_numpy(dtype=np.int64)
    measured = table["measured_s"].to_numpy(dtype=float)

    def residuals(x: np.ndarray) -> np.ndarray:
        chip, sm = _build(dict(zip(fit, x, strict=True)), gpu, base, dtype)
        timer = step_timer(model, chip, weight_dtype=weight_dtype, kv_dtype=kv_dtype, profile=sm)
        predicted = np.array([timer(*(int(v) for v in row)) for row in args], dtype=float)
        return np.log(predicted / measured)

    x0 = np.array([_start(name, gpu, base, dtype) for name in fit])
    x = levenberg_marquardt(residuals, x0, iterations)
    chip, sm = _build(dict(zip(fit, x, strict=True)), gpu, base, dtype)
    error = float(np.sqrt(np.mean(residuals(x) ** 2)))
    sm = replace(
        sm,
        source=f"fitted to {len(table)} timed steps of {model.name}: {', '.join(fit)}; "
        f"rms log error {error:.3f}",
    )
    return replace(chip, name=f"{gpu.name} (fitted to steps)", step_model=sm)


def _build(values: dict, gpu: GPU, base: StepModel, dtype: str) -> tuple[GPU, StepModel]:
    """The GPU and step model for free coordinates ``values`` (name → log peak, or a
    ``StepModel`` constant through ``_to_free``); consumes the peaks from ``values``."""
    values = dict(values)
    chip = gpu
    if "peak_flops" in values:
        chip = replace(chip, **{f"{dtype}_flops": math.exp(values.pop("peak_flops"))})
    if "memory_bandwidth" in values:
        chip = replace(chip, memory_bandwidth=math.exp(values.pop("memory_bandwidth")))
    return chip, replace(base, **{n: _from_free(n, v) for n, v in values.items()})


def _start(name: str, gpu: GPU, base: StepModel, dtype: str) -> float:
    """The free coordinate a fit of ``name`` starts from: the log of a peak, else the
    constant of ``base`` (a fraction from at most 0.5, so a start at the bound can move)."""
    if name == "peak_flops":
        return math.log(gpu.peak_flops(dtype))
    if name == "memory_bandwidth":
        return math.log(gpu.memory_bandwidth)
    value = getattr(base, name) or 1e-5
    return _to_free(name, min(value, 0.5) if name in _UNIT_EFFICIENCY else value)


def _p50s(run: Scheduler, metrics: Sequence[str]) -> list[float]:
    """The p50 ``metrics`` of one simulated load as ``summarize`` computes them (TTFT, TPOT
    over requests of more than one token, ITL pooled over every gap, seconds), read from the
    finished run's per-request lists (``run_scheduler``), without building a log or a table: a
    fit runs hundreds of loads."""
    start = np.asarray(run.arrival, dtype=float)
    first = np.asarray(run.first, dtype=float)
    end = np.asarray(run.end, dtype=float)
    tokens = np.asarray(run.output)
    many = tokens > 1
    values = {
        "ttft_s_p50": first - start,
        "tpot_s_p50": (end[many] - first[many]) / (tokens[many] - 1),
        "e2e_s_p50": end - start,
    }
    out = []
    for metric in metrics:
        if metric == "itl_s_p50":
            gaps = [np.diff(t) for t in token_times(run) if len(t) > 1]
            data = np.concatenate(gaps) if gaps else np.empty(0)
        elif metric in values:
            data = values[metric]
        else:
            raise ValueError(f"metrics: {metric!r} is not one of itl_s_p50, {', '.join(values)}")
        out.append(float(np.percentile(data, 50)) if data.size else math.nan)
    return out


def _rescale_peaks(x0, fit, predict, measured, metrics, loads) -> np.ndarray:
    """Move the starting peaks so the lightest load's prefill (TTFT) and decode (the gap or
    TPOT) come out as measured: a nominal machine's peaks can be 10x off a server's effective
    ones, far enough for the fit to stall on a wrong regime of queueing. Two rounds of
    scaling each peak by predicted ÷ measured; the other constants are left alone."""
    row = int(np.argmin(loads))
    pairs = (("peak_flops", "ttft_s_p50"), ("memory_bandwidth", "itl_s_p50"))
    decode = "itl_s_p50" if "itl_s_p50" in metrics else "tpot_s_p50"
    pairs = (pairs[0], ("memory_bandwidth", decode))
    moves = [(fit.index(p), metrics.index(m)) for p, m in pairs if p in fit and m in metrics]
    x = np.array(x0, dtype=float)
    for _ in range(2 if moves else 0):
        ratio = predict(x)[row] / measured[row]
        for i, j in moves:
            x[i] += math.log(ratio[j])
    return x


def read_sweep(path: str | Path) -> tuple[pd.DataFrame, dict]:
    """A saved sweep (``data/sweeps/*.csv``, as ``benchmarks/bench_fit_sweep.py --save`` writes
    it): the table (a ``concurrency`` column and p50s in seconds) and the settings its
    ``# name = value`` comment lines state (``prompt_tokens``, ``output_tokens``,
    ``requests_per_user``, ``send_gap_s``, ...: numbers as int or float, the rest as text).

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    meta = {}
    with open(path) as f:
        for line in f:
            if not line.startswith("#"):
                break
            name, sep, value = line[1:].partition("=")
            if not sep or not name.strip().isidentifier():
                continue
            value = value.strip()
            try:
                meta[name.strip()] = int(value)
            except ValueError:
                try:
                    meta[name.strip()] = float(value)
                except ValueError:
                    meta[name.strip()] = value
    return pd.read_csv(path, comment="#"), meta


def measured_send_gap_s(logs: dict) -> float:
    """The client's gap between consecutive sends (s), from a closed-loop sweep's logs
    (``sweep_server``'s second value: load → request log with ``start_ts``): at each load of
    C ≥ 2 users the first C requests go out together, so (last − first start) ÷ (C − 1) is
    the time the client takes per send; the median over the loads. 0 when no load has two
    users. Set it as ``Workload.send_gap_s`` for ``simulate``.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    gaps = []
    for users, frame in logs.items():
        users = int(users)
        start = np.sort(pd.to_numeric(frame["start_ts"], errors="coerce").dropna().to_numpy())
        if users >= 2 and len(start) >= users:
            gaps.append((start[users - 1] - start[0]) / (users - 1))
    return float(np.median(gaps)) if gaps else 0.0
