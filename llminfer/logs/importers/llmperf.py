"""ray-project/llmperf ``token_benchmark_ray.py`` results: ``<name>_individual_responses.json``
(a list, one object per request) and, beside it, ``<name>_summary.json``.

Per request (``src/llmperf/common_metrics.py``): ``error_code`` (null when the request
succeeded), ``error_msg``, ``ttft_s``, ``end_to_end_latency_s``, ``inter_token_latency_s``
(the sum of every gap *including TTFT* divided by the output tokens — ≈ E2E/N, see
``src/llmperf/ray_clients/openai_chat_completions_client.py`` and the division in
``token_benchmark_ray.py``), ``request_output_throughput_token_per_s``,
``number_input_tokens``, ``number_output_tokens``, ``number_total_tokens``. No start time is
stored. The summary is ``LLMPerfResults.to_dict()`` flattened with "_" (``src/llmperf/utils.py``):
``results_<metric>_mean``, ``results_<metric>_quantiles_p50`` (pandas' linear quantiles over
requests without an error code), ``results_mean_output_throughput_token_per_s`` (Σ output tokens
of those requests / (end − start) of the whole test), ``results_num_completed_requests``,
``results_num_completed_requests_per_min``, ``results_number_errors``,
``results_num_requests_started``.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from llminfer.logs.importers._files import Document, ExportError, load, number, problem
from llminfer.logs.importers.records import Imported, ToolSummary, stat_key

FORMAT = "llmperf"
_REQUEST_KEYS = {"ttft_s", "end_to_end_latency_s"}
_METRICS = {
    "ttft_s": "ttft_s",
    "end_to_end_latency_s": "e2e_s",
    "inter_token_latency_s": "itl_s",
}


def _is_summary(data) -> bool:
    return isinstance(data, dict) and any(
        str(k).startswith("results_") and "ttft_s" in str(k) for k in data
    )


def detect(doc: Document) -> str | None:
    """``"requests"`` for an individual-responses list, ``"summary"`` for a ``*_summary.json``.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    data = doc.json
    if doc.kind != "json":
        return None
    if (
        isinstance(data, list)
        and data
        and isinstance(data[0], dict)
        and set(data[0]) >= _REQUEST_KEYS
    ):
        return "requests"
    return "summary" if _is_summary(data) else None


def sibling_summary(path: Path) -> Path | None:
    """The summary llmperf wrote beside a per-request file, when it exists:
    ``X_individual_responses.json`` → ``X_summary.json`` (llmperf's own names), or
    ``…/individual/X.json`` → ``…/summary/X.json`` (the layout of ray-project/llmperf-leaderboard's
    ``raw_data``).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    name = re.sub(r"_individual_responses(\.json(\.gz)?)$", r"_summary\1", path.name)
    candidates = [path.with_name(name)]
    if name.endswith(".gz"):
        candidates.append(path.with_name(name[:-3]))
    if path.parent.name == "individual":
        candidates.append(path.parent.parent / "summary" / path.name)
    for candidate in candidates:
        if candidate != path and candidate.is_file():
            return candidate
    return None


def read(doc: Document) -> Imported:
    """Individual responses → ``Imported``; the run window comes from the sibling summary.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if detect(doc) == "summary":
        raise problem(
            doc.name,
            "",
            "is an llmperf *_summary.json (aggregates only): read the *_individual_responses.json"
            " beside it, or read this one with llminfer.read_summary()",
        )
    rows = []
    for i, item in enumerate(doc.json):
        where = f"record {i}"
        if not isinstance(item, dict):
            raise problem(doc.name, where, f"must be a JSON object, not {type(item).__name__}")
        failed = item.get("error_code") is not None
        get = {}
        for key in (
            "ttft_s",
            "end_to_end_latency_s",
            "number_input_tokens",
            "number_output_tokens",
        ):
            get[key] = number(item.get(key), doc.name, f"{where}, field {key!r}", allow_none=failed)
        itl = number(
            item.get("inter_token_latency_s"),
            doc.name,
            f"{where}, field 'inter_token_latency_s'",
            allow_none=True,
        )
        empty = not failed and get["number_output_tokens"] == 0
        bad = failed or empty
        reason = (
            str(item.get("error_msg") or f"error_code {item.get('error_code')}") if failed else ""
        )
        rows.append(
            {
                "request_id": f"llmperf-{i}",
                "start_ts": 0.0,
                "first_token_ts": math.nan if bad else get["ttft_s"],
                "end_ts": math.nan if bad else get["end_to_end_latency_s"],
                "input_tokens": get["number_input_tokens"],
                "output_tokens": get["number_output_tokens"],
                "status": "failed" if bad else "ok",
                "error": "empty response" if empty else reason,
                "llmperf_itl_s": math.nan if bad else itl,
            }
        )
    frame = pd.DataFrame(rows)
    assumptions = [
        "llmperf records no request start times: request starts are unknown (every start_ts is "
        "0), so TTFT and E2E are exact but arrivals and load over time can't be told",
        "llmperf's own inter-token latency (Σ gaps including TTFT / N ≈ E2E/N) is kept per "
        "request in column llmperf_itl_s",
    ]
    empty = int((frame["error"] == "empty response").sum()) if len(frame) else 0
    if empty:
        assumptions.append(
            f"{empty} request(s) without an error code returned 0 output tokens: loaded as "
            "failed ('empty response'); llmperf itself keeps them in its statistics"
        )
    window = None
    summary_path = sibling_summary(doc.path)
    if summary_path is not None:
        try:
            window = _window(read_summary(load(summary_path)))
        except ExportError as exc:
            assumptions.append(f"the sibling summary {summary_path.name} could not be read: {exc}")
    if window is not None:
        assumptions.append(
            f"run window = {window:.6g} s, the test's duration from the sibling "
            f"{summary_path.name} (its completed requests / completed requests per minute)"
        )
    else:
        assumptions.append(
            "no sibling *_summary.json: the run's duration is unknown, so throughput (TPS, RPS) "
            "is NaN — llmperf measures it over the whole test, which the per-request file does "
            "not record"
        )
        window = math.nan
    return Imported(frame, assumptions, window, False)


