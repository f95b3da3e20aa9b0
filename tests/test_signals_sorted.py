"""The fast signals of chapter 7 (``llminfer.diagnose.signals`` on
``llminfer.diagnose.sorted_times``: each kind of
event time sorted once, merges instead of re-sorts, searches with sorted instants) give the same
numbers, bit for bit, as the straightforward versions they replaced (issue 16: ``diagnose`` on 10 M
requests). The straightforward versions are kept below as the reference: one lexsort of all
events and one ``np.searchsorted`` per instant, as in the commit before the change."""

import numpy as np
import pandas as pd
import pytest

from llminfer.diagnose.signals import (
    decoding_together,
    overlapping_prefill_tokens,
    time_windows,
    waiting_at,
    waiting_end,
    work_ahead,
)
from llminfer.diagnose.sorted_times import SortedTimes, first_of_ties, last_of_ties, merge, search

# ---- the reference: the signals as they were before they shared sorts ----------------------


def ref_step_integral(up, down):
    keep = np.isfinite(up) & np.isfinite(down)
    times = np.concatenate([up[keep], down[keep]])
    steps = np.concatenate([np.ones(keep.sum()), -np.ones(keep.sum())])
    order = np.lexsort((steps, times))  # at a tie, leave before entering
    times, level = times[order], np.cumsum(steps[order])
    area = np.concatenate([[0.0], np.cumsum(level[:-1] * np.diff(times))]) if times.size else times
    return times, level, area


def ref_area_to(times, level, area, t):
    if not times.size:
        return np.zeros_like(t)
    i = np.searchsorted(times, t, side="right") - 1
    j = np.maximum(i, 0)
    return np.where(i >= 0, area[j] + level[j] * (t - times[j]), 0.0)


def ref_decoding_together(m):
    start = m["start_ts"].to_numpy(float)
    first = start + m["ttft_s"].to_numpy(float)
    end = m["end_ts"].to_numpy(float)
    times, level, area = ref_step_integral(first, end)
    span = end - first
    ok = np.isfinite(span) & (span > 0)
    out = np.full(len(m), np.nan)
    if ok.any():
        out[ok] = (
            ref_area_to(times, level, area, end[ok]) - ref_area_to(times, level, area, first[ok])
        ) / span[ok]
    return out


def ref_waiting_at(m, t):
    start = m["start_ts"].to_numpy(float)
    stop = waiting_end(m)
    stop = np.where(np.isfinite(stop), stop, m["end_ts"].to_numpy(float))
    times, level, _ = ref_step_integral(start, stop)
    i = np.searchsorted(times, t, side="right") - 1
    return np.where(i >= 0, level[np.maximum(i, 0)] if level.size else 0, 0).astype(float)


def ref_work_ahead(m):
    start = m["start_ts"].to_numpy(float)
    first = start + m["ttft_s"].to_numpy(float)
    first = np.where(np.isfinite(first), first, m["end_ts"].to_numpy(float))
    prompt = m["input_tokens"].to_numpy(float)
    prompt = np.where(np.isfinite(prompt), prompt, 0.0)
    keep = np.isfinite(start) & np.isfinite(first)
    order = np.argsort(start[keep], kind="stable")
    s_sorted, p_sorted = start[keep][order], prompt[keep][order]
    f_sorted = np.sort(first[keep])
    n_before = np.searchsorted(s_sorted, start, side="left")
    tokens_before = np.concatenate([[0.0], np.cumsum(p_sorted)])[n_before]
    first_order = np.argsort(first[keep], kind="stable")
    done = np.searchsorted(f_sorted, start, side="right")
    tokens_done = np.concatenate([[0.0], np.cumsum(prompt[keep][first_order])])[done]
    count = np.maximum(n_before - done, 0)
    return count.astype(float), np.maximum(tokens_before - tokens_done, 0.0)


