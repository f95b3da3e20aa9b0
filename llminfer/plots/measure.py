"""Chapter 8: a measured server beside the simulation fitted to it."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from llminfer.plots._figure import COLORS, new_figure, readable_log_axis, require_columns
from llminfer.plots.fonts import _
from llminfer.sim.loadsweep import load_column

#: The metrics ``compare_sweeps`` names (its column prefixes) and the colour each is drawn in.
_METRICS = {
    "ttft": ("TTFT", COLORS["prefill"]),
    "tpot": ("TPOT", COLORS["decode"]),
    "itl": ("ITL", COLORS["free"]),
}
#: Fitted points off by at least this much (%) are labelled too, so a fit's worst in-sample
#: miss is not mistaken for a match.
LABEL_ERROR_PCT = 10.0


def sweep_fit_chart(table: pd.DataFrame) -> Figure:
    """``compare_sweeps``' table (with a ``server`` column for several servers) as one row of
    panels per server, p50 TTFT, TPOT and ITL where the table has them (ms, log scale) against
    the load: measured as black dots, simulated as a coloured line; the loads the fit did not
    see (``part`` other than ``"fit"``) ringed and labelled with the simulation's error
    (simulated ÷ measured − 1, %), fitted loads labelled (in grey) where that error is at least
    ``LABEL_ERROR_PCT``.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    kind = load_column(table)
    metrics = [m for m in _METRICS if f"{m}_measured_ms" in table.columns]
    columns = [kind, "part"] + [
        f"{m}_{c}" for m in metrics for c in ("measured_ms", "simulated_ms", "error_pct")
    ]
    require_columns(table, columns)
    if not metrics:
        raise ValueError(
            "table has no ttft_, tpot_ or itl_measured_ms column: pass compare_sweeps' table"
        )
    servers = list(dict.fromkeys(table["server"])) if "server" in table.columns else [None]
    fig, axes = new_figure(
        4.2 * len(metrics), 3.0 * len(servers), nrows=len(servers), ncols=len(metrics)
    )
    axes = np.atleast_2d(np.asarray(axes, dtype=object).reshape(len(servers), len(metrics)))
    for row, server in zip(axes, servers, strict=True):
        data = table if server is None else table[table["server"] == server]
        data = data.sort_values(kind)
        held = data[data["part"] != "fit"]
        for ax, metric in zip(row, metrics, strict=True):
            label, colour = _METRICS[metric]
            ax.plot(
                data[kind],
                data[f"{metric}_simulated_ms"],
                color=colour,
                marker=".",
                label=_("simulated (fitted)"),
            )
            ax.plot(
                data[kind],
                data[f"{metric}_measured_ms"],
                "o",
                color="black",
                ms=4,
                label=_("measured"),
            )
            ax.plot(
                held[kind],
                held[f"{metric}_measured_ms"],
                "o",
                mfc="none",
                mec=COLORS["queue"],
                ms=11,
                mew=1.5,
                label=_("held out (not in the fit)"),
            )
            error = data[f"{metric}_error_pct"]
            labelled = data[(data["part"] != "fit") | (error.abs() >= LABEL_ERROR_PCT)]
            for _i, point in labelled.iterrows():
                ax.annotate(
                    f"{point[f'{metric}_error_pct']:+.0f} %".replace("-", "−"),
                    (point[kind], point[f"{metric}_measured_ms"]),
                    textcoords="offset points",
                    xytext=(6, -12),
                    fontsize=8,
                    color=COLORS["queue"] if point["part"] != "fit" else "dimgrey",
                )
            ax.set_xscale("log", base=2)
            readable_log_axis(ax, "y")
            ax.set_xticks(list(data[kind]), [f"{v:g}" for v in data[kind]])
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xlabel(
                _("offered load (requests/s)") if kind == "rate" else _("concurrent users")
            )
            ax.set_ylabel(_("p50 {metric} (ms, log scale)").format(metric=label))
            title = f"{server}: p50 {label}" if server is not None else f"p50 {label}"
            ax.set_title(title, fontsize=10)
    for ax in axes[0]:
        ax.legend(fontsize=8)
    fig.suptitle(
        _(
            "ringed: loads the fit did not see; labelled: their error and any other of at least "
            "10 percent (simulated ÷ measured − 1)"
        ),
        fontsize=9,
    )
    return fig


def decode_fit_chart(table: pd.DataFrame, title: str = "") -> Figure:
    """Timed decode steps against the batch, beside step models fitted to them: ``table`` has
    ``batch`` (sequences in the step), ``measured_ms`` and one ``<label>_ms`` column per fitted
    model (ms, linear axes, so a step of one sequence that falls off the line through the
    others shows as a kink). Measured as black dots, each model as a line.

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    require_columns(table, ["batch", "measured_ms"])
    models = [c for c in table.columns if c.endswith("_ms") and c != "measured_ms"]
    if not models:
        raise ValueError("table needs at least one <label>_ms column of a fitted model")
    data = table.sort_values("batch")
    fig, ax = new_figure(6.0, 3.6)
    for i, column in enumerate(models):
        ax.plot(data["batch"], data[column], "-", color=f"C{i}", label=column[: -len("_ms")])
    ax.plot(data["batch"], data["measured_ms"], "o", color="black", ms=5, label=_("measured"))
    ax.set_xticks(list(data["batch"]))
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_xlabel(_("sequences decoded together (batch)"))
    ax.set_ylabel(_("one decode step (ms)"))
    ax.legend(fontsize=8)
    ax.set_title(title or _("Decode steps: measured (dots) and fitted (lines)"), fontsize=10)
    return fig
