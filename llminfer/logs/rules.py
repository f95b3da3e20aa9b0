"""Chapter 6: each benchmark tool's own rules — which requests count, over which window the rates
are taken, where a request's E2E ends and how a percentile is read — and every figure of a tool's
summary recomputed from the log by those rules (``reproduce``), so that llminfer's number sits
next to the tool's own with a difference of ~0 and the rules say why llminfer's own differ.

Sources (the tools' released code; ``docs/metric-definitions.md`` has the details):

- vLLM 0.33.0 ``vllm/benchmarks/serve.py``: ``np.percentile`` (linear) over successful
  requests; TPOT (E2E − TTFT)/(N − 1); ITL every chunk gap, pooled; E2E ends at the last
  content chunk; rates over ``duration`` (first request sent → all done).
- AIPerf 0.13.0 ``aiperf/metrics/``: linear percentiles over the profiling records;
  ``benchmark_duration`` = last response − first request start, but the rates divide by
  ``observation_duration``: the profiling phase's start → end (``records_manager.py``,
  ``ExportContext(start_ns=phase.start_ns, end_ns=phase.requests_end_ns)``;
  ``metric_dicts.py`` ``observation_duration``), the aggregate's ``start_time``/``end_time``.
- GuideLLM 0.8.1 ``guidellm/benchmark/schemas/metrics.py`` (``GenerativeMetrics.compile``),
  ``accumulator.py`` (``get_within_range``: a request counts when it overlaps the measured
  window ``[measure_start, measure_end]``; TTFT by request start → first token, ITL by first
  token → request end), ``schemas/base/statistics.py`` (``Percentiles.from_pdf``: values
  merged, weights normalised, ``searchsorted(cumsum, p, side="left")`` — a nearest-rank
  percentile; rates: events in the window / its length) and ``schemas/base/request_stats.py``
  (``request_latency`` ends at ``request_end``, after the stream closed; TPOT and ITL end at
  the last token and are weighted by N and N − 1; output tokens spread evenly over the
  token iterations between first and last token).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from llminfer.logs.chunks import chunk_gaps
from llminfer.logs.quantiles import weighted_percentile
from llminfer.logs.schema import RequestLog

#: Percentile methods: ``linear`` (numpy's default) and ``nearest_rank`` (GuideLLM's).
PERCENTILE_METHODS = ("linear", "nearest_rank")
#: Windows: ``log`` first start → last end; ``duration`` the file's own run duration (vLLM);
#: ``phase`` the tool's phase bounds (AIPerf); ``measure`` the per-request measured window
#: columns ``measure_start_ts``/``measure_end_ts`` (GuideLLM).
WINDOWS = ("log", "duration", "phase", "measure")


@dataclass(frozen=True)
class ToolRules:
    """How one tool computes its figures, for ``reproduce`` and ``compare_definitions``.

    ``percentile``: ``"linear"`` or ``"nearest_rank"``; ``e2e_end``: ``"last_token"``
    (``end_ts``) or ``"response_end"`` (column ``response_end_ts``: the stream's close);
    ``window``: one of ``WINDOWS``; ``rate_window_s``: the tool's own rate denominator (s) when
    the log can't tell it (AIPerf's profiling phase; the duration of one run of a vLLM file
    holding several); ``weighted``: token-weighted TPOT/ITL
    (GuideLLM); ``benchmark``: only the log's rows of this ``benchmark`` (a file holding
    several); ``resolution``: the quantum of each figure as the tool printed it (a CSV's two
    decimals), in llminfer's units, to round llminfer's value the same way; ``slo``: the
    thresholds the tool's goodput was counted with (``GOODPUT_METRICS``: ``ttft_s``,
    ``tpot_s``, ``itl_s``, ``e2e_s`` in seconds, at most; ``user_tps`` tokens/s per user, at
    least), empty when unknown; ``text``: the rules in words.

    Introduced in: notebooks/06_log_analysis.ipynb
    """

    tool: str
    percentile: str = "linear"
    e2e_end: str = "last_token"
    window: str = "log"
    rate_window_s: float | None = None
    weighted: bool = False
    benchmark: int | None = None
    resolution: dict[str, float] = field(default_factory=dict)
    slo: dict[str, float] = field(default_factory=dict)
    text: str = ""

    def __post_init__(self) -> None:
        if self.percentile not in PERCENTILE_METHODS:
            raise ValueError(f"percentile={self.percentile!r}: use one of {PERCENTILE_METHODS}")
        if self.window not in WINDOWS:
            raise ValueError(f"window={self.window!r}: use one of {WINDOWS}")
        if self.e2e_end not in ("last_token", "response_end"):
            raise ValueError(f"e2e_end={self.e2e_end!r}: use 'last_token' or 'response_end'")
        check_goodput_slo(self.slo)


#: What a tool's goodput can be counted on, in llminfer's names: a latency in seconds that a
#: good request stays at or under, or ``user_tps`` (1 / ITL, tokens/s per user: AIPerf's
#: ``output_token_throughput_per_user``) that it reaches at least.
GOODPUT_METRICS = {
    "ttft_s": "TTFT (s)",
    "tpot_s": "TPOT, (E2E − TTFT)/(N − 1) (s)",
    "itl_s": "ITL, (E2E − TTFT)/(N − 1) (s)",
    "e2e_s": "E2E (s)",
    "user_tps": "tokens/s per user, 1 / ITL (at least)",
}


def check_goodput_slo(slo) -> dict[str, float]:
    """``slo`` (``{metric: threshold}``, ``GOODPUT_METRICS``' names) checked: a dict of
    positive finite numbers; ValueError names what is wrong.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if not isinstance(slo, dict):
        raise ValueError(f"slo={slo!r} must be a dict of {{metric: threshold}}")
    for name, value in slo.items():
        if name not in GOODPUT_METRICS:
            raise ValueError(
                f"slo: {name!r} is not a goodput metric; use {', '.join(GOODPUT_METRICS)}"
            )
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"slo: {name}={value!r} must be a number")
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"slo: {name}={value!r} must be positive and finite")
    return slo


