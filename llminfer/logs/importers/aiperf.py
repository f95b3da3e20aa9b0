"""NVIDIA AIPerf (ai-dynamo/aiperf) ``profile_export.jsonl`` records and the aggregate JSON that
AIPerf (``profile_export_aiperf.json``) and GenAI-Perf (``profile_export_genai_perf.json``) write.

Records, one JSON object a line (``aiperf/common/models/record_models.py``, ``MetricRecordInfo``):

- current (v0.2 on): ``metadata`` with ``x_request_id``, ``request_start_ns``,
  ``request_ack_ns``, ``request_end_ns`` (epoch ns), ``benchmark_phase`` (``warmup`` or
  ``profiling``), ``was_cancelled``; ``metrics`` with ``time_to_first_token``,
  ``request_latency``, ``inter_token_latency``, ``inter_chunk_latency`` (a list),
  ``input_sequence_length``, ``output_sequence_length`` — each ``{"value", "unit"}``; ``error``
  null or ``{"code", "type", "message"}``.
- v0.1.x: ``metadata`` with ``timestamp_ns`` (request start, epoch ns), ``credit_phase``,
  ``conversation_id``, ``turn_index``, ``worker_id``, ``error``; metric ``ttft`` instead of
  ``time_to_first_token``.

Aggregates (docs/tutorials/working-with-profile-exports.md): one object, each metric
``{"unit", "avg", "min", "max", "p1" … "p99", "std"}`` at the top level (v0.1.x: under
``records``, keyed by tag or as a list with ``tag``), plus ``request_throughput``,
``output_token_throughput``, ``benchmark_duration``, ``request_count``, ``error_request_count``.
AIPerf's ``inter_token_latency`` is (E2E − TTFT)/(N − 1) per request, the quantity vLLM calls
TPOT; its chunk gaps are ``inter_chunk_latency``.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime

import numpy as np
import pandas as pd

from llminfer.logs.importers._files import Document, number, numbers, problem
from llminfer.logs.importers.records import Imported, ToolSummary, stat_key
from llminfer.logs.rules import AIPERF, adjusted_metric

FORMAT = "aiperf"
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0}
#: Aggregate metric names (AIPerf and GenAI-Perf) → (llminfer metric, definition row).
_AGGREGATES = {
    "time_to_first_token": ("ttft_s", ""),
    "ttft": ("ttft_s", ""),
    "request_latency": ("e2e_s", ""),
    "inter_token_latency": ("itl_s", "genai_perf_itl"),
}
#: AIPerf's per-request figures beside those (``aiperf/metrics/types``): ``ttst_metric.py``,
#: the second content response less the first (seconds; its unit scales it), and
#: ``output_token_throughput_metrics.py``, 1 / ITL per request (tokens/s per user, as is).
_AIPERF_ONLY = {
    "time_to_second_token": ("ttst_s", None),
    "output_token_throughput_per_user": ("user_tps", 1.0),
}
#: AIPerf's error-adjusted figures (``adj_<tag>``, written only when requests failed;
#: ``aiperf/metrics/derived_latency.py``): the metric's values with every failed request as
#: +inf, numpy's ``nearest`` percentiles over them all; their mean, max and sum are inf.
_ADJUSTED = {
    f"adj_{name}": adjusted_metric(metric)
    for name, (metric, _) in _AGGREGATES.items()
    if name in ("time_to_first_token", "request_latency", "inter_token_latency")
}
_RATES = {
    "request_throughput": "rps",
    "output_token_throughput": "output_tps",
    "input_token_throughput": "input_tps",
    "total_token_throughput": "total_tps",
    "benchmark_duration": "window_s",
    "request_count": "n_ok",
    "error_request_count": "n_failed",
    "goodput": "goodput_rps",
    "good_request_fraction": "good_fraction",  # good / (request_count + error_request_count)
    "goodrequestfraction": "good_fraction",  # the CSV's "GoodRequestFraction (ratio)"
}


def _is_record(record) -> bool:
    if not isinstance(record, dict) or not isinstance(record.get("metadata"), dict):
        return False
    meta = record["metadata"]
    return "request_start_ns" in meta or "timestamp_ns" in meta


def _aggregate_metrics(data) -> dict | None:
    """The metric → stats mapping of an aggregate JSON, or None."""
    if not isinstance(data, dict):
        return None
    block = data.get("records", data)
    if isinstance(block, list):
        block = {r.get("tag"): r for r in block if isinstance(r, dict) and r.get("tag")}
    if not isinstance(block, dict):
        return None
    found = {k: v for k, v in block.items() if isinstance(v, dict) and ("avg" in v or "p50" in v)}
    if any(k in found for k in _AGGREGATES):
        for name in _RATES:
            if isinstance(data.get(name), dict) and name not in found:
                found[name] = data[name]
        return found
    return None


def detect(doc: Document) -> str | None:
    """``"requests"`` for AIPerf records (JSON Lines), ``"summary"`` for an aggregate JSON.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if doc.kind == "jsonl" and doc.lines and _is_record(doc.lines[0][1]):
        return "requests"
    if doc.kind == "json" and _is_record(doc.json):  # a one-record file
        return "requests"
    if doc.kind == "json" and _aggregate_metrics(doc.json) is not None:
        return "summary"
    return None


