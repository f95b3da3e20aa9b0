"""Logs bigger than memory: exact summaries of a directory or glob of Parquet/CSV files, streamed
in batches, in memory that does not grow with the log.

``summarize_stream`` reads the files twice, a batch (default 2**20 rows) at a time:

1. every count, sum, minimum, maximum and goodput count, plus, for TTFT, TPOT and E2E, a
   histogram of each value's top 20 bits (its sign, exponent and 8 mantissa bits, as an
   order-preserving integer): 2**20 counters per metric, 8 MiB;
2. only the values that fall in the few histogram bins holding a wanted rank (two per
   percentile) are kept; sorting those finds the exact order statistics.

So the percentiles are exact — the same order statistics and numpy's own interpolation
(``llminfer.logs.quantiles``), bit-for-bit ``summarize``'s — in memory set by the batch size and
the bins, never by the number of requests. Means are summed per batch, so they can differ
from numpy's pairwise sum in the last bits (relative 1e-15).

The batches come from an embedded engine. Both candidates were measured on the same 3 M-row
Parquet log (3 files) in one run (``benchmarks/bench_stream.py``, busy 2-core machine):
pyarrow's dataset scanner 7.2 s, peak 0.67 GiB; DuckDB (``to_arrow_reader``) 13.8 s, peak
0.63 GiB; identical summaries. pyarrow's scanner is the default: already a dependency, it hands
numpy columns over without a copy and was 1.9× faster at about the same memory; DuckDB
(``engine="duckdb"``) stays for the SQL path (``llminfer.logs.sql``) and as a cross-check.
Rows are not validated here (that needs the whole log): run ``read_requests`` on a sample.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from llminfer.logs.quantiles import percentile_ranks, percentiles_from_ranks
from llminfer.runtime import optional

ENGINES = ("arrow", "duckdb")
_COLUMNS = ("start_ts", "first_token_ts", "end_ts", "input_tokens", "output_tokens")
_TIME_COLUMNS = _COLUMNS[:3]
_METRICS = ("ttft_s", "tpot_s", "e2e_s")
_BIN_BITS = 20
_SIGN = np.uint64(1 << 63)
_SHIFT = np.uint64(64 - _BIN_BITS)


def _keys(values: np.ndarray) -> np.ndarray:
    """Order-preserving unsigned integers of float64 values (IEEE-754 bit trick)."""
    bits = values.view(np.uint64)
    return np.where(bits & _SIGN, ~bits, bits | _SIGN)


def _files(source) -> list[Path]:
    from llminfer.logs.discovery import is_many, log_files

    if isinstance(source, (list, tuple)):
        files = [Path(p) for p in source]
    elif is_many(source):
        files = log_files(source)[0]
    else:
        files = [Path(source)]
    from llminfer.logs.logfile import is_structured

    for f in files:
        if not f.is_file():
            raise ValueError(f"source: {str(f)!r} is no such file")
        if f.stat().st_size == 0:
            raise ValueError(f"source={str(f)!r} is empty (0 bytes)")
        if f.suffix not in (".parquet", ".pq") and is_structured(f):
            raise ValueError(
                f"source={str(f)!r} is not a CSV or Parquet table (JSON?): --stream reads "
                "request-log tables only; read a tool's export without --stream"
            )
    return files


def _column(batch, name: str, scale: float, files: list[Path]) -> np.ndarray:
    """One numeric column of a batch as float64: timestamps and durations by the unit their
    type declares (seconds), plain numbers times ``scale``; text, booleans and lists refused."""
    import pyarrow as pa

    column = batch.column(name)
    kind = column.type
    if pa.types.is_timestamp(kind) or pa.types.is_duration(kind):
        unit = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}[kind.unit]
        values = column.cast(pa.int64()).to_numpy(zero_copy_only=False).astype(float)
        return values * unit
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_null(kind)):
        valid = column.drop_null()
        example = f" (e.g. {str(valid[0])[:40]!r})" if len(valid) else ""
        where = str(files[0]) if len(files) == 1 else f"{len(files)} files from {files[0]}"
        raise ValueError(
            f"source={where!r}: column {name} is stored as {kind}{example}, not as numbers; "
            "--stream does not validate rows: read the log without --stream to see each bad row"
        )
    values = column.to_numpy(zero_copy_only=False).astype(float, copy=False)
    return values * scale if scale != 1.0 and name in _TIME_COLUMNS else values


def _batches(
    files: list[Path], engine: str, batch_rows: int, scale: float = 1.0
) -> Iterator[dict[str, np.ndarray]]:
    """Yield dicts of numpy columns (the five numeric ones, ``ok`` and ``file``: the batch's
    file, an index into ``files``), batch by batch, one file after the other."""
    for index, file in enumerate(files):
        for batch in _readable(_engine_batches([file], engine, batch_rows, scale), [file]):
            batch["file"] = index
            yield batch


def _engine_batches(
    files: list[Path], engine: str, batch_rows: int, scale: float
) -> Iterator[dict[str, np.ndarray]]:
    parquet = all(f.suffix in (".parquet", ".pq") for f in files)
    if engine == "arrow":
        ds = optional("pyarrow.dataset", "summarize_stream(engine='arrow')")

        if parquet:
            form = "parquet"
        else:
            import pyarrow as pa
            from pyarrow import csv as pa_csv

            # Numbers parsed as float64: pyarrow's int64 inference reads "0x10" as 16.
            form = ds.CsvFileFormat(
                convert_options=pa_csv.ConvertOptions(
                    column_types={name: pa.float64() for name in _COLUMNS}
                )
            )
        dataset = ds.dataset([str(f) for f in files], format=form)
        names = dataset.schema.names
        missing = [name for name in _COLUMNS if name not in names]
        if missing:
            raise ValueError(
                f"source={str(files[0])!r}: the log lacks column(s) {', '.join(missing)}; a "
                f"request log needs request_id, {', '.join(_COLUMNS)}"
            )
        columns = [*_COLUMNS, *(["status"] if "status" in names else [])]
        reader = dataset.to_batches(columns=columns, batch_size=batch_rows)
    else:
        from llminfer.logs.sql import _relation

        duckdb = optional("duckdb", "summarize_stream(engine='duckdb')")

        connection = duckdb.connect()
        relation = _relation(files, files[0])
        names = [d[0] for d in connection.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()]
        columns = [*_COLUMNS, *(["status"] if "status" in names else [])]
        query = f"SELECT {', '.join(columns)} FROM {relation}"
        reader = connection.sql(query).to_arrow_reader(batch_rows)
    for batch in reader:
        out = {name: _column(batch, name, scale, files) for name in _COLUMNS}
        if "status" in columns:
            status = batch.column("status").to_numpy(zero_copy_only=False)
            out["ok"] = status == "ok"
        else:
            out["ok"] = np.ones(batch.num_rows, dtype=bool)
        yield out


def _readable(reader, files: list[Path]):
    """The reader's batches; a cell the engine cannot parse is one ValueError naming the files."""
    pa = optional("pyarrow", "summarize_stream (either engine reads Arrow batches)")

    try:
        yield from reader
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError) as exc:
        where = str(files[0]) if len(files) == 1 else f"{len(files)} files from {files[0]}"
        # pyarrow names the file twice before its reason ("Invalid: In CSV column #4: …").
        text = " ".join(str(exc).split()).split("Invalid: ")[-1].split("IOError: ")[-1][:300]
        raise ValueError(
            f"source={where!r} cannot be streamed: {text}; --stream does not validate rows: "
            "read the log without --stream to see each bad row"
        ) from None
    except Exception as exc:  # DuckDB's own errors
        if type(exc).__module__.split(".")[0].lstrip("_") != "duckdb":
            raise
        text = " ".join(str(exc).split())[:300]
        raise ValueError(f"source={str(files[0])!r} cannot be streamed: {text}") from None


