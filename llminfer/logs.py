"""Chapter 6's request log: read a per-request log (the article's CSV, a DataFrame, or another
benchmark tool's export) into one schema, and never drop a row silently.

The schema (times in seconds on any one clock, token counts as integers):

``request_id, start_ts, first_token_ts, end_ts, input_tokens, output_tokens``
    the article's columns (``ARTICLE_COLUMNS``), one row per request.
``status``
    ``"ok"`` or ``"failed"``. Always present after loading: a request is failed when its
    ``status`` says so (``failed``/``failure``/``error``/``cancelled``) or its ``error`` text is
    non-empty. A blank status (missing, empty or only spaces) means "not stated": ok unless
    ``error`` has text. Failed requests stay in the log — counted, excluded from latency
    statistics — and may lack ``first_token_ts``, ``end_ts`` and token counts (missing counts
    load as 0).
``error``
    optional free text, why a request failed.
``scheduled_ts``
    optional, when the engine started the request's prefill (start ≤ scheduled ≤ first token);
    splits TTFT into queueing and prefill.
``token_ts``
    optional, per request a 1-D float array of absolute times (s), one entry per streamed chunk
    that carried output, in order; the first entry is the first token. Benchmark tools record
    chunks, not tokens, so a chunk may carry several tokens.
``chunk_tokens``
    optional, per request an integer array parallel to ``token_ts``: tokens in each chunk
    (absent means one token per chunk).

``request_id`` is text exactly as written: ``NA``, ``null`` and ``007`` are ids; a blank id is
missing. Times are seconds unless ``time_unit`` says otherwise (``TIME_UNIT_RULE``). How a CSV
file is decoded (compression, encoding, delimiter) and where its rows lie is ``llminfer.logfile``.

Any other column is kept as it is (a simulator may add ``preemptions``, ``cached_prefix_tokens``).
The importers for vLLM, SGLang, AIPerf, GenAI-Perf, llmperf and GuideLLM exports live in
``llminfer.importers`` (one module per tool).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from llminfer import logfile

#: The article's columns, in its order: every log has them.
ARTICLE_COLUMNS = (
    "request_id",
    "start_ts",
    "first_token_ts",
    "end_ts",
    "input_tokens",
    "output_tokens",
)
#: Optional columns with a meaning (see the module docstring); others are kept untouched.
OPTIONAL_COLUMNS = ("status", "error", "scheduled_ts", "token_ts", "chunk_tokens")
#: Formats ``read_requests`` understands (``"auto"`` picks one from the file).
FORMATS = (
    "auto",
    "csv",
    "parquet",
    "dataframe",
    "vllm",
    "sglang",
    "genai-perf",
    "aiperf",
    "llmperf",
    "guidellm",
)
ON_ERROR = ("raise", "report")

_TIME_COLUMNS = ("start_ts", "first_token_ts", "end_ts")
_TOKEN_COLUMNS = ("input_tokens", "output_tokens")
_OK_WORDS = {"ok", "success", "succeeded", "completed", "true"}
_FAILED_WORDS = {"failed", "failure", "fail", "error", "cancelled", "canceled", "false"}
REJECTED_COLUMNS = ("row", "column", "value", "reason")
#: Largest token count accepted: beyond 2**53 a float no longer holds every whole number (and
#: no model reads that many tokens), so larger counts are reported, not silently rounded.
MAX_TOKENS = 2**53
_SHOWN = 5  # rejected rows a message shows
#: The dtype pandas gives text (``str`` from pandas 3 on, ``object`` before).
_TEXT_DTYPE = pd.Series(["text"]).dtype


@dataclass(frozen=True)
class LogSource:
    """Where a log came from: its format, the path (if any) and every assumption made.

    ``window_s``: the run's duration as the tool measured it (s), used by ``summarize`` for the
    rates instead of first start → last end; None when the tool gave none. ``starts_known``:
    False when the export holds no request start times (every ``start_ts`` is then 0): latencies
    are exact, but arrivals, load over time and queueing can't be told.

    Introduced in: notebooks/06_log_analysis.ipynb
    """

    format: str
    path: str | None = None
    assumptions: tuple[str, ...] = ()
    window_s: float | None = None
    starts_known: bool = True

    def __str__(self) -> str:
        where = f" from {self.path}" if self.path else ""
        said = "".join(f"\n  assumed: {a}" for a in self.assumptions)
        return f"{self.format} log{where}{said}"


@dataclass
class RequestLog:
    """A validated request log.

    ``requests``: one row per loaded request (failed ones included), the schema above.
    ``rejected``: one row per problem found — ``row`` (0-based position in the input),
    ``column``, ``value`` (as text) and ``reason``; those rows are not in ``requests``.
    ``source``: a ``LogSource`` saying the format and what was assumed.

    Introduced in: notebooks/06_log_analysis.ipynb
    """

    requests: pd.DataFrame
    rejected: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=REJECTED_COLUMNS))
    source: LogSource = field(default_factory=lambda: LogSource("dataframe"))

    def __len__(self) -> int:
        return len(self.requests)

    @property
    def n_failed(self) -> int:
        """Requests that loaded but failed (their status is ``"failed"``)."""
        return int((self.requests["status"] == "failed").sum())

    @property
    def ok(self) -> pd.DataFrame:
        """Only the successful requests — the ones latency statistics use."""
        return self.requests[self.requests["status"] == "ok"]

    def __repr__(self) -> str:
        return (
            f"RequestLog({len(self)} requests, {self.n_failed} failed, "
            f"{self.rejected['row'].nunique() if len(self.rejected) else 0} rows rejected; "
            f"{self.source})"
        )


class LogError(ValueError):
    """A log that cannot be read as asked; the message ends with what to do, worded for the
    Python API (``str(error)``) or for the command line (``error.cli_message()``).

    Introduced in: notebooks/06_log_analysis.ipynb
    """

    def __init__(self, message: str, api_hint: str = "", cli_hint: str = "") -> None:
        super().__init__(message)
        self._message, self.api_hint, self.cli_hint = message, api_hint, cli_hint

    @property
    def message(self) -> str:
        """What is wrong, without the hint."""
        return self._message

    def __str__(self) -> str:
        return self.message + self.api_hint

    def cli_message(self) -> str:
        """The message with the command line's option names (``--on-error report``)."""
        return self.message + (self.cli_hint or self.api_hint)


