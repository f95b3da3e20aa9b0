"""Chapters 3 and 5: a discrete-event, iteration-level simulation of one inference server.

The engine modelled by default is **vLLM v0.11.0's V1 engine** as its OpenAI-compatible server
configures itself on a GPU with at least 70 GiB (H100, H200; ``EngineArgs._set_default_args`` in
``vllm/engine/arg_utils.py``): chunked prefill always on, prefix caching on,
``max_num_batched_tokens=8192``, ``max_num_seqs=1024``, 16-token KV blocks,
``gpu_memory_utilization=0.9``. One model step at a time:

- Requests wait in a FIFO queue until the scheduler admits them; a step runs prefill tokens
  and/or one decode token for every running sequence. With ``chunked_prefill`` (V1) one token
  budget of ``max_num_batched_tokens`` per step serves the running requests first — one token per
  decoding sequence, then the next chunk of every running prompt, oldest first — and only then
  admits waiting requests with what is left (none in a step that had to preempt), as
  ``vllm/v1/core/sched/scheduler.py`` does. One simplification: V1 walks its running list in
  admission order, so an older request's prompt chunk could use the whole budget before a younger
  request's decode; here every decode gets its token first (the budget is at least
  ``max_num_seqs``, so they always fit). Without ``chunked_prefill`` (vLLM V0's default,
  ``EngineConfig(chunked_prefill=False, prefix_caching=False, max_num_seqs=256)``) a step is
  either a prefill batch or a decode batch, and waiting prompts go first: decodes stall while a
  prompt is computed.
- ``policy="static"`` admits a new batch only when the previous one has completely finished and
  reserves each request's final length up front; ``"continuous"`` refills the batch at every step
  and allocates KV blocks as sequences grow (PagedAttention).
- The paged KV cache holds ``plan_memory(...).capacity_tokens // block_size`` blocks (chapter 4).
  When a decoding sequence needs a block and none is free, the most recently admitted request is
  preempted: its blocks are freed, it returns to the head of the queue and later recomputes its
  prompt plus the tokens it had generated (vLLM's recompute preemption).
- With ``prefix_caching`` the full blocks of a shared prefix stay cached after the first request
  computed them; later requests of the same group skip those tokens. Unreferenced cached blocks
  are evicted, least recently used first, when memory is needed.
- Each step lasts ``step_timer(...)`` seconds from ``llminfer.cost.roofline`` for its mix of prefill
  tokens, attended pairs, decoding sequences and their context. A request's first token comes from
  the step that finishes its prefill, each later token from one decode step, so with one request in
  flight TTFT and TPOT equal ``latency.estimate_latency``.

Timestamps are seconds from the first arrival. The request log has the article's schema
(``request_id, start_ts, first_token_ts, end_ts, input_tokens, output_tokens``) plus
``scheduled_ts``, ``preemptions``, ``cached_prefix_tokens`` and ``token_ts``: per request the
absolute time (s) of every output token (a step gives a sequence at most one token, so one token
per entry; ``token_ts[0] = first_token_ts``, ``token_ts[-1] = end_ts``), from which
``summarize`` computes inter-token latency (ITL) percentiles as for a real streamed log.

The event loop itself is ``llminfer.sim.scheduler``; serving one workload at many loads or with
several engines (``sweep``, ``max_goodput``, ``compare_engines``) is ``llminfer.sim.loadsweep``,
which imports this module (never the other way round).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from llminfer.cost.roofline import attended_pairs
from llminfer.cost.steptime import step_timer
from llminfer.sim.engines import EngineConfig, kv_capacity_blocks
from llminfer.sim.runcache import RunCache, Uncacheable, key_of, profile_key
from llminfer.sim.scheduler import Scheduler
from llminfer.sim.workload import Workload
from llminfer.specs.checks import check_int
from llminfer.specs.hardware import GPU
from llminfer.specs.models import Model
from llminfer.specs.stepmodel import StepModel

#: (prefill_tokens, prefill_attended, decode_seqs, decode_context_tokens,
#:  prefill_cached_tokens) -> seconds, as ``llminfer.cost.steptime.StepTimer`` takes them.
StepTime = Callable[[int, int, int, int, int], float]


@dataclass
class SimResult:
    """What a simulation produced.

    - ``requests``: one row per request in the article's log schema plus ``scheduled_ts``,
      ``preemptions``, ``cached_prefix_tokens`` and ``prefix_group``; ``log`` is the same data
      as a ``llminfer.logs.schema.RequestLog``.
    - ``steps``: one row per engine step: ``time`` (start, s), ``duration_s``, ``batch_size``,
      ``prefill_tokens``, ``decode_seqs``, ``kv_blocks`` (in use at the step), ``waiting``
      (queue length) and ``output_tokens`` (tokens the step produced).
    - ``preemptions``: total recompute preemptions; ``capacity_blocks``: KV blocks available.

    A finite run is two servers in a row: the arrival window (first → last arrival, the offered
    load) and the drain (the queue worked off, batches shrinking). ``phases()`` gives each its
    own figures and ``summary(window="arrivals")`` summarises the first; ``summary()`` covers
    the whole run, drain included.

    Introduced in: notebooks/05_optimizations.ipynb
    """

    requests: pd.DataFrame
    steps: pd.DataFrame
    preemptions: int
    capacity_blocks: int
    block_size: int
    workload: Workload
    engine: EngineConfig
    _log: object = field(default=None, repr=False)

    @property
    def log(self):
        """The requests as a ``RequestLog`` (chapter 6's reader), so every analytic applies."""
        if self._log is None:
            from llminfer.logs.reading import read_requests

            self._log = read_requests(self.requests)
        return self._log

    def phase_bounds(self) -> dict[str, tuple[float, float]]:
        """``{"arrivals": (first arrival, last arrival), "drain": (last arrival, end)}`` in
        seconds of the run's clock; ``end`` is when the last step finishes.

        A finite run has two phases. While requests still arrive the server sees the offered
        load; after the last arrival it only works off what is queued and in flight, with ever
        smaller batches, until the last request ends. Both windows are half-open,
        ``[start, end)``, as ``summarize(window=…)`` takes them; the drain includes its end.

        Introduced in: notebooks/03_metrics.ipynb
        """
        start = self.requests["start_ts"].to_numpy(dtype=float)
        steps = self.steps
        end = float((steps["time"] + steps["duration_s"]).max()) if len(steps) else start.max()
        first, last = float(start.min()), float(start.max())
        return {"arrivals": (first, last), "drain": (last, max(end, last))}

    def phases(self, percentiles: tuple[float, ...] = (50, 99)) -> pd.DataFrame:
        """The run split into its arrival window and its drain: one row each (``"arrivals"``,
        ``"drain"``), the figures a steady-state reading needs, per phase.

        A step belongs to the phase in which it *starts*; a token to the phase in which it is
        *emitted* (``token_ts``); windows are ``[start, end)`` (``phase_bounds``), the drain's
        end included. Columns (units in the name; shares are fractions 0–1):

        - ``start_s``, ``end_s``, ``duration_s``; ``steps``, ``decode_steps`` (steps with at
          least one decoding sequence), ``prefill_steps`` (steps that prefill any token);
        - ``decode_batch_mean``: mean decoding sequences per decode step (the sweep's
          ``mean_batch``); ``running_batch_mean``: mean sequences per step, all steps;
          ``decode_only_step_s``: mean duration of the steps that decode and prefill nothing;
        - ``prefill_time_share``: share of the phase's step time spent in steps that prefill;
          ``busy_share``: the share of the phase's wall time the GPU runs a step (steps
          clipped to the phase; below 1 when it idles);
        - ``output_tokens``: tokens emitted in the phase; ``output_tps``: those per second of
          the phase; ``completed``: requests whose last token came in the phase;
        - ``kv_blocks_mean``: mean KV blocks in use per step; ``kv_used_share``: that over
          ``capacity_blocks``;
        - ``itl_s_p<q>``: percentiles of every gap between consecutive tokens whose later
          token is emitted in the phase (pooled, vLLM's ITL); ``tpot_s_p<q>``: per request,
          the mean of its gaps that end in the phase, percentiles over those requests.

        Rates are NaN for a phase of zero length (all requests arriving at once) and latency
        percentiles NaN when the phase has no gap.

        Introduced in: notebooks/03_metrics.ipynb
        """
        return run_phases(self, percentiles)

    def summary(self, window: str | tuple[float, float] | None = None, **kwargs):
        """``llminfer.logs.summary.summarize`` of the log; keyword arguments pass through.

        ``window``: None (the default) summarises the whole run, first arrival → last end,
        drain included; ``"arrivals"`` or ``"drain"`` one phase of ``phase_bounds`` (the
        requests that completed inside it, the tokens emitted inside it, over its length);
        or ``(t0, t1)`` seconds. Quote ``"arrivals"`` for the server under its offered load.

        Introduced in: notebooks/03_metrics.ipynb
        """
        from llminfer.logs.summary import summarize
        from llminfer.logs.window import window_log

        if isinstance(window, str):
            bounds = self.phase_bounds()
            if window not in bounds:
                raise ValueError(
                    f"window={window!r} must be 'arrivals', 'drain', a (t0, t1) pair or None"
                )
            # the drain ends with the run's last token: its window includes its end
            part = window_log(self.log, *bounds[window], include_end=window == "drain")
            return summarize(part, **kwargs)
        return summarize(self.log, window=window, **kwargs)


PHASES = ("arrivals", "drain")


def _token_gaps(requests: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every gap between consecutive tokens of every successful request: its length (s), the
    time of its later token (s) and the request's row, as three parallel arrays."""
    ok = (requests["status"] == "ok").to_numpy() if "status" in requests else None
    cells = requests["token_ts"].to_numpy(dtype=object)
    rows = [
        i
        for i, ts in enumerate(cells)
        if (ok is None or ok[i]) and ts is not None and not np.isscalar(ts) and len(ts) > 1
    ]
    if not rows:
        empty = np.empty(0)
        return empty, empty, np.empty(0, dtype=np.int64)
    arrays = [np.asarray(cells[i], dtype=float) for i in rows]
    gaps = np.concatenate([np.diff(a) for a in arrays])
    ends = np.concatenate([a[1:] for a in arrays])
    owner = np.repeat(np.asarray(rows, dtype=np.int64), [len(a) - 1 for a in arrays])
    return gaps, ends, owner


def run_phases(result: SimResult, percentiles: tuple[float, ...] = (50, 99)) -> pd.DataFrame:
    """``SimResult.phases``: the arrival window and the drain of a finite run, one row each
    (see that method for the columns, in seconds, sequences, blocks and fractions 0–1).

    Introduced in: notebooks/03_metrics.ipynb
    """
    for q in percentiles:
        if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 < q <= 100:
            raise ValueError(f"percentiles contains {q!r}; each must be a number in (0, 100]")
    bounds = result.phase_bounds()
    steps = result.steps
    start = steps["time"].to_numpy(dtype=float)
    tokens = np.concatenate(
        [np.asarray(t, dtype=float) for t in result.requests["token_ts"] if len(t)] or [np.empty(0)]
    )
    gaps, gap_end, owner = _token_gaps(result.requests)
    last_token = result.requests["end_ts"].to_numpy(dtype=float)
    rows = {}
    for name in PHASES:
        t0, t1 = bounds[name]

        def inside(t: np.ndarray, t0=t0, t1=t1, name=name) -> np.ndarray:
            return (t >= t0) & ((t <= t1) if name == "drain" else (t < t1))

        part = steps[inside(start)]
        decode = part["decode_seqs"] > 0
        prefill = part["prefill_tokens"] > 0
        busy = float(part["duration_s"].sum())
        duration = t1 - t0
        # GPU time inside the phase: each step's interval clipped to [t0, t1]
        overlap = np.clip(start + steps["duration_s"].to_numpy(dtype=float), t0, t1)
        overlap -= np.clip(start, t0, t1)
        emitted = int(inside(tokens).sum())
        in_gap = inside(gap_end)
        row = {
            "start_s": t0,
            "end_s": t1,
            "duration_s": duration,
            "steps": len(part),
            "decode_steps": int(decode.sum()),
            "prefill_steps": int(prefill.sum()),
            "decode_batch_mean": float(part.loc[decode, "decode_seqs"].mean())
            if decode.any()
            else math.nan,
            "running_batch_mean": float(part["batch_size"].mean()) if len(part) else math.nan,
            "decode_only_step_s": float(part.loc[decode & ~prefill, "duration_s"].mean())
            if (decode & ~prefill).any()
            else math.nan,
            "prefill_time_share": float(part.loc[prefill, "duration_s"].sum()) / busy
            if busy > 0
            else math.nan,
            "busy_share": float(overlap.sum()) / duration if duration > 0 else math.nan,
            "output_tokens": emitted,
            "output_tps": emitted / duration if duration > 0 else math.nan,
            "completed": int(inside(last_token).sum()),
            "kv_blocks_mean": float(part["kv_blocks"].mean()) if len(part) else math.nan,
        }
        row["kv_used_share"] = row["kv_blocks_mean"] / result.capacity_blocks
        phase_gaps = gaps[in_gap]
        per_request = (
            pd.Series(phase_gaps).groupby(owner[in_gap]).mean().to_numpy()
            if phase_gaps.size
            else np.empty(0)
        )
        for q in percentiles:
            row[f"itl_s_p{q:g}"] = (
                float(np.percentile(phase_gaps, q)) if phase_gaps.size else math.nan
            )
        for q in percentiles:
            row[f"tpot_s_p{q:g}"] = (
                float(np.percentile(per_request, q)) if per_request.size else math.nan
            )
        rows[name] = row
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = "phase"
    return table


def simulate(
    workload: Workload,
    model: Model,
    gpu: GPU,
    engine: EngineConfig = EngineConfig(),
    n_gpus: int = 1,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    step_time: StepTime | None = None,
    capacity_blocks: int | None = None,
    profile: str | StepModel | None = None,
) -> SimResult:
    """Serve ``workload`` with ``model`` on ``n_gpus`` × ``gpu`` and record every request and step.

    Each step is timed by ``step_timer`` as the engine ``profile`` runs it: ``"vllm"`` (split-KV
    decode attention, CUDA graphs; the default unless the GPU carries a calibrated
    ``step_model``), ``"pytorch"`` (the measured plain engine) or a ``StepModel``.
    ``step_time`` replaces that step cost (a callable taking prefill tokens, attended
    pairs, decoding sequences, their context tokens and the cached tokens prompt chunks attend
    to, returning seconds), e.g. to replay a measured profile; ``capacity_blocks`` replaces the
    KV capacity from ``plan_memory``.
    Deterministic for a given workload seed: a call repeating one of the last
    ``SIMULATE_CACHE_SIZE`` (with arguments that are plain values and no ``step_time``) gets a
    copy of that run (``llminfer.sim.runcache``; its ``token_ts`` arrays are shared, read-only).

    Introduced in: notebooks/05_optimizations.ipynb
    """
    key = _run_key(workload, model, gpu, engine, n_gpus, weight_dtype, kv_dtype, step_time,
                   capacity_blocks, profile)  # fmt: skip
    cached = _RUNS.get(key)
    if cached is not None:
        return cached
    scheduler = run_scheduler(
        workload, model, gpu, engine, n_gpus=n_gpus, weight_dtype=weight_dtype,
        kv_dtype=kv_dtype, step_time=step_time, capacity_blocks=capacity_blocks, profile=profile,
    )  # fmt: skip
    requests, steps = scheduler.tables()
    result = SimResult(
        requests=requests,
        steps=steps,
        preemptions=scheduler.preemptions,
        capacity_blocks=scheduler.capacity,
        block_size=engine.block_size,
        workload=workload,
        engine=engine,
    )
    if key is not None:
        for times in requests["token_ts"]:
            times.flags.writeable = False  # shared by every copy the cache hands out
        _RUNS.put(key, result)
    return result


def run_scheduler(
    workload: Workload,
    model: Model,
    gpu: GPU,
    engine: EngineConfig = EngineConfig(),
    n_gpus: int = 1,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    step_time: StepTime | None = None,
    capacity_blocks: int | None = None,
    profile: str | StepModel | None = None,
) -> Scheduler:
    """``simulate``'s run, checked the same way, without its tables or its cache: the finished
    ``Scheduler``, whose per-request lists (``arrival``, ``first``, ``end``, ``output``; token
    times from ``llminfer.sim.records.token_times``) are what the tables are built from. For a
    caller that reads a few figures of hundreds of runs (``llminfer.bench.fit.fit_sweep``):
    building the two DataFrames took a quarter of such a fit's time.

    Introduced in: notebooks/08_measure_a_server.ipynb (inside its fits, ``fit_sweep``)
    """
    if not isinstance(workload, Workload):
        raise ValueError(f"workload={workload!r} must be a llminfer.sim.workload.Workload")
    if not isinstance(engine, EngineConfig):
        raise ValueError(f"engine={engine!r} must be an EngineConfig")
    if step_time is None:
        step_time = step_timer(
            model, gpu, n_gpus=n_gpus, weight_dtype=weight_dtype, kv_dtype=kv_dtype, profile=profile
        )
    elif profile is not None:
        raise ValueError("profile= times the steps; with step_time= given it would be ignored")
    if capacity_blocks is None:
        capacity_blocks = kv_capacity_blocks(model, gpu, engine, n_gpus, weight_dtype, kv_dtype)
    capacity_blocks = check_int("capacity_blocks", capacity_blocks, 1)
    table = workload.requests()
    longest = int((table["prompt_tokens"] + table["output_tokens"]).max())
    if longest > model.max_context:
        raise ValueError(
            f"workload has a request of {longest} tokens (prompt + output), more than "
            f"{model.name}'s max_context={model.max_context}"
        )
    longest_prompt = int(table["prompt_tokens"].max())
    if not engine.chunked_prefill and longest_prompt > engine.max_num_batched_tokens:
        raise ValueError(
            f"workload has a prompt of {longest_prompt} tokens but "
            f"max_num_batched_tokens={engine.max_num_batched_tokens} and chunked_prefill=False: "
            "a prompt must fit one step whole without chunking (vLLM refuses it); raise "
            f"max_num_batched_tokens to at least {longest_prompt} or set chunked_prefill=True"
        )
    _check_step_time(step_time)
    if math.ceil(longest / engine.block_size) > capacity_blocks:
        raise ValueError(
            f"workload has a request of {longest} tokens but the KV cache holds only "
            f"{capacity_blocks * engine.block_size} tokens; shorten it or add memory"
        )
    scheduler = Scheduler(table, workload, engine, capacity_blocks, step_time, attended_pairs)
    scheduler.run()
    return scheduler


#: How many runs ``simulate`` keeps: notebook 07's case studies come back ~10 runs apart; a run
#: of 2,000 requests is a few MB.
SIMULATE_CACHE_SIZE = 32


def _copy_run(result: SimResult) -> SimResult:
    return replace(result, requests=result.requests.copy(), steps=result.steps.copy(), _log=None)


_RUNS: RunCache[SimResult] = RunCache(SIMULATE_CACHE_SIZE, _copy_run)


def _run_key(workload, model, gpu, engine, n_gpus, weight_dtype, kv_dtype, step_time,
             capacity_blocks, profile) -> tuple | None:  # fmt: skip
    """The cache key of one ``simulate`` call; None with a ``step_time`` or an argument that
    cannot be keyed on (the run itself then says what is wrong with it)."""
    if step_time is not None:
        return None
    try:
        return key_of(
            (workload, model, gpu, engine, n_gpus, weight_dtype, kv_dtype, capacity_blocks,
             profile_key(profile))
        )  # fmt: skip
    except (TypeError, Uncacheable):
        return None


def _check_step_time(step_time: StepTime) -> None:
    """Probe a step-time function once with a small prefill and a small decode step, so that a
    function returning 0, a negative time or NaN fails here rather than deep in the run."""
    if not callable(step_time):
        raise ValueError(f"step_time={step_time!r} must be a callable returning seconds")
    for args, what in (((16, 136, 0, 0, 0), "a 16-token prefill"), ((0, 0, 1, 16, 0), "a decode")):
        value = step_time(*args)
        ok = not isinstance(value, bool) and isinstance(value, (int, float, np.number))
        if not ok or not 0 < float(value) < math.inf:
            raise ValueError(
                f"step_time returned {value!r} for {what} step; it must return a finite number "
                "of seconds > 0"
            )
