"""Chapter 7's troubleshooting order, as code: read a request log and name the bottleneck.

``diagnose(log, ...)`` walks the procedure of notebooks/07_troubleshooting.ipynb step by step —
workload, failures, memory, queueing, prefill, decode, saturation — and returns a ``Diagnosis``:
one ``Finding`` per step (``"ok"``, ``"problem"`` with a cause from ``findings.CAUSES``, or
``"cant_tell"`` naming what is missing), an overall ``verdict`` (``"ok"``, ``"problem"``,
``"not_enough_data"``), the primary ``cause`` and suggestions that fit the deployment.

The signals (``llminfer.signals``) are measured per request and over time windows:

- *decoding together*: requests between first token and end during a request's decode (the
  batch its decode steps ran at), not requests in flight, which counts queued ones too;
- *waiting*: requests between arrival and ``scheduled_ts`` (or first token), and the work
  ahead of each request when it arrived (requests and their prompt tokens);
- *windows*: the run cut in up to 10 windows of arrival time, so a ramp's overloaded tail, a
  burst or a warm-up is found, and named, rather than averaged away.

Every threshold is a module constant, so a reader can see (and change) it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from llminfer.findings import CAUSES, CHAPTER, QUESTION, STEPS, Diagnosis, Finding
from llminfer.hardware import GPU
from llminfer.latency import estimate_latency
from llminfer.logs import RequestLog
from llminfer.metrics import request_metrics
from llminfer.models import Model
from llminfer.scrape import ServerMetrics, combine
from llminfer.signals import (
    decoding_together,
    overlapping_prefill_tokens,
    rank_correlation,
    time_windows,
    tokens_in_flight_peak,
    work_ahead,
)
from llminfer.simulate import EngineConfig, kv_capacity_blocks
from llminfer.suggestions import Setup, suggest

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
#: Requests with fewer requests ahead of them than this count as having arrived to no queue.
ALONE_MIN = 10


def _p(values: np.ndarray, q: float) -> float:
    values = np.asarray(values, float)
    values = values[np.isfinite(values)]
    return float(np.percentile(values, q)) if values.size else float("nan")


@dataclass
class _Run:
    """Everything the steps share: the log's metrics and signals, targets and deployment."""

    log: RequestLog
    m: pd.DataFrame
    ok: np.ndarray
    slo: dict[str, float]
    model: Model | None
    gpu: GPU | None
    engine: EngineConfig | None
    n_gpus: int
    replicas: int
    weight_dtype: str
    kv_dtype: str
    server: ServerMetrics | None

    def __post_init__(self) -> None:
        m, ok = self.m, self.ok
        self.good = m[ok]
        self.n_ok = int(ok.sum())
        self.ttft = self.good["ttft_s"].to_numpy(float)
        self.tpot = self.good["tpot_s"].to_numpy(float)
        self.prompts = self.good["input_tokens"].to_numpy(float)
        self.ttft_p90 = _p(self.ttft, 90)
        self.tpot_p90 = _p(self.tpot, 90)
        self.missed: dict[str, float] = {}
        if self.ttft_p90 > self.slo["ttft_s"]:
            self.missed["ttft"] = self.ttft_p90
        if self.tpot_p90 > self.slo["tpot_s"]:
            self.missed["tpot"] = self.tpot_p90
        if self.n_ok < 3:
            return
        self.windows = time_windows(m, ok, self.slo)
        self.decoding = decoding_together(m)[ok]
        self.overlap = overlapping_prefill_tokens(self.good)
        ahead_count, ahead_tokens = work_ahead(m)
        self.ahead_count, self.ahead_tokens = ahead_count[ok], ahead_tokens[ok]
        self.queue = self.good["queue_s"].to_numpy(float) if "queue_s" in self.good else None
        self.own = self._own_prefill()

    @property
    def deployment_known(self) -> bool:
        return self.model is not None and self.gpu is not None

    def setup(self) -> Setup:
        return Setup(
            engine=self.engine,
            n_gpus=self.n_gpus,
            replicas=self.replicas,
            weight_dtype=self.weight_dtype,
            kv_dtype=self.kv_dtype,
            tpot_misses="tpot" in self.missed,
            decoding_p50=_p(self.decoding, 50),
        )

    def _own_prefill(self) -> np.ndarray | None:
        """Each request's own prefill time (s): measured with ``scheduled_ts``; else TTFT less
        the wait, modelled from the requests that arrived to an empty queue (TTFT against
        prompt length, a least-squares line); None when too few arrived alone."""
        if self.queue is not None:
            return self.good["prefill_s"].to_numpy(float)
        alone = self.ahead_count < 1
        if alone.sum() < ALONE_MIN:
            return None
        x, y = self.prompts[alone], self.ttft[alone]
        keep = np.isfinite(x) & np.isfinite(y)
        if np.ptp(x[keep]) > 0:
            slope, intercept = np.polyfit(x[keep], y[keep], 1)
            slope = max(slope, 0.0)
        else:
            slope, intercept = 0.0, float(np.median(y[keep]))
        return np.minimum(np.maximum(slope * self.prompts + intercept, 0.0), self.ttft)

    def overloaded_windows(self) -> pd.DataFrame:
        w = self.windows
        if w.empty:
            return w
        return w[w["overloaded"] & (w["ttft_p90_s"] > self.slo["ttft_s"])]

    def suggestions(self, cause: str, detail: str = ""):
        return suggest(cause, self.setup(), detail)


