"""Write notebooks/07_troubleshooting.ipynb's cells from the package's own numbers.

Usage: PYTHONPATH=. python scripts/build_07.py   (then scripts/run_notebooks.py executes it)

Every number the prose quotes is computed here by llminfer — the same calls the notebook's code
cells make — and written twice: into the prose, and into an ``assert`` in the cell that computes
it, so an executed notebook whose figures drift fails its own checks. The case logs in data/ must
be current (scripts/make_case_studies.py) and the real-engine logs present
(scripts/make_real_engine_logs.py).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import nbformat
import pandas as pd

from llminfer import get_gpu, get_model, read_requests, summarize
from llminfer.cost.roofline import step_cost
from llminfer.diagnose.cases import (
    CASE_PROFILE,
    CASE_SLO,
    CASE_STUDIES,
    HOL_THRESHOLD,
    REAL_CASE_LOGS,
    REAL_CASE_RATES,
    REAL_CASE_SLO,
)
from llminfer.diagnose.measurement import (
    CLOSED_LOOP_SHARE,
    DRAIN_SHARE,
    arrival_window_rates,
    load_sweep,
    measurement_step,
    sweep_verdict,
)
from llminfer.diagnose.run import diagnose
from llminfer.diagnose.scrape import read_scrape
from llminfer.diagnose.signals import completion_rate, time_windows
from llminfer.exercises import exercise
from llminfer.logs.metrics import request_metrics
from llminfer.sim.simulate import simulate
from llminfer.sim.workload import LogNormal, Workload

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"
cells: list = []


def md(text: str) -> None:
    cells.append(nbformat.v4.new_markdown_cell(text.strip("\n")))


def code(text: str) -> None:
    cells.append(nbformat.v4.new_code_cell(text.strip("\n")))


def pct(x: float) -> str:
    """A share as the notebook prints it: one decimal, trailing .0 dropped."""
    s = f"{x * 100:.1f}"
    return s[:-2] if s.endswith(".0") else s


def r2(x: float) -> float:
    return round(float(x), 2)


def ms1(x: float) -> float:
    return round(float(x) * 1000, 1)


def case_log(name: str):
    return read_requests(DATA / CASE_STUDIES[name].data_file)


def report_of(name: str):
    c = CASE_STUDIES[name]
    return diagnose(case_log(name), slo=CASE_SLO, **c.deployment.diagnose_kwargs())


# --- title ------------------------------------------------------------------------------------

md("""
# 07 · A reusable troubleshooting order
一套可复用的排查顺序

The article breaks off before its last chapter. This notebook writes it: a fixed order of
questions that turns "inference is slow" into one named cause, using only what chapters 2–6
built. The order matters because bottlenecks hide each other — a full KV cache shows up as a
long queue, a queue behind long prompts looks like slow prefill, and an average over a whole run
hides the ten minutes in which the service fell over.

The procedure is code: `llminfer.diagnose.measurement.measurement_step(log)` checks the
measurement itself (step 0), `llminfer.diagnose.run.diagnose(log, ...)` runs steps 1–7 on a
request log and returns a **verdict** (`ok`, `problem` or `not_enough_data`), a **cause** from a
fixed list, and suggestions that fit the deployment — **cheapest first**, each saying what it
costs — and `load_sweep` reads one log per offered load.

**Before you start.** You need chapter 3 (TTFT, TPOT, percentiles), chapter 4 (the KV-cache
budget), chapter 5 (the simulator, continuous batching, chunked prefill) and chapter 6 (reading
request logs). **Time:** about 80 minutes for a first pass — some 6,500 words of prose (45 min at
150 words a minute), the reports and tables of 46 code cells (10 min; they run in under a minute
in all) and the five questions (25 min). In a 45-minute workshop slot, take sections 0–4, the
overloaded, long-prompt and head-of-line cases and the real-engine case, and leave the other
cases and the questions for afterwards.

| article (中文) | here | symbol · unit |
|---|---|---|
| 排查顺序 | troubleshooting order | — |
| 瓶颈 | bottleneck, *cause* | one of `CAUSES` |
| 首个输出 Token 的时间（首字） | time to first token | TTFT · s |
| 相邻输出 Token 的平均间隔 | time per output token | TPOT · ms |
| 调度队列、排队 | waiting (arrival → scheduled) | queue · s |
| Prefill / Decode | prefill / decode | s, ms per token |
| 并发 | requests decoding together | requests |
| 显存 | GPU memory | GiB |
| KV Cache | KV cache (usage, preemptions) | tokens, share 0–1 |
| 系统吞吐 | throughput (served rate) | requests/s |
| 张量并行 | tensor parallelism | TP · GPUs |
| 量化 | quantisation | bits per weight |
| Prefill/Decode 分离 | disaggregation | — |
| *(not in the article)* 抢占 | preemption (evict, then recompute) | count |
| *(not in the article)* 副本 | replica | count |
""")

code("""
from dataclasses import replace

import pandas as pd

from llminfer import get_gpu, get_model, read_requests, summarize
from llminfer.cli import DIAGNOSE_EXIT
from llminfer.cli import main as llminfer_cli
from llminfer.cost.roofline import step_cost
from llminfer.diagnose.cases import (
    CASE_PROFILE,
    CASE_SLO,
    CASE_STUDIES,
    HOL_THRESHOLD,
    REAL_CASE_LOGS,
    REAL_CASE_RATES,
    REAL_CASE_SLO,
    V0_ENGINE,
    V1_ENGINE,
)
from llminfer.diagnose.findings import CAUSES, STEPS
from llminfer.diagnose.measurement import (
    CLOSED_LOOP_SHARE,
    DRAIN_SHARE,
    arrival_window_rates,
    load_sweep,
    measurement_step,
    sweep_verdict,
)
from llminfer.diagnose.procedure import (
    DEFAULT_SLO,
    KV_FULL_SHARE,
    LONG_PROMPT_SPREAD,
    MIN_REQUESTS,
    PREFILL_CONCENTRATION,
    STAGE_SHARE,
    causes_table,
    procedure_table,
)
from llminfer.diagnose.run import diagnose
from llminfer.diagnose.scrape import read_scrape
from llminfer.diagnose.signals import (
    MIN_WINDOW_REQUESTS,
    completion_rate,
    decoding_together,
    in_flight_at_arrival,
    time_windows,
)
from llminfer.diagnose.suggestions import COSTS
from llminfer.exercises import check, exercise
from llminfer.logs.metrics import request_metrics
from llminfer.plots import before_after_cdf
from llminfer.serve import ServeConfig
from llminfer.sim.simulate import simulate
from llminfer.sim.workload import LogNormal, Workload
from llminfer.widgets import DiagnosisExplorer

pd.set_option("display.max_colwidth", 110)
""")

# --- step 0 -----------------------------------------------------------------------------------

heavy = read_requests(DATA / REAL_CASE_LOGS["heavy"])
step0_heavy = measurement_step(heavy, intended_rps=REAL_CASE_RATES["heavy"])
closed_w = Workload(
    300,
    concurrency=32,
    prompt_tokens=LogNormal(1024, 0.5, 16, 8192),
    output_tokens=LogNormal(256, 0.5, 8, 2048),
    seed=2,
)
closed = simulate(closed_w, get_model("llama-3.1-8b"), get_gpu("h100-sxm"), profile=CASE_PROFILE)
step0_closed = measurement_step(closed.requests.drop(columns=["token_ts"]))
over_log = case_log("overloaded")
step0_over = measurement_step(over_log)
over_rates = arrival_window_rates(over_log)
closed_rates = arrival_window_rates(closed.requests.drop(columns=["token_ts"]))
closed_released = step0_closed.loc["load_generator", "evidence"]["released_by_an_end_share"]
closed_waiting_max = int(closed.steps["waiting"].max())
assert step0_closed.loc["load_generator", "verdict"] == "warn"
assert step0_over.loc["drain", "verdict"] == "warn"
assert step0_heavy.loc["clocks", "verdict"] == "cant_tell"
assert (step0_heavy.loc[["warm_up", "drain", "load_generator"], "verdict"] == "ok").all()

md(f"""
## 0. Before the order: is the measurement sound?

A diagnosis is only as good as the log it reads. Four things go wrong before any server does
(`measurement_step`, one row each):

- **Clocks.** Arrival, first token and end must come from one clock. A client's arrival and a
  server's `scheduled_ts` come from two: every wait computed between them is off by their offset
  (network included). A client-side log (what benchmark tools write) has no `scheduled_ts` at
  all, so the check says *can't tell*.
- **Warm-up.** The first requests of a run meet cold caches, JIT compilation and CUDA-graph
  capture. Send them apart (`llminfer bench --warmup N`) or drop them.
- **Drain.** After the last arrival the load falls while the last requests finish. GenAI-Perf,
  AIPerf and `vllm bench serve` divide by first request → last response, so their rates count the
  drain; quote rates over the **arrival window** (first → last arrival) instead
  (`arrival_window_rates`). The check warns when the drain is more than
  {DRAIN_SHARE:.0%} of the arrival window.
- **The load generator.** An open-loop client that cannot send at the asked rate saturated
  before the server. A **closed loop** (N users, each waiting for its answer before sending
  again) is different: its throughput at saturation *is* the capacity, but the queue stays in the
  client — the server's queue can never hold more than N requests, so it cannot *grow*, and the
  TTFT it reports is not what users arriving at that rate would see. The check names a closed
  loop when more than {CLOSED_LOOP_SHARE:.0%} of requests start as another one ends.

