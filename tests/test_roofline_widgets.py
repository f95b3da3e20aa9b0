"""Chapters 1 and 2's widgets and plots, driven without a kernel."""

import pytest

from llminfer import estimate_latency, get_gpu, get_model
from llminfer.cost.flash import flash_traffic_table
from llminfer.cost.latency import (
    decode_batch_table,
    gpu_comparison,
    prefill_table,
    request_breakdown,
)
from llminfer.cost.roofline import arithmetic_intensity
from llminfer.plots import (
    decode_batch_chart,
    flash_traffic_chart,
    gpu_comparison_chart,
    prefill_chart,
    request_breakdown_chart,
    roofline_chart,
)
from llminfer.widgets import RequestJourney, RooflineExplorer

LLAMA8, H100 = get_model("llama-3.1-8b"), get_gpu("h100-sxm")


def test_request_journey_follows_its_controls():
    w = RequestJourney()
    assert w.error is None and w.figure is not None
    assert w.result.stages["queue"] == 0.2 and w.result.stages["network"] == 0.05
    assert w.result.total_s == pytest.approx(0.25 + w.result.estimate.e2e_s)
    before = w.result.stages["prefill"]
    w.controls["prompt_tokens"].value = 32768
    assert w.result.stages["prefill"] > 10 * before
    w.controls["gpu"].value = "m3-max"  # no published matrix rate: shown, not raised
    assert w.result is None and "M3 Max" in w.error


def test_roofline_explorer_moves_decode_towards_the_ridge_with_batch():
    w = RooflineExplorer()
    assert w.result.decode_bound == "memory" and w.result.prefill_bound == "compute"
    ai_1 = arithmetic_intensity(w.result.decode_cost)
    w.controls["batch"].value = 1024
    assert arithmetic_intensity(w.result.decode_cost) > 20 * ai_1
    assert "ridge point 295" in w._summary.value
    w.controls["weight_dtype"].value = "fp8"
    assert w.result.prefill_cost.weight_dtype == "fp8"


def test_plots_carry_their_data():
    est = estimate_latency(LLAMA8, H100, 2048, 64)
    fig = roofline_chart(H100, {"prefill": est.prefill_cost, "decode": est.decode_cost})
    xs = [line.get_xdata()[0] for line in fig.axes[0].lines[1:] if len(line.get_xdata()) == 1]
    assert xs == pytest.approx(
        [arithmetic_intensity(est.prefill_cost), arithmetic_intensity(est.decode_cost)]
    )
    stages = request_breakdown(est, 0.05, 0.1)
    assert sum(
        p.get_width() for p in request_breakdown_chart(stages).axes[0].patches
    ) == pytest.approx(sum(stages.values()))
    table = decode_batch_table(LLAMA8, H100, [1, 8, 64], 512)
    assert list(decode_batch_chart(table).axes[0].lines[0].get_xdata()) == [1, 8, 64]
    assert prefill_chart(prefill_table(LLAMA8, [H100], [256, 1024])).axes
    assert gpu_comparison_chart(gpu_comparison(LLAMA8, [H100], 1024, 8)).axes
    assert flash_traffic_chart(flash_traffic_table([512, 1024])).axes
    with pytest.raises(ValueError, match="lacks columns"):
        prefill_chart(table)
    with pytest.raises(ValueError, match="queue_s=-1"):
        request_breakdown(est, queue_s=-1)


def test_request_breakdown_legend_is_inside_the_figure():
    stages = {"network": 0.05, "queue": 0.2, "prefill": 0.05, "decode": 1.56}
    fig = request_breakdown_chart(stages)
    fig.canvas.draw()
    (legend,) = fig.legends  # a figure legend, placed by constrained layout
    box = legend.get_window_extent()
    assert box.y0 >= 0 and box.x0 >= 0 and box.x1 <= fig.bbox.x1
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert "1.56 s" in labels and "200 ms" in labels  # ms or s by magnitude
