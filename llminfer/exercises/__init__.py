"""Answers to every notebook's "Try it" questions, computed by llminfer, and ``check``.

A learner types ``check("04.2", 31)`` under a question; the answer is never typed into the
notebook or this package: each exercise holds a function that computes it with llminfer, so
question and answer cannot drift apart. One module per chapter (``ch01`` … ``ch09``) holds that
chapter's ``EXERCISES``; this module gathers them.

Numeric answers are right within a stated relative tolerance (default 2 %, so rounding the way
the notebook prints is accepted); text answers are right when they match one of the accepted
words, ignoring case and surrounding spaces.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

Answer = float | int | str


@dataclass(frozen=True)
class Exercise:
    """One "Try it" question: its key ``"NN.k"`` (notebook NN, question k), what it asks, how
    llminfer computes the answer, the answer's unit, the tolerance and a hint shown when a try
    is wrong.

    ``accept`` lists further accepted spellings for text answers (``"memory"`` for
    ``"memory-bound"``).

    Introduced in: notebooks/01_introduction.ipynb
    """

    key: str
    question: str
    compute: Callable[[], Answer]
    unit: str = ""
    rel_tol: float = 0.02
    abs_tol: float = 0.0
    hint: str = ""
    accept: tuple[str, ...] = field(default=())

    def answer(self) -> Answer:
        """The answer, computed now by llminfer."""
        return self.compute()

    def is_right(self, value: Answer) -> bool:
        """Whether ``value`` is an accepted answer (numbers within tolerance, text by word)."""
        expected = self.answer()
        if isinstance(expected, str):
            words = {expected.strip().lower(), *(a.strip().lower() for a in self.accept)}
            return isinstance(value, str) and value.strip().lower() in words
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        return math.isclose(
            float(value), float(expected), rel_tol=self.rel_tol, abs_tol=self.abs_tol
        )


@dataclass(frozen=True)
class CheckResult:
    """What ``check`` found: ``right`` (bool) and a one-line ``message`` (shown in a notebook).

    Truthy when right, so ``assert check("04.2", answer)`` works in a test.

    Introduced in: notebooks/01_introduction.ipynb
    """

    key: str
    right: bool
    message: str

    def __bool__(self) -> bool:
        return self.right

    def __repr__(self) -> str:
        return self.message

    def _repr_html_(self) -> str:
        colour = "#1a7f37" if self.right else "#b35900"
        return f'<span style="color:{colour}">{self.message}</span>'


@cache
def _registry() -> dict[str, Exercise]:
    found: dict[str, Exercise] = {}
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("ch"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for item in module.EXERCISES:
            if item.key in found:
                raise RuntimeError(f"exercise {item.key!r} is defined twice")
            found[item.key] = item
    return found


def exercises(notebook: str | None = None) -> list[Exercise]:
    """Every exercise, or those of one notebook (``"04"``), in key order.

    Introduced in: notebooks/01_introduction.ipynb
    """
    items = sorted(_registry().values(), key=lambda e: tuple(int(p) for p in e.key.split(".")))
    if notebook is None:
        return items
    return [e for e in items if e.key.split(".")[0] == notebook]


def exercise(key: str) -> Exercise:
    """The exercise with this key (``"04.2"``); ``ValueError`` names the keys that exist.

    Introduced in: notebooks/01_introduction.ipynb
    """
    registry = _registry()
    if key not in registry:
        same = [k for k in registry if k.split(".")[0] == str(key).split(".")[0]]
        raise ValueError(
            f"exercise={key!r} is not a known question; known ones are {same or sorted(registry)}"
        )
    return registry[key]


def check(key: str, value: Answer) -> CheckResult:
    """Check a learner's answer to "Try it" question ``key``: right, or wrong with a hint.

    Numbers are compared within the exercise's tolerance (stated in the message); units are
    those of the question (``Exercise.unit``).

    Introduced in: notebooks/01_introduction.ipynb
    """
    item = exercise(key)
    unit = f" {item.unit}" if item.unit else ""
    if item.is_right(value):
        return CheckResult(key, True, f"✓ {key}: right — {value!r}{unit}.")
    if isinstance(item.answer(), str):
        expect = "a word such as " + ", ".join(repr(a) for a in (item.answer(), *item.accept))
    else:
        expect = f"a number within {item.rel_tol:.0%} of the answer"
    hint = f" Hint: {item.hint}" if item.hint else ""
    return CheckResult(
        key, False, f"✗ {key}: not quite — {value!r}{unit} is not it (expected {expect}).{hint}"
    )


__all__ = ["CheckResult", "Exercise", "check", "exercise", "exercises"]
