"""Chapters 3 and 5: load sweeps and goodput over the simulator (``llminfer.sim.simulate``).

One simulation serves one workload at one load. The questions of chapter 3 ("how much load
does this server take before p99 TTFT breaks its target?") and chapter 5 ("what does chunked
prefill buy at this load?") need many runs side by side:

- ``sweep`` serves the same drawn requests at each request rate (open loop) or concurrency
  (closed loop): one table row per load with the ``summarize`` fields, preemptions, mean decode
  batch and pooled inter-token latency (``itl_stats``);
- ``compare_engines`` serves one workload with each of several ``EngineConfig``s;
- on a sweep table, ``meets_slo_table`` marks the rows whose percentiles meet an SLO,
  ``best_load`` picks the highest load that does, ``knee`` finds where throughput stops rising,
  and ``max_goodput`` runs the sweep and picks in one call (a ``Goodput``).

A sweep is deterministic and takes seconds, and a kernel often asks for the same one twice
(notebook 03 draws its table, then its exercise 03.5 reads the same sweep): ``sweep`` keeps the
last ``SWEEP_CACHE_SIZE`` tables it computed from arguments that are plain values (frozen specs,
numbers, strings; a profile's name stands for the ``StepModel`` it names at the time) and hands
out copies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from llminfer.sim.engines import EngineConfig
from llminfer.sim.runcache import RunCache, Uncacheable, key_of, profile_key
from llminfer.sim.simulate import SimResult, simulate
from llminfer.sim.workload import Workload
from llminfer.specs.hardware import GPU
from llminfer.specs.models import Model


def meets_slo_table(table: pd.DataFrame, slo: dict[str, float], percentile: float = 99):
    """Boolean per sweep row: the ``percentile`` of every SLO metric is within its target
    (a metric with no value, e.g. TPOT when every output is one token, passes).

    Introduced in: notebooks/03_metrics.ipynb
    """
    stat = f"p{percentile:g}"
    passes = np.ones(len(table), dtype=bool)
    for metric, target in slo.items():
        column = f"{metric}_{stat}"
        if column not in table.columns:
            raise ValueError(f"slo key {metric!r} at percentile={percentile!r}: no column {column}")
        values = table[column].to_numpy(dtype=float)
        passes &= np.nan_to_num(values, nan=0.0) <= target
    return passes


def load_column(table: pd.DataFrame) -> str:
    """``"rate"`` or ``"concurrency"``: which load a sweep table varies.

    Introduced in: notebooks/03_metrics.ipynb
    """
    for kind in ("rate", "concurrency"):
        if kind in table.columns:
            return kind
    raise ValueError("table has neither a 'rate' nor a 'concurrency' column; pass a sweep()")


def best_load(table: pd.DataFrame, slo: dict[str, float], percentile: float = 99) -> float | None:
    """The highest load of a ``sweep`` table that meets ``slo`` at ``percentile``, or None.

    Introduced in: notebooks/03_metrics.ipynb
    """
    kind = load_column(table)
    good = table.loc[meets_slo_table(table, slo, percentile), kind]
    return None if good.empty else float(good.max())


def knee(table: pd.DataFrame, share: float = 0.9) -> float:
    """The knee of a throughput curve: the lowest load of a ``sweep`` table whose output TPS
    reaches ``share`` (default 90 %) of the highest output TPS in the table. Beyond it, more
    load buys little throughput and mostly adds latency.

    Introduced in: notebooks/03_metrics.ipynb
    """
    if not 0 < share <= 1:
        raise ValueError(f"share={share!r} must be in (0, 1]")
    kind = load_column(table)
    ordered = table.sort_values(kind)
    reached = ordered["output_tps"] >= share * ordered["output_tps"].max()
    return float(ordered.loc[reached, kind].iloc[0])


def itl_stats(log) -> dict[str, float]:
    """Inter-token latency of a log with ``token_ts`` (a simulated one): ``itl_s_mean``,
    ``itl_s_p50``, ``itl_s_p99`` (seconds) over every gap between consecutive tokens of every
    successful request, pooled (vLLM's ITL definition); NaN when no request has two tokens.
    Where a prefill stalls decodes, the stall is one long gap: p99 ITL shows it, TPOT (a
    request's mean gap) dilutes it.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    from llminfer.logs.definitions import compare_definitions

    row = compare_definitions(log).loc["vllm_itl"]
    return {"itl_s_mean": row.mean_s, "itl_s_p50": row.p50_s, "itl_s_p99": row.p99_s}


#: What a sweep row summarises: the whole finite run, or only its arrival window.
WINDOWS = ("run", "arrivals")


def _check_window(window: str) -> str:
    if window not in WINDOWS:
        raise ValueError(f"window={window!r} must be one of {', '.join(map(repr, WINDOWS))}")
    return window


def _summary_row(result: SimResult, percentiles, slo=None, window: str = "run") -> dict:
    """One sweep row's figures: ``summarize`` of the whole run or of its arrival window, the
    decode batch over the same steps, and how much of the run is drain."""
    phases = result.phases()
    if window == "arrivals":
        summary = result.summary(window="arrivals", percentiles=percentiles, slo=slo).to_dict()
        mean_batch = phases.loc["arrivals", "decode_batch_mean"]
    else:
        summary = result.summary(percentiles=percentiles, slo=slo).to_dict()
        decode = result.steps.loc[result.steps.decode_seqs > 0, "decode_seqs"]
        mean_batch = float(decode.mean()) if len(decode) else 0.0
    if "itl_s_p99" not in summary:  # summarize gains ITL keys with the importers' work
        summary.update(itl_stats(result.log))
    return {
        "mean_batch": float(mean_batch),
        "drain_step_share": float(phases.loc["drain", "steps"] / len(result.steps)),
        "prefill_time_share": float(phases.loc["arrivals", "prefill_time_share"]),
        **summary,
    }


def _loads(rates, concurrencies) -> tuple[str, list]:
    if (rates is None) == (concurrencies is None):
        raise ValueError("give exactly one of rates (open loop) or concurrencies (closed loop)")
    kind, values = ("rate", rates) if rates is not None else ("concurrency", concurrencies)
    values = list(values)
    if not values:
        raise ValueError(f"{kind} list is empty; give at least one load")
    return kind, values


def sweep(
    workload: Workload,
    model: Model,
    gpu: GPU,
    rates: Sequence[float] | None = None,
    concurrencies: Sequence[int] | None = None,
    engine: EngineConfig = EngineConfig(),
    percentiles: Sequence[float] = (50, 90, 99),
    slo: dict[str, float] | None = None,
    window: str = "run",
    **simulate_kwargs,
) -> pd.DataFrame:
    """Simulate ``workload`` at each request rate (open loop) or concurrency (closed loop).

    One row per load: the load (``rate`` or ``concurrency`` column), ``preemptions``,
    ``mean_batch`` (sequences per decode step), every field of
    ``llminfer.logs.summary.summarize(...).to_dict()`` (rps, output_tps, ttft_s_p99, ...),
    ``itl_s_mean/p50/p99`` (``itl_stats``), ``drain_step_share`` (the share of the run's steps
    that come after the last arrival) and ``prefill_time_share`` (the share of the arrival
    window's step time spent in steps that prefill). The same seed draws the same lengths at
    every load, so rows differ only in load.

    ``window`` says what the figures describe. ``"run"`` (the default): the whole finite run,
    first arrival → last end, drain included — what a benchmark tool reports for the run.
    ``"arrivals"``: only the arrival window (``SimResult.phases``; the requests completed and
    tokens emitted before the last arrival, the decode batch of the steps started then) — the
    server under its offered load, the figures to quote as its steady state. Above capacity a
    run spends most of its steps in the drain, where batches shrink and no prefill competes,
    so the two differ widely there.

    Introduced in: notebooks/03_metrics.ipynb
    """
    _check_window(window)
    kind, values = _loads(rates, concurrencies)
    if hasattr(percentiles, "__iter__") and not isinstance(percentiles, (str, bytes)):
        percentiles = tuple(percentiles)  # once: a generator would be spent on the cache's key
    key = _sweep_key(
        workload, model, gpu, kind, values, engine, percentiles, slo, window, simulate_kwargs
    )
    cached = _SWEEPS.get(key)
    if cached is not None:
        return cached
    rows = []
    for value in values:
        if kind == "rate":
            point = replace(workload, rate=value, concurrency=None)
        else:
            point = replace(workload, rate=None, concurrency=value)
        result = simulate(point, model, gpu, engine, **simulate_kwargs)
        summary = _summary_row(result, percentiles, slo, window)
        rows.append({kind: value, "preemptions": result.preemptions, **summary})
    table = pd.DataFrame(rows)
    _SWEEPS.put(key, table)
    return table


#: How many sweep tables ``sweep`` keeps (the last ones computed; each a few kB).
SWEEP_CACHE_SIZE = 8
_SWEEPS: RunCache[pd.DataFrame] = RunCache(SWEEP_CACHE_SIZE, pd.DataFrame.copy)


def _sweep_key(workload, model, gpu, kind, values, engine, percentiles, slo, window, extra):
    """The cache key of one ``sweep`` call, or None when an argument cannot be keyed on (or is
    not of its type at all: the sweep itself then says what is wrong with it). A profile given
    by name is keyed on the ``StepModel`` the name stands for now."""
    try:
        if "profile" in extra:
            extra = {**extra, "profile": profile_key(extra["profile"])}
        slo_items = None if slo is None else tuple(sorted(slo.items()))
        return key_of(
            (workload, model, gpu, kind, tuple(values), engine, tuple(percentiles), slo_items,
             window, tuple(sorted(extra.items())))
        )  # fmt: skip
    except (AttributeError, TypeError, Uncacheable):
        return None


def compare_engines(
    workload: Workload,
    model: Model,
    gpu: GPU,
    engines: dict[str, EngineConfig],
    percentiles: Sequence[float] = (50, 90, 99),
    **simulate_kwargs,
) -> pd.DataFrame:
    """Serve the same ``workload`` with each labelled engine; one row per label (the index)
    with ``preemptions``, ``mean_batch``, ``cached_share`` (prompt tokens served from the
    prefix cache), the ``summarize(...).to_dict()`` fields and ``itl_s_mean/p50/p99``.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    if not engines:
        raise ValueError("engines must map at least one label to an EngineConfig")
    rows = {}
    for label, engine in engines.items():
        result = simulate(workload, model, gpu, engine, **simulate_kwargs)
        requests = result.requests
        row = _summary_row(result, percentiles)
        rows[label] = {
            "preemptions": result.preemptions,
            "mean_batch": row.pop("mean_batch"),
            "cached_share": requests.cached_prefix_tokens.sum() / requests.input_tokens.sum(),
            **row,
        }
    return pd.DataFrame.from_dict(rows, orient="index")


@dataclass(frozen=True)
class Goodput:
    """The highest load meeting an SLO: ``load`` (None when even the lowest fails), its
    ``row`` of the sweep, and the whole sweep ``table`` with a ``meets_slo`` column.

    Introduced in: notebooks/03_metrics.ipynb
    """

    kind: str
    load: float | None
    row: pd.Series | None
    table: pd.DataFrame
    slo: dict[str, float]
    percentile: float


def max_goodput(
    workload: Workload,
    model: Model,
    gpu: GPU,
    slo: dict[str, float],
    rates: Sequence[float] | None = None,
    concurrencies: Sequence[int] | None = None,
    percentile: float = 99,
    engine: EngineConfig = EngineConfig(),
    window: str = "run",
    **simulate_kwargs,
) -> Goodput:
    """The highest load whose ``percentile`` of every SLO metric meets its target.

    ``slo`` maps ``ttft_s``, ``tpot_s`` or ``e2e_s`` to seconds, e.g. ``{"ttft_s": 0.5,
    "tpot_s": 0.05}`` with ``percentile=99`` asks for p99 TTFT ≤ 0.5 s and p99 TPOT ≤ 50 ms.
    Loads are the given grid; the answer is the highest grid point that passes. ``window``
    as in ``sweep``: ``"run"`` (default) judges each load on its whole finite run, drain
    included (every request counts, as a benchmark run would); ``"arrivals"`` on the requests
    completed while requests still arrive.

    Introduced in: notebooks/03_metrics.ipynb
    """
    if not isinstance(slo, dict) or not slo:
        raise ValueError(f"slo={slo!r} must be a dict such as {{'ttft_s': 0.5}}")
    kind, values = _loads(rates, concurrencies)
    table = sweep(
        workload,
        model,
        gpu,
        rates=values if kind == "rate" else None,
        concurrencies=values if kind == "concurrency" else None,
        engine=engine,
        percentiles=(50, percentile),
        slo=slo,
        window=window,
        **simulate_kwargs,
    )
    table["meets_slo"] = meets_slo_table(table, slo, percentile)
    load = best_load(table, slo, percentile)
    if load is None:
        return Goodput(kind, None, None, table, dict(slo), percentile)
    best = table.loc[table[kind] == load].iloc[0]
    return Goodput(kind, float(best[kind]), best, table, dict(slo), percentile)