Three logs: the real toy server under an open loop (section "A case measured on a real engine"
below), the overloaded case (simulated, "{CASE_PROFILE}" profile), and 32 simulated closed-loop
users on one H100 ("{CASE_PROFILE}" profile).
""")

code(f"""
heavy_log = read_requests("../data/" + REAL_CASE_LOGS["heavy"])
over_log = read_requests("../data/case_overloaded.csv")
closed_run = simulate(
    Workload(
        300,
        concurrency=32,
        prompt_tokens=LogNormal(1024, 0.5, 16, 8192),
        output_tokens=LogNormal(256, 0.5, 8, 2048),
        seed=2,
    ),
    get_model("llama-3.1-8b"),
    get_gpu("h100-sxm"),
    profile=CASE_PROFILE,
)
closed_log = closed_run.requests.drop(columns=["token_ts"])
step0 = pd.concat(
    {{
        "real toy server, heavy load": measurement_step(
            heavy_log, intended_rps=REAL_CASE_RATES["heavy"]
        ),
        "overloaded case": measurement_step(over_log),
        "32 closed-loop users": measurement_step(closed_log),
    }}
)
# check: the verdicts, thresholds and numbers quoted below
assert (DRAIN_SHARE, CLOSED_LOOP_SHARE) == ({DRAIN_SHARE}, {CLOSED_LOOP_SHARE})
v = step0["verdict"]
assert v["real toy server, heavy load", "clocks"] == "cant_tell"
assert (v["real toy server, heavy load"].loc[["warm_up", "drain", "load_generator"]] == "ok").all()
assert v["overloaded case", "drain"] == "warn"
assert (v["32 closed-loop users"].loc[["load_generator", "warm_up"]] == "warn").all()
over_rates = arrival_window_rates(over_log)
assert round(over_rates["offered_rps"], 1) == {round(over_rates["offered_rps"], 1)}
assert round(over_rates["served_rps"], 1) == {round(over_rates["served_rps"], 1)}
assert round(over_rates["whole_run_rps"], 1) == {round(over_rates["whole_run_rps"], 1)}
assert round(over_rates["drain_s"]) == {round(over_rates["drain_s"])}
assert round(over_rates["window_s"]) == {round(over_rates["window_s"])}
assert int(closed_run.steps["waiting"].max()) == {closed_waiting_max} < 32
step0[["verdict", "action"]]
""")

md(f"""
The overloaded case's arrivals last {over_rates["window_s"]:.0f} s at
{over_rates["offered_rps"]:.1f} requests/s; its server completes only
{over_rates["served_rps"]:.1f}/s inside that window and needs {over_rates["drain_s"]:.0f} s more
to drain the queue — a rate over the whole run ({over_rates["whole_run_rps"]:.1f}/s) mixes the
two. The closed loop never had more than {closed_waiting_max} requests waiting in the server:
whatever its users would have experienced at a higher arrival rate, this log cannot show it. Its
32 users also all start at once, so its first requests meet a burst, which the warm-up check
flags the same way: trim them.

**Takeaway:** check the clock, trim warm-up, quote the arrival window, and know whether your load
generator was open or closed — before reading a single latency.
""")

# --- the order --------------------------------------------------------------------------------

md("""
## 1. The order

Seven steps, each a question, the measurement that answers it, a rule, the fewest requests it
needs, and the chapter that explains it:

1. **Workload** — at least 50 successful requests, or p90 rests on a handful of values: the
   verdict is then *not enough data*, never *ok*.
2. **Failures** — more than 1 % failed (of at least 20 requests) and the latency figures
   describe only the survivors.
