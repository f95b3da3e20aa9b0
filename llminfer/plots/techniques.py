"""Chapter 5's plots: one picture per optimisation in the article's table."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from llminfer.plots._figure import COLORS, new_figure


def quantization_bars(table: pd.DataFrame) -> Figure:
    """Per weight format: weight GB per GPU (left) and TPOT floor in ms (right), from
    ``techniques.quantization_table``.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    fig, (left, right) = new_figure(9, 3.4, ncols=2)
    left.bar(table["dtype"], table["weight_bytes"] / 1e9, color=COLORS["weights"])
    left.set_ylabel("weights per GPU (GB = 10⁹ bytes)")
    right.bar(table["dtype"], table["tpot_floor_s"] * 1e3, color=COLORS["decode"])
    right.set_ylabel("TPOT floor at batch 1 (ms)")
    left.set_title("Fewer bytes per weight ...")
    right.set_title("... fewer bytes to read per token")
    return fig


def fragmentation_bars(table: pd.DataFrame) -> Figure:
    """Share of allocated KV slots holding tokens, per allocation policy
    (``techniques.kv_fragmentation``).

    Introduced in: notebooks/05_optimizations.ipynb
    """
    fig, ax = new_figure(7, 3.2)
    ax.barh(table["policy"], table["utilization"] * 100, color=COLORS["KV cache"], label="tokens")
    ax.barh(
        table["policy"],
        table["waste"] * 100,
        left=table["utilization"] * 100,
        color=COLORS["headroom"],
        label="reserved but empty",
    )
    ax.invert_yaxis()
    ax.set_xlabel("allocated KV slots (%)")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("How much reserved KV memory holds real tokens")
    return fig


def speculative_curves(table: pd.DataFrame) -> Figure:
    """Speed-up versus draft length γ, one line per acceptance rate α
    (``techniques.speculative_table``); the dashed line is "no gain".

    Introduced in: notebooks/05_optimizations.ipynb
    """
    fig, ax = new_figure(7, 3.8)
    for alpha, group in table.groupby("alpha"):
        ax.plot(group["gamma"], group["speedup"], marker="o", label=f"α = {alpha:g}")
    ax.axhline(1, color="grey", ls="--", lw=1)
    ax.set_xlabel("draft length γ (tokens proposed per step)")
    ax.set_ylabel("wall-time speed-up (×)")
    ax.legend(fontsize=8)
    ax.set_title("Speculative decoding pays only when drafts are accepted")
    return fig


def prefix_ttft_curve(hit_rates, ttft_s, miss_s: float) -> Figure:
    """Expected prefill time (ms) versus prefix-cache hit rate.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    fig, ax = new_figure(6, 3.4)
    ax.plot(list(hit_rates), [t * 1e3 for t in ttft_s], marker="o", color=COLORS["prefill"])
    ax.axhline(miss_s * 1e3, color="grey", ls="--", lw=1, label="no cache")
    ax.set_xlabel("prefix-cache hit rate")
    ax.set_ylabel("prefill time per request (ms)")
    ax.legend(fontsize=8)
    ax.set_title("Prefix caching: skipped prompt tokens shorten TTFT")
    return fig


def tensor_parallel_curves(table: pd.DataFrame) -> Figure:
    """Decode step time (ms) versus GPU count per link, split into the roofline part and the
    communication part (``techniques.tensor_parallel_table``).

    Introduced in: notebooks/05_optimizations.ipynb
    """
    fig, (left, right) = new_figure(10, 3.6, ncols=2)
    for link, group in table.groupby("link", sort=False):
        left.plot(group["n_gpus"], group["step_s"] * 1e3, marker="o", label=link)
        right.plot(group["n_gpus"], group["comm_s"] * 1e3, marker="o", label=link)
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("GPUs (tensor parallel)")
        ax.legend(fontsize=8)
    left.set_ylabel("decode step (ms)")
    right.set_ylabel("of which all-reduce (ms)")
    left.set_title("Per-token time")
    right.set_title("Communication does not shrink")
    return fig


def disaggregation_bars(table: pd.DataFrame) -> Figure:
    """KV transfer time per link next to prefill time, per prompt length, in ms
    (``techniques.disaggregation_table``), log scale: one filled bar per link for what TTFT
    sees (``exposed_s``); where that is less than the whole copy (layer-wise transfer) an
    outlined bar behind it shows the whole copy (``transfer_s``).

    Introduced in: notebooks/05_optimizations.ipynb
    """
    fig, ax = new_figure(8, 3.6)
    prompts = sorted(table["prompt_tokens"].unique())
    links = list(dict.fromkeys(table["link"]))
    width = 0.8 / (len(links) + 1)
    positions = range(len(prompts))
    prefill = table.drop_duplicates("prompt_tokens").set_index("prompt_tokens")["prefill_s"]
    ax.bar(
        [p - 0.4 + width / 2 for p in positions],
        [prefill[p] * 1e3 for p in prompts],
        width,
        color=COLORS["prefill"],
        label="prefill",
    )
    overlapped = bool((table["exposed_s"] < table["transfer_s"]).any())
    for k, link in enumerate(links):
        rows = table[table["link"] == link].set_index("prompt_tokens")
        x = [p - 0.4 + width * (k + 1.5) for p in positions]
        bars = ax.bar(
            x,
            [rows.loc[p, "exposed_s"] * 1e3 for p in prompts],
            width,
            label=f"{link}: added to TTFT",
        )
        if overlapped:
            ax.bar(
                x,
                [rows.loc[p, "transfer_s"] * 1e3 for p in prompts],
                width,
                fill=False,
                edgecolor=bars.patches[0].get_facecolor(),
                linestyle="--",
            )
    ax.set_xticks(list(positions), [f"{p:,}" for p in prompts])
    ax.set_xlabel("prompt tokens")
    ax.set_yscale("log")
    ax.set_ylabel("time (ms, log scale)")
    ax.legend(fontsize=8)
    mode = "pulled after the prefill" if table["transfer"].iloc[0] == "pull" else "per layer"
    title = f"Shipping the KV cache ({mode}) versus computing it"
    ax.set_title(title + ("; dashed: the whole copy" if overlapped else ""))
    return fig


def speculative_batch_curve(table: pd.DataFrame) -> Figure:
    """Speculative decoding's speed-up and the verify step's cost (in decode steps) against
    batch size (``techniques.speculative_batch_table``), with the break-even line at 1.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    fig, ax = new_figure(7, 3.6)
    ax.plot(table["batch"], table["speedup"], "o-", color=COLORS["decode"], label="speed-up")
    ax.plot(
        table["batch"],
        table["verify_over_decode"],
        "s--",
        color=COLORS["prefill"],
        label="verify step ÷ decode step",
    )
    ax.axhline(1, color="grey", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("decoding sequences in the batch (log scale)")
    ax.set_ylabel("ratio (×)")
    ax.set_title("Verification stops being free as the batch grows")
    ax.legend(fontsize=8)
    return fig
