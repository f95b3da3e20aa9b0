"""Chapter 7's report: one ``Finding`` per step of the troubleshooting order, collected in a
``Diagnosis`` whose verdict, cause and headline are derived from the steps.

``llminfer.diagnose`` produces them; this module only says what a finding is, which causes
exist, and how a report reads.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from llminfer.diagnose.suggestions import Suggestion

STEPS = ("workload", "failures", "memory", "queueing", "prefill", "decode", "saturation")
#: A step's verdict.
VERDICTS = ("ok", "problem", "cant_tell")
#: The whole log's verdict (``Diagnosis.verdict``).
OVERALL = ("ok", "problem", "not_enough_data")

#: The causes ``diagnose`` can name (``Finding.cause`` and ``Diagnosis.cause``).
CAUSES = {
    "failures": "more than 1 % of requests failed: the latency figures describe only survivors",
    "kv_pressure": "the KV cache is full: requests are preempted (evicted and recomputed) or "
    "wait for memory",
    "overload": "more load than the deployment serves within the targets: arrivals above the "
    "service rate (the queue grows), or so many requests decoding together that every step is "
    "too slow for the TPOT target",
    "lockstep_prefill": "requests sent together (a closed loop's users in step) wait for each "
    "other's prefill, not for a slot: no more requests are in flight than the server has slots, "
    "and TTFT is a few single prefills — the load generator's rhythm, not overload",
    "slot_queue": "more requests in flight than the server has slots (max_num_seqs, llama.cpp "
    "--parallel): the extra ones wait for a free slot and the queue grows",
    "head_of_line": "requests wait behind long prompts being prefilled ahead of them, although "
    "the server keeps up on average",
    "interference": "other requests' prefills stall the decode steps they share: TPOT follows "
    "the prompt tokens that run during a request's decode",
    "too_slow": "the model on this GPU is too slow for the target even at low load: a request "
    "alone (no queue, small batch) already misses it",
    "unexplained": "a target is missed but the log cannot say why (a field is missing); the "
    "report names what to record",
}

#: Which chapter explains each step.
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
    "workload": "Is the workload described, and are there enough requests to trust p90?",
    "failures": "Did requests fail? Failed requests are not fast requests.",
    "memory": "Does the KV cache hold the requests in flight, or are they preempted?",
    "queueing": "How much of TTFT is waiting, and is it overload or long prompts ahead?",
    "prefill": "Is a request's own prefill too slow for the TTFT target even without a queue?",
    "decode": "Is TPOT slowed by the batch, by other prefills, or slow even at low load?",
    "saturation": "Does the server keep up with the arrivals in every window of the run?",
}


@dataclass(frozen=True)
class Finding:
    """One step of the procedure.

    - ``verdict``: ``"ok"``, ``"problem"`` or ``"cant_tell"``;
    - ``evidence``: the numbers the verdict rests on (seconds, tokens, requests, ratios; a
      time window is named ``window``);
    - ``detail``: what was found, in words;
    - ``cause``: for a problem, one of ``CAUSES``; else None;
    - ``suggestions``: changes that address the cause, each with what it trades;
    - ``missing``: for ``cant_tell``, the data that would answer it;
    - ``samples``/``min_requests``: requests the step used and the least it needs.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """

    step: str
    verdict: str
    evidence: dict[str, Any]
    detail: str
    cause: str | None = None
    suggestions: tuple[Suggestion, ...] = ()
    missing: tuple[str, ...] = ()
    samples: int = 0
    min_requests: int = 0

    def __post_init__(self) -> None:
        if self.step not in STEPS:
            raise ValueError(f"step={self.step!r} must be one of {', '.join(STEPS)}")
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict={self.verdict!r} must be one of {', '.join(VERDICTS)}")
        if (self.verdict == "problem") != (self.cause is not None):
            raise ValueError(f"cause={self.cause!r}: a problem needs a cause, other verdicts none")
        if self.cause is not None and self.cause not in CAUSES:
            raise ValueError(f"cause={self.cause!r} must be one of {', '.join(CAUSES)}")

    @property
    def chapter(self) -> str:
        return CHAPTER[self.step]

    @property
    def too_few(self) -> bool:
        """True when the step had fewer requests than it needs."""
        return self.samples < self.min_requests

    def evidence_text(self) -> str:
        return "; ".join(f"{k} = {_show(v)}" for k, v in self.evidence.items())


# Queueing and prefill both live inside TTFT; the larger stage wins between them.
_PRIORITY = ("failures", "memory", "ttft", "saturation", "decode")


@dataclass
class Diagnosis:
    """The procedure's findings in order, and what they add up to.

    - ``verdict``: ``"problem"`` when a step found one (or a target is missed with no step able
      to say why: cause ``"unexplained"``); ``"not_enough_data"`` when the log has fewer
      successful requests than the workload step needs; else ``"ok"``.
    - ``primary``: the finding to fix first — failures, then memory, then the larger of
      queueing and prefill, then saturation, then decode (earlier problems cause later ones).
    - ``cause``: ``primary.cause`` (one of ``CAUSES``), ``"unexplained"``, or None.
    - ``headline``: one line derived from the above, never contradicting the steps.
    - ``suggestions``: the primary finding's changes, each with what it trades.

    ``str()`` gives a text report; ``to_dict()`` the JSON the CLI prints; in a notebook it
    renders as a table.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """

    findings: list[Finding]
    slo: dict[str, float]
    notes: list[str] = field(default_factory=list)
    missed: dict[str, float] = field(default_factory=dict)

    @property
    def primary(self) -> Finding | None:
        problems = {f.step: f for f in self.findings if f.verdict == "problem"}
        for group in _PRIORITY:
            if group != "ttft":
                if group in problems:
                    return problems[group]
                continue
            stages = [problems[s] for s in ("queueing", "prefill") if s in problems]
            if stages:
                return max(stages, key=lambda f: f.evidence.get("stage_share_of_slow_ttft", 0.0))
        return None

    @property
    def verdict(self) -> str:
        if self.primary is not None:
            return "problem"
        if self.finding("workload").too_few:
            return "not_enough_data"
        return "problem" if self.missed else "ok"

    @property
    def cause(self) -> str | None:
        primary = self.primary
        if primary is not None:
            return primary.cause
        return "unexplained" if self.verdict == "problem" else None

    @property
    def suggestions(self) -> tuple[Suggestion, ...]:
        primary = self.primary
        return primary.suggestions if primary is not None else ()

    @property
    def headline(self) -> str:
        verdict, primary = self.verdict, self.primary
        if primary is not None:
            return f"problem: {primary.cause} (step {primary.step}) — {primary.detail}"
        if verdict == "not_enough_data":
            text = f"not enough data: {self.finding('workload').detail}"
            if self.missed:
                shown = ", ".join(f"{k} p90 {v:.3g} s" for k, v in self.missed.items())
                text += f"; what there is misses a target ({shown}), so it is not healthy either"
            return text
        if verdict == "problem":
            blind = [f.step for f in self.findings if f.verdict == "cant_tell"]
            shown = ", ".join(f"{k} p90 {v:.3g} s" for k, v in self.missed.items())
            why = (
                f"the steps that could say why cannot tell ({', '.join(blind)}); record what "
                "they name as missing"
                if blind
                else "no step's rule explains it; read the evidence of queueing, prefill and decode"
            )
            return f"problem: unexplained — {shown} misses its target, but {why}"
        blind = [f"{f.step} ({', '.join(f.missing)})" for f in self.findings if f.missing]
        text = "ok: the targets are met and no step found a problem"
        return text + (f"; not checked: {'; '.join(blind)}" if blind else "")

    def finding(self, step: str) -> Finding:
        """The finding of one step by name."""
        for f in self.findings:
            if f.step == step:
                return f
        raise ValueError(f"step={step!r} must be one of {', '.join(STEPS)}")

    def to_frame(self) -> pd.DataFrame:
        """One row per step: verdict, cause, detail, evidence, suggestions."""
        return pd.DataFrame(
            [
                {
                    "step": f.step,
                    "verdict": f.verdict,
                    "cause": f.cause or "",
                    "detail": f.detail,
                    "evidence": f.evidence_text(),
                    "suggestions": "; ".join(s.key for s in f.suggestions),
                }
                for f in self.findings
            ]
        ).set_index("step")

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON-ready data (NaN and inf become None)."""
        return {
            "verdict": self.verdict,
            "cause": self.cause,
            "headline": self.headline,
            "slo": dict(self.slo),
            "suggestions": [_suggestion(s) for s in self.suggestions],
            "steps": [
                {
                    "step": f.step,
                    "verdict": f.verdict,
                    "cause": f.cause,
                    "detail": f.detail,
                    "evidence": {k: _plain(v) for k, v in f.evidence.items()},
                    "suggestions": [_suggestion(s) for s in f.suggestions],
                    "missing": list(f.missing),
                    "samples": f.samples,
                    "min_requests": f.min_requests,
                }
                for f in self.findings
            ],
            "notes": list(self.notes),
        }

    def __str__(self) -> str:
        mark = {"ok": "ok", "problem": "PROBLEM", "cant_tell": "can't tell"}
        lines = []
        for number, f in enumerate(self.findings, 1):
            cause = f" [{f.cause}]" if f.cause else ""
            lines.append(f"{number}. {f.step:<10} {mark[f.verdict]}{cause}: {f.detail}")
            if f.evidence:
                lines.append(f"   evidence: {f.evidence_text()}")
            for s in f.suggestions:
                lines.append(f"   try: {s}")
        targets = ", ".join(f"{k} p90 ≤ {v * 1e3:g} ms" for k, v in self.slo.items())
        return "\n".join([self.headline, f"targets: {targets}", *lines, *self.notes])

    __repr__ = __str__

    def _repr_html_(self) -> str:
        colour = {"ok": "#1b7a1b", "problem": "#b00020", "cant_tell": "#8a6d00"}
        rows = "".join(
            f"<tr><td>{n}. {f.step}</td>"
            f"<td style='color:{colour[f.verdict]}'><b>{f.verdict}</b>"
            f"{'<br>' + f.cause if f.cause else ''}</td>"
            f"<td style='text-align:left'>{html.escape(f.evidence_text())}</td>"
            f"<td style='text-align:left'>{html.escape(f.detail)}</td>"
            f"<td style='text-align:left'>"
            f"{'<br>'.join(html.escape(str(s)) for s in f.suggestions)}</td></tr>"
            for n, f in enumerate(self.findings, 1)
        )
        return (
            f"<p><b>{html.escape(self.headline)}</b></p><table><tr><th>step</th><th>verdict"
            f"</th><th>evidence</th><th>finding</th><th>suggestions</th></tr>{rows}</table>"
        )


def _suggestion(s: Suggestion) -> dict[str, str]:
    return {"key": s.key, "action": s.action, "trades": s.trades, "cost": s.cost}


def _plain(value: Any) -> Any:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    return value


def _show(value: Any) -> str:
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return f"{value:,}"
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return "n/a"
        if math.isinf(value) or abs(value) < 1000:
            return f"{value:.3g}"
        return f"{value:,.0f}"
    return str(value)
