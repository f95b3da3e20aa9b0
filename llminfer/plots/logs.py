"""Chapters 3 and 6's plots: latency CDFs, a request timeline, load and throughput over time."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from llminfer.logs import RequestLog
from llminfer.metrics import _as_log, in_flight, output_tps_over_time, request_metrics
from llminfer.plots._figure import COLORS, new_figure

_LABELS = {"ttft_s": "TTFT", "tpot_s": "TPOT", "e2e_s": "E2E latency", "queue_s": "queue"}


def latency_cdf(
    log: RequestLog | pd.DataFrame,
    metrics: Sequence[str] = ("ttft_s", "tpot_s", "e2e_s"),
    percentiles: Sequence[float] = (50, 95, 99),
    slo: dict[str, float] | None = None,
) -> Figure:
    """One CDF panel per metric (successful requests) with percentile markers.

    Each panel is in ms, or in s when its highest marked percentile is a second or more.
    Percentiles are marked on the curve and listed in a box in the panel's corner, so p95 and
    p99 never overlap.
    ``slo`` (seconds, keys like ``ttft_s``) draws each target as a red dashed line.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    table = request_metrics(log)
    table = table[table["status"] == "ok"]
    fig, axes = new_figure(4.0 * len(metrics), 3.4, ncols=len(metrics))
    axes = np.atleast_1d(axes)
    for ax, name in zip(axes, metrics, strict=True):
        seconds = np.sort(table[name].dropna().to_numpy())
        if seconds.size == 0:
            ax.set_title(f"{_LABELS.get(name, name)}: no values")
            continue
        scale, unit = (1.0, "s") if np.percentile(seconds, max(percentiles)) >= 1 else (1e3, "ms")
        values = seconds * scale
        fraction = np.arange(1, values.size + 1) / values.size
        ax.step(values, fraction, where="post", color=COLORS["decode"])
        marks = np.percentile(values, percentiles)
        ax.plot(marks, np.asarray(percentiles) / 100, "o", color="black", ms=3)
        listing = "\n".join(
            f"p{q:g} {v:.3g} {unit}" for q, v in zip(percentiles, marks, strict=True)
        )
        ax.text(
            0.97,
            0.05,
            listing,
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            fontsize=8,
            bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.8, "lw": 0.5},
        )
        if slo and name in slo:
            ax.axvline(slo[name] * scale, color=COLORS["queue"], ls="--", label="SLO")
            ax.legend(fontsize=8, loc="upper left")
        ax.set_xlabel(f"{_LABELS.get(name, name)} ({unit})")
        ax.set_ylim(0, 1.02)
    axes[0].set_ylabel("fraction of requests ≤ x")
    fig.suptitle("Latency distributions (successful requests)")
    return fig


