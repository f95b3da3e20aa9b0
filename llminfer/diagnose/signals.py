"""Signals measured from a request log, the evidence behind chapter 7's rules: how many
requests were in flight when each arrived, how many prompt tokens of other requests ran during
each one's decode, how many KV tokens were held at the peak, and rank correlations between them.

All vectorised over requests (sorting and cumulative sums), so a log of a million requests takes
seconds, not minutes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from llminfer.diagnose.sorted_times import (
    SortedTimes,
    first_of_ties,
    last_of_ties,
    merge,
    search,
    tie_runs,
)
from llminfer.logs.schema import RequestLog
from llminfer.logs.timeline import in_flight

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


def completion_rate(end_ts: np.ndarray) -> float:
    """Requests/s completed over the middle 80 % of completions (the 10th to the 90th percentile
    of ``end_ts``, seconds): the served rate without the first completions (one latency after
    the first arrival) and the last (the drain). NaN for fewer than 2 completions.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    end = np.sort(np.asarray(end_ts, dtype=float))
    end = end[np.isfinite(end)]
    if len(end) < 2:
        return float("nan")
    lo, hi = int(0.1 * len(end)), int(0.9 * len(end))
    hi = min(hi, len(end) - 1)
    return (hi - lo) / (end[hi] - end[lo]) if end[hi] > end[lo] else float("inf")


def in_flight_at_arrival(log: RequestLog | pd.DataFrame) -> np.ndarray:
    """For each request, in log order, how many requests (itself included) were in flight just
    after it arrived: the level of ``llminfer.logs.timeline.in_flight`` at its start time.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    requests = log.requests if isinstance(log, RequestLog) else log
    start = requests["start_ts"].to_numpy(float)
    levels = in_flight(log)
    index = np.searchsorted(levels["time_s"].to_numpy(), start, side="right") - 1
    counts = levels["in_flight"].to_numpy()
    return np.where(index >= 0, counts[np.maximum(index, 0)], 0)


def overlapping_prefill_tokens(
    metrics: pd.DataFrame, times: SortedTimes | None = None
) -> np.ndarray:
    """For each request, prompt tokens of *other* requests whose prefill ran while it was
    decoding, per second of its decode (tokens/s).

    A prefill runs between ``scheduled_ts`` (or, without it, ``start_ts``) and the first token;
    its tokens are counted where that span overlaps ``[first token, end]`` of the request,
    spread evenly over the span. Exact and O(n log n): the cumulative count of prefill tokens
    done by time t is piecewise linear, with a kink at every prefill's start and end.
    ``times``: the rows' ``SortedTimes``, to reuse sorts already made (built when None).

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    times = SortedTimes(metrics) if times is None else times
    by = "start" if times.scheduled is None else "scheduled"
    begin = times.start if times.scheduled is None else times.scheduled
    first, end = times.first, times.end
    tokens = metrics["input_tokens"].to_numpy(float)
    ok = np.isfinite(begin) & np.isfinite(first) & np.isfinite(end)
    if not ok.any():
        return np.full(len(metrics), np.nan)
    # Kinks in log order would be [begin of each ok row, first token of each ok row], sorted
    # stably; merging the two sorted runs gives that order without sorting them again.
    begin_rows, first_rows = times.rows(by, ok), times.rows("first", ok)
    span = first - begin
    instant = span <= 0  # a prefill of zero duration adds its tokens as a step
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(instant, 0.0, tokens / np.where(instant, 1.0, span))
    kinks, order = merge(begin[begin_rows], first[first_rows])
    slope = np.concatenate([rate[begin_rows], -rate[first_rows]])[order]
    np.cumsum(slope, out=slope)  # slope just after each kink
    # Tokens done at (just after) each kink: the area under the slope, plus the steps.
    done = np.empty(kinks.size)
    done[0] = 0.0
    np.subtract(kinks[1:], kinks[:-1], out=done[1:])
    done[1:] *= slope[:-1]
    np.cumsum(done, out=done)  # the leading 0 is summed too, as np.cumsum(rise) did
    if instant[begin_rows].any():  # (adding no steps, 0.0, would change nothing: done ≥ +0.0)
        jump = np.zeros(kinks.size)
        jump[: begin_rows.size] = np.where(instant[begin_rows], tokens[begin_rows], 0.0)
        jump = jump[order]
        done += np.cumsum(jump, out=jump)
        del jump
    del rate, instant, span

    def done_at(t: np.ndarray, i: np.ndarray) -> np.ndarray:
        # i = the last kink at or before t (np.searchsorted(kinks, t, side="right") - 1);
        # done[i] + slope[i] * (t - kinks[i]) where i ≥ 0, else 0, in one buffer.
        inside = i >= 0
        np.maximum(i, 0, out=i)
        value = kinks[i]
        np.subtract(t, value, out=value)
        np.multiply(slope[i], value, out=value)
        np.add(done[i], value, out=value)
        value[~inside] = 0.0
        return value

    during = np.full(len(metrics), np.nan)
    # At each request's end (ascending, so the searches stay in cache) ...
    end_rows = times.rows("end", ok)
    t = end[end_rows]
    during[end_rows] = done_at(t, np.searchsorted(kinks, t, side="right") - 1)
    # ... less at its first token, itself a kink: the last kink tied with it, no search.
    t = first[first_rows]
    at_first = np.flatnonzero(order >= begin_rows.size)
    during[first_rows] -= done_at(t, last_of_ties(kinks, at_first))
    decode_s = end - first
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok & (decode_s > 0), during / decode_s, np.nan)


