"""NVIDIA GenAI-Perf ``profile_export.json`` (the raw per-request export it passes from
perf_analyzer) and its aggregate ``profile_export_genai_perf.json``.

``{"experiments": [{"experiment": {"mode": "concurrency"|"request_rate", "value": N},
"requests": [{"timestamp": NS, "request_inputs": {...}, "response_timestamps": [NS, ...],
"response_outputs": [{"response": "data: {...}\\n\\n"} | {"text_output": "..."}]}],
"window_boundaries": [NS, NS]}], "version", "service_kind", "endpoint"}``; every time in
nanoseconds. For OpenAI endpoints each response is the raw server-sent event: the role-only first
event, empty deltas and ``data: [DONE]`` carry no content and are skipped, as GenAI-Perf's
``llm_profile_data_parser.py`` does; Triton exports use ``text_output``. Source:
triton-inference-server/perf_analyzer ``genai-perf/genai_perf/profile_data_parser/`` and
its tests' fixtures (``tests/test_llm_profile_data_parser.py``).
"""

from __future__ import annotations

import csv
import glob
import io
import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from llminfer.logs.importers import aiperf
from llminfer.logs.importers._files import Document, load, number, numbers, problem, text_of
from llminfer.logs.importers.records import Imported, ToolSummary

FORMAT = "genai-perf"


#: Keys only AIPerf's aggregate has; GenAI-Perf's ``*_genai_perf.json`` has the same metric
#: blocks without them (plus ``input_config``).
AIPERF_ONLY = ("benchmark_duration", "records", "error_summary")


def detect(doc: Document) -> str | None:
    """``"requests"`` for a profile_export.json (key ``experiments``), ``"summary"`` for a
    ``*_genai_perf.json`` aggregate.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    data = doc.json
    if doc.kind == "json" and isinstance(data, dict) and isinstance(data.get("experiments"), list):
        return "requests"
    if (
        doc.kind == "json"
        and isinstance(data, dict)
        and not any(k in data for k in AIPERF_ONLY)
        and aiperf.detect(doc) == "summary"
    ):
        return "summary"
    return None


def _sse_event(response) -> tuple[int, dict | None]:
    """(how many events with content, usage or None) of one response entry.

    One entry may hold several ``data:`` events that arrived in one network read; GenAI-Perf
    merges them into one response, and llminfer counts each event with content (one streamed
    chunk each). Content is what GenAI-Perf's ``_extract_openai_text_output`` reads: a
    streaming chunk's ``delta.content``, a completion's ``text`` or a non-streaming chat
    completion's ``message.content`` (``reasoning_content`` too, which later servers stream
    before the answer)."""
    if not isinstance(response, dict):
        return int(bool(response)), None
    if "text_output" in response:  # Triton export
        return int(bool(response["text_output"])), None
    text = str(response.get("response", "")).strip()
    content, usage = 0, None
    for part in re.split(r"(?:^|\n\n)data:", text if text.startswith("data:") else "data:" + text):
        part = part.strip()
        if not part or part == "[DONE]":
            continue
        try:
            event = json.loads(part)
        except json.JSONDecodeError:
            content += bool(part)
            continue
        if not isinstance(event, dict):
            continue
        for choice in event.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") or {}
            message = choice.get("message") or {}
            if (
                delta.get("content")
                or choice.get("text")
                or delta.get("reasoning_content")
                or message.get("content")
            ):
                content += 1
                break
        usage = event.get("usage") or usage
    return content, usage


def _prompt_words(request_inputs) -> int:
    payload = (
        request_inputs.get("payload", request_inputs) if isinstance(request_inputs, dict) else {}
    )
    if isinstance(payload, list):
        payload = payload[0] if payload else {}
    if isinstance(payload, str):
        try:
            payload = json.loads(payload)
        except json.JSONDecodeError:
            return len(payload.split())
    if not isinstance(payload, dict):
        return 0
    texts = [m.get("content", "") for m in payload.get("messages", []) if isinstance(m, dict)]
    texts.append(payload.get("prompt", "") or payload.get("text_input", ""))
    return sum(len(str(t).split()) for t in texts)


def read(doc: Document) -> Imported:
    """profile_export.json → ``Imported``: the first response with content is the first token,
    the last one the end; tokens from the stream's ``usage`` when present.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if detect(doc) == "summary":
        raise problem(
            doc.name,
            "",
            "is a GenAI-Perf aggregate (*_genai_perf.json): it holds no per-request records; "
            "read the profile_export.json beside it, or read this one with "
            "llminfer.read_summary()",
        )
    rows, counted_chunks, counted_words = [], 0, 0
    for e, experiment in enumerate(doc.json["experiments"]):
        if not isinstance(experiment, dict):
            raise problem(doc.name, f"experiments[{e}]", "must be an object")
        info = experiment.get("experiment") or {}
        label = f"{info.get('mode', 'run')}={info.get('value', e)}"
        for i, request in enumerate(experiment.get("requests") or []):
            where = f"experiments[{e}].requests[{i}]"
            if not isinstance(request, dict):
                raise problem(doc.name, where, "must be an object")
            start = number(request.get("timestamp"), doc.name, f"{where}, field 'timestamp'") * 1e-9
            times = (
                np.asarray(
                    numbers(
                        request.get("response_timestamps"), doc.name, f"{where}.response_timestamps"
                    )
                )
                * 1e-9
            )
            outputs = request.get("response_outputs") or []
            if len(outputs) != len(times):
                raise problem(
                    doc.name,
                    f"{where}.response_outputs",
                    f"has {len(outputs)} entries but response_timestamps has {len(times)}",
                )
            usage, content = None, []
            for response in outputs:
                events, event_usage = _sse_event(response)
                content.append(events)
                usage = event_usage or usage
            content = np.asarray(content, dtype=np.int64)
            chunks = times[content > 0] if len(times) else times
            chunk_tokens = content[content > 0]
            ok = len(chunks) > 0
            if usage and usage.get("completion_tokens") is not None:
                out_tokens, in_tokens = usage["completion_tokens"], usage.get("prompt_tokens")
            else:
                out_tokens, in_tokens = int(chunk_tokens.sum()), None
                counted_chunks += ok
            if in_tokens is None:
                in_tokens = _prompt_words(request.get("request_inputs", {}))
                counted_words += ok
            rows.append(
                {
                    "request_id": f"{label}/{i}",
                    "start_ts": start,
                    "first_token_ts": chunks[0] if ok else np.nan,
                    "end_ts": chunks[-1] if ok else np.nan,
                    "input_tokens": in_tokens,
                    "output_tokens": out_tokens if ok else 0,
                    "status": "ok" if ok else "failed",
                    "error": "" if ok else "empty response: no response carried content",
                    "token_ts": chunks if ok else None,
                    "chunk_tokens": chunk_tokens if ok else None,
                    "experiment": label,
                }
            )
    if not rows:
        raise problem(doc.name, "experiments[*].requests", "holds no requests")
    assumptions = ["E2E ends at the last response with content ([DONE] is not counted)"]
    if counted_chunks:
        assumptions.append(
            f"{counted_chunks} request(s) had no usage in the stream: output tokens = content "
            "chunks (GenAI-Perf itself re-tokenises the text)"
        )
    if counted_words:
        assumptions.append(
            f"{counted_words} request(s) had no prompt_tokens: input tokens = prompt words"
        )
    empty = sum(1 for r in rows if r["status"] == "failed")
    if empty:
        assumptions.append(
            f"{empty} request(s) had no response with content: loaded as failed ('empty "
            "response'); GenAI-Perf too leaves them out of its latency statistics, but counts "
            "them in request_throughput"
        )
    return Imported(pd.DataFrame(rows), assumptions)


