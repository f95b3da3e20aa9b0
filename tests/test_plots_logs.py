"""Log plots: assert on the data behind each figure."""

from pathlib import Path

import numpy as np
import pytest

from llminfer import read_requests
from llminfer.plots import latency_cdf, load_over_time, request_timeline

DATA = Path(__file__).parent.parent / "data"


@pytest.fixture
def article():
    return read_requests(DATA / "requests.csv")


def test_latency_cdf_steps_through_every_request(article):
    fig = latency_cdf(article, slo={"ttft_s": 0.5})
    ttft_line = fig.axes[0].lines[0]
    np.testing.assert_allclose(ttft_line.get_xdata(), [420, 480, 560])
    np.testing.assert_allclose(ttft_line.get_ydata(), [1 / 3, 2 / 3, 1])
    slo_lines = [ln for ln in fig.axes[0].lines if ln.get_label() == "SLO"]
    assert slo_lines[0].get_xdata()[0] == pytest.approx(500)


def test_timeline_bars_span_start_to_end(article):
    fig = request_timeline(article.requests.assign(scheduled_ts=[0.3, 0.5, 0.45]))
    bars = fig.axes[0].patches
    queue, prefill, decode = bars[0:3], bars[3:6], bars[6:9]
    assert [round(b.get_width(), 6) for b in queue] == [0.3, 0.35, 0.05]
    assert decode[1].get_x() + decode[1].get_width() == pytest.approx(4.36)
    assert prefill[0].get_x() == pytest.approx(0.3)


def test_load_over_time_draws_in_flight_and_tokens(article):
    fig = load_over_time(article, bin_s=1.0)
    top, bottom = fig.axes
    assert list(top.lines[0].get_ydata()) == [1, 2, 3, 2, 1, 0]
    assert bottom.lines[0].get_ydata().sum() == pytest.approx(240)


def test_request_anatomy_ticks_every_chunk_and_labels_the_metrics():
    from llminfer.plots import request_anatomy

    frame = read_requests(DATA / "vllm_bench_detailed.json").requests
    fig = request_anatomy(frame, request_id="vllm-1")
    ticks = fig.axes[0].collections[0].get_segments()
    assert len(ticks) == 8  # request 1 of the sample streams 8 chunks
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    assert "TTFT = " in texts and "TPOT = " in texts and "E2E = " in texts
    with pytest.raises(ValueError, match="request_id='nope'"):
        request_anatomy(frame, request_id="nope")


def test_latency_cdf_units_by_magnitude_and_separate_percentile_labels(article):
    # article log: E2E of 1.9-4.4 s is drawn in s, TTFT of 0.42-0.56 s (p99 < 1 s) in ms
    fig = latency_cdf(article)
    ttft_ax, _, e2e_ax = fig.axes
    assert ttft_ax.get_xlabel() == "TTFT (ms)" and e2e_ax.get_xlabel() == "E2E latency (s)"
    assert max(e2e_ax.lines[0].get_xdata()) < 10
    # one box lists p50/p95/p99 instead of three texts stacked 0.04 apart on the curve
    (box,) = ttft_ax.texts
    assert box.get_text().splitlines()[0].startswith("p50 ") and "p99" in box.get_text()
