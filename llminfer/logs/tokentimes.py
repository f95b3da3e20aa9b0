"""Chapter 6: what a request's token times (``token_ts``) must be to be read: finite,
non-decreasing times within the request, one ``chunk_tokens`` count per time where a tool gives
counts. ``llminfer.logs.validation`` turns the rows that break a rule into rejected rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def token_ts_problems(cells, counts, start, end) -> tuple[np.ndarray, np.ndarray]:
    """Which rows' ``token_ts`` break a rule, and the rule: two arrays, ``bad`` (bool) and
    ``reasons`` (text, "" where fine). ``cells``: each row's token times (s; None or NaN for
    none), ``counts``: each row's ``chunk_tokens`` (or None for the column), ``start`` and
    ``end``: each row's ``start_ts`` and ``end_ts`` (s). Each entry must be finite,
    non-decreasing times in [start, end] (within a tolerance of 1e-6 of the end's size), with
    one count >= 1 per time where counts are given.

    The arrays every reader and the simulator give (1-D, numeric) are checked all at once on
    their concatenation; anything else (a list, a string, a nested value) one row at a time.
    The first rule a row breaks, in this order, is its reason either way.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    bad = np.zeros(len(cells), dtype=bool)
    reasons = np.full(len(cells), "", dtype=object)
    plain = np.fromiter(
        (type(c) is np.ndarray and c.ndim == 1 and c.dtype.kind in "fiu" for c in cells),
        dtype=bool,
        count=len(cells),
    )
    _check_plain_token_ts(cells, np.flatnonzero(plain), start, end, bad, reasons)
    for i in np.flatnonzero(~plain):
        cell = cells[i]
        if cell is None or (np.isscalar(cell) and pd.isna(cell)):
            continue
        try:
            times = np.asarray(cell, dtype=float).ravel()
        except (TypeError, ValueError):
            bad[i], reasons[i] = True, "token_ts must be a list of numbers"
            continue
        tolerance = 1e-6 * max(1.0, abs(end[i]) if np.isfinite(end[i]) else 1.0)
        if times.size == 0 or not np.isfinite(times).all():
            bad[i], reasons[i] = True, "token_ts must hold finite times"
        elif (np.diff(times) < 0).any():
            bad[i], reasons[i] = True, "token_ts must not decrease"
        elif times[0] < start[i] - tolerance or (
            np.isfinite(end[i]) and times[-1] > end[i] + tolerance
        ):
            bad[i], reasons[i] = True, "token_ts must lie between start_ts and end_ts"
    if counts is not None:
        for i in np.flatnonzero(~bad):
            if counts[i] is None or cells[i] is None or np.isscalar(cells[i]):
                continue
            times = np.asarray(cells[i], dtype=float).ravel()
            tokens = np.asarray(counts[i], dtype=float).ravel()
            if tokens.shape != times.shape or (tokens < 1).any():
                bad[i], reasons[i] = True, "chunk_tokens must be >= 1, one count per token_ts"
    return bad, reasons


def _check_plain_token_ts(cells, rows, start, end, bad, reasons) -> None:
    """``token_ts_problems``'s first three rules for the ``rows`` whose cells are 1-D numeric
    arrays, on their concatenation; marks ``bad`` and ``reasons`` in place."""
    if not len(rows):
        return
    arrays = [cells[i] for i in rows]
    lengths = np.fromiter((a.size for a in arrays), dtype=np.int64, count=len(arrays))
    flat = np.concatenate(arrays).astype(float, copy=False)
    owner = np.repeat(np.arange(len(rows)), lengths)
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    empty = lengths == 0
    nonfinite = np.bincount(owner[~np.isfinite(flat)], minlength=len(rows)) > 0
    same = owner[1:] == owner[:-1]
    with np.errstate(invalid="ignore"):  # inf - inf in a row already refused as not finite
        steps = np.diff(flat)
    falls = np.bincount(owner[1:][same & (steps < 0)], minlength=len(rows)) > 0
    full = ~empty
    firsts = np.full(len(rows), np.nan)
    lasts = np.full(len(rows), np.nan)
    firsts[full] = flat[offsets[:-1][full]]
    lasts[full] = flat[offsets[1:][full] - 1]
    row_start, row_end = np.asarray(start, dtype=float)[rows], np.asarray(end, dtype=float)[rows]
    finite_end = np.isfinite(row_end)
    tolerance = 1e-6 * np.maximum(1.0, np.where(finite_end, np.abs(row_end), 1.0))
    outside = (firsts < row_start - tolerance) | (finite_end & (lasts > row_end + tolerance))
    for mask, reason in (
        (empty | nonfinite, "token_ts must hold finite times"),
        (falls, "token_ts must not decrease"),
        (outside, "token_ts must lie between start_ts and end_ts"),
    ):
        new = rows[mask & ~bad[rows]]
        bad[new], reasons[new] = True, reason


__all__ = ["token_ts_problems"]