#: What differs between GenAI-Perf's figures and llminfer's, figure by figure
#: (genai_perf/profile_data_parser/llm_profile_data_parser.py, ``_parse_requests``).
KEY_NOTES = {
    "rps": "GenAI-Perf's request_throughput is len(requests) / duration: every request sent, "
    "empty responses included; llminfer's rps counts successful requests.",
}
NOTES = (
    "GenAI-Perf's inter_token_latency is (E2E − TTFT)/(N − 1) per request, rounded to the "
    "nanosecond — llminfer's TPOT, not its chunk-gap ITL",
    "GenAI-Perf counts output tokens by re-tokenising the streamed text with the model's "
    "tokenizer; llminfer takes the stream's usage when present, else one token per event",
    "GenAI-Perf's duration runs from the first request sent to the last response with content",
)


def is_summary_csv(text: str) -> bool:
    """Whether a CSV's text is GenAI-Perf's ``*_genai_perf.csv`` (``Metric,avg,min,max,…``).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    first = text.lstrip().split("\n", 1)[0].replace(" ", "").lower()
    return first.startswith("metric,avg,min,max") or first == "metric,value"


def _csv_aggregate(path) -> dict:
    """``*_genai_perf.csv`` → the same ``{metric: {"unit", "avg", "p99", …}}`` as its JSON:
    request metrics (``Time To First Token (ms)`` …, values written ``{:,.2f}``) and system
    metrics (``Metric,Value``: ``Request Throughput (per sec)`` …); source
    genai_perf/export_data/csv_exporter.py."""
    data, header = {}, None
    for n, row in enumerate(csv.reader(io.StringIO(text_of(path))), start=1):
        if not row or not any(cell.strip() for cell in row):
            continue
        if row[0].strip().lower() == "metric":
            header = [c.strip().lower() for c in row]
            continue
        if any(c.strip() in ("GPU_Index", "GPU_UUID") for c in row) or header == "skip":
            # AIPerf's GPU-telemetry table (Endpoint,GPU_Index,…; empty without DCGM): not a
            # request metric, skipped with its rows
            header = "skip"
            continue
        if header is None:
            raise problem(path, f"line {n}", "comes before any 'Metric,…' header row")
        # the unit is the last parenthesis: "Time to First Token (error-adjusted) (ms)"
        match = re.fullmatch(r"\s*(.+?)\s*(?:\(([^()]+)\))?\s*", row[0])
        name = match.group(1).lower().replace(" ", "_")
        if name.endswith("_(error-adjusted)"):  # AIPerf's adj_<tag>, as in its JSON
            name = "adj_" + name.removesuffix("_(error-adjusted)")
        entry = {"unit": (match.group(2) or "tokens").strip()}
        for word, cell in zip(header[1:], row[1:], strict=False):
            cell = cell.strip().replace(",", "")
            if not cell:
                continue
            try:
                entry["avg" if word == "value" else word] = float(cell)
            except ValueError:
                raise problem(
                    path, f"line {n}, column {word!r}", f"{cell!r} is not a number"
                ) from None
        if "gpu" not in header:  # telemetry CSVs list one row per GPU: not request figures
            data[name] = entry
    return data


def read_summary_csv(path) -> ToolSummary:
    """GenAI-Perf's ``*_genai_perf.csv`` → ``ToolSummary`` (two decimals of ms, as written).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    doc = Document(Path(path), json=_csv_aggregate(path), kind="json")
    return _own(aiperf.read_summary(doc, tool=FORMAT))


