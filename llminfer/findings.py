"""Chapter 7's report: one ``Finding`` per step of the troubleshooting order, collected in a
``Diagnosis`` that names the primary bottleneck and renders as text or as a notebook table.

``llminfer.diagnose`` produces them; this module only says what a finding is and how a report
reads.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

STEPS = ("workload", "failures", "memory", "queueing", "prefill", "decode", "saturation")
VERDICTS = ("ok", "problem", "cant_tell")


#: Which chapter explains each step, and the chapter-5 techniques that address its problems.
CHAPTER = {
    "workload": "03_metrics",
    "failures": "06_log_analysis",
    "memory": "04_memory_budget",
    "queueing": "03_metrics",
    "prefill": "02_prefill_and_decode",
    "decode": "02_prefill_and_decode",
    "saturation": "03_metrics",
}
QUESTION = {
    "workload": "Is the workload described, and are there enough requests to trust p90/p99?",
    "failures": "Did requests fail? Failed requests are not fast requests.",
    "memory": "Does the KV cache hold the requests in flight, or are they preempted?",
    "queueing": "How much of TTFT is waiting for a slot rather than computing?",
    "prefill": "How much of TTFT is the prompt's own prefill, and does it grow with length?",
    "decode": "Is TPOT near the bandwidth floor, or slowed by batching and other prefills?",
    "saturation": "Does the server keep up with the offered load?",
}


@dataclass(frozen=True)
class Finding:
    """One step of the procedure: ``verdict`` is ``"ok"``, ``"problem"`` or ``"cant_tell"``;
    ``evidence`` holds the numbers (seconds, tokens, ratios) the verdict rests on; ``cause`` the
    likely cause (or, for ``cant_tell``, what data is missing); ``techniques`` the chapter-5
    rows that address it.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """

    step: str
    verdict: str
    evidence: dict[str, Any]
    cause: str
    techniques: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.step not in STEPS:
            raise ValueError(f"step={self.step!r} must be one of {', '.join(STEPS)}")
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict={self.verdict!r} must be one of {', '.join(VERDICTS)}")

    @property
    def chapter(self) -> str:
        return CHAPTER[self.step]

    def evidence_text(self) -> str:
        return "; ".join(f"{k} = {_show(v)}" for k, v in self.evidence.items())


@dataclass
class Diagnosis:
    """The procedure's findings, in order, and the most important problem (``primary``).

    ``primary`` is the first problem in procedure order — fix it first, re-measure, then look
    again — except that between queueing and prefill, the stage with the larger p90 wins (a
    queue that forms behind long prefills is a prefill problem). None for a healthy log.
    ``str()`` gives a text report; in a notebook it renders as a table.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """

    findings: list[Finding]
    slo: dict[str, float]
    notes: list[str] = field(default_factory=list)

    @property
    def primary(self) -> Finding | None:
        problems = [f for f in self.findings if f.verdict == "problem"]
        if not problems:
            return None
        steps = {f.step: f for f in problems}
        # Queueing and prefill both live inside TTFT: a queue behind long prefills is caused by
        # the prefills, so the larger of the two p90s names the bottleneck.
        if "queueing" in steps and "prefill" in steps:
            queue, prefill = steps["queueing"].evidence, steps["prefill"].evidence
            if "queue_p90_s" in queue:
                prefill_wins = prefill["prefill_p90_s"] > queue["queue_p90_s"]
            else:  # no split: the stronger correlation (prompt length vs load) decides
                load = max(queue["rho_ttft_load"], queue["rho_ttft_time"])
                prefill_wins = prefill["rho_ttft_prompt"] > load
            loser = "queueing" if prefill_wins else "prefill"
            problems = [f for f in problems if f.step != loser]
        return problems[0]

    def finding(self, step: str) -> Finding:
        """The finding of one step by name."""
        for f in self.findings:
            if f.step == step:
                return f
        raise ValueError(f"step={step!r} must be one of {', '.join(STEPS)}")

    def to_frame(self) -> pd.DataFrame:
        """One row per step: verdict, evidence, cause, techniques."""
        return pd.DataFrame(
            [
                {
                    "step": f.step,
                    "verdict": f.verdict,
                    "evidence": f.evidence_text(),
                    "cause": f.cause,
                    "techniques": ", ".join(f.techniques),
                }
                for f in self.findings
            ]
        ).set_index("step")

    def __str__(self) -> str:
        mark = {"ok": "ok", "problem": "PROBLEM", "cant_tell": "can't tell"}
        lines = []
        for number, f in enumerate(self.findings, 1):
            lines.append(f"{number}. {f.step:<10} {mark[f.verdict]}: {f.cause}")
            if f.evidence:
                lines.append(f"   evidence: {f.evidence_text()}")
            if f.techniques:
                lines.append(f"   try: {', '.join(f.techniques)} (chapter 05)")
        primary = self.primary
        head = (
            f"primary bottleneck: {primary.step} — {primary.cause}"
            if primary
            else "no problem found: the log looks healthy against the targets"
        )
        targets = ", ".join(f"{k} ≤ {v * 1e3:g} ms" for k, v in self.slo.items())
        return "\n".join([head, f"targets: {targets}", *lines, *self.notes])

    __repr__ = __str__

    def _repr_html_(self) -> str:
        colour = {"ok": "#1b7a1b", "problem": "#b00020", "cant_tell": "#8a6d00"}
        rows = "".join(
            f"<tr><td>{n}. {f.step}</td>"
            f"<td style='color:{colour[f.verdict]}'><b>{f.verdict}</b></td>"
            f"<td style='text-align:left'>{html.escape(f.evidence_text())}</td>"
            f"<td style='text-align:left'>{html.escape(f.cause)}</td>"
            f"<td style='text-align:left'>{html.escape(', '.join(f.techniques))}</td></tr>"
            for n, f in enumerate(self.findings, 1)
        )
        primary = self.primary
        head = f"primary bottleneck: <b>{primary.step}</b>" if primary else "no problem found"
        return (
            f"<p>{head}</p><table><tr><th>step</th><th>verdict</th><th>evidence</th>"
            f"<th>cause</th><th>techniques</th></tr>{rows}</table>"
        )


def _show(value: Any) -> str:
    if isinstance(value, (int, np.integer)):
        return f"{value:,}"
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return "n/a"
        if math.isinf(value) or abs(value) < 1000:
            return f"{value:.3g}"
        return f"{value:,.0f}"
    return str(value)
