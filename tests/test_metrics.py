"""Metrics against the article's worked example, hand-worked streams and property tests."""

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from llminfer import compare_definitions, percentile, read_requests, request_metrics, summarize
from llminfer.logs.quantiles import weighted_percentile
from llminfer.logs.summary import meets_slo
from llminfer.logs.timeline import in_flight, output_tps_over_time

DATA = Path(__file__).parent.parent / "data"


@pytest.fixture
def article():
    return read_requests(DATA / "requests.csv")


def test_article_per_request_metrics(article):
    m = request_metrics(article)
    np.testing.assert_allclose(m["ttft_s"], [0.42, 0.56, 0.48])
    np.testing.assert_allclose(
        m["tpot_s"], [(3.10 - 0.42) / 79, (4.36 - 0.71) / 95, (2.92 - 0.88) / 63]
    )
    np.testing.assert_allclose(m["e2e_s"], [3.10, 4.21, 2.52])


def test_request_metrics_is_a_table_of_its_own(article):
    table = request_metrics(article)
    table.loc[0, ["request_id", "status"]] = ["zz", "failed"]
    table.loc[0, ["start_ts", "ttft_s", "input_tokens"]] = [9.0, 1.0, 1]
    again = request_metrics(article)  # the log is untouched
    assert again.loc[0, ["request_id", "status", "start_ts", "input_tokens"]].tolist() == [
        "r1",
        "ok",
        0.0,
        1024,
    ]
    assert again.loc[0, "ttft_s"] == pytest.approx(0.42)


def test_article_window_percentiles_and_tps(article):
    s = summarize(article).to_dict()
    assert s["ttft_s_p95"] == pytest.approx(0.552)  # 0.48 + 0.9 × (0.56 − 0.48)
    assert s["ttft_s_p50"] == pytest.approx(0.48)
    assert s["window_s"] == pytest.approx(4.36)
    assert s["output_tps"] == pytest.approx(240 / 4.36)
    assert s["input_tps"] == pytest.approx((1024 + 4096 + 512) / 4.36)
    assert s["total_tps"] == pytest.approx((240 + 5632) / 4.36)
    assert s["rps"] == pytest.approx(3 / 4.36)
    assert s["n_requests"] == 3 and s["n_failed"] == 0
    assert math.isnan(s["goodput_rps"]) and math.isnan(s["good_fraction"])


def test_to_dict_keys_are_exactly_the_contract(article):
    keys = list(summarize(article).to_dict())
    head = ["n_requests", "n_failed", "window_s", "rps", "output_tps", "input_tps", "total_tps"]
    assert keys[:9] == [*head, "goodput_rps", "good_fraction"]
    stats = ["mean", "min", "max", "p50", "p90", "p95", "p99"]
    assert keys[9:] == [f"{m}_{s}" for m in ("ttft_s", "tpot_s", "e2e_s") for s in stats]
    assert "ttft_s_p99.9" in summarize(article, percentiles=(50, 99.9)).to_dict()


def test_goodput_and_good_fraction(article):
    # TTFT ≤ 0.5 s: r1 (0.42) and r3 (0.48) pass, r2 (0.56) fails.
    s = summarize(article, slo={"ttft_s": 0.5})
    assert s.goodput_rps == pytest.approx(2 / 4.36)
    assert s.good_fraction == pytest.approx(2 / 3)
    # Adding E2E ≤ 3 s also removes r1 (3.10 s): only r3 is good.
    s = summarize(article, slo={"ttft_s": 0.5, "e2e_s": 3.0})
    assert s.good_fraction == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="slo key 'ttft'"):
        summarize(article, slo={"ttft": 0.5})
    with pytest.raises(ValueError, match="positive number of seconds"):
        summarize(article, slo={"ttft_s": -1})


def test_summary_renders_and_converts(article):
    s = summarize(article, slo={"tpot_s": 0.05})
    assert "output TPS: 55.05 tokens/s" in str(s)
    assert "<table>" in s._repr_html_()
    frame = s.to_frame()
    assert frame.loc["ttft_s", "p95"] == pytest.approx(0.552)
    assert frame.loc["tpot_s", "count"] == 3


