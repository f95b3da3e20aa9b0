"""Production-size logs (issue 16): many files and Parquet, per-source tables, SQL vs pandas,
the streaming summariser vs the in-memory one, percentile selection and id uniqueness.

No timings here: speed is measured as ratios by benchmarks/bench_logs.py.
"""

from __future__ import annotations

import gzip
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from llminfer import read_requests, summarize
from llminfer.logs.grouped import GroupedSummary
from llminfer.logs.logstream import summarize_stream
from llminfer.logs.quantiles import select_percentiles
from llminfer.logs.sql import METRICS_SQL, run_metrics_sql
from llminfer.logs.uniqueness import arrow_ids_unique

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from make_big_log import chunk_table  # noqa: E402

SLO = {"ttft_s": 0.5, "tpot_s": 0.045}


def _frame(seed: int, n: int, offset: int = 0) -> pd.DataFrame:
    table, _ = chunk_table(offset, n, 0.0, np.random.default_rng(seed))
    return table.to_pandas()


@pytest.fixture(scope="module")
def replicas(tmp_path_factory) -> Path:
    """Three replicas: a plain CSV, a gzip CSV and a Parquet file (ids overlap across files)."""
    folder = tmp_path_factory.mktemp("replicas")
    _frame(1, 3000).to_csv(folder / "replica-0.csv", index=False)
    with gzip.open(folder / "replica-1.csv.gz", "wt", encoding="utf-8") as file:
        _frame(2, 2000).to_csv(file, index=False)
    _frame(3, 1000).to_parquet(folder / "replica-2.parquet")
    (folder / "notes.txt").write_text("not a log")
    return folder


def test_directory_reads_csv_gz_and_parquet_with_source(replicas):
    log = read_requests(replicas)
    assert len(log) == 6000
    counts = log.requests["source"].value_counts()
    assert counts.to_dict() == {
        "replica-0.csv": 3000,
        "replica-1.csv.gz": 2000,
        "replica-2.parquet": 1000,
    }
    # Each file's rows equal reading that file alone.
    alone = read_requests(replicas / "replica-2.parquet").requests
    mine = log.requests[log.requests["source"] == "replica-2.parquet"].reset_index(drop=True)
    pd.testing.assert_frame_equal(mine.drop(columns="source"), alone)
    assert (log.requests["status"] == "failed").sum() == sum(
        (_frame(s, n)["status"] == "failed").sum() for s, n in ((1, 3000), (2, 2000), (3, 1000))
    )


def test_glob_reads_only_matching_files(replicas):
    log = read_requests(str(replicas / "*.csv*"))
    assert sorted(log.requests["source"].unique()) == ["replica-0.csv", "replica-1.csv.gz"]
    with pytest.raises(ValueError, match="names no log"):
        read_requests(str(replicas / "*.json"))


def test_rejected_rows_name_their_file(tmp_path):
    good = _frame(4, 10)
    bad = _frame(5, 10)
    bad.loc[3, "end_ts"] = bad.loc[3, "start_ts"] - 1
    good.to_csv(tmp_path / "a.csv", index=False)
    bad.to_csv(tmp_path / "b.csv", index=False)
    with pytest.raises(ValueError, match=r"b\.csv"):
        read_requests(tmp_path)
    log = read_requests(tmp_path, on_error="report")
    assert len(log) == 19
    assert log.rejected[["row", "source"]].drop_duplicates().values.tolist() == [[3, "b.csv"]]


def test_per_source_tables_beside_the_total(replicas):
    log = read_requests(replicas)
    grouped = summarize(log, slo=SLO, by="source")
    assert isinstance(grouped, GroupedSummary)
    assert list(grouped.table.index) == [
        "replica-0.csv",
        "replica-1.csv.gz",
        "replica-2.parquet",
        "total",
    ]
    for name, summary in grouped.groups.items():
        alone = summarize(read_requests(replicas / name), slo=SLO).to_dict()
        assert summary.to_dict() == alone
        assert grouped.table.loc[name, "ttft_s_p99"] == alone["ttft_s_p99"]
    assert grouped.table.loc["total", "n_requests"] == 6000
    assert grouped.total.to_dict() == summarize(log, slo=SLO).to_dict()
    with pytest.raises(ValueError, match="by='replica'"):
        summarize(log, by="replica")


