"""Importers: what real benchmark tools wrote → llminfer's request log, or their own summary.

One module per tool — ``vllm``, ``sglang``, ``aiperf``, ``genai_perf``, ``llmperf``,
``guidellm`` — each with ``detect(doc)`` (``"requests"``, ``"summary"`` or None), ``read(doc)``
(an ``Imported``: rows in the request-log schema, the assumptions made, the tool's run window)
and ``read_summary(doc)`` (a ``ToolSummary``). This registry reads a file once (plain, ``.gz``
or Parquet, JSON or JSON Lines — recognised by content, never by suffix), asks each tool whether
it knows it, and dispatches. Adding a tool is adding one module to ``TOOLS``.

The tools' metric definitions, with sources, are in ``docs/metric-definitions.md``.
"""

from __future__ import annotations

from pathlib import Path

from llminfer.logs.importers import _files, aiperf, genai_perf, guidellm, llmperf, sglang, vllm
from llminfer.logs.importers._files import Document, ExportError, load, problem
from llminfer.logs.importers.records import Imported, ToolSummary
from llminfer.logs.logfile import is_structured

#: Tool modules in the order they are asked (the most specific shapes first).
TOOLS = {m.FORMAT: m for m in (sglang, vllm, genai_perf, aiperf, llmperf, guidellm)}
#: Tools whose one file can hold several runs, one picked with ``benchmark=`` (GuideLLM's
#: benchmarks; vLLM's results appended one a line by ``--append-result``).
SEVERAL_RUNS = ("guidellm", "vllm")
#: Formats ``read`` accepts besides the tools: a request-log table as CSV or Parquet.
TABLES = ("csv", "parquet")

__all__ = [
    "TOOLS",
    "Document",
    "ExportError",
    "Imported",
    "ToolSummary",
    "detect_format",
    "read",
    "read_summary",
    "summary_csv",
]


def _path(path: str | Path) -> Path:
    if not isinstance(path, (str, Path)):
        raise ValueError(f"path={path!r} must be a file path (str or Path)")
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"path={str(path)!r}: no such file")
    return path


def _what_was_looked_for() -> str:
    return (
        "looked for: a request-log CSV or Parquet table; vLLM benchmark_serving/bench serve "
        "result JSON (ttfts, output_lens); SGLang bench_serving JSON Lines (mean_e2e_latency_ms,"
        " --output-details arrays); AIPerf profile_export.jsonl (metadata.request_start_ns or "
        "timestamp_ns); GenAI-Perf profile_export.json (experiments); llmperf "
        "*_individual_responses.json (ttft_s, end_to_end_latency_s) or *_summary.json; "
        "GuideLLM benchmarks.json (benchmarks); AIPerf/GenAI-Perf aggregate JSON; "
        "GenAI-Perf *_genai_perf.csv, AIPerf profile_export_aiperf.csv, GuideLLM benchmarks.csv "
        "(read_summary only); GuideLLM benchmarks.yaml"
    )


def summary_csv(path: str | Path) -> str | None:
    """What a tool's summary CSV is and where its requests are, or None for any other file
    (a request-log CSV among them): AIPerf's ``profile_export_aiperf.csv``, GenAI-Perf's
    ``*_genai_perf.csv``, GuideLLM's ``benchmarks.csv``. They hold aggregates only, so
    ``read_requests`` refuses them and names ``read_summary``.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    path = _path(path)
    if is_structured(path):  # JSON, JSON Lines, YAML or Parquet: not a CSV at all
        return None
    try:
        head = _files._head(path, 4096)
    except (ValueError, OSError):  # not text, or a damaged archive: the CSV reader says which
        return None
    if guidellm.is_summary_csv(head):
        return "GuideLLM's benchmarks.csv (its requests are in benchmarks.json)"
    if aiperf.is_summary_csv(head):
        return "AIPerf's profile_export_aiperf.csv (its requests are in profile_export.jsonl)"
    if genai_perf.is_summary_csv(head):
        return "GenAI-Perf's *_genai_perf.csv (its requests are in profile_export.json)"
    return None


def _classify(doc: Document) -> tuple[str, str]:
    """(format, "requests" | "summary" | "table") of a parsed file, or an ExportError."""
    if doc.kind in TABLES:
        return doc.kind, "table"
    for name, tool in TOOLS.items():
        kind = tool.detect(doc)
        if kind:
            return name, kind
    raise problem(doc.name, "", f"is not a format llminfer knows; {_what_was_looked_for()}")


def detect_format(path: str | Path) -> str:
    """The format of a file, from its content: ``csv``, ``parquet`` or a tool in ``TOOLS``.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    return _classify(load(_path(path)))[0]


