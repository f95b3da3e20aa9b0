"""Fit from a sweep, predict the rest (issue 22): measure p50 TTFT, TPOT and ITL at 5
closed-loop loads on the toy server (real compute, ``--preset small``) and, when it is built, on
llama.cpp's ``llama-server`` (tiny random GGUF, ``--parallel 8 --kv-unified``); fit on 3 loads with
``fit_sweep`` (effective peak FLOP/s and bandwidth, fixed cost per layer per step, GEMM padding,
KV read rate, on the toy server the one-row factor, and the server's per-request handling time
``request_latency_s``, from 3 starts;
the client's gap between sends, ``send_gap_s``, is measured from the sweep's logs) and predict
the other 2. For llama-server it also fits the step constants to ``llama-batched-bench`` on the
same GGUF (``fit_steps``) and only the latency to the sweep: printed as ``info``, not judged.

    python benchmarks/bench_fit_sweep.py [--fit 1,4,16] [--predict 2,8] [--per-user 8]
        [--save data/sweeps] [--servers toy,llama] [--per-slot-kv]

Each server is swept ``--repeats`` times (3) and each load's p50s are the median over them;
``--save`` writes those median tables (``read_sweep`` reads them) and the batched-bench JSONL.
Prints one row per server and load (measured vs predicted p50 TTFT and TPOT, error %); exits 1
if any held-out error is over ``--limit`` (25 %). About 70 s on 2 shared cores.

What was wrong (measured 2026-12-02, per-request timelines of real runs beside ``simulate``'s):
``simulate`` started all closed-loop users at t = 0 and handed every request to the engine the
instant it was sent. The real client sends one request at a time, 0.2-0.5 ms apart
(``measured_send_gap_s``: 8 users' first requests went out over 2.3-2.4 ms on both servers), and
a server spends time on each request before its engine sees it (fitted: ~1 ms on llama-server,
0-10 ms, poorly pinned, on the toy server). So at 2 users the second prompt misses the first
prompt's step and stalls the first user's decode (toy: one 46-50 ms gap per stalled request;
simulated without the gap both prompts shared one step, TPOT -29 %); on llama-server at 8 users
the first step held 1-2 prompts and the rest came a step later (TTFT 8 ms, then 16-18 ms), where
the old simulation put all 8 in one 1,024-token step (21 ms for everyone, TTFT +55 %). Both
servers schedule as the simulation does (toy: ``ToyEngine._plan``, decodes then prompt chunks in
one 512-token budget, 4 prompts of 128 per step; llama.cpp ``update_slots``: sampled tokens of
every generating slot first, then prompt tokens of every slot, up to ``n_batch``), so the
scheduler needed no change. The fit also sat in wrong queueing regimes (a single start left
llama-server at rms log error 0.28) and now starts 3 times.

Runs, 2026-12-02, shared 2-core AMD EPYC (another engineer's test suite ran beside them; the
numpy peak ``measure_machine`` read moved from 216 to 54 GFLOP/s), 128-token prompts, 32 output
tokens. Held-out errors TTFT / TPOT, %, at 2 and 8 users:

======  ========================  =========================  ===========================
run     model                     toy: 2 users | 8 users     llama-server: 2 | 8 users
======  ========================  =========================  ===========================
12-01   before                    -9.8/-36.2 | -52.9/-1.1    +7.8/+18.6 | -25.2/-13.0
01:08   gap + latency, 4/user     -3.9/-30.5 | -8.6/+4.2     -21.7/-18.7 | -26.9/+2.1
01:13   the same, 8/user          +11.0/-16.6 | -23.2/+18.6  -16.8/-10.2 | -38.0/+6.1
01:13*  final, refitted           +11.1/-16.6 | -23.1/+18.6  -16.0/-6.8 | -11.7/-7.3
01:36   final, one start          -10.8/-21.0 | -20.2/+22.3  -9.0/+30.4 | -2.1/-9.8
01:39   final (load average 3)    -20.4/-13.0 | -31.2/+40.6  +14.5/+31.0 | +26.8/-22.8
01:41   final                     +7.7/-11.1 | -18.2/+36.7   +3.4/+13.1 | -32.9/-14.8
01:44   final, in data/sweeps/    +5.7/-24.1 | -31.7/+9.9    -13.5/+3.3 | -24.1/+16.3
01:44*  hand-off, refitted        +8.4/-25.8 | -6.7/-7.8     (unchanged)
08:40   hand-off (other machine)  +4.6/+5.0 | -1.3/-1.6     -13.0/+8.2 | -38.9/+4.0
13:58   hand-off (third machine)  -27.7/-16.2 | -8.4/-1.5   -10.1/-5.4 | +17.6/-1.6
14:18   the same, --per-user 16   -14.2/-17.6 | -12.4/-0.2  -16.0/-1.5 | -19.6/-1.5
14:21   the same, --per-user 16   +5.6/-29.4 | -3.3/-2.8    -18.4/-0.9 | -14.3/+8.9
15:52   one-row (fourth machine)  -8.2/+2.5 | -22.8/+6.5    -7.8/+21.8 | -16.3/+33.6
15:55   the same                  +7.1/-3.1 | -11.2/-3.0    -11.9/-5.5 | -13.7/+16.9
15:57   the same                  -8.1/-2.8 | +13.3/-21.3   -14.9/+20.0 | -1.3/+6.0
16:31   one-row on the toy only   +12.2/-3.6 | -15.2/-1.2   -13.7/-0.5 | -7.4/+5.6
16:32   the same                  +29.8/-17.5 | -11.2/+12.7  -15.7/-1.1 | +13.1/-3.2
16:34   the same                  -5.2/-17.0 | -9.0/+16.8    +3.0/+11.1 | +8.4/+6.7
17:23   the same                  -0.2/+4.2 | +0.3/-12.1    -18.3/-4.8 | -6.4/+18.4
12-03   fifth machine (Xeon 2.0)  +2.0/+1.5 | -23.9/+22.2   -19.4/+10.2 | -34.3/+10.5
12-03*  the same, 6 min later     -6.3/+19.6 | +6.1/+9.5    -11.2/+0.7 | +2.6/-4.8
======  ========================  =========================  ===========================

llama.cpp's task loop (added 2026-12-03 ~14:40 UTC, a sixth machine: 2-core AMD EPYC, a
pure-Python loop of 10 million additions 1.68 s, numpy peak 67-83 GFLOP/s). Read in
``llama-server -v --log-timestamps`` (0.3.36), 2 users' requests sent 1.1 ms apart were parsed
side by side on its HTTP threads, posted 0.4 ms apart, and its engine thread took both tasks
(slot launch, idle slots saved to the RAM prompt cache: ~1.3 ms each) before one
``update_slots``: both prompts shared one prefill step, every round (TTFT 66-119 ms each, one
first-token time for both). ``simulate`` handled requests one at a time (the toy's single
event loop) and started a step at the first arrival, so the second prompt always missed it.
Now ``Workload.request_handlers`` (llama-server: ``--parallel + 4`` HTTP threads) and
``EngineConfig.request_setup_s`` (fitted: ``LLAMA_SERVER_FIT``) model both; ``--no-setup``
fits as before. Held-out TTFT/TPOT %, llama-server only (``--servers llama``), at 2 | 8 users:

=====================  ==========================  ============================
GGUF, sweeps           before (serial hand-over)   with handlers and setup
=====================  ==========================  ============================
toy-shaped, 3 x 8      -30.5/-13.2 | -7.8/+0.4     -26.3/+6.2 | -3.0/-13.8
toy-shaped, 3 x 8      -43.4/-16.2 | -39.0/+77.3   -7.5/-16.4 | +3.0/+6.9
toy-shaped, 3 x 8      -26.2/+2.8 | -19.0/+52.3    -
toy-shaped, 3 x 4      -15.7/+7.9 | -8.0/+8.5      +7.2/-20.2 | +9.5/+23.4
toy-shaped, 3 x 4      -21.8/-2.1 | -0.7/+20.8     -29.3/+10.0 | +20.3/+12.3
tiny, 3 x 8            (the table above)           -5.7/+4.0 | +15.6/+6.2
tiny, 3 x 8                                        +7.6/+8.3 | -25.6/-4.5
tiny, 3 x 4                                        -5.1/+12.0 | -36.6/+10.9
tiny, 3 x 4                                        -13.4/-19.2 | -5.8/-23.6
=====================  ==========================  ============================

The whole benchmark with it (both servers, defaults): 14:56 UTC toy -8.2/+4.0 | -6.1/-19.6,
llama-server -6.9/-3.6 | **-35.6**/-7.6 (its 8-user TTFT measured 51.9 ms, simulated 33.5);
15:05 UTC toy -13.9/+9.8 | -20.9/-5.7, llama-server +5.6/-9.5 | **-26.6**/-1.2. The table now
has each p50's spread over the sweeps ((max - min) / median, %) and counts the held-out errors
within it (15:05: 6 of 8). llama-server's 8-user TTFT spread 5 % at 15:05, so that miss is
the model's: it came out low in 5 of the 6 runs with the task loop (-35.6, -26.6, -36.6,
-25.6, -5.8; +15.6 once). Not modelled, and the likeliest part: per generated token the engine
thread samples and posts each slot's result after the step (~0.33 ms a slot in the ``-v`` log,
2.6 ms after an 8-slot step), and its HTTP threads stream the chunks on the core the client
parses them on.

("toy-shaped": ``--llama-shape toy``, the toy server's 16 layers of hidden 128 in a GGUF, so a
step is the model's work, 35-50 ms TTFT alone; "3 x 4": run as ``--repeats 6 --per-user 4``,
but the script passed no ``--repeats`` on (a reviewer found it, fixed after these runs): 3 sweeps
of 4 requests per user, half the requests of the others.) The tiny GGUF's 2-user TTFT, low
in 17 of the 21 runs of the table above (-7.8 ... -21.7 %, median -13.5 %), is now -13.4 ...
+7.6 %: that part was the model. Four of the eight runs with the change met the limit. What
is left is the measurement as much as the model: the same load's p50 moved between
back-to-back runs on this host by a third (toy-shaped 2-user TTFT
64-105 ms in eight runs; the tiny GGUF's 8-user TTFT 23-61 ms), the 8-user TTFTs are bimodal (on
the tiny GGUF half near 25 ms, half near 70 ms in one sweep: its verbose log shows one
``update_slots`` of 7 new prompts beside a decode taking 62 ms where 4 prompts alone took 17 ms;
llama.cpp splits a batch over its per-slot KV streams into ubatches of equal tokens per
sequence, ``split_equal``, ``src/llama-batch.cpp`` L542, which the step model does not know).

12-03 and 12-03* (2026-12-03 12:22 and 12:28 UTC, a 2-core Intel Xeon at 2.0 GHz, the suite
about 2.6 times slower than on the EPYC machines): llama-server's 8-user TTFT measured 36.5 and
38.1 ms, simulated 23.9 and 39.1 ms; the miss came with the closer fit to the three fitted loads
(rms log error 0.086 against 0.126), so it is the model between the loads, not the optimiser.

"one-row" (added after 14:21): ``StepModel.single_row_matmul_factor`` in the fit, the matrix
products of a step of one token row as a multiple of the GEMM line; fitted on both servers at
15:52-15:57, on the toy only (``ONE_ROW_FIT``) from 16:31, because llama-server's timed steps
show no kink and the factor only moved its errors (below). Timed in-process
(``benchmarks/measure_toy_steps.py``, ``data/measurements/toy_small_steps.csv``, 16:02 UTC), a
toy decode step takes 1.43 ms with 1 sequence, 2.63 ms with 2, 3.25 ms with 3 and 3.16 ms with
4; a line in the batch fitted to those steps is 20 % high at 1 and 15 % low at 2, the factor
brings both within 5 %. The three sweeps of 15:52-15:57, refitted offline without the factor
(same start, ``measure_machine``'s peaks from their headers), held-out TTFT/TPOT %: toy
-10.5/-20.1 | -21.2/+9.3, +4.4/-25.7 | -13.0/+1.0, -8.4/-19.4 | -17.3/-0.2; llama-server
-7.9/+24.5 | -16.4/+33.4, -11.8/+1.9 | +0.3/+10.3, -15.0/+9.3 | +1.0/+5.3. So the factor fixes
the toy's 2-user TPOT (-19 ... -26 % without, -3 ... +3 % with) and costs llama-server up to 14
points at a held-out load, within the limit in two of three either way. The fitted factors
(toy, llama-server) on the four sweeps (15:52, 15:55, 15:57 and the saved 01:44 one): 0.50/1.15,
0.45/3.02, 0.61/0.05 and 0.06/0.68. The toy's is a GEMV in numpy (the timed steps fit 0.54);
llama-server's is not a kernel (llama-batched-bench: 0.11, 0.22, 0.40 and 0.87 ms for 1, 2, 4
and 8 sequences, near proportional) but whatever a lone sequence's step costs differently in a
sweep, so the fit puts it anywhere. On the saved 01:44 sweeps (notebook 08's quick fit) the
factor trades: toy 2-user TPOT -25.8 -> +4.7 %, 8-user TTFT -6.7 -> -22.0 %, llama-server 2-user
TPOT +11.5 -> +22.4 %; held at the timed steps' 0.54 the toy's 8-user TTFT is -25.3 %.

"final": send gap, serial request latency, ITL in the fit, 3 starts; 01:13* is the 01:13 sweep
refitted offline with it (a sweep cannot be measured twice). 13:58-14:21 ran on a third,
quieter machine (pure-Python loop 0.59 s), with 16 requests per user in the last two (each ~3.5
min): longer runs did not settle it, the failing figure moved from the 2-user TTFT to the
2-user TPOT. The 2-user TTFT is bimodal (~40 ms beside the other user's decode, ~73 ms behind
its prompt; 6, 7 and 16 of 32 requests in the slow mode in three back-to-back sweeps, p50 41-57
ms). The simulated 2-user TPOT stays 2.51-2.62 ms (measured 3.47) when each simulated step's
time is multiplied by a seeded log-normal factor of 5, 15 or 30 % (a scratch experiment on
data/sweeps/toy_small.csv): the simulated users stay in lockstep with or without step-time
jitter, and the 4-user TPOT, a fitted load, is 21-26 % low in every run, so something the toy
pays at small batches is missing from the step model. It is the batch-2 decode step: stamped
inside the toy server (its ``begin_step`` timed by a scratch wrapper, 8 requests per user,
14:50 UTC), a decode step of 1 running sequence computed in 1.72-1.80 ms, of 2 in 2.90 ms, of 3
in 3.38 ms and of 4 in 3.14 ms (numpy's single-row matmul is a fast GEMV; two rows or more take
the GEMM path: the toy's 128 x 512 ``w_gate`` times 1, 2, 4 and 8 rows took 3.4, 17.1, 15.3 and
20.1 us, one OpenBLAS thread), while the fitted step model, linear in the batch, gives 1.71,
2.26, 2.82 and 3.38 ms: 22 % low at 2. The event loop's turn between steps took 0.16-0.31 ms at
every batch.
"hand-off" (added after the 01:44 run):
the toy server's engine computes each step inside the asyncio event loop that reads the
requests, the loop turns once per step, and aiohttp needs about 4 turns to hand a request over,
so a request sent during a step reaches the engine 4 step ends later. Measured at 08:40 by
stamping the toy's ``begin_step``/``end_step`` and ``submit`` (8 users: 4 step ends for 40 of
54 requests sent during a step, 3 for 12); ``EngineConfig.handoff_steps``, which
``ServeConfig.engine_config()`` sets to 4 in the real-compute mode. That is what the paragraph
below read as waves of 4; with it the 8-user TTFT miss went from -32 % to -7 % (refitted) and
-1 % (live). What it leaves: the 2-user TPOT of the 01:44 sweep (-26 %: in the simulation one
user's requests are always stalled by the other's prompt and the other's never; a 2-user
timeline of the real server starts in that lockstep and drifts out of it after four rounds, its
step times varying by about 15 %), and llama-server's 8-user TTFT, whose measurement moved
10.8-25.3 ms between runs. The older notes follow. It **fails** the 25 % limit: of the
three benchmark runs with the final code, llama-server passes in one (01:44, worst 24.1 %) and
the toy server in none (the 01:13 sweep refitted passes both, worst 23.1 %). The toy server's
p50 TTFT at 8 users comes out 18-32 % low and its TPOT at 8 users up to 41 % high. At 8 users
the toy server runs 4 prompts per step (its 512-token budget), so TTFT is bimodal (~125 ms for a
prompt in the first step of a wave, ~250 ms for the next), its p50 between them. As we read the
timelines (not checked step by step), the real server keeps its users in waves of 4 (every
request that arrives during a step joins the next, in its one asyncio thread), the simulation
spreads them out more (the gap and the serial latency), so more of its requests land in the fast
mode and each decode is stalled by more prefill steps. Under load the sweeps themselves move
10-25 % (llama-server's p50 TTFT at 8 users: 13.4, 13.8, 16.8, 14.5, 15.9, 17.0, 10.8 ms, each
the median of 3 sweeps but the first). The batched-bench route predicts llama-server's TPOT
25-70 % low: batched-bench times the model's compute alone, and on this tiny model the server's
own per-token work (sampling, HTTP streaming, the client on the same two cores) is about as
large.

llama.cpp's KV layout (2026-12-04, a seventh 2-core AMD EPYC machine, the 10-million-addition
loop 0.90 s). With an explicit ``--parallel 8`` and no ``--kv-unified`` each slot has its own KV
stream, and llama.cpp runs a step as one forward pass per run of consecutive busy slots
(``split_equal``; ``llminfer.sim.ubatches``, ``benchmarks/measure_llama_slots.py``); which slots
a load's users hold depends on what the loads and warm-ups before it left least recently used.
The benchmark now starts llama-server with ``--kv-unified`` (one cache: passes of ``n_ubatch``
tokens; what llama-server itself picks when ``--parallel`` is not given) and simulates it as
such; ``--per-slot-kv`` runs the other layout, simulated with ``ubatch_split="equal"``.
Held-out TTFT/TPOT %, tiny GGUF, at 2 | 8 users (end times UTC):

=====================================  ==========================  ===========================
run                                    toy: 2 users | 8 users      llama-server: 2 | 8 users
=====================================  ==========================  ===========================
18:58 ``--servers llama --per-slot-kv``                            -14.6/+2.8 | -43.7/+10.9
18:59 ``--servers llama``                                          +0.8/-8.4 | -1.6/-6.1
18:59 ``--servers llama --per-slot-kv``                            +2.3/-25.7 | +54.7/-12.1
19:00 ``--servers llama``                                          +3.3/-10.3 | -1.8/-3.9
19:01 ``--servers llama --per-slot-kv``                            -0.0/-21.4 | -30.4/+5.7
19:02 ``--servers llama`` (host slower)                            +3.7/-23.5 | +3.8/-15.5
19:07 defaults                         +4.1/-14.8 | +11.5/-8.9     -1.4/-16.8 | -10.2/-11.8
19:09 defaults (spreads 29-133 %)      +5.2/+1.5 | -22.9/+28.5     +22.6/+5.9 | +25.2/-8.0
20:05 defaults                         +27.9/-9.5 | -13.1/+14.9    -1.2/-1.3 | +0.1/-24.8
20:07 defaults                         -0.8/+2.2 | +10.5/-10.9     +10.1/-2.8 | -17.9/-8.2
20:08 defaults                         +1.2/-5.7 | -16.1/+2.7      -11.7/-1.8 | -17.8/-7.2
=====================================  ==========================  ===========================

With a stream per slot the 8-user TTFT missed in all three runs, in both directions (its
simulation starts every load from fresh slots); with one cache llama-server met the limit in
seven of eight runs, the whole benchmark in three of five (the toy server missed the other two:
its bimodal 2-user TTFT, its 8-user TPOT on a slow host).

2026-12-07, an eighth machine (2-core Intel Xeon, the 10-million-addition loop 0.60-0.77 s),
held-out TTFT/TPOT %, toy 2 | 8 users, llama-server 2 | 8 users, worst:
20:26 defaults: +21.6/+0.2 | +5.2/-6.0, +4.7/-0.3 | -1.4/-5.2, 21.6. Then five runs with the
toy's attention scores in float32 (numpy's float64 ``np.sqrt(head_dim)`` had promoted them; a
1,024-token prefill 2.8x faster): worst 18.9, 19.6, 19.9, 14.4, 31.2 %, the toy's 8-user TTFT
-18.9, -19.6, -19.9, -14.4, -31.2 % every time (llama-server within 16.5 % in all five);
reverted, three toy-only runs (``--servers toy``): +6.8/-11.1 | -6.8/-17.4,
+15.9/-9.7 | -11.4/+0.4, +24.7/-19.3 | -5.7/+4.1. The toy stays as its saved sweeps measured it.
Defaults, both servers: worst 15.5, 16.9 and 23.0 % (2026-12-07 23:04 - 12-08 00:04); on
2026-12-08 02:01, 02:03 and 02:05 (the fit's p50s read without tables since, the same numbers):
+15.2/-12.3 | -17.0/+3.4, +4.5/-13.5 | -4.9/-1.5 (worst 17.0); +2.9/-12.2 | +0.2/+2.0,
+14.7/-6.7 | +2.5/-10.7 (14.7); +3.1/-4.4 | +1.8/+2.0, +8.1/-7.0 | -7.3/-6.8 (8.1).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from llminfer.bench import compare_sweeps, sweep_server
from llminfer.bench.fit import (
    LLAMA_SERVER_FIT,
    ONE_ROW_FIT,
    SWEEP_LATENCY_FIT,
    fit_steps,
    fit_sweep,
    measured_send_gap_s,
)
from llminfer.bench.llamacpp import (
    LlamaServer,
    batched_bench_steps,
    find_llama_server,
    read_batched_bench,
    write_tiny_gguf,
)
from llminfer.serve import ServeConfig, ServerProcess, build_model
from llminfer.sim.engines import EngineConfig
from llminfer.sim.workload import Workload
from llminfer.specs.describe import model_from_gguf
from llminfer.specs.hardware import measure_machine

METRICS = ("ttft_s_p50", "tpot_s_p50")
#: The GGUF llama-server runs: "toy" has the toy server's shape (``--preset small``: 16 layers,
#: hidden 128, 4.2 M weights), so a step is the model's work; "tiny" is the suite's (2 layers,
#: hidden 64), whose 0.2 ms decode step is below the client's own time per streamed token.
GGUF_SHAPES = {
    "toy": {"n_layers": 16, "hidden": 128, "n_heads": 4, "n_kv_heads": 2, "intermediate": 512},
    "tiny": {},
}


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def write_sweep(path, measured, workload, per_user, repeats, server, machine) -> None:
    """The measured median table as CSV, with what it was measured on in ``#`` lines."""
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"# {server}: closed-loop sweep measured {when} by benchmarks/bench_fit_sweep.py; "
        f"median over {repeats} sweeps of each p50 (s); read it with llminfer.bench.fit.read_sweep",
        f"# machine = {cpu_name()}, {os.cpu_count()} cores (shared), python "
        f"{platform.python_version()}; numpy peak {machine.fp32_flops / 1e9:.1f} GFLOP/s, "
        f"{machine.memory_bandwidth / 1e9:.1f} GB/s (measure_machine)",
        f"# prompt_tokens = {workload.prompt_tokens}",
        f"# output_tokens = {workload.output_tokens}",
        f"# requests_per_user = {per_user}",
        f"# send_gap_s = {workload.send_gap_s:.6g}",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
        measured.to_csv(f, index=False, float_format="%.6g")


