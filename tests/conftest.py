"""Shared test settings and fixtures.

Hypothesis runs derandomized (the same examples every run: the project seeds every random
generator) and without its per-example deadline: the suite runs on small shared machines where
a slow moment is not a failure of the code under test.
"""

import pprint
import shutil
import sys
import tempfile
import time
from pathlib import Path

import matplotlib
import nbval.kernel
import pytest
from hypothesis import HealthCheck, settings

from llminfer import language
from llminfer.plots import fonts
from llminfer.widgets import _prefetch

settings.register_profile(
    "llminfer",
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("llminfer")


# --- the learner's language, shared by the tests of every part -----------------------------


@pytest.fixture
def language_back(monkeypatch):
    """The language setting as it was once the test ends (chosen or not), with
    ``LLMINFER_LANG`` unset meanwhile."""
    monkeypatch.delenv(language.LANGUAGE_ENV, raising=False)
    before = language._chosen
    yield
    language._chosen = before


@pytest.fixture
def cjk_font_as(monkeypatch):
    """``cjk_font_as(name)`` makes ``fonts.cjk_font()`` answer ``name`` (None: no CJK font) for
    the rest of the test, whether or not this machine has one; matplotlib's font family, which
    ``prepare_fonts`` changes, is restored after."""
    real = fonts.cjk_font
    real.cache_clear()

    def pretend(name):
        monkeypatch.setattr(fonts, "cjk_font", lambda: name)
        monkeypatch.setitem(
            matplotlib.rcParams, "font.family", list(matplotlib.rcParams["font.family"])
        )

    yield pretend
    real.cache_clear()


def wait_for_a_picture_ahead(explorer, timeout_s=60.0):
    """Once the prefetch worker has drawn ``explorer``'s picture one step along its first
    control, returns ``(control, step, key)`` (``key``: that picture's cache key); fails after
    ``timeout_s`` seconds."""
    name, control = next(iter(explorer.controls.items()))
    step = _prefetch.steps(control)[0]
    key = explorer._key({**explorer.values(), name: step})
    deadline = time.monotonic() + timeout_s
    while not (key in explorer._ahead and explorer._ahead[key].done()):
        assert time.monotonic() < deadline, "the worker made no picture in time"
        time.sleep(0.05)
    return control, step, key


# The longest files first. `make test` runs pytest-xdist with --dist loadfile: one file to one
# worker, handed out in queue order, so the run ends when the last long file does. xdist's
# default order (most test items first) left notebook 08 (few cells, ~50 s of mostly waiting on
# a paced server) and the heavy widget tests to the end, where they ran with the other workers
# idle: longest first is the classic cure. Durations measured on the 2-core machine
# (`pytest -n 4 --durations=0`, CPU seconds of each file); a file not listed runs after these,
# notebooks before unit tests.
START_FIRST = (
    "notebooks/08_measure_a_server.ipynb",  # 50 s, 11 s of CPU: three paced sweeps
    "notebooks/zh/08_measure_a_server.ipynb",
    "notebooks/02_prefill_and_decode.ipynb",  # 11 s: the toy model's timed generations
    "notebooks/zh/02_prefill_and_decode.ipynb",
    "tests/test_widget_extremes.py",  # 13 s: every explorer control at its ends
    "tests/test_language_widgets.py",  # 9 s
    "notebooks/03_metrics.ipynb",  # 7.5 s: an 11-rate sweep of 2,000 requests
    "notebooks/zh/03_metrics.ipynb",
    "tests/test_diagnose.py",  # 6.6 s
    "tests/test_serve.py",  # 6.6 s
    "tests/test_install.py",  # 6.4 s: a wheel built and installed in a fresh venv
    "notebooks/07_troubleshooting.ipynb",  # 6.2 s
    "notebooks/zh/07_troubleshooting.ipynb",
    "notebooks/05_optimizations.ipynb",  # 6 s
    "notebooks/zh/05_optimizations.ipynb",
    "tests/test_simulate.py",  # 5.2 s
    "tests/test_exercises.py",  # 5 s
    "tests/test_widget_wire.py",  # 4.3 s
)


# --- notebook kernels that start every time ---------------------------------------------------
# nbval starts each notebook's kernel with jupyter_client's default TCP transport: five free
# ports are picked, closed again and bound by the kernel a moment later. With four workers
# starting kernels, servers and commands on loopback at once, another process can take one of
# them in between, and the kernel dies before its first reply ("Kernel died before replying to
# kernel_info": every cell of that notebook an error; once in ten runs of `make test` on the
# 2-core machine, 2026-12-07). A Unix socket in a directory of the kernel's own cannot be taken:
# here kernels talk over IPC (not on Windows, which has none), and one that still dies at start
# is started once more.
_KERNEL_SOCKETS = tempfile.mkdtemp(prefix="llminfer-kernels-")


def _start_kernel(startup_timeout=60, kernel_name="python", **kwargs):
    """nbval's ``start_new_kernel`` over IPC sockets, started again once if it dies at start."""
    for attempt in (1, 2):
        km = nbval.kernel.KernelManager(
            kernel_name=kernel_name,
            kernel_spec_manager=nbval.kernel.NbvalKernelspecManager(),
            transport="ipc",
            ip=str(Path(tempfile.mkdtemp(dir=_KERNEL_SOCKETS)) / "kernel"),
        )
        km.start_kernel(**kwargs)
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=startup_timeout)
        except RuntimeError:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
            if attempt == 2:
                raise
        else:
            return km, kc


if sys.platform != "win32":
    nbval.kernel.start_new_kernel = _start_kernel


class _FormattedWhenLogged:
    """``pprint.pformat(message)``, computed only when a log record is written: nbval passes
    ``pformat(msg)`` of every kernel message to ``logger.debug`` whether or not debug logging is
    on, and those messages carry every figure as base64 PNG (~1 s of CPU a run on 2 cores,
    measured with py-spy, 2026-12-08)."""

    def __init__(self, message):
        self.message = message

    def __str__(self) -> str:
        return pprint.pformat(self.message)


# nbval 0.11's only use of pformat is that logger.debug("Kernel message ...%s", pformat(msg)) in
# RunningKernel.get_message; a newer nbval that used it as a string would need this removed.
nbval.kernel.pformat = _FormattedWhenLogged


def pytest_unconfigure(config):
    shutil.rmtree(_KERNEL_SOCKETS, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    """Put the items of ``START_FIRST``'s files first, in its order, then the other notebooks
    (each several seconds of one kernel), then the unit tests, each group in its collected
    order; with xdist's ``--no-loadscope-reorder`` (the Makefile) that is the order files are
    handed out."""
    rank = {path: i for i, path in enumerate(START_FIRST)}

    def order(item):
        path = item.nodeid.split("::")[0]
        return rank.get(path, len(rank) + (not path.endswith(".ipynb")))

    items.sort(key=order)
