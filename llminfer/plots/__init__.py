"""Plots for every chapter. Each function takes data and returns a matplotlib ``Figure``;
none calls ``plt.show()``. Axes say their units. Tests assert on the data behind a figure.
"""

from llminfer.plots.diagnose import before_after_cdf
from llminfer.plots.logs import (
    latency_cdf,
    load_over_time,
    request_anatomy,
    request_timeline,
)
from llminfer.plots.measure import decode_fit_chart, sweep_fit_chart
from llminfer.plots.memory import concurrency_curve, memory_bar
from llminfer.plots.moe import ep_sweep_chart, experts_touched_chart
from llminfer.plots.roofline import (
    decode_batch_chart,
    flash_traffic_chart,
    gpu_comparison_chart,
    measured_steps_chart,
    prefill_chart,
    profile_chart,
    request_breakdown_chart,
    roofline_chart,
)
from llminfer.plots.simulate import (
    chunk_size_tradeoff,
    policy_comparison,
    step_timeline,
    throughput_latency,
)
from llminfer.plots.techniques import (
    disaggregation_bars,
    fragmentation_bars,
    prefix_ttft_curve,
    quantization_bars,
    speculative_batch_curve,
    speculative_curves,
    tensor_parallel_curves,
)

__all__ = [
    "before_after_cdf",
    "chunk_size_tradeoff",
    "concurrency_curve",
    "decode_batch_chart",
    "decode_fit_chart",
    "disaggregation_bars",
    "ep_sweep_chart",
    "experts_touched_chart",
    "flash_traffic_chart",
    "fragmentation_bars",
    "gpu_comparison_chart",
    "latency_cdf",
    "load_over_time",
    "measured_steps_chart",
    "memory_bar",
    "policy_comparison",
    "prefill_chart",
    "prefix_ttft_curve",
    "profile_chart",
    "quantization_bars",
    "request_anatomy",
    "request_breakdown_chart",
    "request_timeline",
    "roofline_chart",
    "speculative_batch_curve",
    "speculative_curves",
    "step_timeline",
    "sweep_fit_chart",
    "tensor_parallel_curves",
    "throughput_latency",
]