def fit_and_predict(name, url, served_model, workload, model, machine, fit_loads, held_out,
                    per_user, sim_kwargs, bench_kwargs, save=None, save_name="sweep",
                    repeats=3, fit=SWEEP_LATENCY_FIT):  # fmt: skip
    loads = sorted(set(fit_loads) | set(held_out))
    # the whole sweep `repeats` times, one after another, the median of each p50: a busy shared
    # machine moves single sweeps by tens of per cent
    runs, gaps = [], []
    for repeat in range(repeats):
        table, logs = sweep_server(
            url, workload, served_model, concurrencies=loads, requests_per_user=per_user,
            percentiles=(50,), prompt_salt=100 * repeat, **bench_kwargs,
        )  # fmt: skip
        runs.append(table)
        gaps.append(measured_send_gap_s(logs))
    columns = ["concurrency", *METRICS, "itl_s_p50"]
    measured = pd.concat(runs).groupby("concurrency", as_index=False)[columns[1:]].median()
    # the client sends one request at a time: its measured gap between sends, for simulate
    workload = replace(workload, send_gap_s=float(np.median(gaps)))
    if save:
        write_sweep(Path(save) / f"{save_name}.csv", measured, workload, per_user, repeats,
                    name, machine)  # fmt: skip
    measured = measured.set_index("concurrency")
    result = fit_sweep(
        measured.loc[fit_loads].reset_index(), workload, model, machine,
        fit=fit, requests_per_user=per_user, **sim_kwargs,
    )  # fmt: skip
    fitted = result.gpu
    predicted = result.predict(concurrencies=loads).set_index("concurrency")
    sm = fitted.step_model
    print(
        f"{name}: send gap {workload.send_gap_s * 1e3:.2f} ms (measured); fitted "
        f"{fitted.fp32_flops / 1e9:.2f} GFLOP/s effective (numpy measured "
        f"{machine.fp32_flops / 1e9:.1f}), {fitted.memory_bandwidth / 1e9:.2f} GB/s effective "
        f"(numpy {machine.memory_bandwidth / 1e9:.1f}), {sm.layer_overhead_s * 1e6:.0f} us per "
        f"layer per step, one-row factor {sm.single_row_matmul_factor:.2f}; {sm.source}"
    )
    table = compare(name, measured, predicted, loads, fit_loads)
    # how far the sweeps' own p50s spread at each load ((max - min) / median, %): a held-out
    # miss no larger than that is as close as the measurement repeats itself
    spread = (
        pd.concat(runs)
        .groupby("concurrency")[list(METRICS)]
        .agg(lambda v: 100 * (v.max() - v.min()) / v.median())
    )
    for metric in METRICS:
        short = metric.split("_")[0]
        table[f"{short}_spread_pct"] = table["users"].map(spread[metric])
    return table, measured, workload


