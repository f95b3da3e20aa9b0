"""Chapter 7's troubleshooting order, as code: read a request log and name the bottleneck.

``diagnose(log, ...)`` walks the procedure of notebooks/07_troubleshooting.ipynb step by step —
workload, failures, memory, queueing, prefill, decode, saturation — and returns one ``Finding``
per step: a verdict (``"ok"``, ``"problem"`` or ``"cant_tell"``), the evidence in numbers, the
likely cause and the chapter-5 techniques that address it. A step that lacks the data it needs
says ``"cant_tell"`` and names what is missing rather than guess.

Every rule rests on a signal that can be measured from a per-request log; thresholds are module
constants so a reader can see (and change) them:

- queueing and prefill split TTFT when the log has ``scheduled_ts``; without it, only a
  correlation can hint which one grows (with load, or with prompt length);
- decode holds TPOT against the bandwidth floor of chapter 2 when model and GPU are known, and
  against the interference of other requests' prefills that overlap a request's decode;
- memory counts preemptions when the log records them and compares the tokens in flight with
  the KV capacity of chapter 4 when model and GPU are known;
- saturation compares the offered load (arrivals per second) with what was served.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from llminfer.findings import CHAPTER, QUESTION, STEPS, Diagnosis, Finding
from llminfer.hardware import GPU
from llminfer.latency import estimate_latency
from llminfer.logs import RequestLog
from llminfer.metrics import request_metrics
from llminfer.models import Model
from llminfer.signals import (
    fit_linear,
    in_flight_at_arrival,
    overlapping_prefill_tokens,
    rank_correlation,
    tokens_in_flight_peak,
)
from llminfer.simulate import EngineConfig, kv_capacity_blocks

#: Targets assumed when ``slo`` is not given: an interactive chat service (the same figures as
#: the ``metrics`` command's example). MLPerf's Llama-2-70B server scenario is laxer (TTFT 2 s,
#: TPOT 200 ms in loadgen's mlperf.conf); pass ``slo=`` with your own.
DEFAULT_SLO = {"ttft_s": 0.5, "tpot_s": 0.05}
#: Fewer successful requests than this and p90/p99 rest on a handful of samples.
MIN_REQUESTS = 50
#: Share of requests that may fail before failures are the first thing to fix.
MAX_FAILED_FRACTION = 0.01
#: A stage (queue or prefill) is "the problem" when TTFT misses its target and the stage's p90
#: is more than this share of TTFT's p90 ...
STAGE_SHARE = 0.5
#: ... and a correlation counts as evidence when its rank coefficient exceeds this.
STRONG_CORRELATION = 0.5
#: Tokens in flight above this share of the KV capacity leave no room for bursts.
KV_FULL_SHARE = 0.95
#: Served rate below this share of the offered rate means the queue grows without bound.
SERVED_SHARE = 0.9
#: Decode at low load slower than this multiple of the bandwidth floor is an inefficiency.
FLOOR_MULTIPLE = 3.0


def _p(values: np.ndarray, q: float) -> float:
    values = values[np.isfinite(values)]
    return float(np.percentile(values, q)) if values.size else float("nan")


def _workload(m: pd.DataFrame, ok: np.ndarray) -> tuple[Finding, dict]:
    good = m[ok]
    start = m["start_ts"].to_numpy(float)
    end = m["end_ts"].to_numpy(float)
    window = float(np.nanmax(end) - np.nanmin(start)) if len(m) else float("nan")
    arrivals = float(np.nanmax(start) - np.nanmin(start)) if len(m) > 1 else float("nan")
    concurrency = float(np.nansum(good["e2e_s"]) / window) if window > 0 else float("nan")
    evidence = {
        "requests": len(m),
        "succeeded": int(ok.sum()),
        "window_s": window,
        "offered_rps": (len(m) - 1) / arrivals if arrivals and arrivals > 0 else float("inf"),
        "input_tokens_p50": _p(good["input_tokens"].to_numpy(float), 50),
        "output_tokens_p50": _p(good["output_tokens"].to_numpy(float), 50),
        "mean_in_flight": concurrency,
    }
    if ok.sum() < MIN_REQUESTS:
        return Finding(
            "workload",
            "cant_tell",
            evidence,
            f"only {int(ok.sum())} successful requests: percentiles beyond p50 rest on a "
            f"handful of samples (need at least {MIN_REQUESTS})",
            missing=("more requests",),
        ), evidence
    return Finding(
        "workload",
        "ok",
        evidence,
        "enough requests to read p90; compare runs only with the same workload and definitions",
    ), evidence


def _failures(m: pd.DataFrame, ok: np.ndarray) -> Finding:
    failed = int((~ok).sum())
    fraction = failed / len(m) if len(m) else 0.0
    evidence = {"failed": failed, "failed_fraction": fraction}
    if fraction > MAX_FAILED_FRACTION:
        return Finding(
            "failures",
            "problem",
            evidence,
            f"{fraction:.1%} of requests failed; latency statistics describe only the survivors "
            "— read the errors (timeouts, out-of-memory, rejected for length) before tuning",
        )
    return Finding("failures", "ok", evidence, f"{failed} failed ({fraction:.1%})")


def _memory(m, ok, log, model, gpu, engine, n_gpus, weight_dtype, kv_dtype) -> Finding:
    requests = log.requests
    evidence: dict[str, Any] = {}
    preempted = None
    if "preemptions" in requests:
        preempted = int(pd.to_numeric(requests["preemptions"], errors="coerce").fillna(0).sum())
        evidence["preemptions"] = preempted
    if model is not None and gpu is not None:
        engine = engine if engine is not None else EngineConfig()
        try:  # the same capacity the simulator gives the engine (chapter 4's plan)
            blocks = kv_capacity_blocks(model, gpu, engine, n_gpus, weight_dtype, kv_dtype)
        except ValueError as exc:  # not even one block: the weights leave no room
            return Finding(
                "memory", "problem", evidence, str(exc), ("quantisation", "tensor parallelism")
            )
        capacity = blocks * engine.block_size
        peak = tokens_in_flight_peak(m, ok)
        evidence["kv_capacity_tokens"] = capacity
        evidence["peak_tokens_in_flight"] = round(peak)
        evidence["peak_share_of_capacity"] = peak / capacity
    techniques = ("quantisation", "PagedAttention", "prefix caching", "tensor parallelism")
    if preempted:
        return Finding(
            "memory",
            "problem",
            evidence,
            f"the KV cache ran out: {preempted} preemptions (requests evicted and recomputed); "
            "offered concurrency × context exceeds what the cache holds",
            techniques,
        )
    share = evidence.get("peak_share_of_capacity")
    if share is not None and share >= KV_FULL_SHARE:
        return Finding(
            "memory",
            "problem",
            evidence,
            f"tokens in flight reach {share:.0%} of the KV capacity: the cache is full and "
            "new requests wait for memory",
            techniques,
        )
    if preempted is None and share is None:
        return Finding(
            "memory",
            "cant_tell",
            evidence,
            "the log records no preemptions and the deployment is unknown",
            missing=("preemptions column", "model and gpu"),
        )
    detail = f"peak {share:.0%} of KV capacity" if share is not None else "no preemptions"
    return Finding("memory", "ok", evidence, f"the KV cache holds the load ({detail})")


def _queueing(m, ok, slo, load) -> Finding:
    good = m[ok]
    target = slo["ttft_s"]
    ttft = good["ttft_s"].to_numpy(float)
    ttft_p90 = _p(ttft, 90)
    evidence: dict[str, Any] = {"ttft_p90_s": ttft_p90, "ttft_target_s": target}
    techniques = ("continuous batching", "quantisation", "tensor parallelism")
    misses = ttft_p90 > target
    if "queue_s" in good:
        queue_p90 = _p(good["queue_s"].to_numpy(float), 90)
        evidence["queue_p90_s"] = queue_p90
        if misses and queue_p90 > STAGE_SHARE * ttft_p90:
            return Finding(
                "queueing",
                "problem",
                evidence,
                f"TTFT misses its {target:g} s target (p90 {ttft_p90:.3g} s) and waiting before "
                f"prefill is most of it (p90 queue {queue_p90:.3g} s): more load than the "
                "server schedules",
                techniques,
            )
        if queue_p90 > STAGE_SHARE * target:
            return Finding(
                "queueing",
                "ok",
                evidence,
                f"TTFT meets its target, but the queue already takes {queue_p90:.3g} s (p90): "
                "little headroom for more load",
            )
        return Finding("queueing", "ok", evidence, "waiting is a small part of TTFT")
    # Without scheduled_ts: does TTFT grow with load (or over the run) at a given prompt length?
    residual = ttft - fit_linear(good["input_tokens"].to_numpy(float), ttft)
    rho_load = rank_correlation(load[ok].astype(float), residual)
    rho_time = rank_correlation(good["start_ts"].to_numpy(float), ttft)
    evidence.update({"rho_ttft_load": rho_load, "rho_ttft_time": rho_time})
    if not misses:
        return Finding("queueing", "ok", evidence, "TTFT meets its target")
    if max(np.nan_to_num([rho_load, rho_time], nan=-1.0)) > STRONG_CORRELATION:
        return Finding(
            "queueing",
            "problem",
            evidence,
            "TTFT misses its target and grows with load at the same prompt length (inferred by "
            "correlation: the log has no scheduled_ts to measure the queue directly)",
            techniques,
        )
    return Finding(
        "queueing",
        "cant_tell",
        evidence,
        "TTFT misses its target but does not clearly follow load; without scheduled_ts the "
        "queue cannot be measured on its own",
        missing=("scheduled_ts",),
    )


def _prefill(m, ok, slo, model, gpu, n_gpus, weight_dtype, kv_dtype) -> Finding:
    good = m[ok]
    target = slo["ttft_s"]
    ttft_p90 = _p(good["ttft_s"].to_numpy(float), 90)
    prompts = good["input_tokens"].to_numpy(float)
    has_split = "prefill_s" in good
    name = "prefill" if has_split else "ttft"
    stage = good[f"{name}_s"].to_numpy(float)
    stage_p90 = _p(stage, 90)
    evidence: dict[str, Any] = {
        f"{name}_p90_s": stage_p90,
        f"rho_{name}_prompt": rank_correlation(prompts, stage),
        "input_tokens_p90": _p(prompts, 90),
    }
    if model is not None and gpu is not None:
        estimate = estimate_latency(
            model,
            gpu,
            max(1, int(evidence["input_tokens_p90"])),
            2,
            weight_dtype=weight_dtype,
            kv_dtype=kv_dtype,
            n_gpus=n_gpus,
        )
        evidence["estimated_prefill_at_p90_prompt_s"] = estimate.ttft_s
    techniques = (
        "prefix caching",
        "FlashAttention",
        "tensor parallelism",
        "prefill/decode disaggregation",
    )
    misses = ttft_p90 > target
    tracks = evidence[f"rho_{name}_prompt"] > STRONG_CORRELATION
    if misses and stage_p90 > STAGE_SHARE * ttft_p90 and tracks:
        return Finding(
            "prefill",
            "problem",
            evidence,
            f"TTFT misses its {target:g} s target and the prompts' own prefill is most of it: "
            f"{stage_p90:.3g} s at p90 (prompts of {evidence['input_tokens_p90']:,.0f} tokens at "
            "p90), growing with prompt length"
            + ("" if has_split else " (inferred by correlation: no scheduled_ts in the log)"),
            techniques,
        )
    if misses and not has_split:
        return Finding(
            "prefill",
            "cant_tell",
            evidence,
            "TTFT misses its target but does not follow prompt length; without scheduled_ts "
            "prefill cannot be measured on its own",
            missing=("scheduled_ts",),
        )
    if not misses:
        return Finding("prefill", "ok", evidence, "TTFT meets its target")
    return Finding("prefill", "ok", evidence, "prefill is not what makes TTFT miss its target")


def _decode(m, ok, slo, load, model, gpu, n_gpus, weight_dtype, kv_dtype) -> Finding:
    good = m[ok]
    target = slo["tpot_s"]
    tpot = good["tpot_s"].to_numpy(float)
    interference = overlapping_prefill_tokens(good)
    evidence: dict[str, Any] = {
        "tpot_p50_s": _p(tpot, 50),
        "tpot_p90_s": _p(tpot, 90),
        "rho_tpot_load": rank_correlation(load[ok].astype(float), tpot),
        "rho_tpot_prefill_overlap": rank_correlation(interference, tpot),
    }
    low_load_ratio = float("nan")
    if model is not None and gpu is not None:
        context = int(_p(good["input_tokens"].to_numpy(float), 50) + 1)
        outputs = max(2, int(_p(good["output_tokens"].to_numpy(float), 50)))
        # The floor is for the batch the quietest tenth of requests actually shared.
        quiet = load[ok] <= np.nanpercentile(load[ok], 10)
        batch = max(1, int(np.median(load[ok][quiet])))
        floor = estimate_latency(
            model,
            gpu,
            context,
            outputs,
            batch=batch,
            weight_dtype=weight_dtype,
            kv_dtype=kv_dtype,
            n_gpus=n_gpus,
        ).ideal.tpot_s
        low_load_ratio = _p(tpot[quiet], 50) / floor
        evidence["low_load_batch"] = batch
        evidence["tpot_floor_s"] = floor
        evidence["low_load_tpot_over_floor"] = low_load_ratio
    if evidence["tpot_p90_s"] > target:
        if evidence["rho_tpot_prefill_overlap"] > max(
            STRONG_CORRELATION, evidence["rho_tpot_load"]
        ):
            return Finding(
                "decode",
                "problem",
                evidence,
                "TPOT misses its target when other requests' prefills run during a request's "
                "decode: long prefills stall the decode steps they share a batch with",
                ("continuous batching with chunked prefill", "prefill/decode disaggregation"),
            )
        if evidence["rho_tpot_load"] > STRONG_CORRELATION:
            return Finding(
                "decode",
                "problem",
                evidence,
                "TPOT misses its target and rises with concurrency: batches too large for the "
                "latency target",
                ("continuous batching (lower max_num_seqs)", "tensor parallelism", "quantisation"),
            )
        if low_load_ratio > FLOOR_MULTIPLE:
            return Finding(
                "decode",
                "problem",
                evidence,
                f"even at low load TPOT is {low_load_ratio:.1f}x the bandwidth floor: the engine "
                "is inefficient (kernels, precision, CUDA graphs) rather than overloaded",
                ("quantisation", "speculative decoding", "tensor parallelism"),
            )
        return Finding(
            "decode",
            "problem",
            evidence,
            "TPOT misses its target at every load: the model is too slow for this GPU and target",
            ("quantisation", "speculative decoding", "tensor parallelism"),
        )
    if low_load_ratio > FLOOR_MULTIPLE:
        return Finding(
            "decode",
            "ok",
            evidence,
            f"TPOT meets its target, though at low load it is {low_load_ratio:.1f}x the "
            "bandwidth floor: room to gain if the target tightens",
            ("quantisation", "speculative decoding"),
        )
    return Finding("decode", "ok", evidence, "TPOT meets its target")


def _saturation(m, ok, workload: dict, closed_loop: bool) -> Finding:
    good = m[ok]
    end = np.sort(good["end_ts"].to_numpy(float))
    evidence: dict[str, Any] = {}
    if len(end) < MIN_REQUESTS:
        return Finding(
            "saturation",
            "cant_tell",
            evidence,
            f"fewer than {MIN_REQUESTS} successful requests: too few to measure a served rate",
            missing=("more requests",),
        )
    # Served rate over the middle of the run (warm-up and drain left out), against arrivals.
    lo, hi = int(0.1 * len(end)), int(0.9 * len(end))
    served = (hi - lo) / (end[hi] - end[lo]) if end[hi] > end[lo] else float("inf")
    offered = workload["offered_rps"]
    evidence.update({"offered_rps": offered, "served_rps": served})
    if closed_loop:
        return Finding(
            "saturation",
            "cant_tell",
            evidence,
            "all requests arrived at once (a closed loop or a batch): arrivals say nothing about "
            "capacity; sweep the load instead (chapter 3)",
            missing=("a load sweep",),
        )
    if served < SERVED_SHARE * offered:
        return Finding(
            "saturation",
            "problem",
            evidence,
            f"the server completes {served:.3g} requests/s but {offered:.3g} arrive: "
            "the queue grows for as long as the load lasts",
            ("continuous batching", "quantisation", "tensor parallelism"),
        )
    return Finding("saturation", "ok", evidence, "the server keeps up with the offered load")


def diagnose(
    log: RequestLog | pd.DataFrame,
    model: Model | None = None,
    gpu: GPU | None = None,
    engine: EngineConfig | None = None,
    slo: dict[str, float] | None = None,
    n_gpus: int = 1,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
) -> Diagnosis:
    """Run chapter 7's troubleshooting procedure on a request log.

    ``model``/``gpu`` (and ``n_gpus``, dtypes, ``engine`` — an ``EngineConfig`` for its block
    size and memory utilisation, default ``EngineConfig()``) let the memory and decode steps
    compare the log with chapters 2 and 4; ``slo`` maps ``ttft_s``/``tpot_s`` to targets in
    seconds (default ``DEFAULT_SLO``). Returns a ``Diagnosis`` whose findings follow ``STEPS``.

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
    targets = dict(DEFAULT_SLO)
    for key, value in (slo or {}).items():
        if key not in ("ttft_s", "tpot_s", "e2e_s"):
            raise ValueError(f"slo key {key!r} must be one of ttft_s, tpot_s, e2e_s")
        if not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"slo[{key!r}]={value!r} must be a positive number of seconds")
        targets[key] = float(value)
    if len(log.requests) == 0:
        raise ValueError("log holds no requests")

    m = request_metrics(log)
    ok = (m["status"] == "ok").to_numpy()
    load = in_flight_at_arrival(log)
    workload_finding, workload = _workload(m, ok)
    findings = [workload_finding, _failures(m, ok)]
    notes = []
    if ok.sum() < 3:
        for step in STEPS[2:]:
            findings.append(
                Finding(
                    step,
                    "cant_tell",
                    {},
                    "too few successful requests",
                    missing=("successful requests",),
                )
            )
        return Diagnosis(findings, targets, notes)
    closed_loop = not math.isfinite(workload["offered_rps"])
    findings += [
        _memory(m, ok, log, model, gpu, engine, n_gpus, weight_dtype, kv_dtype),
        _queueing(m, ok, targets, load),
        _prefill(m, ok, targets, model, gpu, n_gpus, weight_dtype, kv_dtype),
        _decode(m, ok, targets, load, model, gpu, n_gpus, weight_dtype, kv_dtype),
        _saturation(m, ok, workload, closed_loop),
    ]
    if model is None or gpu is None:
        notes.append("(pass model= and gpu= to compare with the memory budget and the floors)")
    return Diagnosis(findings, targets, notes)


