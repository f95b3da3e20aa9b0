"""Answers to notebook 03's "Try it" questions, computed with llminfer."""

from functools import cache

import pandas as pd

from llminfer.exercises import Exercise
from llminfer.exercises.datasets import dataset_path
from llminfer.language import N_
from llminfer.logs.definitions import compare_definitions
from llminfer.logs.reading import read_requests
from llminfer.logs.summary import summarize
from llminfer.logs.window import since_first_start
from llminfer.sim.engines import EngineConfig
from llminfer.sim.loadsweep import best_load, sweep
from llminfer.sim.simulate import simulate
from llminfer.sim.workload import LogNormal, Workload
from llminfer.specs.presets import get_gpu, get_model
from llminfer.specs.stepmodel import DEFAULT_PROFILE

#: The engine notebook 03 simulates: vLLM V0's scheduler (no chunked prefill, no prefix
#: caching), where a step that prefills runs no decodes.
V0_ENGINE = EngineConfig(
    chunked_prefill=False, prefix_caching=False, max_num_seqs=256, max_num_batched_tokens=8192
)
#: The load sweep of notebook 03 section 3 (requests per second).
RATES = (1, 2, 4, 6, 8, 10, 12, 16, 24, 32, 64)
#: The latency targets of that section (seconds): its sweep's goodput columns.
SIM_SLO = {"ttft_s": 1.0, "tpot_s": 0.05}


def load_test() -> Workload:
    """Notebook 03's load test: 2,000 requests, lognormal prompts ≈ 800 and outputs ≈ 200
    tokens (enough that, up to 64 requests/s, the arrival window outlasts filling the batch).

    Introduced in: notebooks/03_metrics.ipynb
    """
    return Workload(
        2000,
        rate=1,
        prompt_tokens=LogNormal(800, 0.8, high=8000),
        output_tokens=LogNormal(200, 0.8, high=2000),
    )


@cache
def load_sweep() -> pd.DataFrame:
    """Notebook 03's sweep: ``load_test`` at ``RATES`` on Llama-3.1-8B, one H100, ``V0_ENGINE``,
    the default engine profile, every figure over each run's arrival window.

    Introduced in: notebooks/03_metrics.ipynb
    """
    model, gpu = get_model("llama-3.1-8b"), get_gpu("h100-sxm")
    # the notebook's very call (its SLO columns included), so a kernel that drew the
    # notebook's table gets this one from sweep's cache instead of simulating it again
    return sweep(
        load_test(),
        model,
        gpu,
        rates=RATES,
        engine=V0_ENGINE,
        percentiles=(50, 90, 99),
        window="arrivals",
        profile=DEFAULT_PROFILE,
        slo=SIM_SLO,
    )


@cache
def run_at(rate: float):
    """Notebook 03's load test served at ``rate`` requests/s (a ``SimResult``), as the sweep.

    Introduced in: notebooks/03_metrics.ipynb
    """
    workload = load_test()
    return simulate(
        Workload(
            workload.n_requests,
            rate=rate,
            prompt_tokens=workload.prompt_tokens,
            output_tokens=workload.output_tokens,
        ),
        get_model("llama-3.1-8b"),
        get_gpu("h100-sxm"),
        engine=V0_ENGINE,
    )


def _demo(n: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "request_id": ["demo"],
            "start_ts": [0.0],
            "first_token_ts": [0.40],
            "end_ts": [0.40 + 0.04 * (n - 1)],
            "input_tokens": [2000],
            "output_tokens": [n],
        }
    )


def _llmperf_itl_120() -> float:
    return compare_definitions(_demo(120)).loc["llmperf_itl", "mean_s"] * 1e3


def _late_p90_ttft() -> float:
    # the notebooks' dataset (data/requests_realistic.csv), shipped with the package
    big = read_requests(dataset_path("requests_realistic.csv"))
    late = summarize(big, window=since_first_start(big, 480, 600))
    return late.to_dict()["ttft_s_p90"]


def _one_token_counts() -> str:
    frame = _demo(1)
    good = summarize(read_requests(frame), slo={"tpot_s": 0.05}).good_fraction
    return "yes" if good == 1 else "no"


def _prefill_share_at_32() -> float:
    return 100 * float(run_at(32).phases().loc["arrivals", "prefill_time_share"])


def _best_rate_ttft_025() -> float:
    best = best_load(load_sweep(), {"ttft_s": 0.25, "tpot_s": 0.05}, percentile=99)
    if best is None:
        raise AssertionError("no rate of the sweep meets p99 TTFT <= 0.25 s and TPOT <= 50 ms")
    return best


EXERCISES: tuple[Exercise, ...] = (
    Exercise(
        "03.1",
        N_(
            "The demo request with 120 output tokens at the same 40 ms rhythm: what is llmperf's "
            "'inter-token latency' E2E / N, in ms?"
        ),
        _llmperf_itl_120,
        unit="ms",
        rel_tol=0.01,
        hint=N_("E2E = 0.40 s + 119 × 40 ms; divide by all 120 tokens."),
    ),
    Exercise(
        "03.2",
        N_(
            "In the last two minutes of the realistic log (the requests completed in [480 s, "
            "600 s)), what is p90 TTFT, in s (about the tightest TTFT-only target that 90 % of "
            "those requests meet)?"
        ),
        _late_p90_ttft,
        unit="s",
        rel_tol=0.02,
        hint=N_("summarize(big, window=since_first_start(big, 480, 600)).to_dict()['ttft_s_p90']."),
    ),
    Exercise(
        "03.3",
        N_(
            "A one-token answer has no TPOT. Does summarize count it as meeting a TPOT target "
            "(yes/no)?"
        ),
        _one_token_counts,
        hint=N_("build a one-request log with output_tokens=1 and read good_fraction."),
        accept=("true",),
    ),
    Exercise(
        "03.4",
        N_(
            "At 32 requests/s in the simulated V0 engine, while requests still arrive (the arrival "
            "window), what percentage of the GPU's step time is spent in steps that prefill?"
        ),
        _prefill_share_at_32,
        unit="%",
        rel_tol=0.03,
        hint=N_("run.phases().loc['arrivals', 'prefill_time_share'] (a fraction), times 100."),
    ),
    Exercise(
        "03.5",
        N_(
            "Tighten the p99 TTFT target to 0.25 s (TPOT ≤ 50 ms): which is the highest rate that "
            "still meets both, in requests/s?"
        ),
        _best_rate_ttft_025,
        unit="requests/s",
        rel_tol=0.0,
        hint=N_("best_load(load_sweep, {'ttft_s': 0.25, 'tpot_s': 0.05}, percentile=99)."),
    ),
)
