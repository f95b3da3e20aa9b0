"""What the Python that runs llminfer can do: threads, processes, memory-mapped files.

A JupyterLite site runs llminfer in Pyodide (CPython compiled to WebAssembly, in a browser
tab): ``sys.platform == "emscripten"``, and there is no thread, no child process and no
``mmap`` of a file. The few places that use them for speed (``diagnose()``'s signals on two
threads, the CSV reader's scan for a quote, the explorers' pictures drawn ahead in worker
processes) ask here first and otherwise do the same work serially or with plain reads, with
identical results (``tests/test_runtime_fallbacks.py`` runs both paths natively).

Each answer is found by *trying* once (a thread started and joined, ``os.fork``'s presence and
a ``multiprocessing`` lock, a one-page ``mmap``), not only from the platform's name, and kept.
``LLMINFER_EMULATE_PYODIDE=1`` makes every answer False on any machine: ``make test-lite``
runs the notebooks so, to show they pass where Pyodide cannot do these things.

``optional(module, feature)`` imports a package that only some features need (duckdb,
pyarrow: neither is part of Pyodide's default set) and raises an ImportError that names the
feature and the package when it is missing.

Introduced in: notebooks/01_introduction.ipynb (the JupyterLite site's first cell)
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import tempfile
from types import ModuleType

#: Set to 1 to behave as in Pyodide: no threads, processes or mmap (``make test-lite``).
EMULATE_ENV = "LLMINFER_EMULATE_PYODIDE"


def emulating_pyodide() -> bool:
    """Whether ``LLMINFER_EMULATE_PYODIDE=1`` asks llminfer to behave as in Pyodide.

    Introduced in: notebooks/01_introduction.ipynb (the JupyterLite site's first cell)
    """
    return os.environ.get(EMULATE_ENV, "").strip() not in ("", "0")


def in_pyodide() -> bool:
    """Whether this Python is Pyodide (WebAssembly in a browser), or emulates it.

    Introduced in: notebooks/01_introduction.ipynb (the JupyterLite site's first cell)
    """
    return sys.platform == "emscripten" or emulating_pyodide()


def can_use_threads() -> bool:
    """Whether a thread can be started here (never in Pyodide, nor when emulating it).

    Introduced in: notebooks/01_introduction.ipynb (the JupyterLite site's first cell)
    """
    return not emulating_pyodide() and _threads_work()


def can_use_processes() -> bool:
    """Whether worker processes can be started here (never in Pyodide, nor when emulating).

    Introduced in: notebooks/01_introduction.ipynb (the JupyterLite site's first cell)
    """
    return not emulating_pyodide() and _processes_work()


def can_mmap() -> bool:
    """Whether a file can be memory-mapped here (Pyodide's file system says "No such
    device"; never when emulating Pyodide).

    Introduced in: notebooks/01_introduction.ipynb (the JupyterLite site's first cell)
    """
    return not emulating_pyodide() and _mmap_works()


@functools.cache
def _threads_work() -> bool:
    if sys.platform == "emscripten":
        return False
    try:
        import threading

        thread = threading.Thread(target=lambda: None, daemon=True)
        thread.start()
        thread.join(5)
        return not thread.is_alive()
    except (RuntimeError, ImportError, OSError):
        return False


@functools.cache
def _processes_work() -> bool:
    if sys.platform in ("emscripten", "wasi"):
        return False
    try:
        import multiprocessing
        import multiprocessing.synchronize  # needs a working sem_open

        multiprocessing.get_context("spawn").Lock()
    # A platform without POSIX semaphores (Pyodide, some sandboxes) raises NotImplementedError
    # from sem_open: that too means "no worker processes here".
    except (ImportError, OSError, NotImplementedError):
        return False
    return True


@functools.cache
def _mmap_works() -> bool:
    if sys.platform == "emscripten":
        return False
    try:
        import mmap

        with tempfile.TemporaryFile() as file:
            file.write(b"x")
            file.flush()
            with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as view:
                return view[:1] == b"x"
    except (ImportError, OSError, ValueError):
        return False


def optional(module: str, feature: str) -> ModuleType:
    """Import ``module`` (e.g. ``"duckdb"``, ``"pyarrow.dataset"``) for ``feature``; an
    ImportError naming both, and how to get the package, when it is missing.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        package = module.split(".")[0]
        where = (
            f" (in the JupyterLite site: `await micropip.install({package!r})`, where Pyodide"
            " has it)"
            if in_pyodide()
            else ""
        )
        raise ImportError(
            f"{feature} needs the optional package {package}, which is not installed: "
            f"pip install {package}{where}"
        ) from exc
