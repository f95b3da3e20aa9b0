"""A non-editable install works: the wheel, installed into a fresh virtual environment, answers
every exercise and runs the command line with no repository beside it (issue 20).

The fresh environment sees the tested dependencies (numpy, pandas, …) through a ``.pth`` line
naming this environment's site-packages — a plain path, so the editable install of llminfer
recorded there is not loaded — and nothing is downloaded: the wheel is built with
``--no-build-isolation`` and unpacked with ``pip install --no-index --target``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: The fresh environment's own variables: no PYTHONPATH, which would put a checkout of llminfer
#: ahead of the installed wheel.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}

CHECK = r"""
import pathlib, sys
import llminfer
from llminfer.exercises import check, exercises
where = pathlib.Path(llminfer.__file__).resolve()
assert str(where).startswith(sys.prefix), f"llminfer imported from {where}, not the wheel"
wrong = []
for item in exercises():
    answer = item.answer()
    result = check(item.key, answer)
    if not result.right:
        wrong.append((item.key, answer, result.message))
assert not wrong, wrong
print(len(exercises()), "exercises answered from", where.parent)
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """A fresh venv with the llminfer wheel installed (not editable); yields its python."""
    tmp = tmp_path_factory.mktemp("install")
    # Built from a copy: setuptools builds in the source tree (build/, *.egg-info), and the
    # checkout is being read by other tests meanwhile.
    source = tmp / "source"
    shutil.copytree(
        REPO / "llminfer", source / "llminfer", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp / "dist"), str(source)],
        capture_output=True, text=True, cwd=tmp,
    )  # fmt: skip
    if build.returncode != 0:
        pytest.fail(f"building the wheel failed:\n{build.stdout}\n{build.stderr}")
    (wheel,) = (tmp / "dist").glob("llminfer-*.whl")
    env_dir = tmp / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site, "tested_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--target",
            site,
            str(wheel),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return python, tmp


def test_the_wheel_answers_every_exercise_without_the_repository(installed):
    python, tmp = installed
    out = subprocess.run(
        [str(python), "-c", CHECK],
        capture_output=True,
        text=True,
        cwd=tmp,
        timeout=300,
        env=CLEAN_ENV,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    from llminfer.exercises import exercises

    count, _, where = out.stdout.strip().partition(" exercises answered from ")
    assert int(count) == len(exercises()) > 40
    assert str(REPO) not in where


def test_the_wheel_ships_its_data_and_runs_the_command_line(installed):
    python, tmp = installed
    code = (
        "from llminfer import get_gpu, get_model; print(get_model('llama-3.1-8b').n_layers,"
        " get_gpu('h100-sxm').name)"
    )
    out = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, cwd=tmp, env=CLEAN_ENV
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[0] == "32"
    cli = subprocess.run(
        [str(python), "-m", "llminfer", "--help"],
        capture_output=True,
        text=True,
        cwd=tmp,
        env=CLEAN_ENV,
    )
    assert cli.returncode == 0 and "metrics" in cli.stdout, cli.stderr[-2000:]
