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
