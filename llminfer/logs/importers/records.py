"""What an importer hands back: the requests it read (``Imported``) or the tool's own aggregates
(``ToolSummary``), in llminfer's names and units (seconds, tokens, per second).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from llminfer.logs.rules import ToolRules

#: The keys a ToolSummary may hold, in display order: ``summarize``'s keys plus ITL.
SUMMARY_KEYS = (
    "n_requests",
    "n_failed",
    "window_s",
    "rps",
    "output_tps",
    "input_tps",
    "total_tps",
    "goodput_rps",
    "good_fraction",
    "concurrency_mean",
    "peak_output_tps",
    "peak_concurrency",
    *(
        f"{metric}_{stat}"
        for metric in ("ttft_s", "tpot_s", "itl_s", "e2e_s")
        for stat in ("mean", "min", "max", "p25", "p50", "p75", "p90", "p95", "p99")
    ),
)


@dataclass
class Imported:
    """Requests read from a tool export, before validation.

    ``frame``: the request-log schema of ``llminfer.logs`` (plus any extra columns);
    ``assumptions``: every guess made, in words; ``window_s``: the run's duration as the tool
    measured it (s), or None; ``starts_known``: False when the export has no request start times
    (every ``start_ts`` is then 0 and only per-request latencies are real).

    Introduced in: notebooks/06_log_analysis.ipynb
    """

    frame: pd.DataFrame
    assumptions: list[str] = field(default_factory=list)
    window_s: float | None = None
    starts_known: bool = True


@dataclass
class ToolSummary:
    """A benchmark tool's own aggregates, in llminfer's names and units.

    ``values``: ``summarize``'s keys (``ttft_s_mean``, ``ttft_s_p99``, ``e2e_s_mean``,
    ``output_tps``, ``rps``, ``n_requests``, …; seconds, requests/s, tokens/s) plus
    ``itl_s_mean/p50/p99`` for what the tool calls ITL; ``names``: each key's name in the tool's
    file; ``definitions``: for the TPOT/ITL keys, which row of ``compare_definitions`` computes
    the same quantity; ``notes``: what differs from llminfer's definitions; ``key_notes``: a
    difference that concerns one figure only (``compare_definitions`` shows it on that row);
    ``empty_as_ok``: whether the tool keeps requests that returned no tokens in its latency
    statistics as successful (vLLM, llmperf) or leaves them out (GenAI-Perf); ``rules``: the
    tool's own rules (window, requests counted, E2E end, percentile method) when llminfer knows
    them, used by ``compare_definitions`` to compute each figure as the tool does.

    Introduced in: notebooks/06_log_analysis.ipynb
    """

    tool: str
    path: str
    values: dict[str, float]
    names: dict[str, str]
    definitions: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    key_notes: dict[str, str] = field(default_factory=dict)
    empty_as_ok: bool = True
    #: The tool's own rules (``llminfer.logs.rules.ToolRules``): with them
    #: ``compare_definitions`` recomputes every figure the tool's way; None: llminfer's way.
    rules: ToolRules | None = None

    def to_dict(self) -> dict[str, float]:
        """The figures as a flat dict keyed like ``Summary.to_dict()`` (seconds, per second)."""
        order = {k: i for i, k in enumerate(SUMMARY_KEYS)}
        return dict(sorted(self.values.items(), key=lambda kv: order.get(kv[0], len(order))))

    def to_frame(self) -> pd.DataFrame:
        """One row per figure: ``value`` (llminfer units) and ``tool_name`` (the tool's key)."""
        values = self.to_dict()
        return pd.DataFrame(
            {"value": list(values.values()), "tool_name": [self.names[k] for k in values]},
            index=pd.Index(list(values), name="key"),
        )

    def __repr__(self) -> str:
        lines = [f"{self.tool} summary from {self.path}"]
        for key, value in self.to_dict().items():
            shown = f"{value:.6g}" if isinstance(value, float) and not math.isnan(value) else value
            lines.append(f"  {key:>14} = {shown}  ({self.names[key]})")
        lines += [f"  note: {n}" for n in self.notes]
        if self.rules is not None and self.rules.text:
            lines.append(f"  rules: {self.rules.text}")
        return "\n".join(lines)


def stat_key(word: str) -> str | None:
    """A tool's statistic word (``mean``, ``avg``, ``median``, ``p99``, ``p99.9``) → llminfer's
    (``mean``, ``p50``, ``p99``, ``p99.9``); None for those llminfer does not report (std).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    word = word.lower()
    if word in ("mean", "avg", "average"):
        return "mean"
    if word == "median":
        return "p50"
    if word in ("min", "max"):
        return word
    if word.startswith("p"):
        try:
            q = float(word[1:])
        except ValueError:
            return None
        return f"p{q:g}"
    return None
