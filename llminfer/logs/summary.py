"""Chapters 3 and 6: a request log summarised — counts, window, TPS, RPS, goodput and latency
percentiles — over a window from the first request's start to the last request's end (or the
tool's own duration where the export states one, or a time window ``window=(t0, t1)`` of the
log: the requests completed inside it over ``t1 − t0`` seconds, ``llminfer.logs.window``).

Output/input/total tokens per second and requests per second count successful requests;
latency statistics use successful requests only; failed requests are counted in
``n_requests`` and ``n_failed``. The per-request metrics themselves are
``llminfer.logs.metrics``. Everything is vectorised: no Python loop per request.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from llminfer.logs.grouped import GroupedSummary, headline_row
from llminfer.logs.metrics import (
    _CORE_METRICS,
    _OPTIONAL_METRICS,
    LATENCY_METRICS,
    STALL_FACTOR,
    _as_log,
    _core_metric,
    chunk_itl,
    request_metrics,
)
from llminfer.logs.quantiles import select_percentiles
from llminfer.logs.schema import RequestLog
from llminfer.logs.window import COMPLETED, EMITTED, check_window, window_log

SLO_KEYS = LATENCY_METRICS


def _stat_key(q: float) -> str:
    return f"p{q:g}"


def _check_percentiles(percentiles: Sequence[float]) -> tuple[float, ...]:
    if isinstance(percentiles, (str, bytes)) or not hasattr(percentiles, "__iter__"):
        raise ValueError(
            f"percentiles={percentiles!r} must be a list of numbers in (0, 100], e.g. (50, 99)"
        )
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
    #: Where the rates' window came from: ``"log"`` (first start → last end), ``"tool"`` (the
    #: export's duration) or a time window (``llminfer.logs.window.EMITTED`` / ``COMPLETED``).
    window_from: str = "log"
    #: The time window ``(t0, t1)`` (s, the log's clock) when one was given; else None.
    window_range: tuple[float, float] | None = None

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
        where = {"log": "first start → last end", "tool": "the tool's duration"}.get(
            self.window_from,
            f"[{self.window_range[0]:.3f}, {self.window_range[1]:.3f}) s, requests completed in it"
            if self.window_range
            else self.window_from,
        )
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
    window: tuple[float, float] | None = None,
) -> Summary | GroupedSummary:
    """Summarise a log: counts, window, RPS, output/input/total TPS, goodput and percentiles.

    With ``by`` (a column, e.g. ``"source"`` of a log read from many files) the result is a
    ``GroupedSummary`` instead: a ``Summary`` per value and the total, and a table of headline
    figures per value beside the total (``llminfer.logs.summary.summarize_by``).

    ``percentiles`` in percent (99.9 allowed); ``slo`` maps ``ttft_s``/``tpot_s``/``e2e_s`` to
    targets in seconds: goodput = successful requests meeting every target / window (s), good
    fraction = those requests / all requests (failed ones included). Window = first start →
    last end over all loaded requests (or the tool's duration when the export gives one).

    ``window=(t0, t1)`` (seconds on the log's clock, t0 < t1; ValueError otherwise) summarises
    a time slice over its own length instead: the requests that *completed* inside
    ``[t0, t1)`` count, for the rates and the percentiles alike, over ``t1 − t0`` s; output
    tokens are those emitted inside the window when the log has ``token_ts``, else the
    completed requests' (``llminfer.logs.window``, which also gives ``window_log``, the slice
    as a ``RequestLog`` for widgets and plots). Filtering rows on ``start_ts`` and summarising
    them instead stretches the window to whenever the slowest of them ended. Vectorised.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    percentiles = _check_percentiles(percentiles)
    slo = _check_slo(slo)
    log = _as_log(log)
    if by is not None:
        return summarize_by(log, by, percentiles, slo, window=window)
    if window is not None:
        log = window_log(log, *check_window(window))
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
    window_tokens = None
    if log.source.window is not None:  # a time window of a longer log (window_log)
        t0, t1 = log.source.window
        window, window_tokens = t1 - t0, log.source.window_output_tokens
        window_from = EMITTED if window_tokens is not None else COMPLETED
    elif log.source.window_s is not None:  # the tool's own duration (vLLM, SGLang, llmperf)
        window, window_from = float(log.source.window_s), "tool"
    elif n_requests and np.isfinite(end).any() and log.source.starts_known:
        window = float(np.nanmax(end) - np.nanmin(start))
    else:  # no start times and no duration from the tool: the window can't be told
        window = float("nan")

    output_tokens = float(requests["output_tokens"].to_numpy().sum(where=ok))
    if window_tokens is not None:
        output_tokens = float(window_tokens)
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
            # (llminfer.logs.quantiles; bit-for-bit np.percentile), ~5× faster than sorting and
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
        window_range=log.source.window,
    )


def summarize_by(
    log: RequestLog,
    by: str = "source",
    percentiles: Sequence[float] = (50, 90, 95, 99),
    slo: dict[str, float] | None = None,
    window: tuple[float, float] | None = None,
) -> GroupedSummary:
    """``summarize`` per value of column ``by`` (default ``source``) and for the whole log.

    Raises ValueError when the log has no column ``by``. Seconds and per-second rates; each
    group's window is its own first start → last end, or with ``window=(t0, t1)`` that same
    time window for every group (``summarize``'s rule).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if not isinstance(by, str) or by not in log.requests.columns:
        columns = ", ".join(map(str, log.requests.columns))
        raise ValueError(
            f"by={by!r} is not a column of the log (columns: {columns}); read a directory or "
            "a glob of files to get 'source'"
        )
    total = summarize(log, percentiles=percentiles, slo=slo, window=window)
    groups: dict[str, object] = {}
    column = log.requests[by]
    values = column.cat.categories if isinstance(column.dtype, pd.CategoricalDtype) else None
    if values is None:
        values = pd.unique(column.dropna())
    codes = column.to_numpy()
    for value in values:
        part = log.requests[codes == value].reset_index(drop=True)
        if len(part):
            groups[str(value)] = summarize(
                RequestLog(part, source=log.source), percentiles=percentiles, slo=slo, window=window
            )
    rows = {name: headline_row(s) for name, s in groups.items()}
    rows["total"] = headline_row(total)
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = by
    return GroupedSummary(by=by, groups=groups, total=total, table=table)