def _too_few(step: str, run: _Run, need: int, what: str = "successful requests") -> Finding:
    return Finding(
        step,
        "cant_tell",
        {},
        f"only {run.n_ok} {what}; this step needs at least {need} (p90 from fewer rests on a "
        "handful of values)",
        missing=(f"at least {need} {what}",),
        samples=run.n_ok,
        min_requests=need,
    )


def _workload(run: _Run) -> Finding:
    m = run.m
    start = m["start_ts"].to_numpy(float)
    span = float(np.nanmax(start) - np.nanmin(start)) if len(m) > 1 else 0.0
    evidence: dict[str, Any] = {
        "requests": len(m),
        "succeeded": run.n_ok,
        "offered_rps": (len(m) - 1) / span if span > 0 else float("inf"),
        "input_tokens_p50": _p(run.prompts, 50),
        "output_tokens_p50": _p(run.good["output_tokens"].to_numpy(float), 50),
    }
    if run.n_ok >= 3 and not run.windows.empty:
        evidence["windows"] = len(run.windows)
    if run.n_ok < MIN_REQUESTS:
        return Finding(
            "workload",
            "cant_tell",
            evidence,
            f"only {run.n_ok} successful requests of {len(m)}: p90 needs at least {MIN_REQUESTS}",
            missing=(f"at least {MIN_REQUESTS} successful requests",),
            samples=run.n_ok,
            min_requests=MIN_REQUESTS,
        )
    return Finding(
        "workload",
        "ok",
        evidence,
        f"{run.n_ok} successful requests: enough to read p90",
        samples=run.n_ok,
        min_requests=MIN_REQUESTS,
    )


def _failures(run: _Run) -> Finding:
    total = len(run.m)
    failed = total - run.n_ok
    fraction = failed / total
    evidence = {"failed": failed, "failed_fraction": fraction}
    if total < MIN_FAILURE_REQUESTS:
        return Finding(
            "failures",
            "cant_tell",
            evidence,
            f"only {total} requests; a failure rate needs at least {MIN_FAILURE_REQUESTS}",
            missing=(f"at least {MIN_FAILURE_REQUESTS} requests",),
            samples=total,
            min_requests=MIN_FAILURE_REQUESTS,
        )
    if fraction > MAX_FAILED_FRACTION:
        errors = run.log.requests.get("error")
        top = ""
        if errors is not None:
            counts = errors[~run.ok].fillna("").astype(str).replace("", "(no message)")
            top = "; most common error: " + repr(counts.value_counts().index[0])
        return Finding(
            "failures",
            "problem",
            evidence,
            f"{fraction:.1%} of requests failed: latency statistics describe only the "
            f"survivors — read the errors (timeouts, out-of-memory, too long) first{top}",
            cause="failures",
            samples=total,
            min_requests=MIN_FAILURE_REQUESTS,
        )
    return Finding(
        "failures",
        "ok",
        evidence,
        f"{failed} failed ({fraction:.1%})",
        samples=total,
        min_requests=MIN_FAILURE_REQUESTS,
    )


