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
from llminfer.plots.roofline import (
    decode_batch_chart,
    flash_traffic_chart,
    gpu_comparison_chart,
    prefill_chart,
    request_breakdown_chart,
    roofline_chart,
)

__all__ = [
    "concurrency_curve",
    "decode_batch_chart",
    "flash_traffic_chart",
    "gpu_comparison_chart",
    "latency_cdf",
    "load_over_time",
    "memory_bar",
    "prefill_chart",
    "request_anatomy",
    "request_breakdown_chart",
    "request_timeline",
    "roofline_chart",
]
