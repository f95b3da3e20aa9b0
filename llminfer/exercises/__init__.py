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

from llminfer.language import N_, _

Answer = float | int | str

#: Units whose answers are counts of whole things (a "how many" question may take an integer).
COUNT_UNITS = ("requests", "gpus", "sequences", "tokens", "steps", "blocks", "replicas")
#: A number with a unit that is a word, as the learner reads it (``{value}`` is the number):
#: "12 requests", "12 个请求". Other units (ms, GiB, ×, %) follow the number after a space.
UNIT_FORMS = {
    "requests": N_("{value} requests"),
    "GPUs": N_("{value} GPUs"),
    "sequences": N_("{value} sequences"),
    "tokens": N_("{value} tokens"),
    "steps": N_("{value} steps"),
    "users": N_("{value} users"),
    "experts": N_("{value} experts"),
    "requests/s": N_("{value} requests/s"),
    "(share)": N_("{value} (share)"),
    "(fraction, 0–1)": N_("{value} (fraction, 0–1)"),
}
#: What a right whole count is, and what a wrong answer to a "how many" question may also be,
#: per count unit as the exercises spell it (other spellings get the general wording).
WHOLE_COUNT = {
    "requests": (N_("whole requests that fit"), N_("the whole number of requests that fit")),
    "GPUs": (N_("whole GPUs that fit"), N_("the whole number of GPUs that fit")),
    "sequences": (N_("whole sequences that fit"), N_("the whole number of sequences that fit")),
    "tokens": (N_("whole tokens that fit"), N_("the whole number of tokens that fit")),
    "steps": (N_("whole steps that fit"), N_("the whole number of steps that fit")),
    "blocks": (N_("whole blocks that fit"), N_("the whole number of blocks that fit")),
    "replicas": (N_("whole replicas that fit"), N_("the whole number of replicas that fit")),
}


#: Each exercise's answer once computed (``Exercise.answer``); the answers are deterministic.
_ANSWERS: dict[Exercise, Answer] = {}


