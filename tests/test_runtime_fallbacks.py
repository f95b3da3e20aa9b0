"""Where there are no threads, processes or mmap (Pyodide, the JupyterLite site), llminfer does
the same work serially or with plain reads: each fallback, run natively, gives what the native
path gives (issue 26). Small inputs: the whole file runs in a few seconds."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from llminfer import read_requests, runtime
from llminfer.diagnose import diagnose
from llminfer.diagnose import observations as obs
from llminfer.logs import logfile

DATA = Path(__file__).resolve().parent.parent / "data"


def test_this_machine_can_do_all_three_and_the_emulation_none(monkeypatch):
    monkeypatch.delenv(runtime.EMULATE_ENV, raising=False)
    assert sys.platform != "emscripten"
    assert runtime.can_use_threads() and runtime.can_use_processes() and runtime.can_mmap()
    assert not runtime.in_pyodide()
    monkeypatch.setenv(runtime.EMULATE_ENV, "1")
    assert runtime.in_pyodide() and runtime.emulating_pyodide()
    assert not (runtime.can_use_threads() or runtime.can_use_processes() or runtime.can_mmap())
    monkeypatch.setenv(runtime.EMULATE_ENV, "0")
    assert not runtime.emulating_pyodide()


def test_pyodide_is_recognised_by_its_platform(monkeypatch):
    monkeypatch.delenv(runtime.EMULATE_ENV, raising=False)
    for probe in (runtime._threads_work, runtime._processes_work, runtime._mmap_works):
        probe.cache_clear()
    monkeypatch.setattr(sys, "platform", "emscripten")
    try:
        assert runtime.in_pyodide()
        assert not (runtime.can_use_threads() or runtime.can_use_processes())
        assert not runtime.can_mmap()
    finally:
        monkeypatch.undo()
        for probe in (runtime._threads_work, runtime._processes_work, runtime._mmap_works):
            probe.cache_clear()
    assert runtime.can_mmap()


@pytest.mark.parametrize(
    "content",
    [
        *(b"", b"a,b\n1,2\n", b'"', b'a,b\n1,"2"\n', b"x" * 300 + b'"', b"y" * 1000),
        *(b"a" * 6 + b"0x1", b"a" * 13 + b"0X", b"0", b"x0" * 50, b"1,0x10\n"),
    ],
)
def test_scans_without_mmap_are_the_mapped_ones(tmp_path, monkeypatch, content):
    monkeypatch.setattr(logfile, "_SCAN_BLOCK", 7)  # many blocks, needles across boundaries
    path = tmp_path / "log.csv"
    path.write_bytes(content)
    quote, hexa = b'"' in content, b"0x" in content or b"0X" in content
    for use_mmap in (False, True) if content else (False,):
        assert logfile._has_quote(path, use_mmap=use_mmap) is quote
        assert logfile._has_hex(path, use_mmap=use_mmap) is hexa


@pytest.mark.parametrize("name", ["requests.csv", "requests_realistic.csv", "requests_bad.csv"])
def test_a_log_reads_the_same_without_mmap(monkeypatch, name):
    monkeypatch.delenv(runtime.EMULATE_ENV, raising=False)
    native = read_requests(DATA / name, on_error="report")
    monkeypatch.setenv(runtime.EMULATE_ENV, "1")
    emulated = read_requests(DATA / name, on_error="report")
    pd.testing.assert_frame_equal(native.requests, emulated.requests)
    pd.testing.assert_frame_equal(native.rejected, emulated.rejected)


def test_the_serial_pool_does_what_the_thread_pool_does():
    pool = obs._pool(threads=False)
    assert isinstance(pool, obs._SerialPool)
    with pool:
        assert pool.map(lambda a, b: a + b, [1, 2], [10, 20]) == [11, 22]
        assert pool.submit(sum, [1, 2, 3]).result() == 6
        failed = pool.submit(lambda: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            failed.result()


def _same(a, b) -> None:
    if isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b)
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b)
    else:
        assert a == b


@pytest.mark.parametrize("case", ["case_busy.csv", "case_prefill_interference.csv"])
def test_diagnose_without_threads_is_diagnose_with_them(monkeypatch, case):
    log = read_requests(DATA / case)
    monkeypatch.delenv(runtime.EMULATE_ENV, raising=False)
    threaded = diagnose(log)
    pools: list = []
    real_pool = obs._pool
    monkeypatch.setenv(runtime.EMULATE_ENV, "1")
    monkeypatch.setattr(obs, "_pool", lambda: pools.append(real_pool()) or pools[-1])
    serial = diagnose(log)
    assert pools and all(isinstance(p, obs._SerialPool) for p in pools)
    assert (serial.verdict, serial.cause, serial.headline) == (
        threaded.verdict,
        threaded.cause,
        threaded.headline,
    )
    assert str(serial) == str(threaded)
    a, b = threaded.findings, serial.findings
    assert [f.step for f in a] == [f.step for f in b]
    for x, y in zip(a, b, strict=True):
        assert x == y or repr(x) == repr(y)


def test_no_worker_processes_where_there_can_be_none(monkeypatch):
    from llminfer.widgets import _prefetch

    class Shell:
        kernel = object()

    import IPython

    monkeypatch.delenv("LLMINFER_PREFETCH", raising=False)
    monkeypatch.setattr(IPython, "get_ipython", lambda: Shell())
    monkeypatch.delenv(runtime.EMULATE_ENV, raising=False)
    assert _prefetch.enabled()  # "in a kernel", with processes: pictures made ahead
    monkeypatch.setenv(runtime.EMULATE_ENV, "1")
    assert not _prefetch.enabled()  # no processes: every picture drawn in the kernel


@pytest.fixture
def without(monkeypatch):
    """Make packages unimportable, as in a Pyodide without them (None in sys.modules)."""

    def block(*names: str) -> None:
        for name in list(sys.modules):
            if name.split(".")[0] in names:
                monkeypatch.delitem(sys.modules, name)
        for name in names:
            monkeypatch.setitem(sys.modules, name, None)

    return block


def test_sql_without_duckdb_names_the_feature_and_the_package(without):
    from llminfer.logs.sql import metrics_sql, run_metrics_sql

    without("duckdb")
    assert "SELECT" in metrics_sql()  # the query text needs nothing
    with pytest.raises(ImportError, match=r"run_metrics_sql .*duckdb.*pip install duckdb"):
        run_metrics_sql(DATA / "replicas")


def test_streaming_without_pyarrow_names_the_feature_and_the_package(without):
    from llminfer.logs.logstream import summarize_stream

    without("duckdb")
    with pytest.raises(ImportError, match=r"summarize_stream\(engine='duckdb'\).*duckdb"):
        summarize_stream(DATA / "replicas", engine="duckdb")
    without("pyarrow")
    for engine in ("arrow", "duckdb"):
        with pytest.raises(ImportError, match=r"summarize_stream.*pip install pyarrow"):
            summarize_stream(DATA / "replicas", engine=engine)


def test_a_log_reads_the_same_without_pyarrow(without):
    native = read_requests(DATA / "requests_realistic.csv")
    without("pyarrow")
    plain = read_requests(DATA / "requests_realistic.csv")
    # The same values; the ids' string storage may differ (Arrow's or Python's).
    pd.testing.assert_frame_equal(
        native.requests.astype({"request_id": object}),
        plain.requests.astype({"request_id": object}),
    )