def _memory(run: _Run) -> Finding:
    if run.n_ok < MIN_REQUESTS:
        return _too_few("memory", run, MIN_REQUESTS)
    evidence: dict[str, Any] = {}
    signs = []
    requests = run.log.requests
    if "preemptions" in requests:
        counts = pd.to_numeric(requests["preemptions"], errors="coerce").fillna(0).to_numpy()
        evidence["preemptions"] = int(counts.sum())
        evidence["preempted_fraction"] = float((counts > 0).mean())
        if evidence["preempted_fraction"] > MAX_PREEMPTED_FRACTION:
            signs.append(
                f"{evidence['preemptions']} preemptions hit "
                f"{evidence['preempted_fraction']:.0%} of requests (evicted and recomputed)"
            )
    if run.server is not None:
        evidence.update(run.server.as_dict())
        s = run.server
        if s.preemptions:
            signs.append(f"the server counted {s.preemptions:.0f} preemptions")
        if s.kv_usage is not None and s.kv_usage >= KV_FULL_SHARE and (s.waiting or 0) > 0:
            signs.append(
                f"the server's KV cache was {s.kv_usage:.0%} full with {s.waiting:.0f} "
                "requests waiting"
            )
    if run.deployment_known:
        engine = run.engine if run.engine is not None else EngineConfig()
        try:  # the same capacity the simulator gives the engine (chapter 4's plan)
            blocks = kv_capacity_blocks(
                run.model, run.gpu, engine, run.n_gpus, run.weight_dtype, run.kv_dtype
            )
        except ValueError as exc:  # not even one block: the weights leave no room
            return Finding(
                "memory",
                "problem",
                evidence,
                str(exc),
                cause="kv_pressure",
                suggestions=run.suggestions("kv_pressure"),
                samples=run.n_ok,
                min_requests=MIN_REQUESTS,
            )
        capacity = blocks * engine.block_size
        peak = tokens_in_flight_peak(run.m, run.ok)
        evidence["kv_capacity_tokens"] = capacity
        evidence["peak_tokens_in_flight"] = round(peak)
        evidence["peak_share_of_capacity"] = peak / capacity
        if peak / capacity >= KV_FULL_SHARE:
            signs.append(f"tokens in flight reach {peak / capacity:.0%} of the KV capacity")
    common = {"samples": run.n_ok, "min_requests": MIN_REQUESTS}
    if signs and run.missed:
        return Finding(
            "memory",
            "problem",
            evidence,
            "the KV cache is full: " + "; ".join(signs),
            cause="kv_pressure",
            suggestions=run.suggestions("kv_pressure"),
            **common,
        )
    if signs:
        return Finding(
            "memory", "ok", evidence, "the targets are met, but " + "; ".join(signs), **common
        )
    if not evidence:
        return Finding(
            "memory",
            "cant_tell",
            evidence,
            "no preemption count, no server scrape and no deployment: memory cannot be checked",
            missing=("preemptions column or a /metrics scrape", "model and gpu"),
            **common,
        )
    return Finding("memory", "ok", evidence, "the KV cache holds the load", **common)