3. **Memory** — preemptions (in the log or the server's `/metrics`), the server's KV usage, or
   tokens in flight at 95 % of chapter 4's capacity: the cache is full (`kv_pressure`), and the
   queue downstream is its symptom.
4. **Queueing** and 5. **prefill** split TTFT into *waiting* (arrival → scheduled) and the
   prompt's *own prefill*. Among the requests that miss the TTFT target, whichever stage is most
   of their TTFT for more than half of them is the problem. Waiting is `overload` when a time
   window shows the queue growing, `head_of_line` when the server keeps up on average but the
   prompts queued ahead of the slow requests are long; own prefill too long even without a
   queue is `too_slow`.
6. **Decode** — TPOT at low load (the quietest requests) against the target: missing it there
   is `too_slow`. Otherwise, what sets the slow requests apart — a bigger batch (`overload`) or
   more prefill work during their decode than the median request (`interference`)?
7. **Saturation** — arrivals against completions and the queue, window by window.

Step 0 comes before them (section 0), and a **load sweep** after them: one log per offered load
(`load_sweep`, in the real-engine case below), because one log shows one load.
""")

code("""
# check: the thresholds quoted above are the ones the code uses
assert list(procedure_table().index) == list(STEPS)
assert (MIN_REQUESTS, KV_FULL_SHARE, STAGE_SHARE) == (50, 0.95, 0.5)
assert procedure_table().loc["failures", "min_requests"] == 20
assert procedure_table().loc["failures", "rule"] == "failures above 1%"
procedure_table()
""")

md("""
**Takeaway:** memory before queueing, TTFT before TPOT — fix the earliest problem first,
because it causes the later ones.

## 2. Verdicts and causes

A report has one overall verdict, derived from the steps and never contradicting them: `problem`
when a step found one, `not_enough_data` when there are too few requests to judge, `ok` only when
the targets are met with enough data. A program reads `report.verdict` and `report.cause`; the
command line turns the verdict into its exit status.
""")

code("""
# check: the causes the issue asks for are all there
assert {"overload", "head_of_line", "interference", "kv_pressure", "too_slow", "failures"} <= set(
    CAUSES
)
assert DIAGNOSE_EXIT == {"ok": 0, "problem": 1, "bad input": 2, "not_enough_data": 3}
causes_table()
""")

# --- signals ----------------------------------------------------------------------------------

oc = CASE_STUDIES["overloaded"]
om = request_metrics(over_log)
ramp_m = request_metrics(case_log("ramp"))
windows = time_windows(ramp_m, (ramp_m["status"] == "ok").to_numpy(), CASE_SLO)
first_over = int(windows.index[windows["overloaded"]][0]) + 1
assert first_over == exercise("07.4").answer()

md(f"""
## 3. Signals, measured the right way

Two counts are easy to confuse. *Requests in flight* counts everything between arrival and end,
queued requests included; *requests decoding together* counts only those between their first
token and their end — the batch their decode steps actually ran at. Under overload the two part
ways: the queue swells the first while the second stays capped by the engine's `max_num_seqs`
({oc.deployment.engine.max_num_seqs} here). And a whole-run average hides a ramp: the run is cut
into windows of arrival time (at least 30 arrivals each on average, at most ten), and a window
whose queue grows is named in the evidence.
""")

code("""
overloaded_engine = CASE_STUDIES["overloaded"].deployment.engine
over_metrics = request_metrics(over_log)
counts = pd.DataFrame(
    {
        "in flight at arrival": in_flight_at_arrival(over_log),
        "decoding together": decoding_together(over_metrics),
    }
)
# check: in the overloaded service the crowd outgrows the batch, which max_num_seqs caps
assert counts["in flight at arrival"].median() > 1.5 * counts["decoding together"].median()
assert counts["decoding together"].max() <= overloaded_engine.max_num_seqs
assert counts["in flight at arrival"].max() > 2 * overloaded_engine.max_num_seqs
assert overloaded_engine.max_num_seqs == 256
counts.describe(percentiles=[0.5, 0.9]).round(1)
""")

code(f"""
ramp_log = read_requests("../data/case_ramp.csv")
ramp_metrics = request_metrics(ramp_log)
windows = time_windows(ramp_metrics, (ramp_metrics["status"] == "ok").to_numpy(), CASE_SLO)
# check: the ramp's overload is found in its tail, not at its start
assert MIN_WINDOW_REQUESTS == 30 and len(windows) == 10
assert int(windows.index[windows["overloaded"]][0]) + 1 == {first_over}
assert not windows["overloaded"].iloc[:5].any()
windows.round(3)
""")

md(f"""
Traffic ramps from 3 to 25 requests/s over about 80 s. The first windows are quiet; from window
{first_over} of 10 the queue grows from window edge to window edge and TTFT p90 climbs — the
whole-run numbers would blur that into one mediocre average.

**Takeaway:** count the batch, not the crowd, and look at the run window by window.
""")

# --- targets and cases ------------------------------------------------------------------------

md(f"""
## 4. Targets, cases and cures

"Slow" only means something against a target. The services below share one: TTFT p90 within
**1 s**, then TPOT p90 within **20 ms** (50 tokens/s per user). Without `slo=`, `diagnose`
assumes an interactive 500 ms / 50 ms. Every service is simulated by chapter 5's engine from a
seed, with its engine settings spelled out, and the **"{CASE_PROFILE}" step-time profile**
(the measured kernels with split-KV decode attention and CUDA graphs, as vLLM runs them);
`scripts/make_case_studies.py` wrote their logs to `data/`. Two engines:

- **V0-like**: chunked prefill off, as vLLM V0 (up to 0.10) ran by default for contexts up to
  32k tokens: a prompt's whole prefill is one step, and every decode waits for it.
- **V1-like**: chunked prefill on with 2,048-token steps, as vLLM V1 runs by default (0.11.0
  even forces it on: "V1 always uses chunked prefills", `vllm/engine/arg_utils.py`). 2,048 is
  `vllm serve`'s default step budget on an A100 or a smaller GPU; on an H100 it is 8,192
  (0.33.0 `EngineArgs.get_batch_defaults`), so these V1-like cases set it lower on purpose.

Both leave **prefix caching off**. vLLM V1 turns it on by default, but these workloads' prompts
share no prefix (every request's `prefix_group` is −1, checked below), so it would change no
number here; that is why a report may still list
`--enable-prefix-caching` among the things to try — on your own V1 server it is already on.

Every simulated figure below is over **all requests of the case's run**: each arrived in the
arrival window, and a latency percentile counts each request once, whenever it finished. A
*rate* is quoted over the arrival window (section 0), except where the saturation step and the
load sweep count completions over their middle 80 % (`completion_rate`); the text says which.

**Cures, cheapest first, one change at a time.** `suggest` orders its suggestions by cost
(`COSTS`): an engine **setting** on the same hardware, then **software** (another checkpoint or a
draft model, with accuracy to re-check), then **hardware** (more GPUs). Each case's *cure table*
(`CaseStudy.cure_table()`) tries them in that order on the same seeded workload and stops at the
first that brings the verdict to `ok`.
""")

code("""
cases = pd.DataFrame(
    {
        name: {
            "story": c.story,
            "expected cause": c.expected or "—",
            "chunked prefill": c.deployment.engine.chunked_prefill,
            "profile": c.deployment.profile,
            "tries": len(c.tries()),
        }
        for name, c in CASE_STUDIES.items()
    }
).T
# check
assert CASE_SLO == {"ttft_s": 1.0, "tpot_s": 0.020}
assert DEFAULT_SLO == {"ttft_s": 0.5, "tpot_s": 0.05}
assert len(CASE_STUDIES) == 9 and list(COSTS) == ["setting", "software", "hardware"]
assert (V0_ENGINE.chunked_prefill, V1_ENGINE.chunked_prefill) == (False, True)
assert set(cases["profile"]) == {CASE_PROFILE} == {"vllm"}
assert all(not c.deployment.engine.prefix_caching for c in CASE_STUDIES.values())
for c in CASE_STUDIES.values():  # no request shares a prefix with another
    assert (pd.read_csv("../data/" + c.data_file)["prefix_group"] == -1).all()
cases
""")


def case_section(name: str, title: str, intro: str, found: str, after_table: str) -> dict:
    """The cells of one case: intro, report (+ checks), cure table (+ checks), CDF, takeaway."""
    c = CASE_STUDIES[name]
    report = report_of(name)
    keys = [s.key for s in report.suggestions]
    table = c.cure_table()
    md(f"## Case: {title}\n\n{intro}")
    var = name
    code(
        f"""
{var} = CASE_STUDIES["{name}"]
{var}_log = read_requests("../data/{c.data_file}")
{var}_report = diagnose({var}_log, slo=CASE_SLO, **{var}.deployment.diagnose_kwargs())
print({var}_report)
# check: the cause, and suggestions (cheapest first) that fit the deployment
assert {var}_report.verdict == "{report.verdict}" and {var}_report.cause == {var}.expected
assert [s.key for s in {var}_report.suggestions] == {keys!r}
"""
        + found
    )
    if not c.fix:
        return {"report": report, "table": table}
    quoted = [
        (r2(r.ttft_s_p90), ms1(r.tpot_s_p90), round(r.good_fraction * 100, 1))
        for r in table.itertuples()
    ]
    checks = [
        "quoted = [(round(r.ttft_s_p90, 2), round(r.tpot_s_p90 * 1e3, 1), "
        "round(r.good_fraction * 100, 1)) for r in t.itertuples()]",
        f"assert quoted == {quoted!r}  # TTFT p90 s, TPOT p90 ms, % meeting both",
    ]
    verdicts = list(table["verdict"])
    code(
        "# cures, cheapest first, one change at a time (same workload, same seed)\n"
        f"{var}_cures = {var}.cure_table()\n"
        f"t = {var}_cures\n"
        "# check: the numbers quoted below\n"
        + "\n".join(checks)
        + f"\nassert list(t['verdict']) == {verdicts!r}\n"
        f"{var}_cures.round(4)"
    )
    code(f"""
{var}_after = read_requests({var}.requests({var}.fixed_deployment))
before_after_cdf(
    {var}_log, {var}_after, slo=CASE_SLO, title="{title}: as found and cured"
)
""")
    md(after_table)
    return {"report": report, "table": table}


def row(table, i):
    t = table.iloc[i]
    return t.ttft_s_p90, t.tpot_s_p90, t.good_fraction


# healthy
healthy = case_section(
    "healthy",
    "A healthy service",
    "Short chat requests at 4 per second. Running the procedure on a healthy log shows what *ok* "
    "looks like: the report says so instead of inventing a problem.",
    "assert healthy.workload.rate == 4\n",
    "",
)
md("**Takeaway:** a healthy log passes: the procedure is a checklist that can come back clean.")

# overloaded
t = CASE_STUDIES["overloaded"].cure_table()
b, f8, tp = row(t, 0), row(t, 1), row(t, 2)
case_section(
    "overloaded",
    "Overloaded: arrivals above the service rate",
    "After a launch, 21 requests per second arrive. TTFT is many seconds; the queueing step "
    "measures the waiting and the windows show the queue growing from the start. (A window's "
    "*served* rate counts the requests that finished in it; in the first windows few have, since "
    "each takes seconds to decode its ~256 tokens, so it understates the server early on — the "
    "queue growing from one window edge to the next is the sign to trust.)",
    "assert overloaded.workload.rate == 21\n",
    f"""
**Takeaway:** the report lists no setting for a queue that grows; its cheapest change, FP8 weights
(software), makes each step faster — TTFT p90 {b[0]:.2f} s → {f8[0]:.2f} s — but TPOT p90 stays
at {ms1(f8[1])} ms and only {pct(f8[2])} % of requests meet both targets. TP = 2 (hardware) does:
TTFT p90 {tp[0]:.2f} s, TPOT p90 {ms1(tp[1])} ms, {pct(tp[2])} % meeting both.
""",
)

# long prompts
lp = CASE_STUDIES["long_prompts"]
lp_report = report_of("long_prompts")
lp_req = case_log("long_prompts").requests
own = (lp_req["first_token_ts"] - lp_req["scheduled_ts"]).max()
t = lp.cure_table()
b, ch, f8 = row(t, 0), row(t, 1), row(t, 2)
lp_prefill_ev = lp_report.finding("prefill").evidence
lp_p90_tokens = int(lp_prefill_ev["input_tokens_p90"])
lp_p90_prefill = float(lp_prefill_ev["estimated_prefill_at_p90_prompt_s"])
lp_parts = step_cost(get_model("llama-3.1-8b"), 1, lp_p90_tokens, 0).parts
lp_attn_share = lp_parts.prefill_attention_flops / (
    lp_parts.linear_flops + lp_parts.prefill_attention_flops
)
lp_fp8_ratio = (1 - lp_attn_share) / 2 + lp_attn_share
tp4 = summarize(
    read_requests(lp.requests(replace(lp.deployment, n_gpus=4))), slo=CASE_SLO, percentiles=(90,)
).to_dict()
case_section(
    "long_prompts",
    "Long prompts: too slow for the TTFT target",
    f"""
Document Q&A, 6k–32k-token prompts, one request every two seconds, on a V0-like engine (no
chunked prefill; a server started with `--max-model-len 32768`, so every prompt is prefilled in
one step). Load is light and yet TTFT misses: the slow requests' TTFT is mostly their own
prefill (up to {own:.1f} s), which no scheduling can shorten. The decode step finds a second
problem: each of those prefills stalls every request decoding meanwhile. The report's primary
cause is the earliest step's: `too_slow`. Its first suggestion, prefix caching, does not apply
here (the documents share no prefix), so the cure table starts with the decode step's setting.
""",
    f"""assert long_prompts.workload.rate == 0.5
assert long_prompts_report.finding("decode").cause == "interference"
own = (long_prompts_log.requests.eval("first_token_ts - scheduled_ts")).max()
assert round(own, 1) == {round(own, 1)}
""",
    f"""
**Takeaway:** chunked prefill (a setting) spreads the stalls but cures neither target — TTFT p90
{ch[0]:.2f} s, TPOT p90 {ms1(ch[1])} ms: every step that carries a 2,048-token chunk of a
32k-token prompt is itself slow, and the decodes share it. FP8 weights (software, accuracy to
re-check) run the linear layers on FP8 tensor cores (twice the BF16 FLOP/s on an H100) and halve
the weight bytes of every decode step:
TTFT p90 {b[0]:.2f} s → {f8[0]:.2f} s, TPOT p90 {ms1(b[1])} ms → {ms1(f8[1])} ms,
{pct(b[2])} % → {pct(f8[2])} % of requests meeting both targets, verdict `ok` — **in the
simulator**. Read that TTFT with care: the step model runs the prompts' attention at the FP8 rate
too, while an FP8 checkpoint in vLLM quantises the linear layers only; attention stays BF16
unless the KV cache is FP8 as well and the attention kernel computes in FP8. At the p90 prompt
({lp_p90_tokens:,} tokens) attention is {lp_attn_share:.0%} of the prefill FLOPs (cell above), so
FP8 linear layers alone cut the prefill to no less than about {lp_fp8_ratio:.2f}× its BF16 time,
not 0.5× — the report's estimated {lp_p90_prefill:.2f} s at that prompt to about
{lp_p90_prefill * lp_fp8_ratio:.2f} s, close to the 1 s target: measure it before relying on it.
Four GPUs (TP = 4) would do more (TTFT p90 {tp4["ttft_s_p90"]:.2f} s, TPOT p90
{ms1(tp4["tpot_s_p90"])} ms, {pct(tp4["good_fraction"])} %) at four times the GPUs, and rest on
no such assumption.
""",
)
cells.insert(
    len(cells) - 1,
    nbformat.v4.new_code_cell(
        f"""
# check: TP = 4 alone, the hardware that would also cure it
tp4 = summarize(
    read_requests(long_prompts.requests(replace(long_prompts.deployment, n_gpus=4))),
    slo=CASE_SLO,
    percentiles=(90,),
).to_dict()
assert round(tp4["ttft_s_p90"], 2) == {r2(tp4["ttft_s_p90"])}
assert round(tp4["tpot_s_p90"] * 1e3, 1) == {ms1(tp4["tpot_s_p90"])}
assert round(tp4["good_fraction"] * 100, 1) == {round(tp4["good_fraction"] * 100, 1)}
# check: attention's share of the p90 prompt's prefill FLOPs, which FP8 linear layers leave as
# they are (the step model speeds it up too)
p90_prompt = int(long_prompts_report.finding("prefill").evidence["input_tokens_p90"])
parts = step_cost(get_model("llama-3.1-8b"), 1, p90_prompt, 0).parts
attn_share = parts.prefill_attention_flops / (parts.linear_flops + parts.prefill_attention_flops)
fp8_ratio = (1 - attn_share) / 2 + attn_share  # linear layers twice as fast, attention as before
est = long_prompts_report.finding("prefill").evidence["estimated_prefill_at_p90_prompt_s"]
assert p90_prompt == {lp_p90_tokens} and round(attn_share, 2) == {round(lp_attn_share, 2)}
assert round(fp8_ratio, 2) == {round(lp_fp8_ratio, 2)}
assert round(est, 2) == {round(lp_p90_prefill, 2)}
assert round(est * fp8_ratio, 2) == {round(lp_p90_prefill * lp_fp8_ratio, 2)}
""".strip()
    ),
)

# kv exhausted
t = CASE_STUDIES["kv_exhausted"].cure_table()
b, fx = row(t, 0), row(t, 1)
kv_mem = report_of("kv_exhausted").finding("memory").evidence
case_section(
    "kv_exhausted",
    "KV cache exhausted: preemptions",
    "A summariser on an H100 the engine may use only 28 % of. TTFT explodes. The queue is "
    "enormous — but the procedure stops earlier, at memory: the cache ran out, requests were "
    "preempted and recomputed.",
    "assert kv_exhausted.deployment.engine.gpu_memory_utilization == 0.28\n"
    'mem = kv_exhausted_report.finding("memory").evidence\n'
    f'assert mem["preemptions"] == {kv_mem["preemptions"]}\n'
    f'assert round(mem["peak_share_of_capacity"] * 100) == '
    f"{round(kv_mem['peak_share_of_capacity'] * 100)}\n",
    f"""
How can tokens in flight reach {kv_mem["peak_share_of_capacity"]:.0%} of a cache that holds
{kv_mem["kv_capacity_tokens"]:,} tokens? They are the log's estimate of *demand*: a request is
counted as holding its prompt and answer so far from its first scheduling to its end, the time it
spent evicted included. The cache itself never holds more than its capacity; the
{kv_mem["preemptions"]} preemptions are the measured sign that demand passed it. (In vLLM V1 a
preempted request frees all its blocks and later recomputes its prefill; V0 could also swap
them to CPU memory.)

**Takeaway:** the first, cheapest suggestion is a setting, and it cures: TTFT p90
{b[0]:.2f} s → {fx[0]:.2f} s, {pct(b[2])} % → {pct(fx[2])} % of requests meeting both targets.
""",
)

# prefill interference
pi_rep = report_of("prefill_interference")
ev = pi_rep.finding("decode").evidence
t = CASE_STUDIES["prefill_interference"].cure_table()
b, fx = row(t, 0), row(t, 1)
pi_fixed = CASE_STUDIES["prefill_interference"]
pi_after_ev = (
    diagnose(
        read_requests(pi_fixed.requests(pi_fixed.fixed_deployment)),
        slo=CASE_SLO,
        **pi_fixed.fixed_deployment.diagnose_kwargs(),
    )
    .finding("decode")
    .evidence
)
case_section(
    "prefill_interference",
    "Decode stalled by other prompts' prefill",
    "30 % of requests paste an 8k-token document, chunked prefill is off: every request decoding "
    "while such a prompt is prefilled waits for the whole prefill. With the simulator's per-token "
    "times (`token_ts`) the decode step no longer has to infer this: it finds the stalls in the "
    "token streams — gaps far longer than the median gap — checks that other requests' prefills "
    "ran during them, and asks what TPOT would be with each stall shortened to a median gap.",
    f"""assert not prefill_interference.deployment.engine.chunked_prefill
before = prefill_interference_report.finding("decode").evidence
assert round(before["itl_s_p99"] * 1000) == {round(ev["itl_s_p99"] * 1000)}
assert before["stalls"] == {ev["stalls"]}
assert round(before["stalls_in_prefill_share"], 2) == {round(ev["stalls_in_prefill_share"], 2)}
no_stalls = before["tpot_p90_without_stalls_s"]
assert round(no_stalls * 1000, 1) == {ms1(ev["tpot_p90_without_stalls_s"])}
""",
    f"""
**Takeaway:** turning chunked prefill on (a setting, 384-token steps: a document is split over
~21 steps) brings TPOT p90 from {ms1(b[1])} ms to {ms1(fx[1])} ms and the share meeting both
targets from {pct(b[2])} % to {pct(fx[2])} %. The stalls are where it shows: p99 ITL falls from
{round(ev["itl_s_p99"] * 1000)} ms to {round(pi_after_ev["itl_s_p99"] * 1000)} ms and the
{ev["stalls"]} stalls ({ev["stalls_in_prefill_share"]:.0%} of them during another request's
prefill) go to {pi_after_ev["stalls"]}. TPOT moves less than ITL: with each stall
shortened to a median gap TPOT p90 would have been {ms1(ev["tpot_p90_without_stalls_s"])} ms, and
chunking spreads the documents' prefill work over many steps rather than removing it — their
TTFT p90 rises from {b[0]:.2f} s to {fx[0]:.2f} s.
""",
)
cells.insert(
    len(cells) - 1,
    nbformat.v4.new_code_cell(
        f"""
# check: the stalls before and after
after = diagnose(
    prefill_interference_after,
    slo=CASE_SLO,
    **prefill_interference.fixed_deployment.diagnose_kwargs(),
).finding("decode").evidence
assert round(after["itl_s_p99"] * 1000) == {round(pi_after_ev["itl_s_p99"] * 1000)}
assert after["stalls"] == {pi_after_ev["stalls"]}
chunk = prefill_interference.fixed_deployment.engine.max_num_batched_tokens
assert chunk == 384 and round(8000 / chunk) == 21
""".strip()
    ),
)

# head of line
hol = CASE_STUDIES["head_of_line"]
t = hol.cure_table()
b, fx = row(t, 0), row(t, 1)
hol_before = request_metrics(case_log("head_of_line"))
hol_after = request_metrics(read_requests(hol.requests(hol.fixed_deployment)))
long_b = hol_before[hol_before.input_tokens > 10000].ttft_s.mean()
long_a = hol_after[hol_after.input_tokens > 10000].ttft_s.mean()
short_b = hol_before[hol_before.input_tokens < 10000].ttft_s.quantile(0.9)
short_a = hol_after[hol_after.input_tokens < 10000].ttft_s.quantile(0.9)
short_b50 = hol_before[hol_before.input_tokens < 10000].ttft_s.median()
short_a50 = hol_after[hol_after.input_tokens < 10000].ttft_s.median()
case_section(
    "head_of_line",
    "Head-of-line blocking by long prompts",
    """
One request in twenty pastes a 50k-token report, on a V1-like engine with chunked prefill already
on. The server keeps up on average, yet short requests that arrive behind a long prompt wait for
its whole prefill. That is what vLLM V1's scheduler does with its default settings: running
requests get the step's token budget first, and with `long_prefill_token_threshold = 0` (the
default: no cap) the long prompt's chunk takes all of the budget the decodes leave, step after
step (`vllm/v1/core/sched/scheduler.py`, vLLM 0.11.0 and 0.33.0). The cheapest cure is that
setting: `--long-prefill-token-threshold N` caps one request's chunk at N tokens per step, so the
rest of the budget goes to the prompts behind it.
""",
    "assert head_of_line.deployment.engine.chunked_prefill\n"
    "assert head_of_line.deployment.engine.long_prefill_token_threshold == 0\n",
    f"""
**Takeaway:** one setting, on the same GPU: TTFT p90 {b[0]:.2f} s → {fx[0]:.2f} s, the share
meeting both targets {pct(b[2])} % → {pct(fx[2])} %, verdict `ok`. It trades, as the suggestion
says: the short requests' TTFT p90 falls from {short_b:.2f} s to {short_a:.2f} s (their median
rises, from {round(short_b50 * 1e3)} ms to {round(short_a50 * 1e3)} ms: every step they share with a
long-prompt chunk is slower — the CDF's left side), the long
prompts' mean TTFT rises from {long_b:.2f} s to {long_a:.2f} s (their prefill now takes
{HOL_THRESHOLD} tokens a step), and TPOT p90 rises from {ms1(b[1])} ms to {ms1(fx[1])} ms, because
short requests now decode in steps that carry long-prompt chunks. The long prompts miss the 1 s
TTFT target before and after: 50k tokens take longer than that to prefill on one H100, which
only hardware (TP, or a replica of their own) would change.
""",
)
cells.insert(
    len(cells) - 1,
    nbformat.v4.new_code_cell(
        f"""
