"""Chapters 3 and 6: TTFT, TPOT, ITL, E2E, TPS, RPS and goodput from a request log.

Per request (seconds): ``ttft_s = first_token_ts − start_ts``; ``e2e_s = end_ts − start_ts``;
``decode_s = end_ts − first_token_ts``; ``tpot_s = decode_s / (N − 1)`` for N = output_tokens
> 1 (NaN for N ≤ 1: one token has no gap after it). With ``scheduled_ts``: ``queue_s =
scheduled_ts − start_ts`` and ``prefill_s = first_token_ts − scheduled_ts``.

Over a window from the first request's start to the last request's end: output/input/total
tokens per second and requests per second count successful requests; latency statistics use
successful requests only; failed requests are counted in ``n_requests`` and ``n_failed``.
Everything is vectorised (numpy/pandas): no Python loop per request.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from llminfer.logs import BLOCK_ROWS, RequestLog, read_requests
from llminfer.quantiles import select_percentiles

if TYPE_CHECKING:
    from llminfer.logsets import GroupedSummary

#: Latency metrics every summary reports; the SLO keys ``summarize`` accepts.
LATENCY_METRICS = ("ttft_s", "tpot_s", "e2e_s")
SLO_KEYS = LATENCY_METRICS
#: Extra per-request metrics summarised when the log has the columns they need.
_OPTIONAL_METRICS = ("queue_s", "prefill_s", "decode_s", "itl_mean_s")


def percentile(values: Iterable[float], q: float) -> float:
    """The article's percentile: sort, then interpolate linearly at position ``(n − 1)·q``.

    ``q`` is a fraction in [0, 1] (0.95 for p95). Raises ValueError on an empty input. Equals
    numpy's default ``np.percentile(values, 100 * q)``.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 <= q <= 1:
        raise ValueError(f"q={q!r} must be a fraction between 0 and 1 (0.95 for p95)")
    ordered = np.sort(np.asarray(list(values) if not hasattr(values, "__len__") else values))
    ordered = ordered.astype(float).ravel()
    if ordered.size == 0:
        raise ValueError("values must not be empty")
    if np.isnan(ordered).any():
        raise ValueError("values must not contain NaN")
    position = (ordered.size - 1) * q
    lower, upper = math.floor(position), math.ceil(position)
    if lower == upper:
        return float(ordered[lower])
    weight = position - lower
    return float(ordered[lower] * (1 - weight) + ordered[upper] * weight)


def weighted_percentile(values: Sequence[float], weights: Sequence[float], q: float) -> float:
    """Percentile of ``values`` where each value counts ``weights`` times (integer weights).

    Equals ``percentile(np.repeat(values, weights), q)`` without building the repeated array;
    used for token-weighted definitions (GuideLLM). ``q`` in [0, 1].

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    values = np.asarray(values, dtype=float).ravel()
    weights = np.asarray(weights, dtype=np.int64).ravel()
    if values.shape != weights.shape:
        raise ValueError(f"values and weights differ in length: {values.size} vs {weights.size}")
    if (weights < 0).any():
        raise ValueError("weights must be non-negative integers")
    if not 0 <= q <= 1:
        raise ValueError(f"q={q!r} must be a fraction between 0 and 1")
    order = np.argsort(values, kind="stable")
    values, weights = values[order], weights[order]
    ends = np.cumsum(weights)  # the repeated array's element k sits in the first run ends > k
    total = int(ends[-1]) if ends.size else 0
    if total == 0:
        raise ValueError("values must not be empty (total weight is 0)")
    position = (total - 1) * q
    lower, upper = math.floor(position), math.ceil(position)
    at = np.searchsorted(ends, [lower, upper], side="right")
    low, high = values[at[0]], values[at[1]]
    return float(low + (high - low) * (position - lower))


def _as_log(log: RequestLog | pd.DataFrame) -> RequestLog:
    if isinstance(log, RequestLog):
        return log
    if isinstance(log, pd.DataFrame):
        return read_requests(log)
    raise ValueError(f"log must be a RequestLog or a DataFrame, not {type(log).__name__}")


def _chunk_gaps(requests: pd.DataFrame, per_token: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Pooled gaps between consecutive chunks of every request, and the owning row of each.

    With ``per_token`` a gap before a chunk of k tokens becomes k samples of gap / k (SGLang).
    """
    cells = requests["token_ts"].to_numpy(dtype=object)
    present = np.array([c is not None and not np.isscalar(c) for c in cells], dtype=bool)
    if not present.any():
        return np.empty(0), np.empty(0, dtype=np.int64)
    arrays = [np.asarray(c, dtype=float) for c in cells[present]]
    lengths = np.array([a.size for a in arrays])
    flat = np.concatenate(arrays)
    owner = np.repeat(np.flatnonzero(present), lengths)
    gaps = np.diff(flat)
    inside = owner[1:] == owner[:-1]  # drop the jumps from one request's last chunk to the next
    gaps, gap_owner = gaps[inside], owner[1:][inside]
    if per_token and "chunk_tokens" in requests.columns:
        counts_cells = requests["chunk_tokens"].to_numpy(dtype=object)[present]
        counts = np.concatenate(
            [
                np.ones(n) if c is None or np.isscalar(c) else np.asarray(c, dtype=float)
                for c, n in zip(counts_cells, lengths, strict=True)
            ]
        )[1:][inside].astype(np.int64)
        gaps = np.repeat(gaps / counts, counts)
        gap_owner = np.repeat(gap_owner, counts)
    return gaps, gap_owner


