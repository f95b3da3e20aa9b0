"""A log summarised per group — per source file, replica or hour — beside the total.

``summarize(log, by="source")`` (``llminfer.logs.summary``) returns a ``GroupedSummary``: one
``Summary`` per source and the ``total``, and ``table``, one row of headline figures per source
plus a ``total`` row. Each source's rates use its own window (its first start → last end), so
the per-source RPS need not add up to the total's.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import pandas as pd

#: Columns of ``GroupedSummary.table`` besides the latency figures.
HEADLINE = (
    "n_requests",
    "n_failed",
    "window_s",
    "rps",
    "output_tps",
    "input_tps",
    "total_tps",
    "goodput_rps",
    "good_fraction",
)


@dataclass
class GroupedSummary:
    """A log summarised per group (per source file, replica or hour) beside the total.

    ``by``: the column grouped on. ``groups``: one ``Summary`` per value, in the column's order.
    ``total``: the ``Summary`` of the whole log. ``table``: one row per group plus a last row
    ``total``; columns ``n_requests, n_failed, window_s, rps, output_tps, input_tps, total_tps,
    goodput_rps, good_fraction`` then ``<metric>_mean`` and ``<metric>_p<q>`` for TTFT, TPOT and
    E2E (seconds, per second).

    Introduced in: notebooks/06_log_analysis.ipynb
    """

    by: str
    groups: dict[str, object]
    total: object
    table: pd.DataFrame

    def __str__(self) -> str:
        with pd.option_context("display.float_format", "{:.4g}".format, "display.width", 160):
            return f"per {self.by}:\n{self.table.to_string()}\n\ntotal:\n{self.total}"

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        table = self.table.to_html(float_format="{:.4g}".format)
        return (
            f"<p>per {html.escape(self.by)} (seconds, per second)</p>{table}"
            f"<p>total</p>{self.total._repr_html_()}"
        )


def headline_row(summary) -> dict[str, float]:
    """One row of ``GroupedSummary.table``: the headline figures and latency statistics of a
    ``Summary`` (seconds, per second).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    figures = summary.to_dict()
    row = {key: figures[key] for key in HEADLINE}
    stats = ["mean", *[f"p{q:g}" for q in summary.percentiles]]
    for metric in ("ttft_s", "tpot_s", "e2e_s"):
        for stat in stats:
            row[f"{metric}_{stat}"] = figures[f"{metric}_{stat}"]
    return row
