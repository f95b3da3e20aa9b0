"""Chapter 9's widgets: experts touched versus batch and EP degree, and a MoE decode sweep."""

from __future__ import annotations

import html
from dataclasses import dataclass

import ipywidgets as W
import pandas as pd

from llminfer.cost.moe import EPMemoryPlan, experts_touched, plan_ep_memory
from llminfer.plots.moe import ep_sweep_chart, experts_touched_chart
from llminfer.sim.expert_parallel import EPStep, ep_step, ep_sweep, expert_bound_batch
from llminfer.specs.presets import get_gpu, get_model, list_gpus, list_models
from llminfer.units import format_bytes, format_duration
from llminfer.widgets._explorer import Explorer, choice_slider

EP_CHOICES = [1, 2, 4, 8, 16, 32, 64, 72, 128, 144, 256]
BATCH_CHOICES = [2**k for k in range(0, 10)]  # 1 ... 512 sequences per GPU
CONTEXT_CHOICES = [512, 1000, 2000, 4096, 4989, 8192, 16384, 32768]
IMBALANCE_CHOICES = [1.0, 1.1, 1.25, 1.5, 2.0, 2.54, 3.0]
DTYPES = ["bf16", "fp8", "mxfp4", "nvfp4"]


def moe_models() -> list[str]:
    """The preset keys of the mixtures of experts (the models chapter 9's widgets offer).

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """
    return [key for key in list_models() if get_model(key).is_moe]


class ExpertsExplorer(Explorer):
    """Model, sequences per GPU and EP degree → experts one GPU's decode step touches.
    ``.result`` is a dict: ``touched`` (experts per layer on the GPU, expected),
    ``local_experts``, ``share``, ``bound_batch`` (sequences per GPU at 90 % touched).

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """

    title = "Experts a decode step touches, by batch and expert-parallel degree"

    def __init__(self, model: str = "deepseek-v3", batch: int = 16, ep: int = 1) -> None:
        controls = {
            "model": W.Dropdown(options=moe_models(), value=model, description="model"),
            "batch": W.SelectionSlider(
                options=BATCH_CHOICES, value=batch, description="sequences per GPU"
            ),
            "ep": W.SelectionSlider(options=EP_CHOICES, value=ep, description="EP degree (GPUs)"),
        }
        super().__init__(controls)

    def compute(self, model, batch, ep) -> dict:
        m = get_model(model)
        if ep > m.n_experts:
            raise ValueError(
                f"ep={ep} exceeds {m.name}'s {m.n_experts} routed experts: some GPU would hold "
                "none; choose a smaller EP degree"
            )
        local = m.n_experts / ep
        touched = float(experts_touched(m.n_experts, m.experts_per_token, batch * ep)) / ep
        return {
            "model": m.name,
            "batch": batch,
            "ep": ep,
            "local_experts": local,
            "touched": touched,
            "share": touched / local,
            "bound_batch": expert_bound_batch(m, ep),
        }

    def describe(self, r: dict) -> str:
        return html.escape(
            f"{r['model']}, EP{r['ep']}: each GPU holds {r['local_experts']:g} experts per "
            f"layer; a step of {r['batch']} sequences per GPU ({r['batch'] * r['ep']:,} tokens "
            f"in the group) touches {r['touched']:.1f} of them ({r['share']:.0%}). 90 % are "
            f"touched from {r['bound_batch']:.1f} sequences per GPU."
        )

    def draw(self, r: dict):
        return experts_touched_chart([get_model(r["model"])], max_tokens=512, ep=r["ep"])


@dataclass(frozen=True)
class MoEServing:
    """What ``MoEServingExplorer`` computes: the chosen ``step``, its ``memory`` plan and the
    ``sweep`` over batch for EP 1 (where the model fits one GPU) and the chosen degree.

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """

    step: EPStep
    memory: EPMemoryPlan
    sweep: pd.DataFrame

    @property
    def fits(self) -> bool:
        return self.memory.fits and self.memory.max_seqs_per_gpu >= self.step.batch

    @property
    def reason(self) -> str:
        return (
            f"{self.step.batch} sequences of {self.step.context_tokens:,} tokens per GPU need "
            f"more KV cache than the {format_bytes(max(0.0, self.memory.kv_budget_bytes))} "
            f"left per GPU (room for {self.memory.max_seqs_per_gpu:.1f})"
        )


