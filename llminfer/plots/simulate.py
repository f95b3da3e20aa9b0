"""Chapters 3 and 5: the simulated server — load sweeps and what happens step by step."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from matplotlib.figure import Figure

from llminfer.plots._figure import COLORS, new_figure, require_columns
from llminfer.plots.fonts import N_, _
from llminfer.sim.loadsweep import load_column
from llminfer.sim.simulate import SimResult

#: The batching policies (``EngineConfig.policy``) as a figure names them.
POLICIES = {"continuous": N_("continuous"), "static": N_("static")}


def throughput_latency(
    table: pd.DataFrame,
    percentiles: Sequence[float] = (50, 99),
    knee_load: float | None = None,
    best: float | None = None,
    slo: dict[str, float] | None = None,
) -> Figure:
    """A ``sweep`` table as two panels sharing the load axis: output TPS (tokens/s) on the
    left; TTFT and TPOT percentiles (seconds, log scale) on the right. ``knee_load`` and
    ``best`` (the best load under ``slo``) are marked with vertical lines, the SLO targets with
    horizontal ones.

    Introduced in: notebooks/03_metrics.ipynb
    """
    kind = load_column(table)
    data = table.sort_values(kind)
    fig, (left, right) = new_figure(10, 4, ncols=2)
    left.plot(data[kind], data["output_tps"], marker="o", color=COLORS["decode"])
    left.set_ylabel(_("output throughput (tokens/s)"))
    left.set_title(_("Throughput rises, then flattens"))
    styles = {"ttft_s": ("TTFT", COLORS["prefill"]), "tpot_s": ("TPOT", COLORS["decode"])}
    for metric, (label, colour) in styles.items():
        for q, dash in zip(percentiles, ("-", "--", ":"), strict=False):
            right.plot(
                data[kind],
                data[f"{metric}_p{q:g}"],
                ls=dash,
                marker=".",
                color=colour,
                label=f"{label} p{q:g}",
            )
        if slo and metric in slo:
            right.axhline(slo[metric], color=colour, lw=0.8, alpha=0.6)
    right.set_yscale("log")
    right.set_ylabel(_("latency (s, log scale)"))
    right.set_title(_("... while latency climbs"))
    for ax in (left, right):
        ax.set_xlabel(_("offered load (requests/s)") if kind == "rate" else _("concurrent users"))
        if knee_load is not None:
            ax.axvline(knee_load, color="grey", ls="--", lw=1, label=_("knee"))
        if best is not None:
            ax.axvline(best, color=COLORS["free"], lw=2, alpha=0.7, label=_("best under SLO"))
    right.legend(fontsize=8, ncols=2)
    if knee_load is not None or best is not None:
        left.legend(fontsize=8)
    return fig


def step_timeline(result: SimResult, until_s: float | None = None) -> Figure:
    """What the engine did over time: sequences per step, KV blocks in use (share of
    capacity) and requests waiting, against simulated seconds.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    steps = result.steps
    if until_s is not None:
        steps = steps[steps.time <= until_s]
    fig, (top, middle, bottom) = new_figure(9, 6, nrows=3)
    top.step(steps.time, steps.batch_size, where="post", color=COLORS["decode"], lw=1)
    top.set_ylabel(_("sequences\nper step"))
    middle.step(
        steps.time,
        steps.kv_blocks / result.capacity_blocks,
        where="post",
        color=COLORS["KV cache"],
        lw=1,
    )
    middle.set_ylim(0, 1.05)
    middle.set_ylabel(_("KV blocks used\n(share of capacity)"))
    bottom.step(steps.time, steps.waiting, where="post", color=COLORS["queue"], lw=1)
    bottom.set_ylabel(_("requests\nwaiting"))
    bottom.set_xlabel(_("simulated time (s)"))
    policy = result.engine.policy
    # TRANSLATORS: {policy} is "continuous" or "static"; {workload} describes the requests.
    title = _("{policy} batching, {workload}, {preemptions} preemptions").format(
        policy=_(POLICIES[policy]) if policy in POLICIES else policy,
        workload=result.workload.describe(),
        preemptions=result.preemptions,
    )
    top.set_title(title)
    return fig


def policy_comparison(
    table: pd.DataFrame, metrics: Sequence[str] = ("output_tps",), log: bool = False
) -> Figure:
    """Bars per row of ``table`` (indexed by label, e.g. policy) for each column in
    ``metrics``, one panel each; units follow the column name (``_tps`` tokens/s, ``_s``
    seconds). ``log`` puts the latency panels (``_s``) on a log scale, so that a policy whose
    tail is 100× longer does not flatten the others to nothing.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    require_columns(table, metrics)
    fig, axes = new_figure(3.2 * len(metrics) + 1, 3.2, ncols=len(metrics))
    axes = [axes] if len(metrics) == 1 else list(axes)
    # a label that is a policy's name ("static", "continuous") is shown in the learner's language
    names = [str(i) for i in table.index]
    labels = [(_(POLICIES[n]) if n in POLICIES else n).replace(", ", "\n") for n in names]
    for ax, metric in zip(axes, metrics, strict=True):
        ax.bar(labels, table[metric], color=COLORS["decode"])
        unit = "tokens/s" if metric.endswith("_tps") else ""
        if metric.endswith("_s") or "_s_" in metric:
            unit = "s"
        if log and unit == "s":
            ax.set_yscale("log")
            unit = _("s, log scale")
        ax.set_title(
            _("{metric} ({unit})").format(metric=metric, unit=unit) if unit else metric, fontsize=10
        )
        ax.tick_params(axis="x", labelsize=8)
    return fig


def chunk_size_tradeoff(table: pd.DataFrame) -> Figure:
    """The chunked-prefill budget trade-off: p99 TTFT and p99 ITL (ms, log scale) against
    ``max_num_batched_tokens`` (log scale). ``table`` has columns ``max_num_batched_tokens``,
    ``ttft_s_p99`` and ``itl_s_p99``.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    require_columns(table, ("max_num_batched_tokens", "ttft_s_p99", "itl_s_p99"))
    data = table.sort_values("max_num_batched_tokens")
    fig, ax = new_figure(7, 3.6)
    budget = data["max_num_batched_tokens"]
    ax.plot(budget, data["itl_s_p99"] * 1e3, "o-", color=COLORS["decode"], label="p99 ITL")
    ax.plot(budget, data["ttft_s_p99"] * 1e3, "s-", color=COLORS["prefill"], label="p99 TTFT")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(_("max_num_batched_tokens (tokens per step, log scale)"))
    ax.set_ylabel(_("ms (log scale)"))
    ax.set_title(_("Smaller chunks: smoother streams, later first tokens"))
    ax.legend(fontsize=8)
    return fig
