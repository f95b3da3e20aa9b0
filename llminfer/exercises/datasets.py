"""The datasets the exercises compute their answers from, shipped inside the package.

The notebooks read the repository's ``data/``; an installed llminfer (a wheel, ``pip install .``)
has no repository beside it, so the files the answers of chapters 3, 6 and 7 need travel in
``llminfer/exercises/data/`` and are found with ``importlib.resources``. They are copies of the
files of the same name in ``data/`` (``tests/test_exercises.py`` holds them byte for byte equal).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

#: The files shipped, as paths relative to ``llminfer/exercises/data/``.
SHIPPED = (
    "requests_realistic.csv",
    "vllm_bench_serve_result.json",
    "replicas/replica-a.csv",
    "replicas/replica-b.csv",
    "replicas/replica-c.csv",
    "real_toy_heavy.csv",
)


def dataset_path(name: str) -> Path:
    """The path of a shipped dataset (a file, or the ``replicas`` folder), for ``read_requests``.

    Raises ValueError for a name that is not shipped.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    folders = {item.split("/")[0] for item in SHIPPED if "/" in item}
    if name not in SHIPPED and name not in folders:
        raise ValueError(f"name={name!r} is not a shipped dataset; use one of {SHIPPED}")
    found = resources.files(__package__).joinpath("data", name)
    # A package installed from a wheel or a checkout lives in files: the resource is a path.
    # (A zipped install is not supported: read_requests needs a real folder for 'replicas'.)
    return Path(str(found))
