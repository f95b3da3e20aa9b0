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

from llminfer.logs import RequestLog, read_requests
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


def _core_metrics(requests: pd.DataFrame) -> dict[str, np.ndarray]:
    """start_ts, end_ts, ttft_s, tpot_s, e2e_s, decode_s as arrays (seconds), vectorised."""
    start = requests["start_ts"].to_numpy(dtype=float)
    first = requests["first_token_ts"].to_numpy(dtype=float)
    end = requests["end_ts"].to_numpy(dtype=float)
    tokens = requests["output_tokens"].to_numpy(dtype=float)
    decode = end - first
    # Divides only where N > 1, into a NaN-filled result: one temporary fewer than np.where.
    tpot = np.divide(decode, tokens - 1, out=np.full(decode.shape, np.nan), where=tokens > 1)
    return {
        "start_ts": start,
        "end_ts": end,
        "ttft_s": first - start,
        "tpot_s": tpot,
        "e2e_s": end - start,
        "decode_s": decode,
    }


def request_metrics(log: RequestLog | pd.DataFrame) -> pd.DataFrame:
    """Per-request metrics, one row per request in the log (failed ones included), seconds.

    Columns: ``request_id, status, input_tokens, output_tokens, start_ts, end_ts, ttft_s,
    tpot_s, e2e_s, decode_s``; ``queue_s, prefill_s`` when ``scheduled_ts`` exists;
    ``n_chunks, itl_mean_s, itl_max_s`` (gaps between streamed chunks) when ``token_ts`` exists.
    ``tpot_s`` is NaN when output_tokens ≤ 1. Failed requests keep whatever timestamps they have.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    requests = _as_log(log).requests
    out = pd.DataFrame(
        {
            "request_id": requests["request_id"].to_numpy(),
            "status": requests["status"].to_numpy(),
            "input_tokens": requests["input_tokens"].to_numpy(),
            "output_tokens": requests["output_tokens"].to_numpy(),
            **_core_metrics(requests),
        }
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
    else:  # the common case, kept free of DataFrame building for million-row logs
        metrics = _core_metrics(requests)
    ok = (requests["status"] == "ok").to_numpy()
    n_requests, n_ok = len(requests), int(ok.sum())

    start, end = metrics["start_ts"], metrics["end_ts"]
    window_from = "log"
    if log.source.window_s is not None:  # the tool's own duration (vLLM, SGLang, llmperf)
        window, window_from = float(log.source.window_s), "tool"
    elif n_requests and np.isfinite(end).any() and log.source.starts_known:
        window = float(np.nanmax(end) - np.nanmin(start))
    else:  # no start times and no duration from the tool: the window can't be told
        window = float("nan")

    def per_second(amount: float) -> float:
        return amount / window if window > 0 else float("nan")

    output_tokens = float(requests["output_tokens"].to_numpy()[ok].sum())
    input_tokens = float(requests["input_tokens"].to_numpy()[ok].sum())
    if slo is not None:
        good = int(_good(metrics, ok, slo).sum())
        goodput = per_second(good)
        good_fraction = good / n_requests if n_requests else float("nan")
    else:
        goodput = good_fraction = float("nan")

    names = list(LATENCY_METRICS) + [m for m in _OPTIONAL_METRICS if m in metrics]
    stats = ["count", "mean", "min", "max", *[_stat_key(q) for q in percentiles]]
    rows = []
    for name in names:
        values = np.asarray(metrics[name], dtype=float)
        values = values[ok & ~np.isnan(values)]  # a fresh array, free to reorder in place
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
    return Summary(
        n_requests=n_requests,
        n_failed=n_requests - n_ok,
        window_s=window,
        rps=per_second(n_ok),
        output_tps=per_second(output_tokens),
        input_tps=per_second(input_tokens),
        total_tps=per_second(output_tokens + input_tokens),
        goodput_rps=goodput,
        good_fraction=good_fraction,
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


#: Each tool's definition, in words; ``compare_definitions`` computes every one of them.
DEFINITIONS = {
    "vllm_tpot": "vLLM TPOT: (E2E − TTFT)/(N − 1) per request with N > 1, plain mean over "
    "requests (the first token excluded).",
    "vllm_itl": "vLLM ITL: every gap between consecutive streamed chunks, pooled over all "
    "requests (long outputs dominate; a multi-token chunk is one sample).",
    "genai_perf_itl": "GenAI-Perf/AIPerf ITL: (E2E − TTFT)/(N − 1), one value per request — "
    "the number vLLM calls TPOT.",
    "llmperf_itl": "llmperf inter-token latency: all gaps including TTFT, divided by N, i.e. "
    "E2E/N per request (the first token's wait included).",
    "guidellm_tpot": "GuideLLM TPOT: (last token − request start)/N per request, TTFT "
    "included, weighted by N (token-weighted).",
    "guidellm_itl": "GuideLLM ITL: (last token − first token)/(N − 1) per request, weighted "
    "by N − 1 (token-weighted).",
    "sglang_itl": "SGLang ITL: every chunk gap, pooled; a chunk of k tokens gives k samples "
    "of gap/k (speculative decoding).",
}


def _row(values: np.ndarray, weights: np.ndarray | None = None) -> tuple[float, float, float]:
    if values.size == 0 or (weights is not None and weights.sum() == 0):
        return (float("nan"),) * 3
    if weights is None:
        p50, p99 = np.percentile(values, [50, 99])
        return float(values.mean()), float(p50), float(p99)
    mean = float(np.sum(values * weights) / np.sum(weights))
    return (
        mean,
        weighted_percentile(values, weights, 0.50),
        weighted_percentile(values, weights, 0.99),
    )


def compare_definitions(log: RequestLog | pd.DataFrame, tool=None) -> pd.DataFrame:
    """TPOT/ITL as vLLM, GenAI-Perf/AIPerf, llmperf, GuideLLM and SGLang define them (seconds).

    Index ``vllm_tpot, vllm_itl, genai_perf_itl, llmperf_itl, guidellm_tpot, guidellm_itl,
    sglang_itl``; columns ``mean_s, p50_s, p99_s, definition, note``. Only successful requests
    count. Chunk-gap variants are NaN (``note`` says why) when the log has no ``token_ts``.
    Weighted variants use ``weighted_percentile``. A log read from llmperf uses llmperf's own
    per-request ``inter_token_latency_s`` for its row.

    With ``tool`` (a ``ToolSummary`` from ``llminfer.read_summary``) the result is instead one
    row per figure the tool reported: ``tool_name``, ``tool_value``, ``llminfer_value`` (computed
    from the log with the tool's definition), ``rel_diff`` ((llminfer − tool)/tool),
    ``same_definition`` (whether llminfer's own key means the same) and ``note`` (why they may
    differ). Seconds, per second, counts.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    log = _as_log(log)
    if tool is not None:
        return _against_tool(log, tool)
    requests = log.ok.reset_index(drop=True)
    m = request_metrics(RequestLog(requests, log.rejected, log.source))
    n = m["output_tokens"].to_numpy(dtype=float)
    ttft, e2e, decode = (m[c].to_numpy(dtype=float) for c in ("ttft_s", "e2e_s", "decode_s"))
    multi = n > 1
    per_request_tpot = decode[multi] / (n[multi] - 1)
    rows = {
        "vllm_tpot": _row(per_request_tpot),
        "genai_perf_itl": _row(per_request_tpot),
        "llmperf_itl": _row(e2e / n),
        "guidellm_tpot": _row(e2e / n, n.astype(np.int64)),
        "guidellm_itl": _row(per_request_tpot, (n[multi] - 1).astype(np.int64)),
    }
    notes = dict.fromkeys(DEFINITIONS, "")
    if "llmperf_itl_s" in requests.columns:
        own = requests["llmperf_itl_s"].to_numpy(dtype=float)
        rows["llmperf_itl"] = _row(own[~np.isnan(own)])
        notes["llmperf_itl"] = "llmperf's own per-request inter_token_latency_s"
    if "token_ts" in requests.columns and len(_chunk_gaps(requests)[0]):
        rows["vllm_itl"] = _row(_chunk_gaps(requests)[0])
        rows["sglang_itl"] = _row(_chunk_gaps(requests, per_token=True)[0])
        if "chunk_tokens" not in requests.columns:
            notes["sglang_itl"] = "no chunk_tokens in the log: one token per chunk assumed"
    else:
        for key in ("vllm_itl", "sglang_itl"):
            rows[key] = (float("nan"),) * 3
            notes[key] = "needs per-chunk timestamps (token_ts), which this log does not have"
    del ttft  # TTFT enters through E2E in the definitions that include it
    table = pd.DataFrame(
        [(*rows[k], DEFINITIONS[k], notes[k]) for k in DEFINITIONS],
        index=pd.Index(list(DEFINITIONS), name="definition_of"),
        columns=["mean_s", "p50_s", "p99_s", "definition", "note"],
    )
    return table


def _need_starts(log: RequestLog, what: str) -> None:
    if not log.source.starts_known:
        raise ValueError(
            f"can't tell {what}: the {log.source.format} log from {log.source.path} holds no "
            "request start times (every start_ts is 0), only per-request latencies"
        )


def in_flight(log: RequestLog | pd.DataFrame) -> pd.DataFrame:
    """Requests in flight (started, not yet ended) over time: columns ``time_s, in_flight``.

    A step function: each row holds the count from ``time_s`` until the next row. Failed
    requests without an end are left out. Vectorised (sort of start/end events).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    log = _as_log(log)
    _need_starts(log, "requests in flight")
    requests = log.requests
    start = requests["start_ts"].to_numpy(dtype=float)
    end = requests["end_ts"].to_numpy(dtype=float)
    known = np.isfinite(end)
    times = np.concatenate([start[known], end[known]])
    steps = np.concatenate([np.ones(known.sum()), -np.ones(known.sum())])
    order = np.lexsort((steps, times))  # at a tie, the ending request leaves first
    times, level = times[order], np.cumsum(steps[order])
    # One row per distinct time (none when no request has an end: all failed).
    keep = np.append(times[1:] != times[:-1], True) if len(times) else np.zeros(0, bool)
    return pd.DataFrame({"time_s": times[keep], "in_flight": level[keep].astype(np.int64)})


def output_tps_over_time(log: RequestLog | pd.DataFrame, bin_s: float = 1.0) -> pd.DataFrame:
    """Output tokens per second in bins of ``bin_s`` seconds: ``bin_start_s, output_tps``.

    Each successful request's first token lands at ``first_token_ts`` and its other N − 1
    tokens are spread evenly over ``[first_token_ts, end_ts]``; the bins sum to every output
    token. Vectorised: one piecewise-linear cumulative-token curve evaluated at the bin edges.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if isinstance(bin_s, bool) or not isinstance(bin_s, (int, float)) or not bin_s > 0:
        raise ValueError(f"bin_s={bin_s!r} must be a positive number of seconds")
    log = _as_log(log)
    _need_starts(log, "output tokens per second over time")
    ok = log.ok
    if ok.empty:
        return pd.DataFrame({"bin_start_s": [], "output_tps": []})
    first = ok["first_token_ts"].to_numpy(dtype=float)
    end = ok["end_ts"].to_numpy(dtype=float)
    rest = ok["output_tokens"].to_numpy(dtype=float) - 1
    t0 = float(ok["start_ts"].min())
    edges = t0 + bin_s * np.arange(math.ceil((end.max() - t0) / bin_s + 1e-12) + 1)
    # Cumulative tokens by time t: Σ 1[t ≥ first] + rest · clip((t − first)/(end − first), 0, 1).
    # Decodes shorter than a microsecond (below any clock's resolution) count as instantaneous;
    # spreading them would divide by ~0 and drown the other requests' rates in rounding.
    spread = end - first > 1e-6
    times = np.concatenate([first, first[spread], end[spread]])
    rate = rest[spread] / (end[spread] - first[spread])  # tokens/s while decoding
    slope = np.concatenate([np.zeros(first.size), rate, -rate])
    jumps = np.concatenate([1 + np.where(spread, 0, rest), np.zeros(2 * spread.sum())])
    order = np.argsort(times, kind="stable")
    times, slope, jumps = times[order], slope[order], jumps[order]
    rate_after = np.cumsum(slope)
    # Exactly zero whenever no request is decoding, so rounding never carries across idle gaps.
    active = np.cumsum(np.sign(slope))
    rate_after[active == 0] = 0.0
    grown = np.concatenate([[0.0], np.cumsum(rate_after[:-1] * np.diff(times))])
    jumped = np.cumsum(jumps)
    at = np.searchsorted(times, edges, side="right") - 1
    valid = at >= 0
    cumulative = np.zeros(edges.size)
    idx = at[valid]
    cumulative[valid] = grown[idx] + jumped[idx] + rate_after[idx] * (edges[valid] - times[idx])
    cumulative[0] = 0.0  # the first edge is the earliest start: no token comes before it
    return pd.DataFrame({"bin_start_s": edges[:-1], "output_tps": np.diff(cumulative) / bin_s})


def _against_tool(log: RequestLog, tool) -> pd.DataFrame:
    """One row per figure of a ``ToolSummary``: the tool's value beside llminfer's."""
    figures = tool.to_dict()
    wanted = sorted(
        {
            float(k.rsplit("_p", 1)[1])
            for k in figures
            if "_p" in k and k.rsplit("_p", 1)[1][0].isdigit()
        }
        | {50.0, 99.0}
    )
    mine = summarize(log, percentiles=wanted).to_dict()
    definitions = compare_definitions(log)
    stat_column = {"mean": "mean_s", "p50": "p50_s", "p99": "p99_s"}
    rows = []
    for key, value in figures.items():
        definition = tool.definitions.get(key, "")
        same = definition in ("", "vllm_tpot" if key.startswith("tpot_s") else "vllm_itl")
        note = ""
        if definition and not same:
            stat = key.rsplit("_", 1)[1]
            ours = (
                float(definitions.loc[definition, stat_column[stat]])
                if stat in stat_column
                else float("nan")
            )
            note = f"{tool.tool} means {DEFINITIONS[definition]}"
            if key in mine:
                note += f" llminfer's own {key} is {mine[key]:.6g}."
        else:
            ours = float(mine.get(key, float("nan")))
        rate = key in ("window_s", "rps", "output_tps", "input_tps", "total_tps", "goodput_rps")
        if rate and log.source.window_s is None:
            note = "llminfer's window: first request start → last end"
        if not key.startswith(("tpot_s", "itl_s", "output_tps", "window_s")) and any(
            "empty response" in a for a in log.source.assumptions
        ):
            note = (note + " " if note else "") + (
                "requests with 0 output tokens are failed in llminfer, successful in the tool"
            )
        diff = (ours - value) / value if value else float("nan")
        rows.append((tool.names[key], value, ours, diff, same, note))
    return pd.DataFrame(
        rows,
        index=pd.Index(list(figures), name="key"),
        columns=[
            "tool_name",
            "tool_value",
            "llminfer_value",
            "rel_diff",
            "same_definition",
            "note",
        ],
    )