# check: who gains and who pays
before_m, after_m = request_metrics(head_of_line_log), request_metrics(head_of_line_after)
long_b = before_m[before_m.input_tokens > 10000].ttft_s.mean()
long_a = after_m[after_m.input_tokens > 10000].ttft_s.mean()
short_b = before_m[before_m.input_tokens < 10000].ttft_s.quantile(0.9)
short_a = after_m[after_m.input_tokens < 10000].ttft_s.quantile(0.9)
assert (round(short_b, 2), round(short_a, 2)) == ({r2(short_b)}, {r2(short_a)})
short_b50 = before_m[before_m.input_tokens < 10000].ttft_s.median()
short_a50 = after_m[after_m.input_tokens < 10000].ttft_s.median()
medians_ms = (round(short_b50 * 1e3), round(short_a50 * 1e3))
assert medians_ms == ({round(short_b50 * 1e3)}, {round(short_a50 * 1e3)})
assert (round(long_b, 2), round(long_a, 2)) == ({r2(long_b)}, {r2(long_a)})
assert HOL_THRESHOLD == {HOL_THRESHOLD}
""".strip()
    ),
)

# busy
busy_rep = report_of("busy")
together = busy_rep.finding("decode").evidence["slow_decoding_together_p50"]
t = CASE_STUDIES["busy"].cure_table()
b, ms64, f8 = row(t, 0), row(t, 1), row(t, 2)
busy_c = CASE_STUDIES["busy"]
busy_together_before = busy_rep.finding("decode").evidence["decoding_together_p50"]
busy_together_after = (
    diagnose(
        read_requests(busy_c.requests(busy_c.fixed_deployment)),
        slo=CASE_SLO,
        **busy_c.fixed_deployment.diagnose_kwargs(),
    )
    .finding("decode")
    .evidence["decoding_together_p50"]
)
case_section(
    "busy",
    "Busy: TPOT misses with chunked prefill already on",
    f"The 1k-token chat service at 15 requests/s on a V1-like engine. TTFT is fine; TPOT misses "
    f"because about {round(together)} requests decode together and every step also "
    "carries the arriving prompts' chunks. Chunked prefill is already on, so the report must not "
    "suggest it.",
    "together = busy_report.finding('decode').evidence['slow_decoding_together_p50']\n"
    f"assert round(together) == {round(together)}\n"
    "assert busy.workload.rate == 15 and busy.deployment.engine.chunked_prefill\n"
    "# check: requests decoding together (median), before and after FP8 weights\n"
    "busy_fp8 = diagnose(\n"
    "    read_requests(busy.requests(busy.fixed_deployment)),\n"
    "    slo=CASE_SLO,\n"
    "    **busy.fixed_deployment.diagnose_kwargs(),\n"
    ")\n"
    'assert round(busy_report.finding("decode").evidence["decoding_together_p50"]) == '
    f"{round(busy_together_before)}\n"
    'assert round(busy_fp8.finding("decode").evidence["decoding_together_p50"]) == '
    f"{round(busy_together_after)}\n",
    f"""
