"""Chapter 3 and 5 plots: assert on the data behind each figure, not on pixels."""

import pandas as pd
import pytest

from llminfer import get_gpu, get_model
from llminfer.plots import (
    chunk_size_tradeoff,
    disaggregation_bars,
    fragmentation_bars,
    policy_comparison,
    quantization_bars,
    speculative_batch_curve,
    speculative_curves,
    step_timeline,
    tensor_parallel_curves,
)
from llminfer.sim import disaggregation, speculative
from llminfer.sim import techniques as T
from llminfer.sim.simulate import simulate
from llminfer.sim.workload import Workload

LLAMA8, H100 = get_model("llama-3.1-8b"), get_gpu("h100-sxm")


def test_policy_comparison_bars_are_the_table():
    table = pd.DataFrame({"output_tps": [10.0, 30.0], "ttft_s_p99": [2.0, 0.5]}, ["a, b", "c"])
    fig = policy_comparison(table, ("output_tps", "ttft_s_p99"))
    heights = [[bar.get_height() for bar in ax.patches] for ax in fig.axes]
    assert heights == [[10.0, 30.0], [2.0, 0.5]]
    assert fig.axes[1].get_title() == "ttft_s_p99 (s)"
    with pytest.raises(ValueError, match="lacks"):
        policy_comparison(table, ("rps",))
    logged = policy_comparison(table, ("output_tps", "ttft_s_p99"), log=True)
    assert [ax.get_yscale() for ax in logged.axes] == ["linear", "log"]
    assert logged.axes[1].get_title() == "ttft_s_p99 (s, log scale)"


def test_chunk_size_tradeoff_plots_milliseconds():
    table = pd.DataFrame(
        {
            "max_num_batched_tokens": [2048, 512],
            "ttft_s_p99": [0.2, 0.5],
            "itl_s_p99": [0.05, 0.02],
        }
    )
    fig = chunk_size_tradeoff(table)
    itl, ttft = fig.axes[0].lines[:2]
    assert list(itl.get_xdata()) == [512, 2048]
    assert list(itl.get_ydata()) == pytest.approx([20.0, 50.0])
    assert list(ttft.get_ydata()) == pytest.approx([500.0, 200.0])


def test_speculative_batch_curve_carries_the_table():
    table = speculative.speculative_batch_table(LLAMA8, H100, 0.6, 4, batches=(1, 64, 1024))
    fig = speculative_batch_curve(table)
    speedup = fig.axes[0].lines[0]
    assert list(speedup.get_ydata()) == list(table["speedup"])


def test_step_timeline_plots_the_steps():
    result = simulate(Workload(30, rate=5, prompt_tokens=200, output_tokens=20), LLAMA8, H100)
    fig = step_timeline(result)
    batch_line = fig.axes[0].lines[0]
    assert list(batch_line.get_ydata()) == result.steps.batch_size.tolist()
    share = fig.axes[1].lines[0].get_ydata()
    assert max(share) == result.steps.kv_blocks.max() / result.capacity_blocks <= 1


def test_technique_plots_carry_their_tables():
    quant = T.quantization_table(LLAMA8, H100)
    fig = quantization_bars(quant)
    assert [b.get_height() for b in fig.axes[0].patches] == list(quant.weight_bytes / 1e9)
    frag = T.kv_fragmentation([10, 20], [30, 20], 64, (16,))
    fig = fragmentation_bars(frag)
    assert [b.get_width() for b in fig.axes[0].patches][:3] == list(frag.utilization * 100)
    spec = speculative.speculative_table([0.5, 0.8], 0.05, range(0, 5))
    assert len(speculative_curves(spec).axes[0].lines) == 3  # two α lines + "no gain"
    tp = T.tensor_parallel_table(LLAMA8, H100, (1, 2))
    assert len(tensor_parallel_curves(tp).axes[0].lines) == 2
    pd_table = disaggregation.disaggregation_table(LLAMA8, H100, [512, 4096])
    bars = disaggregation_bars(pd_table).axes[0].patches
    assert len(bars) == 2 * 3  # prefill + NVLink + PCIe for each prompt length
    # pull (the default): the whole copy is what TTFT sees, one bar per link
    assert [b.get_height() for b in bars[2:4]] == list(pd_table.exposed_s[::2] * 1e3)
    lw = disaggregation.disaggregation_table(LLAMA8, H100, [512, 4096], transfer="layerwise")
    assert len(disaggregation_bars(lw).axes[0].patches) == 2 * 5  # + dashed whole copies
