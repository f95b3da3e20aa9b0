"""Chapter 5's widgets: one explorer per optimisation, each on a pure function of
``llminfer.sim.techniques``, ``llminfer.sim.speculative`` or ``llminfer.sim.disaggregation``."""

from __future__ import annotations

import html

import ipywidgets as W
import pandas as pd

from llminfer.language import N_, _
from llminfer.plots.techniques import (
    disaggregation_bars,
    fragmentation_bars,
    prefix_ttft_curve,
    quantization_bars,
    speculative_curves,
    tensor_parallel_curves,
)
from llminfer.sim import disaggregation, speculative, techniques
from llminfer.specs.presets import get_gpu, get_model, list_gpus, list_models
from llminfer.specs.stepmodel import get_profile
from llminfer.units import format_duration
from llminfer.widgets._explorer import Explorer, choice_slider, grid


class QuantizationExplorer(Explorer):
    """Model, GPU and GPU count → weight bytes, TPOT floor and KV capacity per weight format
    (``techniques.quantization_table``).

    Introduced in: notebooks/05_optimizations.ipynb
    """

    title = N_("Quantisation: fewer weight bytes, lower decode floor, more KV cache")

    def __init__(self, model="llama-3.1-8b", gpu="h100-sxm", n_gpus=1) -> None:
        controls = {
            "model": W.Dropdown(options=list_models(), value=model, description=_("model")),
            "gpu": W.Dropdown(options=list_gpus(), value=gpu, description=_("GPU")),
            "n_gpus": W.IntSlider(value=n_gpus, min=1, max=8, description=_("GPUs")),
        }
        super().__init__(controls)

    def compute(self, model, gpu, n_gpus) -> pd.DataFrame:
        return techniques.quantization_table(get_model(model), get_gpu(gpu), n_gpus=n_gpus)

    def describe(self, table: pd.DataFrame) -> str:
        # TRANSLATORS: one weight format's row: weights per GPU, TPOT floor, KV Cache room.
        row = _("{dtype}: {gb:.1f} GB/GPU, TPOT ≥ {floor}, KV {kv:,} tokens")
        rows = [
            row.format(
                dtype=r.dtype,
                gb=r.weight_bytes / 1e9,
                floor=format_duration(r.tpot_floor_s),
                kv=r.kv_capacity_tokens,
            )
            + ("" if r.fits else _(" (does not fit)"))
            for r in table.itertuples()
        ]
        return "<br>".join(html.escape(r) for r in rows)

    def draw(self, table: pd.DataFrame):
        return quantization_bars(table)


class PagingExplorer(Explorer):
    """Maximum length, block size and length ranges → share of reserved KV slots holding
    tokens (``techniques.fragmentation_simulation``).

    Introduced in: notebooks/05_optimizations.ipynb
    """

    title = N_("PagedAttention: reservation versus blocks")

    def __init__(self, max_tokens=2048, block_size=16, max_prompt=1024, max_output=1024) -> None:
        controls = {
            "max_tokens": W.SelectionSlider(
                options=[512, 1024, 2048, 4096, 8192, 32768],
                value=max_tokens,
                description=_("reserved max length"),
            ),
            "block_size": W.SelectionSlider(
                options=[1, 8, 16, 32, 64, 128, 256],
                value=block_size,
                description=_("block size"),
            ),
            "max_prompt": W.IntSlider(
                value=max_prompt, min=16, max=4096, step=16, description=_("prompt up to")
            ),
            "max_output": W.IntSlider(
                value=max_output, min=16, max=4096, step=16, description=_("output up to")
            ),
        }
        super().__init__(controls)

    def compute(self, max_tokens, block_size, max_prompt, max_output) -> pd.DataFrame:
        return techniques.fragmentation_simulation(
            (1, max_prompt), (1, max_output), max_tokens, (block_size,), n_requests=2000
        )

    def describe(self, table: pd.DataFrame) -> str:
        # TRANSLATORS: {policy} is an allocation policy's name ("paged 16", "reserve max").
        row = _("{policy}: {utilization:.1%} of allocated slots hold tokens")
        return "<br>".join(
            html.escape(row.format(policy=r.policy, utilization=r.utilization))
            for r in table.itertuples()
        )

    def draw(self, table: pd.DataFrame):
        return fragmentation_bars(table)


