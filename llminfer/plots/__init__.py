"""Plots for every chapter. Each function takes data and returns a matplotlib ``Figure``;
none calls ``plt.show()``. Axes say their units. Tests assert on the data behind a figure.
"""

from llminfer.plots.memory import concurrency_curve, memory_bar

__all__ = ["concurrency_curve", "memory_bar"]
