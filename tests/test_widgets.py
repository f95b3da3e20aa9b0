"""Widgets driven without a kernel: set a control, assert on the result."""

import pytest

from llminfer import get_model, kv_bytes_per_token
from llminfer.widgets import MemoryExplorer


def test_memory_explorer_follows_its_controls():
    w = MemoryExplorer()
    assert w.result.fits and w.figure is not None and w.error is None
    w.controls["model"].value = "falcon-7b"
    assert w.result.kv_bytes_per_token == 8192
    w.controls["model"].value = "llama-3.1-70b"
    assert not w.result.fits and "exceed" in w.result.reason
    w.controls["n_gpus"].value = 4
    assert w.result.fits
    w.controls["kv_dtype"].value = "fp8"
    assert w.result.kv_bytes_per_token == kv_bytes_per_token(
        get_model("llama-3.1-70b"), "fp8", tp=4
    )
    w.controls["concurrency"].value = w.controls["concurrency"].max
    w.controls["context_tokens"].value = w.controls["context_tokens"].options[-1]
    assert not w.result.fits and "short by" in w.result.reason


def test_memory_explorer_shows_an_error_instead_of_raising():
    w = MemoryExplorer(gpu="m3-max")
    w.compute = lambda **_: (_ for _ in ()).throw(ValueError("n_gpus=3 is bad"))
    w.update()
    assert w.result is None and w.error == "n_gpus=3 is bad" and "n_gpus=3" in w._summary.value


def test_slo_explorer_follows_its_controls():
    from pathlib import Path

    from llminfer import read_requests
    from llminfer.widgets import SLOExplorer

    log = read_requests(Path(__file__).parent.parent / "data" / "requests.csv")
    w = SLOExplorer(log, ttft_ms=500, tpot_ms=50, e2e_s=30)
    assert w.result.good_fraction == pytest.approx(2 / 3)  # r2's TTFT is 560 ms
    w.controls["ttft_ms"].value = 600
    assert w.result.good_fraction == 1.0 and w.figure is not None
    w.controls["e2e_s"].value = 3
    assert w.result.good_fraction == pytest.approx(1 / 3)  # only r3 ends within 3 s
    assert w.result.goodput_rps == pytest.approx(1 / 4.36)
