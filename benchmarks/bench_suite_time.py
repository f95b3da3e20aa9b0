"""Where `make test`'s time goes (issue 20): run `make test` and print its wall time, its CPU
time and each file's CPU seconds, longest first.

    python benchmarks/bench_suite_time.py [--workers N] [--top 25] [-- extra pytest args]

Each xdist worker records, around every test item, the CPU seconds of its own process and of
the children it reaped in that time (``resource.getrusage``: a notebook's kernel is reaped when
its last cell ends, a server fixture's process when the fixture stops), summed per file. The
suite is CPU-bound on a small machine, so this, not ``--durations`` (wall time, inflated by
whatever else runs), says which file to make cheaper; ``tests/conftest.py``'s ``START_FIRST``
lists the longest files so they are handed out first. Run it on an idle machine: the numbers
move with other work.

Measured on 2026-12-02 (2 shared cores of an AMD EPYC, 4 workers, 2,523 items, idle): wall
144 s, CPU 279 s in all, 243 s inside test items (another run of the same commit: 125 s, 235 s);
the longest files: tests/test_widget_extremes.py 13.2 s, notebook 08 13.0 s and notebook 02
11.5 s in each edition, notebook 05 8.7 s, tests/test_serve.py 8.6 s, notebook 07 8.5 s,
tests/test_install.py 8.4 s, notebook 03 8.4 s, tests/test_language_widgets.py 8.1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The plugin each worker loads (-p): per-file CPU seconds written to a JSON file per process.
PLUGIN = """
import json, os, resource
from collections import defaultdict
import pytest

_cpu = defaultdict(float)

def _now():
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before = _now()
    yield
    _cpu[item.nodeid.split("::")[0]] += _now() - before

def pytest_sessionfinish(session):
    out = os.path.join(os.environ["SUITE_CPU_DIR"], f"{os.getpid()}.json")
    with open(out, "w") as f:
        json.dump(dict(_cpu), f)
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workers", type=int, default=None, help="xdist workers (default: make's rule)"
    )
    parser.add_argument("--top", type=int, default=25, help="files to print")
    parser.add_argument("pytest_args", nargs="*", help="after --: more pytest arguments")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "suite_cpu_plugin.py").write_text(PLUGIN)
        # make test itself, so the environment, workers and order are the Makefile's own
        env = dict(os.environ, SUITE_CPU_DIR=tmp)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [tmp, env.get("PYTHONPATH")]))
        command = ["make", "test", "PYTEST_ARGS=-p suite_cpu_plugin " + " ".join(args.pytest_args)]
        if args.workers:
            command.append(f"PYTEST_WORKERS={args.workers}")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        code = subprocess.call(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        per_file: Counter[str] = Counter()
        for path in Path(tmp).glob("*.json"):
            per_file.update(json.loads(path.read_text()))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(f"make test exit {code}; wall {wall:.0f} s; CPU {cpu:.0f} s in all, "
          f"{sum(per_file.values()):.0f} s inside test items")  # fmt: skip
    for path, seconds in per_file.most_common(args.top):
        print(f"{seconds:7.1f} s  {path}")
    return code


if __name__ == "__main__":
    sys.exit(main())