class BadRowsError(LogError):
    """Rows that failed validation while ``on_error="raise"``: ``.rejected`` lists every
    problem (the ``RequestLog.rejected`` columns); ``.lines`` maps a row to its file line
    where the source is a CSV file.

    Introduced in: notebooks/06_log_analysis.ipynb
    """

    def __init__(self, rejected: pd.DataFrame, source: LogSource) -> None:
        self.rejected, self.source = rejected, source
        self.lines: dict[int, int] = {}
        super().__init__(
            "",
            ". Pass on_error='report' to load the valid rows and get every rejected row with its "
            "reason.",
            ". Run again with --on-error report to load the valid rows and count the rejected "
            "ones by reason (--rejected FILE writes every one).",
        )

    @property
    def message(self) -> str:  # built on demand: .lines is filled in after construction
        return _describe(self.rejected, self.source, self.lines)


def read_requests(
    source: str | Path | pd.DataFrame,
    format: str = "auto",
    on_error: str = "raise",
    time_unit: str | None = None,
) -> RequestLog:
    """Read a request log from a CSV path, a DataFrame or another tool's export.

    ``source`` may also be a directory or a glob of CSV, CSV.gz or Parquet files (one replica or
    one hour each): they load as one log with a ``source`` column naming each request's file
    (``llminfer.logsets``).

    ``format``: ``"auto"`` (recognised by the file's content, plain or compressed), or one of
    ``csv``, ``parquet``, ``dataframe``, ``vllm``, ``sglang``, ``genai-perf``, ``aiperf``,
    ``llmperf``, ``guidellm``. A tool's problems raise a ValueError naming file, record and
    field; a summary-only file says so (read it with ``llminfer.read_summary``). Bad rows
    (missing or non-numeric values, NaN, negative or fractional token counts, start > first
    token > end out of order, duplicate ids) raise a ``BadRowsError`` (a ValueError) naming
    row, file line, column and value; with ``on_error="report"`` the valid rows load and
    ``.rejected`` lists every problem. Times in seconds, token counts as integers.

    ``time_unit``: the unit of the times in a CSV or DataFrame log, ``"s"``, ``"ms"``,
    ``"us"`` or ``"ns"``; they are converted to seconds. ``None`` (the default) means seconds;
    a CSV file's times are checked: one implausible as seconds (``TIME_UNIT_RULE``) is refused
    with a message suggesting ``time_unit`` — never rescaled by a guess. (A DataFrame is the
    program's own data: it is not second-guessed.) Tool exports state their own units.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if format not in FORMATS:
        raise ValueError(f"format={format!r} is not known; use one of {', '.join(FORMATS)}")
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error={on_error!r} must be 'raise' or 'report'")
    _time_scale(time_unit)  # checks it
    if isinstance(source, pd.DataFrame):
        if format not in ("auto", "dataframe"):
            raise ValueError(f"format={format!r} needs a file path; a DataFrame is 'dataframe'")
        return validate_requests(source, LogSource("dataframe"), on_error, time_unit)
    if not isinstance(source, (str, Path)):
        raise ValueError(
            f"source={source!r} must be a path (str or Path) or a pandas DataFrame, "
            f"not {type(source).__name__}"
        )
    path = Path(source)
    from llminfer import logsets  # imported here: logsets builds on this module

    if logsets.is_many(path):  # a directory or a glob: one log with a 'source' column
        return logsets.read_log_files(path, format, on_error, time_unit)
    logfile.check_path(path)
    from llminfer import importers  # imported here: importers builds on this module

    if format == "dataframe":
        raise ValueError("format='dataframe' needs a DataFrame, not a path")
    # A delimited text table is read here, where its row-level checks and line numbers live;
    # anything structured (JSON, JSON Lines, Parquet) goes to the tool importers.
    if format == "csv" or (format == "auto" and not logfile.is_structured(path)):
        frame, assumptions = logfile.read_csv_file(path)
        where = LogSource("csv", str(path), tuple(assumptions))
        try:
            return validate_requests(frame, where, on_error, time_unit)
        except BadRowsError as error:
            # Name the file line of each row shown (blank lines and quoted line breaks count).
            error.lines = logfile.record_lines(path, error.rejected["row"].head(_SHOWN))
            raise
    try:
        format, imported = importers.read(path, format)
    except ValueError:
        raise
    except (KeyError, TypeError, AttributeError, IndexError, OverflowError) as exc:
        # An export of another shape than the format says: name the file, format and problem.
        what = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise ValueError(
            f"source={str(path)!r} does not have the shape of a {format} export: "
            f"{type(exc).__name__}: {' '.join(what.split())}; check --format/format= "
            "or the file"
        ) from exc
    if imported is None:  # a structured file that is a plain table after all
        frame, assumptions = logfile.read_csv_file(path)
        return validate_requests(
            frame, LogSource("csv", str(path), tuple(assumptions)), on_error, time_unit
        )
    if format != "parquet" and time_unit not in (None, "s"):
        raise ValueError(
            f"time_unit={time_unit!r} applies to CSV, Parquet and DataFrame logs; a {format} "
            "export states its own units and is converted to seconds as it is read"
        )
    source = LogSource(
        format, str(path), tuple(imported.assumptions), imported.window_s, imported.starts_known
    )
    frame = imported.frame
    if format == "parquet":
        for name in ("token_ts", "chunk_tokens"):
            if name in frame.columns:  # Parquet lists arrive as numpy arrays already
                frame[name] = [None if c is None else np.asarray(c, float) for c in frame[name]]
        return validate_requests(frame, source, on_error, time_unit)
    return validate_requests(frame, source, on_error)


# --- time units -----------------------------------------------------------------------------

TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
#: Times read as seconds are refused when any of these holds (each is impossible, or all but,
#: for a real LLM server's log in seconds, and what a log in ms/µs/ns looks like):
#: a timestamp above 1e11 s (year 5138: epoch or monotonic clocks in ms, µs or ns are), a
#: median TPOT above 2 s per token, or a median E2E latency above one hour.
MAX_TIMESTAMP_S = 1e11
MAX_MEDIAN_TPOT_S = 2.0
MAX_MEDIAN_E2E_S = 3600.0
TIME_UNIT_RULE = (
    f"times read as seconds must have every timestamp below {MAX_TIMESTAMP_S:.0e} s, "
    f"a median TPOT of at most {MAX_MEDIAN_TPOT_S:g} s per token and a median E2E of at most "
    f"{MAX_MEDIAN_E2E_S:g} s"
)


def _time_scale(time_unit: str | None) -> float:
    if time_unit is None:
        return 1.0
    if time_unit not in TIME_UNITS:
        raise ValueError(
            f"time_unit={time_unit!r} is not known; use one of {', '.join(TIME_UNITS)} "
            "(or None: seconds, checked for plausibility)"
        )
    return TIME_UNITS[time_unit]


def _check_seconds(numbers: dict[str, np.ndarray], tokens: np.ndarray, keep, ok, source) -> None:
    """Refuse times that are implausible as seconds (``TIME_UNIT_RULE``)."""
    rows = np.flatnonzero(keep)
    start, first, end = (numbers[name][keep] for name in _TIME_COLUMNS)
    good = ok[keep]
    evidence = None
    with np.errstate(invalid="ignore"):
        e2e = (end - start)[good]
        tpot = ((end - first) / (tokens[keep] - 1))[good & (tokens[keep] > 1)]
    e2e, tpot = e2e[np.isfinite(e2e)], tpot[np.isfinite(tpot)]
    for name, values in zip(_TIME_COLUMNS, (start, first, end), strict=True):
        too_big = np.abs(np.nan_to_num(values)) > MAX_TIMESTAMP_S
        if too_big.any():
            i = int(np.argmax(too_big))
            evidence = f"row {rows[i]}, column {name}, value {values[i]:.6g} s"
            break
    if evidence is None and len(tpot) and np.median(tpot) > MAX_MEDIAN_TPOT_S:
        evidence = f"the median TPOT would be {np.median(tpot):.4g} s per token"
    elif evidence is None and len(e2e) and np.median(e2e) > MAX_MEDIAN_E2E_S:
        evidence = f"the median E2E latency would be {np.median(e2e):.4g} s"
    if evidence is None:
        return
    where = f"source={source.path!r}: the times" if source.path else "the log's times"
    raise LogError(
        f"{where} do not look like seconds — {evidence} (rule: {TIME_UNIT_RULE}). "
        "Are they milliseconds, microseconds or nanoseconds?",
        " Pass time_unit='ms', 'us' or 'ns' to convert them, or time_unit='s' if they really "
        "are seconds.",
        " Run again with --time-unit ms, us or ns to convert them, or --time-unit s if they "
        "really are seconds.",
    )


# --- validation -----------------------------------------------------------------------------


class _Problems:
    """Collects (rows, column, values, reason) vectorised, one entry per kind of problem."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.parts: list[pd.DataFrame] = []
        self.bad = np.zeros(n, dtype=bool)

    def add(self, mask: np.ndarray, column: str, values, reason: str) -> None:
        mask = np.asarray(mask, dtype=bool)
        if not mask.any():
            return
        rows = np.flatnonzero(mask)
        if values is None:
            shown = [""] * len(rows)
        elif isinstance(values, pd.Series):  # only the offending rows are converted to text
            shown = values.iloc[rows].to_numpy(dtype=object)
        else:
            shown = np.asarray(values, dtype=object)[rows]
        self.parts.append(
            pd.DataFrame(
                {
                    "row": rows,
                    "column": column,
                    "value": [_show(v) for v in shown],
                    "reason": reason,
                }
            )
        )
        self.bad |= mask

    def frame(self) -> pd.DataFrame:
        if not self.parts:
            return pd.DataFrame({c: pd.Series(dtype=object) for c in REJECTED_COLUMNS}).astype(
                {"row": "int64"}
            )
        out = pd.concat(self.parts, ignore_index=True)
        return out.sort_values("row", kind="stable").reset_index(drop=True)