def compare(name, measured, predicted, loads, fit_loads, held="held out") -> pd.DataFrame:
    """One row per load: measured vs predicted p50 TTFT and TPOT (ms) and the error (%)."""
    table = compare_sweeps(
        measured.loc[loads].reset_index(), predicted.reset_index(), fit_loads, METRICS, held
    )
    table.insert(0, "server", name)
    return table.rename(columns={"concurrency": "users"})


def steps_route(path, parallel, measured, workload, model, machine, fit_loads, loads, per_user,
                sim_kwargs, save=None) -> pd.DataFrame | None:  # fmt: skip
    """The other route: step times from ``llama-batched-bench`` on the same GGUF and thread
    count (``fit_steps``, rows with B <= --parallel, the steps the server can run), then only
    the request latency from the sweep's fit loads. Printed for comparison, not judged."""
    binary = find_llama_server().parent / "llama-batched-bench"
    if not binary.is_file():
        print("llama-batched-bench: skipped, not built")
        return None
    npl = ",".join(str(b) for b in (1, 2, 4, 8, 16) if b <= parallel)
    command = [str(binary), "-m", str(path), "-c", str(1024 * parallel), "-b", "2048"]
    command += ["-ub", "512", "-npp", str(workload.prompt_tokens), "-ntg"]
    command += [str(workload.output_tokens), "-npl", npl, "-t", "1", "--output-format", "jsonl"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=300, check=True).stdout
    if save:
        (Path(save) / "llama_batched_bench_tiny.jsonl").write_text(out)
    steps = batched_bench_steps(read_batched_bench(out))
    weights = {k: sim_kwargs[k] for k in ("weight_dtype", "kv_dtype")}
    stepped = fit_steps(steps, model, machine, **weights)
    result = fit_sweep(
        measured.loc[fit_loads].reset_index(), workload, model, stepped,
        fit=("request_latency_s",), start=stepped.step_model, requests_per_user=per_user,
        **sim_kwargs,
    )  # fmt: skip
    print(
        f"llama-server, steps from llama-batched-bench: {stepped.step_model.source}; then "
        f"from the sweep {result.gpu.step_model.source}"
    )
    predicted = result.predict(concurrencies=loads).set_index("concurrency")
    name = "llama-server (batched-bench steps)"
    return compare(name, measured, predicted, loads, fit_loads, held="info")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", default="1,4,16", help="loads (users) to fit on")
    parser.add_argument("--predict", default="2,8", help="loads to predict")
    parser.add_argument("--per-user", type=int, default=8, help="requests per user per load")
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--output-tokens", type=int, default=32)
    parser.add_argument("--limit", type=float, default=25.0, help="held-out error limit, %%")
    parser.add_argument("--repeats", type=int, default=3, help="sweeps; median p50 per load")
    parser.add_argument("--save", help="folder to write each measured sweep to (CSV)")
    parser.add_argument("--servers", default="toy,llama", help="which servers: toy, llama")
    parser.add_argument(
        "--llama-shape", default="tiny", choices=sorted(GGUF_SHAPES),
        help="the GGUF llama-server runs: the suite's tiny one (default) or the toy server's shape",
    )  # fmt: skip
    parser.add_argument(
        "--no-setup", dest="setup", action="store_false",
        help="llama-server: the model before its task loop (one request handler, no setup)",
    )  # fmt: skip
    parser.add_argument(
        "--per-slot-kv", dest="kv_unified", action="store_false",
        help="llama-server: a KV stream per slot (no --kv-unified: one forward pass per run of "
        "consecutive busy slots, simulated as such) instead of one KV cache for all",
    )  # fmt: skip
    args = parser.parse_args()
    servers = set(args.servers.split(","))
    if not servers or not servers <= {"toy", "llama"}:
        parser.error(f"--servers {args.servers!r}: give toy, llama or toy,llama")
    fit_loads = [int(u) for u in args.fit.split(",")]
    held_out = [int(u) for u in args.predict.split(",")]
    workload = Workload(
        8, concurrency=1, prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens
    )
    machine = measure_machine()
    tables, info = [], None

    if "toy" in servers:
        config = ServeConfig(max_num_seqs=8)
        sim_kwargs = {
            "engine": config.engine_config(),
            "capacity_blocks": config.num_kv_blocks,
            "weight_dtype": "fp32",
            "kv_dtype": "fp32",
        }
        with ServerProcess(["--preset", "small"], shutdown_after=900, config=config) as server:
            table, _, _ = fit_and_predict(
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
                "toy_small",
                repeats=args.repeats,
                # numpy's one-row matmul is a GEMV: the toy's timed steps show the kink
                # (benchmarks/measure_toy_steps.py), so its factor is fitted; llama-server's
                # batched-bench steps show none, so its stays at 1
                fit=(*SWEEP_LATENCY_FIT, *ONE_ROW_FIT),
            )
            tables.append(table)

    if "llama" not in servers:
        pass
    elif find_llama_server() is None:
        print("llama-server: skipped, not built (make llama-server)")
    else:
        parallel = 8
        with tempfile.TemporaryDirectory() as tmp:
            path = write_tiny_gguf(Path(tmp) / "tiny.gguf", **GGUF_SHAPES[args.llama_shape])
            sim_kwargs = {
                # llama.cpp: --parallel slots, one batch of up to n_batch (2048) tokens mixing
                # prompt chunks and decodes, no prefix reuse across the salted prompts; one KV
                # cache for all slots (--kv-unified, what llama-server picks itself when
                # --parallel is not given): passes of n_ubatch tokens; --per-slot-kv: a KV
                # stream per slot, a pass per run of consecutive slots (llminfer.sim.ubatches)
                "engine": EngineConfig(
                    max_num_seqs=parallel,
                    max_num_batched_tokens=2048,
                    chunked_prefill=True,
                    prefix_caching=False,
                    ubatch_split="simple" if args.kv_unified else "equal",
                ),
                "capacity_blocks": 1024 * parallel // 16,
                "weight_dtype": "fp32",
                "kv_dtype": "fp16",
            }
            model = model_from_gguf(path)
            flags = ["--kv-unified"] if args.kv_unified else []
            with LlamaServer(path, flags, parallel=parallel, context=1024 * parallel) as server:
                table, measured, swept = fit_and_predict(
                    f"llama-server ({args.llama_shape}-shaped GGUF)",
                    server.url,
                    "tiny",
                    # its HTTP threads (--parallel + 4 on 2 cores) parse requests side by side;
                    # --no-setup: the model before its task loop, one handler
                    replace(workload, request_handlers=parallel + 4 if args.setup else 1),
                    model,
                    machine,
                    fit_loads,
                    held_out,
                    args.per_user,
                    sim_kwargs,
                    {"warmup": 4, "extra_body": {"ignore_eos": True}},
                    args.save,
                    f"llama_server_{args.llama_shape}",
                    repeats=args.repeats,
                    fit=LLAMA_SERVER_FIT if args.setup else SWEEP_LATENCY_FIT,
                )
            tables.append(table)
            loads = sorted(set(fit_loads) | set(held_out))
            info = steps_route(path, parallel, measured, swept, model, machine, fit_loads,
                               loads, args.per_user, sim_kwargs, args.save)  # fmt: skip
    if info is not None:
        tables.append(info)
    table = pd.concat(tables, ignore_index=True)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    held = table[table["part"] == "held out"]
    errors = held[["ttft_error_pct", "tpot_error_pct"]].abs()
    worst = float(errors.to_numpy().max())
    print(f"worst held-out error: {worst:.1f} % (limit {args.limit:.0f} %)")
    if args.repeats > 1:
        within = errors.to_numpy() <= held[["ttft_spread_pct", "tpot_spread_pct"]].to_numpy()
        print(
            f"held-out errors within the {args.repeats} sweeps' own spread of that p50: "
            f"{int(within.sum())} of {within.size}"
        )
    return 1 if worst > args.limit else 0


if __name__ == "__main__":
    sys.exit(main())
