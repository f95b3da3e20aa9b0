"""The pattern every llminfer widget follows: controls → a pure function → result → picture.

An ``Explorer`` holds its controls in ``.controls`` (name → ipywidget), recomputes ``.result``
with a pure function whenever a control changes, and draws ``.figure`` from the result. A test
can set ``explorer.controls["x"].value`` and assert on ``explorer.result`` without a kernel.
Bad combinations never raise into the notebook: ``.error`` holds the message and the widget
shows it in place of the result.
"""

from __future__ import annotations

import html
from abc import ABC, abstractmethod
from typing import Any

import ipywidgets as W
from matplotlib.figure import Figure

from llminfer.plots._figure import figure_png


class Explorer(ABC):
    """Base class: subclasses implement ``compute``, and optionally ``describe`` and ``draw``."""

    title = ""

    def __init__(self, controls: dict[str, W.ValueWidget]) -> None:
        self.controls = controls
        self.result: Any = None
        self.error: str | None = None
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

    def update(self) -> None:
        """Recompute the result from the controls and refresh summary and picture."""
        try:
            self.result = self.compute(**self.values())
            self.error = None
        except ValueError as exc:
            self.result, self.figure, self.error = None, None, str(exc)
            self._summary.value = f"<p style='color:#b00020'>⚠ {html.escape(self.error)}</p>"
            self._image.value = b""
            return
        self._summary.value = self.describe(self.result)
        self.figure = self.draw(self.result)
        self._image.value = figure_png(self.figure) if self.figure is not None else b""

    def _on_change(self, _change: dict) -> None:
        self.update()

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.ui)