def _seconds(metrics: dict, names: tuple[str, ...], path, where: str):
    for name in names:
        item = metrics.get(name)
        if item is None:
            continue
        if not isinstance(item, dict):
            raise problem(path, f"{where}, metrics.{name}", "must be an object {value, unit}")
        unit = item.get("unit", "ms")
        if unit not in _UNIT_SECONDS:
            raise problem(
                path,
                f"{where}, metrics.{name}.unit",
                f"{unit!r} is not a time unit (known: {', '.join(_UNIT_SECONDS)})",
            )
        value = item.get("value")
        if isinstance(value, list):
            return (
                np.asarray(numbers(value, path, f"{where}, metrics.{name}.value"))
                * _UNIT_SECONDS[unit]
            )
        return (
            number(value, path, f"{where}, metrics.{name}.value", allow_none=True)
            * _UNIT_SECONDS[unit]
        )
    return None


def _is_raw(doc: Document) -> bool:
    """AIPerf's ``profile_export_raw.jsonl`` (``--export-level raw``): each request's payload
    and the SSE packets it got back (``responses``), no ``metrics``."""
    first = doc.lines[0][1] if doc.kind == "jsonl" and doc.lines else doc.json
    return (
        isinstance(first, dict)
        and "responses" in first
        and "payload" in first
        and "metrics" not in first
    )


