"""Chapter 7's report: one ``Finding`` per step of the troubleshooting order, collected in a
``Diagnosis`` whose verdict, cause and headline are derived from the steps.

``llminfer.diagnose`` produces them; this module only says what a finding is, which causes
exist, and how a report reads. The report speaks the learner's language
(``llminfer.set_language``): its texts are marked for the "diagnose" catalog, while the keys a
program tests (steps, verdicts, causes, evidence names) stay as they are in ``to_dict()`` and
``to_frame()``.
"""

from __future__ import annotations

import html
import math
import unicodedata
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from llminfer.diagnose.suggestions import Suggestion, _named
from llminfer.language import N_, _, get_language

STEPS = ("workload", "failures", "memory", "queueing", "prefill", "decode", "saturation")
#: A step's verdict.
VERDICTS = ("ok", "problem", "cant_tell")
#: The whole log's verdict (``Diagnosis.verdict``).
OVERALL = ("ok", "problem", "not_enough_data")

#: The causes ``diagnose`` can name (``Finding.cause`` and ``Diagnosis.cause``).
#: Each value is English, marked for the catalog; ``causes_table`` shows it translated.
CAUSES = {
    "failures": N_("more than 1 % of requests failed: the latency figures describe only survivors"),
    "kv_pressure": N_(
        "the KV cache is full: requests are preempted (evicted and recomputed) or wait for memory"
    ),
    "overload": N_(
        "more load than the deployment serves within the targets: arrivals above the "
        "service rate (the queue grows), or so many requests decoding together that every step "
        "is too slow for the TPOT target"
    ),
    "lockstep_prefill": N_(
        "requests sent together (a closed loop's users in step) wait for each "
        "other's prefill, not for a slot: no more requests are in flight than the server has "
        "slots, and TTFT is a few single prefills — the load generator's rhythm, not overload"
    ),
    "slot_queue": N_(
        "more requests in flight than the server has slots (max_num_seqs, llama.cpp "
        "--parallel): the extra ones wait for a free slot and the queue grows"
    ),
    "head_of_line": N_(
        "requests wait behind long prompts being prefilled ahead of them, although "
        "the server keeps up on average"
    ),
    "interference": N_(
        "other requests' prefills stall the decode steps they share: TPOT follows "
        "the prompt tokens that run during a request's decode"
    ),
    "too_slow": N_(
        "the model on this GPU is too slow for the target even at low load: a request "
        "alone (no queue, small batch) already misses it"
    ),
    "unexplained": N_(
        "a target is missed but the log cannot say why (a field is missing); the "
        "report names what to record"
    ),
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
#: The question each step asks (English, marked for the catalog; shown translated).
QUESTION = {
    "workload": N_("Is the workload described, and are there enough requests to trust p90?"),
    "failures": N_("Did requests fail? Failed requests are not fast requests."),
    "memory": N_("Does the KV cache hold the requests in flight, or are they preempted?"),
    "queueing": N_("How much of TTFT is waiting, and is it overload or long prompts ahead?"),
    "prefill": N_("Is a request's own prefill too slow for the TTFT target even without a queue?"),
    "decode": N_("Is TPOT slowed by the batch, by other prefills, or slow even at low load?"),
    "saturation": N_("Does the server keep up with the arrivals in every window of the run?"),
}

# What the report calls each key in another language than English (English shows the key
# itself, as a program tests it): the steps, the causes, the verdicts, the targets.
# TRANSLATORS: the names of the seven steps of the troubleshooting order, as the report's
# first column shows them (workload, failures, memory, queueing, prefill, decode, saturation).
STEP_NAMES = {
    "workload": N_("workload"),
    "failures": N_("failures"),
    "memory": N_("memory"),
    "queueing": N_("queueing"),
    "prefill": N_("prefill"),
    "decode": N_("decode"),
    "saturation": N_("saturation"),
}
# TRANSLATORS: short names of the causes a diagnosis names; the report shows them as
# "name (key)", the key being what a program tests (overload, kv_pressure, ...).
CAUSE_NAMES = {
    "failures": N_("too many failed requests"),
    "kv_pressure": N_("KV cache full"),
    "overload": N_("overload"),
    "lockstep_prefill": N_("requests sent together wait for each other's prefill"),
    "slot_queue": N_("waiting for a free slot"),
    "head_of_line": N_("head-of-line blocking"),
    "interference": N_("prefill interference"),
    "too_slow": N_("too slow"),
    "unexplained": N_("unexplained"),
}
#: A step's verdict in the text report (English as it is shown).
_MARKS = {"ok": N_("ok"), "problem": N_("PROBLEM"), "cant_tell": N_("can't tell")}
#: A step's verdict in the HTML table (English shows the key).
_VERDICT_NAMES = {"ok": N_("ok"), "problem": N_("problem"), "cant_tell": N_("can't tell")}
#: The latency targets (``slo`` keys, and the keys of ``Diagnosis.missed``).
_TARGET_NAMES = {
    "ttft_s": N_("TTFT"),
    "tpot_s": N_("TPOT"),
    "e2e_s": N_("E2E"),
    "ttft": N_("TTFT"),
    "tpot": N_("TPOT"),
}
# TRANSLATORS: the names of the evidence a step shows ("name = value"); the units are those of
# the value as shown (seconds, tokens, requests/s; a share is 0–1).
EVIDENCE_NAMES = {
    "requests": N_("requests"),
    "succeeded": N_("successful requests"),
    "offered_rps": N_("offered rate (requests/s)"),
    "served_rps": N_("served rate (requests/s)"),
    "input_tokens_p50": N_("prompt tokens p50"),
    "input_tokens_p90": N_("prompt tokens p90"),
    "output_tokens_p50": N_("output tokens p50"),
    "windows": N_("time windows"),
    "failed": N_("failed requests"),
    "failed_fraction": N_("failed share"),
    "preemptions": N_("preemptions"),
    "preempted_fraction": N_("share of requests preempted"),
    "server_waiting": N_("server: requests waiting"),
    "server_running": N_("server: requests running"),
    "server_swapped": N_("server: requests swapped"),
    "server_kv_usage": N_("server: KV cache usage"),
    "server_preemptions": N_("server: preemptions"),
    "kv_capacity_tokens": N_("KV cache capacity (tokens)"),
    "peak_tokens_in_flight": N_("peak tokens in flight"),
    "peak_share_of_capacity": N_("peak share of the KV capacity"),
    "ttft_p90_s": N_("TTFT p90 (s)"),
    "ttft_target_s": N_("TTFT target (s)"),
    "ttft_p50_s": N_("TTFT p50 (s)"),
    "stage_p90_s": N_("stage p90 (s)"),
    "share_of_slow_requests": N_("share of slow requests where the stage is most of TTFT"),
    "window": N_("time window"),
    "window_arrival_rps": N_("window: arrivals (requests/s)"),
    "window_served_rps": N_("window: served (requests/s)"),
    "window_waiting_start": N_("window: waiting at its start"),
    "window_waiting_end": N_("window: waiting at its end"),
    "window_ttft_p90_s": N_("window: TTFT p90 (s)"),
    "rho_wait_prompt_tokens_ahead": N_("rank correlation: wait vs prompt tokens ahead"),
    "prompt_ahead_of_slow_mean_tokens": N_("prompt tokens ahead of slow requests, mean"),
    "prompt_p50_tokens": N_("prompt tokens p50"),
    "in_flight_peak": N_("peak requests in flight"),
    "slots": N_("slots"),
    "closed_loop_share": N_("share of arrivals released by an end (closed loop)"),
    "single_prefill_s": N_("one prefill alone (s)"),
    "ttft_p50_in_single_prefills": N_("TTFT p50 in single prefills"),
    "ahead_at_arrival_p50": N_("requests ahead at arrival p50"),
    "estimated_prefill_at_p90_prompt_s": N_("estimated prefill of the p90 prompt (s)"),
    "slow_own_prompt_p50_tokens": N_("prompt tokens p50 of the slow requests"),
    "rho_prefill_prompt": N_("rank correlation: own prefill vs prompt length"),
    "tpot_p90_s": N_("TPOT p90 (s)"),
    "tpot_target_s": N_("TPOT target (s)"),
    "decoding_together_p50": N_("requests decoding together p50"),
    "low_load_tpot_s": N_("TPOT at low load (s)"),
    "low_load_decoding": N_("requests decoding together at low load"),
    "itl_s_p50": N_("ITL p50 (s)"),
    "itl_s_p99": N_("ITL p99 (s)"),
    "stalls": N_("stalls"),
    "stalls_in_prefill_share": N_("share of stalls during another request's prefill"),
    "stalled_requests_share": N_("share of requests with a stall"),
    "tpot_p90_without_stalls_s": N_("TPOT p90 without stalls (s)"),
    "tpot_floor_s": N_("TPOT bandwidth floor (s)"),
    "low_load_tpot_over_floor": N_("TPOT at low load ÷ floor"),
    "low_load_batch_share": N_("share of low-load TPOT from the batch"),
    "alone_tpot_s": N_("TPOT of one request alone (s)"),
    "slow_decoding_together_p50": N_("slow requests: decoding together p50"),
    "slow_prefill_overlap_tokens_per_s": N_("slow requests: overlapping prompt tokens/s p50"),
    "tpot_from_batch_s": N_("TPOT added by the bigger batch (s)"),
    "tpot_from_overlapping_prefills_s": N_("TPOT added by overlapping prefills (s)"),
    "stall_share_of_miss": N_("share of the TPOT miss from stalls"),
}
#: Evidence whose name depends on the step: the TTFT stage is waiting in one, prefill in the
#: other.
_STEP_EVIDENCE_NAMES = {
    ("queueing", "stage_p90_s"): N_("waiting p90 (s)"),
    ("queueing", "share_of_slow_requests"): N_("share of slow requests mostly waiting"),
    ("prefill", "stage_p90_s"): N_("own prefill p90 (s)"),
    ("prefill", "share_of_slow_requests"): N_("share of slow requests mostly own prefill"),
}


def _cause_name(cause: str) -> str:
    """A cause as the report names it: its key in English; its name and key otherwise."""
    if get_language() == "en" or cause not in CAUSE_NAMES:
        return cause
    # TRANSLATORS: a cause in the report: its name, then the key a program tests.
    return _("{name} ({key})").format(name=_(CAUSE_NAMES[cause]), key=cause)


def _evidence_name(step: str, key: str) -> str:
    if get_language() == "en":
        return key
    name = _STEP_EVIDENCE_NAMES.get((step, key), EVIDENCE_NAMES.get(key))
    return _(name) if name else key


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
        """The evidence as one line, ``name = value; …``, in the learner's language."""
        # TRANSLATORS: what separates the items of a list in the report ("a; b").
        return _("; ").join(
            f"{_evidence_name(self.step, k)} = {_show(v)}" for k, v in self.evidence.items()
        )


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

    def _missed_text(self) -> str:
        # TRANSLATORS: what separates the items of a short list ("a, b").
        return _(", ").join(
            _("{metric} p90 {value:.3g} s").format(metric=_named(k, _TARGET_NAMES), value=v)
            for k, v in self.missed.items()
        )

    @property
    def headline(self) -> str:
        verdict, primary = self.verdict, self.primary
        if primary is not None:
            return _("problem: {cause} (step {step}) — {detail}").format(
                cause=_cause_name(primary.cause),
                step=_named(primary.step, STEP_NAMES),
                detail=primary.detail,
            )
        if verdict == "not_enough_data":
            text = _("not enough data: {detail}").format(detail=self.finding("workload").detail)
            if self.missed:
                text += _(
                    "; what there is misses a target ({missed}), so it is not healthy either"
                ).format(missed=self._missed_text())
            return text
        if verdict == "problem":
            blind = [_named(f.step, STEP_NAMES) for f in self.findings if f.verdict == "cant_tell"]
            why = (
                _(
                    "the steps that could say why cannot tell ({steps}); record what "
                    "they name as missing"
                ).format(steps=_(", ").join(blind))
                if blind
                else _(
                    "no step's rule explains it; read the evidence of queueing, prefill and decode"
                )
            )
            return _("problem: unexplained — {missed} misses its target, but {why}").format(
                missed=self._missed_text(), why=why
            )
        blind = [
            _("{step} ({missing})").format(
                step=_named(f.step, STEP_NAMES), missing=_(", ").join(f.missing)
            )
            for f in self.findings
            if f.missing
        ]
        text = _("ok: the targets are met and no step found a problem")
        if blind:
            text += _("; not checked: {steps}").format(steps=_("; ").join(blind))
        return text

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
        lines = []
        for number, f in enumerate(self.findings, 1):
            cause = _(" [{cause}]").format(cause=_cause_name(f.cause)) if f.cause else ""
            # TRANSLATORS: one step of the text report: its number, name (padded to 10
            # columns), verdict, cause (" [cause]" or nothing) and what it found.
            line = _("{number}. {step} {verdict}{cause}: {detail}").format(
                number=number,
                step=_padded(_named(f.step, STEP_NAMES), 10),
                verdict=_(_MARKS[f.verdict]),
                cause=cause,
                detail=f.detail,
            )
            lines.append(line)
            if f.evidence:
                lines.append(_("   evidence: {evidence}").format(evidence=f.evidence_text()))
            for s in f.suggestions:
                lines.append(_("   try: {suggestion}").format(suggestion=s))
        targets = _(", ").join(
            _("{metric} p90 ≤ {value:g} ms").format(metric=_named(k, _TARGET_NAMES), value=v * 1e3)
            for k, v in self.slo.items()
        )
        header = _("targets: {targets}").format(targets=targets)
        return "\n".join([self.headline, header, *lines, *self.notes])

    __repr__ = __str__

    def _repr_html_(self) -> str:
        colour = {"ok": "#1b7a1b", "problem": "#b00020", "cant_tell": "#8a6d00"}
        rows = "".join(
            f"<tr><td>{n}. {html.escape(_named(f.step, STEP_NAMES))}</td>"
            f"<td style='color:{colour[f.verdict]}'>"
            f"<b>{html.escape(_named(f.verdict, _VERDICT_NAMES))}</b>"
            f"{'<br>' + html.escape(_cause_name(f.cause)) if f.cause else ''}</td>"
            f"<td style='text-align:left'>{html.escape(f.evidence_text())}</td>"
            f"<td style='text-align:left'>{html.escape(f.detail)}</td>"
            f"<td style='text-align:left'>"
            f"{'<br>'.join(html.escape(str(s)) for s in f.suggestions)}</td></tr>"
            for n, f in enumerate(self.findings, 1)
        )
        # TRANSLATORS: the HTML report's column headings.
        heads = (_("step"), _("verdict"), _("evidence"), _("finding"), _("suggestions"))
        header = "".join(f"<th>{html.escape(h)}</th>" for h in heads)
        return f"<p><b>{html.escape(self.headline)}</b></p><table><tr>{header}</tr>{rows}</table>"


def _suggestion(s: Suggestion) -> dict[str, str]:
    return {"key": s.key, "action": s.action, "trades": s.trades, "cost": s.cost}


def _padded(text: str, width: int) -> str:
    """``text`` and spaces up to ``width`` columns (a Chinese character takes two), so that
    the report's columns line up in either language."""
    columns = sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)
    return text + " " * max(width - columns, 0)


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
        # TRANSLATORS: a yes/no evidence value.
        return _("True") if value else _("False")
    if isinstance(value, (int, np.integer)):
        return f"{value:,}"
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            # TRANSLATORS: an evidence value that could not be measured.
            return _("n/a")
        if math.isinf(value) or abs(value) < 1000:
            return f"{value:.3g}"
        return f"{value:,.0f}"
    return str(value)
