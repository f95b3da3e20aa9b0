"""Write chapter 7's case-study logs to data/case_<name>.csv from their seeds.

Usage: python scripts/make_case_studies.py [DIRECTORY]   (default: data/)

The cases themselves (workload, deployment, expected bottleneck, fix) are defined in
llminfer/cases.py; this script only runs the simulator and writes the logs, so a reader can
regenerate every file and get the same bytes.
"""

from __future__ import annotations

import sys
from pathlib import Path

from llminfer.diagnose.cases import write_case_logs


def main(argv: list[str]) -> int:
    directory = Path(argv[0]) if argv else Path(__file__).resolve().parent.parent / "data"
    for path in write_case_logs(directory):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
