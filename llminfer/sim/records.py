"""The scheduler's records as tables (internal): ``llminfer.sim.scheduler.Scheduler`` appends
one entry per step for what changes from step to step (start, duration, KV blocks in use, and
with llama.cpp's micro-batches the forward passes) and one per run of identical steps for the
rest (``record_run``); ``tables`` turns them and the per-request lists into the request and step
DataFrames ``simulate`` returns, and ``token_times`` slices each request's token times from the
decode steps' end times.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import pandas as pd


class RecordState(Protocol):
    """The scheduler state the record functions read and append to (see ``Scheduler``).

    Introduced in: notebooks/05_optimizations.ipynb
    """

    ids: list
    arrival: list[float]
    first: list[float]
    end: list[float]
    prompt: list[int]
    output: list[int]
    scheduled: list[float]
    preempt_count: list[int]
    cached_log: list[int]
    group: list[int]
    emits: list[list]  # per request: a token time, or (start, end) decode-counter ranges
    decode_end: list[float]  # end of the step that moved the decode counter to k + 1, s
    rec_time: list[float]
    rec_dur: list[float]
    rec_blocks: list[int]
    rec_repeat: list[int]
    rec_batch: list[int]
    rec_prefill: list[int]
    rec_decode: list[int]
    rec_waiting: list[int]
    rec_tokens: list[int]
    rec_passes: list[int]
    split: object  # None unless llama.cpp's micro-batches are simulated
    slot_log: list[int]


def record_run(
    sched: RecordState, steps, batch, prefill, decode, waiting, produced, passes=1
) -> None:
    """Record ``steps`` consecutive steps with the same batch size, prefill tokens,
    decoding sequences, queue length, tokens produced and forward passes (llama.cpp's
    micro-batches; 1 when a step is one pass).

    Introduced in: notebooks/05_optimizations.ipynb
    """
    sched.rec_repeat.append(steps)
    sched.rec_batch.append(batch)
    sched.rec_prefill.append(prefill)
    sched.rec_decode.append(decode)
    sched.rec_waiting.append(waiting)
    sched.rec_tokens.append(produced)
    sched.rec_passes.append(passes)


def token_times(sched: RecordState) -> list[np.ndarray]:
    """Per request, the absolute time (s) of each output token, first token first.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    ends = np.asarray(sched.decode_end, dtype=float)
    out = []
    for parts in sched.emits:
        if len(parts) == 2 and isinstance(parts[1], tuple):  # the common case: no preemption
            a, b = parts[1]
            times = np.empty(b - a + 1)
            times[0] = parts[0]
            times[1:] = ends[a:b]
        else:
            times = np.concatenate(
                [ends[p[0] : p[1]] if isinstance(p, tuple) else [p] for p in parts] or [np.empty(0)]
            )
        out.append(times)
    return out


def tables(sched: RecordState) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The request table and the step table of a finished run.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    requests = pd.DataFrame(
        {
            "request_id": sched.ids,
            "start_ts": sched.arrival,
            "first_token_ts": sched.first,
            "end_ts": sched.end,
            "input_tokens": sched.prompt,
            "output_tokens": sched.output,
            "scheduled_ts": sched.scheduled,
            "preemptions": sched.preempt_count,
            "cached_prefix_tokens": sched.cached_log,
            "prefix_group": sched.group,
            "token_ts": token_times(sched),
        }
    )
    # np.asarray with a dtype first: pandas infers the type of a million-item list slowly.
    repeat = np.asarray(sched.rec_repeat, dtype=np.int64)

    def per_step(runs: list[int]) -> np.ndarray:  # one value per run -> one per step
        return np.repeat(np.asarray(runs, dtype=np.int64), repeat)

    steps = pd.DataFrame(
        {
            "time": np.asarray(sched.rec_time, dtype=float),
            "duration_s": np.asarray(sched.rec_dur, dtype=float),
            "batch_size": per_step(sched.rec_batch),
            "prefill_tokens": per_step(sched.rec_prefill),
            "decode_seqs": per_step(sched.rec_decode),
            "kv_blocks": np.asarray(sched.rec_blocks, dtype=np.int64),
            "waiting": per_step(sched.rec_waiting),
            "output_tokens": per_step(sched.rec_tokens),
        }
    )
    if sched.split:
        requests["slot_id"] = sched.slot_log
        steps["forward_passes"] = per_step(sched.rec_passes)
    return requests, steps


__all__ = ["RecordState", "record_run", "tables", "token_times"]
