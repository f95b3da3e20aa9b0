"""Answers to notebook 06's "Try it" questions, computed by llminfer from the datasets it ships
(copies of data/, ``llminfer.exercises.datasets``)."""

from llminfer.exercises import Exercise
from llminfer.exercises.datasets import dataset_path
from llminfer.logs.importers import read_summary
from llminfer.logs.reading import read_requests
from llminfer.logs.summary import summarize


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
        question="How many requests of data/vllm_bench_serve_result.json does llminfer load as "
        "failed (vLLM's own summary says 1)?",
        compute=_vllm_failed,
        unit="requests",
        rel_tol=0.0,
        hint="look at log.requests['error']: one is an HTTP error, one an empty response",
    ),
    Exercise(
        key="06.2",
        question="By how many milliseconds does llminfer's mean TTFT exceed vLLM's own for that "
        "file, and why?",
        compute=_vllm_ttft_gap_ms,
        unit="ms",
        rel_tol=0.02,
        hint="vLLM averages a TTFT of 0.0 for the request that returned no tokens",
    ),
    Exercise(
        key="06.3",
        question="In data/replicas/ (three replicas behind one load balancer), which replica has "
        "the highest p99 TPOT? Answer with its name, e.g. 'replica-a'.",
        compute=_slowest_replica,
        hint="summarize(read_requests(DATA / 'replicas'), by='source').table['tpot_s_p99']",
        accept=("replica-c.csv", "c"),
    ),
    Exercise(
        key="06.4",
        question="What percentage of that replica's requests meet TTFT ≤ 500 ms and "
        "TPOT ≤ 50 ms, against about 99 % on the other two?",
        compute=_slowest_good_percent,
        unit="%",
        rel_tol=0.01,
        hint="pass slo={'ttft_s': 0.5, 'tpot_s': 0.05} and read the good_fraction column",
    ),
)