def _queueing(run: _Run) -> Finding:
    if run.n_ok < MIN_REQUESTS:
        return _too_few("queueing", run, MIN_REQUESTS)
    target = run.slo["ttft_s"]
    evidence: dict[str, Any] = {"ttft_p90_s": run.ttft_p90, "ttft_target_s": target}
    common = {"samples": run.n_ok, "min_requests": MIN_REQUESTS}
    over = run.overloaded_windows()
    if run.queue is not None:
        wait = run.queue
        how = "measured: scheduled_ts"
    elif run.own is not None:
        wait = np.maximum(run.ttft - run.own, 0.0)
        how = "estimated: TTFT less the prefill of requests that arrived to an empty queue"
    else:
        wait = None
        how = ""
    if wait is not None:
        evidence["stage_p90_s"] = _p(wait, 90)
        evidence["share_of_slow_requests"] = _slow_share(run, wait)
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
    if "ttft" not in run.missed:
        text = f"TTFT p90 {run.ttft_p90:.3g} s meets its {target:g} s target"
        if wait is not None and evidence["stage_p90_s"] > STAGE_SHARE * target:
            text += f", though waiting already takes {evidence['stage_p90_s']:.3g} s (p90)"
        return Finding("queueing", "ok", evidence, text, **common)
    if wait is None:
        if not over.empty:
            how = "(no scheduled_ts: inferred from the waiting count)"
            return _overload_queue(run, evidence, common, how)
        return Finding(
            "queueing",
            "cant_tell",
            evidence,
            f"TTFT p90 {run.ttft_p90:.3g} s misses its {target:g} s target, but without "
            "scheduled_ts, and with too few requests arriving to an empty queue, waiting "
            "cannot be told from prefill",
            missing=("scheduled_ts",),
            **common,
        )
    if evidence["share_of_slow_requests"] <= STAGE_SHARE:
        return Finding(
            "queueing",
            "ok",
            evidence,
            f"TTFT misses its target, but waiting ({how}) is most of the TTFT of only "
            f"{evidence['share_of_slow_requests']:.0%} of the slow requests",
            **common,
        )
    slow = run.ttft > target
    count, tokens = run.ahead_count[slow], run.ahead_tokens[slow]
    ahead_mean = float(tokens.sum() / count.sum()) if count.sum() > 0 else float("nan")
    median = max(_p(run.prompts, 50), 1.0)
    spread = ahead_mean / median
    evidence.update(
        {
            "rho_wait_prompt_tokens_ahead": rank_correlation(run.ahead_tokens, wait),
            "prompt_ahead_of_slow_mean_tokens": ahead_mean,
            "prompt_p50_tokens": median,
        }
    )
    served, offered = _rates(run)
    if over.empty and served >= SERVED_SHARE * offered and spread >= LONG_PROMPT_SPREAD:
        return Finding(
            "queueing",
            "problem",
            evidence,
            f"TTFT p90 {run.ttft_p90:.3g} s misses its {target:g} s target and waiting ({how}) "
            f"is most of the TTFT of {evidence['share_of_slow_requests']:.0%} of the slow "
            "requests; the server keeps up on average, and the prompts ahead of the slow "
            f"requests average {ahead_mean:,.0f} tokens, {spread:.0f}× the median prompt: "
            "head-of-line blocking by long prompts",
            cause="head_of_line",
            suggestions=run.suggestions("head_of_line"),
            **common,
        )
    return _overload_queue(run, evidence, common, f"({how})")


def _slow_share(run: _Run, stage: np.ndarray) -> float:
    """Of the slow requests (TTFT above the target), the share whose TTFT is mostly ``stage``
    (more than half of it)."""
    slow = (run.ttft > run.slo["ttft_s"]) & np.isfinite(stage)
    return float((stage[slow] > run.ttft[slow] / 2).mean()) if slow.any() else float("nan")


def _rates(run: _Run) -> tuple[float, float]:
    """Served rate over the middle 80 % of completions, and the offered rate (requests/s)."""
    end = np.sort(run.good["end_ts"].to_numpy(float))
    start = run.m["start_ts"].to_numpy(float)
    span = float(np.nanmax(start) - np.nanmin(start))
    offered = (len(run.m) - 1) / span if span > 0 else float("inf")
    lo, hi = int(0.1 * len(end)), int(0.9 * len(end))
    served = (hi - lo) / (end[hi] - end[lo]) if end[hi] > end[lo] else float("inf")
    return served, offered


def _overload_queue(run: _Run, evidence: dict, common: dict, how: str) -> Finding:
    target = run.slo["ttft_s"]
    where = (
        f"in window {evidence['window']} requests arrive at "
        f"{evidence['window_arrival_rps']:.3g}/s, more than are served: the queue grows from "
        f"{evidence['window_waiting_start']:.0f} to "
        f"{evidence['window_waiting_end']:.0f} waiting and TTFT p90 reaches "
        f"{evidence['window_ttft_p90_s']:.3g} s"
        if "window" in evidence
        else "requests wait for a slot although no window shows a growing queue: bursts of "
        "arrivals or a scheduler cap (max_num_seqs)"
    )
    return Finding(
        "queueing",
        "problem",
        evidence,
        f"TTFT p90 {run.ttft_p90:.3g} s misses its {target:g} s target and waiting {how} is "
        f"most of it: {where}",
        cause="overload",
        suggestions=run.suggestions("overload", "ttft"),
        **common,
    )