def _metrics(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    start, first, end = batch["start_ts"], batch["first_token_ts"], batch["end_ts"]
    tokens = batch["output_tokens"]
    decode = end - first
    tpot = np.divide(decode, tokens - 1, out=np.full(decode.shape, np.nan), where=tokens > 1)
    return {"ttft_s": first - start, "tpot_s": tpot, "e2e_s": end - start}


@dataclass
class _Tally:
    count: int = 0
    total: float = 0.0
    low: float = np.inf
    high: float = -np.inf
    bins: np.ndarray = field(default_factory=lambda: np.zeros(1 << _BIN_BITS, dtype=np.int64))


def summarize_stream(
    source,
    percentiles: Sequence[float] = (50, 90, 95, 99),
    slo: dict[str, float] | None = None,
    engine: str = "arrow",
    batch_rows: int = 1 << 20,
    progress: bool | None = None,
    time_unit: str | None = None,
):
    """Summarise a log too big for memory, exactly: a ``Summary`` like ``summarize``'s.

    ``source``: a Parquet or CSV file, a directory or glob of them, or a list of paths (all
    Parquet or all CSV). ``engine``: ``"arrow"`` (pyarrow's dataset scanner, default) or
    ``"duckdb"``. ``batch_rows`` rows are held at a time. ``progress``: a tqdm bar per pass
    (default: on when the log has more than 10 M rows). The table has TTFT, TPOT and E2E
    (seconds); rows are not validated (use ``read_requests`` on a sample for that), but the
    times are: ``time_unit`` as in ``read_requests`` (None: seconds, refused when implausible
    by ``TIME_UNIT_RULE``; Arrow timestamps and durations by their declared unit), and a
    number column stored as text is refused.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    from llminfer.logs.summary import (
        _check_percentiles,
        _check_slo,
        _good,
        _stat_key,
        _summary_from_counts,
    )

    if engine not in ENGINES:
        raise ValueError(f"engine={engine!r} is not known; use one of {', '.join(ENGINES)}")
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, int) or batch_rows < 1:
        raise ValueError(f"batch_rows={batch_rows!r} must be a positive whole number")
    from llminfer.logs.timeunits import (
        MAX_MEDIAN_E2E_S,
        MAX_MEDIAN_TPOT_S,
        MAX_TIMESTAMP_S,
        time_scale,
        unit_error,
    )

    scale = time_scale(time_unit)
    percentiles = _check_percentiles(percentiles)
    slo = _check_slo(slo)
    files = _files(source)
    total_rows = _count_rows(files)
    if progress is None:
        progress = total_rows is not None and total_rows > 10_000_000

    def passes(label: str):
        batches = _batches(files, engine, batch_rows, scale)
        if not progress:
            return batches
        from tqdm.auto import tqdm

        return _with_bar(batches, tqdm(total=total_rows, unit="req", desc=label))

    tallies = {m: _Tally() for m in _METRICS}
    n_requests = n_ok = n_good = 0
    first_start, last_end = np.inf, -np.inf
    output_tokens = input_tokens = 0.0
    # For TIME_UNIT_RULE, file by file: the largest time, TPOTs and E2Es (counted, above limit).
    largest = np.zeros(len(files))
    unit_counts = np.zeros((len(files), 4), dtype=np.int64)
    for batch in passes("pass 1/2"):
        ok = batch["ok"]
        file = batch["file"]
        for name in _TIME_COLUMNS:
            if batch[name].size:
                top = float(np.nanmax(np.abs(batch[name]), initial=0.0))
                largest[file] = max(largest[file], top)
        n_requests += ok.size
        n_ok += int(ok.sum())
        if ok.size:
            first_start = min(first_start, float(np.nanmin(batch["start_ts"])))
            if np.isfinite(batch["end_ts"]).any():
                last_end = max(last_end, float(np.nanmax(batch["end_ts"])))
        output_tokens += float(batch["output_tokens"][ok].sum())
        input_tokens += float(batch["input_tokens"][ok].sum())
        metrics = _metrics(batch)
        with np.errstate(invalid="ignore"):
            for column, (name, limit) in enumerate(
                (("tpot_s", MAX_MEDIAN_TPOT_S), ("e2e_s", MAX_MEDIAN_E2E_S))
            ):
                known = ok & np.isfinite(metrics[name])
                unit_counts[file, 2 * column] += int(np.count_nonzero(known))
                unit_counts[file, 2 * column + 1] += int(
                    np.count_nonzero(known & (metrics[name] > limit))
                )
        if slo is not None:
            n_good += int(_good(metrics, ok, slo).sum())
        for name, tally in tallies.items():
            values = metrics[name][ok]
            values = values[~np.isnan(values)]
            if values.size:
                tally.count += values.size
                tally.total += float(values.sum())
                tally.low = min(tally.low, float(values.min()))
                tally.high = max(tally.high, float(values.max()))
                tally.bins += np.bincount(_keys(values) >> _SHIFT, minlength=tally.bins.size)

    if time_unit is None:  # every file on its own, as read_requests checks them
        for file, top, (tpot_n, tpot_above, e2e_n, e2e_above) in zip(
            files, largest, unit_counts, strict=True
        ):
            if top > MAX_TIMESTAMP_S:
                raise unit_error(str(file), f"a timestamp of {top:.6g} s")
            if tpot_above * 2 > tpot_n:
                raise unit_error(str(file), "more than half of its TPOTs are above 2 s per token")
            if e2e_above * 2 > e2e_n:
                raise unit_error(str(file), "more than half of its E2E latencies are above 3600 s")

    # Pass 2: keep only values in the bins holding a wanted rank.
    wanted: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
    for name, tally in tallies.items():
        if tally.count:
            lower, weights = percentile_ranks(tally.count, percentiles)
            upper = np.minimum(lower + 1, tally.count - 1)
            ends = np.cumsum(tally.bins)
            ranks = np.unique(np.concatenate([lower, upper]))
            bins = np.unique(np.searchsorted(ends, ranks, side="right"))
            wanted[name] = (lower, upper, weights, bins)
    kept: dict[str, list[np.ndarray]] = {name: [] for name in wanted}
    if wanted:
        for batch in passes("pass 2/2"):
            metrics = _metrics(batch)
            for name, (_, _, _, bins) in wanted.items():
                values = metrics[name][batch["ok"]]
                values = values[~np.isnan(values)]
                kept[name].append(values[np.isin(_keys(values) >> _SHIFT, bins)])

    window = last_end - first_start if n_requests and np.isfinite(last_end) else float("nan")

    stats = ["count", "mean", "min", "max", *[_stat_key(q) for q in percentiles]]
    rows = []
    for name in _METRICS:
        tally = tallies[name]
        if name not in wanted:
            rows.append([0] + [np.nan] * (len(stats) - 1))
            continue
        lower, upper, weights, bins = wanted[name]
        chosen = np.sort(np.concatenate(kept[name]))
        # The rank of chosen[0] in the whole log: every value in a lower bin comes before it.
        before = np.concatenate([[0], np.cumsum(tally.bins)])
        bin_of = (_keys(chosen) >> _SHIFT).astype(np.int64)
        offset = before[bin_of] + (np.arange(chosen.size) - np.searchsorted(bin_of, bin_of))

        def at(ranks: np.ndarray, chosen=chosen, offset=offset) -> np.ndarray:
            return chosen[np.searchsorted(offset, ranks)]

        values = percentiles_from_ranks(at(lower), at(upper), weights)
        rows.append([tally.count, tally.total / tally.count, tally.low, tally.high, *values])
    table = pd.DataFrame(
        rows, index=pd.Index(list(_METRICS), name="metric"), columns=stats, dtype=float
    )
    return _summary_from_counts(
        n_requests=n_requests,
        n_ok=n_ok,
        n_good=n_good,
        window=window,
        output_tokens=output_tokens,
        input_tokens=input_tokens,
        table=table,
        percentiles=percentiles,
        slo=slo,
    )


def _count_rows(files: list[Path]) -> int | None:
    """Rows in Parquet files from their footers (no data read); None for CSV."""
    if not all(f.suffix in (".parquet", ".pq") for f in files):
        return None
    pq = optional("pyarrow.parquet", "summarize_stream on Parquet files")
    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)


def _with_bar(batches, bar):
    with bar:
        for batch in batches:
            yield batch
            bar.update(len(batch["ok"]))
