"""Answers to notebook 06's "Try it" questions, computed by llminfer from the datasets it ships
(copies of data/, ``llminfer.exercises.datasets``)."""

from functools import cache

import numpy as np
import pandas as pd

from llminfer.exercises import Exercise
from llminfer.exercises.datasets import dataset_path
from llminfer.language import N_
from llminfer.logs.definitions import compare_definitions
from llminfer.logs.importers import read_summary
from llminfer.logs.metrics import request_metrics
from llminfer.logs.reading import read_requests
from llminfer.logs.summary import summarize
from llminfer.logs.window import since_first_start

#: Notebook 06's targets for the realistic log (seconds).
REALISTIC_SLO = {"ttft_s": 0.5, "tpot_s": 0.05, "e2e_s": 30}
#: The two time windows of question 1: seconds after the first request's start.
FIRST_TWO_MINUTES, LAST_TWO_MINUTES = (0, 120), (480, 600)


@cache
def _realistic():
    return read_requests(dataset_path("requests_realistic.csv"))


def two_minute_windows() -> dict[str, dict[str, float]]:
    """``summarize(...).to_dict()`` of the realistic log's first and last two minutes, each
    over its own 120 s window (the requests completed inside it), with notebook 06's targets.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    big = _realistic()
    return {
        name: summarize(big, slo=REALISTIC_SLO, window=since_first_start(big, *span)).to_dict()
        for name, span in (("first", FIRST_TWO_MINUTES), ("last", LAST_TWO_MINUTES))
    }


def _ttft_p95_growth() -> float:
    windows = two_minute_windows()
    return windows["last"]["ttft_s_p95"] / windows["first"]["ttft_s_p95"]


def lost_at_40ms() -> dict[str, float]:
    """The realistic log's requests good at TPOT ≤ 50 ms but not at ≤ 40 ms (TTFT ≤ 500 ms
    and E2E ≤ 30 s kept) against those still good at 40 ms: median output tokens and median
    start (s after the first request) of each group.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    m = request_metrics(_realistic())
    ok = (m["status"] == "ok") & (m["ttft_s"] <= 0.5) & (m["e2e_s"] <= 30)

    def good(tpot_max: float) -> pd.Series:
        return ok & ((m["tpot_s"] <= tpot_max) | m["tpot_s"].isna())

    lost, kept = good(0.05) & ~good(0.04), good(0.04)
    started = m["start_ts"] - m["start_ts"].min()
    return {
        "lost_tokens": float(m["output_tokens"][lost].median()),
        "kept_tokens": float(m["output_tokens"][kept].median()),
        "lost_start_s": float(started[lost].median()),
        "kept_start_s": float(started[kept].median()),
    }


def _who_is_lost() -> str:
    found = lost_at_40ms()
    ratio = found["lost_tokens"] / found["kept_tokens"]
    return "long" if ratio > 1.25 else "short" if ratio < 0.8 else "neither"


#: The article's three-request log (data/requests.csv), the input of question 3.
ARTICLE_LOG = pd.DataFrame(
    {
        "request_id": ["r1", "r2", "r3"],
        "start_ts": [0.00, 0.15, 0.40],
        "first_token_ts": [0.42, 0.71, 0.88],
        "end_ts": [3.10, 4.36, 2.92],
        "input_tokens": [1024, 4096, 512],
        "output_tokens": [80, 96, 64],
    }
)


def _one_token_changes_p95() -> str:
    fourth = {
        "request_id": "r4",
        "start_ts": 0.5,
        "first_token_ts": 0.9,
        "end_ts": 0.9,
        "input_tokens": 256,
        "output_tokens": 1,
    }
    more = pd.concat([ARTICLE_LOG, pd.DataFrame([fourth])], ignore_index=True)
    before = summarize(read_requests(ARTICLE_LOG)).to_dict()["tpot_s_p95"]
    after = summarize(read_requests(more)).to_dict()["tpot_s_p95"]
    return "yes" if after != before else "no"


def _llmperf_itl_1000() -> float:
    n = 1000
    one = pd.DataFrame(
        {
            "request_id": ["long"],
            "start_ts": [0.0],
            "first_token_ts": [0.40],
            "end_ts": [0.40 + 0.04 * (n - 1)],
            "input_tokens": [2000],
            "output_tokens": [n],
        }
    )
    return compare_definitions(one).loc["llmperf_itl", "mean_s"] * 1e3


def _sglang_mean_itl() -> float:
    stream = pd.DataFrame(
        {
            "request_id": ["spec"],
            "start_ts": [0.0],
            "first_token_ts": [0.2],
            "end_ts": [0.4],
            "input_tokens": [100],
            "output_tokens": [9],
            "token_ts": [np.array([0.2, 0.3, 0.4])],
            "chunk_tokens": [np.array([1, 4, 4])],
        }
    )
    return compare_definitions(stream).loc["sglang_itl", "mean_s"] * 1e3


