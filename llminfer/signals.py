"""Signals measured from a request log, the evidence behind chapter 7's rules: how many
requests were in flight when each arrived, how many prompt tokens of other requests ran during
each one's decode, how many KV tokens were held at the peak, and rank correlations between them.

All vectorised over requests (sorting and cumulative sums), so a log of a million requests takes
seconds, not minutes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from llminfer.logs import RequestLog
from llminfer.metrics import in_flight

#: Fewer pairs than this and a correlation is not evidence of anything.
MIN_CORRELATION_PAIRS = 20


def rank_correlation(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation of ``x`` and ``y`` (Pearson on ranks, in [-1, 1]) over the
    pairs where both are finite; NaN with fewer than ``MIN_CORRELATION_PAIRS`` pairs (a
    coefficient from a handful of points proves nothing) or without spread.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    keep = np.isfinite(x) & np.isfinite(y)
    if keep.sum() < MIN_CORRELATION_PAIRS:
        return float("nan")
    rx = pd.Series(x[keep]).rank().to_numpy()
    ry = pd.Series(y[keep]).rank().to_numpy()
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def fit_linear(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The least-squares line through the finite (x, y) pairs, evaluated at every x (same units
    as y); the mean of y where x has no spread. Used to take prompt length out of TTFT before
    asking whether what is left grows with load.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    keep = np.isfinite(x) & np.isfinite(y)
    if keep.sum() < 2 or np.ptp(x[keep]) == 0:
        return np.full_like(y, np.nanmean(y) if keep.any() else 0.0)
    slope, intercept = np.polyfit(x[keep], y[keep], 1)
    return slope * x + intercept


def in_flight_at_arrival(log: RequestLog | pd.DataFrame) -> np.ndarray:
    """For each request, in log order, how many requests (itself included) were in flight just
    after it arrived: the level of ``llminfer.metrics.in_flight`` at its start time.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    requests = log.requests if isinstance(log, RequestLog) else log
    start = requests["start_ts"].to_numpy(float)
    levels = in_flight(log)
    index = np.searchsorted(levels["time_s"].to_numpy(), start, side="right") - 1
    counts = levels["in_flight"].to_numpy()
    return np.where(index >= 0, counts[np.maximum(index, 0)], 0)


def overlapping_prefill_tokens(metrics: pd.DataFrame) -> np.ndarray:
    """For each request, prompt tokens of *other* requests whose prefill ran while it was
    decoding, per second of its decode (tokens/s).

    A prefill runs between ``scheduled_ts`` (or, without it, ``start_ts``) and the first token;
    its tokens are counted where that span overlaps ``[first token, end]`` of the request,
    spread evenly over the span. Exact and O(n log n): the cumulative count of prefill tokens
    done by time t is piecewise linear, with a kink at every prefill's start and end.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    begin = metrics["start_ts"].to_numpy(float)
    if "queue_s" in metrics:
        begin = begin + metrics["queue_s"].to_numpy(float)
    first = metrics["start_ts"].to_numpy(float) + metrics["ttft_s"].to_numpy(float)
    end = metrics["end_ts"].to_numpy(float)
    tokens = metrics["input_tokens"].to_numpy(float)
    ok = np.isfinite(begin) & np.isfinite(first) & np.isfinite(end)
    if not ok.any():
        return np.full(len(metrics), np.nan)
    span = first[ok] - begin[ok]
    instant = span <= 0  # a prefill of zero duration adds its tokens as a step
    rate = np.where(instant, 0.0, tokens[ok] / np.where(instant, 1.0, span))
    kinks = np.concatenate([begin[ok], first[ok]])
    slope_change = np.concatenate([rate, -rate])
    jump = np.concatenate([np.where(instant, tokens[ok], 0.0), np.zeros(ok.sum())])
    order = np.argsort(kinks, kind="stable")
    kinks, slope_change, jump = kinks[order], slope_change[order], jump[order]
    slope = np.cumsum(slope_change)  # slope just after each kink
    rise = np.concatenate([[0.0], slope[:-1] * np.diff(kinks)])
    done = np.cumsum(rise) + np.cumsum(jump)  # tokens done at (just after) each kink

    def done_by(t: np.ndarray) -> np.ndarray:
        i = np.searchsorted(kinks, t, side="right") - 1
        inside = i >= 0
        j = np.where(inside, i, 0)
        return np.where(inside, done[j] + slope[j] * (t - kinks[j]), 0.0)

    during = np.full(len(metrics), np.nan)
    during[ok] = done_by(end[ok]) - done_by(first[ok])
    decode_s = end - first
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok & (decode_s > 0), during / decode_s, np.nan)


def tokens_in_flight_peak(m: pd.DataFrame, ok: np.ndarray, samples: int = 200) -> float:
    """Peak over time of KV tokens held by running requests (prompt + tokens generated so far).

    A request holds its prompt from when prefill starts (``scheduled_ts`` if known, else its
    first token: without it, queued requests would be counted as holding memory) and gains
    output tokens evenly until it ends. ``m`` is ``llminfer.metrics.request_metrics`` of the log,
    ``ok`` marks the successful requests; sampled at ``samples`` instants. Tokens.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    good = m[ok]
    start = good["start_ts"].to_numpy(float)
    first = start + good["ttft_s"].to_numpy(float)
    held_from = start + good["queue_s"].to_numpy(float) if "queue_s" in good else first
    end = good["end_ts"].to_numpy(float)
    prompt = good["input_tokens"].to_numpy(float)
    output = good["output_tokens"].to_numpy(float)
    times = np.linspace(start.min(), end.max(), samples)
    peak = 0.0
    for t in times:
        active = (held_from <= t) & (t < end)
        if not active.any():
            continue
        span = np.maximum(end[active] - first[active], 1e-9)
        grown = np.clip((t - first[active]) / span, 0, 1) * output[active]
        peak = max(peak, float((prompt[active] + grown).sum()))
    return peak


