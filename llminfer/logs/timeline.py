"""Chapter 6: a request log over time — requests in flight and output tokens per second.

Both need real request start times: a log whose tool wrote none (``LogSource.starts_known``
false) gets a ValueError saying "can't tell", never a wrong curve.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from llminfer.logs.metrics import _as_log
from llminfer.logs.schema import RequestLog


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
