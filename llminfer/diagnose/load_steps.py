"""Chapter 7's load-side steps: is there enough data, did requests fail, does the server hold
its load?

Five of the seven steps, each a function of ``Observations`` returning one ``Finding``:
workload (1), failures (2), memory — a full KV cache (3), queueing — waiting as most of TTFT,
from overload or head-of-line blocking (4), and saturation — arrivals outrunning completions
(7). Their thresholds live in ``llminfer.diagnose.procedure``; ``llminfer.diagnose`` runs them in
order.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from llminfer.diagnose.errors import error_line, stale_connection
from llminfer.diagnose.findings import Finding
from llminfer.diagnose.observations import Observations, finite_percentile
from llminfer.diagnose.procedure import (
    KV_FULL_SHARE,
    LONG_PROMPT_SPREAD,
    MAX_FAILED_FRACTION,
    MAX_PREEMPTED_FRACTION,
    MIN_FAILURE_REQUESTS,
    MIN_REQUESTS,
    SERVED_SHARE,
    STAGE_SHARE,
)
from llminfer.diagnose.signals import rank_correlation, tokens_in_flight_peak
from llminfer.language import _, get_language
from llminfer.sim.engines import EngineConfig, kv_capacity_blocks


def workload_step(obs: Observations) -> Finding:
    """Step 1, workload: is there enough data? ``ok`` with the log's size, offered rate
    (requests/s) and median prompt/answer (tokens), ``cant_tell`` below ``MIN_REQUESTS``
    successful requests.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    m = obs.m
    start = m["start_ts"].to_numpy(float)
    span = float(np.nanmax(start) - np.nanmin(start)) if len(m) > 1 else 0.0
    evidence: dict[str, Any] = {
        "requests": len(m),
        "succeeded": obs.n_ok,
        "offered_rps": (len(m) - 1) / span if span > 0 else float("inf"),
        "input_tokens_p50": obs.percentile(obs.prompts, 50),
        "output_tokens_p50": finite_percentile(obs.good["output_tokens"].to_numpy(float), 50),
    }
    if obs.n_ok >= 3 and not obs.windows.empty:
        evidence["windows"] = len(obs.windows)
    if obs.n_ok < MIN_REQUESTS:
        return Finding(
            "workload",
            "cant_tell",
            evidence,
            _("only {n} successful requests of {total}: p90 needs at least {need}").format(
                n=obs.n_ok, total=len(m), need=MIN_REQUESTS
            ),
            missing=(_("at least {need} successful requests").format(need=MIN_REQUESTS),),
            samples=obs.n_ok,
            min_requests=MIN_REQUESTS,
        )
    return Finding(
        "workload",
        "ok",
        evidence,
        _("{n} successful requests: enough to read p90").format(n=obs.n_ok),
        samples=obs.n_ok,
        min_requests=MIN_REQUESTS,
    )