def _step_integral(up: np.ndarray, down: np.ndarray):
    """A step function that rises by one at every ``up`` time and falls by one at every ``down``
    time, as (times, level after each time, area under it up to each time); NaNs left out."""
    keep = np.isfinite(up) & np.isfinite(down)
    times = np.concatenate([up[keep], down[keep]])
    steps = np.concatenate([np.ones(keep.sum()), -np.ones(keep.sum())])
    order = np.lexsort((steps, times))  # at a tie, leave before entering
    times, level = times[order], np.cumsum(steps[order])
    area = np.concatenate([[0.0], np.cumsum(level[:-1] * np.diff(times))]) if times.size else times
    return times, level, area


def _level_at(times: np.ndarray, level: np.ndarray, t: np.ndarray) -> np.ndarray:
    i = np.searchsorted(times, t, side="right") - 1
    return np.where(i >= 0, level[np.maximum(i, 0)] if level.size else 0, 0)


def _area_to(times: np.ndarray, level: np.ndarray, area: np.ndarray, t: np.ndarray) -> np.ndarray:
    if not times.size:
        return np.zeros_like(t)
    i = np.searchsorted(times, t, side="right") - 1
    j = np.maximum(i, 0)
    return np.where(i >= 0, area[j] + level[j] * (t - times[j]), 0.0)


def waiting_end(m: pd.DataFrame) -> np.ndarray:
    """When each request stopped waiting, in seconds: ``scheduled_ts`` where the log has it,
    else its first token (the waiting then includes its own prefill). NaN for a request that
    never got a first token. ``m`` is ``llminfer.metrics.request_metrics`` of the log.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    start = m["start_ts"].to_numpy(float)
    if "queue_s" in m:
        scheduled = start + m["queue_s"].to_numpy(float)
        first = start + m["ttft_s"].to_numpy(float)
        return np.where(np.isfinite(scheduled), scheduled, first)
    return start + m["ttft_s"].to_numpy(float)


def decoding_together(m: pd.DataFrame) -> np.ndarray:
    """For each request, how many requests (itself included) were *decoding* — between their
    first token and their end — on average over its own decode span. The batch size its decode
    steps ran at; queued requests and requests still in prefill are not counted. NaN when the
    request has no decode span (one output token, or no first token).

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    start = m["start_ts"].to_numpy(float)
    first = start + m["ttft_s"].to_numpy(float)
    end = m["end_ts"].to_numpy(float)
    times, level, area = _step_integral(first, end)
    span = end - first
    ok = np.isfinite(span) & (span > 0)
    out = np.full(len(m), np.nan)
    if ok.any():
        out[ok] = (
            _area_to(times, level, area, end[ok]) - _area_to(times, level, area, first[ok])
        ) / span[ok]
    return out


