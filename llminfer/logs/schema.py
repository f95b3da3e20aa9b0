"""Chapter 6's request log: the one schema every log is read into, the ``RequestLog`` that
holds it, and the errors a reader raises (reading itself is ``llminfer.logs.reading``).

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

import pandas as pd

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
    ``window``: ``(t0, t1)`` seconds when the log is a time window of a longer one
    (``llminfer.logs.window.window_log``; then ``window_s = t1 − t0``), and
    ``window_output_tokens`` the output tokens emitted inside it (from ``token_ts``; None
    without them: the completed requests' tokens count).

    Introduced in: notebooks/06_log_analysis.ipynb
    """

    format: str
    path: str | None = None
    assumptions: tuple[str, ...] = ()
    window_s: float | None = None
    starts_known: bool = True
    window: tuple[float, float] | None = None
    window_output_tokens: float | None = None

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