**Takeaway:** the cheapest suggestion, `--max-num-seqs 64`, does what it says — TPOT p90
{ms1(b[1])} ms → {ms1(ms64[1])} ms — and trades exactly what it warns of: the requests it keeps
out of the batch wait in the queue: TTFT p90 {b[0]:.2f} s → {ms64[0]:.1f} s. FP8 weights
(software) make every decode step read half the weight bytes: TPOT p90 {ms1(f8[1])} ms,
{pct(f8[2])} % of requests meeting both targets, on the same GPU. That is a third of
{ms1(b[1])} ms, not a half, because the batch shrinks too: at the same arrival rate, requests
that decode faster leave sooner, so fewer decode together (Little's law: requests decoding
together ≈ arrival rate × time spent decoding) — {round(busy_together_before)} at the median before,
{round(busy_together_after)} after — and each step is cheaper again.
""",
)

# ramp
t = CASE_STUDIES["ramp"].cure_table()
b, f8, tp = row(t, 0), row(t, 1), row(t, 2)
case_section(
    "ramp",
    "A ramp into overload",
    "Traffic grows from 3 to 25 requests/s. The saturation step names the window where the "
    "queue starts to grow.",
    "assert (ramp.workload.rate, ramp.workload.rate_end) == (3, 25)\n",
    f"""
**Takeaway:** FP8 weights (software) fix TTFT (p90 {b[0]:.2f} s → {f8[0]:.2f} s) but not TPOT at
the ramp's peak ({ms1(f8[1])} ms, {pct(f8[2])} % meeting both); TP = 2 (hardware) cures both:
TTFT p90 {tp[0]:.2f} s, TPOT p90 {ms1(tp[1])} ms, {pct(tp[2])} %.
""",
)

# slow gpu
sg_rep = report_of("slow_gpu")
low = sg_rep.finding("decode").evidence["low_load_tpot_s"]
t = CASE_STUDIES["slow_gpu"].cure_table()
b, kv, f8, fx = row(t, 0), row(t, 1), row(t, 2), row(t, 3)
case_section(
    "slow_gpu",
    "A GPU too slow for the TPOT target",
    f"Llama-3.1-8B in BF16 on one L4 at a light load. Even the quietest requests decode at "
    f"{low / 0.020:.1f}× the 20 ms target: the step time of chapter 2 is above the target, and "
    "only fewer bytes per step (quantisation, more GPUs) or fewer steps (speculative decoding) "
    "help.",
    f"assert round(slow_gpu_report.finding('decode').evidence['low_load_tpot_s'] / 0.020, 1) == "
    f"{round(low / 0.020, 1)}\n",
    f"""
**Takeaway:** an FP8 KV cache (a setting) barely moves TPOT p90 ({ms1(b[1])} → {ms1(kv[1])} ms:
at these short contexts a decode step reads mostly weights); FP8 weights (software) halve it to
{ms1(f8[1])} ms, still above 20 ms; keeping them and adding a second L4 (TP = 2, hardware)
reaches {ms1(fx[1])} ms with {pct(fx[2])} % of requests meeting both targets. Speculative
decoding (software, listed before TP) is not simulated here.
""",
)

# --- TP vs replicas ---------------------------------------------------------------------------

choices = {
    "one replica, 1 GPU": oc.deployment,
    "TP = 2 (1 replica)": replace(oc.deployment, n_gpus=2),
    "2 replicas, 1 GPU each": replace(oc.deployment, replicas=2),
}
tvr = {}
for label, d in choices.items():
    log = read_requests(oc.requests(d))
    flat = summarize(log, slo=CASE_SLO, percentiles=(50, 90)).to_dict()
    rates = arrival_window_rates(log)
    tvr[label] = {
        "served_rps": completion_rate(log.requests["end_ts"].to_numpy(float)),
        "ttft_s_p90": flat["ttft_s_p90"],
        "tpot_s_p90": flat["tpot_s_p90"],
        "good_fraction": flat["good_fraction"],
    }
tp2, rep2 = tvr["TP = 2 (1 replica)"], tvr["2 replicas, 1 GPU each"]
md(f"""
## Two GPUs: tensor parallelism or a second replica?

Both double the GPUs of the overloaded service. Two replicas double the capacity (here both choices
serve nearly all 21 requests/s offered), but each replica still receives 10.5 requests/s, and at
that load its decode batches are large and TPOT misses; TP = 2 makes every step faster — more FLOP/s
and bandwidth per step, and a bigger KV cache — so both TTFT and TPOT recover. With TP = 2,
{pct(tp2["good_fraction"])} % of requests meet both targets;
with two replicas {pct(rep2["good_fraction"])} % (TPOT p90 {ms1(rep2["tpot_s_p90"])} ms). That is
why the report, seeing TPOT miss as well as TTFT, lists tensor parallelism before another replica
(both are hardware). Where only the queue misses, a replica is the cheaper cure: no all-reduce per
layer, and throughput per GPU stays the same. Served rates are completions per second over the
middle 80 % of completions (`completion_rate`, as the saturation step measures them).
""")
code(f"""
choices = {{
    "one replica, 1 GPU": overloaded.deployment,
    "TP = 2 (1 replica)": replace(overloaded.deployment, n_gpus=2),
    "2 replicas, 1 GPU each": replace(overloaded.deployment, replicas=2),
}}
rows = {{}}
for label, d in choices.items():
    log = read_requests(overloaded.requests(d))
    flat = summarize(log, slo=CASE_SLO, percentiles=(50, 90)).to_dict()
    rows[label] = {{
        "served_rps": completion_rate(log.requests["end_ts"].to_numpy(float)),
        "ttft_s_p90": flat["ttft_s_p90"],
        "tpot_s_p90": flat["tpot_s_p90"],
        "good_fraction": flat["good_fraction"],
    }}