class PrefixCacheExplorer(Explorer):
    """Prompt length, shared prefix and hit rate → prefill time with prefix caching
    (``techniques.prefix_cache_ttft``).

    Introduced in: notebooks/05_optimizations.ipynb
    """

    title = N_("Prefix caching: prefill tokens saved → TTFT")

    def __init__(
        self, prompt_tokens=4096, shared_prefix_tokens=3000, hit_rate=0.8, profile="vllm"
    ) -> None:
        self.profile = get_profile(profile)  # the engine whose prefill steps are timed
        controls = {
            "prompt_tokens": W.IntSlider(
                value=prompt_tokens, min=128, max=32768, step=128, description=_("prompt tokens")
            ),
            "shared_prefix_tokens": W.IntSlider(
                value=shared_prefix_tokens,
                min=0,
                max=32768,
                step=1,
                description=_("shared prefix"),
            ),
            "hit_rate": choice_slider(hit_rate, grid(0, 1, 20), _("hit rate"), "{:.2f}"),
        }
        self.model, self.gpu = get_model("llama-3.1-8b"), get_gpu("h100-sxm")
        super().__init__(controls)

    def compute(self, prompt_tokens, shared_prefix_tokens, hit_rate) -> dict:
        result = techniques.prefix_cache_ttft(
            self.model,
            self.gpu,
            prompt_tokens,
            shared_prefix_tokens,
            hit_rate,
            profile=self.profile,
        )
        return {**result, "shared_prefix_tokens": shared_prefix_tokens}

    def describe(self, result: dict) -> str:
        # The shared prefix is named beside what is reused: only whole 16-token blocks are
        # cached, so a step of the slider often leaves the reuse (and the curve) unchanged, and
        # the summary says why instead of seeming not to react.
        return html.escape(
            _(
                "shared prefix {shared:,} tokens → {cached:,} reused per hit (whole 16-token "
                "blocks): prefill {miss} → {hit} on a hit, {expected} on average ({speedup:.2f}×)"
            ).format(
                shared=result["shared_prefix_tokens"],
                cached=result["cached_tokens"],
                miss=format_duration(result["miss_s"]),
                hit=format_duration(result["hit_s"]),
                expected=format_duration(result["expected_s"]),
                speedup=result["speedup"],
            )
        )

    def draw(self, result: dict):
        rates = [i / 10 for i in range(11)]
        hit, miss = result["hit_s"], result["miss_s"]
        return prefix_ttft_curve(rates, [r * hit + (1 - r) * miss for r in rates], miss)


class SpeculativeExplorer(Explorer):
    """Acceptance rate α and draft cost ratio c → speed-up per draft length and the best γ
    (``speculative.speculative_speedup``).

    Introduced in: notebooks/05_optimizations.ipynb
    """

    title = N_("Speculative decoding: acceptance rate and draft cost decide the gain")

    def __init__(self, alpha=0.8, cost_ratio=0.05) -> None:
        controls = {
            "alpha": choice_slider(alpha, grid(0, 0.99, 99), _("acceptance α"), "{:.2f}"),
            "cost_ratio": choice_slider(
                cost_ratio, grid(0, 1, 100), _("draft cost ratio c"), "{:.2f}"
            ),
        }
        super().__init__(controls)

    def compute(self, alpha, cost_ratio) -> dict:
        gamma, speedup = speculative.best_draft_length(alpha, cost_ratio, max_gamma=12)
        table = speculative.speculative_table([alpha], cost_ratio, range(0, 13))
        return {"gamma": gamma, "speedup": speedup, "table": table}

    def describe(self, result: dict) -> str:
        if result["gamma"] == 0:
            none = _("Best: do not speculate (every γ > 0 is slower than plain decoding).")
            return f"<p>{none}</p>"  # as written: "γ > 0" (never escaped)
        best = _("Best draft length γ = {gamma}: {speedup:.2f}×")
        return html.escape(best.format(gamma=result["gamma"], speedup=result["speedup"]))

    def draw(self, result: dict):
        return speculative_curves(result["table"])