def test_one_token_outputs_have_no_tpot_and_pass_a_tpot_slo():
    frame = pd.DataFrame(
        {
            "request_id": ["a", "b"],
            "start_ts": [0.0, 0.0],
            "first_token_ts": [0.2, 0.3],
            "end_ts": [0.2, 1.3],
            "input_tokens": [100, 100],
            "output_tokens": [1, 11],
        }
    )
    m = request_metrics(frame)
    assert math.isnan(m.loc[0, "tpot_s"]) and m.loc[1, "tpot_s"] == pytest.approx(0.1)
    s = summarize(frame, slo={"tpot_s": 0.05})
    assert s.table.loc["tpot_s", "count"] == 1
    assert s.good_fraction == pytest.approx(0.5)  # a passes (no TPOT), b (0.1 s) fails
    assert list(meets_slo(m, {"tpot_s": 0.05})) == [True, False]


def test_failed_requests_are_counted_but_not_in_latency_statistics(article):
    frame = article.requests.copy()
    frame["status"] = ["ok", "failed", "ok"]
    s = summarize(frame, slo={"ttft_s": 1.0})
    assert (s.n_requests, s.n_failed) == (3, 1)
    assert s.table.loc["ttft_s", "count"] == 2
    assert s.table.loc["ttft_s", "max"] == pytest.approx(0.48)
    assert s.output_tps == pytest.approx((80 + 64) / 4.36)  # only successful tokens
    assert s.rps == pytest.approx(2 / 4.36)
    assert s.good_fraction == pytest.approx(2 / 3)  # failed requests are never good


def test_queue_and_prefill_split_ttft(article):
    frame = article.requests.assign(scheduled_ts=[0.30, 0.50, 0.45])
    m = request_metrics(frame)
    np.testing.assert_allclose(m["queue_s"], [0.30, 0.35, 0.05])
    np.testing.assert_allclose(m["queue_s"] + m["prefill_s"], m["ttft_s"])
    assert "queue_s" in summarize(frame).table.index


# --- compare_definitions on a stream worked out by hand -------------------------------------
# A: start 0, four one-token chunks at 1.0, 1.1, 1.2, 1.3 s (N = 4).
# B: start 0, chunks at 0.5 s (1 token) and 1.5 s (2 tokens)   (N = 3).
STREAM = pd.DataFrame(
    {
        "request_id": ["A", "B"],
        "start_ts": [0.0, 0.0],
        "first_token_ts": [1.0, 0.5],
        "end_ts": [1.3, 1.5],
        "input_tokens": [10, 10],
        "output_tokens": [4, 3],
        "token_ts": [np.array([1.0, 1.1, 1.2, 1.3]), np.array([0.5, 1.5])],
        "chunk_tokens": [np.array([1, 1, 1, 1]), np.array([1, 2])],
    }
)
HAND = {
    # TPOT per request: A 0.3/3 = 0.1, B 1.0/2 = 0.5; plain mean over requests.
    "vllm_tpot": (0.3, 0.3, 0.1 + 0.99 * 0.4),
    "genai_perf_itl": (0.3, 0.3, 0.1 + 0.99 * 0.4),
    # Chunk gaps pooled: 0.1, 0.1, 0.1, 1.0.
    "vllm_itl": (1.3 / 4, 0.1, 0.1 + 0.97 * 0.9),
    # E2E/N: A 1.3/4 = 0.325, B 1.5/3 = 0.5.
    "llmperf_itl": (0.4125, 0.4125, 0.325 + 0.99 * 0.175),
    # (last − start)/N weighted by N: [0.325]*4 + [0.5]*3; mean = (1.3 + 1.5)/7 = 0.4.
    "guidellm_tpot": (0.4, 0.325, 0.5),
    # (last − first)/(N − 1) weighted by N − 1: [0.1]*3 + [0.5]*2; mean = 1.3/5 = 0.26.
    "guidellm_itl": (0.26, 0.1, 0.5),
    # Per token: 0.1, 0.1, 0.1 and B's 1.0 s gap over 2 tokens → 0.5, 0.5.
    "sglang_itl": (0.26, 0.1, 0.5),
}