def _vllm_failed() -> int:
    return read_requests(dataset_path("vllm_bench_serve_result.json")).n_failed


def _vllm_ttft_gap_ms() -> float:
    path = dataset_path("vllm_bench_serve_result.json")
    mine = summarize(read_requests(path)).to_dict()["ttft_s_mean"]
    return (mine - read_summary(path).to_dict()["ttft_s_mean"]) * 1e3


#: Notebook 06's targets for the replica logs (seconds).
REPLICA_SLO = {"ttft_s": 0.5, "tpot_s": 0.05}


def _replicas():
    return summarize(read_requests(dataset_path("replicas")), by="source", slo=REPLICA_SLO)


def _slowest_replica() -> str:
    table = _replicas().table.drop(index="total")
    return str(table["tpot_s_p99"].idxmax()).removesuffix(".csv")


def _slowest_good_percent() -> float:
    table = _replicas().table.drop(index="total")
    return float(table["good_fraction"].min() * 100)


EXERCISES: tuple[Exercise, ...] = (
    Exercise(
        key="06.1",
        question=N_(
            "The realistic log's first and last two minutes, each summarised over its own "
            "120 s window (summarize(big, window=...)): by what factor does p95 TTFT grow?"
        ),
        compute=_ttft_p95_growth,
        unit="×",
        rel_tol=0.03,
        hint=N_(
            "summarize(big, slo=slo, window=since_first_start(big, 480, 600)) and (0, 120); "
            "divide the two ttft_s_p95"
        ),
    ),
    Exercise(
        key="06.2",
        question=N_(
            "Tighten the TPOT target from 50 to 40 ms: are the requests that stop being "
            "good the 'long' or the 'short' answers, or 'neither'?"
        ),
        compute=_who_is_lost,
        hint=N_(
            "compare the median output_tokens of the requests lost at 40 ms with those still "
            "good (request_metrics(big)); then compare their start times"
        ),
        accept=("none",),
    ),
    Exercise(
        key="06.3",
        question=N_(
            "Add a fourth request with output_tokens = 1 to the article's log: does the "
            "p95 TPOT change (yes/no)?"
        ),
        compute=_one_token_changes_p95,
        hint=N_("a one-token answer has no gap after its first token: its TPOT is NaN"),
        accept=("false",),
    ),
    Exercise(
        key="06.4",
        question=N_(
            "A request with TTFT 400 ms and TPOT 40 ms emits N = 1,000 tokens: what is "
            "llmperf's inter-token latency E2E / N, in ms?"
        ),
        compute=_llmperf_itl_1000,
        unit="ms",
        rel_tol=0.002,
        hint=N_("E2E / N = TTFT / N + (N − 1) / N × TPOT"),
    ),
    Exercise(
        key="06.5",
        question=N_(
            "A stream of three chunks at 0.2, 0.3 and 0.4 s carrying 1, 4 and 4 tokens: "
            "what is SGLang's mean ITL, in ms (vLLM's is 100 ms)?"
        ),
        compute=_sglang_mean_itl,
        unit="ms",
        rel_tol=0.01,
        hint=N_("SGLang splits a gap before a chunk of k tokens into k samples of gap / k"),
    ),
    Exercise(
        key="06.6",
        question=N_(
            "How many requests of data/vllm_bench_serve_result.json does llminfer load as "
            "failed (vLLM's own summary says 1)?"
        ),
        compute=_vllm_failed,
        unit="requests",
        rel_tol=0.0,
        hint=N_("look at log.requests['error']: one is an HTTP error, one an empty response"),
    ),
    Exercise(
        key="06.7",
        question=N_(
            "By how many milliseconds does llminfer's mean TTFT exceed vLLM's own for that "
            "file, and why?"
        ),
        compute=_vllm_ttft_gap_ms,
        unit="ms",
        rel_tol=0.02,
        hint=N_("vLLM averages a TTFT of 0.0 for the request that returned no tokens"),
    ),
    Exercise(
        key="06.8",
        question=N_(
            "In data/replicas/ (three replicas behind one load balancer), which replica has "
            "the highest p99 TPOT? Answer with its name, e.g. 'replica-a'."
        ),
        compute=_slowest_replica,
        hint=N_("summarize(read_requests(DATA / 'replicas'), by='source').table['tpot_s_p99']"),
        accept=("replica-c.csv", "c"),
    ),
    Exercise(
        key="06.9",
        question=N_(
            "What percentage of the requests of the replica with the highest p99 TPOT "
            "meet TTFT ≤ 500 ms and TPOT ≤ 50 ms, against about 99 % on the other two?"
        ),
        compute=_slowest_good_percent,
        unit="%",
        rel_tol=0.01,
        hint=N_("pass slo={'ttft_s': 0.5, 'tpot_s': 0.05} and read the good_fraction column"),
    ),
)