def procedure_table() -> pd.DataFrame:
    """The troubleshooting order as a table: per step, the question, what is measured, the
    rule (with the thresholds this module uses) and the chapter that explains it.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    stage = f"TTFT p90 misses the target and the stage's p90 > {STAGE_SHARE:.0%} of TTFT's p90"
    rows = {
        "workload": (
            "request count, prompt/answer lengths, offered rate, mean in flight",
            f"at least {MIN_REQUESTS} successful requests, else can't tell",
        ),
        "failures": ("failed / all requests", f"problem above {MAX_FAILED_FRACTION:.0%}"),
        "memory": (
            "preemptions; peak tokens in flight vs KV capacity (chapter 4's plan)",
            f"problem if any preemption or peak ≥ {KV_FULL_SHARE:.0%} of capacity",
        ),
        "queueing": (
            "queue = scheduled − start (or TTFT vs load, by correlation)",
            f"problem if {stage}",
        ),
        "prefill": (
            "prefill = first token − scheduled; its rank correlation with prompt length",
            f"problem if {stage} and ρ > {STRONG_CORRELATION}",
        ),
        "decode": (
            "TPOT vs target, vs load, vs overlapping prefills, vs the bandwidth floor",
            "problem if p90 TPOT > target; cause = the strongest correlate, or "
            f"> {FLOOR_MULTIPLE:g}x the floor at low load",
        ),
        "saturation": (
            "requests served per second vs offered (middle 80 % of the run)",
            f"problem if served < {SERVED_SHARE:.0%} of offered",
        ),
    }
    return pd.DataFrame(
        [
            {
                "step": step,
                "question": QUESTION[step],
                "measurement": rows[step][0],
                "rule": rows[step][1],
                "chapter": CHAPTER[step],
            }
            for step in STEPS
        ]
    ).set_index("step")


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