class MoEServingExplorer(Explorer):
    """Model, GPU, EP degree, batch, context, dtypes, imbalance and overlap → one GPU's MoE
    decode step (``llminfer.sim.expert_parallel.ep_step``) and its memory plan.

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """

    title = "MoE decode under expert parallelism: step time, throughput, memory"

    def __init__(
        self,
        model: str = "deepseek-v3",
        gpu: str = "h800",
        ep: int = 144,
        batch: int = 64,
        context_tokens: int = 4989,
        weight_dtype: str = "fp8",
        expert_dtype: str = "fp8",
        imbalance: float = 1.0,
        overlap: bool = True,
    ) -> None:
        controls = {
            "model": W.Dropdown(options=moe_models(), value=model, description="model"),
            "gpu": W.Dropdown(options=list_gpus(), value=gpu, description="GPU"),
            "ep": W.SelectionSlider(options=EP_CHOICES, value=ep, description="EP degree (GPUs)"),
            "batch": W.SelectionSlider(
                options=BATCH_CHOICES, value=batch, description="sequences per GPU"
            ),
            "context_tokens": W.SelectionSlider(
                options=CONTEXT_CHOICES, value=context_tokens, description="context (tokens)"
            ),
            "weight_dtype": W.Dropdown(
                options=DTYPES, value=weight_dtype, description="non-expert weights"
            ),
            "expert_dtype": W.Dropdown(options=DTYPES, value=expert_dtype, description="experts"),
            "imbalance": choice_slider(imbalance, IMBALANCE_CHOICES, "hottest GPU ÷ mean load"),
            "overlap": W.Checkbox(value=overlap, description="two-batch overlap"),
        }
        super().__init__(controls)

    def compute(
        self, model, gpu, ep, batch, context_tokens, weight_dtype, expert_dtype, imbalance, overlap
    ) -> MoEServing:
        m, g = get_model(model), get_gpu(gpu)
        redundant = 32 if m.n_experts == 256 and ep in (72, 144) else 0  # DeepSeek's layout
        options = dict(
            weight_dtype=weight_dtype,
            expert_dtype=expert_dtype,
            redundant_experts=redundant,
            overlap=overlap and batch >= 2,
        )
        step = ep_step(
            m, g, batch, context_tokens, ep=ep, imbalance=imbalance if ep > 1 else 1.0, **options
        )
        memory = plan_ep_memory(
            m, g, ep, weight_dtype, expert_dtype, redundant_experts=redundant,
            context_tokens=context_tokens,
        )  # fmt: skip
        options["overlap"] = overlap
        batches = [b for b in BATCH_CHOICES if b >= 2 or not overlap]
        single = plan_ep_memory(m, g, 1, weight_dtype, expert_dtype, context_tokens=context_tokens)
        eps = sorted({1, ep}) if single.kv_budget_bytes > 0 else [ep]  # EP1 only if it fits
        sweep = pd.concat(
            [
                ep_sweep(
                    m,
                    g,
                    batches,
                    [e],
                    context_tokens,
                    imbalance=imbalance if e > 1 else 1.0,
                    **{**options, "redundant_experts": redundant if e == ep else 0},
                )
                for e in eps
            ]
        )
        return MoEServing(step, memory, sweep)

    def describe(self, r: MoEServing) -> str:
        s = r.step
        return html.escape(
            f"EP{s.ep}, {s.batch} sequences per GPU: step {format_duration(s.step_s)} "
            f"(attention side {format_duration(s.attention_s)}, experts "
            f"{format_duration(s.expert_s)}, all-to-all {format_duration(s.comm_s)}; bound by "
            f"{s.bound}) → {s.tokens_per_s_per_gpu:,.0f} tokens/s per GPU, "
            f"{s.tokens_per_s_per_user:.1f} tokens/s per user; experts touched per GPU "
            f"{s.experts_touched_per_gpu:.1f} of {s.experts_per_gpu:g}. Memory: {r.memory}"
        )

    def draw(self, r: MoEServing):
        return ep_sweep_chart(r.sweep)