def _prefill(run: _Run) -> Finding:
    if run.n_ok < MIN_REQUESTS:
        return _too_few("prefill", run, MIN_REQUESTS)
    target = run.slo["ttft_s"]
    common = {"samples": run.n_ok, "min_requests": MIN_REQUESTS}
    evidence: dict[str, Any] = {"ttft_p90_s": run.ttft_p90, "input_tokens_p90": _p(run.prompts, 90)}
    if run.deployment_known:
        estimate = estimate_latency(
            run.model,
            run.gpu,
            max(1, int(min(evidence["input_tokens_p90"], run.model.max_context - 2))),
            2,
            weight_dtype=run.weight_dtype,
            kv_dtype=run.kv_dtype,
            n_gpus=run.n_gpus,
        )
        evidence["estimated_prefill_at_p90_prompt_s"] = estimate.ttft_s
    if run.own is None:
        if "ttft" in run.missed:
            return Finding(
                "prefill",
                "cant_tell",
                evidence,
                "TTFT misses its target; without scheduled_ts (and with too few requests "
                "arriving to an empty queue) the prompts' own prefill cannot be measured",
                missing=("scheduled_ts",),
                **common,
            )
        return Finding("prefill", "ok", evidence, "TTFT meets its target", **common)
    own = run.own
    evidence["stage_p90_s"] = _p(own, 90)
    evidence["share_of_slow_requests"] = _slow_share(run, own)
    own_slow = (run.ttft > target) & (own > run.ttft / 2)
    evidence["slow_own_prompt_p50_tokens"] = _p(run.prompts[own_slow], 50)
    evidence["rho_prefill_prompt"] = rank_correlation(run.prompts, own)
    how = "measured" if run.queue is not None else "estimated from requests that did not wait"
    if "ttft" not in run.missed:
        return Finding(
            "prefill",
            "ok",
            evidence,
            f"TTFT meets its target; own prefill p90 {evidence['stage_p90_s']:.3g} s",
            **common,
        )
    if evidence["share_of_slow_requests"] > STAGE_SHARE:
        return Finding(
            "prefill",
            "problem",
            evidence,
            f"TTFT p90 {run.ttft_p90:.3g} s misses its {target:g} s target and the prompts' "
            f"own prefill ({how}) is most of the TTFT of "
            f"{evidence['share_of_slow_requests']:.0%} of the slow requests, whose prompts "
            f"have {evidence['slow_own_prompt_p50_tokens']:,.0f} tokens (median): even with no "
            "queue this GPU cannot prefill them within the target",
            cause="too_slow",
            suggestions=run.suggestions("too_slow", "ttft"),
            **common,
        )
    return Finding(
        "prefill", "ok", evidence, "prefill is not what makes TTFT miss its target", **common
    )


def _fit_tpot(tpot: np.ndarray, decoding: np.ndarray, overlap: np.ndarray) -> tuple[float, ...]:
    """TPOT ≈ a + b·decoding + c·overlap by least squares with b, c ≥ 0 (a coefficient that
    comes out negative is dropped and the rest refitted)."""
    keep = np.isfinite(tpot) & np.isfinite(decoding) & np.isfinite(overlap)
    y = tpot[keep]
    columns = {"b": decoding[keep], "c": overlap[keep]}
    active = [k for k, v in columns.items() if np.ptp(v) > 0]
    while True:
        x = np.column_stack([np.ones(y.size)] + [columns[k] for k in active])
        coef = np.linalg.lstsq(x, y, rcond=None)[0]
        fitted = dict(zip(active, coef[1:], strict=True))
        negative = [k for k in active if fitted[k] < 0]
        if not negative:
            return coef[0], fitted.get("b", 0.0), fitted.get("c", 0.0)
        active = [k for k in active if k not in negative]


