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

import json
import re

import numpy as np
import pandas as pd

from llminfer.importers import aiperf
from llminfer.importers._files import Document, load, number, numbers, problem
from llminfer.importers.records import Imported, ToolSummary

FORMAT = "genai-perf"


def detect(doc: Document) -> str | None:
    """``"requests"`` for a profile_export.json (key ``experiments``).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    data = doc.json
    if doc.kind == "json" and isinstance(data, dict) and isinstance(data.get("experiments"), list):
        return "requests"
    return None


def _sse_event(response) -> tuple[bool, dict | None]:
    """(carries content?, usage or None) of one response entry."""
    if not isinstance(response, dict):
        return bool(response), None
    if "text_output" in response:  # Triton export
        return bool(response["text_output"]), None
    text = str(response.get("response", "")).strip()
    content, usage = False, None
    # One entry may hold several "data:" events when they arrived in one network read.
    for part in re.split(r"(?:^|\n\n)data:", text if text.startswith("data:") else "data:" + text):
        part = part.strip()
        if not part or part == "[DONE]":
            continue
        try:
            event = json.loads(part)
        except json.JSONDecodeError:
            content = content or bool(part)
            continue
        if not isinstance(event, dict):
            continue
        for choice in event.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content") or choice.get("text") or delta.get("reasoning_content"):
                content = True
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
                has_content, event_usage = _sse_event(response)
                content.append(has_content)
                usage = event_usage or usage
            chunks = times[np.asarray(content, dtype=bool)] if len(times) else times
            ok = len(chunks) > 0
            if usage and usage.get("completion_tokens") is not None:
                out_tokens, in_tokens = usage["completion_tokens"], usage.get("prompt_tokens")
            else:
                out_tokens, in_tokens = len(chunks), None
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
    return Imported(pd.DataFrame(rows), assumptions)


def read_summary(doc: Document) -> ToolSummary:
    """The ``*_genai_perf.json`` beside a profile_export.json (or that file itself).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if detect(doc) != "requests":
        return aiperf.read_summary(doc, tool=FORMAT)
    name = re.sub(r"\.json(\.gz)?$", r"_genai_perf.json\1", doc.path.name)
    sibling = doc.path.with_name(name)
    if not sibling.is_file():
        raise problem(
            doc.name,
            "",
            f"is GenAI-Perf per-request output; its aggregates ({name}) are not beside it",
        )
    return aiperf.read_summary(load(sibling), tool=FORMAT)