def tokens_in_flight_peak(m: pd.DataFrame, ok: np.ndarray, samples: int = 200) -> float:
    """Peak over time of KV tokens held by running requests (prompt + tokens generated so far).

    A request holds its prompt from when prefill starts (``scheduled_ts`` if known, else its
    first token: without it, queued requests would be counted as holding memory) and gains
    output tokens evenly until it ends. ``m`` is ``llminfer.logs.metrics.request_metrics`` of the
    log,
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


def _step_integral_at_events(times: SortedTimes, up: str, down: str):
    """A step function that rises by one at every ``up`` time and falls by one at every ``down``
    time (rows where both are finite; at a tie, leaving before entering), and the area under it
    up to each row's own ``up`` and ``down`` time (NaN for the other rows)."""
    up_t, down_t = getattr(times, up), getattr(times, down)
    keep = np.isfinite(up_t) & np.isfinite(down_t)
    up_rows, down_rows = times.rows(up, keep), times.rows(down, keep)
    # Events by time, downs before ups at a tie, each kind in row order among equal times:
    # the merge of the two sorted kinds.
    event_t, order = merge(down_t[down_rows], up_t[up_rows])
    is_up = order >= down_rows.size
    del order
    level = np.where(is_up, 1.0, -1.0)
    np.cumsum(level, out=level)
    area = np.empty(event_t.size)
    if event_t.size:
        area[0] = 0.0
        np.subtract(event_t[1:], event_t[:-1], out=area[1:])
        area[1:] *= level[:-1]
        np.cumsum(area[1:], out=area[1:])  # area[0] = 0 is prepended, not summed
    # The area at each event's own time t: area[j] + level[j] * (t - t_j) with j the last event
    # tied with it (np.searchsorted(event_t, t, side="right") - 1). For an event with no tie,
    # j is itself and t - t_j = +0.0: work out the few tied ones, then the rest in place.
    tied, _, j = tie_runs(event_t)
    at_tied = area[j] + level[j] * (event_t[tied] - event_t[j])
    del event_t
    at_event = area
    np.multiply(level, 0.0, out=level)
    np.add(at_event, level, out=at_event)
    at_event[tied] = at_tied
    del level
    at_up, at_down = np.full(len(times), np.nan), np.full(len(times), np.nan)
    at_up[up_rows] = at_event[is_up]
    at_down[down_rows] = at_event[~is_up]
    return at_up, at_down


def waiting_end(m: pd.DataFrame) -> np.ndarray:
    """When each request stopped waiting, in seconds: ``scheduled_ts`` where the log has it,
    else its first token (the waiting then includes its own prefill). NaN for a request that
    never got a first token. ``m`` is ``llminfer.logs.metrics.request_metrics`` of the log.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    start = m["start_ts"].to_numpy(float)
    if "queue_s" in m:
        scheduled = start + m["queue_s"].to_numpy(float)
        first = start + m["ttft_s"].to_numpy(float)
        return np.where(np.isfinite(scheduled), scheduled, first)
    return start + m["ttft_s"].to_numpy(float)


def decoding_together(m: pd.DataFrame, times: SortedTimes | None = None) -> np.ndarray:
    """For each request, how many requests (itself included) were *decoding* — between their
    first token and their end — on average over its own decode span. The batch size its decode
    steps ran at; queued requests and requests still in prefill are not counted. NaN when the
    request has no decode span (one output token, or no first token). ``times``: the rows'
    ``SortedTimes``, to reuse sorts already made (built when None).

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    times = SortedTimes(m) if times is None else times
    span = times.end - times.first
    ok = np.isfinite(span) & (span > 0)
    if not ok.any():
        return np.full(len(m), np.nan)
    at_first, at_end = _step_integral_at_events(times, "first", "end")
    out = np.subtract(at_end, at_first, out=at_end)
    del at_first
    np.divide(out, span, out=out, where=ok)
    out[~ok] = np.nan
    return out


