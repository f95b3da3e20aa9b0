"""Chapter 2's measured step times: read them, compare them with the model, fit the model to them.

A measurement table has one row per timed engine step, in the shape of
``data/measurements/h200_llama-3.1-8b_steps.csv`` (what ``benchmarks/measure_gpu_steps.py``
writes on your own GPU):

==================  =====================================================================
``kind``            ``prefill`` (eager), ``prefill_graph``, ``decode_eager``, ``decode_graph``,
                    ``mixed_step`` (decode ``batch`` sequences + one ``prefill_chunk``-token
                    prompt chunk in one pass), or ``ceiling`` (a bandwidth/matmul test; skipped)
``batch``           sequences in the step
``tokens``          prompt tokens per sequence (prefill rows)
``context``         tokens each decoding sequence attends to, this one included (decode rows);
                    for prefill rows, cached tokens before the prompt (empty = 0)
``prefill_chunk``   tokens of the prompt chunk (mixed rows)
``ms_median``       the step's median time, milliseconds
==================  =====================================================================
"""

from __future__ import annotations

import math
from dataclasses import fields, replace

import numpy as np
import pandas as pd

from llminfer.cost.roofline import IDEAL, attended_pairs
from llminfer.cost.steptime import StepTimer
from llminfer.specs.hardware import GPU
from llminfer.specs.models import Model
from llminfer.specs.stepmodel import PROFILES, StepModel

#: Kinds of timed step a measurement row may hold (``ceiling`` rows are read and skipped).
STEP_KINDS = ("prefill", "prefill_graph", "decode_eager", "decode_graph", "mixed_step")
#: Kinds launched one kernel at a time from Python (no CUDA graph).
EAGER_KINDS = ("prefill", "decode_eager")
REQUIRED_COLUMNS = ("kind", "batch", "ms_median")
#: Constants ``calibrate`` fits unless told otherwise. ``weight_bandwidth_efficiency`` and
#: ``activation_traffic_factor`` are held: step timings alone cannot tell them apart from
#: ``layer_overhead_s`` and ``matmul_efficiency``.
DEFAULT_FIT = (
    "matmul_efficiency",
    "matmul_pad_tokens",
    "overlap_exponent",
    "kv_bandwidth_efficiency",
    "attention_blocks_per_sm",
    "attention_efficiency",
    "layer_overhead_s",
)
HOST_FIT = ("host_decode_s_per_layer", "host_prefill_s_per_layer")
_FRACTION = ("matmul_efficiency", "weight_bandwidth_efficiency", "kv_bandwidth_efficiency")
_FRACTION += ("attention_efficiency",)
_AT_LEAST_ONE = ("overlap_exponent", "activation_traffic_factor")


def _count(row: pd.Series, column: str, default: int | None = None) -> int:
    value = row.get(column, default)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        if default is None:
            raise ValueError(
                f"measurements row {row.name} (kind={row['kind']!r}) needs a value in column "
                f"{column!r}"
            )
        return default
    if not float(value).is_integer() or value < 0:
        raise ValueError(
            f"measurements row {row.name}: {column}={value!r} must be a whole number >= 0"
        )
    return int(value)


