"""SGLang ``python -m sglang.bench_serving`` output: a JSON Lines file, one line per run
(``--output-file`` appends).

Each line holds the run figures (``duration``, ``completed``, ``total_input_tokens``,
``total_output_tokens``, ``total_output_tokens_retokenized``, ``request_throughput``,
``input_throughput``, ``output_throughput``, ``mean_/median_/std_/p99_`` ``ttft``, ``tpot``,
``itl`` (also ``p95_itl_ms``, ``max_itl_ms``) and ``e2e_latency`` in ms, ``concurrency``,
``accept_length``) and, only with ``--output-details``, vLLM's per-request arrays
``input_lens, output_lens, ttfts, itls, generated_texts, errors`` (some versions nest them under
``details``). SGLang splits a chunk of k tokens into k ITL samples of gap/k, so ``itls`` has one
entry per token. No start times and no per-request latencies are written. Source:
sgl-project/sglang ``python/sglang/bench_serving.py`` (``calculate_metrics``, the ``result``
dict and ``result_details`` of ``benchmark``).
"""

from __future__ import annotations

import pandas as pd

from llminfer.logs.importers._files import Document, number, problem
from llminfer.logs.importers.records import Imported, ToolSummary, stat_key
from llminfer.logs.importers.vllm import SGLANG_KEYS, arrays_to_frame

FORMAT = "sglang"
_METRICS = {"ttft": "ttft_s", "tpot": "tpot_s", "itl": "itl_s", "e2e_latency": "e2e_s"}


def _runs(doc: Document) -> list[tuple[str, dict]]:
    if doc.kind == "json" and isinstance(doc.json, dict):
        return [("the run", doc.json)]
    if doc.kind == "jsonl":
        return [(f"line {n}", r) for n, r in doc.lines or [] if isinstance(r, dict)]
    return []


def _details(run: dict) -> dict | None:
    if isinstance(run.get("details"), dict) and "ttfts" in run["details"]:
        return run["details"]
    return run if "ttfts" in run else None


def detect(doc: Document) -> str | None:
    """``"requests"`` when a run has ``--output-details`` arrays, ``"summary"`` when none has.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    runs = _runs(doc)
    if not runs or not all(any(k in r for k in SGLANG_KEYS) for _, r in runs):
        return None
    return "requests" if any(_details(r) for _, r in runs) else "summary"


def read(doc: Document) -> Imported:
    """Every run with per-request details → one log (column ``run`` says which line).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    runs = _runs(doc)
    with_details = [(where, r, _details(r)) for where, r in runs if _details(r)]
    if not with_details:
        raise problem(
            doc.name,
            "",
            "is SGLang bench_serving output without per-request data: rerun with "
            "--output-details, or read its aggregates with llminfer.read_summary()",
        )
    frames, assumptions, window = [], [], 0.0
    for index, (where, run, details) in enumerate(with_details):
        frame, said, _ = arrays_to_frame(details, doc, f"sglang-{index}", where)
        frame["run"] = index
        if len(with_details) > 1:
            # Runs follow each other: shift each run's requests past the previous run's window.
            frame["start_ts"] += window
            frame["first_token_ts"] += window
            frame["end_ts"] += window
            frame["token_ts"] = [None if t is None else t + window for t in frame["token_ts"]]
        frames.append(frame)
        assumptions += [s for s in said if s not in assumptions]
        window += number(run.get("duration"), doc.name, f"{where}, field 'duration'")
    skipped = len(runs) - len(with_details)
    assumptions.insert(
        0,
        "SGLang writes no start times: request starts are unknown (each run's start_ts are 0), "
        "so latencies are exact but arrivals and load over time can't be told",
    )
    assumptions.append(
        "SGLang's itls are per token (a k-token chunk is k gaps of gap/k); llminfer keeps them as "
        "one-token chunks"
    )
    assumptions.append(f"run window = the runs' duration, {window:.6g} s (SGLang's own)")
    if len(with_details) > 1:
        assumptions.append(f"{len(with_details)} runs in the file, read one after the other")
    if skipped:
        assumptions.append(f"{skipped} run(s) without --output-details skipped")
    return Imported(pd.concat(frames, ignore_index=True), assumptions, window, False)


def read_summary(doc: Document) -> ToolSummary:
    """The last run's figures (a file SGLang appended to holds one run a line).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    runs = _runs(doc)
    where, run = runs[-1]
    values, names = {}, {}
    for key, name in (
        ("window_s", "duration"),
        ("rps", "request_throughput"),
        ("output_tps", "output_throughput"),
        ("input_tps", "input_throughput"),
        ("total_tps", "total_throughput"),
    ):
        if isinstance(run.get(name), (int, float)) and not isinstance(run.get(name), bool):
            values[key], names[key] = float(run[name]), name
    for name, value in run.items():
        if not name.endswith("_ms") or not isinstance(value, (int, float)):
            continue
        stat, _, metric = name[: -len("_ms")].partition("_")
        stat = stat_key(stat)
        if stat and metric in _METRICS:
            key = f"{_METRICS[metric]}_{stat}"
            values[key], names[key] = float(value) / 1000.0, name
    definitions = {k: "sglang_itl" for k in values if k.startswith("itl_s")}
    definitions.update({k: "vllm_tpot" for k in values if k.startswith("tpot_s")})
    notes = [
        "SGLang's E2E ends after the stream's [DONE]; llminfer rebuilds E2E as TTFT + Σ ITL "
        "(the last token), a little shorter",
        "SGLang's output tokens come from the server's usage, else the requested length",
    ]
    if len(runs) > 1:
        notes.append(f"{len(runs)} runs in the file: figures of the last one ({where})")
    return ToolSummary(FORMAT, doc.name, values, names, definitions, tuple(notes))