@dataclass(frozen=True)
class Exercise:
    """One "Try it" question: its key ``"NN.k"`` (notebook NN, question k), what it asks, how
    llminfer computes the answer, the answer's unit, the tolerance and a hint shown when a try
    is wrong. ``question``, ``hint`` and ``unit`` are written in English (marked ``N_`` for the
    catalogs; ``form`` and ``is_count`` read them); ``question_text``, ``hint_text`` and
    ``amount`` are what the learner reads, in the language in use.

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
        """The answer, computed by llminfer on first use and kept for this exercise: ``check``
        reads it up to four times per try and a learner tries again, while some answers take
        a simulation (the 07.x case studies ~0.1 s each) or a sweep (03.5: 11 loads)."""
        if self not in _ANSWERS:
            _ANSWERS[self] = self.compute()
        return _ANSWERS[self]

    @property
    def question_text(self) -> str:
        """The question in the learner's language."""
        return _(self.question)

    @property
    def hint_text(self) -> str:
        """The hint in the learner's language ("" when there is none)."""
        return _(self.hint) if self.hint else ""

    def amount(self, value: str) -> str:
        """``value`` (a number as text) with the answer's unit, in the language in use:
        "12 requests" ("12 个请求" in Chinese), "3.5 ms", "12" without a unit."""
        if self.unit in UNIT_FORMS:
            return _(UNIT_FORMS[self.unit]).format(value=value)
        return f"{value} {self.unit}".rstrip() if self.unit else value

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
        parts = []
        if self.rel_tol > 0:
            # TRANSLATORS: {percent} is the relative tolerance in per cent, e.g. "2".
            parts.append(_("within {percent:g} % of the answer").format(percent=self.rel_tol * 100))
        if self.abs_tol > 0:
            # TRANSLATORS: {amount} is a tolerance with its unit: "±1 sequences", "±5 ms".
            within = _("within {amount}").format(amount=self.amount(f"±{self.abs_tol:g}"))
            parts.append(within.rstrip())
        if len(parts) == 2:
            # TRANSLATORS: {relative} and {absolute} are the two tolerances in words.
            return _("{relative} or {absolute}").format(relative=parts[0], absolute=parts[1])
        return parts[0] if parts else _("exactly the answer")

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
    how = item.reading(value)
    answered = item.amount(repr(value))
    if how == "as asked":
        # TRANSLATORS: {key} is the question ("04.2"), {answered} the learner's answer with
        # its unit ("31 requests", "'memory'").
        message = _("✓ {key}: right — {answered}.")
        return CheckResult(key, True, message.format(key=key, answered=answered))
    if how is not None:
        answer = float(item.answer())
        if how == "as a fraction":
            # TRANSLATORS: {percent} is the learner's fraction times 100, {answer} the answer.
            meant = _(
                "read as a fraction: {percent:g} %; the question asks for a percentage (0–100), "
                "about {answer:.3g} %"
            ).format(percent=float(value) * 100, answer=answer)
        elif how == "as a percentage":
            # TRANSLATORS: {fraction} is the learner's percentage divided by 100.
            meant = _(
                "read as a percentage: {fraction:g}; the question asks for a fraction (0–1), "
                "about {answer:.3g}"
            ).format(fraction=float(value) / 100, answer=answer)
        else:  # "as a whole count"
            whole = WHOLE_COUNT.get(item.unit)
            # TRANSLATORS: {unit} is the unit of a count ("requests", "GPUs").
            fit = _(whole[0]) if whole else _("whole {unit} that fit").format(unit=item.unit)
            # TRANSLATORS: {fit} is "whole requests that fit" (or GPUs, tokens, ...).
            meant = _("{fit}; llminfer's unrounded value is {answer:.4g}").format(
                fit=fit, answer=answer
            )
        # TRANSLATORS: {meant} says how the answer was read ("read as a fraction: ...").
        message = _("✓ {key}: right — {value!r} ({meant}).")
        return CheckResult(key, True, message.format(key=key, value=value, meant=meant))
    if isinstance(item.answer(), str):
        words = ", ".join(repr(a) for a in (item.answer(), *item.accept))
        # TRANSLATORS: {words} are the accepted answers, quoted: 'memory', 'memory-bound'.
        expect = _("a word such as {words}").format(words=words)
    else:
        form = {
            "percent": _(" (a percentage, 0–100)"),
            "fraction": _(" (a fraction, 0–1)"),
        }
        # TRANSLATORS: {form} is " (a percentage, 0–100)", " (a fraction, 0–1)" or nothing;
        # {tolerance} is "within 2 % of the answer" or the like.
        expect = _("a number{form} {tolerance}").format(
            form=form.get(item.form, ""), tolerance=item.tolerance_text()
        )
        if item.is_count and math.floor(float(item.answer())) != float(item.answer()):
            whole = WHOLE_COUNT.get(item.unit)
            number = (
                _(whole[1])
                if whole
                # TRANSLATORS: {unit} is the unit of a count ("requests", "GPUs").
                else _("the whole number of {unit} that fit").format(unit=item.unit)
            )
            # TRANSLATORS: {expect} is "a number within 2 % of the answer"; {number} is
            # "the whole number of requests that fit".
            expect = _("{expect}, or {number}").format(expect=expect, number=number)
    # TRANSLATORS: {hint} is the exercise's hint; the leading space separates it from the
    # sentence before.
    hint = _(" Hint: {hint}").format(hint=item.hint_text) if item.hint else ""
    # TRANSLATORS: {answered} is the learner's answer with its unit; {expect} says what an
    # answer must be ("a number within 2 % of the answer"); {hint} is " Hint: ..." or nothing.
    message = _("✗ {key}: not quite — {answered} is not it (expected {expect}).{hint}")
    return CheckResult(
        key, False, message.format(key=key, answered=answered, expect=expect, hint=hint)
    )


__all__ = ["CheckResult", "Exercise", "check", "exercise", "exercises"]
