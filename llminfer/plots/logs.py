"""Chapters 3 and 6's plots: latency CDFs, a request timeline, load and throughput over time."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter
from matplotlib.transforms import blended_transform_factory

from llminfer import language
from llminfer.logs.metrics import _as_log, request_metrics
from llminfer.logs.schema import RequestLog
from llminfer.logs.summary import Summary
from llminfer.logs.timeline import in_flight, output_tps_over_time
from llminfer.plots._figure import COLORS, new_figure
from llminfer.plots.fonts import N_, _
from llminfer.units import DURATION_UNITS, duration_unit

_LABELS = {"ttft_s": "TTFT", "tpot_s": "TPOT", "e2e_s": N_("E2E latency"), "queue_s": N_("queue")}
#: Panel titles a reader understands without knowing the column names.
TITLES = {
    "ttft_s": N_("Time to first token (TTFT)"),
    "tpot_s": N_("Time per output token (TPOT)"),
    "e2e_s": N_("End-to-end latency (E2E)"),
    "queue_s": N_("Time in the queue"),
    "prefill_s": N_("Prefill time"),
    "decode_s": N_("Decode time"),
}
#: A CDF's x axis turns logarithmic when p99 / p50 exceeds this: the tail would squeeze the
#: body of the distribution into a sliver at the left.
LOG_SCALE_TAIL_RATIO = 10.0
# Percentile and SLO labels sit in rows this far apart (fraction of the axes' height), one
# row per label, so two labels can never share a row however close their values are.
_LABEL_ROW0, _LABEL_ROW_STEP = 0.05, 0.12


def format_in_unit(value_s: float, unit: str) -> str:
    """``value_s`` seconds written in ``unit`` (``"ms"``, ``"s"``, ``"µs"``) with the unit:
    three significant figures, whole numbers with thousands separators from 100 up
    (``"5,172 ms"``, ``"38.0 ms"``, ``"6.95 s"``).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if unit not in DURATION_UNITS:
        raise ValueError(f"unit={unit!r} is not known; use one of {', '.join(DURATION_UNITS)}")
    value = value_s * DURATION_UNITS[unit]
    # "#" keeps trailing zeros, so every label has three figures: "3.10 s", "38.0 ms"
    text = f"{value:,.0f}" if abs(value) >= 99.95 else f"{value:#.3g}".rstrip(".")
    return f"{text} {unit}"


