"""Chapter 6: read a request log — the article's CSV, a DataFrame, another benchmark tool's
export, or many files at once — into one ``RequestLog`` (``llminfer.logs.schema``), never
dropping a row silently.

One file: a delimited text table is decoded by ``llminfer.logs.logfile`` and checked row by row
by ``llminfer.logs.validation`` (so errors can name file lines); JSON, JSON Lines and Parquet go
to the tool importers (``llminfer.logs.importers``).

Many files (a directory or a glob, ``llminfer.logs.discovery``): ``read_log_files`` reads each
file as above (so every row-level check applies) and adds ``source``: the file's path relative
to the directory or the glob's fixed part (``replica-0.csv``). Request ids need only be unique
within a file (two replicas may both number from ``r1``); ``(source, request_id)`` identifies a
request. Rejected rows carry ``source`` too.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from llminfer.logs import importers, logfile
from llminfer.logs.discovery import LOG_SUFFIXES, is_many, log_files
from llminfer.logs.schema import _SHOWN, ON_ERROR, BadRowsError, LogError, LogSource, RequestLog
from llminfer.logs.timeunits import seconds_of, time_scale, typed_times
from llminfer.logs.validation import shorten, validate_requests

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


def read_requests(
    source: str | Path | pd.DataFrame,
    format: str = "auto",
    on_error: str = "raise",
    time_unit: str | None = None,
    benchmark: int | None = None,
) -> RequestLog:
    """Read a request log from a CSV path, a DataFrame or another tool's export.

    ``source`` may also be a directory or a glob of CSV, CSV.gz or Parquet files (one replica or
    one hour each): they load as one log with a ``source`` column naming each request's file
    (``read_log_files``).

    ``format``: ``"auto"`` (recognised by the file's content, plain or compressed), or one of
    ``csv``, ``parquet``, ``dataframe``, ``vllm``, ``sglang``, ``genai-perf``, ``aiperf``,
    ``llmperf``, ``guidellm``. A tool's problems raise a ValueError naming file, record and
    field; a summary-only file says so (read it with ``llminfer.read_summary``). Bad rows
    (missing or non-numeric values, NaN, negative or fractional token counts, start > first
    token > end out of order, duplicate ids) raise a ``BadRowsError`` (a ValueError) naming
    row, file line, column and value; with ``on_error="report"`` the valid rows load and
    ``.rejected`` lists every problem. Times in seconds, token counts as integers.

    ``time_unit``: the unit of the times in a CSV, Parquet or DataFrame log, ``"s"``, ``"ms"``,
    ``"us"`` or ``"ns"``; they are converted to seconds. ``None`` (the default) means seconds;
    a CSV or Parquet file's times are checked: one implausible as seconds (``TIME_UNIT_RULE``)
    is refused with a message suggesting ``time_unit`` — never rescaled by a guess. (A
    DataFrame is the program's own data: it is not second-guessed.) Times stored as
    timestamps or durations (Arrow ``timestamp``/``duration``, numpy ``datetime64``) are
    converted by the unit their type declares, which ``LogSource.assumptions`` states; a
    ``time_unit`` other than ``"s"`` is then refused. Tool exports state their own units.

    Many files with ``on_error="report"``: a file that cannot be read (or whose times are
    implausible as seconds) is left out and listed — a ``rejected`` row with ``row`` -1 and
    ``source`` naming it, and an assumption — while the others load; with ``"raise"`` it
    stops the read. Files whose times differ by a unit's factor (``MAX_UNIT_RATIO``) are
    refused either way.

    ``benchmark``: one benchmark (an index, negative from the end) of an export holding
    several (GuideLLM's benchmarks.json; a vLLM result file ``--append-result`` wrote, one
    result a line); None reads them all, with a ``benchmark`` column.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if benchmark is not None and (not isinstance(source, (str, Path)) or is_many(Path(source))):
        raise ValueError(f"benchmark={benchmark!r} applies to one tool export, not {source!r}")
    if format not in FORMATS:
        raise ValueError(f"format={format!r} is not known; use one of {', '.join(FORMATS)}")
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error={on_error!r} must be 'raise' or 'report'")
    time_scale(time_unit)  # checks it
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
    if is_many(path):  # a directory or a glob: one log with a 'source' column
        return read_log_files(path, format, on_error, time_unit)
    logfile.check_path(path)
    if format == "dataframe":
        raise ValueError("format='dataframe' needs a DataFrame, not a path")
    # A delimited text table is read here, where its row-level checks and line numbers live;
    # anything structured (JSON, JSON Lines, Parquet) goes to the tool importers.
    if benchmark is not None and (
        format == "csv" or (format == "auto" and not logfile.is_structured(path))
    ):
        raise ValueError(f"benchmark={benchmark!r} applies to a tool export, not a CSV log")
    if format == "csv" or (format == "auto" and not logfile.is_structured(path)):
        summary = importers.summary_csv(path) if format == "auto" else None
        if summary is not None:  # a tool's aggregates: no request in it to read
            raise importers.ExportError(
                f"source={str(path)!r} is {summary}: aggregates, not one row per request; "
                "read its figures with llminfer.read_summary(path)"
            )
        frame, assumptions = logfile.read_csv_file(path)
        where = LogSource("csv", str(path), tuple(assumptions))
        try:
            # The frame was read here and is held by no one else: the log may keep its arrays.
            log = validate_requests(frame, where, on_error, time_unit, copy=False)
        except BadRowsError as error:
            # Name the file line of each row shown (blank lines and quoted line breaks count)
            # and quote its cells as the file writes them.
            error.lines, error.rejected = _as_written(
                path, error.rejected, error.rejected["row"].head(_SHOWN)
            )
            raise
        if len(log.rejected):
            log.rejected = _as_written(path, log.rejected, log.rejected["row"])[1]
        return log
    try:
        format, imported = importers.read(path, format, benchmark=benchmark)
    except ValueError:
        raise
    except RecursionError:
        raise ValueError(
            f"source={str(path)!r} nests its JSON deeper than Python can read "
            f"({sys.getrecursionlimit():,} levels); no benchmark export does: is it the right file?"
        ) from None
    except (KeyError, TypeError, AttributeError, IndexError, OverflowError) as exc:
        # An export of another shape than the format says: name the file, format and problem.
        what = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise ValueError(
            f"source={str(path)!r} does not have the shape of a {format} export: "
            f"{type(exc).__name__}: {' '.join(what.split())}; check --format/format= "
            "or the file"
        ) from exc
    if imported is None:  # a structured file that is a plain table after all
        return read_requests(path, "csv", on_error, time_unit)
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
        if len(frame) == 0:
            raise ValueError(f"source={str(path)!r} is a Parquet table with no rows: no requests")
        for name in ("token_ts", "chunk_tokens"):
            if name in frame.columns:  # Parquet lists arrive as numpy arrays already
                frame[name] = [_list_cell(c) for c in frame[name]]
        # Timestamps and durations: seconds by the unit the file's schema declares.
        frame, _, said = typed_times(frame, time_unit, _declared_times(path))
        if said:
            source = replace(source, assumptions=(*source.assumptions, *said))
        return validate_requests(frame, source, on_error, time_unit)
    return validate_requests(frame, source, on_error)


def _as_written(path: Path, rejected: pd.DataFrame, rows) -> tuple[dict[int, int], pd.DataFrame]:
    """The file lines of ``rows`` and ``rejected`` with those rows' values quoted as the CSV
    file writes them ("NaN", "1e309", "-0"), not as the numbers pandas parsed them into."""
    lines, cells = logfile.record_cells(path, rows)
    if not cells:
        return lines, rejected
    values = [
        (shorten(cells[row].get(column, "")) if row in cells else value)
        for row, column, value in zip(
            rejected["row"], rejected["column"], rejected["value"], strict=True
        )
    ]
    return lines, rejected.assign(value=values)


#: Largest ratio between two files' median TPOTs (or E2Es) that is read as one log: replicas of
#: one benchmark differ by a few times at most; 1000× is one file in ms and one in seconds.
MAX_UNIT_RATIO = 100.0


def _check_units_agree(logs: list[RequestLog], names: list[str]) -> None:
    """Refuse files whose times differ as units do: each file passed the seconds rule on its
    own, yet one's median TPOT (E2E where there is none) is ``MAX_UNIT_RATIO``× another's."""
    medians = []
    for log, name in zip(logs, names, strict=True):
        ok = log.ok
        tokens = ok["output_tokens"].to_numpy()
        decode = (ok["end_ts"] - ok["first_token_ts"]).to_numpy()
        tpot = decode[tokens > 1] / (tokens[tokens > 1] - 1)
        e2e = (ok["end_ts"] - ok["start_ts"]).to_numpy()
        medians.append(
            (name, float(np.nanmedian(tpot)) if tpot.size else math.nan,
             float(np.nanmedian(e2e)) if e2e.size else math.nan)
        )  # fmt: skip
    for index, what in ((1, "TPOT"), (2, "E2E latency")):
        known = [(m[index], m[0]) for m in medians if m[index] > 0 and math.isfinite(m[index])]
        if len(known) < 2:
            continue
        (low, low_name), (high, high_name) = min(known), max(known)
        if high > MAX_UNIT_RATIO * low:
            raise LogError(
                f"the files do not share one time unit: the median {what} of {high_name} is "
                f"{high:.4g} and of {low_name} {low:.4g}, {high / low:,.0f}× as much (more "
                f"than {MAX_UNIT_RATIO:g}× between replicas is a unit, not a workload): "
                "convert them to one unit, or read them one by one with their own unit",
                " (time_unit= applies to every file)",
                " (--time-unit applies to every file)",
            )
        return


def _declared_times(path: Path) -> dict[str, str]:
    """Each timestamp or duration column's type as a Parquet file's schema declares it
    (``timestamp[s, tz=UTC]``, ``duration[ms]``): read from the footer, no data read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowException):
        return {}
    return {
        field.name: str(field.type)
        for field in schema
        if pa.types.is_timestamp(field.type) or pa.types.is_duration(field.type)
    }


def _list_cell(cell):
    """A Parquet list cell as a float array (timestamps by their declared unit, in seconds);
    anything that is not a list of numbers is left as it is, for validation to report."""
    if cell is None:
        return None
    try:
        array = np.asarray(cell)
        seconds = seconds_of(array)
        return seconds if seconds is not None else array.astype(float)
    except (TypeError, ValueError):
        return cell


def read_log_files(
    source: str | Path | Sequence[str | Path],
    format: str = "auto",
    on_error: str = "raise",
    time_unit: str | None = None,
) -> RequestLog:
    """Read a directory, a glob or a list of log files into one ``RequestLog``.

    Each file is read by ``read_requests`` (``format``, ``on_error``, ``time_unit`` as there; its
    format recognised by content when ``"auto"``) and its rows get ``source``: the file's
    name relative to the directory or glob (a categorical column). Rejected rows keep their
    0-based row within their own file and get ``source`` too. Times in seconds.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if isinstance(source, (str, Path)):
        files, root = log_files(source)
        where = str(source)
    else:
        files = [Path(p) for p in source]
        if not files:
            raise ValueError("source=[] names no log file")
        root, where = Path(), ", ".join(map(str, files))
    logs, names, unread = [], [], []
    for file in files:
        try:
            name = str(file.relative_to(root)) if root != Path() else str(file)
        except ValueError:
            name = str(file)
        try:
            log = read_requests(file, format=format, on_error=on_error, time_unit=time_unit)
        except (ValueError, OSError) as error:
            if on_error == "raise":
                raise
            # report: one replica's bad file does not hide the others; it is named, never
            # dropped silently (a rejected entry with row -1, and an assumption).
            said = error.cli_message() if isinstance(error, LogError) else str(error)
            unread.append((name, " ".join(said.split())))
            continue
        logs.append(log)
        names.append(name)
    if not logs:
        name, said = unread[0]
        raise ValueError(
            f"source={where!r}: none of its {len(files)} file(s) could be read; the first, "
            f"{name}: {said}"
        )
    _check_units_agree(logs, names)
    frames = []
    for log, name in zip(logs, names, strict=True):
        if "source" in log.requests.columns:
            raise ValueError(
                f"{name} already has a column 'source'; llminfer adds it when reading many "
                "files (rename the column in that file)"
            )
        frames.append(log.requests.assign(source=name))
    requests = pd.concat(frames, ignore_index=True)
    requests["source"] = pd.Categorical(requests["source"], categories=names)
    requests["status"] = pd.Categorical(requests["status"], categories=["ok", "failed"])
    rejected = [log.rejected.assign(source=name) for log, name in zip(logs, names, strict=True)]
    rejected += [
        pd.DataFrame(
            {"row": [-1], "column": [""], "value": [""], "reason": [f"file not read: {said}"],
             "source": [name]}
        )
        for name, said in unread
    ]  # fmt: skip
    rejected = pd.concat(rejected, ignore_index=True)
    rejected["row"] = rejected["row"].astype("int64")
    formats = sorted({log.source.format for log in logs})
    assumptions = [
        f"{name}: {said}"
        for log, name in zip(logs, names, strict=True)
        for said in log.source.assumptions
    ]
    assumptions.insert(0, f"{len(logs)} file(s) read, each request's file in column 'source'")
    assumptions += [f"{name} NOT READ (on_error='report'): {said}" for name, said in unread]
    if isinstance(source, (str, Path)) and Path(source).is_dir():
        other = sorted(
            p.name
            for p in Path(source).iterdir()
            if p.is_file() and not p.name.endswith(LOG_SUFFIXES) and not p.name.startswith(".")
        )
        if other:
            shown = ", ".join(other[:5]) + (f" and {len(other) - 5} more" if len(other) > 5 else "")
            assumptions.append(
                f"{len(other)} other file(s) in the directory not read (a directory is read for "
                f"{', '.join(LOG_SUFFIXES)} files; name a JSON export on its own): {shown}"
            )
    return RequestLog(
        requests=requests,
        rejected=rejected,
        source=LogSource(
            "+".join(formats),
            where,
            tuple(assumptions),
            window_s=None,  # the files' own windows overlap: first start → last end is used
            starts_known=all(log.source.starts_known for log in logs),
        ),
    )