def ref_overlapping_prefill_tokens(metrics):
    begin = metrics["start_ts"].to_numpy(float)
    if "queue_s" in metrics:
        begin = begin + metrics["queue_s"].to_numpy(float)
    first = metrics["start_ts"].to_numpy(float) + metrics["ttft_s"].to_numpy(float)
    end = metrics["end_ts"].to_numpy(float)
    tokens = metrics["input_tokens"].to_numpy(float)
    ok = np.isfinite(begin) & np.isfinite(first) & np.isfinite(end)
    if not ok.any():
        return np.full(len(metrics), np.nan)
    span = first[ok] - begin[ok]
    instant = span <= 0
    rate = np.where(instant, 0.0, tokens[ok] / np.where(instant, 1.0, span))
    kinks = np.concatenate([begin[ok], first[ok]])
    slope_change = np.concatenate([rate, -rate])
    jump = np.concatenate([np.where(instant, tokens[ok], 0.0), np.zeros(ok.sum())])
    order = np.argsort(kinks, kind="stable")
    kinks, slope_change, jump = kinks[order], slope_change[order], jump[order]
    slope = np.cumsum(slope_change)
    rise = np.concatenate([[0.0], slope[:-1] * np.diff(kinks)])
    done = np.cumsum(rise) + np.cumsum(jump)

    def done_by(t):
        i = np.searchsorted(kinks, t, side="right") - 1
        inside = i >= 0
        j = np.where(inside, i, 0)
        return np.where(inside, done[j] + slope[j] * (t - kinks[j]), 0.0)

    during = np.full(len(metrics), np.nan)
    during[ok] = done_by(end[ok]) - done_by(first[ok])
    decode_s = end - first
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok & (decode_s > 0), during / decode_s, np.nan)


