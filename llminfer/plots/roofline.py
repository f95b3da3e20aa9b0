"""Chapters 1 and 2's plots: the roofline, one request's timeline, decode vs batch, prefill vs
prompt length, GPUs side by side, and FlashAttention's memory traffic."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from llminfer.hardware import GPU
from llminfer.plots._figure import COLORS, new_figure, require_columns
from llminfer.roofline import Cost, arithmetic_intensity, compute_dtype, ridge_point


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
    ax.plot(x, np.minimum(peak, bandwidth * x), color="black", lw=2, label="roofline")
    ax.axvline(ridge, color="grey", ls=":", lw=1)
    ax.annotate(
        f"ridge {ridge:.0f} FLOP/B",
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
    ax.set_xlabel("arithmetic intensity (FLOP per byte of memory traffic)")
    ax.set_ylabel(f"attainable {dtype} FLOP/s")
    ax.set_title(f"Roofline of {gpu.name}: left of the ridge = memory-bound")
    ax.legend(fontsize=8, loc="lower right")
    return fig


def request_breakdown_chart(stages: Mapping[str, float], title: str = "") -> Figure:
    """One horizontal bar: a request's time split into stages (network, queue, prefill,
    decode), in seconds, each labelled with its duration.

    Introduced in: notebooks/01_introduction.ipynb
    """
    if not stages or any(v < 0 for v in stages.values()):
        raise ValueError("stages must map stage names to durations >= 0 seconds")
    fig, ax = new_figure(8, 1.9)
    left = 0.0
    total = sum(stages.values())
    for stage, seconds in stages.items():
        ax.barh(0, seconds, left=left, color=COLORS.get(stage, "#999999"), label=stage)
        if seconds > 0.04 * total:
            ax.text(left + seconds / 2, 0, f"{seconds * 1e3:.0f} ms", ha="center", va="center")
        left += seconds
    ax.set_yticks([])
    ax.set_xlabel("time since the user pressed enter (s)")
    ax.set_title(title or f"One request: {total:.2f} s end to end")
    # A figure legend "outside": constrained layout keeps room for it, so it shows wherever
    # the figure is rendered (an axes legend pushed below the axes was cut off in widgets).
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
    left.plot(table["batch"], table["step_s"] * 1e3, marker="o", label="estimate")
    left.plot(table["batch"], table["ideal_step_s"] * 1e3, ls="--", label="ideal (100 % of peak)")
    left.set_xscale("log", base=2)
    left.set_xlabel("sequences decoded together (batch)")
    left.set_ylabel("one decode step (ms)")
    left.set_ylim(bottom=0)
    left.legend(fontsize=8)
    right.plot(table["batch"], table["tokens_per_s"], marker="o", color=COLORS["decode"])
    right.set_xscale("log", base=2)
    right.set_yscale("log")
    right.set_xlabel("sequences decoded together (batch)")
    right.set_ylabel("output tokens/s (whole GPU)")
    fig.suptitle(title or "Decode: the step barely slows while batch grows, so throughput rises")
    return fig


def prefill_chart(table: pd.DataFrame) -> Figure:
    """Prefill time (s) versus prompt length (tokens), one line per GPU, log-log, from
    ``prefill_table``.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    require_columns(table, {"gpu", "prompt_tokens", "ttft_s"})
    fig, ax = new_figure(7, 4)
    for gpu, group in table.groupby("gpu", sort=False):
        ax.plot(group["prompt_tokens"], group["ttft_s"], marker="o", label=gpu)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("prompt length (tokens)")
    ax.set_ylabel("prefill time = TTFT without queueing (s)")
    ax.set_title("Longer prompts → later first token")
    ax.legend(fontsize=8)
    return fig


def gpu_comparison_chart(table: pd.DataFrame) -> Figure:
    """Two bar panels from ``gpu_comparison``: TTFT (ms) and TPOT (ms) per GPU.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    require_columns(table, {"ttft_s", "tpot_s"})
    fig, (left, right) = new_figure(10, 3.6, ncols=2)
    names = [str(n).replace("NVIDIA ", "").split(" (")[0] for n in table.index]
    left.barh(names, table["ttft_s"] * 1e3, color=COLORS["prefill"])
    left.set_xlabel("TTFT (ms): follows FLOP/s")
    right.barh(names, table["tpot_s"] * 1e3, color=COLORS["decode"])
    right.set_xlabel("TPOT (ms): follows memory bandwidth")
    for ax in (left, right):
        ax.invert_yaxis()
    right.set_yticks(range(len(names)), [""] * len(names))
    return fig


def flash_traffic_chart(table: pd.DataFrame, title: str = "") -> Figure:
    """HBM bytes of standard and tiled (Flash) attention versus sequence length, log-log,
    from ``llminfer.flash.flash_traffic_table``.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """
    require_columns(table, {"seq_len", "standard_bytes", "flash_bytes"})
    fig, ax = new_figure(7, 4)
    ax.plot(table["seq_len"], table["standard_bytes"] / 1e9, marker="o", label="standard")
    ax.plot(table["seq_len"], table["flash_bytes"] / 1e9, marker="s", label="FlashAttention")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length N (tokens)")
    ax.set_ylabel("HBM traffic of one attention layer (GB)")
    ax.set_title(title or "Tiling keeps the N×N matrix on chip")
    ax.legend(fontsize=8)
    return fig