def good_requests(
    rules: ToolRules, ok, ttft, e2e, decode_per_token, n_out
) -> tuple[np.ndarray, np.ndarray]:
    """``(good, measured)``: which requests meet every threshold of ``rules.slo``, and which
    have every thresholded figure at all (arrays, one entry per request; ``decode_per_token``
    is (E2E − TTFT)/(N − 1), NaN for N ≤ 1). A request of one token has a TPOT of 0 to vLLM
    (``calculate_metrics``: "if output_len <= 1, we regard tpot as 0 for goodput"), no ITL to
    AIPerf (``NoMetricValue``: not good) and to GuideLLM (undetermined: ``is_conforming``
    gives None, and the request is out of its attainment's count). At most / at least, as
    the tools compare (``s >= r``; ``_passes``; ``value > objective`` fails).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    per_token = decode_per_token
    if rules.tool == "vllm":
        per_token = np.where(n_out <= 1, 0.0, decode_per_token)
    with np.errstate(divide="ignore", invalid="ignore"):
        values = {
            "ttft_s": ttft,
            "e2e_s": e2e,
            "tpot_s": per_token,
            "itl_s": per_token,
            "user_tps": 1.0 / per_token,
        }
    good = np.asarray(ok, bool).copy()
    measured = good.copy()
    for name, threshold in rules.slo.items():
        value = values[name]
        measured &= np.isfinite(value)
        good &= (value >= threshold) if name == "user_tps" else (value <= threshold)
    return good, measured


VLLM = ToolRules(
    "vllm",
    window="duration",
    text="vLLM: successful requests; linear percentiles (np.percentile); E2E to the last "
    "content chunk; ITL = every chunk gap pooled; rates over the file's duration",
)
AIPERF = ToolRules(
    "aiperf",
    window="phase",
    text="AIPerf: profiling-phase records (warm-up out); linear percentiles; E2E to the final "
    "response; benchmark_duration = last response − first request start, but rates over the "
    "profiling phase's start → end (observation_duration)",
)
GUIDELLM = ToolRules(
    "guidellm",
    percentile="nearest_rank",
    e2e_end="response_end",
    window="measure",
    weighted=True,
    text="GuideLLM: requests overlapping the measured window (warm-up and cool-down cut; TTFT "
    "windowed by first token, ITL from first token); nearest-rank percentiles of a weighted "
    "distribution; request_latency to the response's end; TPOT/ITL weighted by N and N − 1; "
    "rates = events inside the window / its length",
)


def adjusted_metric(metric: str) -> str:
    """The key of a metric's error-adjusted figures (AIPerf's ``adj_<tag>``, failed requests
    as +inf): ``ttft_s`` → ``ttft_adj_s`` (seconds, as the metric).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    return f"{metric.removesuffix('_s')}_adj_s"


