"""Estimate.fits / .reason: an impossible configuration is never shown as a bare number.

Issue 9 §1: "405B on one L4 prints 'TPOT 3.38 s'"; "batch 512 × 1,024 needs 84.8 GB on an 80 GB
card". Memory as nvidia-smi reports it (81,559 MiB for an H100, 23,034 MiB for an L4).
"""

import pytest

from llminfer import estimate_latency, get_gpu, get_model
from llminfer.cost.latency import decode_batch_table, feasibility, gpu_comparison, prefill_table
from llminfer.units import GB, GiB
from llminfer.widgets import MemoryExplorer, RequestJourney, RooflineExplorer

LLAMA8 = get_model("llama-3.1-8b")
H100 = get_gpu("h100-sxm")


def test_405b_on_one_l4_does_not_fit_and_says_so():
    est = estimate_latency(get_model("llama-3.1-405b"), get_gpu("l4"), 1000, 100)
    assert not est.fits and not est.ideal.fits
    assert "weights (756.0 GiB)" in est.reason and "exceed" in est.reason
    assert "DOES NOT FIT" in str(est)
    # 756 GiB of weights against the 22.49 GiB the L4's driver reports: about 34 times
    assert 756.0 * GiB / get_gpu("l4").memory_bytes == pytest.approx(33.6, abs=0.05)


def test_small_request_fits_with_empty_reason():
    est = estimate_latency(LLAMA8, H100, 1000, 100)
    assert est.fits and est.reason == ""
    assert "FIT" not in str(est)


def test_batch_512_at_1024_tokens_does_not_fit_an_h100():
    # KV: 512 × 1,024 × 128 KiB = 68.7 GB, plus 16.06 GB of weights = 84.8 GB (issue 9)
    kv = 512 * 1024 * 131_072
    assert (kv + LLAMA8.n_params * 2) / GB == pytest.approx(84.8, abs=0.05)
    table = decode_batch_table(LLAMA8, H100, [1, 256, 512], 1024).set_index("batch")
    assert table.loc[1, "fits"] and table.loc[256, "fits"] and not table.loc[512, "fits"]
    assert table.loc[256, "reason"] == ""
    assert "512 request(s)" in table.loc[512, "reason"]
    est = estimate_latency(LLAMA8, H100, 1023, 2, batch=512)
    assert not est.fits


def test_context_longer_than_the_model_does_not_fit():
    reason = feasibility(get_model("falcon-7b"), H100, 131_000, 100)
    assert "131,100 is beyond Falcon-7B's maximum context of 2,048 tokens" in reason
    assert reason.count("maximum context") == 1  # said once (plan_memory's check), not twice
    assert feasibility(get_model("falcon-7b"), H100, 2000, 48) == ""


def test_tables_carry_fits():
    # 70B in FP8: 70.6 GB of weights; an L40S (46,068 MiB, 43.5 GB usable) cannot hold them
    l40s = get_gpu("l40s")
    cmp = gpu_comparison(get_model("llama-3.1-70b"), [l40s, H100], 1000, 10, weight_dtype="fp8")
    assert not cmp.loc[l40s.name, "fits"] and cmp.loc[H100.name, "fits"]
    # in BF16 (141 GB) it does not fit even an H200: 0.9 × 143,771 MiB = 135.7 GB
    bf16 = gpu_comparison(get_model("llama-3.1-70b"), [get_gpu("h200")], 1000, 10)
    assert not bf16["fits"].any()
    pre = prefill_table(LLAMA8, [get_gpu("l4"), H100], [1024])
    assert pre["fits"].tolist() == [True, True]


def test_widgets_show_the_warning():
    journey = RequestJourney(model="llama-3.1-405b", gpu="l4")
    assert "weights" in journey.warning and "Not feasible" in journey._summary.value
    journey.controls["model"].value = "llama-3.1-8b"
    journey.controls["gpu"].value = "h100-sxm"
    assert journey.warning == "" and "Not feasible" not in journey._summary.value
    roof = RooflineExplorer()
    roof.controls["batch"].value = max(roof.controls["batch"].options)
    roof.controls["context_tokens"].value = max(roof.controls["context_tokens"].options)
    assert not roof.result.fits and roof.warning == roof.result.reason
    memory = MemoryExplorer(model="llama-3.1-70b", gpu="l4")
    assert not memory.result.fits and memory.warning == memory.result.reason