def _agree(mine: dict, theirs: dict, rel_tol: float) -> list[str]:
    return [
        k
        for k in mine
        if k in theirs
        and not (math.isnan(mine[k]) and math.isnan(theirs[k]))
        and not math.isclose(mine[k], theirs[k], rel_tol=rel_tol, abs_tol=0)
    ]


@pytest.mark.parametrize("slo", [None, SLO, {"e2e_s": 10.0}])
def test_sql_agrees_with_pandas(replicas, slo):
    log = read_requests(replicas)
    mine = summarize(log, slo=slo, percentiles=(50, 95, 99.9)).to_dict()
    sql = run_metrics_sql(log, slo=slo, percentiles=(50, 95, 99.9))
    assert set(mine) <= set(sql)
    # DuckDB interpolates as a + (b − a)·t, numpy switches form at t ≥ 0.5: last-bit differences.
    assert _agree(mine, sql, 1e-12) == []
    assert sql["n_requests"] == 6000 and sql["ttft_s_count"] == 6000 - mine["n_failed"]


def test_sql_on_files_and_the_text_is_portable(replicas):
    mine = summarize(read_requests(replicas / "replica-2.parquet")).to_dict()
    assert _agree(mine, run_metrics_sql(replicas / "replica-2.parquet"), 1e-12) == []
    assert "PERCENTILE_CONT(0.99) WITHIN GROUP (ORDER BY ttft_s)" in METRICS_SQL
    assert "FROM requests" in METRICS_SQL


def test_sql_single_token_request_passes_tpot_target():
    frame = pd.DataFrame(
        {
            "request_id": ["a", "b"],
            "start_ts": [0.0, 0.0],
            "first_token_ts": [0.1, 0.1],
            "end_ts": [0.1, 2.1],
            "input_tokens": [5, 5],
            "output_tokens": [1, 3],
        }
    )
    sql = run_metrics_sql(frame, slo={"tpot_s": 0.5})
    assert sql["good_fraction"] == 0.5  # b's TPOT is 1 s; a has no TPOT and passes
    assert sql["good_fraction"] == summarize(frame, slo={"tpot_s": 0.5}).good_fraction


@pytest.mark.parametrize("engine", ["arrow", "duckdb"])
def test_stream_equals_in_memory(replicas, engine):
    for pattern in ("*.parquet", "*.csv*"):
        source = str(replicas / pattern)
        mine = summarize(read_requests(source), slo=SLO, percentiles=(1, 50, 99, 99.9)).to_dict()
        streamed = summarize_stream(
            source, slo=SLO, percentiles=(1, 50, 99, 99.9), engine=engine, batch_rows=777
        ).to_dict()
        assert set(streamed) == set(mine)
        means = [k for k in mine if k.endswith("_mean")]
        # Exact: counts, rates, min, max and every percentile bit for bit; means summed per batch.
        assert {k: streamed[k] for k in mine if k not in means} == {
            k: mine[k] for k in mine if k not in means
        }
        assert _agree({k: mine[k] for k in means}, streamed, 1e-12) == []


def test_stream_rejects_bad_arguments(replicas):
    with pytest.raises(ValueError, match="engine='spark'"):
        summarize_stream(replicas, engine="spark")
    with pytest.raises(ValueError, match="batch_rows=0"):
        summarize_stream(replicas, batch_rows=0)


def test_cli_reads_a_directory_and_streams(replicas):
    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "llminfer", "metrics", *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )

    by = run(str(replicas), "--by", "source")
    assert by.returncode == 0, by.stderr
    assert "replica-1.csv.gz" in by.stdout and "total" in by.stdout
    streamed = run(str(replicas / "*.parquet"), "--stream", "--json")
    assert streamed.returncode == 0, streamed.stderr
    assert '"n_requests": 1000' in streamed.stdout