def read_aiperf_summary_csv(path) -> ToolSummary:
    """AIPerf's ``profile_export_aiperf.csv`` (its GPU-telemetry section skipped) →
    ``ToolSummary`` labelled ``aiperf``, with AIPerf's rules; figures have two decimals, and
    ``rules.resolution`` rounds llminfer's the same way. The rate denominator (the profiling
    phase) is read from ``profile_export_aiperf.json`` or ``phase_manifest.json`` beside it,
    and the goodput's thresholds (``input_config.slos``) from the JSON.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    path = Path(path)
    data = _csv_aggregate(path)
    sibling = path.with_name(re.sub(r"\.csv(\.gz)?$", r".json\1", path.name))
    manifest = path.with_name("phase_manifest.json")
    if sibling.is_file():
        own = load(sibling).json
        if isinstance(own, dict):
            data.update({k: own[k] for k in ("start_time", "end_time", "input_config") if k in own})
    elif manifest.is_file():
        phases = (load(manifest).json or {}).get("phases") or []
        profiling = [
            p for p in phases if isinstance(p, dict) and p.get("phase_kind") == "profiling"
        ]
        if len(profiling) == 1 and {"start_ns", "end_ns"} <= set(profiling[0]):
            data["phase_ns"] = [profiling[0]["start_ns"], profiling[0]["end_ns"]]
    summary = aiperf.read_summary(Document(path, json=data, kind="json"), tool=aiperf.FORMAT)
    resolution = {}
    for key, name in summary.names.items():
        metric = name.split(".")[0]
        unit = str((data.get(metric) or {}).get("unit", ""))
        scale = aiperf._UNIT_SECONDS.get(unit, 1.0)
        if not key.startswith("n_"):
            resolution[key] = 0.01 * scale
    summary.rules = replace(summary.rules, resolution=resolution)
    summary.notes += ("AIPerf's CSV holds two decimals: llminfer's figures are rounded alike",)
    return summary


def _own(summary: ToolSummary) -> ToolSummary:
    summary.notes = NOTES
    summary.key_notes = {k: v for k, v in KEY_NOTES.items() if k in summary.values}
    summary.empty_as_ok = False
    return summary


def read_summary(doc: Document) -> ToolSummary:
    """The ``*_genai_perf.json`` (else ``*_genai_perf.csv``) beside a profile_export.json, or
    that aggregate file itself.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if detect(doc) != "requests":
        return _own(aiperf.read_summary(doc, tool=FORMAT))
    name = re.sub(r"\.json(\.gz)?$", r"_genai_perf.json\1", doc.path.name)
    sibling = doc.path.with_name(name)
    if sibling.is_file():
        return _own(aiperf.read_summary(load(sibling), tool=FORMAT))
    stem = re.sub(r"\.json(\.gz)?$", "", doc.path.name)
    tables = sorted(doc.path.parent.glob(f"{glob.escape(stem)}*genai_perf.csv"))
    if tables:
        return read_summary_csv(tables[0])
    raise problem(
        doc.name,
        "",
        f"is GenAI-Perf per-request output; its aggregates ({name} or {stem}_genai_perf.csv) "
        "are not beside it",
    )
