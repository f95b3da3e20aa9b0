"""Build the workshop's JupyterLite site (``make lite``): chapters 1–7 in a browser tab, no install.

Usage: python scripts/build_lite.py [--out site] [--wheels DIR]

``site/`` (git-ignored) is a static folder: serve it (``python -m http.server -d site``) or copy
it to a USB stick. It holds

* JupyterLite and its Pyodide kernel (Python 3.14 in WebAssembly), from ``.venv-lite``;
* the Pyodide core (``pyodide@PYODIDE`` from the npm registry, ``npm pack``) in
  ``static/pyodide/``, with a ``pyodide-lock.json`` rewritten so that every pure-Python wheel the
  kernel and llminfer need is served from the site itself (downloaded from PyPI at the version
  Pyodide locks, its checksum rewritten), and the WebAssembly wheels (numpy, pandas, matplotlib
  and theirs, pyarrow, duckdb) come from Pyodide's CDN — or, with ``--wheels DIR``
  (``make lite WHEELS=DIR``), from the site, copied from a folder the teacher filled on a
  connected machine (README: "The workshop in a browser tab");
* the llminfer wheel and the pure wheels it needs that Pyodide lacks (ipywidgets,
  prometheus_client, ...) in ``pypi/``, for piplite, with PyPI never asked;
* copies of the notebooks 01–08 and ``data/``: each copy starts with a cell that prepares the
  kernel (``PREPARE``; the repository's notebooks are not changed), cells that need an optional
  package Pyodide may lack are tagged ``raises-exception`` (Run All goes on past them), and 08,
  which needs a local Python, says so above its saved outputs;
* settings: one notebook's kernel at a time (no tabs restored; closing a notebook shuts its
  kernel down).

Downloads are kept in ``build/lite/`` so a second build needs no network at all.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "build" / "lite"
PYODIDE = "314.0.6"  # the Pyodide jupyterlite-pyodide-kernel 0.8.6 is made for (Python 3.14)
CDN = f"https://cdn.jsdelivr.net/pyodide/v{PYODIDE}/full/"
#: What the Pyodide kernel itself loads (micropip, then ipython and jedi through piplite), and
#: what the notebooks need from Pyodide's distribution; their dependencies follow from the lock.
KERNEL_NEEDS = ("micropip", "ipython", "jedi", "packaging", "tqdm")
SCIENTIFIC = ("numpy", "pandas", "matplotlib")
OPTIONAL = ("pyarrow", "duckdb")  # chapter 6's SQL and streaming sections only
#: Pure-Python wheels from PyPI that Pyodide does not ship: llminfer's and the explorers' (their
#: versions are requirements.txt's, so the site runs what `make test` tests).
PIPLITE = {
    "prometheus-client": "0.26.0",
    "ipywidgets": "8.1.9",
    "jupyterlab-widgets": "3.0.17",
    "comm": "0.2.3",
}  # (tqdm: Pyodide locks its own, which micropip takes first; served from static/pyodide/)
#: Cells calling these need pyarrow/duckdb (not in Pyodide's default set): tagged so Run All
#: continues past the one-line ImportError where they are missing.
NEEDS_OPTIONAL = re.compile(r"\b(run_metrics_sql|summarize_stream)\(")
PREPARE_TAG = "llminfer-lite-prepare"

PREPARE = """\
# JupyterLite only (this cell is not in the repository's notebook): prepare this browser tab's
# Python (Pyodide) for llminfer: load {wanted} from Pyodide, install llminfer from this site.
import importlib
import sys

_wanted = {wanted!r}
_optional = {optional!r}
if sys.platform == "emscripten":
    import piplite
    import pyodide_js

    for _name in _wanted + _optional:  # Pyodide's own builds (its messages go to the console)
        try:
            await pyodide_js.loadPackage(_name)
        except Exception:
            pass  # said below, in one line
    await piplite.install({piplite!r}, deps=False, keep_going=True)
_missing = []
for _name in _wanted:
    try:
        importlib.import_module(_name)
    except ImportError:
        _missing.append(_name)
if _missing:
    try:  # `import llminfer` needs none of them; its parts do
        import llminfer

        _ours = f"llminfer {{llminfer.__version__}} installed from this site and imports"
    except ImportError:
        _ours = "llminfer NOT installed"
    print(
        "NOT READY: " + ", ".join(_missing) + " did not import: Pyodide's WebAssembly wheels "
        "are not in this site and its CDN is not reachable (offline?); rebuild the site with "
        "`make lite WHEELS=DIR` (README: The workshop in a browser tab) or connect and restart "
        f"the kernel ({{_ours}})"
    )
