"""The pattern every llminfer widget follows: controls → a pure function → result → picture.

An ``Explorer`` holds its controls in ``.controls`` (name → ipywidget), recomputes ``.result``
with a pure function whenever a control changes, and draws ``.figure`` from the result. A test
can set ``explorer.controls["x"].value`` and assert on ``explorer.result`` without a kernel.
Bad combinations never raise into the notebook: ``.error`` holds the message and the widget
shows it in place of the result. A result that could not run on real hardware (an ``Estimate``
or ``MemoryPlan`` with ``fits`` False, or a table with a False ``fits`` column) keeps its
numbers but ``.warning`` holds the reason and the widget shows it above them.
"""

from __future__ import annotations

import functools
import html
import inspect
from abc import ABC, abstractmethod
from typing import Any

import ipywidgets as W
from matplotlib.figure import Figure
from traitlets import TraitError

from llminfer.plots._figure import figure_png


class Explorer(ABC):
    """Base class: subclasses implement ``compute``, and optionally ``describe`` and ``draw``."""

    title = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Every explorer's constructor builds its controls from its arguments; a value a
        # control refuses (TraitError: "Invalid selection") or silently clamps to its range
        # becomes a ValueError naming the argument and what it may be.
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            cls.__init__ = _named_arguments(cls.__dict__["__init__"])

    def __init__(self, controls: dict[str, W.ValueWidget]) -> None:
        self.controls = controls
        self.result: Any = None
        self.error: str | None = None
        self.warning = ""
        self.figure: Figure | None = None
        self._summary = W.HTML()
        self._image = W.Image(format="png", layout=W.Layout(max_width="900px"))
        for control in controls.values():
            control.style.description_width = "initial"
            control.observe(self._on_change, names="value")
        self.ui = W.VBox(
            [
                W.HTML(f"<b>{html.escape(self.title)}</b>"),
                W.GridBox(
                    list(controls.values()),
                    layout=W.Layout(grid_template_columns="repeat(2, minmax(280px, 1fr))"),
                ),
                self._summary,
                self._image,
            ]
        )
        self.update()

    def values(self) -> dict[str, Any]:
        """Current value of every control, by name."""
        return {name: control.value for name, control in self.controls.items()}

    @abstractmethod
    def compute(self, **values: Any) -> Any:
        """The result for the controls' current values (a pure function of them)."""

    def describe(self, result: Any) -> str:
        """An HTML summary of the result."""
        return html.escape(str(result))

    def draw(self, result: Any) -> Figure | None:
        return None

    def feasibility_warning(self, result: Any) -> str:
        """Why ``result`` describes a configuration that could not run, or "" when it could.

        Looks for ``fits``/``reason`` on the result, on its ``estimate``, or in a table's
        ``fits``/``reason`` columns. Subclasses override it for other kinds of result.
        """
        for obj in (result, getattr(result, "estimate", None)):
            fits = getattr(obj, "fits", None)
            if isinstance(fits, bool) and not fits:
                return getattr(obj, "reason", "") or "this configuration does not fit"
        columns = getattr(result, "columns", ())
        if "fits" in columns and not result["fits"].all():
            bad = result[~result["fits"].astype(bool)]
            first = str(bad["reason"].iloc[0]) if "reason" in columns else ""
            return f"{len(bad)} of {len(result)} rows do not fit" + (f": {first}" if first else "")
        return ""

    def update(self) -> None:
        """Recompute the result from the controls and refresh summary and picture."""
        try:
            self.result = self.compute(**self.values())
            self.error = None
        except ValueError as exc:
            self.result, self.figure, self.error = None, None, str(exc)
            self.warning = ""
            self._summary.value = f"<p style='color:#b00020'>⚠ {html.escape(self.error)}</p>"
            self._image.value = b""
            return
        self.warning = self.feasibility_warning(self.result)
        banner = (
            f"<p style='color:#b00020'><b>⚠ Not feasible:</b> {html.escape(self.warning)}</p>"
            if self.warning
            else ""
        )
        self._summary.value = banner + self.describe(self.result)
        self.figure = self.draw(self.result)
        self._image.value = figure_png(self.figure) if self.figure is not None else b""

    def _on_change(self, _change: dict) -> None:
        self.update()

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.ui)


def _allowed(control: W.ValueWidget) -> str:
    """What a control accepts, in words."""
    options = getattr(control, "options", None)
    if options:
        values = [o[1] if isinstance(o, tuple) and len(o) == 2 else o for o in options]
        return "one of " + ", ".join(repr(v) for v in values)
    if hasattr(control, "min") and hasattr(control, "max"):
        kind = "an integer" if isinstance(control.value, int) else "a number"
        return f"{kind} from {control.min!r} to {control.max!r}"
    return f"of type {type(control.value).__name__}"


def _named_arguments(init):
    """Wrap an explorer's ``__init__`` so a bad argument raises ValueError naming it."""
    signature = inspect.signature(init)

    @functools.wraps(init)
    def wrapper(self, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)  # TypeError for unknown names, as usual
        given = {k: v for k, v in bound.arguments.items() if k != "self"}
        name = type(self).__name__
        try:
            init(self, *args, **kwargs)
        except TraitError as exc:
            # Find the argument: the one whose control refuses it in a default-built explorer.
            defaults = type(self)()
            for key, value in given.items():
                control = defaults.controls.get(key)
                if control is None:
                    continue
                try:
                    control.value = value
                except TraitError:
                    raise ValueError(
                        f"{name}({key}={value!r}): {key} must be {_allowed(control)}"
                    ) from None
            raise ValueError(f"{name}: an argument was refused: {exc}") from None
        for key, value in given.items():
            control = self.controls.get(key)
            if control is None:
                continue
            unset = value is None and bool(getattr(control, "options", None))
            if unset or _differs(control.value, value):
                raise ValueError(f"{name}({key}={value!r}): {key} must be {_allowed(control)}")

    return wrapper


def _differs(shown: Any, given: Any) -> bool:
    """True when a control holds another value than it was given (clamped to its range)."""
    try:
        return bool(shown != given)
    except (TypeError, ValueError):
        return False
