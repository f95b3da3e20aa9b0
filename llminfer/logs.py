"""Chapter 6's request log: read a per-request log (the article's CSV, a DataFrame, or another
benchmark tool's export) into one schema, and never drop a row silently.

The schema (times in seconds on any one clock, token counts as integers):

``request_id, start_ts, first_token_ts, end_ts, input_tokens, output_tokens``
    the article's columns (``ARTICLE_COLUMNS``), one row per request.
``status``
    ``"ok"`` or ``"failed"``. Always present after loading: a request is failed when its
    ``status`` says so (``failed``/``failure``/``error``/``cancelled``) or its ``error`` text is
    non-empty. Failed requests stay in the log — counted, excluded from latency statistics —
    and may lack ``first_token_ts``, ``end_ts`` and token counts (missing counts load as 0).
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

Any other column is kept as it is (a simulator may add ``preemptions``, ``cached_prefix_tokens``).
The importers for vLLM, SGLang, AIPerf, GenAI-Perf, llmperf and GuideLLM exports live in
``llminfer.importers`` (one module per tool).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
from pandas._libs.parsers import STR_NA_VALUES  # the texts read_csv takes as missing

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


def read_requests(
    source: str | Path | pd.DataFrame, format: str = "auto", on_error: str = "raise"
) -> RequestLog:
    """Read a request log from a CSV path, a DataFrame or another tool's export.

    ``format``: ``"auto"`` (recognised by the file's content, plain or ``.gz``), or one of
    ``csv``, ``parquet``, ``dataframe``, ``vllm``, ``sglang``, ``genai-perf``, ``aiperf``,
    ``llmperf``, ``guidellm``. A tool's problems raise a ValueError naming file, record and
    field; a summary-only file says so (read it with ``llminfer.read_summary``). Bad rows
    (missing or non-numeric values, NaN, negative or fractional token counts, start > first
    token > end out of order, duplicate ids) raise a ValueError naming row, column and value;
    with ``on_error="report"`` the valid rows load and ``.rejected`` lists every problem.
    Times in seconds, token counts as integers.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if format not in FORMATS:
        raise ValueError(f"format={format!r} is not known; use one of {', '.join(FORMATS)}")
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error={on_error!r} must be 'raise' or 'report'")
    if isinstance(source, pd.DataFrame):
        if format not in ("auto", "dataframe"):
            raise ValueError(f"format={format!r} needs a file path; a DataFrame is 'dataframe'")
        return validate_requests(source, LogSource("dataframe"), on_error)
    if not isinstance(source, (str, Path)):
        raise ValueError(
            f"source={source!r} must be a path (str or Path) or a pandas DataFrame, "
            f"not {type(source).__name__}"
        )
    path = Path(source)
    if not path.is_file():
        raise ValueError(f"source={str(path)!r}: no such file")
    from llminfer import importers  # imported here: importers builds on this module

    if format == "dataframe":
        raise ValueError("format='dataframe' needs a DataFrame, not a path")
    format, imported = importers.read(path, format)
    if imported is None:  # a CSV: read here, where its row-level checks live
        return validate_requests(_read_csv(path), LogSource("csv", str(path)), on_error)
    source = LogSource(
        format, str(path), tuple(imported.assumptions), imported.window_s, imported.starts_known
    )
    frame = imported.frame
    if format == "parquet":
        for name in ("token_ts", "chunk_tokens"):
            if name in frame.columns:  # Parquet lists arrive as numpy arrays already
                frame[name] = [None if c is None else np.asarray(c, float) for c in frame[name]]
    return validate_requests(frame, source, on_error)


def _read_csv(path: Path) -> pd.DataFrame:
    frame = _read_article_csv(path)
    if frame is None:
        # request_id stays text ("007" is not 7); everything else is parsed by pandas' C reader
        # and re-checked below, so a stray word in a number column is reported, not guessed at.
        frame = pd.read_csv(path, dtype={"request_id": object, "status": object, "error": object})
    if "token_ts" in frame.columns:
        frame["token_ts"] = _parse_array_column(frame["token_ts"], float)
    if "chunk_tokens" in frame.columns:
        frame["chunk_tokens"] = _parse_array_column(frame["chunk_tokens"], float)
    return frame


def _read_article_csv(path: Path) -> pd.DataFrame | None:
    """A log of exactly the article's columns read by pyarrow, or None: "read it with pandas".

    pyarrow's reader parses on every core and keeps ids as Arrow strings (no Python object per
    id): about 3× faster than pandas' reader on a million rows. It is only taken where its result
    is the one pandas' path gives: numbers are parsed strictly (no empty cell, no "NA"), so any
    cell validation would have to report — missing, a stray word — sends the log to pandas, and
    so does an id that pandas reads as missing ("", "NA", "null", …) or an empty log.
    """
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
        from pyarrow import csv as pa_csv
    except ImportError:  # an optional speed-up: pandas reads every log without it
        return None
    with path.open(encoding="utf-8", newline="") as file:
        try:
            header = next(csv.reader(file), [])
        except (UnicodeDecodeError, csv.Error):
            return None
    if sorted(header) != sorted(ARTICLE_COLUMNS):
        return None
    # Token counts as int64 and times as float64: the types pandas infers for them (whole
    # counts, fractional times), so values and the text shown for a rejected one agree.
    types = {"request_id": pa.string()}
    types.update({name: pa.float64() for name in _TIME_COLUMNS})
    types.update({name: pa.int64() for name in _TOKEN_COLUMNS})
    try:
        table = pa_csv.read_csv(
            path,
            # newlines_in_values: a quoted id may hold a line break, as pandas allows.
            parse_options=pa_csv.ParseOptions(newlines_in_values=True),
            convert_options=pa_csv.ConvertOptions(
                column_types=types, null_values=[], strings_can_be_null=False
            ),
        )
    except pa.ArrowInvalid:  # a cell that is not a plain number, a ragged row, bad UTF-8
        return None
    pandas_missing = pa.array(sorted(STR_NA_VALUES), type=pa.string())
    if table.num_rows == 0 or pc.any(pc.is_in(table["request_id"], pandas_missing)).as_py():
        return None
    frame = table.to_pandas()
    for name in _TIME_COLUMNS:
        # pandas reads a column of whole numbers only ("3", not "3.0") as int64; a column
        # whose every time is whole may be one, so it is left to pandas.
        values = frame[name].to_numpy()
        if (values == np.floor(values)).all():
            return None
    return frame


def _parse_array_column(column: pd.Series, dtype) -> pd.Series:
    """CSV cells holding space-separated numbers ("1.0 1.1 1.2") → arrays; blanks → None."""

    def parse(cell):
        if not isinstance(cell, str):
            return None if pd.isna(cell) else np.array([cell], dtype=dtype)
        try:
            return np.array(cell.split(), dtype=dtype)
        except ValueError:
            return cell  # left as text: validation reports it

    return column.map(parse)


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
    missing = pd.isna(column).to_numpy() | np.array(
        [isinstance(v, str) and not v.strip() for v in raw], dtype=bool
    )
    values = pd.to_numeric(column.where(~missing), errors="coerce").to_numpy(
        dtype=float, na_value=np.nan
    )
    # "nan" typed as text is missing too; anything else that failed to parse is not a number.
    is_nan_text = np.array([isinstance(v, str) and v.strip().lower() == "nan" for v in raw])
    missing |= is_nan_text
    not_number = np.isnan(values) & ~missing
    return values, missing, not_number


def _status(frame: pd.DataFrame, problems: _Problems) -> np.ndarray:
    """Boolean array: True where the request failed."""
    n = len(frame)
    failed = np.zeros(n, dtype=bool)
    if "status" in frame.columns:
        text = frame["status"].astype(object).where(frame["status"].notna(), "ok")
        words = text.map(lambda v: str(v).strip().lower()).to_numpy(dtype=object)
        is_ok = np.isin(words, list(_OK_WORDS))
        is_failed = np.isin(words, list(_FAILED_WORDS))
        problems.add(
            ~is_ok & ~is_failed,
            "status",
            frame["status"],
            "status must be 'ok' or 'failed'",
        )
        failed |= is_failed
    if "error" in frame.columns:
        error = frame["error"]
        has_error = error.notna().to_numpy() & (
            error.astype(object).map(lambda v: bool(str(v).strip())).to_numpy(dtype=bool)
        )
        failed |= has_error
    return failed


def validate_requests(
    frame: pd.DataFrame, source: LogSource | None = None, on_error: str = "raise"
) -> RequestLog:
    """Check every row of a DataFrame in the request-log schema and build a ``RequestLog``.

    Vectorised (no Python loop per request except over ``token_ts`` arrays). Raises ValueError
    on a missing column; bad rows raise or are reported according to ``on_error``.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    source = source or LogSource("dataframe")
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error={on_error!r} must be 'raise' or 'report'")
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"frame must be a pandas DataFrame, not {type(frame).__name__}")
    missing_columns = [c for c in ARTICLE_COLUMNS if c not in frame.columns]
    if missing_columns:
        raise ValueError(
            f"the log lacks column(s) {', '.join(missing_columns)}; a request log needs "
            f"{', '.join(ARTICLE_COLUMNS)} (found: {', '.join(map(str, frame.columns))})"
        )
    n = len(frame)
    problems = _Problems(n)
    failed = _status(frame, problems)
    ok = ~failed

    # request_id: present and unique (the first occurrence is kept, later ones rejected).
    ids = frame["request_id"]
    id_missing = np.array(ids.isna(), dtype=bool)
    if source.format != "csv":  # pandas' CSV reader already turns empty cells into NaN
        id_missing |= (ids.astype(object) == "").to_numpy()
    problems.add(id_missing, "request_id", ids, "missing request_id")
    duplicated = _duplicated(ids) & ~id_missing
    problems.add(duplicated, "request_id", ids, "duplicate request_id")

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

    for name in _TOKEN_COLUMNS:
        values = numbers[name]
        raw = frame[name]
        with np.errstate(invalid="ignore"):
            problems.add(values < 0, name, raw, f"{name} is negative")
            fractional = (values != np.round(values)) & ~np.isnan(values)
            problems.add(fractional, name, raw, f"{name} is not a whole number")
            problems.add(values > MAX_TOKENS, name, raw, f"{name} is too large to be a token count")
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
        _check_token_ts(frame, start, first, end, problems)

    rejected = problems.frame()
    if len(rejected) and on_error == "raise":
        raise ValueError(_describe(rejected, source))

    keep = ~problems.bad
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
        import pyarrow.compute as pc

        # Arrow strings: one sort (~50 ms a million ids) proves them unique, about twice as
        # fast as hashing them; only a log that has duplicates pays for the exact pass below.
        values = pa.array(ids.array)
        if isinstance(values, pa.ChunkedArray):  # one buffer sorts and takes faster
            values = values.combine_chunks()
        ordered = values.take(pc.sort_indices(values))
        if not pc.any(pc.equal(ordered[1:], ordered[:-1])).as_py():
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


def _describe(rejected: pd.DataFrame, source: LogSource) -> str:
    rows = rejected["row"].nunique()
    where = f" in {source.path}" if source.path else ""
    line_note = source.format == "csv"
    shown = []
    for item in rejected.head(5).itertuples(index=False):
        line = f" (line {item.row + 2} of the file)" if line_note else ""
        shown.append(
            f"row {item.row}{line}, column {item.column}, value {item.value!r}: {item.reason}"
        )
    more = len(rejected) - len(shown)
    tail = f"; and {more} more problem(s)" if more > 0 else ""
    return (
        f"{rows} bad row(s){where}: " + "; ".join(shown) + tail + ". Pass on_error='report' to "
        "load the valid rows and get every rejected row with its reason."
    )
