"""Chapter 7's step 0 and its load sweep: is the measurement itself sound, and where does the
service stop keeping up?

``measurement_step(log)`` checks a request log before any diagnosis reads it, one row per check
(``"ok"``, ``"warn"`` or ``"cant_tell"``, with the evidence and what to do):

- **clocks**: ``read_requests`` already refuses a first token or end before the start and a
  ``scheduled_ts`` outside start..first token; an offset that keeps that order shows as no
  request ever scheduled within ``CLOCK_OFFSET_S`` of its arrival (arrival stamped by the
  client, scheduling by the server): every difference between the two clocks is then off;
- **warm-up**: the first requests of the run (5 %, at least 5) much slower than the rest (TTFT
  median > ``WARMUP_FACTOR`` × the rest's and ≥ 50 ms more): cold caches, JIT compilation or
  CUDA-graph capture; trim them or send warm-up requests apart;
- **drain**: the time after the last arrival, while the last requests finish at a falling
  load; a rate over first start → last end (what GenAI-Perf, AIPerf and ``vllm bench serve``
  divide by) counts it. ``arrival_window_rates`` gives the rates over the arrival window;
- **load generator**: a closed loop (most requests start within ``CLOSED_LOOP_GAP_S`` of
  another's end: the client waits for answers before sending) keeps the queue in the client,
  so the server's queue cannot grow however far past capacity it is pushed; its throughput at
  saturation *is* the capacity, but a TTFT from it is not what users at that rate would see.
  With ``intended_rps``, an open-loop generator that sent slower than asked (below
  ``SENT_SHARE`` of it and below what Poisson chance allows for n arrivals, 1 − 3/√(n−1) of it)
  saturated before the server.

``load_sweep(logs, slo)`` is the sweep as a step: one log per offered load, and per load the
offered and served rates over the arrival window, p90 TTFT/TPOT and whether the server kept up
and met the targets; ``sweep_verdict`` names the highest load it served within the targets and
the capacity (the highest served rate). These are separate from ``diagnose`` (one log, its
seven steps), which they come before and after.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from llminfer.diagnose.procedure import SERVED_SHARE
from llminfer.diagnose.signals import completion_rate
from llminfer.language import _
from llminfer.logs.metrics import request_metrics
from llminfer.logs.reading import read_requests
from llminfer.logs.schema import RequestLog
from llminfer.logs.summary import summarize

#: Clocks: the shortest wait (scheduled − arrival) above this, in seconds, suggests an offset.
CLOCK_OFFSET_S = 0.02
#: Warm-up: the first requests' TTFT median above this multiple of the rest's.
WARMUP_FACTOR = 3.0
#: ... and at least this much more, in seconds (a 3× of 5 ms is noise, not warm-up).
WARMUP_MIN_S = 0.05
#: Drain longer than this share of the arrival window: rates over the whole run mislead.
DRAIN_SHARE = 0.2
#: A request starting within this many seconds after another ended counts as released by it.
CLOSED_LOOP_GAP_S = 0.005
#: Above this share of requests released by another's end, the client ran a closed loop.
CLOSED_LOOP_SHARE = 0.8
#: An open-loop client that sent less than this share of the asked rate saturated first, and
#: less than Poisson chance allows: n arrivals' rate falls 3 standard deviations (3/√(n−1) of
#: the rate) below the asked one about once in 700 runs.
SENT_SHARE = 0.9
SENT_SIGMAS = 3.0


def _requests(log: RequestLog | pd.DataFrame) -> pd.DataFrame:
    if not isinstance(log, RequestLog):
        log = read_requests(log)
    return log.requests


def arrival_window_rates(log: RequestLog | pd.DataFrame) -> dict[str, float]:
    """Rates over the arrival window (first → last start, seconds), not the run: ``offered_rps``
    = (arrivals − 1) / window; ``served_rps`` = successful completions inside the window /
    window (it undercounts by the requests in flight at the window's end, offered rate × mean
    latency by Little's law: negligible only for a window much longer than the latency);
    ``output_tps`` = their output tokens / window; ``window_s``, ``drain_s`` (last end − last
    start) and ``whole_run_rps`` (successes / first start → last end, the tools' rate).

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    r = _requests(log)
    if len(r) < 2:
        raise ValueError(f"log has {len(r)} request(s); arrival-window rates need at least 2")
    start = r["start_ts"].to_numpy(float)
    end = r["end_ts"].to_numpy(float)
    ok = (r["status"] == "ok").to_numpy() if "status" in r else np.ones(len(r), bool)
    ok = ok & np.isfinite(end)
    t0, t1 = float(np.min(start)), float(np.max(start))
    window = t1 - t0
    last_end = float(np.nanmax(end[ok])) if ok.any() else math.nan
    inside = ok & (end <= t1)
    out_tokens = r["output_tokens"].to_numpy(float) if "output_tokens" in r else np.ones(len(r))
    run = last_end - t0
    return {
        "window_s": window,
        "offered_rps": (len(r) - 1) / window if window > 0 else math.inf,
        "served_rps": inside.sum() / window if window > 0 else math.nan,
        "output_tps": float(np.nansum(out_tokens[inside])) / window if window > 0 else math.nan,
        "drain_s": last_end - t1,
        "whole_run_rps": ok.sum() / run if run > 0 else math.nan,
    }


def measurement_step(
    log: RequestLog | pd.DataFrame, intended_rps: float | None = None
) -> pd.DataFrame:
    """Step 0: is the measurement sound? One row per check (clocks, warm_up, drain,
    load_generator) with ``verdict`` (ok, warn, cant_tell), ``evidence`` and ``action`` (what
    to do, in the learner's language). See the module docstring for the rules;
    ``intended_rps``: the rate the load generator was asked for (requests/s), to tell whether it
    kept up.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    if intended_rps is not None and (
        isinstance(intended_rps, bool)
        or not isinstance(intended_rps, (int, float))
        or not 0 < intended_rps < math.inf
    ):
        raise ValueError(f"intended_rps={intended_rps!r} must be a positive number of requests/s")
    r = _requests(log)
    if len(r) < 2:
        raise ValueError(f"log has {len(r)} request(s); step 0 needs at least 2")
    m = request_metrics(r)
    rows = [
        _clocks(r),
        _warm_up(r, m),
        _drain(r),
        _load_generator(r, intended_rps),
    ]
    return pd.DataFrame(rows, columns=["check", "verdict", "evidence", "action"]).set_index("check")


def _clocks(r: pd.DataFrame) -> tuple:
    # read_requests already refuses a first token or end before the start, and a scheduled_ts
    # outside start..first token: what is left to see is an offset that keeps the order
    if "scheduled_ts" not in r or not r["scheduled_ts"].notna().any():
        return (
            "clocks",
            "cant_tell",
            {},
            _(
                "no scheduled_ts: a server-side stamp would show "
                "how long requests waited, and whether client and server clocks agree"
            ),
        )
    wait = (r["scheduled_ts"] - r["start_ts"]).to_numpy(float)
    shortest = float(np.nanmin(wait))
    evidence = {"shortest_wait_s": shortest}
    if shortest > CLOCK_OFFSET_S:
        return (
            "clocks",
            "warn",
            evidence,
            _(
                "no request was scheduled within "
                "{offset:g} ms of its arrival: either every one queued, or the "
                "arrival (client) and scheduled (server) stamps come from clocks about that far "
                "apart, network included; take both from one clock, or correct the offset"
            ).format(offset=CLOCK_OFFSET_S * 1e3),
        )
    return ("clocks", "ok", evidence, "")


def _warm_up(r: pd.DataFrame, m: pd.DataFrame) -> tuple:
    order = np.argsort(r["start_ts"].to_numpy(float), kind="stable")
    ttft = m["ttft_s"].to_numpy(float)[order]
    ttft = ttft[np.isfinite(ttft)]
    k = max(5, len(ttft) // 20)
    if len(ttft) < 4 * k:
        return (
            "warm_up",
            "cant_tell",
            {"requests": len(ttft)},
            _("needs at least {n}").format(n=4 * k),
        )
    first, rest = float(np.median(ttft[:k])), float(np.median(ttft[k:]))
    evidence = {"first_requests": k, "first_ttft_p50_s": first, "rest_ttft_p50_s": rest}
    if first > WARMUP_FACTOR * rest and first - rest >= WARMUP_MIN_S:
        return (
            "warm_up",
            "warn",
            evidence,
            _(
                "the first {k} requests are warm-up: drop them, "
                "or send warm-up requests apart (llminfer bench --warmup)"
            ).format(k=k),
        )
    return ("warm_up", "ok", evidence, "")


def _drain(r: pd.DataFrame) -> tuple:
    rates = arrival_window_rates(r)
    share = rates["drain_s"] / rates["window_s"] if rates["window_s"] > 0 else math.inf
    evidence = {**rates, "drain_share": share}
    if share > DRAIN_SHARE:
        return (
            "drain",
            "warn",
            evidence,
            _(
                "rates over first start → last end count the drain: "
                "quote rates over the arrival window (served_rps here), and latencies of the "
                "requests that arrived in it"
            ),
        )
    return ("drain", "ok", evidence, "")


def _load_generator(r: pd.DataFrame, intended_rps: float | None) -> tuple:
    start = np.sort(r["start_ts"].to_numpy(float))
    end = np.sort(r["end_ts"].to_numpy(float)[np.isfinite(r["end_ts"].to_numpy(float))])
    # for each start, the latest end at or before it
    idx = np.searchsorted(end, start, side="right") - 1
    gap = np.where(idx >= 0, start - end[np.maximum(idx, 0)], np.inf)
    released = float(np.mean(gap <= CLOSED_LOOP_GAP_S))
    rates = arrival_window_rates(r)
    evidence = {"released_by_an_end_share": released, "sent_rps": rates["offered_rps"]}
    if released > CLOSED_LOOP_SHARE:
        return (
            "load_generator",
            "warn",
            evidence,
            _(
                "a closed loop: the queue stays in the "
                "client, so the server's queue cannot grow; its throughput at saturation is the "
                "capacity, but to see the queue users at a rate would meet, send open-loop "
                "arrivals (llminfer bench --rate)"
            ),
        )
    if intended_rps is not None:
        n = len(r)
        floor = min(SENT_SHARE, 1 - SENT_SIGMAS / math.sqrt(max(n - 1, 1))) * intended_rps
        evidence["intended_rps"] = float(intended_rps)
        evidence["lowest_expected_rps"] = float(max(floor, 0.0))
        if rates["offered_rps"] < floor:
            return (
                "load_generator",
                "warn",
                evidence,
                _(
                    "the client sent slower than asked: it "
                    "saturated before the server (more client processes, or a faster client)"
                ),
            )
    return ("load_generator", "ok", evidence, "")


def load_sweep(
    logs: Mapping[str, RequestLog | pd.DataFrame], slo: dict[str, float]
) -> pd.DataFrame:
    """The load sweep as a step: one row per log (label → log, one log per offered load),
    sorted by offered rate, with the arrival-window ``offered_rps`` and ``served_rps``,
    ``ttft_s_p90`` and ``tpot_s_p90`` (s), ``good_fraction`` (share meeting ``slo``),
    ``keeps_up`` (served ≥ ``SERVED_SHARE`` × offered) and ``within_targets`` (keeps up and both
    p90s meet ``slo``). ``offered_rps`` is over the arrival window; ``served_rps`` is the
    completion rate over the middle 80 % of completions (``signals.completion_rate``, as the
    saturation step measures it): completions inside a short arrival window undercount by the
    requests still in flight at its end (Little's law: offered rate × mean latency).

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    if not logs:
        raise ValueError("logs is empty: give one log per offered load")
    for key in ("ttft_s", "tpot_s"):
        if key not in slo:
            raise ValueError(f"slo={slo!r} needs {key!r}")
    rows = {}
    for label, log in logs.items():
        rates = arrival_window_rates(log)
        flat = summarize(log, percentiles=(90,), slo=slo).to_dict()
        r = _requests(log)
        ok = (r["status"] == "ok").to_numpy() if "status" in r else np.ones(len(r), bool)
        served = completion_rate(r["end_ts"].to_numpy(float)[ok])
        keeps_up = served >= SERVED_SHARE * rates["offered_rps"]
        rows[label] = {
            "offered_rps": rates["offered_rps"],
            "served_rps": served,
            "ttft_s_p90": flat["ttft_s_p90"],
            "tpot_s_p90": flat["tpot_s_p90"],
            "good_fraction": flat["good_fraction"],
            "keeps_up": bool(keeps_up),
            "within_targets": bool(
                keeps_up
                and flat["ttft_s_p90"] <= slo["ttft_s"]
                and flat["tpot_s_p90"] <= slo["tpot_s"]
            ),
        }
    return pd.DataFrame(rows).T.infer_objects().sort_values("offered_rps")


def sweep_verdict(table: pd.DataFrame) -> dict[str, float | bool]:
    """From ``load_sweep``'s table: ``max_good_offered_rps`` (the highest offered load served
    within the targets; NaN if none), ``capacity_rps`` (the highest served rate, requests/s) and
    ``saturated`` (some load was not kept up with). Only when ``saturated`` is ``capacity_rps``
    the capacity; otherwise it is a lower bound: the sweep never pushed past it.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    good = table[table["within_targets"].astype(bool)]
    return {
        "max_good_offered_rps": float(good["offered_rps"].max()) if len(good) else math.nan,
        "capacity_rps": float(table["served_rps"].max()),
        "saturated": bool((~table["keeps_up"].astype(bool)).any()),
    }
