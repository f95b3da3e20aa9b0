"""Chapter 4's plots: where one GPU's memory goes, and how many requests fit."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from matplotlib.figure import Figure

from llminfer.cost.memory import MemoryPlan
from llminfer.plots._figure import COLORS, new_figure, require_columns
from llminfer.plots.fonts import N_, _
from llminfer.units import GiB

#: The legend's name of each part of ``MemoryPlan.breakdown()``.
PARTS = {
    "weights": N_("weights"),
    "reserve": N_("reserve"),
    "KV cache": N_("KV cache"),
    "free": N_("free"),
    "headroom": N_("headroom"),
}


def memory_bar(
    plans: MemoryPlan | Sequence[MemoryPlan], labels: Sequence[str] | None = None
) -> Figure:
    """Stacked horizontal bar per plan: weights / reserve / KV cache / free / headroom, in GiB
    (2^30 bytes, the unit nvidia-smi and the article use for GPU memory).

    A plan whose weights do not fit shows its weights running past the GPU's memory line.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    plans = [plans] if isinstance(plans, MemoryPlan) else list(plans)
    if not plans:
        raise ValueError("plans must hold at least one MemoryPlan")
    if labels is None:
        labels = [f"{p.model}\n{p.gpu}" + (f" ×{p.n_gpus}" if p.n_gpus > 1 else "") for p in plans]
    fig, ax = new_figure(8, 1.2 + 0.9 * len(plans))
    for row, plan in enumerate(plans):
        left = 0.0
        for part, value in plan.breakdown().items():
            if value <= 0:
                continue
            ax.barh(
                row,
                value / GiB,
                left=left / GiB,
                color=COLORS[part],
                label=_(PARTS.get(part, part)) if row == 0 else None,
            )
            left += value
        ax.plot([plan.memory_bytes / GiB] * 2, [row - 0.45, row + 0.45], color="black", lw=1.5)
        verdict = _("fits") if plan.fits else _("does NOT fit")
        # TRANSLATORS: requests × context tokens each; {most} is how many such requests fit.
        detail = _("{concurrency} × {context:,} tok; max {most:.1f}").format(
            concurrency=plan.concurrency, context=plan.context_tokens, most=plan.max_concurrency
        )
        ax.text(left / GiB, row, f"  {verdict}\n  {detail}", va="center", fontsize=8)
    ax.set_yticks(range(len(plans)), labels)
    ax.invert_yaxis()
    ax.set_xlabel(_("memory per GPU (GiB = 2³⁰ bytes); black line = what the driver reports"))
    fig.legend(loc="outside lower center", fontsize=8, ncols=5)
    ax.margins(x=0.25)
    ax.set_title(_("Weights first, the rest belongs to the KV cache"))
    return fig


def concurrency_curve(table: pd.DataFrame) -> Figure:
    """Max concurrency (requests) versus context length (tokens), one line per ``label``.

    ``table`` has columns ``label``, ``context_tokens``, ``max_concurrency`` (as returned by
    ``llminfer.cost.memory_tables.concurrency_table``). Both axes are logarithmic.

    Introduced in: notebooks/04_memory_budget.ipynb
    """
    require_columns(table, ["label", "context_tokens", "max_concurrency"])
    fig, ax = new_figure(7, 4)
    for label, group in table.groupby("label", sort=False):
        ax.plot(group["context_tokens"], group["max_concurrency"], marker="o", label=label)
    ax.axhline(1, color="grey", lw=1, ls="--")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(_("context length per request (tokens)"))
    ax.set_ylabel(_("max concurrent requests (KV budget ÷ one request)"))
    ax.set_title(_("Longer context → fewer requests fit"))
    ax.legend(fontsize=8)
    return fig
