"""Chapters 3 and 6: a time window of a request log, summarised over its own length.

A slice of a log ("the last two minutes") has its own window. Summarising the slice's rows over
*their* first start → last end stretches the window to whenever the slowest of them finished:
120 s of arrivals can become a 182 s window and every rate comes out a third too low. The rule
here is the one vLLM's ``bench serve`` applies to a run (the requests that completed, over the
run's duration; vLLM 0.33.0 ``vllm/benchmarks/serve.py``). GuideLLM 0.8.1, given a warm-up or
cool-down window, keeps instead every request that *overlaps* the measured span
(``guidellm/benchmark/schemas/accumulator.py``); completion is the rule that keeps a request in
exactly one of two adjacent windows:

- **which requests**: those that *completed* inside ``[t0, t1)`` — ``end_ts`` in the window (a
  failed request with no ``end_ts`` is placed by its ``start_ts``). Rates (RPS, goodput), the
  good fraction, every latency percentile and ITL use these requests, so all figures describe
  the same set;
- **the window**: ``t1 − t0`` seconds exactly, whatever the requests' own span;
- **tokens**: with ``token_ts`` (a streamed log, a simulated one) the output tokens *emitted*
  inside the window by any request, finished or not; without it, the completed requests'
  output tokens (the only count a five-column log allows). Input tokens: the completed
  requests' prompts. ``Summary.window_from`` says which (``"window, tokens emitted"`` or
  ``"window, tokens of completed requests"``).

``t0`` and ``t1`` are on the log's own clock (the same seconds as ``start_ts``);
``since_first_start`` turns offsets from the first request's start into that clock.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd

from llminfer.logs.schema import RequestLog

#: ``Summary.window_from`` for a window whose output tokens were counted from ``token_ts``.
EMITTED = "window, tokens emitted"
#: ``Summary.window_from`` for a window without ``token_ts``: the completed requests' tokens.
COMPLETED = "window, tokens of completed requests"


def check_window(window: object) -> tuple[float, float]:
    """``(t0, t1)`` as floats, or ValueError: two finite numbers of seconds with t0 < t1.

    Introduced in: notebooks/03_metrics.ipynb
    """
    if isinstance(window, (str, bytes)) or not hasattr(window, "__len__") or len(window) != 2:
        raise ValueError(f"window={window!r} must be a pair (t0, t1) of seconds with t0 < t1")
    values = []
    for name, value in zip(("t0", "t1"), window, strict=True):
        ok = not isinstance(value, bool) and isinstance(value, (int, float, np.number))
        if not ok or not math.isfinite(float(value)):
            raise ValueError(f"window={window!r}: {name}={value!r} must be a finite number of s")
        values.append(float(value))
    t0, t1 = values
    if not t0 < t1:
        raise ValueError(f"window={window!r} must have t0 < t1 (seconds on the log's clock)")
    return t0, t1


def since_first_start(log: RequestLog, start_s: float, end_s: float) -> tuple[float, float]:
    """The window ``[start_s, end_s)`` seconds after the log's first request start, on the
    log's clock: ``(first start + start_s, first start + end_s)``, for ``summarize(window=…)``.

    Introduced in: notebooks/03_metrics.ipynb
    """
    check_window((start_s, end_s))
    first = float(log.requests["start_ts"].min())
    return first + float(start_s), first + float(end_s)


def _inside(t: np.ndarray, t0: float, t1: float, include_end: bool) -> np.ndarray:
    return (t >= t0) & ((t <= t1) if include_end else (t < t1))


def completed_in(
    requests: pd.DataFrame, t0: float, t1: float, include_end: bool = False
) -> np.ndarray:
    """Boolean per request: completed inside ``[t0, t1)`` (``[t0, t1]`` with
    ``include_end``) by ``end_ts``; a request with no ``end_ts`` (a failed one) by its
    ``start_ts``.

    Introduced in: notebooks/03_metrics.ipynb
    """
    end = requests["end_ts"].to_numpy(dtype=float)
    when = np.where(np.isnan(end), requests["start_ts"].to_numpy(dtype=float), end)
    return _inside(when, t0, t1, include_end)


def emitted_tokens(
    requests: pd.DataFrame, t0: float, t1: float, include_end: bool = False
) -> float | None:
    """Output tokens emitted inside ``[t0, t1)`` (``[t0, t1]`` with ``include_end``) by
    successful requests, from ``token_ts``
    (and ``chunk_tokens`` where a chunk carries several tokens); None without ``token_ts``.

    Introduced in: notebooks/03_metrics.ipynb
    """
    if "token_ts" not in requests.columns:
        return None
    ok = (requests["status"] == "ok").to_numpy()
    cells = requests["token_ts"].to_numpy(dtype=object)
    counts = requests["chunk_tokens"].to_numpy(dtype=object) if "chunk_tokens" in requests else None
    total = 0.0
    for i in np.flatnonzero(ok):
        ts = cells[i]
        if ts is None or np.isscalar(ts):
            return None  # a request without its token times: fall back to completed requests
        ts = np.asarray(ts, dtype=float)
        inside = _inside(ts, t0, t1, include_end)
        chunk = counts[i] if counts is not None else None
        if chunk is None or np.isscalar(chunk):
            total += float(inside.sum())
        else:
            total += float(np.asarray(chunk, dtype=float)[inside].sum())
    return total


def window_log(log: RequestLog, t0: float, t1: float, include_end: bool = False) -> RequestLog:
    """The requests of ``log`` that completed inside ``[t0, t1)``, as a ``RequestLog`` that
    carries the window: ``summarize`` of it (and every widget or plot that summarises it) uses
    ``t1 − t0`` seconds as the window and, with ``token_ts``, the tokens emitted inside it
    (see this module's docstring for the rule). ``t0``/``t1`` in seconds on the log's clock;
    ValueError for a window that is not two finite numbers with t0 < t1. ``include_end``
    closes the window, ``[t0, t1]``: for the last window of a run, which ends at its last
    token (``SimResult.summary(window="drain")``).

    Introduced in: notebooks/03_metrics.ipynb
    """
    t0, t1 = check_window((t0, t1))
    requests = log.requests
    inside = completed_in(requests, t0, t1, include_end)
    tokens = emitted_tokens(requests, t0, t1, include_end)
    how = (
        "output tokens = tokens emitted inside it (token_ts)"
        if tokens is not None
        else "output tokens = those of the requests completed inside it"
    )
    said = (
        f"window [{t0:g}, {t1:g}{']' if include_end else ')'} s = {t1 - t0:g} s: the "
        f"{int(inside.sum())} requests completed inside it; {how}"
    )
    source = replace(
        log.source,
        assumptions=(*log.source.assumptions, said),
        window_s=t1 - t0,
        window=(t0, t1),
        window_output_tokens=tokens,
    )
    part = requests[inside].reset_index(drop=True)
    return RequestLog(part, rejected=log.rejected, source=source)
