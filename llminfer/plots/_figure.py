"""The one place plots get a figure from: no pyplot, so no global state and no auto-show."""

from __future__ import annotations

from matplotlib.figure import Figure

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


def new_figure(width: float = 7.0, height: float = 4.0, nrows: int = 1, ncols: int = 1):
    """A matplotlib Figure with constrained layout and its axes (not registered with pyplot)."""
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=True)
    return fig, axes