def _show(value) -> str:
    if isinstance(value, np.ndarray):
        return np.array2string(value, threshold=6, precision=6)
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""  # missing: empty cell, NaN or None
    return str(value)


def _numeric(column: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values as float64, missing mask, not-a-number mask) of one column."""
    if pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column):
        # A plain numpy column has no NA but NaN; asking for na_value would copy it for nothing.
        na_value = {} if isinstance(column.dtype, np.dtype) else {"na_value": np.nan}
        values = column.to_numpy(dtype=float, **na_value)
        return values, np.isnan(values), np.zeros(len(values), dtype=bool)
    raw = column.to_numpy(dtype=object)
    missing = np.asarray(pd.isna(column), dtype=bool) | np.array(
        [isinstance(v, str) and not v.strip() for v in raw], dtype=bool
    )
    values = pd.to_numeric(column.where(~missing), errors="coerce").to_numpy(
        dtype=float, na_value=np.nan
    )
    # "nan" typed as text is missing too; anything else that failed to parse is not a number.
    is_nan_text = np.array(
        [isinstance(v, str) and v.strip().lower() == "nan" for v in raw], dtype=bool
    )
    missing |= is_nan_text
    not_number = np.isnan(values) & ~missing
    return values, missing, not_number


def _status(frame: pd.DataFrame, problems: _Problems) -> np.ndarray:
    """Boolean array: True where the request failed.

    One rule for a blank status (missing, empty or only spaces): the log does not say, so the
    request is ok unless its ``error`` text is non-empty. Any other word must be one of
    ``_OK_WORDS`` or ``_FAILED_WORDS`` (case and surrounding spaces ignored).
    """
    n = len(frame)
    failed = np.zeros(n, dtype=bool)
    if "status" in frame.columns:
        status = frame["status"]
        text = status.astype(object).where(status.notna(), "")
        words = text.map(lambda v: str(v).strip().lower()).to_numpy(dtype=object)
        is_ok = np.isin(words, [*_OK_WORDS, ""])
        is_failed = np.isin(words, list(_FAILED_WORDS))
        problems.add(
            ~is_ok & ~is_failed,
            "status",
            status,
            "status must be 'ok' or 'failed' (or "
            + ", ".join(sorted((_OK_WORDS | _FAILED_WORDS) - {"ok", "failed"}))
            + ", or blank)",
        )
        failed |= is_failed
    if "error" in frame.columns:
        error = frame["error"]
        has_error = np.asarray(error.notna(), dtype=bool) & (
            error.astype(object).map(lambda v: bool(str(v).strip())).to_numpy(dtype=bool)
        )
        failed |= has_error
    return failed


def validate_requests(
    frame: pd.DataFrame,
    source: LogSource | None = None,
    on_error: str = "raise",
    time_unit: str | None = None,
) -> RequestLog:
    """Check every row of a DataFrame in the request-log schema and build a ``RequestLog``.

    Vectorised (no Python loop per request except over ``token_ts`` arrays). Raises ValueError
    on a missing column; bad rows raise ``BadRowsError`` or are reported according to
    ``on_error``. ``time_unit`` as in ``read_requests`` (times come back in seconds).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    source = source or LogSource("dataframe")
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error={on_error!r} must be 'raise' or 'report'")
    scale = _time_scale(time_unit)
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"frame must be a pandas DataFrame, not {type(frame).__name__}")
    _check_columns(frame, source)
    n = len(frame)
    problems = _Problems(n)
    failed = _status(frame, problems)
    ok = ~failed

    # request_id: present (not blank) and unique (the first occurrence is kept, later ones
    # rejected). Ids are text in the result, so 7 and "7" are one id: reported, not merged.
    ids = frame["request_id"]
    id_missing = _blank(ids)
    problems.add(id_missing, "request_id", ids, "missing request_id")
    duplicated = _duplicated(ids) & ~id_missing
    problems.add(duplicated, "request_id", ids, "duplicate request_id")
    if n and pd.api.types.infer_dtype(ids, skipna=True) not in ("string", "empty"):
        as_text = _duplicated(ids.map(str)) & ~id_missing & ~duplicated
        problems.add(
            as_text,
            "request_id",
            ids,
            "duplicate request_id once ids are text (7 and '7' are the same id)",
        )

    numbers: dict[str, np.ndarray] = {}
    optional_numeric = ["scheduled_ts"] if "scheduled_ts" in frame.columns else []
    for name in (*_TIME_COLUMNS, *_TOKEN_COLUMNS, *optional_numeric):
        values, missing, not_number = _numeric(frame[name])
        raw = frame[name]
        # A failed request may lack everything but its start; scheduled_ts is always optional.
        may_be_missing = np.ones(n, bool) if name == "scheduled_ts" else failed
        if name == "start_ts":
            may_be_missing = np.zeros(n, bool)
        problems.add(missing & ~may_be_missing, name, raw, f"missing {name}")
        problems.add(not_number, name, raw, f"{name} is not a number")
        problems.add(np.isinf(values), name, raw, f"{name} is not finite")
        numbers[name] = np.where(np.isfinite(values), values, np.nan)
        if scale != 1.0 and name not in _TOKEN_COLUMNS:
            numbers[name] = numbers[name] * scale

    for name in _TOKEN_COLUMNS:
        values = numbers[name]
        raw = frame[name]
        with np.errstate(invalid="ignore"):
            problems.add(values < 0, name, raw, f"{name} is negative")
            fractional = (values != np.round(values)) & ~np.isnan(values)
            problems.add(fractional, name, raw, f"{name} is not a whole number")
            problems.add(
                values >= MAX_TOKENS, name, raw, f"{name} is too large to be a token count"
            )
    with np.errstate(invalid="ignore"):
        problems.add(
            ok & (numbers["output_tokens"] == 0),
            "output_tokens",
            frame["output_tokens"],
            "a successful request must have output_tokens >= 1",
        )

    start, first, end = numbers["start_ts"], numbers["first_token_ts"], numbers["end_ts"]
    with np.errstate(invalid="ignore"):
        problems.add(
            first < start,
            "first_token_ts",
            frame["first_token_ts"],
            "first_token_ts is before start_ts",
        )
        problems.add(
            end < first,
            "end_ts",
            frame["end_ts"],
            "end_ts is before first_token_ts",
        )
        problems.add(
            np.isnan(first) & (end < start),
            "end_ts",
            frame["end_ts"],
            "end_ts is before start_ts",
        )
        if optional_numeric:
            scheduled = numbers["scheduled_ts"]
            raw = frame["scheduled_ts"]
            problems.add(scheduled < start, "scheduled_ts", raw, "scheduled_ts is before start_ts")
            problems.add(
                scheduled > first, "scheduled_ts", raw, "scheduled_ts is after first_token_ts"
            )

    if "token_ts" in frame.columns:
        if scale != 1.0:
            frame = frame.assign(token_ts=frame["token_ts"].map(lambda c: _scaled(c, scale)))
        _check_token_ts(frame, start, first, end, problems)

    rejected = problems.frame()
    if len(rejected) and on_error == "raise":
        raise BadRowsError(rejected, source)

    keep = ~problems.bad
    if time_unit is None and source.format == "csv":
        _check_seconds(numbers, numbers["output_tokens"], keep, ok, source)
    everything = keep.all()
    # Build the result column by column (no copy-then-overwrite of the whole frame).
    columns: dict[str, object] = {}
    assumptions = list(source.assumptions)
    for name in frame.columns:
        if name in numbers:
            values = numbers[name] if everything else numbers[name][keep]
            if name in _TOKEN_COLUMNS:
                lacking = np.isnan(values)
                if lacking.any():
                    assumptions.append(
                        f"{int(lacking.sum())} failed request(s) had no {name}; counted as 0"
                    )
                    values = np.where(lacking, 0.0, values)
                values = values.astype(np.int64)
            columns[name] = values
        else:
            column = frame[name]
            # Text already in pandas' own text dtype stays as it is: to_numpy would box every
            # value into a Python object only for the DataFrame below to unbox it again.
            column = column.array if column.dtype == _TEXT_DTYPE else column.to_numpy()
            columns[name] = column.copy() if everything else column[keep]
    # Every array above is this function's own (np.where, astype, copy, mask), so pandas need
    # not copy them again and stack them into one block (~30 ms a million rows).
    requests = pd.DataFrame(columns, copy=False)
    if not pd.api.types.is_string_dtype(requests["request_id"]):
        requests["request_id"] = requests["request_id"].map(str)
    # Categorical: "ok"/"failed" compare as cheap integer codes on million-row logs.
    requests["status"] = pd.Categorical.from_codes(
        (failed if everything else failed[keep]).astype(np.int8), categories=["ok", "failed"]
    )
    source = replace(source, assumptions=tuple(assumptions))
    return RequestLog(requests=requests, rejected=rejected, source=source)


