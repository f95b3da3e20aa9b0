"""Chapter 9's widgets: experts touched versus batch and EP degree, and a MoE decode sweep."""

from __future__ import annotations

import html
from dataclasses import dataclass

import ipywidgets as W
import pandas as pd

from llminfer.cost.moe import EPMemoryPlan, experts_touched, plan_ep_memory
from llminfer.language import N_, _
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
#: The parts of a MoE decode step (``EPStep.bound``), as a summary names them.
PARTS = {"attention": N_("attention"), "experts": N_("experts"), "all-to-all": N_("all-to-all")}


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

    title = N_("Experts a decode step touches, by batch and expert-parallel degree")

    def __init__(self, model: str = "deepseek-v3", batch: int = 16, ep: int = 1) -> None:
        controls = {
            "model": W.Dropdown(options=moe_models(), value=model, description=_("model")),
            "batch": W.SelectionSlider(
                options=BATCH_CHOICES, value=batch, description=_("sequences per GPU")
            ),
            "ep": W.SelectionSlider(
                options=EP_CHOICES, value=ep, description=_("EP degree (GPUs)")
            ),
        }
        super().__init__(controls)

    def compute(self, model, batch, ep) -> dict:
        m = get_model(model)
        if ep > m.n_experts:
            # the learner moved a slider too far: said in the learner's language
            raise ValueError(
                _(
                    "ep={ep} exceeds {model}'s {experts} routed experts: some GPU would hold "
                    "none; choose a smaller EP degree"
                ).format(ep=ep, model=m.name, experts=m.n_experts)
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
            _(
                "{model}, EP{ep}: each GPU holds {local:g} experts per layer; a step of {batch} "
                "sequences per GPU ({tokens:,} tokens in the group) touches {touched:.1f} of "
                "them ({share:.0%}). 90 % are touched from {bound:.1f} sequences per GPU."
            ).format(
                model=r["model"],
                ep=r["ep"],
                local=r["local_experts"],
                batch=r["batch"],
                tokens=r["batch"] * r["ep"],
                touched=r["touched"],
                share=r["share"],
                bound=r["bound_batch"],
            )
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
        # TRANSLATORS: {left} is bytes ("12.3 GiB"); {room} how many such sequences fit.
        return _(
            "{batch} sequences of {context:,} tokens per GPU need more KV cache than the "
            "{left} left per GPU (room for {room:.1f})"
        ).format(
            batch=self.step.batch,
            context=self.step.context_tokens,
            left=format_bytes(max(0.0, self.memory.kv_budget_bytes)),
            room=self.memory.max_seqs_per_gpu,
        )


class MoEServingExplorer(Explorer):
    """Model, GPU, EP degree, batch, context, dtypes, imbalance and overlap → one GPU's MoE
    decode step (``llminfer.sim.expert_parallel.ep_step``) and its memory plan.

    Introduced in: notebooks/09_mixture_of_experts.ipynb
    """

    title = N_("MoE decode under expert parallelism: step time, throughput, memory")

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
            "model": W.Dropdown(options=moe_models(), value=model, description=_("model")),
            "gpu": W.Dropdown(options=list_gpus(), value=gpu, description=_("GPU")),
            "ep": W.SelectionSlider(
                options=EP_CHOICES, value=ep, description=_("EP degree (GPUs)")
            ),
            "batch": W.SelectionSlider(
                options=BATCH_CHOICES, value=batch, description=_("sequences per GPU")
            ),
            "context_tokens": W.SelectionSlider(
                options=CONTEXT_CHOICES, value=context_tokens, description=_("context (tokens)")
            ),
            "weight_dtype": W.Dropdown(
                options=DTYPES, value=weight_dtype, description=_("non-expert weights")
            ),
            "expert_dtype": W.Dropdown(
                options=DTYPES, value=expert_dtype, description=_("experts")
            ),
            "imbalance": choice_slider(imbalance, IMBALANCE_CHOICES, _("hottest GPU ÷ mean load")),
            "overlap": W.Checkbox(value=overlap, description=_("two-batch overlap")),
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
        # TRANSLATORS: {bound} is the part that takes longest: attention, experts, all-to-all;
        # {memory} is the memory plan in a sentence.
        return html.escape(
            _(
                "EP{ep}, {batch} sequences per GPU: step {step} (attention side {attention}, "
                "experts {experts}, all-to-all {comm}; bound by {bound}) → {gpu_tps:,.0f} "
                "tokens/s per GPU, {user_tps:.1f} tokens/s per user; experts touched per GPU "
                "{touched:.1f} of {local:g}. Memory: {memory}"
            ).format(
                ep=s.ep,
                batch=s.batch,
                step=format_duration(s.step_s),
                attention=format_duration(s.attention_s),
                experts=format_duration(s.expert_s),
                comm=format_duration(s.comm_s),
                bound=_(PARTS[s.bound]) if s.bound in PARTS else s.bound,
                gpu_tps=s.tokens_per_s_per_gpu,
                user_tps=s.tokens_per_s_per_user,
                touched=s.experts_touched_per_gpu,
                local=s.experts_per_gpu,
                memory=r.memory,
            )
        )

    def draw(self, r: MoEServing):
        return ep_sweep_chart(r.sweep)
