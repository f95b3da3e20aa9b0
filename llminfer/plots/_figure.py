"""The one place plots get a figure from: no pyplot, so no global state and no auto-show."""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from llminfer.plots import fonts

# The figure the next new_figure() call clears and reuses instead of making a new one (set by
# an explorer while it redraws; None everywhere else).
_TARGET: ContextVar[Figure | None] = ContextVar("llminfer_plots_target", default=None)

#: Colours used for the same quantity in every chapter, so a reader learns them once.
COLORS = {
    "weights": "#4C72B0",
    "reserve": "#8172B3",
    "KV cache": "#DD8452",
    "free": "#55A868",
    "headroom": "#CCCCCC",
    "queue": "#C44E52",
    "prefill": "#DD8452",
    "decode": "#4C72B0",
    "compute": "#C44E52",
    "memory": "#4C72B0",
}


def figure_png(fig: Figure, dpi: int = 90, compress_level: int = 6) -> bytes:
    """Render a Figure to PNG bytes (no pyplot, no kernel needed).

    ``dpi`` is pixels per inch; ``compress_level`` is zlib's 0-9 (6, matplotlib's default,
    for saved notebooks; the explorers use 1, several times faster to encode).
    """
    if not 0 <= compress_level <= 9:
        raise ValueError(f"compress_level={compress_level!r} is not allowed; give 0 to 9")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, pil_kwargs={"compress_level": compress_level})
    return buffer.getvalue()


class NotebookFigure(Figure):
    """A matplotlib Figure that shows itself as PNG when it is a notebook cell's result.

    Plots never touch pyplot (no global figure registry, nothing shown twice), so the inline
    backend's display hook does not apply; ``_repr_png_`` is IPython's own protocol.
    """

    def _repr_png_(self) -> bytes:
        return figure_png(self)

    def __repr__(self) -> str:
        width, height = self.get_size_inches()
        return f"<Figure {width:g}x{height:g} in, {len(self.axes)} axes>"


def require_columns(table, columns) -> None:
    """Raise ValueError naming the columns a plot needs that ``table`` lacks."""
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(f"table lacks columns {sorted(missing)}")


@contextmanager
def drawing_into(fig: Figure) -> Iterator[Figure]:
    """Within this block every plot function draws into ``fig`` (cleared first) instead of a
    new figure. An explorer keeps one figure this way: its canvas, renderer and the text
    measurements matplotlib caches per renderer survive from one picture to the next."""
    token = _TARGET.set(fig)
    try:
        yield fig
    finally:
        _TARGET.reset(token)


def new_figure(width: float = 7.0, height: float = 4.0, nrows: int = 1, ncols: int = 1):
    """A NotebookFigure with constrained layout and its axes (not registered with pyplot);
    inside ``drawing_into(fig)``, ``fig`` cleared and resized.

    In Chinese with a CJK font the font is put behind the default family first: a figure's
    title and axis labels are made with its axes, and a text takes the font family in force
    when it is made, so the first figure after ``set_language("zh")`` would otherwise draw
    its axis labels in a font without Chinese glyphs (boxes)."""
    fonts.prepare_fonts()
    fig = _TARGET.get()
    if fig is None:
        fig = NotebookFigure(figsize=(width, height), layout="constrained")
    else:
        fig.clear()
        fig.set_size_inches(width, height)
        fig.set_layout_engine("constrained")
    axes = fig.subplots(nrows, ncols, squeeze=True)
    return fig, axes


def readable_log_axis(ax, which: str = "x") -> None:
    """Log scale on ``ax``'s ``which`` axis ("x" or "y") with plain labels (5, 10, 20, 50 —
    never 6×10⁰) on 1-2-5 ticks, so a narrow range such as TPOT between 5 and 40 ms still gets
    several readable labels."""
    if which not in ("x", "y"):
        raise ValueError(f"which={which!r}: give 'x' or 'y'")
    getattr(ax, f"set_{which}scale")("log")
    axis = getattr(ax, f"{which}axis")
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())
