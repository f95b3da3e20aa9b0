"""Chapter 3 and 5 widgets driven without a kernel: set a control, assert on the result."""

import pytest

from llminfer import get_gpu, get_model
from llminfer.sim import speculative
from llminfer.sim.loadsweep import best_load, sweep
from llminfer.sim.workload import Workload
from llminfer.widgets import (
    BatchingExplorer,
    DisaggregationExplorer,
    LoadExplorer,
    PagingExplorer,
    PrefixCacheExplorer,
    QuantizationExplorer,
    SpeculativeExplorer,
    TensorParallelExplorer,
)

LLAMA8, H100 = get_model("llama-3.1-8b"), get_gpu("h100-sxm")


@pytest.fixture(scope="module")
def table():
    workload = Workload(200, rate=1.0, prompt_tokens=(100, 2000), output_tokens=(20, 300))
    return sweep(workload, LLAMA8, H100, rates=[1, 4, 16, 64], percentiles=(50, 90, 99))


def test_load_explorer_reads_the_sweep(table):
    w = LoadExplorer(table, ttft_s=1.0, tpot_ms=50)
    assert w.result["best"] == best_load(table, {"ttft_s": 1.0, "tpot_s": 0.05}, 99)
    assert w.figure is not None and w.error is None
    w.controls["ttft_s"].value = 0.01
    assert w.result["best"] is None and "No load" in w._summary.value
    w.controls["ttft_s"].value = 100
    w.controls["tpot_ms"].value = 300
    assert w.result["best"] == 64


def test_batching_explorer():
    w = BatchingExplorer(rate=16, max_num_seqs=32, n_requests=120)
    table = w.result
    assert table.loc["continuous", "output_tps"] >= table.loc["static", "output_tps"]
    w.controls["max_num_seqs"].value = 1  # batch of one: both policies are the same server
    assert w.result.loc["continuous", "output_tps"] == pytest.approx(
        w.result.loc["static", "output_tps"]
    )


def test_technique_explorers_follow_their_controls():
    s = SpeculativeExplorer(alpha=0.8, cost_ratio=0.05)
    assert (s.result["gamma"], s.result["speedup"]) == speculative.best_draft_length(0.8, 0.05, 12)
    s.controls["alpha"].value = 0.1
    s.controls["cost_ratio"].value = 0.5
    assert s.result["gamma"] == 0 and "do not speculate" in s._summary.value

    q = QuantizationExplorer()
    assert list(q.result["dtype"]) == ["bf16", "fp8", "int8", "int4"]
    q.controls["model"].value = "llama-3.1-70b"
    assert not q.result.set_index("dtype").loc["bf16", "fits"]

    p = PagingExplorer(block_size=16)
    assert p.result.set_index("policy").loc["paged 16", "waste"] < 0.04
    p.controls["block_size"].value = 256
    assert "paged 256" in set(p.result.policy)

    c = PrefixCacheExplorer(prompt_tokens=4096, shared_prefix_tokens=3000, hit_rate=0.8)
    assert c.result["cached_tokens"] == 2992 and c.result["speedup"] > 1
    # One slider step (3000 → 3001) reuses the same whole blocks; the summary still changes
    # (it names the prefix and the rounding), so the learner sees the explorer react.
    before = c._summary.value
    c.controls["shared_prefix_tokens"].value = 3001
    assert c.result["cached_tokens"] == 2992 and c._summary.value != before
    assert "shared prefix 3,001 tokens → 2,992 reused per hit" in c._summary.value
    c.controls["shared_prefix_tokens"].value = 3000
    c.controls["hit_rate"].value = 0.0
    assert c.result["speedup"] == 1

    t = TensorParallelExplorer()
    assert set(t.result.link) == {"NVLink", "PCIe"}
    t.controls["gpu"].value = "l40s"  # no NVLink on an L40S
    assert set(t.result.link) == {"PCIe"}

    d = DisaggregationExplorer()
    assert d.result.prompt_tokens.max() == 32768
    d.controls["model"].value = "falcon-7b"  # 2,048-token context
    assert d.result.prompt_tokens.max() == 2048
    # the transfer mode: pull (vLLM NixlConnector, the default) exposes the whole copy,
    # layer-wise push about 1/L of it
    d.controls["model"].value = "llama-3.1-8b"
    assert d.controls["transfer"].value == "pull"
    assert (d.result.exposed_s == d.result.transfer_s).all()
    assert {"400 Gb/s InfiniBand", "100 Gb/s Ethernet", "NVLink (same node)"} <= set(d.result.link)
    d.controls["transfer"].value = "layerwise"
    assert (d.result.exposed_s < d.result.transfer_s).all()
    assert "per layer" in d.describe(d.result)