def nearest_rank(values, weights, q: float) -> float:
    """GuideLLM's percentile: the smallest value whose weighted CDF reaches ``q`` (0–100).

    Equal values are merged and zero weights dropped before the CDF, as
    ``DistributionSummary.from_values`` does. NaN without values.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    return _from_pdf(*_pdf(values, weights), q)


def _from_pdf(values: np.ndarray, probabilities: np.ndarray, q: float) -> float:
    if values.size == 0:
        return math.nan
    cdf = np.cumsum(probabilities)
    index = min(int(np.searchsorted(cdf, q / 100.0, side="left")), values.size - 1)
    return float(values[index])


def _pdf(values, weights) -> tuple[np.ndarray, np.ndarray]:
    values = np.asarray(values, dtype=float)
    weights = np.ones_like(values) if weights is None else np.asarray(weights, dtype=float)
    order = np.argsort(values)
    unique, inverse = np.unique(values[order], return_inverse=True)
    combined = np.zeros_like(unique)
    np.add.at(combined, inverse, weights[order])
    keep = combined > 0
    unique, combined = unique[keep], combined[keep]
    total = combined.sum()
    if unique.size and total <= 1e-6:
        combined, total = np.ones_like(unique), float(unique.size)
    return unique, combined / total if unique.size else combined


def statistic(values, weights, stat: str, method: str = "linear") -> float:
    """``mean``, ``min``, ``max`` or ``pNN`` of ``values`` (optionally weighted) by ``method``:
    ``"linear"`` (numpy's default), ``"nearest_rank"`` (GuideLLM's) or ``"nearest"`` (numpy's
    ``method="nearest"``, unweighted: AIPerf's error-adjusted figures).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    values = np.asarray(values, dtype=float)
    if weights is not None:
        weights = np.asarray(weights, dtype=float)
    if method == "nearest_rank":
        unique, probabilities = _pdf(values, weights)
        if unique.size == 0:
            return math.nan
        if stat == "mean":
            return float(np.sum(unique * probabilities))
        if stat in ("min", "max"):
            return float(unique[0] if stat == "min" else unique[-1])
        return _from_pdf(unique, probabilities, _q(stat))
    if weights is not None:
        keep = weights > 0
        values, weights = values[keep], weights[keep]
    if values.size == 0:
        return math.nan
    if method == "nearest" and weights is not None:
        raise ValueError("method='nearest' (numpy's) takes no weights")
    if method == "nearest" and stat.startswith("p"):  # numpy's: the sample nearest the rank
        return float(np.percentile(values, _q(stat), method="nearest"))
    if stat == "mean":
        return float(values.mean() if weights is None else np.average(values, weights=weights))
    if stat in ("min", "max"):
        return float(values.min() if stat == "min" else values.max())
    q = _q(stat)
    if weights is None:
        return float(np.percentile(values, q))
    return float(weighted_percentile(values, weights.astype(np.int64), q / 100))


def _q(stat: str) -> float:
    try:
        q = float(stat[1:]) if stat.startswith("p") else math.nan
    except ValueError:
        q = math.nan
    return q if 0 <= q <= 100 else math.nan


def _column(requests: pd.DataFrame, name: str, default=np.nan) -> np.ndarray:
    if name in requests.columns:
        return pd.to_numeric(requests[name], errors="coerce").to_numpy(dtype=float)
    return np.full(len(requests), default, dtype=float)


def rows_of(log: RequestLog, rules: ToolRules) -> pd.DataFrame:
    """The log's rows a tool's figures come from (one benchmark of a file holding several).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    requests = log.requests
    if rules.benchmark is not None and "benchmark" in requests.columns:
        requests = requests[requests["benchmark"] == rules.benchmark]
    return requests.reset_index(drop=True)


def vllm_peaks(requests: pd.DataFrame, ok: np.ndarray) -> tuple[float, float]:
    """vLLM's ``max_output_tokens_per_s`` and ``max_concurrent_requests``
    (``calculate_metrics``, 0.33): one-second buckets from the first successful request's
    start; every streamed token (chunk) of a successful request counts in the bucket of its
    arrival, and a request counts as active in every bucket from its start's to its end's
    (both included). The peaks are each one's largest bucket (not the same bucket).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    start, end = _column(requests, "start_ts")[ok], _column(requests, "end_ts")[ok]
    if not ok.any() or "token_ts" not in requests.columns:
        return 0.0, 0.0
    origin = float(start.min())
    buckets = int(np.ceil(float(end.max()) - origin)) + 1
    tokens, active = np.zeros(buckets), np.zeros(buckets)
    for times in requests.loc[ok, "token_ts"]:
        if times is None:
            continue
        index = (np.asarray(times, dtype=float) - origin).astype(int)
        index = index[(index >= 0) & (index < buckets)]
        np.add.at(tokens, index, 1)
    for a, b in zip((start - origin).astype(int), (end - origin).astype(int), strict=True):
        active[a : b + 1] += 1
    return float(tokens.max()), float(active.max())


def reproduce(log: RequestLog, tool) -> dict[str, float]:
    """Every figure of ``tool`` (a ``ToolSummary`` with ``rules``) recomputed from ``log`` by
    the tool's own rules: same requests, window, E2E end, weights and percentile method;
    goodput over ``rules.slo`` (``good_requests``). A figure the log cannot give (a goodput
    without the SLO) is NaN. Seconds, per second, counts.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    rules: ToolRules = tool.rules
    requests = rows_of(log, rules)
    ok = (requests["status"] == "ok").to_numpy()
    start, first, end = (_column(requests, c) for c in ("start_ts", "first_token_ts", "end_ts"))
    n_out = _column(requests, "output_tokens", 0.0)
    n_in = _column(requests, "input_tokens", 0.0)
    response_end = _column(requests, "response_end_ts")
    response_end = np.where(np.isnan(response_end), end, response_end)
    stop = response_end if rules.e2e_end == "response_end" else end
    ttft, e2e = first - start, stop - start
    multi = ok & (n_out > 1)
    streamed = (
        requests["streamed"].to_numpy(dtype=bool)
        if "streamed" in requests.columns
        else np.ones(len(requests), bool)
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        decode_per_token = np.where(multi, (end - first) / (n_out - 1), np.nan)
    if rules.window == "measure":  # GuideLLM: a request not streamed has an ITL of 0
        decode_per_token = np.where(multi & ~streamed, 0.0, decode_per_token)

    counted = np.ones(len(requests), bool)
    sets = {"ttft_s": ok.copy(), "e2e_s": ok.copy(), "tpot_s": ok.copy(), "itl_s": ok.copy()}
    rates: dict[str, float] = {}
    if rules.window == "measure":
        lo = float(_column(requests, "measure_start_ts")[0]) if len(requests) else math.nan
        hi = float(_column(requests, "measure_end_ts")[0]) if len(requests) else math.nan
        if not math.isfinite(hi - lo):  # a file before 0.5 lists only measured requests
            lo = float(np.nanmin(start)) if len(requests) else math.nan
            hi = float(np.nanmax(response_end)) if len(requests) else math.nan
        known = ~np.isnan(response_end)
        counted = known & (response_end >= lo) & (start <= hi)
        # not streamed (no first-token time): out of TTFT; in ITL with 0 by the response's end
        from_first = np.where(streamed, first, response_end)
        sets = {
            "ttft_s": ok & streamed & (start <= hi) & (first >= lo),
            "e2e_s": ok & counted,
            "tpot_s": ok & counted,
            "itl_s": ok & (from_first <= hi) & (response_end >= lo),
        }
        length = hi - lo
        done = ok & counted & (response_end >= lo) & (response_end <= hi)
        rates["window_s"] = length
        rates["rps"] = done.sum() / length
        rates["output_tps"] = _spread_tokens(requests, ok & counted, lo, hi) / length
        rates["input_tps"] = (
            _prompt_tokens(first, response_end, n_in, ok & counted, lo, hi) / length
        )
        rates["total_tps"] = rates["input_tps"] + rates["output_tps"]
        # the time-weighted mean of requests in flight: each counted request's overlap with
        # the window, summed, over the window's length
        overlap = np.minimum(response_end, hi) - np.maximum(start, lo)
        rates["concurrency_mean"] = float(overlap[ok & counted].sum()) / length
        if rules.slo:  # GuideLLM's _compile_goodput over the window's requests
            ttft_known = np.where(streamed, ttft, np.nan)  # not streamed: no TTFT
            good, measured = good_requests(
                rules, ok & counted, ttft_known, e2e, decode_per_token, n_out
            )
            error = requests["error"].astype(str).to_numpy() if "error" in requests else []
            errored = counted & ~ok & (np.asarray(error) == "errored")
            determined = int(measured.sum() + errored.sum())
            inside = (response_end >= lo) & (response_end <= hi)
            rates["goodput_rps"] = (good & inside).sum() / length
            rates["good_fraction"] = good.sum() / determined if determined else math.nan
    else:
        if rules.window == "duration" and rules.rate_window_s:  # one run of several
            window = float(rules.rate_window_s)
        elif rules.window == "duration" and log.source.window_s is not None:
            window = float(log.source.window_s)
        else:
            window = float(np.nanmax(end[ok]) - np.nanmin(start[ok])) if ok.any() else math.nan
        rate_window = rules.rate_window_s if rules.window == "phase" else None
        per = rate_window if rate_window else window
        rates["window_s"] = window
        rates["rps"] = ok.sum() / per
        rates["output_tps"] = n_out[ok].sum() / per
        rates["input_tps"] = n_in[ok].sum() / per
        rates["total_tps"] = (n_out[ok].sum() + n_in[ok].sum()) / per
        if rules.slo:  # the tool's own thresholds, from its file or its user
            good, _ = good_requests(rules, ok, ttft, e2e, decode_per_token, n_out)
            rates["goodput_rps"] = good.sum() / per
            # AIPerf's good_request_fraction: over every request, the failed ones too
            rates["good_fraction"] = good.sum() / len(good) if len(good) else math.nan
        if rules.tool == "vllm" and {"peak_output_tps", "peak_concurrency"} & set(tool.values):
            rates["peak_output_tps"], rates["peak_concurrency"] = vllm_peaks(requests, ok)
    counts = {
        "n_requests": float(counted.sum()),
        "n_failed": float((counted & ~ok).sum()),
    }

    samples: dict[str, tuple[np.ndarray, np.ndarray | None]] = {
        "ttft_s": (ttft[sets["ttft_s"]], None),
        "e2e_s": (e2e[sets["e2e_s"]], None),
    }
    if {"ttst_s", "user_tps"} & {k.rsplit("_", 1)[0] for k in tool.values}:
        samples.update(_aiperf_per_request(requests, ok, decode_per_token))
    definitions = getattr(tool, "definitions", {})
    for metric in ("tpot_s", "itl_s"):
        kind = next((v for k, v in definitions.items() if k.startswith(metric)), "vllm_tpot")
        chosen = sets[metric]
        if kind == "guidellm_tpot":
            with np.errstate(invalid="ignore", divide="ignore"):
                values = (end - start) / n_out
            use = chosen & (n_out > 0)
            samples[metric] = (values[use], n_out[use])
        elif kind == "guidellm_itl":
            use = chosen & multi
            samples[metric] = (decode_per_token[use], n_out[use] - 1)
        elif kind == "vllm_itl":
            part = requests[chosen]
            gaps = chunk_gaps(part)[0] if "token_ts" in part.columns and len(part) else []
            samples[metric] = (np.asarray(gaps, dtype=float), None)
        else:  # (E2E − TTFT)/(N − 1) per request: vLLM's TPOT, AIPerf's/GenAI-Perf's ITL
            use = chosen & multi
            samples[metric] = (decode_per_token[use], None)

    if any("_adj_s_" in k for k in tool.values):
        # AIPerf's error-adjusted figures: each failed request counted as +inf
        failed = np.full(int((counted & ~ok).sum()), np.inf)
        for metric in ("ttft_s", "e2e_s", "itl_s"):
            values = np.concatenate([samples[metric][0], failed])
            samples[adjusted_metric(metric)] = (values, None)

    out: dict[str, float] = {}
    for key in tool.values:
        if key in counts:
            value = counts[key]
        elif key in rates:
            value = float(rates[key])
        elif key.rsplit("_", 1)[0] in samples:
            metric, stat = key.rsplit("_", 1)
            values, weights = samples[metric]
            if not rules.weighted:
                weights = None
            # AIPerf's error-adjusted percentiles are numpy's "nearest" (no inf - inf)
            method = "nearest" if metric.endswith("_adj_s") else rules.percentile
            value = statistic(values, weights, stat, method)
        else:
            value = math.nan
        quantum = rules.resolution.get(key)
        if quantum and math.isfinite(value):
            value = round(value / quantum) * quantum
        out[key] = value
    return out


def _aiperf_per_request(
    requests: pd.DataFrame, ok: np.ndarray, decode_per_token: np.ndarray
) -> dict[str, tuple[np.ndarray, None]]:
    """AIPerf's time to second token (the second streamed chunk less the first, for a request
    with two at least: the records' first inter-chunk gap where the log keeps it, else from
    ``token_ts``) and output tokens/s per user (1 / its ITL, (E2E − TTFT)/(N − 1))."""
    second = []
    if "second_chunk_gap_s" in requests.columns:  # AIPerf's records: each first gap, exact
        gap = requests["second_chunk_gap_s"].to_numpy(dtype=float)
        second = list(gap[ok & np.isfinite(gap)])
    elif "token_ts" in requests.columns:
        for times, good in zip(requests["token_ts"], ok, strict=True):
            if good and times is not None and len(times) >= 2:
                second.append(float(times[1]) - float(times[0]))
    usable = ok & np.isfinite(decode_per_token) & (decode_per_token > 0)
    return {
        "ttst_s": (np.asarray(second, dtype=float), None),
        "user_tps": (1.0 / decode_per_token[usable], None),
    }


def _spread_tokens(requests: pd.DataFrame, use: np.ndarray, lo: float, hi: float) -> float:
    """Output tokens whose (evenly spread) arrival lies in ``[lo, hi]``: GuideLLM's
    ``output_tokens_timings`` — the first token at the first token's time, the other N − 1
    spread evenly over the token iterations up to the last token."""
    first = _column(requests, "first_token_ts")
    last = _column(requests, "end_ts")
    response_end = _column(requests, "response_end_ts")
    n_out = _column(requests, "output_tokens", 0.0)
    iterations = _column(requests, "token_iterations", 0.0)
    total = 0.0
    for i in np.flatnonzero(use):
        n, k = n_out[i], int(iterations[i]) if np.isfinite(iterations[i]) else 0
        if np.isnan(first[i]) or np.isnan(last[i]) or k <= 1:
            at = last[i] if np.isfinite(last[i]) else response_end[i]
            total += n if lo <= at <= hi else 0.0
            continue
        total += float(n > 0) if lo <= first[i] <= hi else 0.0
        per_iteration = (n - 1) / (k - 1)
        times = np.linspace(first[i], last[i], num=k)[1:]
        total += per_iteration * int(((times >= lo) & (times <= hi)).sum())
    return total


def _prompt_tokens(first, response_end, n_in, use, lo: float, hi: float) -> float:
    """Prompt tokens counted at the first token (else the response's end) inside the window."""
    at = np.where(np.isnan(first), response_end, first)
    inside = use & (at >= lo) & (at <= hi)
    return float(n_in[inside].sum())
