"""Chapter 6: why tools disagree — TPOT and ITL as vLLM, GenAI-Perf/AIPerf, llmperf, GuideLLM
and SGLang define them, computed from one log, and a log set beside a tool's own summary.

Every definition is in ``docs/metric-definitions.md`` with the tools' sources.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from llminfer.logs import RequestLog
from llminfer.metrics import (
    _as_log,
    _chunk_gaps,
    request_metrics,
    summarize,
    weighted_percentile,
)

#: Each tool's definition, in words; ``compare_definitions`` computes every one of them.
DEFINITIONS = {
    "vllm_tpot": "vLLM TPOT: (E2E − TTFT)/(N − 1) per request with N > 1, plain mean over "
    "requests (the first token excluded).",
    "vllm_itl": "vLLM ITL: every gap between consecutive streamed chunks, pooled over all "
    "requests (long outputs dominate; a multi-token chunk is one sample).",
    "genai_perf_itl": "GenAI-Perf/AIPerf ITL: (E2E − TTFT)/(N − 1), one value per request — "
    "the number vLLM calls TPOT.",
    "llmperf_itl": "llmperf inter-token latency: all gaps including TTFT, divided by N, i.e. "
    "E2E/N per request (the first token's wait included).",
    "guidellm_tpot": "GuideLLM TPOT: (last token − request start)/N per request, TTFT "
    "included, weighted by N (token-weighted).",
    "guidellm_itl": "GuideLLM ITL: (last token − first token)/(N − 1) per request, weighted "
    "by N − 1 (token-weighted).",
    "sglang_itl": "SGLang ITL: every chunk gap, pooled; a chunk of k tokens gives k samples "
    "of gap/k (speculative decoding).",
}


def _row(values: np.ndarray, weights: np.ndarray | None = None) -> tuple[float, float, float]:
    if values.size == 0 or (weights is not None and weights.sum() == 0):
        return (float("nan"),) * 3
    if weights is None:
        p50, p99 = np.percentile(values, [50, 99])
        return float(values.mean()), float(p50), float(p99)
    mean = float(np.sum(values * weights) / np.sum(weights))
    return (
        mean,
        weighted_percentile(values, weights, 0.50),
        weighted_percentile(values, weights, 0.99),
    )


def compare_definitions(log: RequestLog | pd.DataFrame, tool=None) -> pd.DataFrame:
    """TPOT/ITL as vLLM, GenAI-Perf/AIPerf, llmperf, GuideLLM and SGLang define them (seconds).

    Index ``vllm_tpot, vllm_itl, genai_perf_itl, llmperf_itl, guidellm_tpot, guidellm_itl,
    sglang_itl``; columns ``mean_s, p50_s, p99_s, definition, note``. Only successful requests
    count. Chunk-gap variants are NaN (``note`` says why) when the log has no ``token_ts``.
    Weighted variants use ``weighted_percentile``. A log read from llmperf uses llmperf's own
    per-request ``inter_token_latency_s`` for its row.

    With ``tool`` (a ``ToolSummary`` from ``llminfer.read_summary``) the result is instead one
    row per figure the tool reported: ``tool_name``, ``tool_value``, ``llminfer_value`` (computed
    from the log with the tool's definition), ``rel_diff`` ((llminfer − tool)/tool),
    ``same_definition`` (whether llminfer's own key means the same) and ``note`` (why they may
    differ). Seconds, per second, counts.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    log = _as_log(log)
    if tool is not None:
        return _against_tool(log, tool)
    requests = log.ok.reset_index(drop=True)
    m = request_metrics(RequestLog(requests, log.rejected, log.source))
    n = m["output_tokens"].to_numpy(dtype=float)
    ttft, e2e, decode = (m[c].to_numpy(dtype=float) for c in ("ttft_s", "e2e_s", "decode_s"))
    multi = n > 1
    per_request_tpot = decode[multi] / (n[multi] - 1)
    rows = {
        "vllm_tpot": _row(per_request_tpot),
        "genai_perf_itl": _row(per_request_tpot),
        "llmperf_itl": _row(e2e / n),
        "guidellm_tpot": _row(e2e / n, n.astype(np.int64)),
        "guidellm_itl": _row(per_request_tpot, (n[multi] - 1).astype(np.int64)),
    }
    notes = dict.fromkeys(DEFINITIONS, "")
    if "llmperf_itl_s" in requests.columns:
        own = requests["llmperf_itl_s"].to_numpy(dtype=float)
        rows["llmperf_itl"] = _row(own[~np.isnan(own)])
        notes["llmperf_itl"] = "llmperf's own per-request inter_token_latency_s"
    if "token_ts" in requests.columns and len(_chunk_gaps(requests)[0]):
        rows["vllm_itl"] = _row(_chunk_gaps(requests)[0])
        rows["sglang_itl"] = _row(_chunk_gaps(requests, per_token=True)[0])
        if "chunk_tokens" not in requests.columns:
            notes["sglang_itl"] = "no chunk_tokens in the log: one token per chunk assumed"
    else:
        for key in ("vllm_itl", "sglang_itl"):
            rows[key] = (float("nan"),) * 3
            notes[key] = "needs per-chunk timestamps (token_ts), which this log does not have"
    del ttft  # TTFT enters through E2E in the definitions that include it
    table = pd.DataFrame(
        [(*rows[k], DEFINITIONS[k], notes[k]) for k in DEFINITIONS],
        index=pd.Index(list(DEFINITIONS), name="definition_of"),
        columns=["mean_s", "p50_s", "p99_s", "definition", "note"],
    )
    return table


def _against_tool(log: RequestLog, tool) -> pd.DataFrame:
    """One row per figure of a ``ToolSummary``: the tool's value beside llminfer's."""
    figures = tool.to_dict()
    wanted = sorted(
        {
            float(k.rsplit("_p", 1)[1])
            for k in figures
            if "_p" in k and k.rsplit("_p", 1)[1][0].isdigit()
        }
        | {50.0, 99.0}
    )
    mine = summarize(log, percentiles=wanted).to_dict()
    definitions = compare_definitions(log)
    stat_column = {"mean": "mean_s", "p50": "p50_s", "p99": "p99_s"}
    rows = []
    for key, value in figures.items():
        definition = tool.definitions.get(key, "")
        same = definition in ("", "vllm_tpot" if key.startswith("tpot_s") else "vllm_itl")
        note = ""
        if definition and not same:
            stat = key.rsplit("_", 1)[1]
            ours = (
                float(definitions.loc[definition, stat_column[stat]])
                if stat in stat_column
                else float("nan")
            )
            note = f"{tool.tool} means {DEFINITIONS[definition]}"
            if key in mine:
                note += f" llminfer's own {key} is {mine[key]:.6g}."
        else:
            ours = float(mine.get(key, float("nan")))
        rate = key in ("window_s", "rps", "output_tps", "input_tps", "total_tps", "goodput_rps")
        if rate and log.source.window_s is None:
            note = "llminfer's window: first request start → last end"
        if not key.startswith(("tpot_s", "itl_s", "output_tps", "window_s")) and any(
            "empty response" in a for a in log.source.assumptions
        ):
            note = (note + " " if note else "") + (
                "requests with 0 output tokens are failed in llminfer, successful in the tool"
            )
        diff = (ours - value) / value if value else float("nan")
        rows.append((tool.names[key], value, ours, diff, same, note))
    return pd.DataFrame(
        rows,
        index=pd.Index(list(figures), name="key"),
        columns=[
            "tool_name",
            "tool_value",
            "llminfer_value",
            "rel_diff",
            "same_definition",
            "note",
        ],
    )