def waiting_at(m: pd.DataFrame, t: np.ndarray, times: SortedTimes | None = None) -> np.ndarray:
    """How many requests were waiting (arrived, not yet scheduled — see ``waiting_end``) at each
    instant ``t`` (seconds, the log's clock). Requests. ``times``: the rows' ``SortedTimes``, to
    reuse sorts already made.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    start = m["start_ts"].to_numpy(float)
    waited = waiting_end(m)
    # A request that never left the queue (failed before its first token) waits until its end.
    stop = np.where(np.isfinite(waited), waited, m["end_ts"].to_numpy(float))
    keep = np.isfinite(start) & np.isfinite(stop)
    t = np.asarray(t, float)
    # Waiting at t: arrived at or before t, less stopped waiting at or before t.
    arrived_sorted = np.sort(start[keep]) if times is None else start[times.rows("start", keep)]
    if times is not None and times.scheduled is None and np.isfinite(waited[keep]).all():
        stop_sorted = stop[times.rows("first", keep)]  # waiting ends at the first token
    else:
        stop_sorted = np.sort(stop[keep])
    arrived = np.searchsorted(arrived_sorted, t, side="right")
    left = np.searchsorted(stop_sorted, t, side="right")
    return (arrived - left).astype(float)


def work_ahead(m: pd.DataFrame, times: SortedTimes | None = None) -> tuple[np.ndarray, np.ndarray]:
    """For each request, the requests that arrived before it and had not yet produced their
    first token when it arrived (waiting or in prefill: work the server does first under FCFS),
    as (count, their prompt tokens). O(n log n). ``times``: the rows' ``SortedTimes``, to reuse
    sorts already made (built when None).

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    times = SortedTimes(m) if times is None else times
    start = times.start
    missing = ~np.isfinite(times.first)
    first = np.where(missing, times.end, times.first)
    prompt = m["input_tokens"].to_numpy(float)
    prompt = np.where(np.isfinite(prompt), prompt, 0.0)
    keep = np.isfinite(start) & np.isfinite(first)
    start_rows = times.rows("start", keep)
    if (missing & keep).any():  # some first tokens stand in for by ends: sort them afresh
        first_rows = np.flatnonzero(keep)[np.argsort(first[keep], kind="stable")]
    else:
        first_rows = times.rows("first", keep)
    # Arrived strictly before t: searchsorted left; first token still to come at t: first > t.
    s_sorted = start[start_rows]
    n_before = np.empty(start.size, dtype=np.intp)
    # A request's own arrival is in s_sorted: the first of its ties there, no search; the rest
    # (no first token, no end) are searched for.
    n_before[start_rows] = first_of_ties(s_sorted, np.arange(start_rows.size))
    other = np.flatnonzero(~keep)
    n_before[other] = np.searchsorted(s_sorted, start[other], side="left")
    tokens_before = np.concatenate([[0.0], np.cumsum(prompt[start_rows])])[n_before]
    # Of those, the ones whose first token came at or before t are done: subtract them. A request
    # has its first token after it starts, so "first ≤ t" implies "started before t".
    done = search(first[first_rows], start, times.order("start"), "right")
    tokens_done = np.concatenate([[0.0], np.cumsum(prompt[first_rows])])[done]
    count = np.maximum(n_before - done, 0)
    return count.astype(float), np.maximum(tokens_before - tokens_done, 0.0)


#: A time window needs at least this many arrivals for its percentiles to mean anything.
MIN_WINDOW_REQUESTS = 30
#: A window is overloaded when its queue grows by at least this many requests (and 2 % of its
#: arrivals) and ends with at least 2 × this − 1 waiting: arrivals above the service rate.
MIN_QUEUE_GROWTH = 3
#: At most this many windows over a run.
MAX_WINDOWS = 10


