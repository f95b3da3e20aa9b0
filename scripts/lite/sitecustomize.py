"""`make test-lite` puts this folder on PYTHONPATH: pyarrow and duckdb cannot be imported, as in
Pyodide's default set (the notebook kernels inherit it). llminfer must then read logs with
pandas alone and say, in one line naming the feature, where a section needs either."""

import importlib.abc
import sys

BLOCKED = ("pyarrow", "duckdb")


class _Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked: Pyodide emulation)")
        return None


sys.meta_path.insert(0, _Blocked())
