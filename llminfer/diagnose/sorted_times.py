"""A request log's event times — arrival, scheduled, first token, end — each sorted once.

Chapter 7's signals (``llminfer.diagnose.signals``) count events before an instant: requests
decoding
together, waiting, the work ahead of an arrival, prefill work overlapping a decode. Each is a
sort of some event times followed by searches into it. On a log of 10 million requests the
sorts and the searches are the whole cost, so:

- ``SortedTimes`` sorts each kind of time once (a stable argsort: ties keep log order) and every
  signal reuses it; a subset (the successful requests) reuses its parent's sorts;
- two sorted kinds of event are *merged* (``merge``: a stable sort of two sorted runs, which
  NumPy's timsort does in one linear pass) instead of sorted together again;
- a search for many instants runs with the instants in sorted order (``search``), where each
  binary search starts near the previous one and stays in cache, and the answers are scattered
  back; an instant that is itself one of the sorted events needs no search at all
  (``last_of_ties``).

Every answer is the same index ``np.searchsorted`` gives, so results do not change by a bit.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


class SortedTimes:
    """The event times of a ``llminfer.logs.metrics.request_metrics`` table (seconds, the log's
    clock), one entry per row: ``start`` (arrival), ``first`` (first token = start + TTFT),
    ``end``, and ``scheduled`` (start + queue, None without ``scheduled_ts``); ``order(name)``
    is the stable argsort of one of them (NaN last), computed on first use and kept.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """

    def __init__(self, m: pd.DataFrame) -> None:
        self.start = m["start_ts"].to_numpy(float)
        self.first = self.start + m["ttft_s"].to_numpy(float)
        self.end = m["end_ts"].to_numpy(float)
        self.scheduled = self.start + m["queue_s"].to_numpy(float) if "queue_s" in m else None
        self._orders: dict[str, np.ndarray] = {}
        self._parent: SortedTimes | None = None
        self._mask: np.ndarray | None = None

    def __len__(self) -> int:
        return self.start.size

    def order(self, name: str) -> np.ndarray:
        """Row positions that sort ``name`` (``"start"``, ``"first"``, ``"end"`` or
        ``"scheduled"``) ascending, ties in row order, NaN last.

        Introduced in: notebooks/07_troubleshooting.ipynb
        """
        if name not in ("start", "first", "end", "scheduled"):
            raise ValueError(f"name={name!r} must be one of start, first, end, scheduled")
        if getattr(self, name) is None:
            raise ValueError(f"name={name!r}: this log has no scheduled_ts")
        if name not in self._orders:
            if self._parent is not None:
                # The parent's order, restricted to this subset's rows and renumbered: still
                # sorted, still stable.
                parent = self._parent.order(name)
                kept = parent[self._mask[parent]]
                position = np.cumsum(self._mask) - 1
                self._orders[name] = position[kept]
            else:
                self._orders[name] = np.argsort(getattr(self, name), kind="stable")
        return self._orders[name]

    def rows(self, name: str, mask: np.ndarray) -> np.ndarray:
        """The rows where ``mask`` holds, in the sorted order of ``name`` (positions).

        Introduced in: notebooks/07_troubleshooting.ipynb
        """
        order = self.order(name)
        return order if mask.all() else order[mask[order]]

    def subset(self, mask: np.ndarray) -> SortedTimes:
        """The rows where ``mask`` holds, as their own ``SortedTimes`` that reuses these sorts.

        Introduced in: notebooks/07_troubleshooting.ipynb
        """
        mask = np.asarray(mask, bool)
        if mask.shape != self.start.shape:
            raise ValueError(f"mask has shape {mask.shape}; it must have one entry per row")
        if mask.all():  # every row: these times, no copies
            return self
        child = SortedTimes.__new__(SortedTimes)
        child.start, child.first, child.end = self.start[mask], self.first[mask], self.end[mask]
        child.scheduled = None if self.scheduled is None else self.scheduled[mask]
        child._orders = {}
        child._parent, child._mask = self, mask
        return child


def merge(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two ascending arrays merged: (the merged values, ``order``) where ``order`` is
    ``np.argsort(np.concatenate([a, b]), kind="stable")``: ties put ``a``'s entries first and
    keep each array's order; ``order >= a.size`` marks the entries that came from ``b``. NumPy's
    stable sort (timsort) finds the two sorted runs and merges them in one linear pass.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    both = np.concatenate([a, b])
    order = np.argsort(both, kind="stable")
    return both[order], order


def search(sorted_values: np.ndarray, t: np.ndarray, order: np.ndarray, side: str) -> np.ndarray:
    """``np.searchsorted(sorted_values, t, side)``, faster for many instants ``t``: ``order``
    sorts ``t`` (e.g. ``SortedTimes.order``), so the searches run in ascending order and stay in
    cache; the answers come back in the order of ``t``.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    out = np.empty(t.size, dtype=np.intp)
    out[order] = np.searchsorted(sorted_values, t[order], side=side)
    return out


def tie_runs(sorted_values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where an ascending array without NaN repeats a value: (``tied``: the positions whose next
    position holds the same value, and for each the ``first`` and the ``last`` position holding
    it). One comparison per value, then work only where values repeat (few, with a clock finer
    than the gaps between events).

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    tied = np.flatnonzero(sorted_values[1:] == sorted_values[:-1])
    # A run of equal values p..q shows as consecutive tied positions p..q − 1.
    run_end = np.append(np.flatnonzero(np.diff(tied) != 1), tied.size - 1)
    lengths = np.diff(np.append(-1, run_end))
    if tied.size == 0:
        return tied, tied, tied
    first = np.repeat(tied[run_end - lengths + 1], lengths)
    last = np.repeat(tied[run_end] + 1, lengths)
    return tied, first, last


def _tied_to(sorted_values: np.ndarray, positions: np.ndarray | None, last: bool) -> np.ndarray:
    """For positions (all when None) of an ascending array, the last (or first) position holding
    an equal value, searching only where values repeat."""
    n = sorted_values.size
    out = np.arange(n) if positions is None else np.array(positions, dtype=np.intp)
    tied, first_of, last_of = tie_runs(sorted_values)
    if tied.size == 0:
        return out
    if positions is None:
        if last:
            out[tied] = last_of
        else:
            out[tied + 1] = first_of
        return out
    member = np.zeros(n, dtype=bool)
    member[tied] = True
    member[tied + 1] = True
    fix = np.flatnonzero(member[out])
    # A member's run holds the last tied position at or before it (there is one: its run's first).
    k = np.searchsorted(tied, out[fix], side="right") - 1
    out[fix] = (last_of if last else first_of)[k]
    return out


def last_of_ties(sorted_values: np.ndarray, positions: np.ndarray | None = None) -> np.ndarray:
    """For positions (all when None) of an ascending array without NaN, the last position
    holding an equal value: ``np.searchsorted(sorted_values, sorted_values[positions],
    side="right") - 1``, searching only where a value repeats.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    return _tied_to(sorted_values, positions, last=True)


def first_of_ties(sorted_values: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """For positions of an ascending array without NaN, the first position holding an equal
    value: ``np.searchsorted(sorted_values, sorted_values[positions], side="left")``, searching
    only where a value repeats.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    return _tied_to(sorted_values, positions, last=False)
