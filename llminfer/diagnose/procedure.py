"""Chapter 7's troubleshooting procedure as rules: the thresholds and the tables that state them.

Every threshold the steps (``llminfer.diagnose.load_steps``, ``llminfer.diagnose.latency_steps``)
apply is a
module constant here, so a reader can see (and change) it; ``procedure_table()`` prints the
seven steps with these numbers in their rules, ``causes_table()`` the causes a diagnosis names
(their texts in the learner's language, ``llminfer.set_language``; the steps and causes as
keys). ``llminfer.diagnose`` re-exports all of them.
"""

from __future__ import annotations

import pandas as pd

from llminfer.diagnose.findings import CAUSES, CHAPTER, QUESTION, STEPS
from llminfer.language import _
from llminfer.logs.metrics import STALL_FACTOR

#: Targets assumed when ``slo`` is not given: an interactive chat service (the same figures as
#: the ``metrics`` command's example). MLPerf's Llama-2-70B server scenario is laxer (TTFT 2 s,
#: TPOT 200 ms in loadgen's mlperf.conf); pass ``slo=`` with your own.
DEFAULT_SLO = {"ttft_s": 0.5, "tpot_s": 0.05}
#: Fewer successful requests than this and p90 rests on a handful of samples: the workload,
#: memory, queueing, prefill, decode and saturation steps say "can't tell" and the verdict is
#: "not_enough_data" (p90 of 50 samples sits between the 45th and 46th value).
MIN_REQUESTS = 50
#: The failures step needs this many requests (successful or not) to call a failure rate.
MIN_FAILURE_REQUESTS = 20
#: Share of requests that may fail before failures are the first thing to fix.
MAX_FAILED_FRACTION = 0.01
#: A TTFT stage (waiting, own prefill) is "the problem" when TTFT misses its target and the
#: stage's p90 is more than this share of TTFT's p90.
STAGE_SHARE = 0.5
#: A rank correlation counts as evidence above this.
STRONG_CORRELATION = 0.5
#: Tokens in flight (or the server's KV usage) at this share of the KV capacity is a full cache.
KV_FULL_SHARE = 0.95
#: Share of requests that may be preempted before memory is the problem.
MAX_PREEMPTED_FRACTION = 0.01
#: Served rate below this share of the offered rate means the queue grows without bound.
SERVED_SHARE = 0.9
#: Head-of-line blocking needs long prompts: the prompts queued ahead of the slow requests
#: average at least this multiple of the median prompt.
LONG_PROMPT_SPREAD = 3.0
#: Decode at low load slower than this multiple of the bandwidth floor is an inefficiency.
FLOOR_MULTIPLE = 3.0
#: Interference needs the slow requests to have overlapped at least this multiple of the
#: median request's prefill work (tokens/s during decode); below it, prefill is just load.
PREFILL_CONCENTRATION = 1.5
#: With per-token times (``token_ts``), interference is measured, not fitted: TPOT misses
#: because of stalls (gaps > ``metrics.STALL_FACTOR`` × the median gap) when replacing every
#: stall by a median gap removes at least ``STALL_SHARE_OF_MISS`` of TPOT p90's excess over the
#: target, and at least ``STALLS_IN_PREFILL_SHARE`` of the stalls ran while another request's
#: prefill did.
STALL_SHARE_OF_MISS = 0.5
STALLS_IN_PREFILL_SHARE = 0.5
#: A closed loop: at least ``CLOSED_LOOP_SHARE`` of the requests that arrive after some request
#: ended arrive within ``CLOSED_LOOP_GAP_S`` of an end (a user sends again as its answer ends).
#: Only then are the requests in flight the users, and slots against users mean anything: an
#: open loop's queue grows past any slot count when it is overloaded (cause ``overload``).
CLOSED_LOOP_GAP_S = 0.01
CLOSED_LOOP_SHARE = 0.8
#: Lockstep prefill: when fewer than three requests had nobody ahead of them, one prefill alone
#: is read as this percentile of TTFT (the first of each group sent together).
LOCKSTEP_SINGLE_PERCENTILE = 10
#: Requests with fewer requests ahead of them than this count as having arrived to no queue.
ALONE_MIN = 10
#: The quietest requests of a log count as "low load" only when the batch adds at most this
#: share of their TPOT (the fitted per-request TPOT cost × their batch). A log served at a
#: steady heavy load has no quiet requests: its quietest tenth may still decode 80 together,
#: and with realistic step times (fixed per-layer costs, KV reads per request) their TPOT
#: says nothing about a request alone. ``diagnose`` then asks what one request alone would
#: take: the step-time estimate when the deployment is known, else the fit extrapolated.
LOW_LOAD_BATCH_SHARE = 0.25


