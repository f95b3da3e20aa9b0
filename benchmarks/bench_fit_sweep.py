"""Fit from a sweep, predict the rest (issue 22): measure p50 TTFT and TPOT at 5 closed-loop
loads on the toy server (real compute, ``--preset small``) and, when it is built, on llama.cpp's
``llama-server`` (tiny random GGUF); fit the step model on 3 loads (``fit_to_sweep``: effective
peak FLOP/s, bandwidth and fixed cost per layer per step, starting from ``measure_machine()``)
and predict the other 2 with ``simulate_sweep``.

    python benchmarks/bench_fit_sweep.py [--fit 1,4,16] [--predict 2,8] [--per-user 4]

Each server is swept ``--repeats`` times (3) and each load's p50s are the median over them.
Prints one row per server and load (measured vs predicted p50 TTFT and TPOT, error %; ``fit``
or ``held out``); exits 1 if any held-out error is over ``--limit`` (25 %). A few minutes on 2
shared cores; timings move with what else runs on the machine.

Run 2026-12-01 on the shared 2-core machine (3 sweeps, median p50s; 128-token prompts, 32
output tokens, 4 requests per user): it **fails** the 25 % limit. Held-out errors, TTFT / TPOT:
toy server at 2 users -9.8 % / -36.2 %, at 8 users -52.9 % / -1.1 %; llama-server at 2 users
+7.8 % / +18.6 %, at 8 users -25.2 % / -13.0 %. Two causes: (1) noise — the toy server's
measured TPOT at 2 users (8.9 ms) is above its TPOT at 4 (8.2 ms), and earlier single sweeps
moved 2x between runs as other work came and went; (2) at 8 users = ``max_num_seqs``, a model
gap, as we read it (not verified step by step):
in the simulation the 8 closed-loop users fall into lockstep groups whose prompts arrive
together and share one step, while real clients' requests arrive a few ms apart and a new
prompt waits for the step in flight (a prefill step of ~0.25 s on the toy server), so measured
TTFT is about 2x the predicted one there.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import pandas as pd

from llminfer.bench import simulate_sweep, sweep_server
from llminfer.bench.fit import fit_to_sweep
from llminfer.bench.llamacpp import LlamaServer, find_llama_server, write_tiny_gguf
from llminfer.serve import ServeConfig, ServerProcess, build_model
from llminfer.sim.simulate import EngineConfig
from llminfer.sim.workload import Workload
from llminfer.specs.describe import model_from_gguf
from llminfer.specs.hardware import measure_machine

METRICS = ("ttft_s_p50", "tpot_s_p50")


def fit_and_predict(name, url, served_model, workload, model, machine, fit_loads, held_out,
                    per_user, sim_kwargs, bench_kwargs, save=None,
                    repeats=3) -> pd.DataFrame:  # fmt: skip
    loads = sorted(set(fit_loads) | set(held_out))
    # the whole sweep `repeats` times, one after another, the median of each p50: a busy shared
    # machine moves single sweeps by tens of per cent
    runs = []
    for repeat in range(repeats):
        table, _ = sweep_server(
            url, workload, served_model, concurrencies=loads, requests_per_user=per_user,
            percentiles=(50,), prompt_salt=100 * repeat, **bench_kwargs,
        )  # fmt: skip
        runs.append(table)
    measured = pd.concat(runs).groupby("concurrency", as_index=False)[list(METRICS)].median()
    if save:
        measured.to_csv(Path(save) / f"{name.split()[0]}_sweep.csv", index=False)
    measured = measured.set_index("concurrency")
    fitted = fit_to_sweep(
        measured.loc[fit_loads].reset_index(), workload, model, machine,
        requests_per_user=per_user, **sim_kwargs,
    )  # fmt: skip
    predicted, _ = simulate_sweep(
        workload, concurrencies=loads, requests_per_user=per_user, percentiles=(50,),
        model=model, gpu=fitted, **sim_kwargs,
    )  # fmt: skip
    predicted = predicted.set_index("concurrency")
    sm = fitted.step_model
    print(
        f"{name}: fitted {fitted.fp32_flops / 1e9:.2f} GFLOP/s effective (numpy measured "
        f"{machine.fp32_flops / 1e9:.1f}), {fitted.memory_bandwidth / 1e9:.2f} GB/s effective "
        f"(numpy {machine.memory_bandwidth / 1e9:.1f}), {sm.layer_overhead_s * 1e6:.0f} us per "
        f"layer per step; {sm.source}"
    )
    rows = []
    for load in loads:
        row = {"server": name, "users": load, "part": "fit" if load in fit_loads else "held out"}
        for metric in METRICS:
            m, p = measured.loc[load, metric], predicted.loc[load, metric]
            short = metric.split("_")[0]
            row[f"{short} measured ms"] = 1e3 * m
            row[f"{short} predicted ms"] = 1e3 * p
            row[f"{short} error %"] = 100 * (p / m - 1)
        rows.append(row)
    return pd.DataFrame(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", default="1,4,16", help="loads (users) to fit on")
    parser.add_argument("--predict", default="2,8", help="loads to predict")
    parser.add_argument("--per-user", type=int, default=4, help="requests per user per load")
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--output-tokens", type=int, default=32)
    parser.add_argument("--limit", type=float, default=25.0, help="held-out error limit, %%")
    parser.add_argument("--repeats", type=int, default=3, help="sweeps; median p50 per load")
    parser.add_argument("--save", help="folder to write each measured sweep to (CSV)")
    args = parser.parse_args()
    fit_loads = [int(u) for u in args.fit.split(",")]
    held_out = [int(u) for u in args.predict.split(",")]
    workload = Workload(
        8, concurrency=1, prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens
    )
    machine = measure_machine()
    tables = []

    config = ServeConfig(max_num_seqs=8)
    sim_kwargs = {
        "engine": config.engine_config(),
        "capacity_blocks": config.num_kv_blocks,
        "weight_dtype": "fp32",
        "kv_dtype": "fp32",
    }
    with ServerProcess(["--preset", "small"], shutdown_after=900, config=config) as server:
        tables.append(
            fit_and_predict(
                "serve (toy, real compute)",
                server.url,
                "toy-small",
                workload,
                build_model("small").config,
                machine,
                fit_loads,
                held_out,
                args.per_user,
                sim_kwargs,
                {"warmup": 4},
                args.save,
            )
        )

    if find_llama_server() is None:
        print("llama-server: skipped, not built (make llama-server)")
    else:
        parallel = 8
        with tempfile.TemporaryDirectory() as tmp:
            path = write_tiny_gguf(Path(tmp) / "tiny.gguf")
            sim_kwargs = {
                # llama.cpp: --parallel slots, one unified batch of up to n_batch (2048) tokens
                # mixing prompt chunks and decodes, no prefix reuse across the salted prompts
                "engine": EngineConfig(
                    max_num_seqs=parallel,
                    max_num_batched_tokens=2048,
                    chunked_prefill=True,
                    prefix_caching=False,
                ),
                "capacity_blocks": 1024 * parallel // 16,
                "weight_dtype": "fp32",
                "kv_dtype": "fp16",
            }
            with LlamaServer(path, parallel=parallel, context=1024 * parallel) as server:
                tables.append(
                    fit_and_predict(
                        "llama-server (tiny GGUF)",
                        server.url,
                        "tiny",
                        workload,
                        model_from_gguf(path),
                        machine,
                        fit_loads,
                        held_out,
                        args.per_user,
                        sim_kwargs,
                        {"warmup": 4, "extra_body": {"ignore_eos": True}},
                        args.save,
                    )
                )
    table = pd.concat(tables, ignore_index=True)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    errors = table.loc[table["part"] == "held out", ["ttft error %", "tpot error %"]].abs()
    worst = float(errors.to_numpy().max())
    print(f"worst held-out error: {worst:.1f} % (limit {args.limit:.0f} %)")
    return 1 if worst > args.limit else 0


if __name__ == "__main__":
    sys.exit(main())
