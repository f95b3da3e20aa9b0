"""Widgets on the serving simulator: the best load under a latency target (chapter 3) and
continuous versus static batching (chapter 5)."""

from __future__ import annotations

import html

import ipywidgets as W
import pandas as pd

from llminfer.language import N_, _
from llminfer.plots.simulate import policy_comparison, throughput_latency
from llminfer.sim.engines import EngineConfig
from llminfer.sim.loadsweep import best_load, compare_engines, knee, load_column
from llminfer.sim.workload import LogNormal, Workload
from llminfer.specs.presets import get_gpu, get_model
from llminfer.specs.stepmodel import get_profile
from llminfer.widgets._explorer import Explorer, choice_slider, whole

#: TTFT targets offered, s: 1-2-5 steps per decade from 10 ms to 100 s.
TTFT_TARGETS_S = [round(m * 10.0**e, 6) for e in range(-2, 2) for m in (1, 2, 5)] + [100.0]
#: Offered loads, requests/s: powers of √2 from 0.5 to 64 (a log scale, half an octave a step).
RATES = [2 ** (k / 2) for k in range(-2, 13)]


class LoadExplorer(Explorer):
    """Latency targets → the highest load of a precomputed ``sweep`` table that meets them.

    ``table`` comes from ``llminfer.sim.loadsweep.sweep`` with the percentiles offered here
    (50, 90, 99). Moving a slider re-reads the table; nothing is re-simulated. ``.result`` is
    a dict: ``best`` (load or None), ``knee``, ``row`` (the sweep row at ``best``).

    Introduced in: notebooks/03_metrics.ipynb
    """

    title = N_("High throughput is not good UX: the best load under a latency target")

    def __init__(
        self, table: pd.DataFrame, ttft_s: float = 1.0, tpot_ms: float = 50.0, percentile=99
    ) -> None:
        self.table = table
        self.kind = load_column(table)
        self.knee = knee(table)
        controls = {
            "ttft_s": choice_slider(ttft_s, TTFT_TARGETS_S, _("TTFT target (s)")),
            "tpot_ms": W.IntSlider(
                value=whole(tpot_ms, "tpot_ms"),
                min=5,
                max=300,
                step=5,
                description=_("TPOT target (ms)"),
            ),
            "percentile": W.Dropdown(
                options=[50, 90, 99], value=percentile, description=_("percentile")
            ),
        }
        super().__init__(controls)

    def compute(self, ttft_s, tpot_ms, percentile) -> dict:
        slo = {"ttft_s": ttft_s, "tpot_s": tpot_ms / 1e3}
        best = best_load(self.table, slo, percentile)
        row = None if best is None else self.table.loc[self.table[self.kind] == best].iloc[0]
        return {"best": best, "knee": self.knee, "row": row, "slo": slo, "percentile": percentile}

    def describe(self, result: dict) -> str:
        unit = _("requests/s") if self.kind == "rate" else _("users")
        if result["best"] is None:
            none = _(
                "No load in the sweep meets p{percentile} TTFT ≤ {ttft:g} s and TPOT ≤ {tpot:g} ms."
            ).format(
                percentile=result["percentile"],
                ttft=result["slo"]["ttft_s"],
                tpot=result["slo"]["tpot_s"] * 1e3,
            )
            return f"<p style='color:#b00020'>{html.escape(none)}</p>"
        row = result["row"]
        # TRANSLATORS: {unit} is "requests/s" or "users".
        return html.escape(
            _(
                "Best load: {best:g} {unit} → {tps:,.0f} output tokens/s (knee of the "
                "throughput curve at {knee:g} {unit})."
            ).format(best=result["best"], unit=unit, tps=row["output_tps"], knee=result["knee"])
        )

    def draw(self, result: dict):
        return throughput_latency(
            self.table,
            percentiles=(50, result["percentile"]) if result["percentile"] != 50 else (50,),
            knee_load=result["knee"],
            best=result["best"],
            slo=result["slo"],
        )


class BatchingExplorer(Explorer):
    """Offered load and batch limits → continuous versus static batching on the same
    requests. ``.result`` is ``loadsweep.compare_engines``'s table (index: policy).

    Introduced in: notebooks/05_optimizations.ipynb
    """

    title = N_("Continuous versus static batching at the same offered load")

    def __init__(
        self,
        model: str = "llama-3.1-8b",
        gpu: str = "h100-sxm",
        rate: float = 8.0,
        max_num_seqs: int = 64,
        n_requests: int = 300,
        profile: str = "vllm",
    ) -> None:
        self.model, self.gpu, self.n_requests = get_model(model), get_gpu(gpu), n_requests
        self.profile = get_profile(profile)  # the engine whose steps are simulated
        controls = {
            "rate": choice_slider(rate, RATES, _("requests/s"), "{:.3g}"),
            "max_num_seqs": W.SelectionSlider(
                options=[1, 2, 4, 8, 16, 32, 64, 128, 256],
                value=max_num_seqs,
                description="max_num_seqs",
            ),
            "chunked_prefill": W.Checkbox(value=True, description=_("chunked prefill (V1)")),
        }
        super().__init__(controls)

    def compute(self, rate, max_num_seqs, chunked_prefill) -> pd.DataFrame:
        workload = Workload(
            self.n_requests,
            rate=rate,
            prompt_tokens=LogNormal(500, 1.0, high=8000),
            output_tokens=LogNormal(200, 1.0, high=2000),
        )
        engines = {
            "static": EngineConfig(policy="static", max_num_seqs=max_num_seqs),
            "continuous": EngineConfig(max_num_seqs=max_num_seqs, chunked_prefill=chunked_prefill),
        }
        return compare_engines(workload, self.model, self.gpu, engines, profile=self.profile)

    def describe(self, table: pd.DataFrame) -> str:
        ratio = table.loc["continuous", "output_tps"] / table.loc["static", "output_tps"]
        return html.escape(
            _(
                "Continuous batching: {ratio:.2f}× the output throughput of static batching; "
                "p99 TTFT {continuous:.2f} s vs {static:.2f} s."
            ).format(
                ratio=ratio,
                continuous=table.loc["continuous", "ttft_s_p99"],
                static=table.loc["static", "ttft_s_p99"],
            )
        )

    def draw(self, table: pd.DataFrame):
        return policy_comparison(table, ("output_tps", "ttft_s_p99", "tpot_s_p99"))