def read(doc: Document) -> Imported:
    """AIPerf records → ``Imported`` (warm-up records excluded and counted).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if _is_raw(doc):
        raise problem(
            doc.name,
            "",
            "is AIPerf's raw export (--export-level raw: each request's payload and the packets "
            "it got back, no metrics): read profile_export.jsonl beside it, which the same run "
            "wrote with every request's metrics",
        )
    if detect(doc) == "summary":
        raise problem(
            doc.name,
            "",
            "is an AIPerf/GenAI-Perf aggregate (profile_export_aiperf.json): it holds no "
            "per-request records; read profile_export.jsonl beside it, or read this one with "
            "llminfer.read_summary()",
        )
    records = doc.lines if doc.lines is not None else [(1, doc.json)]
    rows, warmup, old, streamless = [], 0, 0, 0
    for line, record in records:
        where = f"line {line}"
        if not _is_record(record):
            raise problem(
                doc.name,
                where,
                "is not an AIPerf record (no metadata.request_start_ns or metadata.timestamp_ns)",
            )
        meta = record["metadata"]
        metrics = record.get("metrics") or {}
        if not isinstance(metrics, dict):
            raise problem(doc.name, f"{where}, field 'metrics'", "must be an object")
        phase = meta.get("benchmark_phase", meta.get("credit_phase"))
        if str(phase).lower() == "warmup":
            warmup += 1
            continue
        if "request_start_ns" in meta:
            start = (
                number(meta["request_start_ns"], doc.name, f"{where}, metadata.request_start_ns")
                * 1e-9
            )
        else:
            start = number(meta["timestamp_ns"], doc.name, f"{where}, metadata.timestamp_ns") * 1e-9
            old += 1
        error = record.get("error") or meta.get("error")
        failed = bool(error) or bool(meta.get("was_cancelled"))
        ttft = _seconds(metrics, ("time_to_first_token", "ttft"), doc.name, where)
        latency = _seconds(metrics, ("request_latency",), doc.name, where)
        if (latency is None or math.isnan(latency)) and meta.get("request_end_ns") is not None:
            latency = (
                number(meta["request_end_ns"], doc.name, f"{where}, metadata.request_end_ns") * 1e-9
                - start
            )
        gaps = _seconds(metrics, ("inter_chunk_latency",), doc.name, where)
        tokens = {}
        for key in ("input_sequence_length", "output_sequence_length"):
            item = metrics.get(key)
            value = item.get("value") if isinstance(item, dict) else item
            tokens[key] = number(value, doc.name, f"{where}, metrics.{key}", allow_none=True)
        if not failed and (ttft is None or math.isnan(ttft)) and latency is not None:
            # Non-streaming: one response, no TTFT in AIPerf's record; its first token is
            # the response (TTFT = E2E), as a client without a stream sees it.
            ttft, streamless = latency, streamless + 1
        if not failed:
            for name, value in (("time_to_first_token", ttft), ("request_latency", latency)):
                if value is None or (isinstance(value, float) and math.isnan(value)):
                    raise problem(
                        doc.name,
                        f"{where}, metrics.{name}",
                        "is missing for a request without an error",
                    )
        empty = not failed and tokens["output_sequence_length"] == 0
        bad = failed or empty
        first = math.nan if bad else start + ttft
        message = ""
        if isinstance(error, dict):
            message = str(error.get("message") or error.get("type") or error.get("code") or "error")
        elif error:
            message = str(error)
        elif meta.get("was_cancelled"):
            message = "cancelled"
        token_ts, second_gap = None, math.nan
        if gaps is not None and not bad and isinstance(gaps, np.ndarray) and gaps.size:
            token_ts = first + np.concatenate(([0.0], np.cumsum(gaps)))
            # the first gap as the record has it: token_ts, epoch seconds in float64, keep
            # 0.24 us, 0.1 % of a 0.24 ms gap, where AIPerf's time to second token is exact
            second_gap = float(gaps[0])
        rows.append(
            {
                "request_id": str(
                    meta.get("x_request_id") or record.get("record_id") or f"aiperf-{line}"
                ),
                "start_ts": start,
                "first_token_ts": first,
                "end_ts": math.nan if bad else start + latency,
                "input_tokens": tokens["input_sequence_length"],
                "output_tokens": tokens["output_sequence_length"],
                "status": "failed" if bad else "ok",
                "error": "empty response" if empty else message,
                "token_ts": token_ts,
                "second_chunk_gap_s": second_gap,
            }
        )
    if not rows:
        raise problem(doc.name, "", f"holds no profiling records ({warmup} warm-up record(s) only)")
    frame = pd.DataFrame(rows)
    if frame["request_id"].duplicated().any():  # ids repeat across multi-turn sessions
        frame["request_id"] = [f"{r}#{i}" for i, r in enumerate(frame["request_id"])]
    assumptions = [
        "AIPerf's own ITL is (E2E − TTFT)/(N − 1) per request (llminfer's TPOT); its chunk gaps "
        "(inter_chunk_latency) → token_ts"
    ]
    if old:
        assumptions.append(
            f"{old} record(s) in the v0.1 layout (metadata.timestamp_ns, metric ttft)"
        )
    if warmup:
        assumptions.append(f"{warmup} warm-up record(s) excluded, as AIPerf excludes them")
    if streamless:
        assumptions.append(
            f"{streamless} record(s) without time_to_first_token (a non-streaming run): the "
            "first token is taken to be the response, so TTFT = E2E for them"
        )
    return Imported(frame, assumptions)


def read_summary(doc: Document, tool: str = FORMAT) -> ToolSummary:
    """An aggregate JSON (AIPerf or GenAI-Perf) → ``ToolSummary`` in seconds and per second.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if detect(doc) == "requests":  # records: the aggregate AIPerf wrote beside them
        stem = doc.path.name.split(".")[0].removesuffix("_raw")  # the raw export's too
        sibling = doc.path.with_name(f"{stem}_aiperf.json")
        if not sibling.is_file():
            raise problem(
                doc.name,
                "",
                f"is AIPerf per-request output; its aggregate ({sibling.name}) is not beside it",
            )
        from llminfer.logs.importers._files import load

        return read_summary(load(sibling), tool)
    found = _aggregate_metrics(doc.json)
    if found is None:
        raise problem(doc.name, "", "holds no AIPerf/GenAI-Perf aggregate metrics")
    values, names, definitions = {}, {}, {}
    for name, stats in found.items():
        unit = str(stats.get("unit", ""))
        if name in _AIPERF_ONLY and tool == FORMAT:  # figures of its console llminfer recomputes
            metric, scale = _AIPERF_ONLY[name]
            scale = _UNIT_SECONDS.get(unit, 1.0) if scale is None else scale
            for word, value in stats.items():
                stat = stat_key(word)
                if stat is not None and isinstance(value, (int, float)):
                    key = f"{metric}_{stat}"
                    values[key], names[key] = float(value) * scale, f"{name}.{word}"
        elif name in _AGGREGATES or (name in _ADJUSTED and tool == FORMAT):
            metric, definition = _AGGREGATES.get(name) or (_ADJUSTED[name], "")
            if unit not in _UNIT_SECONDS:
                raise problem(doc.name, f"field {name}.unit", f"{unit!r} is not a time unit")
            for word, value in stats.items():
                stat = stat_key(word)
                # an error-adjusted mean, max and sum are inf when a request failed
                if stat is None or not isinstance(value, (int, float)) or math.isinf(value):
                    continue
                key = f"{metric}_{stat}"
                values[key] = float(value) * _UNIT_SECONDS[unit]
                names[key] = f"{name}.{word}"
                if definition:
                    definitions[key] = definition
        elif name in _RATES and isinstance(stats.get("avg"), (int, float)):
            values[_RATES[name]], names[_RATES[name]] = float(stats["avg"]), f"{name}.avg"
    slo, unread = _slos(doc.json)
    rules = replace(AIPERF, rate_window_s=_phase_seconds(doc.json), slo=slo)
    if "n_ok" in values:  # AIPerf's request_count counts valid requests only
        ok, ok_name = values.pop("n_ok"), names.pop("n_ok")
        values["n_requests"] = ok + values.get("n_failed", 0.0)
        names["n_requests"] = f"{ok_name} + error_request_count.avg"
    notes = (
        f"{tool}'s inter_token_latency is (E2E − TTFT)/(N − 1) per request — llminfer's TPOT, "
        "not its chunk-gap ITL",
        f"{tool} counts output tokens with the client's tokenizer unless told to use the "
        "server's usage",
    )
    if unread:
        notes += (
            f"{tool}'s goodput counts SLOs on {', '.join(unread)}, which llminfer does not "
            "recompute: its goodput is not reproduced",
        )
    if tool != FORMAT:
        rules = None
    elif rules.rate_window_s is None:
        notes += (
            "the file holds no profiling-phase start_time/end_time: AIPerf's rate denominator "
            "is taken as benchmark_duration, which it is not (AIPerf divides by the phase)",
        )
    return ToolSummary(tool, doc.name, values, names, definitions, notes, rules=rules)


