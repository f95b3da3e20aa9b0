"""GuideLLM (vllm-project/guidellm) ``benchmarks.json``: ``{"benchmarks": [...]}``, one entry per
strategy run (synchronous, throughput, constant rate …).

Each benchmark lists its requests by status, ``requests: {"successful": [...], "errored": [...],
"incomplete": [...]}``, and its aggregates under ``metrics`` (``time_to_first_token_ms``,
``inter_token_latency_ms``, ``time_per_output_token_ms``, ``request_latency`` (s),
``requests_per_second``, ``output_tokens_per_second`` … each ``{"successful": {"mean",
"median", "min", "max", "percentiles": {"p50", "p90", "p95", "p99", …}}, …}``).

A request's times (epoch seconds):

- v0.2–v0.3 (``src/guidellm/benchmark/benchmark.py``, ``GenerativeTextResponseStats``):
  ``start_time``, ``first_token_time``, ``last_token_time``, ``end_time``, ``prompt_tokens``,
  ``output_tokens``;
- v0.4 on (``src/guidellm/schemas/…``, ``GenerativeRequestStats``): ``info.timings`` with
  ``request_start``, ``first_token_iteration``, ``last_token_iteration``, ``request_end``,
  ``token_iterations``, and computed ``prompt_tokens``/``output_tokens``.

The file holds only the requests GuideLLM kept for the measurement: those in its warm-up and
cool-down (``--warmup``/``--cooldown``) are left out of ``requests`` and of ``metrics``; the
importer reports how many requests the run made beyond those listed.
"""

from __future__ import annotations

import math

import pandas as pd

from llminfer.logs.importers._files import Document, number, problem
from llminfer.logs.importers.records import Imported, ToolSummary, stat_key

FORMAT = "guidellm"
_METRICS = {
    "time_to_first_token_ms": ("ttft_s", 1e-3, ""),
    "request_latency": ("e2e_s", 1.0, ""),
    "inter_token_latency_ms": ("itl_s", 1e-3, "guidellm_itl"),
    "time_per_output_token_ms": ("tpot_s", 1e-3, "guidellm_tpot"),
}
_STATUSES = ("successful", "errored", "incomplete")


