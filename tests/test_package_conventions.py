"""Conventions of the package itself (CONVENTIONS.md, "The package")."""

import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import llminfer

PUBLIC_MODULES = [
    m.name
    for m in pkgutil.walk_packages(llminfer.__path__, "llminfer.")
    if not any(part.startswith("_") for part in m.name.split("."))
]


def test_import_llminfer_loads_neither_matplotlib_nor_ipywidgets():
    code = "import sys, llminfer; print('matplotlib' in sys.modules, 'ipywidgets' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_every_public_function_and_class_says_where_it_is_introduced():
    missing, notebooks = [], set()
    for name in PUBLIC_MODULES:
        module = importlib.import_module(name)
        for attr, obj in vars(module).items():
            if attr.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            if inspect.isfunction(obj) or inspect.isclass(obj):
                doc = inspect.getdoc(obj) or ""
                found = re.search(r"Introduced in: (notebooks/\S+\.ipynb)", doc)
                if found is None:
                    missing.append(f"{name}.{attr}")
                else:
                    notebooks.add(found.group(1))
    assert not missing, missing
    root = Path(__file__).resolve().parent.parent
    assert all((root / nb).is_file() for nb in notebooks), notebooks


def test_no_grab_bag_modules():
    assert not any(
        name.rsplit(".", 1)[-1] in {"utils", "helpers", "misc"} for name in PUBLIC_MODULES
    )
