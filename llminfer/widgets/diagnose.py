"""Chapter 7's widget: pick a case study, apply its fix or not, move the targets → diagnosis."""

from __future__ import annotations

import html

import ipywidgets as W

from llminfer.diagnose.cases import CASE_SLO, CASE_STUDIES
from llminfer.diagnose.findings import Diagnosis
from llminfer.diagnose.run import diagnose
from llminfer.language import N_, _
from llminfer.logs.reading import read_requests
from llminfer.logs.schema import RequestLog
from llminfer.plots import fonts
from llminfer.plots.diagnose import before_after_cdf
from llminfer.widgets._explorer import Explorer, whole


class DiagnosisExplorer(Explorer):
    """Diagnose a simulated case study as found or with its fix applied, under adjustable
    targets. ``.result`` is the ``Diagnosis``; the picture compares the chosen run's TTFT and
    TPOT with the case as found.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """

    title = N_("Troubleshooting: case study → diagnosis")

    def __init__(
        self,
        case: str = "prefill_interference",
        fixed: bool = False,
        ttft_ms: float = CASE_SLO["ttft_s"] * 1e3,
        tpot_ms: float = CASE_SLO["tpot_s"] * 1e3,
    ) -> None:
        self._runs: dict[tuple[str, bool], RequestLog] = {}
        controls = {
            "case": W.Dropdown(options=list(CASE_STUDIES), value=case, description=_("case")),
            "fixed": W.Checkbox(value=fixed, description=_("apply the suggested change")),
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
                step=1,
                description=_("TPOT target (ms)"),
            ),
        }
        super().__init__(controls)

    def run(self, case: str, fixed: bool) -> RequestLog:
        """The simulated run's log, computed once per (case, fixed) and kept."""
        study = CASE_STUDIES[case]
        key = (case, fixed and bool(study.fix))
        if key not in self._runs:
            deployment = study.fixed_deployment if key[1] else study.deployment
            self._runs[key] = read_requests(study.requests(deployment))
        return self._runs[key]

    def compute(self, case: str, fixed: bool, ttft_ms: float, tpot_ms: float) -> Diagnosis:
        study = CASE_STUDIES[case]
        deployment = study.fixed_deployment if fixed else study.deployment
        slo = {"ttft_s": ttft_ms / 1e3, "tpot_s": tpot_ms / 1e3}
        return diagnose(self.run(case, fixed), slo=slo, **deployment.diagnose_kwargs())

    def describe(self, diagnosis: Diagnosis) -> str:
        study = CASE_STUDIES[self.controls["case"].value]
        # the case's story and change are translated where the diagnose catalog has them
        change = html.escape(_(study.fix_description))
        fix = (
            "<br>" + _("suggested change: {change}").format(change=change)
            if study.fix
            else "<br>" + _("(a healthy service: no change to apply)")
        )
        story = html.escape(_(study.story))
        return f"<p><i>{story}</i>{fix}</p>{diagnosis._repr_html_()}"

    def draw(self, diagnosis: Diagnosis):
        case = self.controls["case"].value
        return before_after_cdf(
            self.run(case, False),
            self.run(case, self.controls["fixed"].value),
            slo=diagnosis.slo,
            # TRANSLATORS: {case} is a case study's key ("busy"); the figure compares the case
            # as found with the fixed run (or with itself when the change is not applied).
            title=(
                fonts._("{case}: as found vs fixed")
                if self.controls["fixed"].value
                else fonts._("{case}: as found vs as found")
            ).format(case=case),
        )