def detect(doc: Document) -> str | None:
    """``"requests"`` for a benchmarks.json whose benchmarks list requests, else ``"summary"``.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    data = doc.json
    if doc.kind != "json" or not isinstance(data, dict):
        return None
    benchmarks = data.get("benchmarks")
    if not isinstance(benchmarks, list) or not benchmarks or not isinstance(benchmarks[0], dict):
        return None
    if not any(k in benchmarks[0] for k in ("requests", "metrics")):
        return None
    has = any(
        isinstance(b.get("requests"), dict) and any(b["requests"].get(s) for s in _STATUSES)
        for b in benchmarks
        if isinstance(b, dict)
    )
    return "requests" if has else "summary"


def _times(request: dict, path, where: str) -> tuple[float, float, float, float]:
    timings = (
        (request.get("info") or {}).get("timings")
        if isinstance(request.get("info"), dict)
        else None
    )
    if isinstance(timings, dict):  # v0.4 on
        names = ("request_start", "first_token_iteration", "last_token_iteration", "request_end")
        values = [timings.get(n) for n in names]
        prefix = "info.timings."
    else:
        names = ("start_time", "first_token_time", "last_token_time", "end_time")
        values = [request.get(n) for n in names]
        prefix = ""
    return tuple(
        number(v, path, f"{where}, field {prefix}{n}", allow_none=True)
        for v, n in zip(values, names, strict=True)
    )


def read(doc: Document) -> Imported:
    """Every benchmark's listed requests → one log (column ``benchmark`` says which).

    ``end_ts`` is the last token (as for the other tools), ``first_token_ts`` the first.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if detect(doc) != "requests":
        raise problem(
            doc.name,
            "",
            "is a GuideLLM benchmarks.json without per-request data "
            "(requests were not saved): read its aggregates with llminfer.read_summary()",
        )
    rows, assumptions, left_out = [], [], 0
    for b, bench in enumerate(doc.json["benchmarks"]):
        requests = bench.get("requests") or {}
        listed = 0
        for status in _STATUSES:
            items = requests.get(status) or []
            if not isinstance(items, list):
                raise problem(doc.name, f"benchmarks[{b}].requests.{status}", "must be a list")
            for i, request in enumerate(items):
                where = f"benchmarks[{b}].requests.{status}[{i}]"
                if not isinstance(request, dict):
                    raise problem(doc.name, where, "must be an object")
                listed += 1
                start, first, last, end = _times(request, doc.name, where)
                if math.isnan(start):
                    raise problem(doc.name, where, "has no request start time")
                out = number(
                    request.get("output_tokens"),
                    doc.name,
                    f"{where}, field 'output_tokens'",
                    allow_none=True,
                )
                prompt = number(
                    request.get("prompt_tokens"),
                    doc.name,
                    f"{where}, field 'prompt_tokens'",
                    allow_none=True,
                )
                ok = status == "successful"
                empty = ok and (out == 0 or math.isnan(first))
                good = ok and not empty
                stop = last if not math.isnan(last) else end
                rows.append(
                    {
                        "request_id": str(
                            request.get("request_id") or f"guidellm-{b}-{status}-{i}"
                        ),
                        "start_ts": start,
                        "first_token_ts": first if good else math.nan,
                        "end_ts": stop if good else math.nan,
                        "input_tokens": prompt,
                        "output_tokens": out,
                        "status": "ok" if good else "failed",
                        "error": "" if good else ("empty response" if empty else status),
                        "benchmark": b,
                    }
                )
        totals = bench.get("request_totals") or (bench.get("run_stats") or {}).get("requests_made")
        if isinstance(totals, dict) and isinstance(totals.get("total"), (int, float)):
            left_out += max(0, int(totals["total"]) - listed)
    if not rows:
        raise problem(doc.name, "benchmarks[*].requests", "holds no requests")
    frame = pd.DataFrame(rows)
    if frame["request_id"].duplicated().any():
        frame["request_id"] = [f"{r}#{i}" for i, r in enumerate(frame["request_id"])]
    assumptions.append(
        "E2E ends at the last token (GuideLLM's request_latency runs to the stream's end)"
    )
    assumptions.append(
        "only the requests GuideLLM kept are in the file: its warm-up and cool-down requests "
        "are excluded, as in its own metrics"
    )
    if left_out:
        assumptions.append(
            f"{left_out} request(s) counted in request_totals are not listed (warm-up/cool-down "
            "exclusion or --sample-requests)"
        )
    if len(doc.json["benchmarks"]) > 1:
        assumptions.append(
            f"{len(doc.json['benchmarks'])} benchmarks in one log: filter column 'benchmark'"
        )
    return Imported(frame, assumptions)


def read_summary(doc: Document, benchmark: int = -1) -> ToolSummary:
    """One benchmark's ``metrics`` (the last by default) → ``ToolSummary``.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    benches = doc.json["benchmarks"]
    bench = benches[benchmark]
    metrics = bench.get("metrics") or {}
    values, names, definitions = {}, {}, {}
    for name, (metric, scale, definition) in _METRICS.items():
        stats = (metrics.get(name) or {}).get("successful") or {}
        flat = dict(stats)
        flat.update(stats.get("percentiles") or {})
        for word, value in flat.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            word = {"p001": "p0.1", "p01": "p1", "p05": "p5", "p999": "p99.9"}.get(word, word)
            stat = stat_key(word)
            if stat is None:
                continue
            key = f"{metric}_{stat}"
            values[key], names[key] = float(value) * scale, f"metrics.{name}.successful.{word}"
            if definition:
                definitions[key] = definition
    for name, key in (("requests_per_second", "rps"), ("output_tokens_per_second", "output_tps")):
        mean = ((metrics.get(name) or {}).get("successful") or {}).get("mean")
        if isinstance(mean, (int, float)):
            values[key], names[key] = float(mean), f"metrics.{name}.successful.mean"
    notes = (
        "GuideLLM's TPOT includes TTFT ((last token − start)/N) and its ITL is "
        "(last − first)/(N − 1); both are averaged over tokens, not requests",
        "GuideLLM's rates are time-weighted over the measured window (warm-up and cool-down cut)",
    )
    if len(benches) > 1:
        notes += (
            f"{len(benches)} benchmarks in the file: figures of benchmark "
            f"{benchmark % len(benches)}",
        )
    return ToolSummary(FORMAT, doc.name, values, names, definitions, notes)
