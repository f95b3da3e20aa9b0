"""Chapters 1 and 2's widgets: one request's journey, and the roofline of prefill and decode."""

from __future__ import annotations

import html
from dataclasses import dataclass

import ipywidgets as W

from llminfer.cost.latency import Estimate, estimate_latency, request_breakdown
from llminfer.cost.roofline import arithmetic_intensity, compute_dtype, ridge_point
from llminfer.language import N_, _
from llminfer.plots import fonts
from llminfer.plots.roofline import request_breakdown_chart, roofline_chart
from llminfer.specs.presets import get_gpu, get_model, list_gpus, list_models
from llminfer.specs.stepmodel import DEFAULT_PROFILE, PROFILES
from llminfer.units import format_duration
from llminfer.widgets._explorer import Explorer

TOKEN_CHOICES = [2**k for k in range(4, 18)]  # 16 ... 131,072 tokens
BATCH_CHOICES = [2**k for k in range(0, 11)]  # 1 ... 1,024 sequences
WEIGHT_DTYPES = ["bf16", "fp8", "int8", "int4"]
KV_DTYPES = ["bf16", "fp8"]
#: A request's stages (``request_breakdown``) as a summary names them.
STAGES = {
    "network": N_("network"),
    "queue": N_("queue"),
    "prefill": N_("prefill"),
    "decode": N_("decode"),
}
#: What bounds a step (``Estimate.prefill_bound``, ``decode_bound``), in words.
BOUNDS = {"compute": N_("compute-bound"), "memory": N_("memory-bound")}


def _bound(kind: str) -> str:
    return _(BOUNDS[kind]) if kind in BOUNDS else f"{kind}-bound"


def _profile_control(profile: str) -> W.Dropdown:
    """The engine whose step times an explorer shows (``llminfer.specs.stepmodel.PROFILES``)."""
    if profile not in PROFILES:
        raise ValueError(f"profile={profile!r} must be one of {', '.join(PROFILES)}")
    return W.Dropdown(options=list(PROFILES), value=profile, description=_("engine"))


@dataclass(frozen=True)
class Journey:
    """A request's stages in seconds (``stages``) and the estimate behind prefill and decode.

    Introduced in: notebooks/01_introduction.ipynb
    """

    stages: dict[str, float]
    estimate: Estimate

    @property
    def total_s(self) -> float:
        return sum(self.stages.values())


class RequestJourney(Explorer):
    """Model, GPU, prompt and output length, network and queue time → one request's timeline.

    ``.result`` is a ``Journey``.

    Introduced in: notebooks/01_introduction.ipynb
    """

    title = N_("The journey of one request: network → queue → prefill → decode")

    def __init__(
        self,
        model: str = "llama-3.1-8b",
        gpu: str = "h100-sxm",
        prompt_tokens: int = 2048,
        output_tokens: int = 256,
        network_ms: int = 50,
        queue_ms: int = 200,
        profile: str = DEFAULT_PROFILE,
    ) -> None:
        controls = {
            "profile": _profile_control(profile),
            "model": W.Dropdown(options=list_models(), value=model, description=_("model")),
            "gpu": W.Dropdown(options=list_gpus(), value=gpu, description=_("GPU")),
            "prompt_tokens": W.SelectionSlider(
                options=TOKEN_CHOICES, value=prompt_tokens, description=_("prompt (tokens)")
            ),
            "output_tokens": W.SelectionSlider(
                options=TOKEN_CHOICES[:9], value=output_tokens, description=_("output (tokens)")
            ),
            "network_ms": W.IntSlider(
                value=network_ms, min=0, max=500, step=10, description=_("network (ms)")
            ),
            "queue_ms": W.IntSlider(
                value=queue_ms, min=0, max=5000, step=50, description=_("queue wait (ms)")
            ),
        }
        super().__init__(controls)

    def compute(
        self, profile, model, gpu, prompt_tokens, output_tokens, network_ms, queue_ms
    ) -> Journey:
        est = estimate_latency(
            get_model(model), get_gpu(gpu), prompt_tokens, output_tokens, profile=profile
        )
        return Journey(request_breakdown(est, network_ms / 1e3, queue_ms / 1e3), est)

    def describe(self, journey: Journey) -> str:
        parts = " · ".join(
            f"{_(STAGES[k]) if k in STAGES else k} {format_duration(v)}"
            for k, v in journey.stages.items()
        )
        est = journey.estimate
        # TRANSLATORS: {prefill} and {decode} are "compute-bound" or "memory-bound".
        times = _("TTFT (server) {ttft}, {prefill} · TPOT {tpot}, {decode}").format(
            ttft=format_duration(est.ttft_s),
            prefill=_bound(est.prefill_bound),
            tpot=format_duration(est.tpot_s),
            decode=_bound(est.decode_bound),
        )
        return (
            f"<p>{html.escape(parts)} = <b>{format_duration(journey.total_s)}</b><br>"
            f"{html.escape(times)}</p>"
        )

    def draw(self, journey: Journey):
        return request_breakdown_chart(journey.stages)