#: The per-request metrics every log has, computed by ``_core_metric``.
_CORE_METRICS = ("ttft_s", "tpot_s", "e2e_s", "decode_s")


def _core_metric(name: str, requests: pd.DataFrame, out: np.ndarray | None = None) -> np.ndarray:
    """One of ``_CORE_METRICS`` for every request (seconds), into ``out`` when given.

    TTFT = first token − start, E2E = end − start, decode = end − first token, TPOT = decode /
    (N − 1) for N > 1 output tokens, else NaN. The division runs block by block: its temporaries
    (N − 1, N > 1) stay small enough for the allocator to reuse instead of faulting in fresh
    memory for each (~0.2 s of 10 M rows' time).
    """
    start = requests["start_ts"].to_numpy(dtype=float)
    first = requests["first_token_ts"].to_numpy(dtype=float)
    end = requests["end_ts"].to_numpy(dtype=float)
    out = np.empty(len(requests)) if out is None else out
    if name == "ttft_s":
        return np.subtract(first, start, out=out)
    if name == "e2e_s":
        return np.subtract(end, start, out=out)
    if name == "decode_s":
        return np.subtract(end, first, out=out)
    if name != "tpot_s":
        raise ValueError(f"name={name!r} is not one of {', '.join(_CORE_METRICS)}")
    tokens = requests["output_tokens"].to_numpy()
    out.fill(np.nan)
    for lo in range(0, len(tokens), BLOCK_ROWS):
        part = slice(lo, lo + BLOCK_ROWS)
        counts = tokens[part]
        np.divide(end[part] - first[part], counts - 1, out=out[part], where=counts > 1)
    return out


#: The dtype pandas gives a column of Python strings (``str``, Arrow-backed, NaN for missing).
_STR_DTYPE = pd.Series(["x"]).dtype


def _text_column(column: pd.Series):
    """A copy of ``column.to_numpy()`` as a new frame would store it, without the round trip
    through one Python string per row (3 s and 1.5 GiB for 10 M ids): a ``str`` column as it is
    (a new array over the same immutable Arrow buffers), a categorical of strings as its
    categories taken by code. Anything else goes the slow way."""
    dtype = column.dtype
    if dtype == _STR_DTYPE and column.notna().any():
        return column.array.copy()
    if isinstance(dtype, pd.CategoricalDtype) and dtype.categories.dtype == _STR_DTYPE:
        codes = column.array.codes
        if (codes >= 0).any():
            return pd.array(dtype.categories, dtype=_STR_DTYPE).take(codes, allow_fill=True)
    return column.to_numpy(copy=True)


