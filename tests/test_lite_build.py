"""`make lite`'s own logic, without the network or a browser (scripts/build_lite.py, issue 26):
which Pyodide packages the site serves itself, the lock rewritten for them, a teacher's wheel
folder (WHEELS=DIR) taken in, and the site's notebook copies."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def build_lite():
    spec = importlib.util.spec_from_file_location("build_lite", ROOT / "scripts/build_lite.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["build_lite"] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules["build_lite"]


def _entry(name, version, file_name, depends=()):
    return {"name": name, "version": version, "file_name": file_name, "sha256": "0" * 64,
            "depends": list(depends)}  # fmt: skip


@pytest.fixture
def fake_pyodide(tmp_path, monkeypatch, build_lite):
    """A Pyodide 'core' whose lock has a pure and a WebAssembly package, and a wheel cache."""
    core = tmp_path / "package"
    core.mkdir()
    wasm = "numpy-2.4.6-cp314-cp314-pyemscripten_2026_0_wasm32.whl"
    lock = {
        "info": {"python": "3.14.2"},
        "packages": {
            "micropip": _entry("micropip", "0.11.1", "micropip-0.11.1-py3-none-any.whl"),
            "numpy": _entry("numpy", "2.4.6", wasm),
            "pandas": _entry("pandas", "3.0.2", "pandas-3.0.2-cp314.whl", ["numpy", "six"]),
            "six": _entry("six", "1.17.0", "six-1.17.0-py2.py3-none-any.whl"),
            "unrelated": _entry("unrelated", "1.0", "unrelated-1.0-py3-none-any.whl"),
        },
    }
    (core / "pyodide-lock.json").write_text(json.dumps(lock))
    (core / "pyodide.mjs").write_text("// core")
    monkeypatch.setattr(build_lite, "pyodide_core", lambda: core)
    cache = tmp_path / "cache"
    monkeypatch.setattr(build_lite, "CACHE", cache)
    fetched = []

    def download(specs, into):  # stands in for pip download from PyPI
        into.mkdir(parents=True, exist_ok=True)
        for spec in specs:
            name, version = spec.split("==")
            fetched.append(spec)
            (into / f"{name}-{version}-py3-none-any.whl").write_bytes(spec.encode())

    monkeypatch.setattr(build_lite, "download", download)
    return {"wasm": wasm, "fetched": fetched}


def test_the_site_serves_the_pure_wheels_it_needs_and_names_the_rest(
    tmp_path, build_lite, fake_pyodide
):
    site = tmp_path / "site"
    where = build_lite.write_pyodide(site, wheels=None)
    assert sorted(fake_pyodide["fetched"]) == ["micropip==0.11.1", "six==1.17.0"]  # not unrelated
    lock = json.loads((site / "static/pyodide/pyodide-lock.json").read_text())["packages"]
    served = site / "static/pyodide" / lock["micropip"]["file_name"]
    assert served.exists()
    assert lock["micropip"]["sha256"] == hashlib.sha256(served.read_bytes()).hexdigest()
    assert lock["numpy"]["file_name"] == build_lite.CDN + fake_pyodide["wasm"]
    assert where["cdn"] == ["numpy", "pandas"] and "micropip" in where["served"]
    assert (site / "static/pyodide/pyodide.mjs").exists()


def test_a_teachers_wheel_folder_is_served_from_the_site(tmp_path, build_lite, fake_pyodide):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / fake_pyodide["wasm"]).write_bytes(b"numpy for wasm")
    (wheels / "unrelated-1.0-py3-none-any.whl").write_bytes(b"a release archive holds all")
    site = tmp_path / "site"
    where = build_lite.write_pyodide(site, wheels=wheels)
    lock = json.loads((site / "static/pyodide/pyodide-lock.json").read_text())["packages"]
    assert lock["numpy"]["file_name"] == fake_pyodide["wasm"]
    assert lock["numpy"]["sha256"] == hashlib.sha256(b"numpy for wasm").hexdigest()
    assert (site / "static/pyodide" / fake_pyodide["wasm"]).read_bytes() == b"numpy for wasm"
    assert where["cdn"] == ["pandas"]  # not in the folder: still the CDN's
    assert not (site / "static/pyodide/unrelated-1.0-py3-none-any.whl").exists()  # not needed


def test_the_site_copies_start_with_the_prepare_cell(tmp_path, build_lite):
    names = build_lite.notebook_copies(tmp_path / "contents")
    assert names[:7] == sorted(p.name for p in (ROOT / "notebooks").glob("0[1-7]_*.ipynb"))
    assert (tmp_path / "contents/data/requests.csv").exists()
    for name in names:
        original = nbformat.read(ROOT / "notebooks" / name, as_version=4)
        copy = nbformat.read(tmp_path / "contents/notebooks" / name, as_version=4)
        first = copy.cells[0]
        assert build_lite.PREPARE_TAG in first.metadata["tags"]
        assert [c.source for c in copy.cells[1:]] == [c.source for c in original.cells]
        if name.startswith("08"):
            assert first.cell_type == "markdown" and "local Python" in first.source
        else:
            assert first.cell_type == "code" and "NOT READY: " in first.source
            compile(first.source, name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    chapter6 = nbformat.read(tmp_path / "contents/notebooks/06_log_analysis.ipynb", 4)
    tagged = [c for c in chapter6.cells if "raises-exception" in c.metadata.get("tags", [])]
    assert tagged and all(build_lite.NEEDS_OPTIONAL.search(c.source) for c in tagged)