def failures_step(obs: Observations) -> Finding:
    """Step 2, failures: did more than ``MAX_FAILED_FRACTION`` of the requests fail
    (cause ``failures``, naming the most common error)?

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    total = len(obs.m)
    failed = total - obs.n_ok
    fraction = failed / total
    evidence = {"failed": failed, "failed_fraction": fraction}
    if total < MIN_FAILURE_REQUESTS:
        return Finding(
            "failures",
            "cant_tell",
            evidence,
            _("only {total} requests; a failure rate needs at least {need}").format(
                total=total, need=MIN_FAILURE_REQUESTS
            ),
            missing=(_("at least {need} requests").format(need=MIN_FAILURE_REQUESTS),),
            samples=total,
            min_requests=MIN_FAILURE_REQUESTS,
        )
    if fraction > MAX_FAILED_FRACTION:
        errors = obs.log.requests.get("error")
        top = ""
        if errors is not None:
            lines = errors[~obs.ok].map(error_line).replace("", _("(no message)"))
            common = lines.value_counts().index[0]
            top = _("; most common error: {error}").format(error=repr(common))
            if stale_connection(common):
                top += _(
                    " — the client sent on a connection the server had already closed (as "
                    "llama-server does after each streamed reply while saying Keep-Alive): a "
                    "failure of the client, not the server; measure with a client that retries "
                    "on a new connection (llminfer bench) or without keep-alive"
                )
        return Finding(
            "failures",
            "problem",
            evidence,
            _(
                "{fraction:.1%} of requests failed: latency statistics describe only the "
                "survivors — read the errors (timeouts, out-of-memory, too long) first{top}"
            ).format(fraction=fraction, top=top),
            cause="failures",
            samples=total,
            min_requests=MIN_FAILURE_REQUESTS,
        )
    return Finding(
        "failures",
        "ok",
        evidence,
        _("{failed} failed ({fraction:.1%})").format(failed=failed, fraction=fraction),
        samples=total,
        min_requests=MIN_FAILURE_REQUESTS,
    )


def memory_step(obs: Observations) -> Finding:
    """Step 3, memory: is the KV cache full while a target is missed (cause
    ``kv_pressure``)? Reads preemptions (log column or ``/metrics``), the server's KV usage
    and, with a known deployment, peak tokens in flight against the KV capacity (tokens).

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    if obs.n_ok < MIN_REQUESTS:
        return obs.too_few("memory", MIN_REQUESTS)
    evidence: dict[str, Any] = {}
    signs = []
    requests = obs.log.requests
    if "preemptions" in requests:
        counts = pd.to_numeric(requests["preemptions"], errors="coerce").fillna(0).to_numpy()
        evidence["preemptions"] = int(counts.sum())
        evidence["preempted_fraction"] = float((counts > 0).mean())
        if evidence["preempted_fraction"] > MAX_PREEMPTED_FRACTION:
            signs.append(
                _(
                    "{preemptions} preemptions hit {fraction:.0%} of requests (evicted and "
                    "recomputed)"
                ).format(
                    preemptions=evidence["preemptions"], fraction=evidence["preempted_fraction"]
                )
            )
    if obs.server is not None:
        evidence.update(obs.server.as_dict())
        s = obs.server
        if s.preemptions:
            signs.append(
                _("the server counted {preemptions:.0f} preemptions").format(
                    preemptions=s.preemptions
                )
            )
        if s.kv_usage is not None and s.kv_usage >= KV_FULL_SHARE and (s.waiting or 0) > 0:
            signs.append(
                _(
                    "the server's KV cache was {usage:.0%} full with {waiting:.0f} requests waiting"
                ).format(usage=s.kv_usage, waiting=s.waiting)
            )
    if obs.deployment_known:
        engine = obs.engine if obs.engine is not None else EngineConfig()
        try:  # the same capacity the simulator gives the engine (chapter 4's plan)
            blocks = kv_capacity_blocks(
                obs.model, obs.gpu, engine, obs.n_gpus, obs.weight_dtype, obs.kv_dtype
            )
        except ValueError as exc:  # not even one block: the weights leave no room
            detail = str(exc)  # the simulator's own words, in English
            if get_language() != "en":
                detail = _(
                    "the weights leave no room for even one KV block: {model} on {n_gpus} × "
                    "{gpu} ({dtype} weights); use more GPUs or a narrower weight dtype"
                ).format(
                    model=obs.model.name,
                    n_gpus=obs.n_gpus,
                    gpu=obs.gpu.name,
                    dtype=obs.weight_dtype,
                )
            return Finding(
                "memory",
                "problem",
                evidence,
                detail,
                cause="kv_pressure",
                suggestions=obs.suggestions("kv_pressure"),
                samples=obs.n_ok,
                min_requests=MIN_REQUESTS,
            )
        capacity = blocks * engine.block_size
        peak = tokens_in_flight_peak(obs.m, obs.ok)
        evidence["kv_capacity_tokens"] = capacity
        evidence["peak_tokens_in_flight"] = round(peak)
        evidence["peak_share_of_capacity"] = peak / capacity
        if peak / capacity >= KV_FULL_SHARE:
            signs.append(
                _("tokens in flight reach {share:.0%} of the KV capacity").format(
                    share=peak / capacity
                )
            )
    common = {"samples": obs.n_ok, "min_requests": MIN_REQUESTS}
    if signs and obs.missed:
        return Finding(
            "memory",
            "problem",
            evidence,
            _("the KV cache is full: {signs}").format(signs=_("; ").join(signs)),
            cause="kv_pressure",
            suggestions=obs.suggestions("kv_pressure"),
            **common,
        )
    if signs:
        return Finding(
            "memory",
            "ok",
            evidence,
            _("the targets are met, but {signs}").format(signs=_("; ").join(signs)),
            **common,
        )
    if not evidence:
        return Finding(
            "memory",
            "cant_tell",
            evidence,
            _("no preemption count, no server scrape and no deployment: memory cannot be checked"),
            missing=(_("preemptions column or a /metrics scrape"), _("model and gpu")),
            **common,
        )
    return Finding("memory", "ok", evidence, _("the KV cache holds the load"), **common)


