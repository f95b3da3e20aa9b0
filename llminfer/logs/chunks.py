"""The gaps between a streamed response's chunks: what ITL is made of.

One place for the pooled chunk gaps of a log's requests, used by the per-request metrics
(``metrics``), each tool's definitions side by side (``definitions``) and each tool's own rules
(``rules``); it needs only the log's ``token_ts`` (and ``chunk_tokens``) columns.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def chunk_gaps(requests: pd.DataFrame, per_token: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Pooled gaps between consecutive chunks of every request, and the owning row of each.

    ``requests`` has a ``token_ts`` column (per request an array of chunk times, s); gaps in
    seconds. With ``per_token`` a gap before a chunk of k tokens becomes k samples of gap / k
    (SGLang's ITL; needs ``chunk_tokens``).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    cells = requests["token_ts"].to_numpy(dtype=object)
    present = np.array([c is not None and not np.isscalar(c) for c in cells], dtype=bool)
    if not present.any():
        return np.empty(0), np.empty(0, dtype=np.int64)
    arrays = [np.asarray(c, dtype=float) for c in cells[present]]
    lengths = np.array([a.size for a in arrays])
    flat = np.concatenate(arrays)
    owner = np.repeat(np.flatnonzero(present), lengths)
    gaps = np.diff(flat)
    inside = owner[1:] == owner[:-1]  # drop the jumps from one request's last chunk to the next
    gaps, gap_owner = gaps[inside], owner[1:][inside]
    if per_token and "chunk_tokens" in requests.columns:
        counts_cells = requests["chunk_tokens"].to_numpy(dtype=object)[present]
        counts = np.concatenate(
            [
                np.ones(n) if c is None or np.isscalar(c) else np.asarray(c, dtype=float)
                for c, n in zip(counts_cells, lengths, strict=True)
            ]
        )[1:][inside].astype(np.int64)
        gaps = np.repeat(gaps / counts, counts)
        gap_owner = np.repeat(gap_owner, counts)
    return gaps, gap_owner
