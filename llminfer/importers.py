"""Importers: other benchmark tools' exports → the request-log schema of ``llminfer.logs``.

Each importer returns ``(DataFrame, assumptions)``; ``read_requests`` validates the frame like
any other log. Field names follow the tools' own exports (see
``shared/reference/metric-definitions.md``): vLLM ``bench serve --save-result --save-detailed``
JSON, GenAI-Perf ``profile_export.json``, AIPerf ``profile_export.jsonl`` and ray llmperf
``*_individual_responses.json``. Where a format lacks a field the assumption is returned, and
``RequestLog.source`` carries it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0}


def _load_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"source={str(path)!r} is not valid JSON: {exc}") from None


def detect_format(path: Path) -> str:
    """Name the format of a log file from its suffix and, for JSON, its keys.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix == ".jsonl":
        return "aiperf"
    if suffix == ".json":
        data = _load_json(path)
        if isinstance(data, dict) and "experiments" in data:
            return "genai-perf"
        if isinstance(data, dict) and {"ttfts", "input_lens"} <= set(data):
            return "vllm"
        if (
            isinstance(data, list)
            and data
            and isinstance(data[0], dict)
            and {"ttft_s", "end_to_end_latency_s"} <= set(data[0])
        ):
            return "llmperf"
        raise ValueError(
            f"source={str(path)!r}: JSON not recognised as a vLLM --save-detailed result "
            "(keys ttfts, input_lens), a GenAI-Perf profile_export.json (key experiments) or an "
            "llmperf individual_responses list (keys ttft_s, end_to_end_latency_s); pass format="
        )
    raise ValueError(
        f"source={str(path)!r}: cannot tell the format from the suffix {suffix!r}; use .csv, "
        ".json or .jsonl, or pass format= one of csv, vllm, genai-perf, aiperf, llmperf"
    )


def _token_times(first: float, gaps) -> np.ndarray:
    return first + np.concatenate(([0.0], np.cumsum(np.asarray(gaps, dtype=float))))


def import_vllm(path: Path) -> tuple[pd.DataFrame, list[str]]:
    """vLLM ``bench serve --save-result --save-detailed`` JSON → request log.

    ``start_times`` (monotonic seconds) + ``ttfts`` → first token; + ``latencies`` → end;
    ``itls`` (chunk gaps, s) → ``token_ts``; ``errors`` non-empty → failed.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    data = _load_json(path)
    need = ("input_lens", "output_lens", "ttfts", "latencies", "itls", "errors", "start_times")
    missing = [k for k in need if k not in data]
    if missing:
        raise ValueError(
            f"source={str(path)!r} lacks vLLM per-request arrays {', '.join(missing)}; save "
            "the result with `vllm bench serve --save-result --save-detailed`"
        )
    lengths = {k: len(data[k]) for k in need}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"source={str(path)!r}: per-request arrays differ in length {lengths}")
    start = np.asarray(data["start_times"], dtype=float)
    failed = np.array([bool(e) for e in data["errors"]])
    ttft = np.asarray(data["ttfts"], dtype=float)
    first = np.where(failed, np.nan, start + ttft)
    end = np.where(failed, np.nan, start + np.asarray(data["latencies"], dtype=float))
    token_ts = [
        None if f else _token_times(t, g)
        for f, t, g in zip(failed, first, data["itls"], strict=True)
    ]
    out_lens = np.asarray(data["output_lens"])
    multi = sum(
        1
        for f, g, n in zip(failed, data["itls"], out_lens, strict=True)
        if not f and len(g) + 1 != n
    )
    frame = pd.DataFrame(
        {
            "request_id": [f"vllm-{i}" for i in range(len(start))],
            "start_ts": start,
            "first_token_ts": first,
            "end_ts": end,
            "input_tokens": data["input_lens"],
            "output_tokens": out_lens,
            "status": np.where(failed, "failed", "ok"),
            "error": [e or "" for e in data["errors"]],
            "token_ts": token_ts,
        }
    )
    if "queue_times" in data and len(data["queue_times"]) == len(frame):
        frame["client_queue_s"] = data["queue_times"]
    assumptions = [
        "start_times are vLLM's monotonic clock (seconds from an arbitrary origin): differences "
        "are exact, absolute values are not wall-clock time",
        "the clock starts after the client's concurrency slot is acquired, so client-side "
        "waiting is not in TTFT",
    ]
    if multi:
        assumptions.append(
            f"{multi} request(s) streamed fewer chunks than output tokens; tokens per chunk "
            "are unknown, so per-token ITL variants treat each chunk as one sample"
        )
    return frame, assumptions


def _sse_event(response: dict) -> tuple[bool, dict | None]:
    """(carries content?, usage or None) of one GenAI-Perf response entry."""
    if "text_output" in response:  # Triton export
        return bool(response["text_output"]), None
    text = str(response.get("response", "")).strip()
    if text.startswith("data:"):
        text = text[len("data:") :].strip()
    if not text or text == "[DONE]":
        return False, None
    try:
        event = json.loads(text)
    except json.JSONDecodeError:
        return bool(text), None
    content = False
    for choice in event.get("choices") or []:
        delta = choice.get("delta") or {}
        if delta.get("content") or choice.get("text"):
            content = True
    return content, event.get("usage")


def _prompt_words(request_inputs) -> int:
    payload = request_inputs.get("payload", request_inputs) if request_inputs else {}
    if isinstance(payload, str):
        try:
            payload = json.loads(payload)
        except json.JSONDecodeError:
            return len(payload.split())
    texts = [m.get("content", "") for m in payload.get("messages", [])] + [
        payload.get("prompt", "") or payload.get("text_input", "")
    ]
    return sum(len(str(t).split()) for t in texts)


def import_genai_perf(path: Path) -> tuple[pd.DataFrame, list[str]]:
    """GenAI-Perf ``profile_export.json`` → request log (times in ns in the file).

    The first response with content is the first token (role-only, empty and ``[DONE]`` events
    are skipped); the last one with content is the end. Token counts come from the stream's
    ``usage`` when present, else output = content chunks and input = prompt words.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    data = _load_json(path)
    rows, counted_chunks, counted_words = [], 0, 0
    for e, experiment in enumerate(data.get("experiments", [])):
        info = experiment.get("experiment", {})
        label = f"{info.get('mode', 'run')}={info.get('value', e)}"
        for i, request in enumerate(experiment.get("requests", [])):
            times = np.asarray(request.get("response_timestamps", []), dtype=float) * 1e-9
            usage = None
            content = []
            for response in request.get("response_outputs", []):
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
                    "start_ts": request["timestamp"] * 1e-9,
                    "first_token_ts": chunks[0] if ok else np.nan,
                    "end_ts": chunks[-1] if ok else np.nan,
                    "input_tokens": in_tokens,
                    "output_tokens": out_tokens if ok else 0,
                    "status": "ok" if ok else "failed",
                    "error": "" if ok else "no response carried content",
                    "token_ts": chunks if ok else None,
                    "experiment": label,
                }
            )
    if not rows:
        raise ValueError(f"source={str(path)!r}: no requests under experiments[*].requests")
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
    return pd.DataFrame(rows), assumptions


