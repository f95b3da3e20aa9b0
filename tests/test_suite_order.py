"""The suite's own scheduling (tests/conftest.py): the files that wait longest start first.

A renamed notebook would silently fall back into the default order and the suite would grow a
minute's tail again, so every name in ``START_FIRST`` must be a file that nbval collects.
"""

import json
import sys
from pathlib import Path

import conftest
import nbformat

ROOT = Path(__file__).resolve().parents[1]


def test_every_file_started_first_exists():
    assert conftest.START_FIRST, "nothing to start first"
    missing = [path for path in conftest.START_FIRST if not (ROOT / path).is_file()]
    assert not missing, missing


class _Item:
    def __init__(self, nodeid):
        self.nodeid = nodeid


def test_waiting_files_then_notebooks_then_tests():
    ids = [
        "tests/test_a.py::test_x",
        "notebooks/05_optimizations.ipynb::Cell 0",
        conftest.START_FIRST[1] + "::Cell 0",
        "tests/test_b.py::test_y",
        conftest.START_FIRST[0] + "::Cell 1",
        conftest.START_FIRST[0] + "::Cell 0",
    ]
    items = [_Item(i) for i in ids]
    conftest.pytest_collection_modifyitems(None, items)
    assert [i.nodeid for i in items] == [
        conftest.START_FIRST[0] + "::Cell 1",  # stable: a notebook's cells keep their order
        conftest.START_FIRST[0] + "::Cell 0",
        conftest.START_FIRST[1] + "::Cell 0",
        "notebooks/05_optimizations.ipynb::Cell 0",
        "tests/test_a.py::test_x",
        "tests/test_b.py::test_y",
    ]


def test_the_workers_start_without_compiling_iri_grammars():
    # make test loads tests/suite_startup.py first; where it did, the import is refused
    import jsonschema  # noqa: F401  (nbval has imported it already under make test)

    if "tests.suite_startup" in sys.modules:
        assert sys.modules["rfc3987_syntax"] is None

    # ... and no notebook schema asks for a string format ("format": "iri", …), only for a
    # metadata property that happens to be called "format" (raw cells)
    def string_formats(node):
        if isinstance(node, dict):
            found = [node["format"]] if isinstance(node.get("format"), str) else []
            return found + [f for value in node.values() for f in string_formats(value)]
        if isinstance(node, list):
            return [f for value in node for f in string_formats(value)]
        return []

    schemas = sorted((Path(nbformat.__file__).parent / "v4").glob("*.json"))
    assert schemas and not [f for p in schemas for f in string_formats(json.loads(p.read_text()))]