def request_timeline(log: RequestLog | pd.DataFrame, max_requests: int = 40) -> Figure:
    """One bar per request from start to end: queue, prefill (or wait + prefill), decode.

    Without ``scheduled_ts`` queueing and prefill cannot be told apart and share one colour.
    Shows the first ``max_requests`` requests by start time; time in seconds from the first.

    Introduced in: notebooks/03_metrics.ipynb
    """
    requests = _as_log(log).requests.sort_values("start_ts").head(max_requests)
    t0 = requests["start_ts"].min()
    fig, ax = new_figure(8, 1.0 + 0.22 * len(requests))
    rows = np.arange(len(requests))
    start = requests["start_ts"].to_numpy() - t0
    first = requests["first_token_ts"].to_numpy() - t0
    end = requests["end_ts"].to_numpy() - t0
    if "scheduled_ts" in requests.columns:
        scheduled = requests["scheduled_ts"].to_numpy() - t0
        ax.barh(rows, scheduled - start, left=start, color=COLORS["queue"], label="queue")
        ax.barh(rows, first - scheduled, left=scheduled, color=COLORS["prefill"], label="prefill")
    else:
        ax.barh(rows, first - start, left=start, color=COLORS["prefill"], label="TTFT")
    ax.barh(rows, end - first, left=first, color=COLORS["decode"], label="decode")
    failed = (requests["status"] == "failed").to_numpy()
    if failed.any():
        ax.scatter(start[failed], rows[failed], marker="x", color="black", label="failed")
    ax.set_yticks(rows, requests["request_id"], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time since the first request started (s)")
    ax.legend(fontsize=8, ncols=4, loc="lower right")
    ax.set_title("Request timeline")
    return fig


def load_over_time(log: RequestLog | pd.DataFrame, bin_s: float = 1.0) -> Figure:
    """Two panels: requests in flight (step) and output tokens per second (bins of ``bin_s``).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    log = _as_log(log)
    flight = in_flight(log)
    tps = output_tps_over_time(log, bin_s=bin_s)
    t0 = log.requests["start_ts"].min()
    fig, (top, bottom) = new_figure(8, 5, nrows=2)
    top.step(flight["time_s"] - t0, flight["in_flight"], where="post", color=COLORS["queue"])
    top.set_ylabel("requests in flight")
    bottom.plot(tps["bin_start_s"] - t0 + bin_s / 2, tps["output_tps"], color=COLORS["decode"])
    bottom.set_ylabel(f"output tokens/s ({bin_s:g} s bins)")
    bottom.set_xlabel("time since the first request started (s)")
    top.set_title("Load and throughput over time")
    return fig


def request_anatomy(log: RequestLog | pd.DataFrame, request_id: str | None = None) -> Figure:
    """One streamed request on a time axis: every chunk as a tick, and TTFT (with queue and
    prefill when ``scheduled_ts`` exists), the TPOT gaps, decode and E2E as labelled spans.

    Uses the request's ``token_ts`` when present, else spreads its N tokens evenly.

    Introduced in: notebooks/03_metrics.ipynb
    """
    log = _as_log(log)
    requests = log.requests
    if request_id is None:
        pos = 0
    else:
        matches = np.flatnonzero(requests["request_id"].to_numpy() == request_id)
        if matches.size == 0:
            raise ValueError(f"request_id={request_id!r} is not in the log")
        pos = int(matches[0])
    row = requests.iloc[pos]
    m = request_metrics(log).iloc[pos]
    start, first, end = row["start_ts"], row["first_token_ts"], row["end_ts"]
    n = int(row["output_tokens"])
    cell = row["token_ts"] if "token_ts" in requests.columns else None
    ticks = np.asarray(cell, float) if cell is not None else np.linspace(first, end, n)
    fig, ax = new_figure(9, 3.2)
    ax.vlines(ticks - start, 0.1, 0.5, color=COLORS["decode"], lw=1)
    spans = [(0.0, end - start, 1.6, f"E2E = {m['e2e_s'] * 1e3:.0f} ms", "black")]
    if "scheduled_ts" in requests.columns and np.isfinite(row["scheduled_ts"]):
        sched = row["scheduled_ts"] - start
        spans.append((0.0, sched, 0.8, f"queue {m['queue_s'] * 1e3:.0f} ms", COLORS["queue"]))
        spans.append(
            (sched, first - start, 0.8, f"prefill {m['prefill_s'] * 1e3:.0f} ms", COLORS["prefill"])
        )
    spans.append((0.0, first - start, 1.2, f"TTFT = {m['ttft_s'] * 1e3:.0f} ms", COLORS["queue"]))
    spans.append(
        (
            first - start,
            end - start,
            1.2,
            f"decode {m['decode_s'] * 1e3:.0f} ms = (N − 1) × TPOT, TPOT = "
            f"{m['tpot_s'] * 1e3:.1f} ms, N = {n}",
            COLORS["decode"],
        )
    )
    for left, right, y, label, colour in spans:
        ax.annotate(
            "", xy=(left, y), xytext=(right, y), arrowprops={"arrowstyle": "<->", "color": colour}
        )
        ax.text((left + right) / 2, y + 0.08, label, ha="center", fontsize=8, color=colour)
    ax.set_ylim(0, 2)
    ax.set_xlim(-0.03 * (end - start), 1.03 * (end - start))  # arrows do not set the limits
    ax.set_yticks([])
    ax.set_xlabel("time since the request was sent (s); ticks = streamed chunks")
    ax.set_title(f"Anatomy of one streamed request ({row['request_id']})")
    return fig