def time_windows(
    m: pd.DataFrame,
    ok: np.ndarray,
    slo: dict[str, float],
    decoding: np.ndarray | None = None,
    times: SortedTimes | None = None,
) -> pd.DataFrame:
    """The run cut into equal windows of arrival time (at least ``MIN_WINDOW_REQUESTS``
    arrivals each on average, at most ``MAX_WINDOWS``), one row per window:

    ``window`` (label "k/K"), ``from_s``/``to_s`` (seconds since the first arrival),
    ``arrived`` and ``arrival_rps``, ``served_rps`` (successful completions in the window per
    second), ``waiting_start``/``waiting_end`` (requests waiting at its edges), ``ttft_p90_s``,
    ``tpot_p90_s`` and ``queue_p90_s`` (of requests that arrived in it; queue only with
    ``scheduled_ts``), ``decoding_mean`` (mean of ``decoding_together``), and ``overloaded``:
    the queue grows by at least max(``MIN_QUEUE_GROWTH``, 2 % of arrivals) and ends with at
    least 2 × ``MIN_QUEUE_GROWTH`` − 1 waiting — arrivals above the service rate. Empty when
    the run is too short. ``decoding`` (``decoding_together(m)``) and ``times`` (the rows'
    ``SortedTimes``) reuse what the caller already computed.

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
    if decoding is None:
        decoding = decoding_together(m, times)
    waiting = waiting_at(m, edges, times)
    # The window of each arrival (k: none), and the rows grouped by it, in log order within one.
    arrived_in = _window_of(start, edges)
    by_window = np.argsort(arrived_in, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(arrived_in, minlength=k + 1))])
    served_in = np.bincount(_window_of(end[ok], edges), minlength=k + 1)
    ttft = m["ttft_s"].to_numpy(float)
    tpot = m["tpot_s"].to_numpy(float)
    queue = m["queue_s"].to_numpy(float) if "queue_s" in m else None
    rows = []
    for i in range(k):
        lo, hi = edges[i], edges[i + 1]
        inside = by_window[bounds[i] : bounds[i + 1]]
        good = inside[ok[inside]]
        width = hi - lo
        row = {
            "window": f"{i + 1}/{k}",
            "from_s": lo - t0,
            "to_s": min(hi, t0 + span) - t0,
            "arrived": int(inside.size),
            "arrival_rps": np.int64(inside.size) / width,
            "served_rps": int(served_in[i]) / width,
            "waiting_start": float(waiting[i]),
            "waiting_end": float(waiting[i + 1]),
            "ttft_p90_s": _p90(ttft[good]),
            "tpot_p90_s": _p90(tpot[good]),
            "decoding_mean": float(np.nanmean(decoding[good])) if good.size else np.nan,
        }
        if queue is not None:
            row["queue_p90_s"] = _p90(queue[good])
        growth = row["waiting_end"] - row["waiting_start"]
        row["overloaded"] = bool(
            growth >= max(MIN_QUEUE_GROWTH, 0.02 * row["arrived"])
            and row["waiting_end"] >= 2 * MIN_QUEUE_GROWTH - 1
        )
        rows.append(row)
    return pd.DataFrame(rows)


def _window_of(t: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Which window [edges[i], edges[i + 1]) holds each instant; len(edges) − 1 for none."""
    k = edges.size - 1
    i = np.searchsorted(edges, t, side="right") - 1
    i[(i < 0) | (i > k)] = k
    return i.astype(np.int8 if k < 127 else np.int64)


def _p90(values: np.ndarray) -> float:
    values = values[np.isfinite(values)]
    return float(np.percentile(values, 90)) if values.size else float("nan")