else:
    import llminfer
    from llminfer import runtime

    _absent = []
    for _name in _optional:
        try:
            importlib.import_module(_name)
        except ImportError:
            _absent.append(_name)
    print(
        f"ready: llminfer {{llminfer.__version__}} on Python {{sys.version.split()[0]}} "
        f"({{sys.platform}}), " + ", ".join(
            f"{{n}} {{importlib.import_module(n).__version__}}" for n in _wanted
        )
        + f"; threads {{runtime.can_use_threads()}}, processes {{runtime.can_use_processes()}}"
        + (f"; without {{', '.join(_absent)}} (the SQL/streaming cells say so)" if _absent else "")
    )
"""

LOCAL_ONLY = """\
**In the JupyterLite site this notebook only shows its saved outputs.** Chapter 8 measures a
real server: it starts `llminfer serve` and a load generator in processes and talks HTTP to
them, which a browser tab cannot do. Run it in a local Python (`make lab`, README); below are
the outputs of its last run there.
"""


def run(*command: str, **kwargs) -> None:
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True, **kwargs)


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pyodide_core() -> Path:
    """The npm package's folder (``package/``), packed once into the cache."""
    tarball = CACHE / f"pyodide-{PYODIDE}.tgz"
    unpacked = CACHE / f"pyodide-{PYODIDE}"
    if not tarball.exists():
        if shutil.which("npm") is None:
            sys.exit(f"make lite needs npm (for pyodide@{PYODIDE}) or {tarball}")
        CACHE.mkdir(parents=True, exist_ok=True)
        run("npm", "pack", f"pyodide@{PYODIDE}", "--pack-destination", str(CACHE), "--silent")
    if not (unpacked / "package" / "pyodide-lock.json").exists():
        shutil.rmtree(unpacked, ignore_errors=True)
        with tarfile.open(tarball) as archive:
            _extract(archive, unpacked)
    return unpacked / "package"


def _extract(archive: tarfile.TarFile, into: Path) -> None:
    """Unpack ``archive`` into ``into`` with tarfile's "data" filter (no member outside it, no
    links out, no devices); a Python without the filter (before 3.11.4: Debian 12's 3.11.2)
    gets the same rule checked here, and the archive is refused if a member breaks it."""
    if hasattr(tarfile, "data_filter"):
        archive.extractall(into, filter="data")
        return
    root = into.resolve()
    for member in archive.getmembers():
        inside = (into / member.name).resolve().is_relative_to(root)
        if not inside or not (member.isfile() or member.isdir()):
            sys.exit(f"refusing {archive.name}: {member.name!r} is not a file or folder inside it")
    archive.extractall(into)  # every member checked above