#: AIPerf's ``--goodput`` metric tags llminfer recomputes (``input_config.slos``, in each
#: metric's display unit: ms for times), with the factor to llminfer's ``GOODPUT_METRICS``.
_SLO_TAGS = {
    "time_to_first_token": ("ttft_s", 1e-3),
    "inter_token_latency": ("itl_s", 1e-3),
    "request_latency": ("e2e_s", 1e-3),
    "output_token_throughput_per_user": ("user_tps", 1.0),
}


def _slos(data) -> tuple[dict[str, float], list[str]]:
    """The goodput thresholds of an aggregate JSON's ``input_config.slos`` (``--goodput
    "time_to_first_token:60 inter_token_latency:15"``) in llminfer's names and units, and the
    tags it cannot recompute (then none is kept: the goodput needs all of them)."""
    config = data.get("input_config") if isinstance(data, dict) else None
    slos = config.get("slos") if isinstance(config, dict) else None
    if not isinstance(slos, dict) or not slos:
        return {}, []
    unread = sorted(tag for tag in slos if tag not in _SLO_TAGS)
    numbers = all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in slos.values()
    )
    if unread or not numbers:
        return {}, unread or [str(slos)]
    return {_SLO_TAGS[tag][0]: float(v) * _SLO_TAGS[tag][1] for tag, v in slos.items()}, []


def _phase_seconds(data) -> float | None:
    """AIPerf's rate denominator: the profiling phase's ``start_time`` → ``end_time`` (ISO
    times in the aggregate JSON, ``observation_duration`` in aiperf/metrics/metric_dicts.py),
    or ``phase_start_ns``/``phase_end_ns`` when a CSV's sibling gave them; None if absent."""
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("phase_ns"), (list, tuple)) and len(data["phase_ns"]) == 2:
        lo, hi = data["phase_ns"]
        return (hi - lo) * 1e-9 if hi > lo else None
    try:
        lo = datetime.fromisoformat(str(data["start_time"]))
        hi = datetime.fromisoformat(str(data["end_time"]))
    except (KeyError, ValueError, TypeError):
        return None
    seconds = (hi - lo).total_seconds()
    return seconds if seconds > 0 else None


def is_summary_csv(text: str) -> bool:
    """Whether a CSV's text is AIPerf's ``profile_export_aiperf.csv``: request metrics
    ``Metric,avg,min,max,sum,p1,…`` (GenAI-Perf's have no ``sum``) or AIPerf's run metrics
    (``Benchmark Duration (sec)``, ``… (requests/sec)``).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    first = text.lstrip().split("\n", 1)[0].replace(" ", "").lower()
    return first.startswith("metric,avg,min,max,sum") or (
        first == "metric,value" and ("Benchmark Duration (sec)" in text or "requests/sec" in text)
    )