def read_measurements(measurements: pd.DataFrame | str) -> pd.DataFrame:
    """Validate a measurement table (a DataFrame or a CSV path) and return its timed steps.

    Adds the ``StepTimer`` arguments of each row (``prefill_tokens``, ``prefill_attended``,
    ``decode_seqs``, ``decode_context_tokens``, ``prefill_cached_tokens``), ``measured_s`` and
    ``eager`` (True for kinds launched without a CUDA graph). ``ceiling`` rows are dropped;
    any other unknown kind, a missing column or a bad number raises ValueError naming it.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    if isinstance(measurements, str):
        measurements = pd.read_csv(measurements)
    if not isinstance(measurements, pd.DataFrame):
        raise ValueError(
            f"measurements={type(measurements).__name__} must be a pandas DataFrame or a CSV path"
        )
    missing = [c for c in REQUIRED_COLUMNS if c not in measurements.columns]
    if missing:
        raise ValueError(
            f"measurements lacks column(s) {', '.join(missing)}; needs "
            f"{', '.join(REQUIRED_COLUMNS)} and, by kind, tokens, context, prefill_chunk"
        )
    table = measurements[measurements["kind"] != "ceiling"].copy()
    unknown = sorted(set(table["kind"]) - set(STEP_KINDS))
    if unknown:
        raise ValueError(
            f"measurements has kind(s) {unknown}; allowed: {', '.join(STEP_KINDS)}, ceiling"
        )
    if table.empty:
        raise ValueError("measurements holds no timed steps (only ceiling rows, or none)")
    args = []
    for _, row in table.iterrows():
        ms = row["ms_median"]
        if not isinstance(ms, (int, float)) or not math.isfinite(ms) or ms <= 0:
            raise ValueError(f"measurements row {row.name}: ms_median={ms!r} must be > 0")
        batch = _count(row, "batch")
        if batch < 1:
            raise ValueError(f"measurements row {row.name}: batch={batch} must be >= 1")
        kind = row["kind"]
        if kind in ("prefill", "prefill_graph"):
            tokens = _count(row, "tokens")
            cached = _count(row, "context", 0)
            if tokens < 1:
                raise ValueError(f"measurements row {row.name}: tokens={tokens} must be >= 1")
            step = (batch * tokens, batch * attended_pairs(tokens, cached), 0, 0, batch * cached)
        else:
            context = _count(row, "context")
            if context < 1:
                raise ValueError(f"measurements row {row.name}: context={context} must be >= 1")
            decode = (batch, batch * (context - 1))  # cached tokens: context minus this one
            chunk = _count(row, "prefill_chunk", 0) if kind == "mixed_step" else 0
            step = (chunk, attended_pairs(chunk, 0), *decode, 0)
        args.append(step)
    names = (
        "prefill_tokens",
        "prefill_attended",
        "decode_seqs",
        "decode_context_tokens",
        "prefill_cached_tokens",
    )
    for i, name in enumerate(names):
        table[name] = [a[i] for a in args]
    table["measured_s"] = table["ms_median"].astype(float) / 1e3
    table["eager"] = table["kind"].isin(EAGER_KINDS)
    return table.reset_index(drop=True)


def _predict(table: pd.DataFrame, model: Model, gpu: GPU, sm, weight_dtype: str) -> np.ndarray:
    graph = StepTimer(model, gpu, 1, weight_dtype, "bf16", sm)
    eager = graph
    if isinstance(sm, StepModel) and table["eager"].any():
        eager = StepTimer(model, gpu, 1, weight_dtype, "bf16", replace(sm, execution="eager"))
    steps = table[
        [
            "prefill_tokens",
            "prefill_attended",
            "decode_seqs",
            "decode_context_tokens",
            "prefill_cached_tokens",
        ]
    ].to_numpy()
    flags = table["eager"].to_numpy()
    return np.array(
        [(eager if e else graph)(*map(int, s)) for s, e in zip(steps, flags, strict=True)]
    )


def compare_measurements(
    measurements: pd.DataFrame | str,
    model: Model,
    gpu: GPU,
    step_model: StepModel | None = None,
    weight_dtype: str = "bf16",
) -> pd.DataFrame:
    """Measured step times beside the roofline floor and the realistic model, seconds.

    Columns added to ``read_measurements``: ``ideal_s`` (roofline at 100 % of the peaks),
    ``model_s`` (``step_model``, default the GPU's own or the ``"pytorch"`` profile — the plain
    engine ``benchmarks/measure_gpu_steps.py`` and the H200 reference steps time; eager rows
    timed with ``execution="eager"``), ``ratio`` (model ÷ measured) and ``floor_ratio``
    (ideal ÷ measured: the fraction of the peaks the real step reached).

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    table = read_measurements(measurements)
    sm = step_model or gpu.step_model or PROFILES["pytorch"]
    if not isinstance(sm, StepModel):
        raise ValueError(f"step_model={step_model!r} must be a StepModel or None")
    table["ideal_s"] = _predict(table, model, gpu, IDEAL, weight_dtype)
    table["model_s"] = _predict(table, model, gpu, sm, weight_dtype)
    table["ratio"] = table["model_s"] / table["measured_s"]
    table["floor_ratio"] = table["ideal_s"] / table["measured_s"]
    return table


def _to_free(name: str, value: float) -> float:
    if name in _FRACTION:
        value = min(value, 1 - 1e-6)
        return math.log(value / (1 - value))
    if name in _AT_LEAST_ONE:
        return math.log(max(value - 1, 1e-6))
    return math.log(max(value, 1e-12))


def _from_free(name: str, x: float) -> float:
    if name in _FRACTION:
        return 1 / (1 + math.exp(-x))
    if name in _AT_LEAST_ONE:
        return 1 + math.exp(x)
    return math.exp(x)


