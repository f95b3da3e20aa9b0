"""Chapter 7's plot: a metric's distribution before and after one change, against its target."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from llminfer.logs.metrics import request_metrics
from llminfer.logs.schema import RequestLog
from llminfer.plots._figure import COLORS, new_figure, readable_log_axis
from llminfer.plots.fonts import N_, _

_LABELS = {"ttft_s": N_("TTFT (ms)"), "tpot_s": N_("TPOT (ms)"), "e2e_s": N_("E2E latency (ms)")}
#: The two runs' names in the legend.
_RUNS = {"before": N_("before"), "after": N_("after")}


def before_after_cdf(
    before: RequestLog | pd.DataFrame,
    after: RequestLog | pd.DataFrame,
    metrics: Sequence[str] = ("ttft_s", "tpot_s"),
    slo: dict[str, float] | None = None,
    title: str = "",
) -> Figure:
    """CDFs of each metric (milliseconds, log scale) before and after a change, one panel per
    metric, with the target from ``slo`` (seconds) as a dashed line.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    fig, axes = new_figure(4.2 * len(metrics), 3.3, ncols=len(metrics))
    axes = np.atleast_1d(axes)
    runs = (("before", before, COLORS["queue"]), ("after", after, COLORS["free"]))
    tables = {label: request_metrics(log) for label, log, _colour in runs}
    for ax, name in zip(axes, metrics, strict=True):
        for label, _log, colour in runs:
            table = tables[label]
            values = np.sort(table.loc[table["status"] == "ok", name].dropna().to_numpy()) * 1e3
            if values.size:
                fraction = np.arange(1, values.size + 1) / values.size
                ax.step(values, fraction, where="post", color=colour, label=_(_RUNS[label]))
        if slo and name in slo:
            ax.axvline(slo[name] * 1e3, color="black", ls="--", lw=1, label=_("target"))
        readable_log_axis(ax, "x")
        ax.set_xlabel(_(_LABELS[name]) if name in _LABELS else name)
        ax.set_ylabel(_("share of requests"))
        ax.legend(fontsize=8, loc="lower right")
    if title:
        fig.suptitle(title)
    return fig
