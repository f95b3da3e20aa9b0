"""Kernel-side time from a control's change to a new picture, per explorer: the explorers'
pipeline (one figure drawn into again, layout of the first picture reused, light PNG) against
the baseline it replaced (a new figure, constrained layout and a default PNG every time).

Usage: python benchmarks/bench_widgets.py [--repeat 3]

Every control of every explorer is moved one step; the picture cache is emptied before each
move so only fresh pictures are timed. Times are best of --repeat, in ms; the ratio
baseline / pipeline is what to compare across machines (a shared machine slows both alike).
The browser adds ~50 ms to these (scripts/browser_check.py measures input → picture there).

"floor" is the explorer's current figure made into its PNG again with nothing changed (no new
artists, no layout; rendering and the light PNG only, at the explorers' 90 dpi): what any
matplotlib-drawn picture costs at least, however its artists are made. Where it nears the
150 ms budget for a new picture in the browser, drawing after the move cannot meet it: the
explorers draw the next pictures ahead instead (llminfer/widgets/_prefetch.py).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import llminfer.widgets as explorers
from llminfer import read_requests
from llminfer.plots._figure import figure_png
from llminfer.sim.loadsweep import sweep
from llminfer.sim.workload import Workload
from llminfer.widgets._explorer import PNG_COMPRESS_LEVEL
from llminfer.widgets._prefetch import steps

DATA = Path(__file__).resolve().parent.parent / "data"


def build(name: str):
    cls = getattr(explorers, name)
    if name == "SLOExplorer":
        return cls(read_requests(DATA / "requests.csv"))
    if name == "LoadExplorer":
        from llminfer import get_gpu, get_model

        table = sweep(
            Workload(200, rate=1.0, seed=0), get_model("llama-3.1-8b"), get_gpu("h100-sxm"),
            rates=[1, 8, 32],
        )  # fmt: skip
        return cls(table)
    return cls()


def next_value(control):
    """One step up (the next option, a checkbox flipped), or down at the top of the range."""
    return steps(control)[0]


def baseline_ms(explorer, repeat: int) -> float:
    """The replaced pipeline: compute, a new figure, full layout, PNG at zlib level 6."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        result = explorer.compute(**explorer.values())
        explorer.describe(result)
        figure = explorer.draw(result)  # outside drawing_into: a brand-new figure
        if figure is not None:
            figure_png(figure)
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def pipeline_ms(explorer, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        explorer._pictures.clear()
        explorer.update()
        best = min(best, explorer.last_update_s)
    return best * 1e3


def floor_ms(explorer, repeat: int) -> float:
    """The current figure's PNG made again, unchanged: matplotlib's own cost per picture."""
    figure = explorer.figure
    if figure is None:
        return float("nan")
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        figure_png(figure, compress_level=PNG_COMPRESS_LEVEL)
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows = []
    for name in [n for n in explorers.__all__ if n != "Explorer"]:
        explorer = build(name)
        base, new = [], []
        for control in explorer.controls.values():
            control.value = next_value(control)
            if explorer.error is not None:
                continue
            new.append(pipeline_ms(explorer, args.repeat))
            base.append(baseline_ms(explorer, args.repeat))
        b, n = statistics.median(base), statistics.median(new)
        floor = floor_ms(explorer, args.repeat)
        rows.append((name, b, n, floor))
        print(f"{name:24s} baseline {b:7.1f} ms  pipeline {n:7.1f} ms (max {max(new):6.1f})  "
              f"{b / n:4.2f}x  floor {floor:6.1f} ms", flush=True)  # fmt: skip
    base = statistics.median(r[1] for r in rows)
    new = statistics.median(r[2] for r in rows)
    floor = statistics.median(r[3] for r in rows)
    print(f"median over explorers: baseline {base:.1f} ms, pipeline {new:.1f} ms, "
          f"{base / new:.2f}x faster; matplotlib's floor {floor:.1f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
