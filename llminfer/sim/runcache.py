"""Keeping the results of deterministic runs (internal): ``simulate`` and ``sweep`` give the
same result for the same arguments, and a kernel often asks twice (notebook 07 simulates each
case study for its log, again for its cure table, its explorer and its exercises; notebook 03
draws its sweep, then exercise 03.5 reads the same one). Each keeps its last results here and
hands out copies.

Only arguments that cannot change after the call are keyed on (``key_of``): None, numbers,
strings, tuples and frozen dataclasses of them, each with its type (``True``, ``1`` and ``1.0``
are equal in Python but not to the checks or the tables' dtypes). A callable (a custom
``step_time``, which could change behind the same identity), a list or a dict is not, and such
a call is simply not kept. A profile given by name is keyed on the ``StepModel`` the name
stands for at the time (``profile_key``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import fields, is_dataclass
from typing import Generic, TypeVar

from llminfer.specs.stepmodel import PROFILES

T = TypeVar("T")


class Uncacheable(Exception):
    """An argument a run cache cannot key on.

    Introduced in: notebooks/03_metrics.ipynb
    """


def key_of(value) -> tuple:
    """``value`` as part of a cache key, its type included, every field of a frozen dataclass
    included (also those left out of its ``==``); raises ``Uncacheable`` for anything else
    than None, numbers, strings, tuples and frozen dataclasses of them.

    Introduced in: notebooks/03_metrics.ipynb
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return (type(value).__name__, value)
    if isinstance(value, tuple):
        return ("tuple", tuple(key_of(v) for v in value))
    if is_dataclass(value) and not isinstance(value, type) and value.__dataclass_params__.frozen:
        parts = tuple((f.name, key_of(getattr(value, f.name))) for f in fields(value))
        return (type(value).__qualname__, parts)
    raise Uncacheable


def profile_key(profile):
    """A ``profile`` argument as a run is keyed on it: a profile's name stands for the
    ``StepModel`` it names now (a notebook may change what a name means between two runs).

    Introduced in: notebooks/03_metrics.ipynb
    """
    if isinstance(profile, str) and profile in PROFILES:
        return PROFILES[profile]
    return profile


class RunCache(Generic[T]):
    """The last ``size`` results by key, least recently used dropped first; ``get`` and
    ``put`` hand out and keep copies made by ``copy``, so a caller may change what it got.

    Introduced in: notebooks/03_metrics.ipynb
    """

    def __init__(self, size: int, copy: Callable[[T], T]) -> None:
        self.size = size
        self._copy = copy
        self._results: OrderedDict[Hashable, T] = OrderedDict()

    def __len__(self) -> int:
        return len(self._results)

    def get(self, key: Hashable | None) -> T | None:
        """A copy of the result kept for ``key``, or None (also for the key None)."""
        if key is None or key not in self._results:
            return None
        self._results.move_to_end(key)
        return self._copy(self._results[key])

    def put(self, key: Hashable | None, result: T) -> None:
        """Keep a copy of ``result`` for ``key`` (nothing for the key None)."""
        if key is None:
            return
        self._results[key] = self._copy(result)
        while len(self._results) > self.size:
            self._results.popitem(last=False)

    def clear(self) -> None:
        self._results.clear()


__all__ = ["RunCache", "Uncacheable", "key_of", "profile_key"]
