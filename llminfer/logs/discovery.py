"""Which files a directory or a glob of request logs names (one replica or one hour each).

``read_requests``, ``summarize_stream`` and ``run_metrics_sql`` all find their files here, so a
directory means the same set of files to each of them.
"""

from __future__ import annotations

import glob as globbing
from pathlib import Path

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