def same_bits(a, b) -> bool:
    """Equal arrays, NaN where NaN, and the same sign on zeros: bit for bit but NaN payloads."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape or not np.array_equal(np.isnan(a), np.isnan(b)):
        return False
    keep = ~np.isnan(a)
    return bool(np.array_equal(a[keep].view(np.int64), b[keep].view(np.int64)))


# ---- random logs with what makes the sorts hard: ties, failures, missing times, disorder -----


def random_metrics(seed: int, n: int, scheduled: bool, resolution: float | None) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    start = np.cumsum(rng.exponential(0.05, n))
    if seed % 2:  # a log not in arrival order
        start = rng.permutation(start)
    queue = rng.exponential(0.2, n)
    first = start + queue + rng.gamma(2.0, 0.05, n)
    output = rng.integers(1, 60, n)
    end = first + (output - 1) * rng.uniform(0.01, 0.03, n)
    if resolution:  # a coarse clock: many equal times, zero-length prefills and decodes
        start, first, end = (np.round(x / resolution) * resolution for x in (start, first, end))
        queue = np.minimum(np.round(queue / resolution) * resolution, first - start)
    ttft = first - start
    failed = rng.random(n) < 0.05
    ttft[failed] = np.nan
    end[failed & (rng.random(n) < 0.5)] = np.nan
    m = pd.DataFrame(
        {
            "status": np.where(failed, "error", "ok"),
            "input_tokens": rng.integers(1, 4000, n),
            "output_tokens": output,
            "start_ts": start,
            "end_ts": end,
            "ttft_s": ttft,
            "tpot_s": np.where(output > 1, (end - first) / np.maximum(output - 1, 1), np.nan),
        }
    )
    if scheduled:
        m["queue_s"] = np.where(rng.random(n) < 0.02, np.nan, queue)
    return m


CASES = [
    (seed, n, scheduled, resolution)
    for seed in (0, 1)
    for n in (1, 7, 3000)
    for scheduled in (False, True)
    for resolution in (None, 0.01)
]


@pytest.mark.parametrize("seed,n,scheduled,resolution", CASES)
def test_signals_equal_the_reference_bit_for_bit(seed, n, scheduled, resolution):
    m = random_metrics(seed, n, scheduled, resolution)
    times = SortedTimes(m)
    assert same_bits(decoding_together(m), ref_decoding_together(m))
    assert same_bits(decoding_together(m, times), ref_decoding_together(m))
    for mine in (work_ahead(m), work_ahead(m, times)):
        for a, b in zip(mine, ref_work_ahead(m), strict=True):
            assert same_bits(a, b)
    t = np.concatenate([m["start_ts"].to_numpy(), [-1.0, np.nan, 1e9], np.linspace(0, 200, 50)])
    assert same_bits(waiting_at(m, t), ref_waiting_at(m, t))
    assert same_bits(waiting_at(m, t, times), ref_waiting_at(m, t))
    ok = (m["status"] == "ok").to_numpy() & np.isfinite(m["ttft_s"].to_numpy())
    good = m[ok]
    expected = ref_overlapping_prefill_tokens(good)
    assert same_bits(overlapping_prefill_tokens(good), expected)
    assert same_bits(overlapping_prefill_tokens(good, times.subset(ok)), expected)


@pytest.mark.parametrize("seed,scheduled", [(0, False), (1, True)])
def test_time_windows_equal_the_reference(seed, scheduled):
    m = random_metrics(seed, 3000, scheduled, 0.01)
    ok = (m["status"] == "ok").to_numpy() & np.isfinite(m["ttft_s"].to_numpy())
    slo = {"ttft_s": 0.5, "tpot_s": 0.05}
    mine = time_windows(m, ok, slo, decoding=decoding_together(m), times=SortedTimes(m))
    # The reference: one boolean mask per window, as before.
    start, end = m["start_ts"].to_numpy(), m["end_ts"].to_numpy()
    t0, span = np.nanmin(start), np.nanmax(start) - np.nanmin(start)
    edges = t0 + span * np.arange(11) / 10
    edges[-1] = np.nextafter(edges[-1], np.inf)
    decoding, waiting = ref_decoding_together(m), ref_waiting_at(m, edges)
    for i, row in mine.iterrows():
        inside = (start >= edges[i]) & (start < edges[i + 1])
        good = inside & ok
        assert row["arrived"] == inside.sum()
        assert row["served_rps"] == (ok & (end >= edges[i]) & (end < edges[i + 1])).sum() / (
            edges[i + 1] - edges[i]
        )
        assert row["waiting_start"] == waiting[i] and row["waiting_end"] == waiting[i + 1]
        assert same_bits(row["ttft_p90_s"], np.percentile(m["ttft_s"].to_numpy()[good], 90))
        assert same_bits(row["decoding_mean"], np.nanmean(decoding[good]))
    assert mine.equals(time_windows(m, ok, slo))


def test_tie_helpers_match_searchsorted():
    rng = np.random.default_rng(3)
    values = np.sort(rng.integers(0, 50, 400).astype(float))
    positions = np.arange(values.size)
    assert np.array_equal(last_of_ties(values), np.searchsorted(values, values, side="right") - 1)
    assert np.array_equal(
        first_of_ties(values, positions), np.searchsorted(values, values, side="left")
    )
    some = positions[::7]
    assert np.array_equal(last_of_ties(values, some), last_of_ties(values)[some])
    a, b = np.sort(rng.random(50).round(1)), np.sort(rng.random(60).round(1))
    merged, order = merge(a, b)
    both = np.concatenate([a, b])
    assert np.array_equal(order, np.argsort(both, kind="stable"))
    assert np.array_equal(merged, np.sort(both))
    t = rng.random(100)
    assert np.array_equal(
        search(merged, t, np.argsort(t), "left"), np.searchsorted(merged, t, side="left")
    )


def test_sorted_times_rejects_unknown_names_and_shapes():
    m = random_metrics(0, 10, False, None)
    times = SortedTimes(m)
    with pytest.raises(ValueError, match="name='queue'"):
        times.order("queue")
    with pytest.raises(ValueError, match="no scheduled_ts"):
        times.order("scheduled")
    with pytest.raises(ValueError, match="one entry per row"):
        times.subset(np.ones(3, bool))
    sub = times.subset(np.arange(10) % 2 == 0)
    assert np.array_equal(sub.order("end"), np.argsort(sub.end, kind="stable"))
