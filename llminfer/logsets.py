"""Many log files as one log: a directory or a glob of CSV, CSV.gz or Parquet files (one replica
or one hour each), read into one ``RequestLog`` with a ``source`` column, and per-source tables.

``read_log_files`` reads each file with ``read_requests`` (so every row-level check applies) and
adds ``source``: the file's path relative to the directory or the glob's fixed part
(``replica-0.csv``). Request ids need only be unique within a file (two replicas may both number
from ``r1``); ``(source, request_id)`` identifies a request. Rejected rows carry ``source`` too.

``summarize_by`` (what ``summarize(log, by="source")`` returns) gives a ``GroupedSummary``: one
``Summary`` per source and the ``total``, and ``table``, one row of headline figures per source
plus a ``total`` row. Each source's rates use its own window (its first start → last end), so
the per-source RPS need not add up to the total's.
"""

from __future__ import annotations

import glob as globbing
import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from llminfer.logs import LogSource, RequestLog, read_requests

#: File names a directory is searched for (a glob takes whatever it matches).
LOG_SUFFIXES = (".csv", ".csv.gz", ".parquet", ".pq")
_GLOB_CHARACTERS = set("*?[")


def is_many(source: str | Path) -> bool:
    """True when ``source`` names a directory or a glob pattern rather than one file.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    path = Path(source)
    return path.is_dir() or (not path.exists() and bool(_GLOB_CHARACTERS & set(str(source))))


def log_files(source: str | Path) -> tuple[list[Path], Path]:
    """The files a directory or glob names, sorted, and the folder their names are relative to.

    A directory contributes its files ending in ``.csv``, ``.csv.gz``, ``.parquet`` or ``.pq``
    (not sub-folders); a glob (``logs/*/part-*.parquet``, ``**`` recursive) contributes every
    file it matches. Raises ValueError when nothing matches.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    text = str(source)
    path = Path(text)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(LOG_SUFFIXES))
        root = path
        wanted = f"files ending in {', '.join(LOG_SUFFIXES)}"
    else:
        files = sorted(Path(p) for p in globbing.glob(text, recursive=True) if Path(p).is_file())
        # Names are shown relative to the glob's fixed leading folders ("logs/" of logs/*.csv).
        depth = next(i for i, part in enumerate(path.parts) if _GLOB_CHARACTERS & set(part))
        root = Path(*path.parts[:depth]) if depth else Path()
        wanted = "files matching it"
    if not files:
        raise ValueError(f"source={text!r} names no log: found no {wanted}")
    return files, root


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
    logs, names = [], []
    for file in files:
        try:
            name = str(file.relative_to(root)) if root != Path() else str(file)
        except ValueError:
            name = str(file)
        logs.append(read_requests(file, format=format, on_error=on_error, time_unit=time_unit))
        names.append(name)
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
    rejected = pd.concat(rejected, ignore_index=True) if rejected else logs[0].rejected
    formats = sorted({log.source.format for log in logs})
    assumptions = [
        f"{name}: {said}"
        for log, name in zip(logs, names, strict=True)
        for said in log.source.assumptions
    ]
    assumptions.insert(0, f"{len(files)} file(s) read, each request's file in column 'source'")
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


#: Columns of ``GroupedSummary.table`` besides the latency figures.
HEADLINE = (
    "n_requests",
    "n_failed",
    "window_s",
    "rps",
    "output_tps",
    "input_tps",
    "total_tps",
    "goodput_rps",
    "good_fraction",
)


@dataclass
class GroupedSummary:
    """A log summarised per group (per source file, replica or hour) beside the total.

    ``by``: the column grouped on. ``groups``: one ``Summary`` per value, in the column's order.
    ``total``: the ``Summary`` of the whole log. ``table``: one row per group plus a last row
    ``total``; columns ``n_requests, n_failed, window_s, rps, output_tps, input_tps, total_tps,
    goodput_rps, good_fraction`` then ``<metric>_mean`` and ``<metric>_p<q>`` for TTFT, TPOT and
    E2E (seconds, per second).

    Introduced in: notebooks/06_log_analysis.ipynb
    """

    by: str
    groups: dict[str, object]
    total: object
    table: pd.DataFrame

    def __str__(self) -> str:
        with pd.option_context("display.float_format", "{:.4g}".format, "display.width", 160):
            return f"per {self.by}:\n{self.table.to_string()}\n\ntotal:\n{self.total}"

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        table = self.table.to_html(float_format="{:.4g}".format)
        return (
            f"<p>per {html.escape(self.by)} (seconds, per second)</p>{table}"
            f"<p>total</p>{self.total._repr_html_()}"
        )


def _headline_row(summary) -> dict[str, float]:
    figures = summary.to_dict()
    row = {key: figures[key] for key in HEADLINE}
    stats = ["mean", *[f"p{q:g}" for q in summary.percentiles]]
    for metric in ("ttft_s", "tpot_s", "e2e_s"):
        for stat in stats:
            row[f"{metric}_{stat}"] = figures[f"{metric}_{stat}"]
    return row


def summarize_by(
    log: RequestLog,
    by: str = "source",
    percentiles: Sequence[float] = (50, 90, 95, 99),
    slo: dict[str, float] | None = None,
) -> GroupedSummary:
    """``summarize`` per value of column ``by`` (default ``source``) and for the whole log.

    Raises ValueError when the log has no column ``by``. Seconds and per-second rates; each
    group's window is its own first start → last end.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    from llminfer.metrics import summarize

    if not isinstance(by, str) or by not in log.requests.columns:
        columns = ", ".join(map(str, log.requests.columns))
        raise ValueError(
            f"by={by!r} is not a column of the log (columns: {columns}); read a directory or "
            "a glob of files to get 'source'"
        )
    total = summarize(log, percentiles=percentiles, slo=slo)
    groups: dict[str, object] = {}
    column = log.requests[by]
    values = column.cat.categories if isinstance(column.dtype, pd.CategoricalDtype) else None
    if values is None:
        values = pd.unique(column.dropna())
    codes = column.to_numpy()
    for value in values:
        part = log.requests[codes == value].reset_index(drop=True)
        if len(part):
            groups[str(value)] = summarize(
                RequestLog(part, source=log.source), percentiles=percentiles, slo=slo
            )
    rows = {name: _headline_row(s) for name, s in groups.items()}
    rows["total"] = _headline_row(total)
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = by
    return GroupedSummary(by=by, groups=groups, total=total, table=table)
