"""Write a request log as the article's CSV, so that ``read_requests`` reads it back exactly.

Used by chapter 8's load generator (``llminfer.bench``) for what it measured and by chapter 7's
case studies (``llminfer.diagnose.cases``) for the logs they ship in ``data/``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


def _cell(values) -> str:
    if values is None:
        return ""
    array = np.asarray(values)
    if array.dtype.kind == "f":
        return " ".join(f"{v:.6f}" for v in array)
    return " ".join(str(int(v)) for v in array)


def write_log(frame: pd.DataFrame, path: str | Path) -> Path:
    """Write a request log as CSV that ``read_requests`` reads back (arrays as space-separated
    numbers, times to the microsecond).

    Introduced in: notebooks/08_measure_a_server.ipynb
    """
    path = Path(path)
    out = frame.copy()
    for column in ("token_ts", "chunk_tokens"):
        if column in out.columns:
            out[column] = [_cell(v) for v in out[column]]
    path.parent.mkdir(parents=True, exist_ok=True)
    out.to_csv(path, index=False, float_format="%.6f")
    return path