tp_vs_replicas = pd.DataFrame(rows).T
# check
t = tp_vs_replicas
tp2, rep2 = t.loc["TP = 2 (1 replica)"], t.loc["2 replicas, 1 GPU each"]
assert overloaded.workload.rate / 2 == 10.5  # requests/s each replica receives
assert round(tp2["good_fraction"] * 100, 1) == {round(tp2["good_fraction"] * 100, 1)}
assert round(rep2["good_fraction"] * 100, 1) == {round(rep2["good_fraction"] * 100, 1)}
assert round(rep2["tpot_s_p90"] * 1e3, 1) == {ms1(rep2["tpot_s_p90"])}
assert t.loc["2 replicas, 1 GPU each", "tpot_s_p90"] > CASE_SLO["tpot_s"]
assert min(tp2["served_rps"], rep2["served_rps"]) > 0.95 * overloaded.workload.rate
tp_vs_replicas.round(4)
""")
md(
    "**Takeaway:** a replica cures a queue; TP also cures a TPOT that misses at the load each "
    "replica would still carry."
)

# --- the real engine --------------------------------------------------------------------------

real = {k: read_requests(DATA / f) for k, f in REAL_CASE_LOGS.items()}
scrapes = {
    k: [read_scrape(DATA / f"real_toy_{k}_metrics_{w}.txt") for w in ("before", "after")]
    for k in REAL_CASE_LOGS
}
real_reports = {k: diagnose(real[k], slo=REAL_CASE_SLO, server=scrapes[k]) for k in real}
sweep = load_sweep(real, REAL_CASE_SLO)
verdict = sweep_verdict(sweep)
rl, rh = sweep.loc["light"], sweep.loc["heavy"]
hev = real_reports["heavy"].finding("decode").evidence
md(f"""
## A case measured on a real engine

Everything above is simulated. This case is not: the repo's toy server (chapter 8: real HTTP,
real continuous batching with chunked prefill and a paged KV cache, a small random-weight model on
the CPU) under `llminfer bench` at two offered loads, {REAL_CASE_RATES["light"]:g} and
{REAL_CASE_RATES["heavy"]:g} requests/s, with a `/metrics` scrape before and after each.
`scripts/make_real_engine_logs.py` made the files in `data/` (`data/README.md` says how, when and
on which machine; its times depend on that machine, so a re-run gives other numbers — the
workload itself is seeded). A CPU toy is slower per token than a GPU, so its targets are TTFT p90
1 s and TPOT p90 50 ms (`REAL_CASE_SLO`). The procedure runs as on any log: step 0, the seven
steps with the scrapes, and the load sweep.
""")
code(f"""
real = {{k: read_requests("../data/" + f) for k, f in REAL_CASE_LOGS.items()}}
scrapes = {{
    k: [read_scrape(f"../data/real_toy_{{k}}_metrics_{{w}}.txt") for w in ("before", "after")]
    for k in REAL_CASE_LOGS
}}
real_reports = {{k: diagnose(real[k], slo=REAL_CASE_SLO, server=scrapes[k]) for k in real}}
print(real_reports["heavy"])
# check: light load passes, heavy load is overload
assert real_reports["light"].verdict == "ok"
assert real_reports["heavy"].verdict == "problem" and real_reports["heavy"].cause == "overload"
assert REAL_CASE_SLO == {{"ttft_s": 1.0, "tpot_s": 0.05}}
h = real_reports["heavy"].finding("decode").evidence
assert round(h["decoding_together_p50"]) == {round(hev["decoding_together_p50"])}
assert ServeConfig().max_num_seqs == 16
""")
code(f"""
sweep = load_sweep(real, REAL_CASE_SLO)
verdict = sweep_verdict(sweep)
# check: the sweep's numbers quoted below
assert round(sweep.loc["light", "offered_rps"], 2) == {round(rl.offered_rps, 2)}
assert round(sweep.loc["heavy", "offered_rps"], 2) == {round(rh.offered_rps, 2)}
assert round(sweep.loc["heavy", "served_rps"], 2) == {round(rh.served_rps, 2)}
assert round(sweep.loc["heavy", "ttft_s_p90"], 2) == {r2(rh.ttft_s_p90)}
assert round(sweep.loc["heavy", "tpot_s_p90"] * 1e3, 1) == {ms1(rh.tpot_s_p90)}
assert list(sweep["within_targets"]) == {list(sweep["within_targets"])}
assert round(verdict["capacity_rps"], 2) == {round(verdict["capacity_rps"], 2)}
assert verdict["saturated"] is {verdict["saturated"]}
served_share = sweep.loc["heavy", "served_rps"] / sweep.loc["heavy", "offered_rps"]
assert round(served_share * 100) == {round(rh.served_rps / rh.offered_rps * 100)}
mem = real_reports["heavy"].finding("memory").evidence
assert mem["server_preemptions"] == 0 and mem["server_kv_usage"] == 0 == mem["server_running"]
sweep.round(3)
""")
md(f"""
Asked for {REAL_CASE_RATES["light"]:g} and {REAL_CASE_RATES["heavy"]:g} requests/s, the client
sent {rl.offered_rps:.2f} and {rh.offered_rps:.2f}/s: both runs draw the same seeded Poisson
schedule, whose 80 arrivals happen to come slower than its mean — step 0 allows for that chance
and calls the generator fine. At the light load every target is met. At the heavy load the server
completes {rh.served_rps:.2f} requests/s (the middle 80 % of completions), TTFT p90 is
{rh.ttft_s_p90:.2f} s and TPOT p90 {ms1(rh.tpot_s_p90)} ms with about
{round(hev["decoding_together_p50"])} requests decoding together — the toy's `max_num_seqs` is 16:
`overload`. The memory step reads the scrapes rather than saying *can't tell*: the preemption
counter did not move between the scrape before and the one after, so no request was preempted.
Their gauges (waiting, running, KV usage: all 0) were read with the server idle, so they say
nothing about how full the cache got under load — for that, scrape while the load runs.
The sweep says less than it seems: the highest load within these targets
lies between {rl.offered_rps:.2f} and {rh.offered_rps:.2f} requests/s, and since even the heavy
load was served at {rh.served_rps / rh.offered_rps:.0%} of its offered rate (no load saturated the
server), {rh.served_rps:.2f}/s is a lower bound on the capacity, not the capacity. A real sweep
takes five to ten loads, up to one the server cannot keep up with.

**Takeaway:** the same order reads a real server's log; what a client log lacks (`scheduled_ts`,
preemptions) the server's `/metrics` supplies.
""")

# --- not enough data, missing fields ----------------------------------------------------------

md("""
## Not enough data

Twenty requests from the overloaded log — every one of them slow — are not enough to read a p90,
and a benchmark export with five successful requests is not either. The verdict is
`not_enough_data`: the report says what it sees (a target missed) but names no cause, and it
never says *ok*.
""")
code("""
few = pd.read_csv("../data/case_overloaded.csv").sort_values("start_ts").tail(20)
few_report = diagnose(read_requests(few), slo=CASE_SLO)
print(few_report.headline)
export_report = diagnose(read_requests("../data/vllm_bench_detailed.json"))
print(export_report.headline)
# check
assert few_report.verdict == "not_enough_data" and few_report.cause is None
assert export_report.verdict == "not_enough_data"
assert few_report.finding("workload").min_requests == MIN_REQUESTS == 50
""")

kv_case = CASE_STUDIES["kv_exhausted"]
bare = pd.read_csv(DATA / "case_kv_exhausted.csv").drop(
    columns=["scheduled_ts", "preemptions", "cached_prefix_tokens", "prefix_group"]
)
bare_report = diagnose(read_requests(bare), slo=CASE_SLO)
scrape_pre = read_scrape(DATA / "vllm_metrics_v1.txt").preemptions
assert kv_mem["preemptions"] == 169  # the literal the cell below checks
md(f"""
## When the log lacks a field — and the server's own evidence

Most benchmark tools record no `scheduled_ts` and no preemptions. Drop them from the
KV-exhausted log: the memory step can no longer see the cause (*can't tell*, naming what is
missing), and the report falls back to the symptom — `overload`. Two things bring the cause
back: the deployment (the memory step then compares tokens in flight with chapter 4's KV
capacity), or a scrape of the server's Prometheus `/metrics`, which counts preemptions and KV
usage itself. `read_scrape` reads it with the Prometheus client's own parser and knows the names
of vLLM V0 and V1 (`vllm:gpu_cache_usage_perc` became `vllm:kv_cache_usage_perc`). The scrape
here is a hand-written sample of a V1 server in that state (`data/vllm_metrics_v1.txt`), not one
recorded during this run: its {scrape_pre:g} preemptions are not the log's {kv_mem["preemptions"]}
— with your own server, scrape during the run you diagnose.
""")
code("""
bare = pd.read_csv("../data/case_kv_exhausted.csv").drop(
    columns=["scheduled_ts", "preemptions", "cached_prefix_tokens", "prefix_group"]
)
bare_report = diagnose(read_requests(bare), slo=CASE_SLO)
scrape = read_scrape("../data/vllm_metrics_v1.txt")
with_scrape = diagnose(read_requests(bare), slo=CASE_SLO, server=scrape)
with_deployment = diagnose(
    read_requests(bare), slo=CASE_SLO, **kv_exhausted.deployment.diagnose_kwargs()
)
print(scrape)
# check
assert bare_report.finding("memory").verdict == "cant_tell"
assert bare_report.cause == "overload"
assert with_scrape.cause == "kv_pressure" and with_deployment.cause == "kv_pressure"
assert (scrape.waiting, scrape.kv_usage, scrape.preemptions) == (131, 0.987, 182)
assert kv_exhausted_report.finding("memory").evidence["preemptions"] == 169  # the log's own
with_scrape.to_frame()[["verdict", "cause", "detail"]]
""")

md("""
## Getting `scheduled_ts`, preemptions and a scrape from vLLM

