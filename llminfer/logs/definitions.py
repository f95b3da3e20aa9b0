"""Chapter 6: why tools disagree — TPOT and ITL as vLLM, GenAI-Perf/AIPerf, llmperf, GuideLLM
and SGLang define them, computed from one log, and a log set beside a tool's own summary.

Every definition is in ``docs/metric-definitions.md`` with the tools' sources.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd

from llminfer.logs.chunks import chunk_gaps
from llminfer.logs.metrics import _as_log, request_metrics
from llminfer.logs.quantiles import weighted_percentile
from llminfer.logs.rules import check_goodput_slo, reproduce, rows_of
from llminfer.logs.schema import RequestLog
from llminfer.logs.summary import summarize

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


#: The columns of a comparison with a tool's own figures (``compare_definitions(log, tool)``);
#: a tool with known rules adds ``llminfer_own``, llminfer's figure by its own definitions.
_COMPARISON_COLUMNS = (
    "tool_name",
    "tool_value",
    "llminfer_value",
    "rel_diff",
    "same_definition",
    "note",
)


def _row(values: np.ndarray, weights: np.ndarray | None = None) -> tuple[float, float, float]:
    return tuple(_stat(values, weights, stat) for stat in ("mean", "p50", "p99"))


def _stat(values: np.ndarray, weights: np.ndarray | None, stat: str) -> float:
    """One statistic (``mean``, ``min``, ``max`` or ``pNN``) of per-request values, weighted by
    integer ``weights`` when given (NaN when there are none)."""
    values = np.asarray(values, dtype=float)
    if values.size == 0 or (weights is not None and np.sum(weights) == 0):
        return float("nan")
    if stat in ("min", "max"):
        kept = values if weights is None else values[np.asarray(weights) > 0]
        return float(kept.min() if stat == "min" else kept.max())
    if stat == "mean":
        if weights is None:
            return float(values.mean())
        return float(np.sum(values * weights) / np.sum(weights))
    if not stat.startswith("p"):
        return float("nan")
    try:
        q = float(stat[1:])
    except ValueError:
        return float("nan")
    if not 0 <= q <= 100:
        return float("nan")
    if weights is None:
        return float(np.percentile(values, q))
    return weighted_percentile(values, weights, q / 100)


def _per_request(log: RequestLog) -> tuple[dict, dict[str, str]]:
    """Each definition's samples as ``(values, weights or None)`` from the successful requests,
    and a note per definition (why a row is NaN, or where its values came from)."""
    requests = log.ok.reset_index(drop=True)
    m = request_metrics(RequestLog(requests, log.rejected, log.source))
    n = m["output_tokens"].to_numpy(dtype=float)
    e2e, decode = (m[c].to_numpy(dtype=float) for c in ("e2e_s", "decode_s"))
    multi = n > 1
    per_request_tpot = decode[multi] / (n[multi] - 1)
    samples = {
        "vllm_tpot": (per_request_tpot, None),
        "genai_perf_itl": (per_request_tpot, None),
        "llmperf_itl": (e2e / n, None),
        "guidellm_tpot": (e2e / n, n.astype(np.int64)),
        "guidellm_itl": (per_request_tpot, (n[multi] - 1).astype(np.int64)),
    }
    notes = dict.fromkeys(DEFINITIONS, "")
    if "llmperf_itl_s" in requests.columns:
        own = requests["llmperf_itl_s"].to_numpy(dtype=float)
        samples["llmperf_itl"] = (own[~np.isnan(own)], None)
        notes["llmperf_itl"] = "llmperf's own per-request inter_token_latency_s"
    if "token_ts" in requests.columns and len(chunk_gaps(requests)[0]):
        samples["vllm_itl"] = (chunk_gaps(requests)[0], None)
        samples["sglang_itl"] = (chunk_gaps(requests, per_token=True)[0], None)
        if "chunk_tokens" not in requests.columns:
            notes["sglang_itl"] = "no chunk_tokens in the log: one token per chunk assumed"
    else:
        for key in ("vllm_itl", "sglang_itl"):
            samples[key] = (np.array([]), None)
            notes[key] = "needs per-chunk timestamps (token_ts), which this log does not have"
    return samples, notes


def compare_definitions(
    log: RequestLog | pd.DataFrame, tool=None, slo: dict[str, float] | None = None
) -> pd.DataFrame:
    """TPOT/ITL as vLLM, GenAI-Perf/AIPerf, llmperf, GuideLLM and SGLang define them (seconds).

    Index ``vllm_tpot, vllm_itl, genai_perf_itl, llmperf_itl, guidellm_tpot, guidellm_itl,
    sglang_itl``; columns ``mean_s, p50_s, p99_s, definition, note``. Only successful requests
    count. Chunk-gap variants are NaN (``note`` says why) when the log has no ``token_ts``.
    Weighted variants use ``weighted_percentile``. A log read from llmperf uses llmperf's own
    per-request ``inter_token_latency_s`` for its row.

    With ``tool`` (a ``ToolSummary`` from ``llminfer.read_summary``) the result is instead one
    row per figure the tool reported: ``tool_name``, ``tool_value``, ``llminfer_value`` (computed
    from the log with the tool's definition, for every statistic the tool reports: mean, min,
    max, any percentile), ``rel_diff`` ((llminfer − tool)/tool; 0 when both are 0),
    ``same_definition`` (whether llminfer's own key means the same) and ``note`` (why they may
    differ). When the log holds no run duration of its own (llmperf's per-request file alone)
    the rates use the tool's ``window_s``, and the note says so. Seconds, per second, counts.

    When the summary carries its tool's ``rules`` (vLLM, AIPerf, GuideLLM:
    ``llminfer.logs.rules``), ``llminfer_value`` is computed by the tool's own rules — its
    requests and window, its E2E end, its weights and percentile method — so ``rel_diff`` is
    ~0; ``llminfer_own`` is llminfer's own figure, ``same_definition`` says whether the two
    agree by definition and ``note`` names each rule that differs.

    ``slo``: the thresholds the tool's goodput was counted with, when its file does not hold
    them (vLLM's ``--goodput ttft:60 tpot:15`` is ``{"ttft_s": 0.06, "tpot_s": 0.015}``;
    AIPerf's aggregate JSON holds its own): ``llminfer.logs.rules.GOODPUT_METRICS`` names,
    seconds (``user_tps`` tokens/s). The goodput is then recomputed by the tool's rules.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    log = _as_log(log)
    if slo is not None:
        if tool is None or getattr(tool, "rules", None) is None:
            raise ValueError("slo= applies to a tool's summary with its rules (read_summary)")
        tool = replace(tool, rules=replace(tool.rules, slo=check_goodput_slo(dict(slo))))
    if tool is not None:
        return _against_tool(log, tool)
    samples, notes = _per_request(log)
    table = pd.DataFrame(
        [(*_row(*samples[k]), DEFINITIONS[k], notes[k]) for k in DEFINITIONS],
        index=pd.Index(list(DEFINITIONS), name="definition_of"),
        columns=["mean_s", "p50_s", "p99_s", "definition", "note"],
    )
    return table


#: Figures over a run's window (rates, and the mean of requests in flight).
_RATES = {"window_s", "rps", "output_tps", "input_tps", "total_tps"} | {
    "goodput_rps",
    "concurrency_mean",
}


def _by_rules(log: RequestLog, tool) -> pd.DataFrame:
    """One row per figure of a ``ToolSummary`` that carries its tool's ``rules``: the tool's
    value, llminfer's computed by the tool's rules (``llminfer_value``) and by llminfer's own
    definitions (``llminfer_own``); ``note`` names each rule that differs from llminfer's."""
    rules = tool.rules
    figures = tool.to_dict()
    ours = reproduce(log, tool)
    part = RequestLog(rows_of(log, rules), log.rejected, log.source)
    wanted = sorted({float(k.rsplit("_p", 1)[1]) for k in figures if _is_percentile(k)} | {50.0})
    own = summarize(part, percentiles=wanted).to_dict() if len(part) else {}
    empty = any("empty response" in a for a in log.source.assumptions) and tool.empty_as_ok
    rows = []
    for key, value in figures.items():
        differs = _rule_differences(key, tool)
        if empty and not key.startswith(("tpot_s", "itl_s", "output_tps", "window_s")):
            differs.append(
                "requests with 0 output tokens are failed in llminfer, successful in the tool"
            )
        mine = ours.get(key, math.nan)
        both_zero = 0.0 if mine == 0 else float("nan")
        diff = (mine - value) / value if value else both_zero
        rows.append(
            (
                tool.names[key],
                value,
                mine,
                diff,
                not differs,
                " ".join(differs),
                float(own.get(key, math.nan)),
            )
        )
    return pd.DataFrame(
        rows,
        index=pd.Index(list(figures), name="key"),
        columns=[*_COMPARISON_COLUMNS, "llminfer_own"],
    )


def _is_percentile(key: str) -> bool:
    return "_p" in key and key.rsplit("_p", 1)[1][:1].isdigit()


def _rule_differences(key: str, tool) -> list[str]:
    """Where the tool's rule for ``key`` differs from llminfer's own definition, in words."""
    rules, name = tool.rules, tool.tool
    said = []
    definition = tool.definitions.get(key, "")
    own = "vllm_tpot" if key.startswith("tpot_s") else "vllm_itl"
    if definition and definition != own:
        said.append(f"{name} means {DEFINITIONS[definition]}")
    if _is_percentile(key) and rules.percentile == "nearest_rank":
        said.append(f"{name} reads percentiles by nearest rank (no interpolation).")
    if key.startswith("e2e_s") and rules.e2e_end == "response_end":
        said.append(f"{name} ends E2E at the response's end, not the last token.")
    if rules.weighted and key.startswith(("tpot_s", "itl_s")):
        said.append(f"{name} weights it by tokens.")
    if rules.window == "measure":
        if key in _RATES or key.startswith("n_"):
            said.append(
                f"{name} counts the requests overlapping its measured window (warm-up and "
                "cool-down out) and divides by that window."
            )
        else:
            said.append(f"{name} counts only requests in its measured window.")
    elif rules.window == "phase" and key in _RATES and key != "window_s":
        said.append(f"{name} divides by its profiling phase's start → end, not its duration.")
    if key == "goodput_rps" and not rules.slo:
        said.append(
            f"{name}'s goodput needs its SLO, which the file does not hold: pass the thresholds "
            "it was run with, compare_definitions(log, summary, slo={'ttft_s': 0.06, …})."
        )
    elif key in ("goodput_rps", "good_fraction") and rules.slo:
        said.append(
            f"{name} counts a request good when it meets every threshold ("
            + ", ".join(f"{k} {v:g}" for k, v in rules.slo.items())
            + ")"
            + (
                "; its attainment leaves out requests a threshold cannot be read for (one "
                "token: no ITL) and counts errored ones as not good."
                if rules.window == "measure"
                else "."
            )
        )
    if key in ("peak_output_tps", "peak_concurrency"):
        said.append(
            f"{name}'s peak over one-second buckets from the first start: chunks arriving in "
            "the bucket (output tokens/s), or requests active in it (concurrency); llminfer "
            "has no such figure of its own."
        )
    if key.startswith(("ttst_s", "user_tps")):
        said.append(
            f"{name}'s own figure (time to second token: the second chunk less the first; "
            "output tokens/s per user: 1 / ITL per request); llminfer has none of its own."
        )
    if "_adj_s_" in key:
        said.append(
            f"{name}'s error-adjusted figure: every failed request counted as +inf beside the "
            "successes, numpy's 'nearest' percentile; llminfer's own leave failures out."
        )
    if rules.resolution.get(key):
        said.append(f"{name} printed it rounded; llminfer's value is rounded alike.")
    key_note = tool.key_notes.get(key, "")
    if key_note:
        said.append(key_note)
    return said


def _against_tool(log: RequestLog, tool) -> pd.DataFrame:
    """One row per figure of a ``ToolSummary``: the tool's value beside llminfer's."""
    if getattr(tool, "rules", None) is not None:
        return _by_rules(log, tool)
    figures = tool.to_dict()
    wanted = sorted(
        {
            float(k.rsplit("_p", 1)[1])
            for k in figures
            if "_p" in k and k.rsplit("_p", 1)[1][0].isdigit()
        }
        | {50.0, 99.0}
    )
    own_window = log.source.window_s
    borrowed = (own_window is None and not log.source.starts_known) or (
        own_window is not None and math.isnan(own_window)
    )
    borrowed = borrowed and math.isfinite(figures.get("window_s", math.nan))
    if borrowed:  # no duration in the log: rates over the tool's own run window
        log = RequestLog(
            log.requests, log.rejected, replace(log.source, window_s=figures["window_s"])
        )
    mine = summarize(log, percentiles=wanted).to_dict()
    samples, _ = _per_request(log)
    rows = []
    for key, value in figures.items():
        definition = tool.definitions.get(key, "")
        same = definition in ("", "vllm_tpot" if key.startswith("tpot_s") else "vllm_itl")
        note = ""
        if definition and not same:
            stat = key.rsplit("_", 1)[1]
            ours = _stat(*samples[definition], stat)
            note = f"{tool.tool} means {DEFINITIONS[definition]}"
            if key in mine:
                note += f" llminfer's own {key} is {mine[key]:.6g}."
        else:
            ours = float(mine.get(key, float("nan")))
        if key in _RATES:
            if borrowed:
                note = "the log holds no run duration: llminfer's rates use the tool's window_s"
            elif own_window is None:
                note = "llminfer's window: first request start → last end"
        key_note = getattr(tool, "key_notes", {}).get(key, "")
        if key_note:  # a figure the tool defines its own way: said on its row
            note, same = (note + " " if note else "") + key_note, False
        if (
            getattr(tool, "empty_as_ok", True)
            and not key.startswith(("tpot_s", "itl_s", "output_tps", "window_s"))
            and any("empty response" in a for a in log.source.assumptions)
        ):
            note = (note + " " if note else "") + (
                "requests with 0 output tokens are failed in llminfer, successful in the tool"
            )
        both_zero = 0.0 if ours == 0 else float("nan")
        diff = (ours - value) / value if value else both_zero
        rows.append((tool.names[key], value, ours, diff, same, note))
    return pd.DataFrame(
        rows,
        index=pd.Index(list(figures), name="key"),
        columns=list(_COMPARISON_COLUMNS),
    )