def decode_stalls(requests: pd.DataFrame, m: pd.DataFrame, factor: float) -> pd.DataFrame | None:
    """Stalls in each request's token stream, from ``token_ts`` (None when the log has none).

    A stall is a gap between consecutive chunks longer than ``factor`` × the median gap of the
    successful requests (pooled, as ``llminfer.logs.metrics.chunk_itl``). Columns, one row per
    request: ``n_stalls``; ``stall_s`` (seconds the stalls lasted beyond a median gap each);
    ``stalls_in_prefill`` (stalls during which another request's prefill ran — its interval
    ``scheduled_ts`` (or first token) → first token overlaps the gap); ``tpot_without_stalls_s``
    (TPOT had every stall been a median gap, seconds). ``m`` is ``request_metrics`` of the same
    rows. The median and p99 gap (s) are in ``attrs["median_gap_s"]``, ``attrs["p99_gap_s"]``.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    if "token_ts" not in requests.columns:
        return None
    cells = requests["token_ts"].to_numpy(dtype=object)
    ok = (m["status"] == "ok").to_numpy()
    arrays = [
        np.asarray(c, float) if good and c is not None and not np.isscalar(c) else np.empty(0)
        for c, good in zip(cells, ok, strict=True)
    ]
    lengths = np.array([a.size for a in arrays])
    if (lengths > 1).sum() == 0:
        return None
    flat = np.concatenate(arrays)
    owner = np.repeat(np.arange(len(arrays)), lengths)
    inside = owner[1:] == owner[:-1]
    t0, t1, gap_owner = flat[:-1][inside], flat[1:][inside], owner[1:][inside]
    gaps = t1 - t0
    median = float(np.median(gaps))
    stall = gaps > factor * median
    # Prefill intervals [s_j, f_j] overlapping the gap (t0, t1): s_j ≤ t1 and f_j > t0, counted
    # as #(s ≤ t1) − #(f ≤ t0) (an interval with f ≤ t0 also has s ≤ t1). A request's own
    # prefill ends at its first token, at or before t0: it cancels out.
    f = (m["start_ts"] + m["ttft_s"]).to_numpy(float)
    s = waiting_end(m)
    keep = np.isfinite(f) & np.isfinite(s)
    s_sorted, f_sorted = np.sort(s[keep]), np.sort(f[keep])
    t0s, t1s = t0[stall], t1[stall]
    prefilling = np.searchsorted(s_sorted, t1s, side="right") - np.searchsorted(
        f_sorted, t0s, side="right"
    )
    n = len(arrays)
    n_stalls = np.bincount(gap_owner[stall], minlength=n)
    excess = np.bincount(gap_owner[stall], weights=gaps[stall] - median, minlength=n)
    in_prefill = np.bincount(gap_owner[stall], weights=(prefilling > 0), minlength=n)
    tokens = m["output_tokens"].to_numpy(float)
    decode = m["decode_s"].to_numpy(float)
    tpot = np.divide(decode - excess, tokens - 1, out=np.full(n, np.nan), where=(tokens > 1) & ok)
    out = pd.DataFrame(
        {
            "n_stalls": n_stalls,
            "stall_s": excess,
            "stalls_in_prefill": in_prefill.astype(int),
            "tpot_without_stalls_s": tpot,
        },
        index=m.index,
    )
    out.attrs["median_gap_s"] = median
    out.attrs["p99_gap_s"] = float(np.percentile(gaps, 99))
    return out


def in_flight_peak(m: pd.DataFrame) -> int:
    """The most requests in flight at once (between ``start_ts`` and ``end_ts``, failed ones
    too; a request ending at the instant another starts is not counted with it, so a closed
    loop of N users peaks at N). A request whose end the log does not hold (a failure vLLM or
    AIPerf recorded no end for) counts for no time; counted to the end of the run instead, two
    failures of vLLM's ``bench serve --max-concurrency 4`` against llama-server read as 6 users.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    start = m["start_ts"].to_numpy(float)
    end = m["end_ts"].to_numpy(float)
    keep = np.isfinite(start)
    start, end = start[keep], np.where(np.isfinite(end[keep]), end[keep], start[keep])
    if not start.size:
        return 0
    times = np.concatenate([start, end])
    steps = np.concatenate([np.ones(start.size), -np.ones(end.size)])
    order = np.lexsort((steps, times))  # at a tie the end (-1) comes first
    return int(np.cumsum(steps[order]).max())


def closed_loop_share(m: pd.DataFrame, gap_s: float) -> float:
    """Of the requests that arrived after some request ended, the share that arrived within
    ``gap_s`` seconds of an end: near 1 in a closed loop (each user sends its next request when
    its last one ends), small for arrivals on their own clock (open loop). NaN when no request
    arrived after an end.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    start = m["start_ts"].to_numpy(float)
    end = np.sort(m["end_ts"].to_numpy(float))
    end = end[np.isfinite(end)]
    start = start[np.isfinite(start)]
    i = np.searchsorted(end, start, side="right") - 1
    after = i >= 0
    if not after.any():
        return float("nan")
    return float(np.mean(start[after] - end[i[after]] <= gap_s))