- **The scrape.** A vLLM OpenAI-compatible server serves Prometheus metrics at `/metrics` on its
  own port. Save one while the load runs, or one before and one after (two scrapes give the
  preemption counter's increase over the run):
  `curl -s http://HOST:8000/metrics > before.txt` … `> after.txt`, then
  `python -m llminfer diagnose log.csv --metrics before.txt --metrics after.txt`. The names used:
  `vllm:num_requests_waiting`, `vllm:num_requests_running`, `vllm:kv_cache_usage_perc` (V1) or
  `vllm:gpu_cache_usage_perc` (V0 and early V1), `vllm:num_preemptions_total`, and in V0
  `vllm:num_requests_swapped`.
- **Preemptions.** vLLM counts them server-wide (`vllm:num_preemptions_total`) and logs a
  warning when a sequence is preempted; a per-request count needs your own instrumentation —
  which is why the scrape matters.
- **`scheduled_ts`.** Benchmark clients see only arrival, first token and end. The engine knows
  when it scheduled a request: V0's `RequestOutput.metrics` (`vllm/sequence.py`: `arrival_time`,
  `first_scheduled_time`, `time_in_queue`, `first_token_time`) with the offline `LLM` API; V1's
  per-request `RequestStateStats` (`vllm/v1/metrics/stats.py`: `queued_ts`, `scheduled_ts`,
  `first_token_ts`), exported through request tracing (`--otlp-traces-endpoint`, span attribute
  `gen_ai.latency.time_in_queue`) and, aggregated, as the histogram
  `vllm:request_queue_time_seconds`. Without it, `diagnose` estimates the wait from requests
  that arrived to an empty queue, and says so in the evidence.

## What a request log cannot see: the host side, and confirming with a profile

A request log times what a user sees; several causes of slowness live outside the GPU steps the
procedure reasons about (and outside the simulator, which times GPU steps only). Before buying
hardware, rule them out:

- **Tokenizer, detokenizer and the API server's CPU.** The API server's Python process (in vLLM
  V1 a process apart from the engine core's) tokenizes prompts and detokenizes every streamed
  token; a busy one delays all streams at once. Watch its CPU (`top`, `py-spy`), and scale the
  front end.
- **Structured output.** Grammar-constrained decoding compiles a grammar and masks logits every
  step; a JSON-schema workload can be slower per token than free text.
- **CUDA-graph capture sizes.** vLLM V1 replays decode steps from captured CUDA graphs, by
  default for batches of up to 512 tokens; a step with more tokens (a mixed step carrying a
  2,048-token prefill chunk) runs without any CUDA graph, its kernels launched one by one
  (vLLM 0.33.0 `vllm/config/compilation.py`, `vllm/v1/cudagraph_dispatcher.py`). The
  simulator's "vllm" profile does not model that limit.
- **Prefix-cache hit rate and speculative acceptance.** Features that should help can quietly not:
  read the increase of `vllm:prefix_cache_hits_total` over that of
  `vllm:prefix_cache_queries_total`, and the drafts accepted per step.
- **Confirm with a profile.** A server started with `VLLM_TORCH_PROFILER_DIR=/path` takes
  `torch.profiler` traces between calls to `/start_profile` and `/stop_profile`; Nsight Systems
  (`nsys profile`) works too. If the GPU idles between steps, more GPUs will not help.
""")

md("""
## Bring your own log

The command line runs the same procedure on any log `read_requests` understands (the article's
CSV, vLLM, GenAI-Perf, AIPerf, llmperf exports). Give what you know of the deployment — model,
GPU, TP (`--tp`), replicas, dtypes and the engine's settings (`--engine`) — so that no suggestion
proposes what is already on; `--json` prints the report for a program; the exit status is 0
(ok), 1 (a problem was found), 2 (bad input) or 3 (not enough data), so a CI job can fail on it.

```bash
python -m llminfer models            # the presets --model accepts
python -m llminfer gpus              # the presets --gpu accepts
python -m llminfer diagnose my_log.csv --model llama-3.1-8b --gpu h100-sxm --tp 1 \\
    --engine chunked_prefill=on,chunk=2048,max_num_seqs=256,gpu_memory_utilization=0.9 \\
    --metrics scrape.txt --slo ttft=1s,tpot=20ms --json
```
""")
code("""
exit_code = llminfer_cli(
    [
        "diagnose",
        "../data/case_busy.csv",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100-sxm",
        "--engine",
        "chunked_prefill=on,chunk=2048,max_num_seqs=256",
        "--slo",
        "ttft=1s,tpot=20ms",
    ]
)
# check: a problem was found, and chunked prefill (already on) is not suggested
assert exit_code == DIAGNOSE_EXIT["problem"] == 1
assert "enable_chunked_prefill" not in [s.key for s in busy_report.suggestions]
""")

md("""
## When the diagnosis can be wrong

The rules are heuristics over what a log can show. Know where they break:

- **Too little, or the wrong slice of, data.** Below 50 requests the verdict is
  *not enough data*; but 50 requests of one burst do not describe a day. Diagnose the window you
  care about, not a mix of two deployments or two traffic patterns.
- **Client-side clocks and closed loops.** TTFT measured by a client includes the network and the
  client's own queue. A closed-loop benchmark (N users) measures capacity — its throughput at
  saturation — but hides queue growth: the server never holds more than N requests, so the
  queueing and saturation steps can find no growing queue however far past capacity it runs.
  Step 0 names a closed loop; for latency at a given arrival rate, send open-loop arrivals.
- **Inferred stages.** Without `scheduled_ts` the wait is estimated from the requests that
  arrived to an empty queue; prefix caching, or prompts of very different kinds, break that
  model. The evidence says "estimated" when it is.
- **Correlation is not cause.** *Interference* and *overload* are told apart by what sets the
  slow requests apart (a bigger batch, or 1.5× the median request's
  overlapping prefill work). Under a mix of both, the larger one is named; fix it and look again.
- **Head-of-line needs long prompts.** The rule asks the prompts queued ahead of the slow
  requests to average 3× the median prompt; a queue of equal prompts is
  called overload, even when the cause is a burst or a `max_num_seqs` cap.
- **Thresholds were set on simulated services.** The simulator models vLLM V1's scheduler (one
  token budget, chunked prefill, `long_prefill_token_threshold`, recompute preemption) and times
  GPU steps with the "vllm" profile; it has no tokenizer, API server, network or CUDA-graph size
  limit (previous section). Treat a cause as the first hypothesis to test, and re-measure after
  every change — one change at a time.
- **Chunked prefill cures stalls, not load.** A prefill chunk is not free: it costs its compute
  whether it runs alone (V0) or beside decodes (V1). Turning chunking on mostly removes the long
  stalls — ITL p99 and the number of stalls — rather than mean TPOT, which still carries the
  prefill work of every step (the long-prompt case above). The decode step therefore measures
  interference in the token streams when the log has `token_ts`; without them it falls back to a
  fit of TPOT on prefill work, which is weaker evidence.
- **One target percentile.** The rules judge p90. A p99 target can fail while p90 passes.
""")
code("""
# check: the limits quoted above
assert MIN_REQUESTS == 50 and PREFILL_CONCENTRATION == 1.5 and LONG_PROMPT_SPREAD == 3.0
""")

md("""
## Explore

The static result first — the interference case as found — then the widget: choose a case,
apply its cure or not, and move the targets to see verdicts flip.
""")
code("""
explorer = DiagnosisExplorer()
print(explorer.result.headline)
# check: the widget's default is the interference case as found
assert explorer.result.cause == "interference" and explorer.error is None
""")
code("""
# NBVAL_IGNORE_OUTPUT
assert explorer.result is not None and explorer.error is None  # the widget drew its picture
explorer
""")

checklist = (ROOT / "docs" / "troubleshooting-checklist.md").read_text()
checklist = checklist.replace("\n## ", "\n### ").replace(
    "# Troubleshooting checklist", "## Take-home checklist", 1
)
md(checklist + "\n(The same page: `docs/troubleshooting-checklist.md`.)")

# --- try it -----------------------------------------------------------------------------------

answers = {k: exercise(k).answer() for k in ("07.1", "07.2", "07.3", "07.4", "07.5")}
healthy_at = {
    tpot: diagnose(
        case_log("healthy"),
        slo={"ttft_s": 1.0, "tpot_s": tpot},
        **CASE_STUDIES["healthy"].deployment.diagnose_kwargs(),
    )
    for tpot in (0.006, 0.0085)
}
quiet = healthy_at[0.006].finding("decode").evidence
busy128 = summarize(
    read_requests(
        CASE_STUDIES["busy"].requests(
            replace(
                CASE_STUDIES["busy"].deployment,
                engine=replace(CASE_STUDIES["busy"].deployment.engine, max_num_seqs=128),
            )
        )
    ),
    slo=CASE_SLO,
    percentiles=(90,),
).to_dict()
md("""
## Try it

Each question has a checker: put your answer in `my_answer` and run the cell.

1. Tighten the healthy service's TPOT target to 6 ms (TTFT stays 1 s). Which cause does
   `diagnose` name? Then try 8.5 ms and explain the difference. → `check("07.1", my_answer)`
2. Serve the ramp workload on two replicas of one H100 each instead of TP = 2
   (`replace(ramp.deployment, replicas=2)`). What share of requests meets both targets?
   → `check("07.2", my_answer)`
