"""Chapter 6: validate a request log row by row, its times in seconds
(``llminfer.logs.timeunits``) — every problem becomes a rejected row with its reason
(``RequestLog.rejected``) or one ``BadRowsError``; no row is dropped or changed silently. The
schema is described in ``llminfer.logs``.
"""

from __future__ import annotations

import difflib
from dataclasses import replace
from decimal import Decimal

import numpy as np
import pandas as pd

from llminfer.logs.schema import (
    ARTICLE_COLUMNS,
    MAX_TOKENS,
    ON_ERROR,
    REJECTED_COLUMNS,
    BadRowsError,
    LogSource,
    RequestLog,
)
from llminfer.logs.timeunits import (
    CHECKED_FORMATS,
    TIME_COLUMNS,
    check_seconds,
    time_scale,
    typed_times,
)
from llminfer.logs.tokentimes import token_ts_problems

_TOKEN_COLUMNS = ("input_tokens", "output_tokens")
_OK_WORDS = {"ok", "success", "succeeded", "completed", "true"}
_FAILED_WORDS = {"failed", "failure", "fail", "error", "cancelled", "canceled", "false"}
#: The dtype pandas gives text (``str`` from pandas 3 on, ``object`` before).
_TEXT_DTYPE = pd.Series(["text"]).dtype


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
        if not self.parts:  # empty arrays: 0.09 ms, where typed Series and a cast took 1.07 ms
            return pd.DataFrame(
                {c: np.empty(0, np.int64 if c == "row" else object) for c in REJECTED_COLUMNS}
            )
        out = pd.concat(self.parts, ignore_index=True)
        return out.sort_values("row", kind="stable").reset_index(drop=True)


#: Longest value a rejected row shows (a 100 MB cell is named, not copied into a message).
_SHOWN_CHARS = 80


def _show(value) -> str:
    """A rejected value as text: what the frame holds (``None``, ``nan``, ``-0.0``, ``True``);
    a CSV file's cells are replaced by the text as written in the file
    (``llminfer.logs.logfile.record_cells``)."""
    if isinstance(value, np.ndarray):
        return np.array2string(value, threshold=6, precision=6)
    if isinstance(value, (float, np.floating)):
        text = repr(float(value))  # -0.0 stays -0.0, NaN is 'nan' (never an empty cell)
    else:
        text = "None" if value is None else str(value)
    return shorten(text)


