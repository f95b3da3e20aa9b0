"""Plots for every chapter. Each function takes data and returns a matplotlib ``Figure``;
none calls ``plt.show()``. Axes say their units. Tests assert on the data behind a figure.
"""

from llminfer.plots.memory import concurrency_curve, memory_bar
from llminfer.plots.simulate import policy_comparison, step_timeline, throughput_latency
from llminfer.plots.techniques import (
    disaggregation_bars,
    fragmentation_bars,
    prefix_ttft_curve,
    quantization_bars,
    speculative_curves,
    tensor_parallel_curves,
)

__all__ = [
    "concurrency_curve",
    "disaggregation_bars",
    "fragmentation_bars",
    "memory_bar",
    "policy_comparison",
    "prefix_ttft_curve",
    "quantization_bars",
    "speculative_curves",
    "step_timeline",
    "tensor_parallel_curves",
    "throughput_latency",
]
