"""Plots for every chapter. Each function takes data and returns a matplotlib ``Figure``;
none calls ``plt.show()``. Axes say their units. Tests assert on the data behind a figure.
"""

from llminfer.plots.logs import (
    latency_cdf,
    load_over_time,
    request_anatomy,
    request_timeline,
)
from llminfer.plots.memory import concurrency_curve, memory_bar

__all__ = [
    "concurrency_curve",
    "latency_cdf",
    "load_over_time",
    "memory_bar",
    "request_anatomy",
    "request_timeline",
]