def _decode(run: _Run) -> Finding:
    tpot_ok = np.isfinite(run.tpot)
    if tpot_ok.sum() < MIN_REQUESTS:
        return _too_few("decode", run, MIN_REQUESTS, "successful requests with a TPOT")
    common = {"samples": int(tpot_ok.sum()), "min_requests": MIN_REQUESTS}
    target = run.slo["tpot_s"]
    d, p, tpot = run.decoding, run.overlap, run.tpot
    # Low load: the requests that decoded in the smallest batches and saw few prefills.
    quiet = (d <= max(_p(d, 10), 1.0) * 1.01) & (p <= _p(p, 50))
    if quiet.sum() < 5:
        quiet = d <= _p(d, 10) * 1.01
    evidence: dict[str, Any] = {
        "tpot_p90_s": run.tpot_p90,
        "tpot_target_s": target,
        "decoding_together_p50": _p(d, 50),
        "low_load_tpot_s": _p(tpot[quiet], 50),
        "low_load_decoding": _p(d[quiet], 50),
    }
    if run.deployment_known:
        context = int(_p(run.prompts, 50) + 1)
        outputs = max(2, int(_p(run.good["output_tokens"].to_numpy(float), 50)))
        batch = max(1, round(evidence["low_load_decoding"]))
        floor = estimate_latency(
            run.model,
            run.gpu,
            min(context, run.model.max_context - outputs),
            outputs,
            batch=batch,
            weight_dtype=run.weight_dtype,
            kv_dtype=run.kv_dtype,
            n_gpus=run.n_gpus,
        ).ideal.tpot_s
        evidence["tpot_floor_s"] = floor
        evidence["low_load_tpot_over_floor"] = evidence["low_load_tpot_s"] / floor
    if "tpot" not in run.missed:
        return Finding(
            "decode",
            "ok",
            evidence,
            f"TPOT p90 {run.tpot_p90 * 1e3:.3g} ms meets its {target * 1e3:g} ms target",
            **common,
        )
    if evidence["low_load_tpot_s"] > target:
        vs_floor = ""
        if "low_load_tpot_over_floor" in evidence:
            ratio = evidence["low_load_tpot_over_floor"]
            vs_floor = f"; that is {ratio:.1f}× the bandwidth floor — " + (
                "the hardware limit"
                if ratio <= FLOOR_MULTIPLE
                else "the engine is far from the floor (kernels, CUDA graphs, precision)"
            )
        return Finding(
            "decode",
            "problem",
            evidence,
            f"TPOT misses its {target * 1e3:g} ms target even at low load: "
            f"{evidence['low_load_tpot_s'] * 1e3:.3g} ms with "
            f"{evidence['low_load_decoding']:.1f} requests decoding together{vs_floor}",
            cause="too_slow",
            suggestions=run.suggestions("too_slow", "tpot"),
            **common,
        )
    _, b, c = _fit_tpot(tpot, d, p)
    slow = tpot > target
    # What sets the slow requests apart from the median request: a bigger batch, or more
    # prefill work during their decode? Load raises both for everyone; interference is prefill
    # work concentrated on the slow requests (they overlapped long prompts, others did not).
    from_batch = b * max(_p(d[slow], 50) - _p(d, 50), 0.0)
    from_prefill = c * max(_p(p[slow], 50) - _p(p, 50), 0.0)
    concentrated = _p(p[slow], 50) >= PREFILL_CONCENTRATION * max(_p(p, 50), 1.0)
    evidence.update(
        {
            "slow_decoding_together_p50": _p(d[slow], 50),
            "slow_prefill_overlap_tokens_per_s": _p(p[slow], 50),
            "tpot_from_batch_s": from_batch,
            "tpot_from_overlapping_prefills_s": from_prefill,
        }
    )
    if from_prefill > from_batch and concentrated:
        return Finding(
            "decode",
            "problem",
            evidence,
            f"TPOT p90 {run.tpot_p90 * 1e3:.3g} ms misses its {target * 1e3:g} ms target "
            "because other requests' prefills run during the slow requests' decode: "
            f"{evidence['slow_prefill_overlap_tokens_per_s']:,.0f} prompt tokens/s against "
            f"{_p(p, 50):,.0f} for the median request, adding ≈ {from_prefill * 1e3:.3g} ms per "
            f"token (a bigger batch ≈ {from_batch * 1e3:.3g} ms) — long prefills stall the "
            "decode steps they share",
            cause="interference",
            suggestions=run.suggestions("interference"),
            **common,
        )
    reason = (
        f"the slow requests decoded {evidence['slow_decoding_together_p50']:.0f} together "
        f"(the quietest {evidence['low_load_decoding']:.1f}) and every decode shares its steps "
        f"with the prompts that keep arriving ({_p(p, 50):,.0f} prompt tokens/s at the median)"
    )
    return Finding(
        "decode",
        "problem",
        evidence,
        f"TPOT p90 {run.tpot_p90 * 1e3:.3g} ms misses its {target * 1e3:g} ms target under "
        f"load but not at low load: {reason} — more load than one replica serves within the "
        "TPOT target",
        cause="overload",
        suggestions=run.suggestions("overload", "tpot"),
        **common,
    )