3. The busy case's cure table tried `--max-num-seqs 64`. Try 128
   (`replace(busy.deployment, engine=replace(busy.deployment.engine, max_num_seqs=128))`): what
   share of requests meets both targets? → `check("07.3", my_answer)`
4. In the ramp case, in which of the ten windows does the saturation step first see the queue
   grow? → `check("07.4", my_answer)`
5. Diagnose the toy server's heavy-load log (`"../data/" + REAL_CASE_LOGS["heavy"]`) with
   `REAL_CASE_SLO` and nothing else — no deployment, no scrape. Which step says *can't tell*,
   and what would you record next time to answer it? → `check("07.5", my_answer)`. Then do the
   same with a log from your own benchmark.
""")
code("""
my_answer = None  # your answer to question 1 here, e.g. "overload"
check("07.1", my_answer) if my_answer is not None else "answer above, then run this cell"
""")
md(f"""
<details><summary>Worked solutions (numbers computed by llminfer)</summary>

1. At 6 ms even the quietest requests (about {round(quiet["low_load_decoding"])} decoding
   together, {ms1(quiet["low_load_tpot_s"])} ms) take longer than the target: the cause is
   `too_slow`. At 8.5 ms the quiet ones pass and only requests that decoded beside more work
   (bigger batches, other prompts' prefill) miss: `{healthy_at[0.0085].cause}` — the target sits
   between a quiet request's TPOT and a loaded one's, so the cause is what the load adds.
2. About {pct(answers["07.2"])} %: the ramp's trouble is a queue at its peak, and a second replica
   halves each one's load; a replica is the cheaper cure for a queue (no all-reduce).
3. About {pct(answers["07.3"])} %: TTFT p90 {busy128["ttft_s_p90"]:.1f} s and TPOT p90
   {ms1(busy128["tpot_s_p90"])} ms — a batch small enough for TPOT leaves requests queueing at
   15 requests/s, a bigger one misses TPOT: no value of this setting cures it.
4. Window {answers["07.4"]} of 10.
5. `{answers["07.5"]}`: a client-side log has no preemption count, and without the deployment
   there is no KV capacity to compare with. Record a `/metrics` scrape before and after the run
   (`vllm:num_preemptions_total`, `vllm:kv_cache_usage_perc`), or pass the model, GPU and engine
   settings; record `scheduled_ts` (server side) to measure the wait instead of estimating it.

The cell below prints the answers as llminfer computes them.
</details>
""")
code(f"""
answers = {{key: exercise(key).answer() for key in ("07.1", "07.2", "07.3", "07.4", "07.5")}}
# check: the worked solutions above match the package
assert answers["07.1"] == "too_slow" and answers["07.5"] == "{answers["07.5"]}"
assert round(answers["07.2"] * 100, 1) == {round(answers["07.2"] * 100, 1)}
assert round(answers["07.3"] * 100, 1) == {round(answers["07.3"] * 100, 1)}
assert answers["07.4"] == {answers["07.4"]}
busy_128 = replace(busy.deployment, engine=replace(busy.deployment.engine, max_num_seqs=128))
at_128 = summarize(read_requests(busy.requests(busy_128)), slo=CASE_SLO, percentiles=(90,))
assert round(at_128.to_dict()["ttft_s_p90"], 1) == {round(busy128["ttft_s_p90"], 1)}
assert round(at_128.to_dict()["tpot_s_p90"] * 1e3, 1) == {ms1(busy128["tpot_s_p90"])}
assert check("07.1", "too_slow") and not check("07.1", "overload")
assert check("07.5", "{answers["07.5"]}")
healthy_at = {{
    tpot: diagnose(
        healthy_log, slo={{"ttft_s": 1.0, "tpot_s": tpot}}, **healthy.deployment.diagnose_kwargs()
    )
    for tpot in (0.006, 0.0085)
}}
assert healthy_at[0.006].cause == "too_slow"
assert healthy_at[0.0085].cause == "{healthy_at[0.0085].cause}"
quiet = healthy_at[0.006].finding("decode").evidence
assert round(quiet["low_load_decoding"]) == {round(quiet["low_load_decoding"])}
assert round(quiet["low_load_tpot_s"] * 1e3, 1) == {ms1(quiet["low_load_tpot_s"])}
answers
""")

md("""
## Sources

- vLLM's V1 scheduler, `long_prefill_token_threshold`: vLLM 0.33.0 `vllm/config/scheduler.py`
  (L79-84: "0 disables the cap (default). The cap is not applied when the request is the only one
  in the batch"; the adaptive floor L86-90) and `vllm/v1/core/sched/scheduler.py` (L754-769; the
  cap on running requests L844-845 and waiting ones L1332-1333); vLLM 0.11.0 the same file
  (L216-219, L424-427). `max_num_partial_prefills` / `max_long_partial_prefills` are V0-only:
  0.11.0 `vllm/engine/arg_utils.py` L1468-1475 falls back to V0 when they are set; 0.33.0 no
  longer has them. [vllm-project/vllm](https://github.com/vllm-project/vllm).
- vLLM CUDA graphs: 0.33.0 `vllm/config/compilation.py` (capture sizes, "capped at 512 by
  default"), `vllm/v1/cudagraph_dispatcher.py` L270-279.
- vLLM's default step budget and chunked prefill: 0.33.0 `vllm/engine/arg_utils.py` L2973-3006
  (`get_batch_defaults`: `vllm serve` 8,192 tokens at ≥ 70 GiB and not an A100, else 2,048);
  0.11.0 the same file L1544-1548 ("V1 always uses chunked prefills and prefix caching for
  non-pooling tasks"). V0's default: chunked prefill only for `max_model_len` above 32k tokens.
- FP8 checkpoints in vLLM: `vllm/model_executor/layers/quantization/fp8.py`,
  `Fp8Config.get_quant_method` — `Fp8LinearMethod` for the linear layers, `Fp8KVCacheMethod`
  (the KV cache's scales) for attention: the attention itself is not an FP8 matmul unless the KV
  cache is FP8 and the attention backend computes in it.
- Benchmark tools' throughput windows: GenAI-Perf 0.0.16
  `genai_perf/profile_data_parser/llm_profile_data_parser.py` L230; AIPerf 0.13.0
  `aiperf/metrics/types/benchmark_duration_metric.py`; vLLM 0.33.0 `vllm/benchmarks/serve.py`
  L1123; GuideLLM 0.8.1 warm-up/cool-down `guidellm/schemas/benchmark/transient.py`.
- vLLM metrics: [design doc, V1 metrics](https://docs.vllm.ai/en/latest/design/metrics.html);
  names in `vllm/engine/metrics.py` (V0) and `vllm/v1/metrics/loggers.py` (V1); per-request
  timestamps in `vllm/sequence.py` (`RequestMetrics`) and `vllm/v1/metrics/stats.py`
  (`RequestStateStats`); profiling with `VLLM_TORCH_PROFILER_DIR`:
  [profiling vLLM](https://docs.vllm.ai/en/latest/contributing/profiling.html).
- Engine options named in the suggestions: [vLLM engine arguments](https://docs.vllm.ai/en/latest/configuration/engine_args.html)
  (`--enable-chunked-prefill`, `--max-num-batched-tokens`, `--long-prefill-token-threshold`,
  `--max-num-seqs`, `--gpu-memory-utilization`, `--kv-cache-dtype`, `--tensor-parallel-size`)
  and [optimization and tuning](https://docs.vllm.ai/en/latest/configuration/optimization.html)
  (preemption, chunked prefill).
- Split-KV decode attention (the "vllm" profile): vLLM 0.33.0
  `vllm/v1/attention/backends/flash_attn.py`; FlashAttention `hopper/heuristics.h`
  ([Dao-AILab/flash-attention](https://github.com/Dao-AILab/flash-attention)).
- Prometheus text format and parser: [exposition formats](https://prometheus.io/docs/instrumenting/exposition_formats/),
  [prometheus/client_python](https://github.com/prometheus/client_python).
- Kwon et al., *Efficient Memory Management for LLM Serving with PagedAttention*, SOSP 2023
  ([arXiv:2309.06180](https://arxiv.org/abs/2309.06180)) — preemption and recompute.
- Agrawal et al., *Taming Throughput-Latency Tradeoff in LLM Inference with Sarathi-Serve*, OSDI
  2024 ([arXiv:2403.02310](https://arxiv.org/abs/2403.02310)) — chunked prefill and
  prefill–decode interference.
- Zhong et al., *DistServe*, OSDI 2024 ([arXiv:2401.09670](https://arxiv.org/abs/2401.09670)) —
  disaggregation.
- Leviathan et al., *Fast Inference from Transformers via Speculative Decoding*, ICML 2023
  ([arXiv:2211.17192](https://arxiv.org/abs/2211.17192)).
- MLPerf Inference rules (server scenario latency targets):
  [mlcommons/inference](https://github.com/mlcommons/inference).
""")

nb = nbformat.v4.new_notebook()
nb.cells = cells
nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
nb.metadata["language_info"] = {"name": "python"}
out = ROOT / "notebooks" / "07_troubleshooting.ipynb"
if out.exists():  # keep the cell ids of the notebook it rewrites, cell for cell
    before = nbformat.read(out, as_version=4).cells
    if [c.cell_type for c in before] == [c.cell_type for c in cells]:
        for old, new in zip(before, cells, strict=True):
            new["id"] = old["id"]
nbformat.write(nb, out)
print(f"wrote {out}: {len(cells)} cells")