def closure(packages: dict, names) -> list[str]:
    """``names`` and everything they depend on in the lock, by normalised name."""
    index = {normal(k): k for k in packages}
    seen: list[str] = []
    todo = [normal(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen or name not in index:
            continue
        seen.append(name)
        todo += [normal(d) for d in packages[index[name]]["depends"]]
    return [index[n] for n in seen]


def pure(file_name: str) -> bool:
    return file_name.endswith("-none-any.whl")


def download(specs: list[str], into: Path) -> None:
    """Pure-Python wheels from PyPI (for Python 3.14, whatever runs this), kept in ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    base = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(into)]
    base += ["--only-binary=:all:", "--python-version", "3.14", "--implementation", "py"]
    try:
        run(*base, *specs)
    except subprocess.CalledProcessError:  # one at a time, to name the one that failed
        for spec in specs:
            try:
                run(*base, spec)
            except subprocess.CalledProcessError:
                print(f"make lite: no PyPI wheel for {spec}; it will come from Pyodide's CDN")


def find_wheel(folder: Path, name: str, version: str) -> Path | None:
    for path in sorted(folder.glob("*.whl")):
        parts = path.name.split("-")
        if normal(parts[0]) == normal(name) and parts[1] == version:
            return path
    return None


def write_pyodide(site: Path, wheels: Path | None) -> dict:
    """The Pyodide core and its lock into ``site/static/pyodide``; returns what came from where."""
    core = pyodide_core()
    target = site / "static" / "pyodide"
    target.mkdir(parents=True, exist_ok=True)
    for path in core.iterdir():
        if path.suffix != ".map" and path.name not in ("README.md", "package.json"):
            shutil.copy(path, target / path.name)
    lock = json.loads((core / "pyodide-lock.json").read_text())
    packages = lock["packages"]
    needed = closure(packages, KERNEL_NEEDS + SCIENTIFIC + OPTIONAL)
    pure_dir = CACHE / "pyodide-pure"
    wanted = [n for n in needed if pure(packages[n]["file_name"])]
    missing = [n for n in wanted if not find_wheel(pure_dir, n, packages[n]["version"])]
    if missing:
        download([f"{n}=={packages[n]['version']}" for n in missing], pure_dir)
    served, cdn = [], []
    for name, entry in packages.items():
        local = None
        if name in needed and pure(entry["file_name"]):
            local = find_wheel(pure_dir, name, entry["version"])
        if local is None and wheels is not None and name in needed:  # not a whole release
            given = wheels / entry["file_name"]
            local = given if given.exists() else None
        if local is not None:
            shutil.copy(local, target / local.name)
            entry["file_name"], entry["sha256"] = local.name, sha256(local)
            served.append(name)
        else:
            entry["file_name"] = CDN + entry["file_name"]  # Pyodide takes a full URL as is
            if name in needed:
                cdn.append(name)
    (target / "pyodide-lock.json").write_text(json.dumps(lock, separators=(",", ":")))
    return {"served": sorted(served), "cdn": sorted(cdn)}


def piplite_wheels() -> list[Path]:
    """llminfer's wheel (built from this checkout) and the pure wheels it needs from PyPI."""
    folder = CACHE / "piplite"
    shutil.rmtree(folder / "llminfer", ignore_errors=True)
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
        "-w", str(folder / "llminfer"), str(ROOT))  # fmt: skip
    shutil.rmtree(ROOT / "build" / "lib", ignore_errors=True)
    others = folder / "pypi"
    missing = [f"{n}=={v}" for n, v in PIPLITE.items() if not find_wheel(others, n, v)]
    if missing:
        download(missing, others)
    found = [find_wheel(others, n, v) for n, v in PIPLITE.items()]
    if None in found:
        sys.exit(f"make lite: missing wheels in {others}: {PIPLITE}")
    return [*sorted((folder / "llminfer").glob("llminfer-*.whl")), *found]


def notebook_copies(contents: Path) -> list[str]:
    """The site's notebooks: the repository's, each with the prepare cell first."""
    import nbformat

    shutil.rmtree(contents, ignore_errors=True)
    (contents / "notebooks").mkdir(parents=True)
    shutil.copytree(ROOT / "data", contents / "data")
    names = []
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        if path.name.startswith("08"):
            note = nbformat.v4.new_markdown_cell(LOCAL_ONLY)
            note.metadata["tags"] = [PREPARE_TAG]
            nb.cells.insert(0, note)
        else:
            optional = any(NEEDS_OPTIONAL.search(c.source) for c in nb.cells)
            source = PREPARE.format(
                wanted=SCIENTIFIC,
                optional=OPTIONAL if optional else (),
                piplite=[*PIPLITE, "tqdm", "llminfer"],
            )
            cell = nbformat.v4.new_code_cell(source)
            cell.metadata["tags"] = [PREPARE_TAG, "nbval-ignore-output"]
            cell.metadata["trusted"] = True
            cell.metadata["jupyter"] = {"source_hidden": True}  # its one line is what matters
            nb.cells.insert(0, cell)
            for c in nb.cells[1:]:
                if c.cell_type == "code" and NEEDS_OPTIONAL.search(c.source):
                    c.metadata["tags"] = [*c.metadata.get("tags", []), "raises-exception"]
                    # its saved output is the native run's figures; under Pyodide without
                    # pyarrow/duckdb it is the one-line ImportError instead
                    c.metadata["tags"].append("nbval-ignore-output")
        nb.metadata.setdefault("kernelspec", {})
        nb.metadata["kernelspec"] = {"name": "python", "display_name": "Python (Pyodide)",
                                     "language": "python"}  # fmt: skip
        nbformat.write(nb, contents / "notebooks" / path.name)
        names.append(path.name)
    return names


#: JupyterLab settings of the site (overrides.json): each notebook's kernel ends with its tab.
OVERRIDES = {
    "@jupyterlab/notebook-extension:tracker": {"kernelShutdown": True, "windowingMode": "none"},
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/docmanager-extension:plugin": {"autosave": False},
}


def lite_config(pyodide_js: str) -> dict:
    return {
        "jupyter-lite-schema-version": 0,
        "jupyter-config-data": {
            "appName": "llminfer workshop",
            # Nothing kept between visits: no tabs restored (so no second kernel started for
            # an earlier notebook) and every visit starts from the site's notebooks.
            "enableMemoryStorage": True,
            "exposeAppInBrowser": True,  # window.jupyterapp: scripts/lite_check.py counts kernels
            "settingsStorageDrivers": ["memoryStorageDriver"],
            "contentsStorageDrivers": ["memoryStorageDriver"],
            "workspacesStorageDrivers": ["memoryStorageDriver"],
            "litePluginSettings": {
                "@jupyterlite/pyodide-kernel-extension:kernel": {
                    "pyodideUrl": pyodide_js,
                    "disablePyPIFallback": True,
                    "loadPyodideOptions": {"lockFileURL": "./static/pyodide/pyodide-lock.json"},
                }
            },
        },
    }


def fetch_wheels(folder: Path) -> int:
    """On a connected machine: Pyodide's WebAssembly wheels the site needs (numpy, pandas,
    matplotlib and theirs, pyarrow, duckdb) from its CDN into ``folder``, checked against the
    lock's checksums, for ``make lite WHEELS=folder`` in a classroom with no internet."""
    import urllib.request

    packages = json.loads((pyodide_core() / "pyodide-lock.json").read_text())["packages"]
    folder.mkdir(parents=True, exist_ok=True)
    for name in closure(packages, SCIENTIFIC + OPTIONAL):
        entry = packages[name]
        path = folder / entry["file_name"]
        if pure(entry["file_name"]) or (path.exists() and sha256(path) == entry["sha256"]):
            continue  # pure wheels come from PyPI at build time
        print(f"fetching {entry['file_name']}", flush=True)
        try:
            with urllib.request.urlopen(CDN + entry["file_name"], timeout=120) as reply:
                data = reply.read()
        except OSError as exc:
            sys.exit(
                f"cannot fetch {CDN + entry['file_name']} ({exc}): run this on a machine "
                f"that reaches Pyodide's CDN, or unpack Pyodide {PYODIDE}'s release archive "
                "(pyodide-*.tar.bz2) and pass its pyodide/ folder as WHEELS"
            )
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            sys.exit(f"{entry['file_name']}: checksum differs from pyodide-lock.json")
        path.write_bytes(data)
    print(f"{folder}: Pyodide {PYODIDE}'s wheels for the site; copy the folder, then run "
          f"`make lite WHEELS={folder}` where the workshop is")  # fmt: skip
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "site")
    parser.add_argument("--wheels", type=Path, default=None, help="Pyodide wheels (WHEELS=DIR)")
    parser.add_argument(
        "--fetch-wheels",
        type=Path,
        metavar="DIR",
        help="on a connected machine: put Pyodide's WebAssembly wheels into DIR, then stop",
    )
    args = parser.parse_args(argv)
    if args.fetch_wheels:
        return fetch_wheels(args.fetch_wheels.resolve())
    started = time.monotonic()
    wheels = args.wheels.resolve() if args.wheels else None
    if wheels is not None and not wheels.is_dir():
        sys.exit(f"make lite: WHEELS={wheels} is not a folder")
    source = CACHE / "src"
    shutil.rmtree(source, ignore_errors=True)
    source.mkdir(parents=True)
    names = notebook_copies(source / "contents")
    (source / "jupyter-lite.json").write_text(
        json.dumps(lite_config("./static/pyodide/pyodide.mjs"), indent=1)
    )
    (source / "overrides.json").write_text(json.dumps(OVERRIDES, indent=1))
    out = args.out.resolve()
    shutil.rmtree(out, ignore_errors=True)
    jupyter = Path(sys.executable).parent / "jupyter"
    command = [str(jupyter), "lite", "build", "--lite-dir", str(source),
               "--output-dir", str(out), "--contents", str(source / "contents"),
               "--settings-overrides", str(source / "overrides.json")]  # fmt: skip
    for wheel in piplite_wheels():
        command += ["--piplite-wheels", str(wheel)]
    run(*command, cwd=source)
    for path in out.rglob("*.map"):  # source maps: half the site's size, no use in class
        path.unlink()
    where = write_pyodide(out, wheels)
    report = {"notebooks": names, "wheels": str(wheels) if wheels else None, **where}
    (out / "llminfer-lite.json").write_text(json.dumps(report, indent=1) + "\n")
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(
        f"make lite: {out} ({size / 1e6:.0f} MB, {time.monotonic() - started:.0f} s); "
        f"from the site: {len(where['served'])} Pyodide wheels; from Pyodide's CDN: "
        f"{', '.join(where['cdn']) or 'nothing'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
