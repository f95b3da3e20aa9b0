"""Percentiles by selection: the order statistics a percentile needs, without sorting everything.

``np.percentile`` (linear interpolation, numpy's default, the article's formula) needs only the
two order statistics around position ``(n − 1)·q`` for each ``q``. ``select_percentiles`` finds
them with one ``np.partition`` on those ranks (O(n) instead of a sort's O(n log n)) and then
interpolates exactly as numpy does — so every figure is bit-for-bit ``np.percentile``'s, which
``tests/test_quantiles.py`` checks. ``percentiles_from_ranks`` does the interpolation for a caller
that found the order statistics some other way (the streaming summariser in
``llminfer.logs.logstream`` finds them in two passes over files bigger than memory).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def percentile_ranks(n: int, percentiles: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """(lower ranks, interpolation weights) of each percentile of ``n`` sorted values.

    Position ``(n − 1)·q/100`` as numpy computes it for its default ``"linear"`` method; the
    upper rank is ``lower + 1`` clipped to ``n − 1``. Ranks are 0-based.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if n < 1:
        raise ValueError(f"n={n!r} must be at least 1 (a percentile of nothing is undefined)")
    q = np.true_divide(np.asarray(percentiles, dtype=float), 100)
    if ((q < 0) | (q > 1) | np.isnan(q)).any():
        raise ValueError(f"percentiles={list(percentiles)!r} must lie in [0, 100]")
    position = (n - 1) * q  # numpy's "linear": virtual index (n − 1)·q
    lower = np.floor(position)
    weight = position - lower
    return lower.astype(np.int64), weight


def percentiles_from_ranks(
    lower_values: np.ndarray, upper_values: np.ndarray, weights: np.ndarray
) -> np.ndarray:
    """Interpolate between the order statistics around each percentile as numpy does.

    numpy's ``_lerp``: ``a + (b − a)·t``, but ``b − (b − a)·(1 − t)`` where ``t ≥ 0.5`` (the form
    that stays monotone in ``t``), so results equal ``np.percentile`` to the last bit.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    a = np.asarray(lower_values, dtype=float)
    b = np.asarray(upper_values, dtype=float)
    t = np.asarray(weights, dtype=float)
    diff = b - a
    out = a + diff * t
    return np.where(t >= 0.5, b - diff * (1 - t), out)


def select_percentiles(
    values: np.ndarray, percentiles: Sequence[float], overwrite_input: bool = False
) -> np.ndarray:
    """``np.percentile(values, percentiles)`` for a 1-D float array without NaN, by selection.

    Single-rank ``np.partition`` calls on just the ranks needed (two per percentile), each on
    the part of the array below the previous rank, instead of a full sort;
    with ``overwrite_input`` the array is partitioned in place (no copy of a million values).
    Raises ValueError on an empty array.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    values = np.asarray(values, dtype=float)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"values must be a non-empty 1-D array, not shape {values.shape}")
    n = values.size
    lower, weights = percentile_ranks(n, percentiles)
    upper = np.minimum(lower + 1, n - 1)
    work = values if overwrite_input else values.copy()
    # From the lowest rank up, each partition only on the part above the previous rank: after
    # ``work[lo:].partition(k - lo)`` the values right of k are the largest, so the next, higher
    # rank is found among them (latency percentiles sit high: p50 then ever smaller tails).
    # numpy's own multi-rank partition (one call, a list of ranks) took 40–60 ms a million
    # values here, these cascaded single-rank ones ~10 ms, a full sort ~25 ms (one run,
    # numpy 2.4, benchmarks/bench_logs.py --parts).
    lo = 0
    for k in np.unique(np.concatenate([lower, upper])):
        work[lo:].partition(int(k) - lo)
        lo = int(k) + 1
    return percentiles_from_ranks(work[lower], work[upper], weights)


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
