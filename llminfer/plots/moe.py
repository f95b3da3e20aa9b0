"""Chapter 9's plots: experts a step touches, and a MoE decode sweep under expert parallelism."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from llminfer.cost.moe import expert_touch_share, saturation_tokens
from llminfer.plots._figure import new_figure, require_columns
from llminfer.plots.fonts import _
from llminfer.specs.models import Model


def experts_touched_chart(
    models: Sequence[Model], max_tokens: int = 1024, share: float = 0.9, ep: int = 1
) -> Figure:
    """Share of routed experts a step touches (%) versus sequences per GPU in a decode step,
    one line per model, with the batch at which each reaches ``share`` marked.

    With ``ep`` GPUs in expert parallelism the experts of one GPU see the whole group's
    tokens, ``ep ×`` its own batch, so every curve moves ``ep ×`` to the left.

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """
    models = list(models)
    if not models or not all(isinstance(m, Model) and m.is_moe for m in models):
        raise ValueError("models must be one or more mixture-of-experts Models")
    fig, ax = new_figure(7, 4)
    batch = np.unique(np.geomspace(1, max_tokens, 200).round())
    styles = ("-", "--", "-.", ":")  # models with the same k/E draw the same curve
    for i, model in enumerate(models):
        e, k = model.n_experts, model.experts_per_token
        (line,) = ax.plot(
            batch,
            100 * expert_touch_share(e, k, batch * ep),
            ls=styles[i % len(styles)],
            lw=2,
            label=f"{model.name} ({k}/{e})",
        )
        at = saturation_tokens(e, k, share) / ep
        if at <= max_tokens:
            ax.axvline(at, color=line.get_color(), ls=":", lw=1)
    ax.axhline(100 * share, color="grey", lw=1, ls="--")
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 102)
    group = _(" (× {ep} GPUs in the EP group)").format(ep=ep) if ep > 1 else ""
    ax.set_xlabel(_("sequences per GPU in a decode step") + group)
    ax.set_ylabel(_("routed experts touched (% of all)"))
    # TRANSLATORS: {share} is a percentage, e.g. "90%".
    title = _("A step reads every expert one of its tokens picked (dotted: {share:.0%})")
    ax.set_title(title.format(share=share))
    ax.legend(fontsize=8, loc="lower right")
    return fig


def ep_sweep_chart(table: pd.DataFrame) -> Figure:
    """Two panels from ``llminfer.sim.expert_parallel.ep_sweep``: output tokens/s per GPU and
    the step time's parts (ms) versus sequences per GPU, one line per EP degree. Hollow
    markers: batches whose KV cache would not fit (``fits`` False).

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """
    require_columns(
        table,
        ["ep", "batch", "tokens_per_s_per_gpu", "step_s", "expert_s", "attention_s", "comm_s"],
    )
    fig, (ax_tps, ax_parts) = new_figure(10, 4, ncols=2)
    for ep, group in table.groupby("ep", sort=True):
        (line,) = ax_tps.plot(
            group["batch"], group["tokens_per_s_per_gpu"], marker="o", ms=3, label=f"EP{ep}"
        )
        colour = line.get_color()
        if "fits" in group and not group["fits"].all():  # hollow: the KV cache would not fit
            over = group[~group["fits"].astype(bool)]
            ax_tps.plot(
                over["batch"], over["tokens_per_s_per_gpu"], "o", ms=7, mfc="white",
                color=colour,
            )  # fmt: skip
        ax_parts.plot(
            group["batch"],
            1e3 * group["step_s"],
            color=colour,
            label=_("EP{ep} step").format(ep=ep),
        )
        ax_parts.plot(group["batch"], 1e3 * group["attention_s"], color=colour, ls="-.")
        ax_parts.plot(group["batch"], 1e3 * group["expert_s"], color=colour, ls="--")
        comm = group[group["comm_s"] > 0]  # none on one GPU
        ax_parts.plot(comm["batch"], 1e3 * comm["comm_s"], color=colour, ls=":")
    for ax in (ax_tps, ax_parts):
        ax.set_xscale("log", base=2)
        ax.set_xlabel(_("sequences per GPU (decode)"))
    ax_tps.set_yscale("log")
    ax_tps.set_ylabel(_("output tokens/s per GPU"))
    ax_tps.set_title(_("Throughput per GPU (hollow: KV cache does not fit)"))
    ax_tps.legend(fontsize=8)
    ax_parts.set_yscale("log")
    ax_parts.set_ylabel(_("ms per step"))
    ax_parts.set_title(_("— step  -· attention  -- experts  ·· all-to-all"), fontsize=10)
    ax_parts.legend(fontsize=8)
    return fig
