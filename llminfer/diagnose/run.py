"""Chapter 7's troubleshooting order, as code: read a request log and name the bottleneck.

``diagnose(log, ...)`` walks the procedure of notebooks/07_troubleshooting.ipynb step by step —
workload, failures, memory, queueing, prefill, decode, saturation — and returns a ``Diagnosis``:
one ``Finding`` per step (``"ok"``, ``"problem"`` with a cause from ``findings.CAUSES``, or
``"cant_tell"`` naming what is missing), an overall ``verdict`` (``"ok"``, ``"problem"``,
``"not_enough_data"``), the primary ``cause`` and suggestions that fit the deployment.

The signals (``llminfer.diagnose.signals``) are measured per request and over time windows:

- *decoding together*: requests between first token and end during a request's decode (the
  batch its decode steps ran at), not requests in flight, which counts queued ones too;
- *waiting*: requests between arrival and ``scheduled_ts`` (or first token), and the work
  ahead of each request when it arrived (requests and their prompt tokens);
- *windows*: the run cut in up to 10 windows of arrival time, so a ramp's overloaded tail, a
  burst or a warm-up is found, and named, rather than averaged away.

The procedure lives in four modules, each one concept, and this one runs them:

- ``llminfer.diagnose.procedure``: every threshold as a module constant, so a reader can see (and
  change) it, and the tables that state the rules (``procedure_table``, ``causes_table``);
- ``llminfer.diagnose.observations``: ``Observations``, what one log shows, measured once for all
steps;
- ``llminfer.diagnose.load_steps``: workload, failures, memory, queueing, saturation;
- ``llminfer.diagnose.latency_steps``: prefill, decode (too slow, interference, overload).

``diagnose`` validates its input, runs the steps in ``STEPS`` order and hands the findings to
``Diagnosis``, which draws the verdict and the primary cause; ``remeasure`` compares a log
before and after one change.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from llminfer.diagnose.findings import STEPS, Diagnosis
from llminfer.diagnose.latency_steps import decode_step, prefill_step
from llminfer.diagnose.load_steps import (
    failures_step,
    memory_step,
    queueing_step,
    saturation_step,
    workload_step,
)
from llminfer.diagnose.observations import Observations
from llminfer.diagnose.procedure import DEFAULT_SLO, MIN_REQUESTS
from llminfer.diagnose.scrape import ServerMetrics, combine
from llminfer.diagnose.suggestions import ENGINE_KINDS
from llminfer.language import _
from llminfer.logs.metrics import request_metrics
from llminfer.logs.schema import RequestLog
from llminfer.sim.engines import EngineConfig
from llminfer.specs.hardware import GPU
from llminfer.specs.models import Model

#: ``ServerMetrics.engine`` → ``engine_kind``.
_SCRAPED_KINDS = {"vLLM": "vllm", "llama.cpp": "llamacpp", "SGLang": "sglang"}


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
    engine_kind: str | None = None,
) -> Diagnosis:
    """Run chapter 7's troubleshooting procedure on a request log.

    - ``model``/``gpu`` (with ``n_gpus`` = tensor parallelism, dtypes) let the memory, prefill
      and decode steps compare the log with chapters 2 and 4.
    - ``engine``: the serving engine's settings (``EngineConfig``: chunked prefill, chunk size
      ``max_num_batched_tokens``, ``max_num_seqs``, ``gpu_memory_utilization``, ...) and
      ``replicas``; suggestions never propose what is already on. None = unknown.
    - ``slo`` maps ``ttft_s``/``tpot_s`` to p90 targets in seconds (default ``DEFAULT_SLO``).
    - ``server``: one or more ``llminfer.diagnose.scrape.read_scrape`` results (vLLM ``/metrics``).
    - ``engine_kind``: whose flags the suggestions use, ``"vllm"``, ``"llamacpp"`` or
      ``"sglang"`` (``suggestions.ENGINE_KINDS``); None = the engine the ``server`` scrape names,
      else vLLM. ``engine.max_num_seqs`` is the server's slot count (llama.cpp ``--parallel``):
      with it the queueing step tells requests waiting for a slot (``slot_queue``) from
      requests sent together waiting for each other's prefill (``lockstep_prefill``).

    Returns a ``Diagnosis`` (``verdict``, ``cause``, ``headline``, one finding per ``STEPS``).

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    if not isinstance(log, RequestLog):
        from llminfer.logs.reading import read_requests

        log = read_requests(log)
    if model is not None and not isinstance(model, Model):
        raise ValueError(f"model={model!r} must be a Model (see llminfer.get_model)")
    if gpu is not None and not isinstance(gpu, GPU):
        raise ValueError(f"gpu={gpu!r} must be a GPU (see llminfer.get_gpu)")
    if engine is not None and not isinstance(engine, EngineConfig):
        raise ValueError(f"engine={engine!r} must be an llminfer.sim.engines.EngineConfig")
    for name, value in (("n_gpus", n_gpus), ("replicas", replicas)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name}={value!r} must be a whole number ≥ 1")
    if server is not None and not isinstance(server, ServerMetrics):
        server = combine(server)
    if engine_kind is None:
        engine_kind = _SCRAPED_KINDS.get(server.engine if server is not None else "", "vllm")
    if engine_kind not in ENGINE_KINDS:
        raise ValueError(f"engine_kind={engine_kind!r} must be one of {', '.join(ENGINE_KINDS)}")
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

    m = request_metrics(log, copy=False)  # read only here: shares the log's columns
    ok = (m["status"] == "ok").to_numpy() & np.isfinite(m["ttft_s"].to_numpy(float))
    obs = Observations(
        log, m, ok, targets, model, gpu, engine, int(n_gpus), int(replicas), weight_dtype,
        kv_dtype, server, engine_kind,
    )  # fmt: skip
    if obs.n_ok < 3:
        obs.windows = pd.DataFrame()
    findings = [workload_step(obs), failures_step(obs)]
    if obs.n_ok < 3:
        findings += [obs.too_few(step, MIN_REQUESTS) for step in STEPS[2:]]
    else:
        findings += [
            memory_step(obs),
            queueing_step(obs),
            prefill_step(obs),
            decode_step(obs),
            saturation_step(obs),
        ]
    notes = []
    if not obs.deployment_known:
        notes.append(_("(pass model= and gpu= to compare with the memory budget and the floors)"))
    if engine is None:
        notes.append(_("(engine settings unknown: suggestions that depend on them say 'if')"))
        if obs.n_ok >= 3 and obs.closed_loop:
            notes.append(
                _(
                    "(a closed loop of {users} users: give the server's slots, "
                    "engine max_num_seqs or --engine parallel=N, to tell requests sent together "
                    "from a queue for slots)"
                ).format(users=obs.in_flight_peak)
            )
    return Diagnosis(findings, targets, notes, missed=dict(obs.missed))


def remeasure(
    before: RequestLog | pd.DataFrame,
    after: RequestLog | pd.DataFrame,
    slo: dict[str, float],
) -> pd.DataFrame:
    """Before and after one change, on the same workload: p50/p90 TTFT and TPOT (seconds),
    output tokens/s, goodput (requests/s meeting ``slo``) and the good fraction.

    Introduced in: notebooks/07_troubleshooting.ipynb
    """
    from llminfer.logs.summary import summarize

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