def _duplicated(ids: pd.Series) -> np.ndarray:
    """True at every later occurrence of an id (the first one is kept)."""
    if isinstance(ids.dtype, pd.StringDtype) and ids.dtype.storage == "pyarrow":
        import pyarrow as pa

        from llminfer.uniqueness import arrow_ids_unique

        # Arrow strings: their bytes folded into 64-bit keys and those sorted prove them unique
        # (~10× faster than sorting the strings); only a log that has duplicates (or an
        # unlucky hash) pays for the exact pass below.
        if arrow_ids_unique(pa.array(ids.array)):
            return np.zeros(len(ids), dtype=bool)
    return ids.duplicated(keep="first").to_numpy()


def _check_token_ts(frame, start, first, end, problems: _Problems) -> None:
    """Each token_ts entry: an array of finite, non-decreasing times in [start, end]."""
    cells = frame["token_ts"].to_numpy(dtype=object)
    bad = np.zeros(len(cells), dtype=bool)
    reasons = np.full(len(cells), "", dtype=object)
    counts = frame["chunk_tokens"].to_numpy(dtype=object) if "chunk_tokens" in frame else None
    for i, cell in enumerate(cells):
        if cell is None or (np.isscalar(cell) and pd.isna(cell)):
            continue
        try:
            times = np.asarray(cell, dtype=float).ravel()
        except (TypeError, ValueError):
            bad[i], reasons[i] = True, "token_ts must be a list of numbers"
            continue
        tolerance = 1e-6 * max(1.0, abs(end[i]) if np.isfinite(end[i]) else 1.0)
        if times.size == 0 or not np.isfinite(times).all():
            bad[i], reasons[i] = True, "token_ts must hold finite times"
        elif (np.diff(times) < 0).any():
            bad[i], reasons[i] = True, "token_ts must not decrease"
        elif times[0] < start[i] - tolerance or (
            np.isfinite(end[i]) and times[-1] > end[i] + tolerance
        ):
            bad[i], reasons[i] = True, "token_ts must lie between start_ts and end_ts"
        elif counts is not None and counts[i] is not None:
            tokens = np.asarray(counts[i], dtype=float).ravel()
            if tokens.shape != times.shape or (tokens < 1).any():
                bad[i], reasons[i] = True, "chunk_tokens must be >= 1, one count per token_ts"
    for reason in set(reasons[bad]):
        problems.add(bad & (reasons == reason), "token_ts", cells, reason)