def levenberg_marquardt(
    residuals, x: np.ndarray, iterations: int = 200, h: float = 1e-6, tol: float = 0.0
) -> np.ndarray:
    """Minimise ``sum(residuals(x) ** 2)`` from ``x`` by damped Gauss-Newton (Levenberg-Marquardt)
    with a forward-difference Jacobian (step ``h``); each step changes a coordinate by at most
    0.5, so a fit on log or logit coordinates moves a constant by at most a factor e^0.5 per
    iteration. Stops when no step improves, an iteration gains under 1e-12, or the sum of
    squares is at most ``tol``. Returns the best ``x`` found.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    x = np.asarray(x, dtype=float)
    r = residuals(x)
    damping = 1e-3
    for _ in range(iterations):
        if r @ r <= tol:
            break
        jac = np.empty((len(r), len(x)))
        for j in range(len(x)):
            dx = np.zeros_like(x)
            dx[j] = h
            jac[:, j] = (residuals(x + dx) - r) / h
        a, g = jac.T @ jac, jac.T @ r
        improved = False
        while damping < 1e8:
            step = np.linalg.solve(a + damping * (np.diag(np.diag(a)) + 1e-9 * np.eye(len(x))), -g)
            step = np.clip(step, -0.5, 0.5)  # at most a factor e^0.5 per iteration: no runaway
            trial = residuals(x + step)
            if trial @ trial < r @ r:
                gain = r @ r - trial @ trial
                x, r, damping, improved = x + step, trial, damping / 3, True
                break
            damping *= 4
        if not improved or gain < 1e-12:
            break
    return x


def fit_step_model(
    table: pd.DataFrame,
    model: Model,
    gpu: GPU,
    start: StepModel,
    fit: tuple[str, ...],
    weight_dtype: str = "bf16",
    iterations: int = 200,
) -> StepModel:
    """Least-squares fit of the ``fit`` constants of ``start`` to ``read_measurements`` rows:
    minimises the squared log ratio model ÷ measured (every step weighs the same, short or
    long) by damped Gauss-Newton (Levenberg-Marquardt) on transformed constants (fractions
    through a logit, the rest through a log) so each stays in its allowed range.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    names = [f.name for f in fields(StepModel)]
    for name in fit:
        if name not in names or name in ("source", "execution"):
            raise ValueError(f"fit={fit!r}: {name!r} is not a StepModel constant")
    measured = table["measured_s"].to_numpy()

    def residuals(x: np.ndarray) -> np.ndarray:
        values = {n: _from_free(n, v) for n, v in zip(fit, x, strict=True)}
        sm = replace(start, **values)
        return np.log(_predict(table, model, gpu, sm, weight_dtype) / measured)

    x = np.array([_to_free(n, getattr(start, n)) for n in fit])
    x = levenberg_marquardt(residuals, x, iterations)
    values = {n: _from_free(n, v) for n, v in zip(fit, x, strict=True)}
    return replace(start, **values)


def calibrate(
    measurements: pd.DataFrame | str,
    model: Model,
    gpu: GPU,
    fit: tuple[str, ...] | None = None,
    start: StepModel | None = None,
    weight_dtype: str = "bf16",
) -> GPU:
    """Fit the realistic step model to your own step timings; returns ``gpu`` carrying it.

    ``measurements``: a DataFrame or CSV path in the shape ``read_measurements`` describes
    (e.g. from ``benchmarks/measure_gpu_steps.py``). ``fit``: the ``StepModel`` constants to
    fit (default ``DEFAULT_FIT``, plus the two host launch constants when there are eager rows);
    the others keep their values in ``start`` (default the GPU's own or the ``"pytorch"``
    profile: ``benchmarks/measure_gpu_steps.py`` times a plain PyTorch engine, one decode block
    per sequence and KV head; start from ``PROFILES["vllm"]`` for steps a split-KV engine
    such as vLLM ran, since a fit keeps the start's split rule). The result is
    ``gpu`` with ``step_model`` set (execution ``"graph"``), which ``estimate_latency``,
    ``StepTimer`` and ``simulate`` then use, e.g.
    ``estimate_latency(model, calibrate(df, model, gpu), 1000, 100)``.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    if not isinstance(model, Model):
        raise ValueError(f"model={model!r} must be a Model (see llminfer.get_model)")
    if not isinstance(gpu, GPU):
        raise ValueError(f"gpu={gpu!r} must be a GPU (see llminfer.get_gpu)")
    table = read_measurements(measurements)
    start = start or gpu.step_model or PROFILES["pytorch"]
    if not isinstance(start, StepModel):
        raise ValueError(f"start={start!r} must be a StepModel or None")
    if fit is None:
        fit = DEFAULT_FIT + (HOST_FIT if table["eager"].any() else ())
    fit = tuple(fit)
    if len(table) < len(fit):
        raise ValueError(
            f"measurements has {len(table)} timed steps, fewer than the {len(fit)} constants "
            f"to fit ({', '.join(fit)}); time more steps or fit fewer constants"
        )
    start = replace(start, execution="graph")
    for name in HOST_FIT:  # start above every GPU time, so the eager rows pull it down
        if name in fit and getattr(start, name) == 0:
            start = replace(start, **{name: 1e-3})
    fitted = fit_step_model(table, model, gpu, start, fit, weight_dtype)
    fitted = replace(fitted, source=f"calibrated on {len(table)} timed steps of {model.name}")
    return replace(gpu, name=f"{gpu.name} (calibrated)", step_model=fitted)