def queueing_step(obs: Observations) -> Finding:
    """Step 4, queueing: is waiting (s) most of the slow requests' TTFT? Cause
    ``overload`` when a window's queue grows, ``head_of_line`` when the server keeps up but
    long prompts (≥ ``LONG_PROMPT_SPREAD``× the median) sit ahead of the slow requests.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    if obs.n_ok < MIN_REQUESTS:
        return obs.too_few("queueing", MIN_REQUESTS)
    target = obs.slo["ttft_s"]
    evidence: dict[str, Any] = {"ttft_p90_s": obs.ttft_p90, "ttft_target_s": target}
    common = {"samples": obs.n_ok, "min_requests": MIN_REQUESTS}
    over = obs.overloaded_windows()
    if obs.queue is not None:
        wait = obs.queue
        how = _("measured: scheduled_ts")
    elif obs.own is not None:
        wait = np.maximum(obs.ttft - obs.own, 0.0)
        how = _("estimated: TTFT less the prefill of requests that arrived to an empty queue")
    else:
        wait = None
        how = ""
    if wait is not None:
        evidence["stage_p90_s"] = finite_percentile(wait, 90)
        evidence["share_of_slow_requests"] = obs.slow_share(wait)
    if not over.empty:
        first = over.iloc[0]
        evidence.update(
            {
                "window": f"{first['window']} ({first['from_s']:.0f}–{first['to_s']:.0f} s)",
                "window_arrival_rps": first["arrival_rps"],
                "window_served_rps": first["served_rps"],
                "window_waiting_start": first["waiting_start"],
                "window_waiting_end": first["waiting_end"],
                "window_ttft_p90_s": first["ttft_p90_s"],
            }
        )
    if "ttft" not in obs.missed:
        text = _("TTFT p90 {p90:.3g} s meets its {target:g} s target").format(
            p90=obs.ttft_p90, target=target
        )
        if wait is not None and evidence["stage_p90_s"] > STAGE_SHARE * target:
            text += _(", though waiting already takes {wait:.3g} s (p90)").format(
                wait=evidence["stage_p90_s"]
            )
        return Finding("queueing", "ok", evidence, text, **common)
    if obs.lockstep is not None:
        return _lockstep(obs, evidence, common)
    if obs.slot_limited and (wait is None or evidence["share_of_slow_requests"] > STAGE_SHARE):
        return _overload_queue(obs, evidence, common, _("({how})").format(how=how) if how else "")
    if wait is None:
        if not over.empty:
            how = _("(no scheduled_ts: inferred from the waiting count)")
            return _overload_queue(obs, evidence, common, how)
        return Finding(
            "queueing",
            "cant_tell",
            evidence,
            _(
                "TTFT p90 {p90:.3g} s misses its {target:g} s target, but without "
                "scheduled_ts, and with too few requests arriving to an empty queue, waiting "
                "cannot be told from prefill"
            ).format(p90=obs.ttft_p90, target=target),
            missing=("scheduled_ts",),
            **common,
        )
    if evidence["share_of_slow_requests"] <= STAGE_SHARE:
        return Finding(
            "queueing",
            "ok",
            evidence,
            _(
                "TTFT misses its target, but waiting ({how}) is most of the TTFT of only "
                "{share:.0%} of the slow requests"
            ).format(how=how, share=evidence["share_of_slow_requests"]),
            **common,
        )
    slow = obs.ttft > target
    count, tokens = obs.ahead_count[slow], obs.ahead_tokens[slow]
    ahead_mean = float(tokens.sum() / count.sum()) if count.sum() > 0 else float("nan")
    median = max(obs.percentile(obs.prompts, 50), 1.0)
    spread = ahead_mean / median
    evidence.update(
        {
            "rho_wait_prompt_tokens_ahead": rank_correlation(obs.ahead_tokens, wait),
            "prompt_ahead_of_slow_mean_tokens": ahead_mean,
            "prompt_p50_tokens": median,
        }
    )
    served, offered = obs.rates()
    if over.empty and served >= SERVED_SHARE * offered and spread >= LONG_PROMPT_SPREAD:
        return Finding(
            "queueing",
            "problem",
            evidence,
            _(
                "TTFT p90 {p90:.3g} s misses its {target:g} s target and waiting ({how}) "
                "is most of the TTFT of {share:.0%} of the slow requests; the server keeps up "
                "on average, and the prompts ahead of the slow requests average "
                "{ahead:,.0f} tokens, {spread:.0f}× the median prompt: head-of-line blocking by "
                "long prompts"
            ).format(
                p90=obs.ttft_p90,
                target=target,
                how=how,
                share=evidence["share_of_slow_requests"],
                ahead=ahead_mean,
                spread=spread,
            ),
            cause="head_of_line",
            suggestions=obs.suggestions("head_of_line"),
            **common,
        )
    return _overload_queue(obs, evidence, common, _("({how})").format(how=how))


def _lockstep(obs: Observations, evidence: dict, common: dict) -> Finding:
    lock = obs.lockstep
    evidence.update(lock)
    target = obs.slo["ttft_s"]
    return Finding(
        "queueing",
        "problem",
        evidence,
        _(
            "TTFT p90 {p90:.3g} s misses its {target:g} s target, but no request waited "
            "for a slot: at most {in_flight} requests were in flight on {slots} slots. "
            "Requests sent together wait for each other's prefill (lockstep, as a closed "
            "loop's users in step): TTFT p50 {p50:.3g} s is {times:.1f}× one prefill alone "
            "({single:.3g} s) — not overload"
        ).format(
            p90=obs.ttft_p90,
            target=target,
            in_flight=lock["in_flight_peak"],
            slots=lock["slots"],
            p50=lock["ttft_p50_s"],
            times=lock["ttft_p50_in_single_prefills"],
            single=lock["single_prefill_s"],
        ),
        cause="lockstep_prefill",
        suggestions=obs.suggestions("lockstep_prefill"),
        **common,
    )


def _overload_queue(obs: Observations, evidence: dict, common: dict, how: str) -> Finding:
    target = obs.slo["ttft_s"]
    if obs.slot_limited:
        evidence.update({"in_flight_peak": obs.in_flight_peak, "slots": obs.slots})
        return Finding(
            "queueing",
            "problem",
            evidence,
            # TRANSLATORS: {how} is how waiting was measured, in parentheses.
            (
                _(
                    "TTFT p90 {p90:.3g} s misses its {target:g} s target: up to "
                    "{in_flight} requests were in flight on {slots} slots, so the rest "
                    "waited for a free slot {how}: a slot queue"
                )
                if how
                else _(
                    "TTFT p90 {p90:.3g} s misses its {target:g} s target: up to "
                    "{in_flight} requests were in flight on {slots} slots, so the rest "
                    "waited for a free slot: a slot queue"
                )
            ).format(
                p90=obs.ttft_p90,
                target=target,
                in_flight=obs.in_flight_peak,
                slots=obs.slots,
                how=how,
            ),
            cause="slot_queue",
            suggestions=obs.suggestions("slot_queue"),
            **common,
        )
    where = (
        _(
            "in window {window} requests arrive at {arrivals:.3g}/s, more than are served: "
            "the queue grows from {start:.0f} to {end:.0f} waiting and TTFT p90 reaches "
            "{p90:.3g} s"
        ).format(
            window=evidence["window"],
            arrivals=evidence["window_arrival_rps"],
            start=evidence["window_waiting_start"],
            end=evidence["window_waiting_end"],
            p90=evidence["window_ttft_p90_s"],
        )
        if "window" in evidence
        else _(
            "requests wait for a slot although no window shows a growing queue: bursts of "
            "arrivals or a scheduler cap (max_num_seqs)"
        )
    )
    return Finding(
        "queueing",
        "problem",
        evidence,
        # TRANSLATORS: {how} is how waiting was measured, in parentheses; {where} what shows
        # the overload.
        _(
            "TTFT p90 {p90:.3g} s misses its {target:g} s target and waiting {how} is "
            "most of it: {where}"
        ).format(p90=obs.ttft_p90, target=target, how=how, where=where),
        cause="overload",
        suggestions=obs.suggestions("overload", "ttft"),
        **common,
    )


def saturation_step(obs: Observations) -> Finding:
    """Step 7, saturation: do completions keep up with arrivals (requests/s), per
    time window and overall (cause ``overload`` when a window's queue grows while TTFT misses,
    or fewer than ``SERVED_SHARE`` of the offered requests/s are served)?

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    if obs.n_ok < MIN_REQUESTS:
        return obs.too_few("saturation", MIN_REQUESTS)
    common = {"samples": obs.n_ok, "min_requests": MIN_REQUESTS}
    served, offered = obs.rates()
    evidence: dict[str, Any] = {"offered_rps": offered, "served_rps": served}
    if not math.isfinite(offered):
        return Finding(
            "saturation",
            "cant_tell",
            evidence,
            _(
                "all requests arrived at once (a batch, or a closed loop logged without arrival "
                "times): arrivals say nothing about capacity; sweep the load instead (chapter 3)"
            ),
            missing=(_("arrivals spread over time"),),
            **common,
        )
    if obs.lockstep is not None:
        evidence.update(obs.lockstep)
        return Finding(
            "saturation",
            "ok",
            evidence,
            _(
                "no more requests in flight ({in_flight}) than slots ({slots}): "
                "arrivals follow completions (a closed loop), nothing queues for a slot"
            ).format(in_flight=obs.in_flight_peak, slots=obs.slots),
            **common,
        )
    over = obs.overloaded_windows()
    if not over.empty:
        first, last = over.iloc[0], over.iloc[-1]
        names = first["window"] if len(over) == 1 else f"{first['window']}–{last['window']}"
        evidence.update(
            {
                "window": f"{names} ({first['from_s']:.0f}–{last['to_s']:.0f} s)",
                "window_arrival_rps": float(over["arrival_rps"].max()),
                "window_served_rps": float(over["served_rps"].min()),
                "window_ttft_p90_s": float(over["ttft_p90_s"].max()),
            }
        )
        return Finding(
            "saturation",
            "problem",
            evidence,
            _(
                "in window {window} requests arrive at up to {arrivals:.3g}/s while "
                "{served:.3g}/s complete: the queue grows and TTFT p90 reaches {p90:.3g} s"
            ).format(
                window=evidence["window"],
                arrivals=evidence["window_arrival_rps"],
                served=evidence["window_served_rps"],
                p90=evidence["window_ttft_p90_s"],
            ),
            cause="overload",
            suggestions=obs.suggestions("overload", "ttft"),
            **common,
        )
    if served < SERVED_SHARE * offered and "ttft" in obs.missed:
        return Finding(
            "saturation",
            "problem",
            evidence,
            _(
                "the server completes {served:.3g} requests/s but {offered:.3g} arrive: the queue "
                "grows for as long as the load lasts"
            ).format(served=served, offered=offered),
            cause="overload",
            suggestions=obs.suggestions("overload", "ttft"),
            **common,
        )
    return Finding(
        "saturation",
        "ok",
        evidence,
        _("the server keeps up with the arrivals in every window"),
        **common,
    )