def _describe(rejected: pd.DataFrame, source: LogSource, lines: dict[int, int]) -> str:
    """One line: how many rows are bad, then the first few with row, file line, column, value."""
    rows = rejected["row"].nunique()
    where = f" in {source.path}" if source.path else ""
    shown = []
    for item in rejected.head(_SHOWN).itertuples(index=False):
        line = f" (line {lines[item.row]} of the file)" if item.row in lines else ""
        shown.append(
            f"row {item.row}{line}, column {item.column}, value {item.value!r}: {item.reason}"
        )
    more = len(rejected) - len(shown)
    tail = f"; and {more} more problem(s)" if more > 0 else ""
    return f"{rows} bad row(s){where}: " + "; ".join(shown) + tail


def _check_columns(frame: pd.DataFrame, source: LogSource) -> None:
    """Raise ValueError naming the missing columns, with a hint where one is near at hand."""
    missing = [c for c in ARTICLE_COLUMNS if c not in frame.columns]
    if not missing:
        return
    found = [str(c) for c in frame.columns]
    hints = []
    if len(found) == 1 and any(d in found[0] for d in ";\t|"):
        hints.append("the header is one cell: are the cells separated by something else?")
    for name in missing:
        near = difflib.get_close_matches(name, found, n=1, cutoff=0.75)
        near = near or [f for f in found if f.strip().lower() == name]
        if near:
            hints.append(f"{near[0]!r} would be {name!r} (names are exact and lower-case)")
    where = f"source={source.path!r}: " if source.path else ""
    raise ValueError(
        f"{where}the log lacks column(s) {', '.join(missing)}; a request log needs "
        f"{', '.join(ARTICLE_COLUMNS)} (found: {', '.join(found)})"
        + "".join(f"; {h}" for h in hints)
    )


def _blank(ids: pd.Series) -> np.ndarray:
    """True where an id is missing: NA/NaN/None, empty or only whitespace."""
    missing = np.asarray(ids.isna(), dtype=bool)
    if isinstance(ids.dtype, pd.StringDtype) and ids.dtype.storage == "pyarrow":
        import pyarrow as pa
        import pyarrow.compute as pc

        values = pa.array(ids.array)
        blank = pc.equal(pc.utf8_trim_whitespace(values), "").fill_null(False)
        return missing | np.asarray(blank, dtype=bool)
    text = ids.to_numpy(dtype=object)
    return missing | np.fromiter(
        (isinstance(v, str) and not v.strip() for v in text), dtype=bool, count=len(text)
    )


def _scaled(cell, scale: float):
    """A token_ts cell converted to seconds; anything that is not numbers is left for checks."""
    if cell is None or (np.isscalar(cell) and pd.isna(cell)):
        return cell
    try:
        return np.asarray(cell, dtype=float) * scale
    except (TypeError, ValueError):
        return cell