def _percentile_labels(
    ax, values_s: np.ndarray, percentiles: Sequence[float], unit: str, slo_s: float | None
) -> None:
    """Mark each percentile on the curve and label it in its own row; the SLO gets a row too."""
    scale = DURATION_UNITS[unit]
    place = blended_transform_factory(ax.transData, ax.transAxes)
    labels = [
        (float(v) * scale, f"p{q:g} = {format_in_unit(float(v), unit)}", "black")
        for q, v in zip(percentiles, np.percentile(values_s, percentiles), strict=True)
    ]
    for q, (x, _text, _colour) in zip(percentiles, labels, strict=True):
        ax.vlines(x, 0, q / 100, color="grey", lw=0.8, ls=":")
        ax.plot([x], [q / 100], "o", ms=3.5, color="black", label="_percentile")
    if slo_s is not None:
        # TRANSLATORS: {target} is the latency target with its unit, e.g. "500 ms".
        target = _("SLO {target}").format(target=format_in_unit(slo_s, unit))
        labels.append((slo_s * scale, target, COLORS["queue"]))
    low, high = ax.get_xlim()
    log = ax.get_xscale() == "log"
    for row, (x, text, colour) in enumerate(labels):
        # Where along the axis the value sits (0 left, 1 right): labels right of the middle
        # grow leftwards, so none runs off the panel.
        where = (
            (np.log(x) - np.log(low)) / (np.log(high) - np.log(low))
            if log
            else (x - low) / (high - low)
        )
        ax.text(
            x,
            _LABEL_ROW0 + _LABEL_ROW_STEP * row,
            f" {text} " if where <= 0.55 else f"{text} ",
            transform=place,
            ha="left" if where <= 0.55 else "right",
            va="bottom",
            fontsize=8,
            color=colour,
            gid="percentile-label",
            bbox={"boxstyle": "square,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85},
        )


def latency_cdf(
    log: RequestLog | pd.DataFrame,
    metrics: Sequence[str] = ("ttft_s", "tpot_s", "e2e_s"),
    percentiles: Sequence[float] = (50, 95, 99),
    slo: dict[str, float] | None = None,
    log_x: bool | None = None,
) -> Figure:
    """One CDF panel per metric (successful requests) with percentile markers and labels.

    Each panel's unit is chosen from its values (``llminfer.units.duration_unit``: TTFT and
    TPOT usually in ms, E2E in s). ``log_x``: a logarithmic x axis; ``None`` (default) chooses
    it per panel when p99 / p50 > ``LOG_SCALE_TAIL_RATIO`` (a long tail). ``slo`` (seconds,
    keys like ``ttft_s``) draws each target as a red dashed line. Percentile labels (and the
    SLO's) sit in separate rows, so they never overlap.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    table = request_metrics(log)
    table = table[table["status"] == "ok"]
    fig, axes = new_figure(4.0 * len(metrics), 3.4, ncols=len(metrics))
    axes = np.atleast_1d(axes)
    for ax, name in zip(axes, metrics, strict=True):
        values_s = np.sort(table[name].dropna().to_numpy())
        title = _(TITLES[name]) if name in TITLES else name
        ax.set_title(title, fontsize=10)
        if values_s.size == 0:
            ax.set_title(_("{title}: no values").format(title=title), fontsize=10)
            continue
        unit, scale = duration_unit(values_s)
        values = values_s * scale
        p50, p99 = np.percentile(values, [50, 99])
        tail = p50 > 0 and values[0] > 0 and p99 / p50 > LOG_SCALE_TAIL_RATIO
        use_log = tail if log_x is None else bool(log_x) and values[0] > 0
        fraction = np.arange(1, values.size + 1) / values.size
        ax.step(values, fraction, where="post", color=COLORS["decode"])
        target = slo.get(name) if slo else None
        if target is not None:
            ax.axvline(target * scale, color=COLORS["queue"], ls="--", label=_("SLO"))
        if use_log:
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.10g}"))
        metric = _(_LABELS[name]) if name in _LABELS else name
        # TRANSLATORS: {metric} is a latency ("TTFT", "E2E latency"), {unit} "ms" or "s".
        axis = _("{metric} ({unit}, log scale)") if use_log else _("{metric} ({unit})")
        ax.set_xlabel(axis.format(metric=metric, unit=unit))
        ax.set_ylim(0, 1.02)
        _percentile_labels(ax, values_s, percentiles, unit, target)
    axes[0].set_ylabel(_("share of requests ≤ x"))
    fig.suptitle(_("Latency distributions (successful requests)"))
    return fig


def latency_table(
    summary: Summary, metrics: Sequence[str] = ("ttft_s", "tpot_s", "e2e_s", "queue_s")
) -> pd.DataFrame:
    """``summary``'s latency statistics with one readable unit per metric (the one the CDFs
    use: ``duration_unit`` of its median): rows like ``"TTFT (ms)"``, columns ``count``,
    ``mean``, ``min``, the percentiles and ``max``, rounded to 3 significant figures.

    Metrics the summary lacks are skipped. The rows are named in the learner's language (a
    table needs no font: Chinese whenever Chinese is chosen).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    frame = summary.to_frame()
    stats = ["mean", "min", *[c for c in frame.columns if c.startswith("p")], "max"]
    rows = {}
    for name in metrics:
        if name not in frame.index:
            continue
        unit, scale = duration_unit(frame.loc[name, "p50"])
        figures = frame.loc[name, stats].astype(float) * scale
        rounded = figures.map(lambda v: float(f"{v:.3g}") if np.isfinite(v) else v)
        title = language._(TITLES[name]) if name in TITLES else name
        # TRANSLATORS: a row of the latency table: "Time to first token (TTFT) (ms)".
        rows[language._("{title} ({unit})").format(title=title, unit=unit)] = {
            "count": int(frame.loc[name, "count"]),
            **rounded.to_dict(),
        }
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = "latency"
    return table