def _window(summary: ToolSummary) -> float | None:
    return summary.values.get("window_s")


def read_summary(doc: Document) -> ToolSummary:
    """A ``*_summary.json`` → ``ToolSummary`` (the test's duration is derived from its rates).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    data = doc.json
    if not _is_summary(data):
        summary_path = sibling_summary(doc.path)
        if summary_path is None:
            raise problem(
                doc.name,
                "",
                "is llmperf per-request output with no *_summary.json beside it: nothing to "
                "read a tool summary from",
            )
        return read_summary(load(summary_path))
    values, names = {}, {}
    for name, value in data.items():
        match = re.fullmatch(r"results_(.+?)_(quantiles_)?(p\d+|mean|min|max)", str(name))
        if not match or match.group(1) not in _METRICS:
            continue
        stat = stat_key(match.group(3))
        key = f"{_METRICS[match.group(1)]}_{stat}"
        values[key] = number(value, doc.name, f"field {name!r}")
        names[key] = name
    completed = data.get("results_num_completed_requests")
    per_min = data.get("results_num_completed_requests_per_min")
    tps = data.get("results_mean_output_throughput_token_per_s")
    if completed is not None and per_min:
        completed = number(completed, doc.name, "field 'results_num_completed_requests'")
        per_min = number(per_min, doc.name, "field 'results_num_completed_requests_per_min'")
        values["rps"], names["rps"] = per_min / 60.0, "results_num_completed_requests_per_min / 60"
        if per_min > 0:
            values["window_s"] = completed * 60.0 / per_min
            names["window_s"] = "results_num_completed_requests × 60 / …_per_min"
    if tps is not None:
        values["output_tps"] = number(
            tps, doc.name, "field 'results_mean_output_throughput_token_per_s'"
        )
        names["output_tps"] = "results_mean_output_throughput_token_per_s"
    started = data.get("results_num_requests_started")
    if started is not None:
        values["n_requests"], names["n_requests"] = float(started), "results_num_requests_started"
    errors = data.get("results_number_errors")
    if errors is not None:
        values["n_failed"], names["n_failed"] = float(errors), "results_number_errors"
    definitions = {k: "llmperf_itl" for k in values if k.startswith("itl_s")}
    notes = (
        "llmperf's inter_token_latency_s includes the first token's wait (≈ E2E/N); llminfer's "
        "ITL is the gap between chunks, which llmperf's files do not hold",
        "llmperf's output throughput divides by the whole test (end − start), not by the "
        "longest request",
    )
    return ToolSummary(FORMAT, doc.name, values, names, definitions, notes)


def own_itl(frame: pd.DataFrame) -> np.ndarray:
    """llmperf's per-request ``inter_token_latency_s`` of the successful requests (s).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    ok = frame["status"] == "ok"
    return frame.loc[ok, "llmperf_itl_s"].dropna().to_numpy(dtype=float)