def request_metrics(log: RequestLog | pd.DataFrame, copy: bool = True) -> pd.DataFrame:
    """Per-request metrics, one row per request in the log (failed ones included), seconds.

    Columns: ``request_id, status, input_tokens, output_tokens, start_ts, end_ts, ttft_s,
    tpot_s, e2e_s, decode_s``; ``queue_s, prefill_s`` when ``scheduled_ts`` exists;
    ``n_chunks, itl_mean_s, itl_max_s`` (gaps between streamed chunks) when ``token_ts`` exists.
    ``tpot_s`` is NaN when output_tokens ≤ 1. Failed requests keep whatever timestamps they have.
    ``copy=False`` lets the table share the log's own columns (ids, tokens, start and end) for
    read-only use: 4 fewer copies (320 MB at 10 M rows), as ``diagnose`` does.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    requests = _as_log(log).requests
    # The log's own columns are copied unless asked not to (a table that may be edited must
    # not share memory with the log); the metrics are fresh arrays, taken as they are
    # (copy=False: ~0.9 s less on 10 M rows).
    out = pd.DataFrame(
        {
            "request_id": _text_column(requests["request_id"]),
            "status": _text_column(requests["status"]),
            **{
                name: requests[name].to_numpy(dtype=dtype, copy=copy)
                for name, dtype in (
                    ("input_tokens", None),
                    ("output_tokens", None),
                    ("start_ts", float),
                    ("end_ts", float),
                )
            },
            **{name: _core_metric(name, requests) for name in _CORE_METRICS},
        },
        copy=False,
    )
    if "scheduled_ts" in requests.columns:
        scheduled = requests["scheduled_ts"].to_numpy(dtype=float)
        out["queue_s"] = scheduled - out["start_ts"].to_numpy()
        out["prefill_s"] = requests["first_token_ts"].to_numpy(dtype=float) - scheduled
    if "token_ts" in requests.columns:
        gaps, owner = _chunk_gaps(requests)
        n = len(requests)
        count = np.bincount(owner, minlength=n)
        total = np.bincount(owner, weights=gaps, minlength=n)
        biggest = np.full(n, -np.inf)
        np.maximum.at(biggest, owner, gaps)
        cells = requests["token_ts"].to_numpy(dtype=object)
        out["n_chunks"] = [0 if c is None or np.isscalar(c) else len(c) for c in cells]
        with np.errstate(invalid="ignore", divide="ignore"):
            out["itl_mean_s"] = np.where(count > 0, total / count, np.nan)
        out["itl_max_s"] = np.where(count > 0, biggest, np.nan)
    return out


def _stat_key(q: float) -> str:
    return f"p{q:g}"


def _check_percentiles(percentiles: Sequence[float]) -> tuple[float, ...]:
    checked = []
    for q in percentiles:
        if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 < q <= 100:
            raise ValueError(
                f"percentiles contains {q!r}; each must be a number in (0, 100], e.g. 99.9"
            )
        checked.append(float(q))
    return tuple(checked)


def _check_slo(slo: dict | None) -> dict[str, float] | None:
    if slo is None:
        return None
    if not isinstance(slo, dict) or not slo:
        raise ValueError(f"slo={slo!r} must be a non-empty dict with keys among {SLO_KEYS}")
    for key, value in slo.items():
        if key not in SLO_KEYS:
            raise ValueError(f"slo key {key!r} is not known; use {', '.join(SLO_KEYS)} (seconds)")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"slo[{key!r}]={value!r} must be a positive number of seconds")
    return {k: float(v) for k, v in slo.items()}


def meets_slo(metrics: pd.DataFrame, slo: dict[str, float]) -> np.ndarray:
    """Boolean per request: successful and within every SLO (value ≤ target, seconds).

    A request with a single output token has no TPOT and passes a TPOT target (vLLM does the
    same). Failed requests never pass.

    Introduced in: notebooks/03_metrics.ipynb
    """
    metrics_arrays = {c: metrics[c].to_numpy() for c in SLO_KEYS if c in metrics.columns}
    return _good(metrics_arrays, (metrics["status"] == "ok").to_numpy(), _check_slo(slo) or {})


def _good(metrics: dict[str, np.ndarray], ok: np.ndarray, slo: dict[str, float]) -> np.ndarray:
    good = np.array(ok, dtype=bool, copy=True)
    for key, target in slo.items():
        values = np.asarray(metrics[key], dtype=float)
        with np.errstate(invalid="ignore"):
            passes = values <= target
        if key == "tpot_s":
            passes |= np.isnan(values)
        good &= passes
    return good


@dataclass
class Summary:
    """A request log summarised: counts, window, throughput, goodput and latency statistics.

    ``table``: one row per latency metric (``ttft_s``, ``tpot_s``, ``e2e_s``, and ``queue_s``,
    ``prefill_s``, ``decode_s``, ``itl_mean_s`` when available), columns ``count, mean, min,
    max, p50, …`` in seconds. ``to_dict()`` flattens it with the throughput figures.

    Introduced in: notebooks/06_log_analysis.ipynb
    """

    n_requests: int
    n_failed: int
    window_s: float
    rps: float
    output_tps: float
    input_tps: float
    total_tps: float
    goodput_rps: float
    good_fraction: float
    table: pd.DataFrame
    percentiles: tuple[float, ...] = (50, 90, 95, 99)
    slo: dict[str, float] | None = field(default=None)
    #: ITL over real chunk gaps (``itl_s_mean``, ``itl_s_p50``, ``itl_s_p99``, ``itl_s_max``,
    #: ``n_stalls``) when the log has ``token_ts``; empty otherwise.
    itl: dict[str, float] = field(default_factory=dict)
    #: Where the rates' window came from: ``"log"`` (first start → last end) or ``"tool"``.
    window_from: str = "log"

    def to_dict(self) -> dict[str, float]:
        """Flat dict: ``n_requests … good_fraction`` and ``<metric>_<stat>`` for TTFT, TPOT, E2E.

        Introduced in: notebooks/06_log_analysis.ipynb
        """
        out: dict[str, float] = {
            "n_requests": self.n_requests,
            "n_failed": self.n_failed,
            "window_s": self.window_s,
            "rps": self.rps,
            "output_tps": self.output_tps,
            "input_tps": self.input_tps,
            "total_tps": self.total_tps,
            "goodput_rps": self.goodput_rps,
            "good_fraction": self.good_fraction,
        }
        stats = ["mean", "min", "max", *[_stat_key(q) for q in self.percentiles]]
        for metric in LATENCY_METRICS:
            for stat in stats:
                out[f"{metric}_{stat}"] = float(self.table.loc[metric, stat])
        out.update(self.itl)
        return out

    def to_frame(self) -> pd.DataFrame:
        """The latency table (metric × statistic, seconds) as a DataFrame copy."""
        return self.table.copy()

    def _display_table(self) -> pd.DataFrame:
        return self.table.astype({"count": "int64"})

    def _headline(self) -> list[tuple[str, str]]:
        where = "first start → last end" if self.window_from == "log" else "the tool's duration"
        lines = [
            ("requests", f"{self.n_requests} ({self.n_failed} failed)"),
            ("window", f"{self.window_s:.3f} s ({where})"),
            ("RPS", f"{self.rps:.3f} requests/s"),
            ("output TPS", f"{self.output_tps:.2f} tokens/s"),
            ("input TPS", f"{self.input_tps:.2f} tokens/s"),
            ("total TPS", f"{self.total_tps:.2f} tokens/s"),
        ]
        if self.itl:
            lines.append(
                (
                    "ITL (chunks)",
                    f"mean {self.itl['itl_s_mean'] * 1e3:.2f} ms, p50 "
                    f"{self.itl['itl_s_p50'] * 1e3:.2f} ms, p99 {self.itl['itl_s_p99'] * 1e3:.2f}"
                    f" ms; {int(self.itl['n_stalls'])} stall(s) > {STALL_FACTOR:g}× median gap",
                )
            )
        if self.slo:
            targets = ", ".join(f"{k} ≤ {v:g} s" for k, v in self.slo.items())
            lines.append(("goodput", f"{self.goodput_rps:.3f} requests/s within {targets}"))
            lines.append(("good fraction", f"{self.good_fraction:.1%} of all requests"))
        return lines

    def __str__(self) -> str:
        head = "\n".join(f"{k:>13}: {v}" for k, v in self._headline())
        with pd.option_context("display.float_format", "{:.4f}".format, "display.width", 120):
            return f"{head}\nlatency (seconds):\n{self._display_table().to_string()}"

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><th style='text-align:right'>{html.escape(k)}</th><td style='text-align:left'>"
            f"{html.escape(v)}</td></tr>"
            for k, v in self._headline()
        )
        table = self._display_table().to_html(float_format="{:.4f}".format)
        return f"<table>{rows}</table><p>latency statistics (seconds)</p>{table}"

    def __repr__(self) -> str:
        return str(self)


def _summary_from_counts(
    *,
    n_requests: int,
    n_ok: int,
    n_good: int | None,
    window: float,
    output_tokens: float,
    input_tokens: float,
    table: pd.DataFrame,
    percentiles: tuple[float, ...],
    slo: dict[str, float] | None,
    **extra,
) -> Summary:
    """A ``Summary`` from counts: the one place where rates (per second of ``window``; NaN
    without a positive window) and goodput (``n_good`` / window; good fraction = ``n_good`` /
    all requests) are defined, for the in-memory and the streaming paths alike."""

    def per_second(amount: float) -> float:
        return amount / window if window > 0 else float("nan")

    nan = float("nan")
    return Summary(
        n_requests=n_requests,
        n_failed=n_requests - n_ok,
        window_s=window,
        rps=per_second(n_ok),
        output_tps=per_second(output_tokens),
        input_tps=per_second(input_tokens),
        total_tps=per_second(output_tokens + input_tokens),
        goodput_rps=per_second(n_good) if slo is not None else nan,
        good_fraction=(n_good / n_requests if slo is not None and n_requests else nan),
        table=table,
        percentiles=percentiles,
        slo=slo,
        **extra,
    )


def summarize(
    log: RequestLog | pd.DataFrame,
    percentiles: Sequence[float] = (50, 90, 95, 99),
    slo: dict[str, float] | None = None,
    by: str | None = None,
) -> Summary | GroupedSummary:
    """Summarise a log: counts, window, RPS, output/input/total TPS, goodput and percentiles.

    With ``by`` (a column, e.g. ``"source"`` of a log read from many files) the result is a
    ``GroupedSummary`` instead: a ``Summary`` per value and the total, and a table of headline
    figures per value beside the total (``llminfer.logsets.summarize_by``).

    ``percentiles`` in percent (99.9 allowed); ``slo`` maps ``ttft_s``/``tpot_s``/``e2e_s`` to
    targets in seconds: goodput = successful requests meeting every target / window (s), good
    fraction = those requests / all requests (failed ones included). Window = first start →
    last end over all loaded requests. Vectorised.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    percentiles = _check_percentiles(percentiles)
    slo = _check_slo(slo)
    log = _as_log(log)
    if by is not None:
        from llminfer.logsets import summarize_by

        return summarize_by(log, by, percentiles, slo)
    requests = log.requests
    if {"scheduled_ts", "token_ts"} & set(requests.columns):
        frame = request_metrics(log)
        metrics = {c: frame[c].to_numpy() for c in frame.columns if c not in ("request_id",)}
        start, end = metrics["start_ts"], metrics["end_ts"]
    else:  # the common case, kept free of DataFrame building for million-row logs
        metrics = None  # each metric is computed when it is summarised, into one buffer
        start = requests["start_ts"].to_numpy(dtype=float)
        end = requests["end_ts"].to_numpy(dtype=float)
    ok = (requests["status"] == "ok").to_numpy()
    n_requests, n_ok = len(requests), int(ok.sum())

    window_from = "log"
    if log.source.window_s is not None:  # the tool's own duration (vLLM, SGLang, llmperf)
        window, window_from = float(log.source.window_s), "tool"
    elif n_requests and np.isfinite(end).any() and log.source.starts_known:
        window = float(np.nanmax(end) - np.nanmin(start))
    else:  # no start times and no duration from the tool: the window can't be told
        window = float("nan")

    output_tokens = float(requests["output_tokens"].to_numpy().sum(where=ok))
    input_tokens = float(requests["input_tokens"].to_numpy().sum(where=ok))
    good = None
    if slo is not None:
        targets = metrics or {key: _core_metric(key, requests) for key in slo}
        good = int(_good(targets, ok, slo).sum())

    available = metrics if metrics is not None else _CORE_METRICS
    names = list(LATENCY_METRICS) + [m for m in _OPTIONAL_METRICS if m in available]
    stats = ["count", "mean", "min", "max", *[_stat_key(q) for q in percentiles]]
    rows = []
    scratch = np.empty(n_requests) if metrics is None else None
    for name in names:
        if metrics is None:  # a fresh computation in the scratch buffer: free to reorder
            values = _core_metric(name, requests, out=scratch)
            counted = ok & ~np.isnan(values)
            if not counted.all():
                values = values[counted]
        else:  # the frame's arrays: the counted values are copied before they are reordered
            values = np.asarray(metrics[name], dtype=float)
            values = values[ok & ~np.isnan(values)]
        if values.size:
            mean = values.mean()  # before reordering: the sum's rounding depends on the order
            # Selection, not sorting: only the ranks the percentiles need are found, in place
            # (llminfer.quantiles; bit-for-bit np.percentile), ~5× faster than sorting and
            # then calling np.percentile, which partitioned the sorted array again.
            rows.append(
                [
                    values.size,
                    mean,
                    values.min(),
                    values.max(),
                    *select_percentiles(values, percentiles, overwrite_input=True),
                ]
            )
        else:
            rows.append([0] + [np.nan] * (len(stats) - 1))
    table = pd.DataFrame(rows, index=pd.Index(names, name="metric"), columns=stats, dtype=float)
    itl = chunk_itl(log) if "token_ts" in requests.columns else {}
    return _summary_from_counts(
        n_requests=n_requests,
        n_ok=n_ok,
        n_good=good,
        window=window,
        output_tokens=output_tokens,
        input_tokens=input_tokens,
        table=table,
        percentiles=percentiles,
        slo=slo,
        itl=itl,
        window_from=window_from,
    )


