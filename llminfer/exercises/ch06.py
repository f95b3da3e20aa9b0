"""Answers to notebook 06's "Try it" questions, computed by llminfer from data/."""

from pathlib import Path

from llminfer.exercises import Exercise

_DATA = Path(__file__).resolve().parents[2] / "data"


def _vllm_failed() -> int:
    from llminfer import read_requests

    return read_requests(_DATA / "vllm_bench_serve_result.json").n_failed


def _vllm_ttft_gap_ms() -> float:
    from llminfer import read_requests, read_summary, summarize

    path = _DATA / "vllm_bench_serve_result.json"
    mine = summarize(read_requests(path)).to_dict()["ttft_s_mean"]
    return (mine - read_summary(path).to_dict()["ttft_s_mean"]) * 1e3


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
)
