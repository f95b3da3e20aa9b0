"""Time the toy server's engine steps (real numpy compute) in this process, without HTTP.

Writes a CSV in the shape of ``data/measurements/h200_llama-3.1-8b_steps.csv`` (columns kind,
model, weight_dtype, batch, tokens, context, prefill_chunk, ms_median, ms_min, ms_max, what),
which ``llminfer.bench.fit.fit_steps`` fits the step model to::

    OPENBLAS_NUM_THREADS=1 python benchmarks/measure_toy_steps.py --out toy_steps.csv

What one row is: ``prefill_graph``, one 128- or 256-token prompt computed alone (batch 1, no
context); ``decode_graph``, one decode step of ``batch`` running sequences (``context`` is the
mean of the tokens each attends to over the timed steps). The kinds are the GPU table's names
for "the device's own time": on a CPU there is no separate launch cost, the numpy compute is the
step. Each figure is the median (and min, max) of ``--reps`` steps of ``ToyEngine.begin_step``
(``--preset small``, ``max_num_seqs`` 8, as notebook 08 and ``bench_fit_sweep.py`` serve it),
timed with ``time.perf_counter`` after two warm-up steps per shape. No HTTP, no event loop, no
client: a server's step adds its streaming and the loop's turn (0.16-0.31 ms per step, stamped
inside the server on 2026-12-02).

Why it exists: numpy's one-row matrix product takes a faster path than two rows (a GEMV, not a
GEMM), so a decode step of one sequence costs far less than the line through larger batches
says (``StepModel.single_row_matmul_factor``). ``data/measurements/toy_small_steps.csv`` is
this script's output (see ``data/measurements/README.md``).
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from llminfer.serve import ServeConfig, build_model
from llminfer.serve.engine import ToyEngine

PROMPTS = (128, 256)
BATCHES = (1, 2, 3, 4, 6, 8)


def _prompt(length: int, seed: int) -> list[int]:
    """Distinct token ids per request (the toy has no prefix cache; distinct all the same)."""
    return [(seed * 7919 + 31 * i) % 1000 + 10 for i in range(length)]


def time_prefill(model, config, tokens: int, reps: int) -> list[float]:
    """Seconds of ``reps`` steps that each compute one ``tokens``-token prompt alone."""
    times = []
    for rep in range(reps + 2):
        engine = ToyEngine(model, config)
        engine.submit(_prompt(tokens, rep), 1, lambda event: None)
        start = time.perf_counter()
        engine.begin_step()
        elapsed = time.perf_counter() - start
        engine.end_step()
        if rep >= 2:  # warm-up
            times.append(elapsed)
    return times


def time_decode(model, config, batch: int, reps: int, prompt: int = 128):
    """(seconds of ``reps`` decode steps of ``batch`` sequences, mean context tokens)."""
    engine = ToyEngine(model, config)
    for seed in range(batch):
        engine.submit(_prompt(prompt, 100 + seed), reps + 4, lambda event: None)
    while engine.num_waiting or any(not r.prefilled for r in engine.running):
        engine.step()  # the prompts (4 per step within the 512-token budget)
    times, contexts = [], []
    for step in range(reps + 2):
        context = sum(r.computed + 1 for r in engine.running) / batch
        start = time.perf_counter()
        engine.begin_step()
        elapsed = time.perf_counter() - start
        engine.end_step()
        if step >= 2:
            times.append(elapsed)
            contexts.append(context)
    return times, statistics.fmean(contexts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="toy_steps.csv", help="CSV file to write")
    parser.add_argument("--reps", type=int, default=30, help="timed steps per shape")
    args = parser.parse_args()
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    model = build_model("small")
    config = ServeConfig(max_num_seqs=8)
    rows = []
    for tokens in PROMPTS:
        times = time_prefill(model, config, tokens, args.reps)
        rows.append({"kind": "prefill_graph", "batch": 1, "tokens": tokens, "times": times})
    for batch in BATCHES:
        times, context = time_decode(model, config, batch, args.reps)
        rows.append(
            {"kind": "decode_graph", "batch": batch, "context": round(context), "times": times}
        )
    what = f"toy --preset small, numpy {np.__version__}, {os.cpu_count()} cores"
    columns = ["kind", "model", "weight_dtype", "batch", "tokens", "context", "prefill_chunk"]
    columns += ["ms_median", "ms_min", "ms_max", "what"]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            times = [1e3 * t for t in row.pop("times")]
            writer.writerow(
                row
                | {"model": model.config.name, "weight_dtype": "fp32", "what": what}
                | {"ms_median": f"{statistics.median(times):.4f}"}
                | {"ms_min": f"{min(times):.4f}", "ms_max": f"{max(times):.4f}"}
            )
            label = f"{row['kind']} batch {row['batch']}"
            print(f"{label:<20} {statistics.median(times):8.3f} ms (min {min(times):.3f})")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