def shorten(text: str) -> str:
    """``text`` cut to ``_SHOWN_CHARS`` characters, saying how long it was.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if len(text) <= _SHOWN_CHARS:
        return text
    return f"{text[: _SHOWN_CHARS - 20]}… ({len(text):,} characters)"


def _numeric(column: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values as float64, missing mask, not-a-number mask) of one column."""
    if pd.api.types.is_bool_dtype(column):  # true/false is no count and no time
        missing = np.asarray(pd.isna(column), dtype=bool)
        return np.full(len(column), np.nan), missing, ~missing
    if pd.api.types.is_numeric_dtype(column):
        # A plain numpy column has no NA but NaN; asking for na_value would copy it for nothing.
        na_value = {} if isinstance(column.dtype, np.dtype) else {"na_value": np.nan}
        values = column.to_numpy(dtype=float, **na_value)
        return values, np.isnan(values), np.zeros(len(values), dtype=bool)
    raw = column.to_numpy(dtype=object)
    missing = np.asarray(pd.isna(column), dtype=bool) | np.array(
        [isinstance(v, str) and not v.strip() for v in raw], dtype=bool
    )
    # Only text and plain numbers are parsed: a bool, a list or a dict in a cell (JSON, a
    # Parquet list column, an object DataFrame) is not a number, whatever pandas would make of it.
    parsable = np.array(
        [isinstance(v, (str, int, float, Decimal, np.integer, np.floating)) for v in raw],
        dtype=bool,
    ) & ~np.array([isinstance(v, (bool, np.bool_)) for v in raw], dtype=bool)
    values = pd.to_numeric(column.where(~missing & parsable), errors="coerce").to_numpy(
        dtype=float, na_value=np.nan
    )
    # "nan" typed as text is missing too; anything else that failed to parse is not a number.
    is_nan_text = np.array(
        [isinstance(v, str) and v.strip().lower() == "nan" for v in raw], dtype=bool
    )
    missing |= is_nan_text
    values = np.where(parsable | missing, values, np.nan)
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
    *,
    copy: bool = True,
) -> RequestLog:
    """Check every row of a DataFrame in the request-log schema and build a ``RequestLog``.

    Vectorised (no Python loop per request except over ``token_ts`` arrays). Raises ValueError
    on a missing column; bad rows raise ``BadRowsError`` or are reported according to
    ``on_error``. ``time_unit`` as in ``read_requests`` (times come back in seconds).
    ``copy=False`` lets the log share the frame's arrays where no value changes: for a frame
    nobody else holds (``read_requests``' own, read from a file), it saves a copy of every
    column (~0.5 GB at 10 M rows).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    source = source or LogSource("dataframe")
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error={on_error!r} must be 'raise' or 'report'")
    scale = time_scale(time_unit)
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"frame must be a pandas DataFrame, not {type(frame).__name__}")
    _check_columns(frame, source)
    frame, typed, typed_said = typed_times(frame, time_unit)
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
    # Arrays that are views of the frame (not this function's own): copied at the end, or with
    # copy=False made writable, so the log is a DataFrame like any other.
    shared: set[str] = set()
    for name in (*TIME_COLUMNS, *_TOKEN_COLUMNS, *optional_numeric):
        raw = frame[name]
        if name in _TOKEN_COLUMNS and _is_int_column(raw):
            # Whole, finite and present by type: kept as integers (no float round trip).
            numbers[name] = raw.to_numpy()
            shared.add(name)
            continue
        values, missing, not_number = _numeric(raw)
        # A failed request may lack everything but its start; scheduled_ts is always optional.
        may_be_missing = np.ones(n, bool) if name == "scheduled_ts" else failed
        if name == "start_ts":
            may_be_missing = np.zeros(n, bool)
        problems.add(missing & ~may_be_missing, name, raw, f"missing {name}")
        problems.add(not_number, name, raw, f"{name} is not a number")
        infinite = np.isinf(values)
        problems.add(infinite, name, raw, f"{name} is not finite")
        if infinite.any():
            values = np.where(infinite, np.nan, values)
        elif not values.flags.owndata:  # a view of the frame's own array
            shared.add(name)
        numbers[name] = values
        if scale != 1.0 and name not in _TOKEN_COLUMNS and name not in typed:
            numbers[name] = numbers[name] * scale
            shared.discard(name)

    for name in _TOKEN_COLUMNS:
        values = numbers[name]
        raw = frame[name]
        with np.errstate(invalid="ignore"):
            problems.add(values < 0, name, raw, f"{name} is negative")
            if values.dtype.kind == "f":
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
        cells = frame["token_ts"].to_numpy(dtype=object)
        counts = frame["chunk_tokens"].to_numpy(dtype=object) if "chunk_tokens" in frame else None
        bad, reasons = token_ts_problems(cells, counts, start, end)
        for reason in set(reasons[bad]):
            problems.add(bad & (reasons == reason), "token_ts", cells, reason)

    rejected = problems.frame()
    if len(rejected) and on_error == "raise":
        raise BadRowsError(rejected, source)

    keep = ~problems.bad
    if time_unit is None and source.format in CHECKED_FORMATS:
        check_seconds(numbers, numbers["output_tokens"], keep, ok, source)
    everything = keep.all()
    # Build the result column by column (no copy-then-overwrite of the whole frame).
    columns: dict[str, object] = {}
    assumptions = [*source.assumptions, *typed_said]
    for name in frame.columns:
        if name in numbers:
            values = numbers[name] if everything else numbers[name][keep]
            if name in _TOKEN_COLUMNS and values.dtype.kind == "f":
                lacking = np.isnan(values)
                if lacking.any():
                    assumptions.append(
                        f"{int(lacking.sum())} failed request(s) had no {name}; counted as 0"
                    )
                    values = np.where(lacking, 0.0, values)
                values = values.astype(np.int64)
            elif name in _TOKEN_COLUMNS and values.dtype != np.int64:
                values = values.astype(np.int64)  # int32, uint8…: one integer type in every log
            elif everything and name in shared:
                values = _own(values, copy)
            columns[name] = values
        else:
            column = frame[name]
            # Text already in pandas' own text dtype stays as it is: to_numpy would box every
            # value into a Python object only for the DataFrame below to unbox it again.
            column = column.array if column.dtype == _TEXT_DTYPE else column.to_numpy()
            columns[name] = (column.copy() if copy else column) if everything else column[keep]
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


def _is_int_column(column: pd.Series) -> bool:
    """A plain numpy integer column (no missing values possible; bool is not one)."""
    return isinstance(column.dtype, np.dtype) and column.dtype.kind in "iu"


def _own(values: np.ndarray, copy: bool) -> np.ndarray:
    """A view of the input frame as a column of the log: a copy, or (copy=False) the view made
    writable — pandas hands out read-only views, and a log's columns can be edited like any
    DataFrame's."""
    if copy:
        return values.copy()
    if not values.flags.writeable:
        try:
            values.flags.writeable = True
        except ValueError:  # a view of read-only memory (an Arrow buffer): copy after all
            return values.copy()
    return values


def _duplicated(ids: pd.Series) -> np.ndarray:
    """True at every later occurrence of an id (the first one is kept)."""
    if isinstance(ids.dtype, pd.StringDtype) and ids.dtype.storage == "pyarrow":
        import pyarrow as pa

        from llminfer.logs.uniqueness import arrow_ids_unique

        # Arrow strings: their bytes folded into 64-bit keys and those sorted prove them unique
        # (~10× faster than sorting the strings); only a log that has duplicates (or an
        # unlucky hash) pays for the exact pass below.
        if arrow_ids_unique(pa.array(ids.array)):
            return np.zeros(len(ids), dtype=bool)
    return ids.duplicated(keep="first").to_numpy()


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
        f"{', '.join(ARTICLE_COLUMNS)} (found: {_listed(found)})" + "".join(f"; {h}" for h in hints)
    )


def _listed(names: list[str], most: int = 30) -> str:
    """Names for a message: the first ``most`` (each cut to 40 characters), then how many more."""
    shown = ", ".join(shorten(n) if len(n) <= 40 else n[:39] + "…" for n in names[:most])
    return shown + (f" and {len(names) - most:,} more" if len(names) > most else "")


def _blank(ids: pd.Series) -> np.ndarray:
    """True where an id is missing: NA/NaN/None, empty or only whitespace."""
    missing = np.asarray(ids.isna(), dtype=bool)
    if isinstance(ids.dtype, pd.StringDtype) and ids.dtype.storage == "pyarrow":
        import pyarrow as pa
        import pyarrow.compute as pc

        values = pa.array(ids.array)
        # utf8_is_space: non-empty and only whitespace, as str.isspace; no trimmed copy made
        # (6× faster than comparing utf8_trim_whitespace's result with "" on 10 M ids).
        blank = pc.or_(pc.utf8_is_space(values), pc.equal(pc.binary_length(values), 0))
        blank = blank.fill_null(False)
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
