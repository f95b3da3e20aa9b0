"""Answers to every notebook's "Try it" questions, computed by llminfer, and ``check``.

A learner types ``check("04.2", 31)`` under a question; the answer is never typed into the
notebook or this package: each exercise holds a function that computes it with llminfer, so
question and answer cannot drift apart. One module per chapter (``ch01`` … ``ch09``) holds that
chapter's ``EXERCISES``; this module gathers them.

Numeric answers are right within a stated tolerance (default 2 % relative, so rounding the way
the notebook prints is accepted; the message states the tolerance as it is applied); text
answers are right when they match one of the accepted words, ignoring case and surrounding
spaces. Two readings more are accepted, each only where it is unambiguous, and the message
says which form the question meant:

- **percent or fraction.** Where the question wants a percentage (unit ``"%"``), a fraction
  0–1 that is right once multiplied by 100 (0.127 for 12.7 %); where it wants a fraction or
  share (a unit naming "fraction" or "share"), a percentage above 1 that is right once divided
  by 100 (14.2 for 0.142). A value that would be a valid answer in the asked form is always
  read in that form.
- **whole counts.** Where the question asks "how many" of a countable unit (requests, GPUs,
  sequences, tokens, ...) and the computed answer has a fraction (a max concurrency of 1.03
  requests), the whole number that fits, ``floor(answer)``, is right too.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

Answer = float | int | str

#: Units whose answers are counts of whole things (a "how many" question may take an integer).
COUNT_UNITS = ("requests", "gpus", "sequences", "tokens", "steps", "blocks", "replicas")


@dataclass(frozen=True)
class Exercise:
    """One "Try it" question: its key ``"NN.k"`` (notebook NN, question k), what it asks, how
    llminfer computes the answer, the answer's unit, the tolerance and a hint shown when a try
    is wrong.

    ``accept`` lists further accepted spellings for text answers (``"memory"`` for
    ``"memory-bound"``). The answer's form follows from ``unit``: ``"%"`` a percentage, a unit
    naming "fraction" or "share" a fraction 0–1 (``form``); a "how many" question in a count
    unit is a count (``is_count``).

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

    @property
    def form(self) -> str:
        """``"percent"``, ``"fraction"`` or ``""`` (neither), read from ``unit``."""
        unit = self.unit.lower()
        if unit.strip() == "%" or "percent" in unit:
            return "percent"
        if "fraction" in unit or "share" in unit:
            return "fraction"
        return ""

    @property
    def is_count(self) -> bool:
        """A "how many" question whose unit counts whole things (requests, GPUs, ...)."""
        unit = self.unit.lower().strip()
        return unit in COUNT_UNITS and "how many" in self.question.lower()

    def tolerance_text(self) -> str:
        """The tolerance in words, as ``is_right`` applies it: "within 2 %", "within ±1
        sequences", "exactly"."""
        unit = f" {self.unit}" if self.unit and self.unit.strip() != "%" else ""
        parts = []
        if self.rel_tol > 0:
            parts.append(f"within {self.rel_tol * 100:g} % of the answer")
        if self.abs_tol > 0:
            parts.append(f"within ±{self.abs_tol:g}{unit or ' ' + self.unit}".rstrip())
        return " or ".join(parts) if parts else "exactly the answer"

    def _close(self, value: float, expected: float) -> bool:
        return math.isclose(value, expected, rel_tol=self.rel_tol, abs_tol=self.abs_tol)

    def reading(self, value: Answer) -> str | None:
        """How ``value`` is right: ``"as asked"``, ``"as a fraction"`` (a percent was
        wanted), ``"as a percentage"`` (a fraction was wanted), ``"as a whole count"``; None
        when it is not right."""
        expected = self.answer()
        if isinstance(expected, str):
            words = {expected.strip().lower(), *(a.strip().lower() for a in self.accept)}
            ok = isinstance(value, str) and value.strip().lower() in words
            return "as asked" if ok else None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        value, expected = float(value), float(expected)
        if not math.isfinite(value):
            return None
        if self._close(value, expected):
            return "as asked"
        if self.form == "percent" and 0 <= value <= 1 and self._close(value * 100, expected):
            return "as a fraction"
        if self.form == "fraction" and 1 < value <= 100 and self._close(value / 100, expected):
            return "as a percentage"
        whole = math.floor(expected)
        if self.is_count and whole != expected and value == whole:
            return "as a whole count"
        return None

    def is_right(self, value: Answer) -> bool:
        """Whether ``value`` is an accepted answer (numbers within tolerance, or in the other
        unambiguous form; text by word)."""
        return self.reading(value) is not None


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
    those of the question (``Exercise.unit``). A fraction where a percentage was asked (or
    the reverse), or the whole count of a "how many" question, is right when unambiguous, and
    the message says which form the question meant.

    Introduced in: notebooks/01_introduction.ipynb
    """
    item = exercise(key)
    unit = f" {item.unit}" if item.unit else ""
    how = item.reading(value)
    if how == "as asked":
        return CheckResult(key, True, f"✓ {key}: right — {value!r}{unit}.")
    if how is not None:
        answer = float(item.answer())
        meant = {
            "as a fraction": f"read as a fraction: {float(value) * 100:g} %; the question asks "
            f"for a percentage (0–100), about {answer:.3g} %",
            "as a percentage": f"read as a percentage: {float(value) / 100:g}; the question "
            f"asks for a fraction (0–1), about {answer:.3g}",
            "as a whole count": f"whole {item.unit} that fit; llminfer's unrounded value is "
            f"{answer:.4g}",
        }[how]
        return CheckResult(key, True, f"✓ {key}: right — {value!r} ({meant}).")
    if isinstance(item.answer(), str):
        expect = "a word such as " + ", ".join(repr(a) for a in (item.answer(), *item.accept))
    else:
        form = {"percent": " (a percentage, 0–100)", "fraction": " (a fraction, 0–1)"}
        expect = f"a number{form.get(item.form, '')} {item.tolerance_text()}"
        if item.is_count and math.floor(float(item.answer())) != float(item.answer()):
            expect += f", or the whole number of {item.unit} that fit"
    hint = f" Hint: {item.hint}" if item.hint else ""
    return CheckResult(
        key, False, f"✗ {key}: not quite — {value!r}{unit} is not it (expected {expect}).{hint}"
    )


__all__ = ["CheckResult", "Exercise", "check", "exercise", "exercises"]
