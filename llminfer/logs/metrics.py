"""Chapters 3 and 6: the per-request metrics of a log — TTFT, TPOT, ITL, E2E — and the
article's percentile.

Per request (seconds): ``ttft_s = first_token_ts − start_ts``; ``e2e_s = end_ts − start_ts``;
``decode_s = end_ts − first_token_ts``; ``tpot_s = decode_s / (N − 1)`` for N = output_tokens
> 1 (NaN for N ≤ 1: one token has no gap after it). With ``scheduled_ts``: ``queue_s =
scheduled_ts − start_ts`` and ``prefill_s = first_token_ts − scheduled_ts``. With ``token_ts``:
the gaps between streamed chunks (ITL). A whole log's summary is ``llminfer.logs.summary``.
Everything is vectorised (numpy/pandas): no Python loop per request.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

from llminfer.logs.chunks import chunk_gaps
from llminfer.logs.reading import read_requests
from llminfer.logs.schema import BLOCK_ROWS, RequestLog

#: Latency metrics every summary reports; the SLO keys ``summarize`` accepts.
LATENCY_METRICS = ("ttft_s", "tpot_s", "e2e_s")

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


def _as_log(log: RequestLog | pd.DataFrame) -> RequestLog:
    if isinstance(log, RequestLog):
        return log
    if isinstance(log, pd.DataFrame):
        return read_requests(log)
    raise ValueError(f"log must be a RequestLog or a DataFrame, not {type(log).__name__}")


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
        gaps, owner = chunk_gaps(requests)
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
    gaps = chunk_gaps(log.ok.reset_index(drop=True))[0]
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
