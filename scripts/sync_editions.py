"""Carry the English notebooks' code into the Chinese edition after a code change.

The two editions share their code cells (tests/test_language.py holds them equal, but for the
language line of the first code cell). After editing code in ``notebooks/NN_*.ipynb``, run this:
each ``notebooks/zh/NN_*.ipynb`` gets the English code cells, matched by cell id, with
``set_language("zh")`` in the first; its own markdown (the translation) stays. A cell the
English notebook gained or lost is reported, not guessed: add or remove its translation by hand.
Then re-execute the Chinese notebooks (``make notebooks``).

    python scripts/sync_editions.py [--check] [notebooks/NN_x.ipynb ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
EN_LINE = 'set_language("en")  # 中文版 (notebooks/zh/): set_language("zh")'
ZH_LINE = 'set_language("zh")  # English edition (notebooks/): set_language("en")'


def chinese_code(source: str) -> str:
    """An English code cell as the Chinese edition has it."""
    return source.replace(EN_LINE, ZH_LINE)


def sync(english: Path, check: bool = False) -> list[str]:
    """Bring the Chinese twin of ``english`` to its code (or, with ``check``, only say whether
    it is); what needs a person (a missing twin, cells added or removed, stale code in check)."""
    chinese = english.parent / "zh" / english.name
    if not chinese.exists():
        return [f"{chinese.relative_to(ROOT)} is missing: translate {english.name} first"]
    en = nbformat.read(english, as_version=4)
    zh = nbformat.read(chinese, as_version=4)
    if [(c.id, c.cell_type) for c in en.cells] != [(c.id, c.cell_type) for c in zh.cells]:
        en_ids = {c.id for c in en.cells}
        zh_ids = {c.id for c in zh.cells}
        return [
            f"{chinese.name}: cells differ from the English (added in English: "
            f"{sorted(en_ids - zh_ids)}, only in Chinese: {sorted(zh_ids - en_ids)}, or reordered);"
            " translate or remove them by hand"
        ]
    stale = [
        (e, z)
        for e, z in zip(en.cells, zh.cells, strict=True)
        if e.cell_type == "code" and z.source != chinese_code(e.source)
    ]
    if not stale:
        return []
    ids = [z.id for _, z in stale]
    if check:
        return [f"{chinese.name}: code cells {ids} differ from the English"]
    for e, z in stale:
        z.source = chinese_code(e.source)
        z.outputs, z.execution_count = [], None  # to be executed in Chinese
    nbformat.write(zh, chinese)
    print(f"{chinese.name}: code cells {ids} updated; re-execute it (make notebooks)")
    return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report only, change nothing")
    parser.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.notebooks] or sorted(
        (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")
    )
    problems = [line for path in paths for line in sync(path, check=args.check)]
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
