"""vLLM ``benchmarks/benchmark_serving.py`` and ``vllm bench serve`` result JSON.

Every version writes one JSON object: run figures (``duration``, ``completed``, ``failed`` from
2025, ``total_input_tokens``, ``total_output_tokens``, ``request_throughput``,
``output_throughput``, ``total_token_throughput``, ``request_goodput`` — spelt
``"request_goodput:"`` in some 2024–25 versions — and ``mean_/median_/std_/pNN_<metric>_ms`` for
``ttft``, ``tpot``, ``itl``, ``e2el``), and with ``--save-detailed`` (before 2025: always) the
per-request arrays ``input_lens, output_lens, ttfts (s), itls (list of chunk gaps, s),
generated_texts, errors``. Only versions from late 2025 add ``latencies`` and ``start_times``
(``time.perf_counter`` seconds) and ``queue_times``. Source: vllm-project/vllm,
``benchmarks/benchmark_serving.py`` (2024) and ``vllm/benchmarks/serve.py`` (``calculate_metrics``
and the ``result`` dict of ``benchmark``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from llminfer.logs.importers._files import (
    Document,
    field_of,
    number,
    numbers,
    problem,
    run_index,
)
from llminfer.logs.importers.records import Imported, ToolSummary, stat_key
from llminfer.logs.rules import VLLM

FORMAT = "vllm"
#: Per-request arrays any vLLM version writes with --save-detailed (or always, before 2025).
PER_REQUEST = ("ttfts", "output_lens")
_METRICS = {"ttft": "ttft_s", "tpot": "tpot_s", "itl": "itl_s", "e2el": "e2e_s"}
#: Keys only SGLang's bench_serving writes (it shares vLLM's per-request arrays).
SGLANG_KEYS = ("mean_e2e_latency_ms", "total_output_tokens_retokenized", "accept_length")


def _is_vllm_dict(data) -> bool:
    if not isinstance(data, dict) or any(k in data for k in SGLANG_KEYS):
        return False
    return (
        "ttfts" in data
        or ("duration" in data and "mean_ttft_ms" in data)
        or ("duration" in data and "request_throughput" in data and "completed" in data)
    )


def _runs(doc: Document) -> list[dict]:
    """The results in a file: one JSON object, or one a line (``--append-result`` appends each
    run's result to the file after a newline)."""
    if doc.kind == "json":
        return [doc.json] if _is_vllm_dict(doc.json) else []
    if doc.kind == "jsonl" and doc.lines:
        records = [record for _, record in doc.lines]
        return records if all(_is_vllm_dict(r) for r in records) else []
    return []


def detect(doc: Document) -> str | None:
    """``"requests"`` for a vLLM result with per-request arrays, ``"summary"`` without them (a
    file of several, one a line: ``"requests"`` when every one has them).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    runs = _runs(doc)
    if not runs:
        return None
    return "requests" if all(all(k in r for k in PER_REQUEST) for r in runs) else "summary"


def arrays_to_frame(
    data: dict, doc: Document, prefix: str, where: str = ""
) -> tuple[pd.DataFrame, list[str], bool]:
    """vLLM-shaped per-request arrays (vLLM and SGLang) → request-log rows.

    Returns (frame, assumptions, starts_known). Without ``latencies`` E2E = TTFT + Σ ITL; without
    ``start_times`` every request starts at 0 s. A request counted as successful with 0 output
    tokens is loaded as failed with the reason "empty response".

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    at = f"{where}, " if where else ""
    ttfts = field_of(data, "ttfts", doc.name, where or "the result")
    n = len(ttfts) if isinstance(ttfts, list) else -1
    if n < 0:
        raise problem(doc.name, f"{at}field 'ttfts'", "must be a list (one TTFT per request)")
    arrays = {}
    for key in ("input_lens", "output_lens", "itls", "errors", "latencies", "start_times"):
        if key in data and data[key] is not None:
            if not isinstance(data[key], list) or len(data[key]) != n:
                size = len(data[key]) if isinstance(data[key], list) else type(data[key]).__name__
                raise problem(
                    doc.name,
                    f"{at}field {key!r}",
                    f"must be a list of {n} entries, one per request like 'ttfts' (found {size})",
                )
            arrays[key] = data[key]
    assumptions: list[str] = []
    errors = [str(e) if e else "" for e in arrays.get("errors", [""] * n)]
    out_lens = [
        number(v, doc.name, f"{at}output_lens[{i}]")
        for i, v in enumerate(arrays.get("output_lens", [np.nan] * n))
    ]
    in_lens = arrays.get("input_lens")
    if in_lens is None:
        in_lens = [0] * n
        assumptions.append("no input_lens in the file: input tokens counted as 0")
    in_lens = [number(v, doc.name, f"{at}input_lens[{i}]") for i, v in enumerate(in_lens)]
    gaps = [
        numbers(g, doc.name, f"{at}itls[{i}]") for i, g in enumerate(arrays.get("itls", [[]] * n))
    ]
    ttft = np.array([number(v, doc.name, f"{at}ttfts[{i}]") for i, v in enumerate(ttfts)])
    starts_known = "start_times" in arrays
    start = (
        np.array(
            [
                number(v, doc.name, f"{at}start_times[{i}]")
                for i, v in enumerate(arrays["start_times"])
            ]
        )
        if starts_known
        else np.zeros(n)
    )
    if "latencies" in arrays:
        latency = np.array(
            [number(v, doc.name, f"{at}latencies[{i}]") for i, v in enumerate(arrays["latencies"])]
        )
    else:
        latency = ttft + np.array([sum(g) for g in gaps])
        if n:
            assumptions.append(
                "no per-request latencies in the file: E2E = TTFT + the sum of its chunk gaps "
                "(itls), which ends at the last token as vLLM's own latency does"
            )
    failed = np.array([bool(e) for e in errors], dtype=bool)
    empty = ~failed & (np.asarray(out_lens) == 0)
    status_error = [
        e if f else ("empty response" if z else "")
        for e, f, z in zip(errors, failed, empty, strict=True)
    ]
    bad = failed | empty
    first = np.where(bad, np.nan, start + ttft)
    end = np.where(bad, np.nan, start + latency)
    token_ts = [
        None if b else f + np.concatenate(([0.0], np.cumsum(g)))
        for b, f, g in zip(bad, first, gaps, strict=True)
    ]
    frame = pd.DataFrame(
        {
            "request_id": [f"{prefix}-{i}" for i in range(n)],
            "start_ts": start,
            "first_token_ts": first,
            "end_ts": end,
            "input_tokens": in_lens,
            "output_tokens": out_lens,
            "status": np.where(bad, "failed", "ok"),
            "error": status_error,
            "token_ts": token_ts,
        }
    )
    queue = data.get("queue_times")
    if isinstance(queue, list) and len(queue) == n:
        frame["client_queue_s"] = pd.to_numeric(pd.Series(data["queue_times"]), "coerce")
    if empty.any():
        assumptions.append(
            f"{int(empty.sum())} request(s) the tool counted as successful returned 0 output "
            "tokens (its TTFT for them is 0.0): loaded as failed with the reason "
            "'empty response', so they are out of llminfer's latency statistics but inside the "
            "tool's"
        )
    multi = sum(
        1 for b, g, k in zip(bad, gaps, out_lens, strict=True) if not b and len(g) + 1 != k and g
    )
    if multi:
        assumptions.append(
            f"{multi} request(s) streamed a different number of chunks than output tokens: "
            "chunk gaps (ITL) are per chunk, as the tool pools them"
        )
    return frame, assumptions, starts_known


def read(doc: Document, benchmark: int | None = None) -> Imported:
    """A vLLM result with per-request arrays → ``Imported``; the run window is ``duration``.
    A file ``--append-result`` wrote holds one result a line: every run (column ``benchmark``
    says which; their ``start_times`` share the machine's monotonic clock) or only run
    ``benchmark`` (an index).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    runs = _runs(doc)
    if detect(doc) == "summary":
        raise problem(
            doc.name,
            "",
            "is a vLLM result without per-request arrays (ttfts, output_lens): run vllm bench "
            "serve with --save-result --save-detailed, or read its aggregates with "
            "llminfer.read_summary()",
        )
    only = None if benchmark is None else run_index(len(runs), benchmark, "result")
    several = len(runs) > 1
    frames, assumptions, windows, starts_known = [], [], [], True
    for b, data in enumerate(runs):
        if only is not None and b != only:
            continue
        where = f"line {doc.lines[b][0]}" if several else ""
        frame, said, known = arrays_to_frame(data, doc, f"vllm-{b}" if several else "vllm", where)
        if several:
            frame["benchmark"] = b
        frames.append(frame)
        assumptions += [a for a in said if a not in assumptions]
        starts_known = starts_known and known
        window = data.get("duration")
        at = f"{where}, field 'duration'" if where else "field 'duration'"
        windows.append(number(window, doc.name, at) if window is not None else None)
    frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    if starts_known:
        assumptions.insert(
            0,
            "start_times are the client's perf_counter clock (seconds from an arbitrary origin):"
            " differences are exact, absolute values are not wall-clock time; the client's wait "
            "for a concurrency slot is not in TTFT",
        )
    else:
        assumptions.insert(
            0,
            "this vLLM version wrote no start_times: request starts are unknown (every start_ts "
            "is 0), so latencies are exact but arrivals, load over time and queueing can't be "
            "told",
        )
    window = windows[0] if len(windows) == 1 else None
    if window is not None:
        assumptions.append(f"run window = the file's duration, {window:.6g} s (vLLM's own)")
    if several and only is None:
        assumptions.append(
            f"{len(runs)} results in one file (--append-result), one a line: filter column "
            "'benchmark' (or pass benchmark=), each run's rates are over its own duration"
        )
    return Imported(frame, assumptions, window, starts_known)


def read_summary(doc: Document, benchmark: int | None = None) -> ToolSummary:
    """The run figures of any vLLM result JSON, with or without per-request arrays; of a file
    ``--append-result`` wrote, run ``benchmark`` (an index; the last by default), whose rules
    name that run (``rules.benchmark``) and its duration (``rules.rate_window_s``).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    runs = _runs(doc)
    index = run_index(len(runs), -1 if benchmark is None else benchmark, "result")
    data = runs[index]
    values, names = {}, {}

    def put(key: str, name: str, scale: float = 1.0) -> None:
        value = data.get(name)
        if value is not None and not isinstance(value, (list, dict, str, bool)):
            values[key], names[key] = float(value) * scale, name

    put("window_s", "duration")
    put("rps", "request_throughput")
    put("output_tps", "output_throughput")
    put("input_tps", "input_throughput")
    put("total_tps", "total_token_throughput")
    put("goodput_rps", "request_goodput")
    put("goodput_rps", "request_goodput:")  # the key as some 2024-25 versions spelt it
    put("peak_output_tps", "max_output_tokens_per_s")  # 2026 on
    put("peak_concurrency", "max_concurrent_requests")
    if "completed" in data:
        completed = number(data["completed"], doc.name, "field 'completed'")
        failed = data.get("failed")
        if failed is None and isinstance(data.get("errors"), list):
            failed = sum(1 for e in data["errors"] if e)
        if failed is not None:
            failed = number(failed, doc.name, "field 'failed'")
            values["n_requests"], names["n_requests"] = completed + failed, "completed + failed"
            values["n_failed"], names["n_failed"] = failed, "failed"
    if "input_tps" not in values and "total_input_tokens" in data and "window_s" in values:
        total_in = number(data["total_input_tokens"], doc.name, "field 'total_input_tokens'")
        values["input_tps"] = total_in / values["window_s"]
        names["input_tps"] = "total_input_tokens / duration"
    for name, value in data.items():
        parts = name.split("_")
        if len(parts) < 3 or parts[-1] != "ms" or isinstance(value, (list, dict, str)):
            continue
        stat, metric = stat_key(parts[0]), "_".join(parts[1:-1])
        if stat is None or metric not in _METRICS or value is None:
            continue
        key = f"{_METRICS[metric]}_{stat}"
        values[key], names[key] = float(value) / 1000.0, name
    definitions = {k: "vllm_tpot" for k in values if k.startswith("tpot_s")}
    definitions.update({k: "vllm_itl" for k in values if k.startswith("itl_s")})
    notes = (
        "vLLM counts a request as completed when the HTTP stream succeeded, even with 0 output "
        "tokens (TTFT 0.0); llminfer loads those as failed ('empty response'), so TTFT/E2E and "
        "RPS differ when the file has any",
        "vLLM's duration runs from the first request sent to the last response, arrival "
        "period included; rates are per that duration",
    )
    rules = VLLM
    if len(runs) > 1:
        notes += (
            f"{len(runs)} results in the file (--append-result): figures of result {index} "
            "(pass benchmark= for another); compare_definitions uses that run's requests",
        )
        rules = replace(VLLM, benchmark=index, rate_window_s=values.get("window_s"))
    return ToolSummary(FORMAT, doc.name, values, names, definitions, notes, rules=rules)