def waiting_at(m: pd.DataFrame, t: np.ndarray) -> np.ndarray:
    """How many requests were waiting (arrived, not yet scheduled — see ``waiting_end``) at each
    instant ``t`` (seconds, the log's clock). Requests.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    start = m["start_ts"].to_numpy(float)
    stop = waiting_end(m)
    # A request that never left the queue (failed before its first token) waits until its end.
    stop = np.where(np.isfinite(stop), stop, m["end_ts"].to_numpy(float))
    times, level, _ = _step_integral(start, stop)
    return _level_at(times, level, np.asarray(t, float)).astype(float)


def work_ahead(m: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """For each request, the requests that arrived before it and had not yet produced their
    first token when it arrived (waiting or in prefill: work the server does first under FCFS),
    as (count, their prompt tokens). O(n log n).

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    start = m["start_ts"].to_numpy(float)
    first = start + m["ttft_s"].to_numpy(float)
    first = np.where(np.isfinite(first), first, m["end_ts"].to_numpy(float))
    prompt = m["input_tokens"].to_numpy(float)
    prompt = np.where(np.isfinite(prompt), prompt, 0.0)
    keep = np.isfinite(start) & np.isfinite(first)
    order = np.argsort(start[keep], kind="stable")
    s_sorted, p_sorted = start[keep][order], prompt[keep][order]
    f_sorted = np.sort(first[keep])
    # Arrived strictly before t: searchsorted left; first token still to come at t: first > t.
    n_before = np.searchsorted(s_sorted, start, side="left")
    tokens_before = np.concatenate([[0.0], np.cumsum(p_sorted)])[n_before]
    # Of those, the ones whose first token came at or before t are done: subtract them. A request
    # has its first token after it starts, so "first ≤ t" implies "started before t".
    first_order = np.argsort(first[keep], kind="stable")
    done = np.searchsorted(f_sorted, start, side="right")
    tokens_done = np.concatenate([[0.0], np.cumsum(prompt[keep][first_order])])[done]
    count = np.maximum(n_before - done, 0)
    return count.astype(float), np.maximum(tokens_before - tokens_done, 0.0)


#: A time window needs at least this many arrivals for its percentiles to mean anything.
MIN_WINDOW_REQUESTS = 30
#: A window is overloaded when its queue grows by at least this many requests (and 2 % of its
#: arrivals) and ends with at least 2 × this − 1 waiting: arrivals above the service rate.
MIN_QUEUE_GROWTH = 3
#: At most this many windows over a run.
MAX_WINDOWS = 10


def time_windows(m: pd.DataFrame, ok: np.ndarray, slo: dict[str, float]) -> pd.DataFrame:
    """The run cut into equal windows of arrival time (at least ``MIN_WINDOW_REQUESTS``
    arrivals each on average, at most ``MAX_WINDOWS``), one row per window:

    ``window`` (label "k/K"), ``from_s``/``to_s`` (seconds since the first arrival),
    ``arrived`` and ``arrival_rps``, ``served_rps`` (successful completions in the window per
    second), ``waiting_start``/``waiting_end`` (requests waiting at its edges), ``ttft_p90_s``,
    ``tpot_p90_s`` and ``queue_p90_s`` (of requests that arrived in it; queue only with
    ``scheduled_ts``), ``decoding_mean`` (mean of ``decoding_together``), and ``overloaded``:
    the queue grows by at least max(``MIN_QUEUE_GROWTH``, 2 % of arrivals) and ends with at
    least 2 × ``MIN_QUEUE_GROWTH`` − 1 waiting — arrivals above the service rate. Empty when
    the run is too short.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    start = m["start_ts"].to_numpy(float)
    end = m["end_ts"].to_numpy(float)
    t0 = float(np.nanmin(start))
    span = float(np.nanmax(start)) - t0
    k = min(MAX_WINDOWS, len(m) // MIN_WINDOW_REQUESTS)
    if k < 1 or not span > 0:
        return pd.DataFrame()
    edges = t0 + span * np.arange(k + 1) / k
    edges[-1] = np.nextafter(edges[-1], np.inf)
    decoding = decoding_together(m)
    waiting = waiting_at(m, edges)
    rows = []
    for i in range(k):
        lo, hi = edges[i], edges[i + 1]
        inside = (start >= lo) & (start < hi)
        good = inside & ok
        width = hi - lo
        served = int((ok & (end >= lo) & (end < hi)).sum())
        row = {
            "window": f"{i + 1}/{k}",
            "from_s": lo - t0,
            "to_s": min(hi, t0 + span) - t0,
            "arrived": int(inside.sum()),
            "arrival_rps": inside.sum() / width,
            "served_rps": served / width,
            "waiting_start": float(waiting[i]),
            "waiting_end": float(waiting[i + 1]),
            "ttft_p90_s": _p90(m["ttft_s"].to_numpy(float)[good]),
            "tpot_p90_s": _p90(m["tpot_s"].to_numpy(float)[good]),
            "decoding_mean": float(np.nanmean(decoding[good])) if good.any() else np.nan,
        }
        if "queue_s" in m:
            row["queue_p90_s"] = _p90(m["queue_s"].to_numpy(float)[good])
        growth = row["waiting_end"] - row["waiting_start"]
        row["overloaded"] = bool(
            growth >= max(MIN_QUEUE_GROWTH, 0.02 * row["arrived"])
            and row["waiting_end"] >= 2 * MIN_QUEUE_GROWTH - 1
        )
        rows.append(row)
    return pd.DataFrame(rows)


def _p90(values: np.ndarray) -> float:
    values = values[np.isfinite(values)]
    return float(np.percentile(values, 90)) if values.size else float("nan")