def procedure_table() -> pd.DataFrame:
    """The troubleshooting order as a table: per step, the question, what is measured, the
    rule (with the thresholds this module uses), the least number of requests it needs and
    the chapter that explains it.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    stage = _(
        "TTFT p90 misses the target and the stage is most of the TTFT of > {share:.0%} "
        "of the slow requests"
    ).format(share=STAGE_SHARE)
    rows = {
        "workload": (
            _("successful requests, prompt/answer lengths, offered rate, time windows"),
            _("at least {n} successful requests, else not enough data").format(n=MIN_REQUESTS),
            MIN_REQUESTS,
        ),
        "failures": (
            _("failed / all requests"),
            _("failures above {share:.0%}").format(share=MAX_FAILED_FRACTION),
            MIN_FAILURE_REQUESTS,
        ),
        "memory": (
            _(
                "preemptions (log or /metrics); server KV usage; peak tokens in flight vs KV "
                "capacity (chapter 4's plan)"
            ),
            _(
                "kv_pressure if a target is missed and > {preempted:.0%} of requests "
                "were preempted, or the cache is ≥ {full:.0%} full"
            ).format(preempted=MAX_PREEMPTED_FRACTION, full=KV_FULL_SHARE),
            MIN_REQUESTS,
        ),
        "queueing": (
            _(
                "waiting = scheduled − arrival (or TTFT − own prefill); work ahead at arrival; "
                "queue growth per window"
            ),
            # TRANSLATORS: {stage} is the rule "TTFT p90 misses the target and the stage is …".
            _(
                "if {stage}: overload when a window's queue grows (arrivals > service rate), "
                "head_of_line when the server keeps up and the prompts ahead of the slow requests "
                "average ≥ {spread:g}× the median prompt; with the slots known and a "
                "closed loop (≥ {closed:.0%} of arrivals within "
                "{gap:g} ms of an end): lockstep_prefill when in flight ≤ "
                "slots and one prefill alone meets the target, slot_queue when in flight > slots"
            ).format(
                stage=stage,
                spread=LONG_PROMPT_SPREAD,
                closed=CLOSED_LOOP_SHARE,
                gap=CLOSED_LOOP_GAP_S * 1000,
            ),
            MIN_REQUESTS,
        ),
        "prefill": (
            _("own prefill = first token − scheduled (or of requests that did not wait)"),
            _("too_slow if {stage}").format(stage=stage),
            MIN_REQUESTS,
        ),
        "decode": (
            _(
                "TPOT at low load; ITL p50/p99 and stalls in the token streams (token_ts); else "
                "TPOT ≈ a + b·decoding together + c·overlapping prefill tokens"
            ),
            _(
                "too_slow if the low-load TPOT misses; else interference — with token_ts: when "
                "stalls (gaps > {factor:g}× the median) make ≥ {of_miss:.0%} of "
                "TPOT p90's miss and ≥ {in_prefill:.0%} of them ran during another "
                "request's prefill; without: when the slow requests overlapped ≥ "
                "{concentration:g}× the median request's prefill work and it adds more to "
                "their TPOT than their bigger batch — overload otherwise"
            ).format(
                factor=STALL_FACTOR,
                of_miss=STALL_SHARE_OF_MISS,
                in_prefill=STALLS_IN_PREFILL_SHARE,
                concentration=PREFILL_CONCENTRATION,
            ),
            MIN_REQUESTS,
        ),
        "saturation": (
            _("arrivals vs completions and queue growth per window; served vs offered overall"),
            _(
                "overload if a window's queue grows while TTFT misses, or served < "
                "{share:.0%} of offered"
            ).format(share=SERVED_SHARE),
            MIN_REQUESTS,
        ),
    }
    return pd.DataFrame(
        [
            {
                "step": step,
                "question": _(QUESTION[step]),
                "measurement": rows[step][0],
                "rule": rows[step][1],
                "min_requests": rows[step][2],
                "chapter": CHAPTER[step],
            }
            for step in STEPS
        ]
    ).set_index("step")


def causes_table() -> pd.DataFrame:
    """The causes ``diagnose`` can name, with what each means.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    meanings = {cause: _(meaning) for cause, meaning in CAUSES.items()}
    return pd.DataFrame({"meaning": meanings}).rename_axis("cause")