def test_compare_definitions_matches_the_hand_worked_stream():
    table = compare_definitions(STREAM)
    assert list(table.index) == [
        "vllm_tpot",
        "vllm_itl",
        "genai_perf_itl",
        "llmperf_itl",
        "guidellm_tpot",
        "guidellm_itl",
        "sglang_itl",
    ]
    for key, (mean, p50, p99) in HAND.items():
        assert table.loc[key, ["mean_s", "p50_s", "p99_s"]].tolist() == pytest.approx(
            [mean, p50, p99]
        ), key
    assert table["definition"].str.len().min() > 40


def test_chunk_variants_are_nan_with_a_reason_without_token_timestamps(article):
    table = compare_definitions(article)
    for key in ("vllm_itl", "sglang_itl"):
        assert math.isnan(table.loc[key, "mean_s"])
        assert "token_ts" in table.loc[key, "note"]
    assert table.loc["vllm_tpot", "mean_s"] == pytest.approx(
        ((3.10 - 0.42) / 79 + (4.36 - 0.71) / 95 + (2.92 - 0.88) / 63) / 3
    )


def test_in_flight_and_tokens_over_time(article):
    flight = in_flight(article)
    assert flight["in_flight"].tolist() == [1, 2, 3, 2, 1, 0]
    assert flight["time_s"].tolist() == [0.0, 0.15, 0.40, 2.92, 3.10, 4.36]
    tps = output_tps_over_time(article, bin_s=1.0)
    assert tps["output_tps"].sum() * 1.0 == pytest.approx(240)
    assert len(tps) == 5
    with pytest.raises(ValueError, match="bin_s=0"):
        output_tps_over_time(article, bin_s=0)


# --- percentile: the article's function ----------------------------------------------------


def test_percentile_is_the_articles_function():
    assert percentile([0.42, 0.56, 0.48], 0.95) == pytest.approx(0.552)
    assert percentile([3.0], 0.5) == 3.0
    with pytest.raises(ValueError, match="must not be empty"):
        percentile([], 0.5)
    with pytest.raises(ValueError, match="q=95"):
        percentile([1.0, 2.0], 95)


finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@given(st.lists(finite, min_size=1, max_size=50), st.floats(min_value=0, max_value=1))
def test_percentile_equals_numpy_default(values, q):
    assert percentile(values, q) == pytest.approx(np.percentile(values, 100 * q), abs=1e-6)


@given(
    st.lists(finite, min_size=1, max_size=30),
    st.floats(min_value=0, max_value=1),
    st.floats(min_value=0, max_value=1),
)
def test_percentile_is_monotone_in_q(values, q1, q2):
    low, high = sorted((q1, q2))
    assert percentile(values, low) <= percentile(values, high) + 1e-9


@given(
    st.lists(st.tuples(finite, st.integers(0, 5)), min_size=1, max_size=20).filter(
        lambda pairs: sum(w for _, w in pairs) > 0
    ),
    st.floats(min_value=0, max_value=1),
)
def test_weighted_percentile_equals_repeating_values(pairs, q):
    values, weights = zip(*pairs, strict=True)
    expected = percentile(np.repeat(values, weights), q)
    assert weighted_percentile(values, weights, q) == pytest.approx(expected, abs=1e-6)


@given(
    st.lists(
        st.tuples(st.floats(0, 100), st.floats(0, 10), st.floats(0, 100), st.integers(1, 2000)),
        min_size=1,
        max_size=30,
    )
)
def test_tpot_is_non_negative_and_tokens_are_conserved(rows):
    frame = pd.DataFrame(
        {
            "request_id": [f"r{i}" for i in range(len(rows))],
            "start_ts": [s for s, _, _, _ in rows],
            "first_token_ts": [s + t for s, t, _, _ in rows],
            "end_ts": [s + t + d for s, t, d, _ in rows],
            "input_tokens": 1,
            "output_tokens": [n for *_, n in rows],
        }
    )
    m = request_metrics(frame)
    assert (m["tpot_s"].dropna() >= 0).all()
    tps = output_tps_over_time(frame, bin_s=0.5)
    assert tps["output_tps"].sum() * 0.5 == pytest.approx(frame["output_tokens"].sum(), rel=1e-6)
    assert in_flight(frame)["in_flight"].iloc[-1] == 0
