"""Chapter 4's widget: model, GPU, GPU count, dtypes, context and concurrency → memory plan."""

from __future__ import annotations

import html

import ipywidgets as W

from llminfer.cost.memory import MemoryPlan, plan_memory
from llminfer.language import N_, _
from llminfer.plots.memory import memory_bar
from llminfer.specs.presets import get_gpu, get_model, list_gpus, list_models
from llminfer.units import format_bytes
from llminfer.widgets._explorer import Explorer

CONTEXT_CHOICES = [2**k for k in range(9, 18)]  # 512 ... 131,072 tokens
WEIGHT_DTYPES = ["bf16", "fp8", "int8", "int4"]
KV_DTYPES = ["bf16", "fp8"]


class MemoryExplorer(Explorer):
    """Explore one deployment's memory budget. ``.result`` is a ``MemoryPlan``.

    Introduced in: notebooks/04_memory_budget.ipynb
    """

    title = N_("Memory budget: weights first, the rest is KV cache")

    def __init__(
        self,
        model: str = "llama-3.1-8b",
        gpu: str = "h100-sxm",
        n_gpus: int = 1,
        weight_dtype: str = "bf16",
        kv_dtype: str = "bf16",
        context_tokens: int = 8192,
        concurrency: int = 16,
    ) -> None:
        controls = {
            "model": W.Dropdown(options=list_models(), value=model, description=_("model")),
            "gpu": W.Dropdown(options=list_gpus(), value=gpu, description=_("GPU")),
            "n_gpus": W.IntSlider(
                value=n_gpus, min=1, max=8, description=_("GPUs (tensor parallel)")
            ),
            "weight_dtype": W.Dropdown(
                options=WEIGHT_DTYPES, value=weight_dtype, description=_("weights")
            ),
            "kv_dtype": W.Dropdown(options=KV_DTYPES, value=kv_dtype, description=_("KV cache")),
            "context_tokens": W.SelectionSlider(
                options=CONTEXT_CHOICES, value=context_tokens, description=_("context (tokens)")
            ),
            "concurrency": W.IntSlider(
                value=concurrency, min=1, max=512, description=_("concurrent requests")
            ),
        }
        super().__init__(controls)

    def compute(
        self, model, gpu, n_gpus, weight_dtype, kv_dtype, context_tokens, concurrency
    ) -> MemoryPlan:
        return plan_memory(
            get_model(model),
            get_gpu(gpu),
            n_gpus=n_gpus,
            weight_dtype=weight_dtype,
            kv_dtype=kv_dtype,
            context_tokens=context_tokens,
            concurrency=concurrency,
        )

    def describe(self, plan: MemoryPlan) -> str:
        colour = "#1b7a1b" if plan.fits else "#b00020"
        verdict = _("fits") if plan.fits else _("does not fit")
        # TRANSLATORS: {kv} is bytes ("128 KiB"), {context} tokens, {most} requests.
        figures = _(
            "KV per token: {kv} per GPU · max concurrency at {context:,} tokens: {most:.2f}x"
        ).format(
            kv=format_bytes(plan.kv_bytes_per_token),
            context=plan.context_tokens,
            most=plan.max_concurrency,
        )
        return (
            f"<p><b style='color:{colour}'>{html.escape(verdict)}</b>: "
            f"{html.escape(plan.reason)}<br>{figures}</p>"
        )

    def draw(self, plan: MemoryPlan):
        return memory_bar(plan)
