"""Chapter 5's plots: one picture per optimisation in the article's table."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from llminfer.plots._figure import COLORS, new_figure
from llminfer.plots.fonts import N_, _

#: The links whose names hold words (``DisaggregationExplorer``'s own and
#: ``llminfer.sim.disaggregation.KV_LINKS``), marked for the catalogs: a legend shows a link's name
#: in the learner's language, and any other name as it is.
LINK_NAMES = (
    N_("NVLink (same node)"),
    N_("PCIe (same node)"),
    N_("NVLink 4 (same node)"),
    N_("100 Gb/s Ethernet"),
)


def quantization_bars(table: pd.DataFrame) -> Figure:
    """Per weight format: weight GB per GPU (left) and TPOT floor in ms (right), from
    ``techniques.quantization_table``.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    fig, (left, right) = new_figure(9, 3.4, ncols=2)
    left.bar(table["dtype"], table["weight_bytes"] / 1e9, color=COLORS["weights"])
    left.set_ylabel(_("weights per GPU (GB = 10⁹ bytes)"))
    right.bar(table["dtype"], table["tpot_floor_s"] * 1e3, color=COLORS["decode"])
    right.set_ylabel(_("TPOT floor at batch 1 (ms)"))
    left.set_title(_("Fewer bytes per weight ..."))
    right.set_title(_("... fewer bytes to read per token"))
    return fig


def fragmentation_bars(table: pd.DataFrame) -> Figure:
    """Share of allocated KV slots holding tokens, per allocation policy
    (``techniques.kv_fragmentation``).

    Introduced in: notebooks/05_optimizations.ipynb
    """
    fig, ax = new_figure(7, 3.2)
    ax.barh(
        table["policy"], table["utilization"] * 100, color=COLORS["KV cache"], label=_("tokens")
    )
    ax.barh(
        table["policy"],
        table["waste"] * 100,
        left=table["utilization"] * 100,
        color=COLORS["headroom"],
        label=_("reserved but empty"),
    )
    ax.invert_yaxis()
    ax.set_xlabel(_("allocated KV slots (%)"))
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(_("How much reserved KV memory holds real tokens"))
    return fig


def speculative_curves(table: pd.DataFrame) -> Figure:
    """Speed-up versus draft length γ, one line per acceptance rate α
    (``speculative.speculative_table``); the dashed line is "no gain".

    Introduced in: notebooks/05_optimizations.ipynb
    """
    fig, ax = new_figure(7, 3.8)
    for alpha, group in table.groupby("alpha"):
        ax.plot(group["gamma"], group["speedup"], marker="o", label=f"α = {alpha:g}")
    ax.axhline(1, color="grey", ls="--", lw=1)
    ax.set_xlabel(_("draft length γ (tokens proposed per step)"))
    ax.set_ylabel(_("wall-time speed-up (×)"))
    ax.legend(fontsize=8)
    ax.set_title(_("Speculative decoding pays only when drafts are accepted"))
    return fig


def prefix_ttft_curve(hit_rates, ttft_s, miss_s: float) -> Figure:
    """Expected prefill time (ms) versus prefix-cache hit rate.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    fig, ax = new_figure(6, 3.4)
    ax.plot(list(hit_rates), [t * 1e3 for t in ttft_s], marker="o", color=COLORS["prefill"])
    ax.axhline(miss_s * 1e3, color="grey", ls="--", lw=1, label=_("no cache"))
    ax.set_xlabel(_("prefix-cache hit rate"))
    ax.set_ylabel(_("prefill time per request (ms)"))
    ax.legend(fontsize=8)
    ax.set_title(_("Prefix caching: skipped prompt tokens shorten TTFT"))
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
        ax.set_xlabel(_("GPUs (tensor parallel)"))
        ax.legend(fontsize=8)
    left.set_ylabel(_("decode step (ms)"))
    right.set_ylabel(_("of which all-reduce (ms)"))
    left.set_title(_("Per-token time"))
    right.set_title(_("Communication does not shrink"))
    return fig


def disaggregation_bars(table: pd.DataFrame) -> Figure:
    """KV transfer time per link next to prefill time, per prompt length, in ms
    (``disaggregation.disaggregation_table``), log scale: one filled bar per link for what TTFT
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
        label=_("prefill"),
    )
    overlapped = bool((table["exposed_s"] < table["transfer_s"]).any())
    for k, link in enumerate(links):
        rows = table[table["link"] == link].set_index("prompt_tokens")
        x = [p - 0.4 + width * (k + 1.5) for p in positions]
        bars = ax.bar(
            x,
            [rows.loc[p, "exposed_s"] * 1e3 for p in prompts],
            width,
            # TRANSLATORS: {link} is a link's name: "NVLink (same node)", "100 Gb/s Ethernet".
            label=_("{link}: added to TTFT").format(link=_(link)),
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
    ax.set_xlabel(_("prompt tokens"))
    ax.set_yscale("log")
    ax.set_ylabel(_("time (ms, log scale)"))
    ax.legend(fontsize=8)
    pulled = table["transfer"].iloc[0] == "pull"
    mode = _("pulled after the prefill") if pulled else _("per layer")
    # TRANSLATORS: {mode} is "pulled after the prefill" or "per layer".
    title = _("Shipping the KV cache ({mode}) versus computing it").format(mode=mode)
    ax.set_title(title + (_("; dashed: the whole copy") if overlapped else ""))
    return fig


def speculative_batch_curve(table: pd.DataFrame) -> Figure:
    """Speculative decoding's speed-up and the verify step's cost (in decode steps) against
    batch size (``speculative.speculative_batch_table``), with the break-even line at 1.

    Introduced in: notebooks/05_optimizations.ipynb
    """
    fig, ax = new_figure(7, 3.6)
    ax.plot(table["batch"], table["speedup"], "o-", color=COLORS["decode"], label=_("speed-up"))
    ax.plot(
        table["batch"],
        table["verify_over_decode"],
        "s--",
        color=COLORS["prefill"],
        label=_("verify step ÷ decode step"),
    )
    ax.axhline(1, color="grey", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.set_xlabel(_("decoding sequences in the batch (log scale)"))
    ax.set_ylabel(_("ratio (×)"))
    ax.set_title(_("Verification stops being free as the batch grows"))
    ax.legend(fontsize=8)
    return fig
