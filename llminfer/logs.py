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

from dataclasses import dataclass, field
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

REJECTED_COLUMNS = ("row", "column", "value", "reason")
#: Largest token count accepted: beyond 2**53 a float no longer holds every whole number (and
#: no model reads that many tokens), so larger counts are reported, not silently rounded.
MAX_TOKENS = 2**53
_SHOWN = 5  # rejected rows a message shows
#: Rows per block where a whole-log pass (a check, a division) runs block by block: 8 MB
#: float temporaries, below glibc's 32 MB mmap threshold, so each block reuses the memory the
#: last one freed instead of faulting in fresh pages (~20–80 ms per 80 MB here).
BLOCK_ROWS = 1 << 20


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
    from llminfer.validation import _time_scale, validate_requests  # builds on this module

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
            # The frame was read here and is held by no one else: the log may keep its arrays.
            return validate_requests(frame, where, on_error, time_unit, copy=False)
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
