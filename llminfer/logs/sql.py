"""The log metrics as SQL: TTFT, TPOT, E2E, throughput, percentiles and goodput in one query
that llminfer runs on DuckDB and that you can paste into your own warehouse.

The query reads a table ``requests`` in llminfer's schema (``request_id, start_ts,
first_token_ts, end_ts`` in seconds, ``input_tokens, output_tokens``, ``status`` ``'ok'`` or
``'failed'``) and returns one row whose columns are ``summarize``'s keys (``n_requests``,
``rps``, ``ttft_s_p99``, ``goodput_rps`` …). The definitions are chapter 3's and 6's:
``ttft = first_token − start``; ``tpot = (end − first_token)/(output_tokens − 1)`` for more
than one output token (NULL otherwise, so it leaves the TPOT statistics as NaN leaves numpy's);
``e2e = end − start``; the window is first start → last end over every request; rates count
successful requests; latency statistics use successful requests only. Percentiles are
``PERCENTILE_CONT … WITHIN GROUP (ORDER BY …)``, standard SQL (PostgreSQL, Snowflake,
DuckDB; BigQuery spells it ``PERCENTILE_CONT(x, q) OVER ()``): linear interpolation at
``(n − 1)·q``, numpy's default. DuckDB interpolates as ``a + (b − a)·t`` where numpy switches to
``b − (b − a)·(1 − t)`` for ``t ≥ 0.5``, so the two agree to the last bit or two (relative
1e-15), not always bit for bit; ``tests/test_sql.py`` holds them to 1e-12. Goodput reads its
targets from the ``slo`` row at the top; a NULL target is no target.

DuckDB (``duckdb`` on PyPI, MIT, in-process, no server) runs it on a DataFrame, on a
``RequestLog`` or straight on CSV/Parquet files — a directory or glob bigger than memory
included, since DuckDB streams files and spills to disk under ``memory_limit``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from llminfer.logs.schema import RequestLog
from llminfer.runtime import optional

_LATENCY = ("ttft_s", "tpot_s", "e2e_s")


def _number(value: float | None) -> str:
    return "NULL" if value is None else repr(float(value))


def metrics_sql(
    percentiles: Sequence[float] = (50, 90, 95, 99),
    slo: dict[str, float] | None = None,
    table: str = "requests",
) -> str:
    """The metrics query as SQL text over ``table``; ``slo`` targets in seconds (or None).

    ``percentiles`` in percent. The result has one row: ``n_requests, n_failed, window_s, rps,
    output_tps, input_tps, total_tps, goodput_rps, good_fraction`` and ``<metric>_count``,
    ``_mean``, ``_min``, ``_max``, ``_p<q>`` for ``ttft_s``, ``tpot_s``, ``e2e_s``.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    slo = dict(slo or {})
    unknown = set(slo) - set(_LATENCY)
    if unknown:
        raise ValueError(f"slo keys {sorted(unknown)} are not known; use {', '.join(_LATENCY)}")
    for q in percentiles:
        if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0 < q <= 100:
            raise ValueError(f"percentiles contains {q!r}; each must be a number in (0, 100]")
    if not table.replace("_", "").replace(".", "").isalnum():
        raise ValueError(f"table={table!r} must be a plain (optionally dotted) table name")
    ok = "FILTER (WHERE status = 'ok')"
    latency = []
    for metric in _LATENCY:
        latency += [
            f"  COUNT({metric}) {ok} AS {metric}_count",
            f"  AVG({metric}) {ok} AS {metric}_mean",
            f"  MIN({metric}) {ok} AS {metric}_min",
            f"  MAX({metric}) {ok} AS {metric}_max",
        ]
        latency += [
            f"  PERCENTILE_CONT({q / 100!r}) WITHIN GROUP (ORDER BY {metric}) {ok} "
            f'AS "{metric}_p{q:g}"'  # quoted: p99.9 holds a dot
            for q in percentiles
        ]
    targets = ", ".join(f"CAST({_number(slo.get(m))} AS DOUBLE) AS max_{m}" for m in _LATENCY)
    body = ",\n".join(latency)
    return f"""-- llminfer: request-log metrics (TTFT, TPOT, E2E, throughput, percentiles, goodput).
-- Input: {table}(request_id, start_ts, first_token_ts, end_ts [s], input_tokens,
--        output_tokens, status 'ok' | 'failed'). Output: one row, seconds and per second.
WITH slo AS (  -- goodput targets in seconds; NULL = no target
  SELECT {targets}
),
per_request AS (
  SELECT
    status,
    start_ts,
    end_ts,
    input_tokens,
    output_tokens,
    first_token_ts - start_ts AS ttft_s,
    CASE WHEN output_tokens > 1
         THEN (end_ts - first_token_ts) / (output_tokens - 1) END AS tpot_s,
    end_ts - start_ts AS e2e_s
  FROM {table}
),
figures AS (
  SELECT
  COUNT(*) AS n_requests,
  COUNT(*) FILTER (WHERE status <> 'ok') AS n_failed,
  MAX(end_ts) - MIN(start_ts) AS window_s,
  COUNT(*) {ok} AS n_ok,
  SUM(output_tokens) {ok} AS output_tokens,
  SUM(input_tokens) {ok} AS input_tokens,
  COUNT(*) FILTER (WHERE status = 'ok'
    AND (slo.max_ttft_s IS NULL OR ttft_s <= slo.max_ttft_s)
    -- one output token has no TPOT: it passes a TPOT target
    AND (slo.max_tpot_s IS NULL OR tpot_s IS NULL OR tpot_s <= slo.max_tpot_s)
    AND (slo.max_e2e_s IS NULL OR e2e_s <= slo.max_e2e_s)) AS n_good,
  (slo.max_ttft_s IS NOT NULL OR slo.max_tpot_s IS NOT NULL
    OR slo.max_e2e_s IS NOT NULL) AS has_slo,
{body}
  FROM per_request CROSS JOIN slo
  GROUP BY slo.max_ttft_s, slo.max_tpot_s, slo.max_e2e_s
)
SELECT
  n_requests,
  n_failed,
  window_s,
  n_ok / NULLIF(window_s, 0) AS rps,
  output_tokens / NULLIF(window_s, 0) AS output_tps,
  input_tokens / NULLIF(window_s, 0) AS input_tps,
  (output_tokens + input_tokens) / NULLIF(window_s, 0) AS total_tps,
  CASE WHEN has_slo THEN n_good / NULLIF(window_s, 0) END AS goodput_rps,
  CASE WHEN has_slo THEN n_good / NULLIF(CAST(n_requests AS DOUBLE), 0) END AS good_fraction,
  * EXCLUDE (n_requests, n_failed, window_s, n_ok, output_tokens, input_tokens, n_good, has_slo)
FROM figures
"""


