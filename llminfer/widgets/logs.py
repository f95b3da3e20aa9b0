"""Chapter 6's widget: latency targets → goodput and good fraction of one request log."""

from __future__ import annotations

import html

import ipywidgets as W
import pandas as pd

from llminfer.language import N_, _
from llminfer.logs.metrics import _as_log
from llminfer.logs.schema import RequestLog
from llminfer.logs.summary import Summary, summarize
from llminfer.plots.logs import latency_cdf
from llminfer.widgets._explorer import Explorer, whole


class SLOExplorer(Explorer):
    """Move the TTFT, TPOT and E2E targets; ``.result`` is the ``Summary`` with that SLO.

    Introduced in: notebooks/06_log_analysis.ipynb
    """

    title = N_("Latency targets → goodput")

    def __init__(
        self,
        log: RequestLog | pd.DataFrame,
        ttft_ms: float = 500,
        tpot_ms: float = 50,
        e2e_s: float = 30,
    ) -> None:
        self.log = _as_log(log)
        controls = {
            # Whole milliseconds and seconds: integer sliders, so the browser never sends a
            # value back with float noise (see llminfer.widgets._explorer).
            "ttft_ms": W.IntSlider(
                value=whole(ttft_ms, "ttft_ms"),
                min=50,
                max=5000,
                step=50,
                description=_("TTFT target (ms)"),
            ),
            "tpot_ms": W.IntSlider(
                value=whole(tpot_ms, "tpot_ms"),
                min=5,
                max=200,
                step=5,
                description=_("TPOT target (ms)"),
            ),
            "e2e_s": W.IntSlider(
                value=whole(e2e_s, "e2e_s"),
                min=1,
                max=120,
                step=1,
                description=_("E2E target (s)"),
            ),
        }
        super().__init__(controls)

    def compute(self, ttft_ms: float, tpot_ms: float, e2e_s: float) -> Summary:
        slo = {"ttft_s": ttft_ms / 1e3, "tpot_s": tpot_ms / 1e3, "e2e_s": e2e_s}
        return summarize(self.log, slo=slo)

    def describe(self, summary: Summary) -> str:
        # TRANSLATORS: {goodput} and {completed} are requests/s; keep the <b> tags.
        line = _(
            "goodput <b>{goodput:.2f} requests/s</b> of {completed:.2f} completed · good "
            "fraction <b>{good:.1%}</b> · {failed} failed requests never count as good"
        )
        return (
            "<p>"
            + line.format(
                goodput=summary.goodput_rps,
                completed=summary.rps,
                good=summary.good_fraction,
                failed=html.escape(str(summary.n_failed)),
            )
            + "</p>"
        )

    def draw(self, summary: Summary):
        return latency_cdf(self.log, slo=summary.slo)
