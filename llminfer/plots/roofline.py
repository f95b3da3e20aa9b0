"""Chapters 1 and 2's plots: the roofline, one request's timeline, decode vs batch, prefill vs
prompt length, GPUs side by side, and FlashAttention's memory traffic."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from llminfer.cost.roofline import Cost, arithmetic_intensity, compute_dtype, ridge_point
from llminfer.plots._figure import COLORS, new_figure, require_columns
from llminfer.plots.fonts import N_, _
from llminfer.specs.hardware import GPU
from llminfer.units import format_duration

#: The legend's name of each stage of ``llminfer.cost.latency.request_breakdown``.
STAGES = {
    "network": N_("network"),
    "queue": N_("queue"),
    "prefill": N_("prefill"),
    "decode": N_("decode"),
}


def roofline_chart(
    gpu: GPU,
    points: Mapping[str, Cost],
    measured: Mapping[str, tuple[float, float]] | None = None,
    dtype: str | None = None,
) -> Figure:
    """Log-log roofline of ``gpu``: attainable FLOP/s versus arithmetic intensity (FLOP/byte).

    The sloped line is bandwidth × intensity, the flat one the dense peak of ``dtype`` (by
    default the compute format of the first point's weights); they meet at the ridge point.
    Each ``Cost`` in ``points`` sits on the roof at its intensity. ``measured`` adds points
    measured on this machine as ``label → (intensity, achieved FLOP/s)``.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    if not points and not measured:
        raise ValueError("points and measured are both empty; give at least one point")
    if dtype is None:
        first = next(iter(points.values()), None)
        dtype = compute_dtype(first.weight_dtype if first else "fp32", gpu)
    peak, bandwidth = gpu.peak_flops(dtype), gpu.memory_bandwidth
    ridge = ridge_point(gpu, dtype)
    intensities = [arithmetic_intensity(c) for c in points.values()]
    intensities += [ai for ai, _ in (measured or {}).values()]
    low = min([ridge / 100, *intensities]) / 3
    high = max([ridge * 30, *intensities]) * 3
    x = np.geomspace(low, high, 200)
    fig, ax = new_figure(7, 4.5)
    ax.plot(x, np.minimum(peak, bandwidth * x), color="black", lw=2, label=_("roofline"))
    ax.axvline(ridge, color="grey", ls=":", lw=1)
    ax.annotate(
        _("ridge {ridge:.0f} FLOP/B").format(ridge=ridge),
        (ridge, peak),
        xytext=(6, -14),
        textcoords="offset points",
        fontsize=8,
    )
    for label, cost in points.items():
        ai = arithmetic_intensity(cost)
        colour = COLORS["decode"] if "decode" in label.lower() else COLORS["prefill"]
        ax.plot([ai], [min(peak, bandwidth * ai)], "o", ms=9, color=colour, label=label)
    for label, (ai, achieved) in (measured or {}).items():
        colour = COLORS["decode"] if "decode" in label.lower() else COLORS["prefill"]
        ax.plot([ai], [achieved], "*", ms=13, mec="black", color=colour, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(_("arithmetic intensity (FLOP per byte of memory traffic)"))
    # TRANSLATORS: {dtype} is a number format: bf16, fp8 ...
    ax.set_ylabel(_("attainable {dtype} FLOP/s").format(dtype=dtype))
    ax.set_title(_("Roofline of {gpu}: left of the ridge = memory-bound").format(gpu=gpu.name))
    ax.legend(fontsize=8, loc="lower right")
    return fig


def request_breakdown_chart(stages: Mapping[str, float], title: str = "") -> Figure:
    """One horizontal bar: a request's time split into stages (network, queue, prefill,
    decode), in seconds, each labelled with its duration.

    Introduced in: notebooks/01_introduction.ipynb
    """
    if not stages or any(v < 0 for v in stages.values()):
        raise ValueError("stages must map stage names to durations >= 0 seconds")
    fig, ax = new_figure(8, 2.4)
    left = 0.0
    total = sum(stages.values())
    for stage, seconds in stages.items():
        ax.barh(
            0,
            seconds,
            left=left,
            color=COLORS.get(stage, "#999999"),
            label=_(STAGES.get(stage, stage)),
        )
        if seconds > 0.04 * total:  # durations in ms or s by magnitude
            ax.text(left + seconds / 2, 0, format_duration(seconds), ha="center", va="center")
        left += seconds
    ax.set_yticks([])
    ax.set_xlabel(_("time since the user pressed enter (s)"))
    # TRANSLATORS: {total} is a duration with its unit, e.g. "2.61 s".
    ax.set_title(title or _("One request: {total} end to end").format(total=format_duration(total)))
    # a figure-level legend below the axes: constrained layout makes room, nothing is clipped
    fig.legend(ncols=len(stages), fontsize=8, loc="outside lower center")
    return fig


def decode_batch_chart(table: pd.DataFrame, title: str = "") -> Figure:
    """Decode step time (ms) and output rate versus batch size, from ``decode_batch_table``.

    Flat while memory-bound (more sequences share one read of the weights), rising once the
    step turns compute-bound or the KV reads dominate.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    require_columns(table, {"batch", "step_s", "ideal_step_s", "tokens_per_s"})
    fig, (left, right) = new_figure(10, 3.8, ncols=2)
    left.plot(table["batch"], table["step_s"] * 1e3, marker="o", label=_("estimate"))
    ideal = _("ideal (100 % of peak)")
    left.plot(table["batch"], table["ideal_step_s"] * 1e3, ls="--", label=ideal)
    if "fits" in table and not table["fits"].all():  # timed, but the KV caches do not fit
        bad = table[~table["fits"].astype(bool)]
        for ax, column, scale in ((left, "step_s", 1e3), (right, "tokens_per_s", 1)):
            ax.scatter(
                bad["batch"],
                bad[column] * scale,
                marker="x",
                s=90,
                color=COLORS["queue"],
                zorder=5,
                label=_("does not fit in GPU memory"),
            )
    left.set_xscale("log", base=2)
    left.set_xlabel(_("sequences decoded together (batch)"))
    left.set_ylabel(_("one decode step (ms)"))
    left.set_ylim(bottom=0)
    left.legend(fontsize=8)
    right.plot(table["batch"], table["tokens_per_s"], marker="o", color=COLORS["decode"])
    right.set_xscale("log", base=2)
    right.set_yscale("log")
    right.set_xlabel(_("sequences decoded together (batch)"))
    right.set_ylabel(_("output tokens/s (whole GPU)"))
    if "fits" in table and not table["fits"].all():
        right.legend(fontsize=8)
    fig.suptitle(title or _("Decode: the step barely slows while batch grows, so throughput rises"))
    return fig


def prefill_chart(table: pd.DataFrame) -> Figure:
    """Prefill from ``prefill_table``, one line per GPU: time per prompt token (µs, left) and
    the whole prefill (s, right) versus prompt length (tokens, log scale).

    Per token, the weights' matrix multiplies cost the same at any length, so the left panel is
    flat until attention's T² term bends it up; short prompts, memory-bound, cost more per
    token on the GPU with less bandwidth.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    require_columns(table, {"gpu", "prompt_tokens", "ttft_s"})
    fig, (left, right) = new_figure(11, 4, ncols=2)
    for gpu, group in table.groupby("gpu", sort=False):
        label = str(gpu).replace("NVIDIA ", "")
        per_token = group["ttft_s"] / group["prompt_tokens"] * 1e6
        left.plot(group["prompt_tokens"], per_token, marker="o", label=label)
        right.plot(group["prompt_tokens"], group["ttft_s"], marker="o", label=label)
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xlabel(_("prompt length (tokens)"))
    left.set_ylim(bottom=0)
    left.set_ylabel(_("prefill time per prompt token (µs)"))
    left.set_title(_("Per token: flat, then attention's T² term"))
    right.set_yscale("log")
    right.set_ylabel(_("whole prefill = TTFT without queueing (s)"))
    right.set_title(_("Longer prompts → later first token"))
    left.legend(fontsize=8)
    return fig


def gpu_comparison_chart(table: pd.DataFrame) -> Figure:
    """Two bar panels from ``gpu_comparison``: TTFT (ms) and TPOT (ms) per GPU.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    require_columns(table, {"ttft_s", "tpot_s"})
    fig, (left, right) = new_figure(10, 3.6, ncols=2)
    names = [str(n).replace("NVIDIA ", "").split(" (")[0] for n in table.index]
    left.barh(names, table["ttft_s"] * 1e3, color=COLORS["prefill"])
    left.set_xlabel(_("TTFT (ms): follows FLOP/s"))
    right.barh(names, table["tpot_s"] * 1e3, color=COLORS["decode"])
    right.set_xlabel(_("TPOT (ms): follows memory bandwidth"))
    for ax in (left, right):
        ax.invert_yaxis()
    right.set_yticks(range(len(names)), [""] * len(names))
    return fig


def flash_traffic_chart(table: pd.DataFrame, title: str = "") -> Figure:
    """One attention layer versus sequence length, from ``llminfer.cost.flash.flash_traffic_
    table``: the N×N score matrix standard attention stores and FlashAttention never does
    (left, GB), and the HBM traffic of standard attention beside FlashAttention-2's two bounds,
    every K/V tile from HBM and every tensor once (right, GB); both log-log.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    require_columns(
        table,
        {"seq_len", "score_matrix_bytes", "standard_bytes", "fa2_stream_bytes"},
    )
    require_columns(table, {"fa2_compulsory_bytes"})
    fig, (mem, traffic) = new_figure(11, 4, ncols=2)
    n = table["seq_len"]
    mem.plot(n, table["score_matrix_bytes"] / 1e9, marker="o", color="k", label=_("standard"))
    mem.set_title(_("Memory: the score matrix (FlashAttention: none)"), fontsize=9)
    mem.set_ylabel(_("N×N scores stored per layer (GB)"))
    standard = _("standard (Algorithm 0)")
    traffic.plot(n, table["standard_bytes"] / 1e9, marker="o", label=standard)
    stream = _("FA2, every K/V tile from HBM")
    traffic.plot(n, table["fa2_stream_bytes"] / 1e9, marker="s", label=stream)
    once = _("FA2, each tensor once")
    traffic.plot(n, table["fa2_compulsory_bytes"] / 1e9, marker="^", label=once)
    traffic.set_title(_("Traffic: HBM bytes per layer"), fontsize=9)
    traffic.set_ylabel(_("HBM reads + writes per layer (GB)"))
    traffic.legend(fontsize=7)
    for ax in (mem, traffic):
        ax.set_xscale("log", base=2)
        ax.set_xlabel(_("sequence length N (tokens)"))
    mem.set_yscale("log")
    traffic.set_yscale("log")
    fig.suptitle(title or _("FlashAttention: no N×N matrix in memory, and less traffic"))
    return fig


def measured_steps_chart(table: pd.DataFrame, title: str = "") -> Figure:
    """Measured step times beside the roofline floor and the realistic model, from
    ``llminfer.cost.calibration.compare_measurements``: decode steps versus batch (left, one line
    per context length), prefill per prompt token versus prompt length (middle), and a decode
    batch sharing its step with a prompt chunk (right). Dots measured, solid lines the model,
    dashed lines the roofline at 100 % of the peaks; times in ms.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    require_columns(
        table, {"kind", "batch", "tokens", "context", "prefill_chunk", "measured_s", "model_s"}
    )
    require_columns(table, {"ideal_s"})
    fig, (dec, pre, mix) = new_figure(14, 4.2, ncols=3)
    decode = table[table["kind"] == "decode_graph"]
    for i, (context, group) in enumerate(decode.groupby("context")):
        group = group.sort_values("batch").drop_duplicates("batch")
        if len(group) < 2:
            continue
        color = f"C{i}"
        dec.plot(group["batch"], group["measured_s"] * 1e3, "o", color=color)
        dec.plot(group["batch"], group["model_s"] * 1e3, "-", color=color, label=f"{context:,.0f}")
        dec.plot(group["batch"], group["ideal_s"] * 1e3, "--", color=color, alpha=0.6)
    dec.set_xscale("log", base=2)
    dec.set_xlabel(_("sequences decoded together (batch)"))
    dec.set_ylabel(_("one decode step (ms)"))
    dec.set_ylim(bottom=0)
    dec.legend(title=_("context (tokens)"), fontsize=7, title_fontsize=7)
    dec.set_title(_("Decode: a floor it never reaches"))
    prefill = table[(table["kind"] == "prefill_graph") & (table["batch"] == 1)]
    prefill = prefill.sort_values("tokens").drop_duplicates("tokens")
    per = prefill["tokens"]
    measured, model = _("measured"), _("model")
    pre.plot(per, prefill["measured_s"] / per * 1e6, "o", color=COLORS["prefill"], label=measured)
    pre.plot(per, prefill["model_s"] / per * 1e6, "-", color=COLORS["prefill"], label=model)
    floor = _("roofline floor")
    pre.plot(per, prefill["ideal_s"] / per * 1e6, "--", color="grey", label=floor)
    pre.set_xscale("log", base=2)
    pre.set_xlabel(_("prompt length (tokens), batch 1"))
    pre.set_ylabel(_("prefill time per prompt token (µs)"))
    pre.set_ylim(bottom=0)
    pre.legend(fontsize=7)
    pre.set_title(_("Prefill: short prompts pay fixed costs"))
    mixed = table[table["kind"] == "mixed_step"].sort_values("prefill_chunk")
    mix.plot(mixed["prefill_chunk"], mixed["measured_s"] * 1e3, "o", color="k", label=measured)
    mix.plot(mixed["prefill_chunk"], mixed["model_s"] * 1e3, "-", color="k", label=model)
    mix.plot(mixed["prefill_chunk"], mixed["ideal_s"] * 1e3, "--", color="grey", label=_("floor"))
    mix.set_xlabel(_("prompt chunk in the step (tokens)"))
    mix.set_ylabel(_("one step (ms)"))
    mix.set_ylim(bottom=0)
    mix.legend(fontsize=7)
    mix.set_title(_("32 decodes + a prompt chunk"))
    fig.suptitle(title or _("Measured steps (dots), the model (lines), the roofline (dashed)"))
    return fig


def profile_chart(table: pd.DataFrame, title: str = "") -> Figure:
    """Decode step time under two engine profiles versus context length, one line per batch
    size, from ``llminfer.cost.latency.profile_table`` (its first and last profiles).

    Left: the step in ms (dashed: the first profile, solid: the last). Right: first ÷ last,
    1 where both engines read the KV cache with a full grid of thread blocks.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    require_columns(table, {"batch", "context_tokens", "ratio"})
    timed = [c for c in table.columns if c.endswith("_ms") and c != "floor_ms"]
    if len(timed) < 2:
        raise ValueError(f"table has {timed} step columns; profile_table gives at least two")
    first, last = timed[0], timed[-1]
    fig, (left, right) = new_figure(11, 4, ncols=2)
    colors = [f"C{i}" for i in range(10)]
    for i, (batch, rows) in enumerate(table.groupby("batch")):
        color = colors[i % len(colors)]
        left.plot(rows["context_tokens"], rows[first], ls="--", color=color)
        label = _("batch {batch}").format(batch=batch)
        left.plot(rows["context_tokens"], rows[last], marker="o", color=color, label=label)
        right.plot(rows["context_tokens"], rows["ratio"], marker="o", color=color, label=label)
    if "fits" in table and not table["fits"].all():  # timed, but the KV caches do not fit
        bad = table[~table["fits"].astype(bool)]
        left.scatter(
            bad["context_tokens"],
            bad[last],
            marker="x",
            s=90,
            color=COLORS["queue"],
            zorder=5,
            label=_("does not fit in GPU memory"),
        )
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xlabel(_("cached tokens per sequence"))
    left.set_yscale("log")
    # TRANSLATORS: {solid} and {dashed} are engine profiles: "vllm", "pytorch".
    axis = _("one decode step (ms): {solid} solid, {dashed} dashed")
    left.set_ylabel(axis.format(solid=last[:-3], dashed=first[:-3]))
    left.legend(fontsize=8)
    right.axhline(1, color="grey", lw=0.8)
    right.set_ylabel(_("{first} step ÷ {last} step").format(first=first[:-3], last=last[:-3]))
    right.set_ylim(bottom=0.9)
    fig.suptitle(
        title or _("Where split-KV decode attention matters: small batches, long contexts")
    )
    return fig