#: The query with the default percentiles (50, 90, 95, 99) and no SLO: copy it, set the
#: targets in its ``slo`` row, and run it where your request table lives.
METRICS_SQL = metrics_sql()


def _connect(memory_limit: str | None, threads: int | None):
    duckdb = optional("duckdb", "run_metrics_sql (SQL on DuckDB)")
    connection = duckdb.connect()
    if memory_limit:
        connection.execute(f"SET memory_limit = '{memory_limit}'")
    if threads:
        connection.execute(f"SET threads = {int(threads)}")
    return connection


def _files_relation(source: str | Path) -> str:
    from llminfer.logs.discovery import is_many, log_files

    return _relation(log_files(source)[0] if is_many(source) else [Path(source)], source)


_NUMBER_COLUMNS = ("start_ts", "first_token_ts", "end_ts", "input_tokens", "output_tokens")


def _relation(files: list[Path], source: str | Path) -> str:
    """DuckDB's table function reading ``files`` (all Parquet or all CSV/CSV.gz)."""
    listed = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
    if all(f.suffix in (".parquet", ".pq") for f in files):
        return f"read_parquet([{listed}])"
    if all(f.name.endswith((".csv", ".csv.gz")) for f in files):
        # Numbers as DOUBLE: DuckDB's own inference reads "0x10" as the integer 16.
        numbers = ", ".join(f"'{name}': 'DOUBLE'" for name in _NUMBER_COLUMNS)
        return (
            f"read_csv([{listed}], header = true, types = {{'request_id': 'VARCHAR', {numbers}}})"
        )
    raise ValueError(
        f"source={str(source)!r}: run_metrics_sql reads files of one kind, all Parquet or all "
        "CSV/CSV.gz; read mixed files with read_requests and pass the log"
    )


def run_metrics_sql(
    source: RequestLog | pd.DataFrame | str | Path,
    percentiles: Sequence[float] = (50, 90, 95, 99),
    slo: dict[str, float] | None = None,
    memory_limit: str | None = None,
    threads: int | None = None,
) -> dict[str, float]:
    """Run ``metrics_sql`` on DuckDB: on a log, a DataFrame, or CSV/Parquet files on disk.

    Files (one path, a directory or a glob, all Parquet or all CSV/CSV.gz) are read by DuckDB
    itself, streamed, without llminfer's row checks; a missing ``status`` column counts every
    request as ok. ``memory_limit`` (e.g. ``"4GB"``) caps DuckDB's memory. Returns
    ``summarize``'s keys (seconds, per second); NaN where a figure is undefined.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    pa = optional("pyarrow", "run_metrics_sql (a log handed to DuckDB as an Arrow table)")

    query = metrics_sql(percentiles, slo, table="requests")
    connection = _connect(memory_limit, threads)
    try:
        if isinstance(source, (RequestLog, pd.DataFrame)):
            frame = source.requests if isinstance(source, RequestLog) else source
            columns = [
                c
                for c in (
                    "request_id",
                    "start_ts",
                    "first_token_ts",
                    "end_ts",
                    "input_tokens",
                    "output_tokens",
                    "status",
                )
                if c in frame.columns
            ]
            # from_pandas turns NaN (a failed request's missing time) into SQL NULL.
            table = pa.Table.from_pandas(frame[columns], preserve_index=False)
            if "status" in table.column_names:
                table = table.set_column(
                    table.column_names.index("status"), "status", table["status"].cast(pa.string())
                )
            connection.register("requests_input", table)
            relation = "requests_input"
        elif isinstance(source, (str, Path)):
            relation = _files_relation(source)
        else:
            raise ValueError(
                f"source must be a RequestLog, a DataFrame or a path, not {type(source).__name__}"
            )
        names = [d[0] for d in connection.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()]
        status = "status" if "status" in names else "'ok' AS status"
        connection.execute(
            f"CREATE TEMP VIEW requests AS SELECT start_ts, first_token_ts, end_ts, "
            f"input_tokens, output_tokens, {status} FROM {relation}"
        )
        cursor = connection.execute(query)
        row = cursor.fetchone()
        keys = [d[0] for d in cursor.description]
    finally:
        connection.close()
    return {k: (np.nan if v is None else float(v)) for k, v in zip(keys, row, strict=True)}