def _saturation(run: _Run) -> Finding:
    if run.n_ok < MIN_REQUESTS:
        return _too_few("saturation", run, MIN_REQUESTS)
    common = {"samples": run.n_ok, "min_requests": MIN_REQUESTS}
    served, offered = _rates(run)
    evidence: dict[str, Any] = {"offered_rps": offered, "served_rps": served}
    if not math.isfinite(offered):
        return Finding(
            "saturation",
            "cant_tell",
            evidence,
            "all requests arrived at once (a batch, or a closed loop logged without arrival "
            "times): arrivals say nothing about capacity; sweep the load instead (chapter 3)",
            missing=("arrivals spread over time",),
            **common,
        )
    over = run.overloaded_windows()
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
            f"in window {evidence['window']} requests arrive at up to "
            f"{evidence['window_arrival_rps']:.3g}/s while {evidence['window_served_rps']:.3g}/s "
            f"complete: the queue grows and TTFT p90 reaches "
            f"{evidence['window_ttft_p90_s']:.3g} s",
            cause="overload",
            suggestions=run.suggestions("overload", "ttft"),
            **common,
        )
    if served < SERVED_SHARE * offered and "ttft" in run.missed:
        return Finding(
            "saturation",
            "problem",
            evidence,
            f"the server completes {served:.3g} requests/s but {offered:.3g} arrive: the queue "
            "grows for as long as the load lasts",
            cause="overload",
            suggestions=run.suggestions("overload", "ttft"),
            **common,
        )
    return Finding(
        "saturation",
        "ok",
        evidence,
        "the server keeps up with the arrivals in every window",
        **common,
    )