class TensorParallelExplorer(Explorer):
    """Model, GPU, batch and context → decode step time versus GPU count over NVLink and
    PCIe (``techniques.tensor_parallel_table``).

    Introduced in: notebooks/05_optimizations.ipynb
    """

    title = N_("Tensor parallelism: where more GPUs stop paying")

    def __init__(
        self, model="llama-3.1-70b", gpu="h100-sxm", batch=1, context_tokens=2048, profile="vllm"
    ):
        self.profile = get_profile(profile)  # the engine whose efficiencies time the steps
        controls = {
            "model": W.Dropdown(options=list_models(), value=model, description=_("model")),
            "gpu": W.Dropdown(options=list_gpus(), value=gpu, description=_("GPU")),
            "batch": W.SelectionSlider(
                options=[1, 4, 16, 64, 256], value=batch, description=_("batch")
            ),
            "context_tokens": W.SelectionSlider(
                options=[512, 2048, 8192, 32768], value=context_tokens, description=_("context")
            ),
        }
        super().__init__(controls)

    def compute(self, model, gpu, batch, context_tokens) -> pd.DataFrame:
        return techniques.tensor_parallel_table(
            get_model(model),
            get_gpu(gpu),
            (1, 2, 4, 8),
            batch,
            context_tokens,
            profile=self.profile,
        )

    def describe(self, table: pd.DataFrame) -> str:
        # TRANSLATORS: {link} is "NVLink" or "PCIe", {n_gpus} the GPU count.
        row = _(
            "{link} × {n_gpus}: {step:.2f} ms/step (comm {comm:.2f} ms), efficiency "
            "{efficiency:.0%}"
        )
        rows = [
            row.format(
                link=r.link,
                n_gpus=r.n_gpus,
                step=r.step_s * 1e3,
                comm=r.comm_s * 1e3,
                efficiency=r.efficiency,
            )
            + ("" if r.fits else _(" — this batch's KV cache does not fit"))
            for r in table.itertuples()
        ]
        return "<br>".join(html.escape(r) for r in rows)

    def draw(self, table: pd.DataFrame):
        return tensor_parallel_curves(table)


class DisaggregationExplorer(Explorer):
    """Model, GPU and transfer mode → KV transfer time per link against prefill time, per
    prompt length, and the part of the copy TTFT sees (``disaggregation.disaggregation_table``).

    ``transfer`` is ``"pull"`` (vLLM's NixlConnector: the decode side reads the whole cache
    after the prefill finished, so all of it adds to TTFT; the default) or ``"layerwise"``
    (push each layer as it is prefilled: only about 1/L shows). Links: the GPU's own NVLink
    and PCIe (same node) and the two network links of ``disaggregation.KV_LINKS``.

    Introduced in: notebooks/05_optimizations.ipynb
    """

    title = N_("Prefill/decode disaggregation: the KV cache has to travel")

    def __init__(
        self, model="llama-3.1-8b", gpu="h100-sxm", transfer="pull", profile="vllm"
    ) -> None:
        self.profile = get_profile(profile)  # the engine whose prefill steps are timed
        controls = {
            "model": W.Dropdown(options=list_models(), value=model, description=_("model")),
            "gpu": W.Dropdown(options=list_gpus(), value=gpu, description=_("GPU")),
            "transfer": W.Dropdown(
                options=[  # (what the learner reads, the value code reads)
                    (_("pull after prefill (vLLM NixlConnector, default)"), "pull"),
                    (_("push layer by layer (P2pNccl, MoRIIO, LMCache)"), "layerwise"),
                ],
                value=transfer,
                description=_("KV transfer"),
            ),
        }
        super().__init__(controls)

    def compute(self, model, gpu, transfer) -> pd.DataFrame:
        m, chip = get_model(model), get_gpu(gpu)
        prompts = [p for p in (512, 2048, 8192, 32768) if p <= m.max_context]
        links = {
            name: bw
            for name, bw in (
                # names the table keeps (code reads them); shown translated (plots.techniques)
                (N_("NVLink (same node)"), chip.interconnect_bandwidth),
                (N_("PCIe (same node)"), chip.pcie_bandwidth),
            )
            if bw
        }
        links |= {
            k: disaggregation.KV_LINKS[k] for k in ("400 Gb/s InfiniBand", "100 Gb/s Ethernet")
        }
        return disaggregation.disaggregation_table(
            m, chip, prompts, links=links, transfer=transfer, profile=self.profile
        )

    def describe(self, table: pd.DataFrame) -> str:
        worst = table.loc[table["exposed_s"].idxmax()]
        pulled = worst["transfer"] == "pull"
        mode = _("pulled after the prefill") if pulled else _("pushed per layer")
        # TRANSLATORS: {mode} is "pulled after the prefill" or "pushed per layer"; {link} a
        # link's name; {exposed}, {transfer} and {prefill} are durations.
        return html.escape(
            _(
                "KV cache {mode}. Worst case: {link} at {prompt:,} prompt tokens adds {exposed} "
                "to TTFT (the whole copy takes {transfer}, {ratio:.2f}× the {prefill} prefill)."
            ).format(
                mode=mode,
                link=_(worst["link"]),
                prompt=worst["prompt_tokens"],
                exposed=format_duration(worst["exposed_s"]),
                transfer=format_duration(worst["transfer_s"]),
                ratio=worst["transfer_over_prefill"],
                prefill=format_duration(worst["prefill_s"]),
            )
        )

    def draw(self, table: pd.DataFrame):
        return disaggregation_bars(table)