def read(
    path: str | Path, format: str = "auto", benchmark: int | None = None
) -> tuple[str, Imported | None]:
    """Read a tool export into request-log rows: ``(format, Imported)``.

    For ``csv`` the second item is None (``llminfer.logs`` reads CSVs itself). A summary-only
    file raises an ``ExportError`` that says so and names ``read_summary``. ``benchmark``: one
    benchmark (an index) of a file holding several (GuideLLM; vLLM's ``--append-result``); None
    for all.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    path = _path(path)
    if format == "csv":
        return "csv", None
    doc = load(path)
    if format == "auto":
        format, _ = _classify(doc)
    if format == "csv":
        return "csv", None
    if format == "parquet":
        if doc.table is None:
            raise problem(doc.name, "", "is not a Parquet file")
        return "parquet", Imported(doc.table, ["read as a request-log table (Parquet)"])
    if format not in TOOLS:
        raise ValueError(
            f"format={format!r} is not known; use auto, csv, parquet or one of {', '.join(TOOLS)}"
        )
    tool = TOOLS[format]
    if tool.detect(doc) is None:
        raise problem(doc.name, "", f"is not {format} output; {_what_was_looked_for()}")
    if benchmark is not None:
        if format not in SEVERAL_RUNS:
            raise ValueError(f"benchmark={benchmark!r}: an export of {format} holds one run")
        return format, tool.read(doc, benchmark=benchmark)
    return format, tool.read(doc)


def read_summary(path: str | Path, benchmark: int | None = None) -> ToolSummary:
    """A tool's own aggregates — from a summary file or the run figures of a result file — in
    llminfer's names and units: ``to_dict()`` uses ``summarize``'s keys (``ttft_s_mean``,
    ``ttft_s_p99``, ``e2e_s_mean``, ``output_tps``, ``rps``, ``n_requests``, …) plus
    ``itl_s_mean/p50/p99`` for what the tool calls ITL; ``names`` gives each figure's name in the
    tool. Seconds, requests/s, tokens/s. ``benchmark``: which benchmark (an index) of a file
    holding several (GuideLLM; vLLM's ``--append-result``; default the last); ``rules`` names
    the tool's own rules.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    doc = load(_path(path))
    if doc.kind == "csv":
        head = _files._head(doc.path, 4096)
        if guidellm.is_summary_csv(head):
            return guidellm.read_summary_csv(doc.path, benchmark=benchmark)
        if benchmark is None and aiperf.is_summary_csv(head):
            return genai_perf.read_aiperf_summary_csv(doc.path)
        if benchmark is None and genai_perf.is_summary_csv(head):
            return genai_perf.read_summary_csv(doc.path)
    format, _ = _classify(doc)
    if benchmark is not None:
        if format not in SEVERAL_RUNS:
            raise ValueError(f"benchmark={benchmark!r}: an export of {format} holds one run")
        return TOOLS[format].read_summary(doc, benchmark=benchmark)
    if format in TABLES:
        raise problem(
            doc.name,
            "",
            "is a request-log table, not a tool's summary: summarise it "
            "with llminfer.summarize(read_requests(path))",
        )
    return TOOLS[format].read_summary(doc)