def _metric_seconds(metrics: dict, name: str):
    item = metrics.get(name)
    if item is None:
        return None
    unit = item.get("unit", "ms")
    if unit not in _UNIT_SECONDS:
        raise ValueError(f"AIPerf metric {name} has unit {unit!r}; known: {sorted(_UNIT_SECONDS)}")
    value = item.get("value")
    if isinstance(value, list):
        return np.asarray(value, dtype=float) * _UNIT_SECONDS[unit]
    return None if value is None else float(value) * _UNIT_SECONDS[unit]


def import_aiperf(path: Path) -> tuple[pd.DataFrame, list[str]]:
    """AIPerf ``profile_export.jsonl`` (one record a line) → request log.

    ``request_start_ns`` → start; + ``time_to_first_token`` → first token; + ``request_latency``
    → end; ``inter_chunk_latency`` → ``token_ts``; ``error`` or ``was_cancelled`` → failed.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"source={str(path)!r} line {number} is not JSON: {exc}") from None
        meta, metrics = record.get("metadata", {}), record.get("metrics", {})
        start = meta["request_start_ns"] * 1e-9
        ttft = _metric_seconds(metrics, "time_to_first_token")
        latency = _metric_seconds(metrics, "request_latency")
        if latency is None and meta.get("request_end_ns") is not None:
            latency = meta["request_end_ns"] * 1e-9 - start
        error = record.get("error")
        failed = bool(error) or bool(meta.get("was_cancelled"))
        gaps = _metric_seconds(metrics, "inter_chunk_latency")
        first = start + ttft if ttft is not None and not failed else np.nan
        rows.append(
            {
                "request_id": str(meta.get("x_request_id", f"aiperf-{number}")),
                "start_ts": start,
                "first_token_ts": first,
                "end_ts": start + latency if latency is not None and not failed else np.nan,
                "input_tokens": (metrics.get("input_sequence_length") or {}).get("value"),
                "output_tokens": (metrics.get("output_sequence_length") or {}).get("value"),
                "status": "failed" if failed else "ok",
                "error": (error or {}).get("message", "") if isinstance(error, dict) else "",
                "token_ts": _token_times(first, gaps) if gaps is not None and not failed else None,
                "benchmark_phase": meta.get("benchmark_phase"),
            }
        )
    frame = pd.DataFrame(rows)
    assumptions = ["AIPerf's own ITL is (E2E − TTFT)/(N − 1); its chunk gaps ('ICL') → token_ts"]
    warmup = int((frame["benchmark_phase"] == "warmup").sum()) if len(frame) else 0
    if warmup:
        assumptions.append(f"{warmup} warm-up record(s) kept; filter benchmark_phase to drop them")
    return frame, assumptions


def import_llmperf(path: Path) -> tuple[pd.DataFrame, list[str]]:
    """ray llmperf ``*_individual_responses.json`` → request log.

    llmperf stores no start time: every request is assumed to start at 0 s, so TTFT, E2E and
    TPOT are exact but the window, TPS and RPS are not the run's.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    data = _load_json(path)
    if not isinstance(data, list):
        raise ValueError(f"source={str(path)!r}: llmperf responses are a JSON list")
    rows = []
    for i, item in enumerate(data):
        failed = bool(item.get("error_code")) or bool(item.get("error_msg"))
        rows.append(
            {
                "request_id": f"llmperf-{i}",
                "start_ts": 0.0,
                "first_token_ts": np.nan if failed else item.get("ttft_s"),
                "end_ts": np.nan if failed else item.get("end_to_end_latency_s"),
                "input_tokens": item.get("number_input_tokens"),
                "output_tokens": item.get("number_output_tokens"),
                "status": "failed" if failed else "ok",
                "error": str(item.get("error_msg") or item.get("error_code") or ""),
            }
        )
    assumptions = [
        "llmperf records no start time: every request is assumed to start at 0 s, so latencies "
        "are exact but the window, TPS and RPS are not the run's"
    ]
    return pd.DataFrame(rows), assumptions


IMPORTERS: dict[str, Callable[[Path], tuple[pd.DataFrame, list[str]]]] = {
    "vllm": import_vllm,
    "genai-perf": import_genai_perf,
    "aiperf": import_aiperf,
    "llmperf": import_llmperf,
}