@pytest.mark.parametrize("n", [1, 2, 3, 10, 101, 4096])
def test_select_percentiles_is_numpy_bit_for_bit(n):
    rng = np.random.default_rng(n)
    values = rng.gamma(2.0, 0.15, n)
    values[::3] = values[0]  # ties
    wanted = [0, 0.1, 33.3, 50, 90, 95, 99, 99.9, 100]
    assert select_percentiles(values, wanted).tolist() == np.percentile(values, wanted).tolist()
    with pytest.raises(ValueError, match="non-empty"):
        select_percentiles(np.array([]), [50])


def test_ids_unique_never_wrongly_true():
    assert arrow_ids_unique(pa.array(["r1", "r2", "r10"])) is True
    assert arrow_ids_unique(pa.array(["r1", "r2", "r1"])) is None
    assert arrow_ids_unique(pa.array(["a\x00", "a"])) is True
    long = ["x" * 40 + str(i) for i in range(1000)]
    assert arrow_ids_unique(pa.array(long)) is True
    assert arrow_ids_unique(pa.array([*long, long[7]])) is None
    sliced = pa.array(["r0", "r1", "r2", "r1"]).slice(0, 3)
    assert arrow_ids_unique(sliced) is True
    # Through read_requests: duplicates are still found after the fast check declines.
    frame = _frame(6, 50)
    frame.loc[7, "request_id"] = frame.loc[3, "request_id"]
    with pytest.raises(ValueError, match="duplicate request_id"):
        read_requests(frame)


def test_ids_unique_padded_slices_and_large_strings(monkeypatch):
    import llminfer.logs.uniqueness as uniqueness

    monkeypatch.setattr(uniqueness, "_PAD_SLICE", 7)  # many slices, one cut mid-array
    ids = [f"req-{i:05d}-replica" for i in range(100)]  # 19 bytes: three words each
    assert arrow_ids_unique(pa.array(ids)) is True
    assert arrow_ids_unique(pa.array(ids, type=pa.large_string())) is True
    assert arrow_ids_unique(pa.array(ids).slice(3, 90)) is True
    assert arrow_ids_unique(pa.array([*ids, ids[50]])) is None
    short = [f"r{i}" for i in range(100)]  # up to 8 bytes: exact keys on the padded path
    assert arrow_ids_unique(pa.array(short)) is True
    assert arrow_ids_unique(pa.array([*short, "r99"])) is None
    # A NUL or a non-ASCII byte takes the gather path; the answer does not change.
    assert arrow_ids_unique(pa.array([*short, "r1\x00"])) is True
    assert arrow_ids_unique(pa.array([*short, "r1é", "r1é"])) is None
    # Chunked, as pyarrow's CSV reader gives them: a duplicate across chunks is still seen.
    chunked = pa.chunked_array([ids[:40], [], ids[40:]])
    assert arrow_ids_unique(chunked) is True
    assert arrow_ids_unique(pa.chunked_array([ids[:40], ids[39:60]])) is None
    assert arrow_ids_unique(pa.chunked_array([short[:50], [*short[50:], "é"]])) is True
    assert arrow_ids_unique(pa.chunked_array([short[:50], [*short[49:], "é"]])) is None


@given(
    # Any text (the gather path), and ASCII-only lists full of near-duplicates (the padded path).
    st.lists(st.text(max_size=20), min_size=2, max_size=60)
    | st.lists(st.text(alphabet="ab", max_size=20), min_size=2, max_size=60),
    st.integers(min_value=0, max_value=3),
)
def test_ids_unique_proof_agrees_with_a_set(ids, cut):
    values = pa.array(ids)[cut:]  # a sliced array starts mid-buffer
    expected = len(set(values.to_pylist())) == len(values)
    proven = arrow_ids_unique(values)
    assert proven is None or (proven is True and expected)
    short = all(len(v.encode()) <= 7 for v in values.to_pylist())
    if expected and short:  # ids of up to 7 bytes get exact keys: always proven
        assert proven is True