def diagnose(
    log: RequestLog | pd.DataFrame,
    model: Model | None = None,
    gpu: GPU | None = None,
    engine: EngineConfig | None = None,
    slo: dict[str, float] | None = None,
    n_gpus: int = 1,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    replicas: int = 1,
    server: ServerMetrics | Sequence[ServerMetrics] | None = None,
) -> Diagnosis:
    """Run chapter 7's troubleshooting procedure on a request log.

    - ``model``/``gpu`` (with ``n_gpus`` = tensor parallelism, dtypes) let the memory, prefill
      and decode steps compare the log with chapters 2 and 4.
    - ``engine``: the serving engine's settings (``EngineConfig``: chunked prefill, chunk size
      ``max_num_batched_tokens``, ``max_num_seqs``, ``gpu_memory_utilization``, ...) and
      ``replicas``; suggestions never propose what is already on. None = unknown.
    - ``slo`` maps ``ttft_s``/``tpot_s`` to p90 targets in seconds (default ``DEFAULT_SLO``).
    - ``server``: one or more ``llminfer.scrape.read_scrape`` results (vLLM ``/metrics``).

    Returns a ``Diagnosis`` (``verdict``, ``cause``, ``headline``, one finding per ``STEPS``).

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    if not isinstance(log, RequestLog):
        from llminfer.logs import read_requests

        log = read_requests(log)
    if model is not None and not isinstance(model, Model):
        raise ValueError(f"model={model!r} must be a Model (see llminfer.get_model)")
    if gpu is not None and not isinstance(gpu, GPU):
        raise ValueError(f"gpu={gpu!r} must be a GPU (see llminfer.get_gpu)")
    if engine is not None and not isinstance(engine, EngineConfig):
        raise ValueError(f"engine={engine!r} must be an llminfer.simulate.EngineConfig")
    for name, value in (("n_gpus", n_gpus), ("replicas", replicas)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name}={value!r} must be a whole number ≥ 1")
    if server is not None and not isinstance(server, ServerMetrics):
        server = combine(server)
    targets = dict(DEFAULT_SLO)
    for key, value in (slo or {}).items():
        if key not in ("ttft_s", "tpot_s", "e2e_s"):
            raise ValueError(f"slo key {key!r} must be one of ttft_s, tpot_s, e2e_s")
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not value > 0
            or not math.isfinite(value)
        ):
            raise ValueError(f"slo[{key!r}]={value!r} must be a positive number of seconds")
        targets[key] = float(value)
    if len(log.requests) == 0:
        raise ValueError("log holds no requests")

    m = request_metrics(log)
    ok = (m["status"] == "ok").to_numpy() & np.isfinite(m["ttft_s"].to_numpy(float))
    run = _Run(
        log, m, ok, targets, model, gpu, engine, int(n_gpus), int(replicas), weight_dtype,
        kv_dtype, server,
    )  # fmt: skip
    if run.n_ok < 3:
        run.windows = pd.DataFrame()
    findings = [_workload(run), _failures(run)]
    if run.n_ok < 3:
        findings += [_too_few(step, run, MIN_REQUESTS) for step in STEPS[2:]]
    else:
        findings += [_memory(run), _queueing(run), _prefill(run), _decode(run), _saturation(run)]
    notes = []
    if not run.deployment_known:
        notes.append("(pass model= and gpu= to compare with the memory budget and the floors)")
    if engine is None:
        notes.append("(engine settings unknown: suggestions that depend on them say 'if')")
    return Diagnosis(findings, targets, notes, missed=dict(run.missed))


def procedure_table() -> pd.DataFrame:
    """The troubleshooting order as a table: per step, the question, what is measured, the
    rule (with the thresholds this module uses), the least number of requests it needs and
    the chapter that explains it.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    stage = (
        f"TTFT p90 misses the target and the stage is most of the TTFT of > {STAGE_SHARE:.0%} "
        "of the slow requests"
    )
    rows = {
        "workload": (
            "successful requests, prompt/answer lengths, offered rate, time windows",
            f"at least {MIN_REQUESTS} successful requests, else not enough data",
            MIN_REQUESTS,
        ),
        "failures": (
            "failed / all requests",
            f"failures above {MAX_FAILED_FRACTION:.0%}",
            MIN_FAILURE_REQUESTS,
        ),
        "memory": (
            "preemptions (log or /metrics); server KV usage; peak tokens in flight vs KV "
            "capacity (chapter 4's plan)",
            f"kv_pressure if a target is missed and > {MAX_PREEMPTED_FRACTION:.0%} of requests "
            f"were preempted, or the cache is ≥ {KV_FULL_SHARE:.0%} full",
            MIN_REQUESTS,
        ),
        "queueing": (
            "waiting = scheduled − arrival (or TTFT − own prefill); work ahead at arrival; "
            "queue growth per window",
            f"if {stage}: overload when a window's queue grows (arrivals > service rate), "
            f"head_of_line when the server keeps up and the prompts ahead of the slow requests "
            f"average ≥ {LONG_PROMPT_SPREAD:g}× the median prompt",
            MIN_REQUESTS,
        ),
        "prefill": (
            "own prefill = first token − scheduled (or of requests that did not wait)",
            f"too_slow if {stage}",
            MIN_REQUESTS,
        ),
        "decode": (
            "TPOT at low load; TPOT ≈ a + b·decoding together + c·overlapping prefill tokens",
            "too_slow if the low-load TPOT misses; else interference when the slow requests "
            f"overlapped ≥ {PREFILL_CONCENTRATION:g}× the median request's prefill work and it "
            "adds more to their TPOT than their bigger batch, overload otherwise",
            MIN_REQUESTS,
        ),
        "saturation": (
            "arrivals vs completions and queue growth per window; served vs offered overall",
            f"overload if a window's queue grows while TTFT misses, or served < "
            f"{SERVED_SHARE:.0%} of offered",
            MIN_REQUESTS,
        ),
    }
    return pd.DataFrame(
        [
            {
                "step": step,
                "question": QUESTION[step],
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
    return pd.DataFrame({"meaning": CAUSES}).rename_axis("cause")


def remeasure(
    before: RequestLog | pd.DataFrame,
    after: RequestLog | pd.DataFrame,
    slo: dict[str, float],
) -> pd.DataFrame:
    """Before and after one change, on the same workload: p50/p90 TTFT and TPOT (seconds),
    output tokens/s, goodput (requests/s meeting ``slo``) and the good fraction.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    from llminfer.metrics import summarize

    keys = [
        "ttft_s_p50",
        "ttft_s_p90",
        "tpot_s_p50",
        "tpot_s_p90",
        "output_tps",
        "goodput_rps",
        "good_fraction",
    ]
    rows = {}
    for label, log in (("before", before), ("after", after)):
        flat = summarize(log, percentiles=(50, 90), slo=slo).to_dict()
        rows[label] = {k: flat[k] for k in keys}
    table = pd.DataFrame(rows)
    table["change"] = table["after"] / table["before"]
    return table