def request_timeline(
    log: RequestLog | pd.DataFrame, max_requests: int = 40, after_s: float = 0.0
) -> Figure:
    """One bar per request from start to end: queue, prefill (or wait + prefill), decode.

    Without ``scheduled_ts`` queueing and prefill cannot be told apart and share one colour.
    Shows the first ``max_requests`` requests that start ``after_s`` seconds or more after the
    log's first request (0: from the beginning; later: e.g. the busiest minutes); time in
    seconds from the log's first request.

    Introduced in: notebooks/03_metrics.ipynb
    """
    if isinstance(max_requests, bool) or not isinstance(max_requests, int) or max_requests < 1:
        raise ValueError(f"max_requests={max_requests!r} must be a positive whole number")
    if isinstance(after_s, bool) or not isinstance(after_s, (int, float)) or not after_s >= 0:
        raise ValueError(f"after_s={after_s!r} must be a number of seconds ≥ 0")
    requests = _as_log(log).requests
    t0 = requests["start_ts"].min()
    requests = requests[requests["start_ts"] - t0 >= after_s]
    if requests.empty:
        raise ValueError(f"after_s={after_s!r}: no request starts that late in the log")
    requests = requests.sort_values("start_ts").head(max_requests)
    fig, ax = new_figure(8, 1.0 + 0.22 * len(requests))
    rows = np.arange(len(requests))
    start = requests["start_ts"].to_numpy() - t0
    first = requests["first_token_ts"].to_numpy() - t0
    end = requests["end_ts"].to_numpy() - t0
    if "scheduled_ts" in requests.columns:
        scheduled = requests["scheduled_ts"].to_numpy() - t0
        queue, prefill = _("queue"), _("prefill")
        ax.barh(rows, scheduled - start, left=start, color=COLORS["queue"], label=queue)
        ax.barh(rows, first - scheduled, left=scheduled, color=COLORS["prefill"], label=prefill)
    else:
        ax.barh(rows, first - start, left=start, color=COLORS["prefill"], label="TTFT")
    ax.barh(rows, end - first, left=first, color=COLORS["decode"], label=_("decode"))
    failed = (requests["status"] == "failed").to_numpy()
    if failed.any():
        ax.scatter(start[failed], rows[failed], marker="x", color="black", label=_("failed"))
    ax.set_yticks(rows, requests["request_id"], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(_("time since the first request started (s)"))
    # Above the bars, outside the axes: inside, the legend would hide the last requests.
    ax.legend(fontsize=8, ncols=4, loc="lower left", bbox_to_anchor=(0, 1.0), frameon=False)
    fig.suptitle(_("Request timeline"))
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
    top.set_ylabel(_("requests in flight"))
    bottom.plot(tps["bin_start_s"] - t0 + bin_s / 2, tps["output_tps"], color=COLORS["decode"])
    # TRANSLATORS: {bin} is the width of one bin in seconds.
    bottom.set_ylabel(_("output tokens/s ({bin:g} s bins)").format(bin=bin_s))
    bottom.set_xlabel(_("time since the first request started (s)"))
    top.set_title(_("Load and throughput over time"))
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
        queue = _("queue {ms:.0f} ms").format(ms=m["queue_s"] * 1e3)
        prefill = _("prefill {ms:.0f} ms").format(ms=m["prefill_s"] * 1e3)
        spans.append((0.0, sched, 0.8, queue, COLORS["queue"]))
        spans.append((sched, first - start, 0.8, prefill, COLORS["prefill"]))
    spans.append((0.0, first - start, 1.2, f"TTFT = {m['ttft_s'] * 1e3:.0f} ms", COLORS["queue"]))
    spans.append(
        (
            first - start,
            end - start,
            1.2,
            _("decode {decode:.0f} ms = (N − 1) × TPOT, TPOT = {tpot:.1f} ms, N = {n}").format(
                decode=m["decode_s"] * 1e3, tpot=m["tpot_s"] * 1e3, n=n
            ),
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
    ax.set_xlabel(_("time since the request was sent (s); ticks = streamed chunks"))
    title = _("Anatomy of one streamed request ({request_id})")
    ax.set_title(title.format(request_id=row["request_id"]))
    return fig
