"""Answers to notebook 07's "Try it" questions, computed by llminfer."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from llminfer.exercises import Exercise
from llminfer.language import N_


@cache
def _case_log(name: str, **change):
    from llminfer.diagnose.cases import CASE_STUDIES
    from llminfer.logs.reading import read_requests

    case = CASE_STUDIES[name]
    return read_requests(case.requests(replace(case.deployment, **change)))


def _good_fraction(name: str, **change) -> float:
    from llminfer.diagnose.cases import CASE_SLO
    from llminfer.logs.summary import summarize

    return float(summarize(_case_log(name, **change), slo=CASE_SLO).good_fraction)


def _busy_at_128() -> float:
    from llminfer.diagnose.cases import CASE_STUDIES

    engine = CASE_STUDIES["busy"].deployment.engine
    return _good_fraction("busy", engine=replace(engine, max_num_seqs=128))


def _healthy_at_6ms() -> str:
    from llminfer.diagnose.cases import CASE_STUDIES
    from llminfer.diagnose.run import diagnose

    case = CASE_STUDIES["healthy"]
    report = diagnose(
        _case_log("healthy"),
        slo={"ttft_s": 1.0, "tpot_s": 0.006},
        **case.deployment.diagnose_kwargs(),
    )
    return report.cause


def _ramp_first_window() -> int:
    from llminfer.diagnose.cases import CASE_SLO, CASE_STUDIES
    from llminfer.diagnose.run import diagnose

    case = CASE_STUDIES["ramp"]
    report = diagnose(_case_log("ramp"), slo=CASE_SLO, **case.deployment.diagnose_kwargs())
    return int(report.finding("saturation").evidence["window"].split("/")[0])


def _real_heavy_cant_tell() -> str:
    from llminfer.diagnose.cases import REAL_CASE_LOGS, REAL_CASE_SLO
    from llminfer.diagnose.run import diagnose
    from llminfer.exercises.datasets import dataset_path
    from llminfer.logs.reading import read_requests

    log = read_requests(dataset_path(REAL_CASE_LOGS["heavy"]))
    report = diagnose(log, slo=REAL_CASE_SLO)
    steps = [f.step for f in report.findings if f.verdict == "cant_tell"]
    return steps[0] if steps else "none"


EXERCISES: tuple[Exercise, ...] = (
    Exercise(
        "07.1",
        N_(
            "Tighten the healthy service's TPOT target to 6 ms (TTFT stays 1 s). Which cause does "
            "diagnose name (one of llminfer.diagnose.findings.CAUSES)?"
        ),
        _healthy_at_6ms,
        accept=("too slow",),
        hint=N_(
            "look at the decode step: is TPOT already above 6 ms for the quietest requests, "
            "or only when many requests decode together?"
        ),
    ),
    Exercise(
        "07.2",
        N_(
            "Serve the ramp workload on two replicas of one H100 each instead of TP = 2 "
            "(replace(ramp.deployment, replicas=2)): what share of requests meets both targets?"
        ),
        lambda: _good_fraction("ramp", replicas=2),
        unit="(fraction, 0–1)",
        hint=N_(
            "ramp.requests(replace(ramp.deployment, replicas=2)), read_requests, then "
            "summarize(..., slo=CASE_SLO).good_fraction"
        ),
    ),
    Exercise(
        "07.3",
        N_(
            "The busy case's cure table tried --max-num-seqs 64. Try 128 "
            "(replace(busy.deployment, engine=replace(busy.deployment.engine, max_num_seqs=128))): "
            "what share of requests meets both targets?"
        ),
        _busy_at_128,
        unit="(fraction, 0–1)",
        hint=N_(
            "a smaller batch makes each step faster but leaves requests waiting: look at both "
            "TTFT and TPOT p90"
        ),
    ),
    Exercise(
        "07.4",
        N_(
            "In the ramp case, in which of the ten windows does the saturation step first see the "
            "queue grow (k in 'k/10')?"
        ),
        _ramp_first_window,
        rel_tol=0.0,
        hint=N_("report.finding('saturation').evidence['window']"),
    ),
    Exercise(
        "07.5",
        N_(
            "Diagnose the toy server's heavy-load log (data/real_toy_heavy.csv, what llminfer "
            "bench records: client-side times only) with REAL_CASE_SLO and nothing else — no "
            "deployment, no scrape. Which step says can't tell?"
        ),
        _real_heavy_cant_tell,
        hint=N_(
            "diagnose(read_requests(...), slo=REAL_CASE_SLO), then look for the finding whose "
            "verdict is 'cant_tell' and read its .missing"
        ),
    ),
)