#: A chunk gap longer than this many times the log's median gap counts as a stall.
STALL_FACTOR = 5.0


def chunk_itl(log: RequestLog | pd.DataFrame) -> dict[str, float]:
    """ITL from real chunk gaps of successful requests, pooled (vLLM's definition), seconds:
    ``itl_s_mean``, ``itl_s_p50``, ``itl_s_p99``, ``itl_s_max`` and ``n_stalls`` (gaps longer
    than ``STALL_FACTOR`` × the median gap). Empty when the log has no ``token_ts`` or no gaps.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    log = _as_log(log)
    if "token_ts" not in log.requests.columns:
        return {}
    gaps = _chunk_gaps(log.ok.reset_index(drop=True))[0]
    if gaps.size == 0:
        return {}
    p50, p99 = np.percentile(gaps, [50, 99])
    return {
        "itl_s_mean": float(gaps.mean()),
        "itl_s_p50": float(p50),
        "itl_s_p99": float(p99),
        "itl_s_max": float(gaps.max()),
        "n_stalls": int((gaps > STALL_FACTOR * p50).sum()),
    }


# Moved to their own modules (one concept each); still importable from here.
_MOVED = {
    "DEFINITIONS": "llminfer.definitions",
    "compare_definitions": "llminfer.definitions",
    "in_flight": "llminfer.timeline",
    "output_tps_over_time": "llminfer.timeline",
}


def __getattr__(name: str):
    if name in _MOVED:
        import importlib

        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
