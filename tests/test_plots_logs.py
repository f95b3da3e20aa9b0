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


# --- issue 9 §4: readable units, labels that never overlap, log scale for a long tail -------


@pytest.fixture(scope="module")
def realistic():
    return read_requests(DATA / "requests_realistic.csv")


def _label_boxes(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()  # text extents need a renderer
    fig.draw(renderer)
    return [
        [t.get_window_extent(renderer) for t in ax.texts if t.get_gid() == "percentile-label"]
        for ax in fig.axes
    ]


def test_cdf_percentile_labels_never_overlap(realistic):
    # The realistic log's p95 and p99 TTFT (2.06 s, 5.17 s) and E2E p95/p99/SLO sit close
    # together: the labels used to print over each other.
    fig = latency_cdf(realistic, slo={"ttft_s": 0.5, "tpot_s": 0.05, "e2e_s": 30})
    for ax, boxes in zip(fig.axes, _label_boxes(fig), strict=True):
        assert len(boxes) == 4  # p50, p95, p99 and the SLO
        for i, a in enumerate(boxes):
            for b in boxes[i + 1 :]:
                assert not a.overlaps(b), (a, b)
        panel = ax.get_window_extent()
        # every label stays inside its panel horizontally
        assert all(panel.x0 - 1 <= box.x0 and box.x1 <= panel.x1 + 1 for box in boxes)


def test_cdf_labels_stay_apart_even_for_equal_values():
    # Three identical requests: p50 = p95 = p99, the worst case for labels placed at the value.
    same = read_requests(DATA / "requests.csv").requests.assign(
        start_ts=0.0, first_token_ts=0.4, end_ts=3.0
    )
    boxes = _label_boxes(latency_cdf(same))[0]
    assert len(boxes) == 3 and not any(
        a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :]
    )


def test_cdf_units_follow_magnitude_and_e2e_is_in_seconds(article):
    fig = latency_cdf(article)
    ttft, tpot, e2e = fig.axes
    assert ttft.get_xlabel() == "TTFT (ms)" and tpot.get_xlabel() == "TPOT (ms)"
    assert e2e.get_xlabel() == "E2E latency (s)"
    # the article's E2E: 3.10, 4.21, 2.52 s
    np.testing.assert_allclose(e2e.lines[0].get_xdata(), [2.52, 3.10, 4.21])
    assert [ax.get_title() for ax in fig.axes] == [
        "Time to first token (TTFT)",
        "Time per output token (TPOT)",
        "End-to-end latency (E2E)",
    ]
    labels = [t.get_text().strip() for t in e2e.texts]
    assert labels[0] == "p50 = 3.10 s"  # the article's median E2E, r1


def test_cdf_uses_a_log_axis_only_where_a_tail_hides_the_body(realistic):
    fig = latency_cdf(realistic)
    # TTFT: p99 / p50 = 5.17 s / 0.141 s ≈ 37 > 10 → log; TPOT ≈ 1.7, E2E ≈ 5.6 → linear
    assert [ax.get_xscale() for ax in fig.axes] == ["log", "linear", "linear"]
    assert fig.axes[0].get_xlabel() == "TTFT (ms, log scale)"
    assert [ax.get_xscale() for ax in latency_cdf(realistic, log_x=False).axes] == ["linear"] * 3


def test_format_in_unit():
    from llminfer.plots.logs import format_in_unit

    assert format_in_unit(5.1723, "ms") == "5,172 ms"
    assert format_in_unit(0.038, "ms") == "38.0 ms"
    assert format_in_unit(6.9468, "s") == "6.95 s"
    with pytest.raises(ValueError, match="unit='min'"):
        format_in_unit(1.0, "min")


def test_latency_table_has_one_unit_per_metric(realistic):
    from llminfer import summarize
    from llminfer.plots.logs import latency_table

    summary = summarize(realistic)
    table = latency_table(summary)
    assert list(table.index) == [
        "Time to first token (TTFT) (ms)",
        "Time per output token (TPOT) (ms)",
        "End-to-end latency (E2E) (s)",
        "Time in the queue (ms)",
    ]
    frame = summary.to_frame()
    assert table.loc["Time to first token (TTFT) (ms)", "p99"] == float(
        f"{frame.loc['ttft_s', 'p99'] * 1e3:.3g}"
    )
    assert table.loc["End-to-end latency (E2E) (s)", "p50"] == float(
        f"{frame.loc['e2e_s', 'p50']:.3g}"
    )
    assert (
        table["count"].tolist()
        == frame.loc[["ttft_s", "tpot_s", "e2e_s", "queue_s"], "count"].astype(int).tolist()
    )


def test_timeline_can_start_later_in_the_log(realistic):
    fig = request_timeline(realistic, max_requests=5, after_s=540)
    bars = fig.axes[0].patches
    assert min(b.get_x() for b in bars) >= 540
    with pytest.raises(ValueError, match="after_s=10000"):
        request_timeline(realistic, after_s=10000)
    with pytest.raises(ValueError, match="max_requests=0"):
        request_timeline(realistic, max_requests=0)


def test_latency_cdf_units_by_magnitude_and_separate_percentile_labels(article):
    # (from i09) article log: E2E of 2.5-4.2 s is drawn in s, TTFT of 0.42-0.56 s in ms
    fig = latency_cdf(article)
    ttft_ax, _, e2e_ax = fig.axes
    assert ttft_ax.get_xlabel() == "TTFT (ms)" and e2e_ax.get_xlabel() == "E2E latency (s)"
    assert max(e2e_ax.lines[0].get_xdata()) < 10
    # one label per percentile, each in its own row (axes-fraction y), never stacked together
    texts = [t for t in ttft_ax.texts if t.get_gid() == "percentile-label"]
    assert [t.get_text().split()[0] for t in texts] == ["p50", "p95", "p99"]
    rows = [t.get_position()[1] for t in texts]
    assert min(np.diff(rows)) >= 0.1
