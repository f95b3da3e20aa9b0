"""Write data/replicas/: five minutes of one service's request logs, one CSV per replica (seeded).

Usage: python scripts/make_replica_logs.py [out_dir]   (default: data/replicas)

Three replicas of the same model sit behind a round-robin load balancer that sends them ~4
requests/s in all. ``replica-a`` and ``replica-b`` are healthy; ``replica-c`` shares its GPU
with another job, so its prefill and decode run 1.6× slower and requests queue there. Across
the whole service the slowdown is diluted to a modest tail; per replica it is obvious — which
is what notebook 06 shows with ``summarize(log, by="source")``. Each replica numbers its
requests from ``r00001`` (ids are unique per file, not across files, as in real deployments);
about 1 % of requests fail. Columns: the article's plus ``status`` and ``error``.

Synthetic, not from a real server. Re-running writes identical files (tests/test_replica_logs.py
checks that).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

SEED = 20240616
REPLICAS = {"replica-a": 1.0, "replica-b": 1.0, "replica-c": 1.6}  # name → slowdown factor
DURATION_S = 300.0
TOTAL_RATE = 4.0  # requests/s across the three replicas
EPOCH = 1_718_524_800  # 2024-06-16 08:00 UTC in seconds: any clock works


def replica_logs(seed: int = SEED) -> dict[str, pd.DataFrame]:
    """One DataFrame per replica (file stem → requests), timestamps in seconds."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1 / TOTAL_RATE, int(DURATION_S * TOTAL_RATE * 1.3)))
    arrivals = arrivals[arrivals < DURATION_S]
    names = list(REPLICAS)
    logs = {}
    for k, name in enumerate(names):
        start = arrivals[k :: len(names)]  # round robin
        n = start.size
        slow = REPLICAS[name]
        inputs = np.clip(rng.lognormal(np.log(900), 0.7, n), 16, 16_000).astype(np.int64)
        outputs = np.clip(rng.lognormal(np.log(200), 0.6, n), 2, 2048).astype(np.int64)
        # A slower replica is busier for the same arrivals, so its queue grows more than 1.6×.
        queue = rng.exponential(0.01 if slow == 1.0 else 0.25, n)
        prefill = slow * (0.015 + inputs / 15_000) * rng.uniform(0.9, 1.2, n)
        tpot = slow * 0.024 * rng.gamma(30, 1 / 30, n)
        first = start + queue + prefill
        end = first + (outputs - 1) * tpot
        frame = pd.DataFrame(
            {
                "request_id": [f"r{i + 1:05d}" for i in range(n)],
                "start_ts": EPOCH + start,
                "first_token_ts": EPOCH + first,
                "end_ts": EPOCH + end,
                "input_tokens": inputs,
                "output_tokens": outputs,
                "status": "ok",
                "error": "",
            }
        )
        failed = rng.uniform(size=n) < 0.01
        frame.loc[failed, "status"] = "failed"
        frame.loc[failed, "error"] = "HTTP 503"
        frame.loc[failed, ["first_token_ts", "end_ts", "output_tokens"]] = np.nan
        for column in ("start_ts", "first_token_ts", "end_ts"):
            frame[column] = frame[column].round(4)
        frame["output_tokens"] = frame["output_tokens"].astype("Int64")
        logs[name] = frame
    return logs


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else Path(__file__).resolve().parent.parent / "data" / "replicas"
    out.mkdir(parents=True, exist_ok=True)
    for name, frame in replica_logs().items():
        frame.to_csv(out / f"{name}.csv", index=False, lineterminator="\n")
    print(f"wrote {len(REPLICAS)} replica logs to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