class RooflineExplorer(Explorer):
    """Model, GPU, batch, context and dtypes → prefill and decode on the GPU's roofline.

    ``.result`` is the ``Estimate`` for ``batch`` requests of ``context_tokens`` prompt
    tokens; its ``prefill_cost`` and ``decode_cost`` are the two points drawn.

    Introduced in: notebooks/02_prefill_and_decode.ipynb
    """

    title = N_("Roofline: where prefill and decode sit")

    def __init__(
        self,
        model: str = "llama-3.1-8b",
        gpu: str = "h100-sxm",
        batch: int = 1,
        context_tokens: int = 2048,
        weight_dtype: str = "bf16",
        kv_dtype: str = "bf16",
        profile: str = DEFAULT_PROFILE,
    ) -> None:
        controls = {
            "profile": _profile_control(profile),
            "model": W.Dropdown(options=list_models(), value=model, description=_("model")),
            "gpu": W.Dropdown(options=list_gpus(), value=gpu, description=_("GPU")),
            "batch": W.SelectionSlider(options=BATCH_CHOICES, value=batch, description=_("batch")),
            "context_tokens": W.SelectionSlider(
                options=TOKEN_CHOICES,
                value=context_tokens,
                description=_("prompt/context (tokens)"),
            ),
            "weight_dtype": W.Dropdown(
                options=WEIGHT_DTYPES, value=weight_dtype, description=_("weights")
            ),
            "kv_dtype": W.Dropdown(options=KV_DTYPES, value=kv_dtype, description=_("KV cache")),
        }
        super().__init__(controls)

    def compute(
        self, profile, model, gpu, batch, context_tokens, weight_dtype, kv_dtype
    ) -> Estimate:
        return estimate_latency(
            get_model(model),
            get_gpu(gpu),
            context_tokens,
            2,
            batch=batch,
            weight_dtype=weight_dtype,
            kv_dtype=kv_dtype,
            profile=profile,
        )

    def describe(self, est: Estimate) -> str:
        gpu = get_gpu(self.controls["gpu"].value)
        ridge = ridge_point(gpu, compute_dtype(est.prefill_cost.weight_dtype, gpu))
        line = _(
            "ridge point {ridge:.0f} FLOP/byte · prefill {prefill_intensity:.0f} FLOP/byte → "
            "TTFT {ttft} ({prefill}) · decode {decode_intensity:.1f} FLOP/byte → TPOT {tpot} "
            "({decode})"
        ).format(
            ridge=ridge,
            prefill_intensity=arithmetic_intensity(est.prefill_cost),
            ttft=format_duration(est.ttft_s),
            prefill=_bound(est.prefill_bound),
            decode_intensity=arithmetic_intensity(est.decode_cost),
            tpot=format_duration(est.tpot_s),
            decode=_bound(est.decode_bound),
        )
        return f"<p>{html.escape(line)}</p>"

    def draw(self, est: Estimate):
        gpu = get_gpu(self.controls["gpu"].value)
        # TRANSLATORS: the decode point's label must still say "decode" (the chart colours a
        # point whose label holds "decode"); keep "Decode" in the Chinese label.
        decode = fonts._("decode batch {batch}").format(batch=est.batch)
        prefill = fonts._("prefill {batch}×{tokens:,} tokens")
        points = {
            prefill.format(batch=est.batch, tokens=est.prompt_tokens): est.prefill_cost,
            decode: est.decode_cost,
        }
        return roofline_chart(gpu, points)
