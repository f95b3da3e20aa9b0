"""Reading a tool's export from disk: plain or gzip-compressed JSON, JSON Lines, YAML or
Parquet, parsed once, plus the error type every importer raises.

Every problem in an export is an ``ExportError`` (a ``ValueError``) whose message names the file,
the record and the field, so no ``KeyError``/``TypeError`` from a malformed file reaches a user.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from llminfer.logs.logfile import (
    _BOMS,
    _COMPRESSION,
    _OPENERS,
    DAMAGED,
    damaged_message,
    is_yaml_mapping,
)


class ExportError(ValueError):
    """A tool export that cannot be read: the message names file, record and field.

    Introduced in: notebooks/06_log_analysis.ipynb
    """


def problem(path: Path | str, where: str, message: str) -> ExportError:
    """An ``ExportError`` for ``path``: ``where`` names the record and field (may be empty).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    place = f" {where}" if where else ""
    return ExportError(f"{path}{place}: {message}")


@dataclass
class Document:
    """One file, parsed once: ``json`` (a whole-file JSON value), ``lines`` (JSON Lines records,
    one per non-empty line, with their 1-based line numbers) or ``table`` (Parquet).

    Introduced in: notebooks/06_log_analysis.ipynb
    """

    path: Path
    json: object = None
    lines: list[tuple[int, object]] | None = None
    table: pd.DataFrame | None = None
    kind: str = "json"  # "json", "jsonl", "parquet", "csv" or "unknown"
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.path)


def _opener(path: Path):
    """(open function, compression name or None) for a file, by its first bytes."""
    with path.open("rb") as file:
        magic = file.read(6)
    compression = next((c for m, c in _COMPRESSION.items() if magic.startswith(m)), None)
    return _OPENERS[compression], compression


def _text(path: Path) -> str:
    opener, compression = _opener(path)  # gzip, bzip2 or xz, whatever the suffix
    try:
        with opener(path, "rb") as file:
            raw = file.read()
    except DAMAGED as exc:
        if compression is None:
            raise
        raise ValueError(damaged_message(path, compression, exc)) from None
    try:
        return raw.decode(_encoding(raw))
    except UnicodeDecodeError as exc:
        raise problem(path, "", f"is not UTF-8 text ({exc})") from None


def _encoding(raw: bytes) -> str:
    """The text encoding a byte-order mark names (UTF-16/32), else UTF-8 (a UTF-8 mark skipped)."""
    return next((name for bom, name in _BOMS if raw.startswith(bom)), "utf-8-sig")


def text_of(path: Path) -> str:
    """A file's whole text, decompressed when gzip (for the tools' CSV summaries).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    return _text(Path(path))


def _head(path: Path, size: int = 1 << 16) -> str:
    """The first ``size`` bytes of a file (decompressed when gzip), as text: enough to tell
    JSON from a table without reading a large file whole."""
    opener, compression = _opener(path)
    try:
        with opener(path, "rb") as file:
            raw = file.read(size)
    except DAMAGED as exc:
        if compression is None:
            raise
        raise ValueError(damaged_message(path, compression, exc)) from None
    encoding = _encoding(raw)
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as exc:
        if len(raw) == size and exc.start >= size - 4:  # a character cut by the head's end
            return raw[: exc.start].decode(encoding)
        raise problem(path, "", f"is not UTF-8 text ({exc})") from None


def load(path: Path) -> Document:
    """Parse ``path`` by its content (gzip, Parquet, JSON, JSON Lines, YAML or CSV), not its
    suffix. YAML (``is_yaml_mapping``) becomes the same ``json`` value its JSON would give.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    with path.open("rb") as file:
        head = file.read(4)
    if head == b"PAR1":
        try:
            table = pd.read_parquet(path)
        except Exception as exc:  # pyarrow raises several types for a damaged file
            raise problem(path, "", f"is a Parquet file that cannot be read: {exc}") from None
        return Document(path, table=table, kind="parquet")
    head_text = _head(path)
    if not head_text.lstrip():
        raise problem(path, "", "is empty")
    if is_yaml_mapping(head_text):
        return Document(path, json=_yaml(path, _text(path)), kind="json")
    if head_text.lstrip()[0] not in "[{":
        # A table, not JSON: its first line decides, and the rest is the CSV reader's to parse
        # (reading and splitting a whole 100 MB file here cost more than parsing it).
        first_line = head_text.lstrip().splitlines()[0]
        return Document(path, kind="csv" if "," in first_line else "unknown")
    text = _text(path)
    try:
        return Document(path, json=_loads(text), kind="json")
    except DuplicateKey as exc:
        raise problem(path, _line_of_duplicate(text), str(exc)) from None
    except json.JSONDecodeError as whole:
        # Not one JSON value: JSON Lines (one record a line), e.g. AIPerf or SGLang output.
        lines = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                lines.append((number, _loads(line)))
            except DuplicateKey as exc:
                raise problem(path, f"line {number}", str(exc)) from None
            except json.JSONDecodeError as exc:
                if len(lines) == 0 and number == 1:
                    raise problem(path, "", f"is not valid JSON: {whole}") from None
                raise problem(path, f"line {number}", f"is not JSON: {exc}") from None
        return Document(path, lines=lines, kind="jsonl")


def _yaml(path: Path, text: str) -> object:
    """A YAML export (GuideLLM's ``benchmarks.yaml``: the same document as its JSON) parsed
    safely — no tags that build objects — with libyaml's C parser where PyYAML has it."""
    try:
        import yaml
    except ImportError:  # pragma: no cover - PyYAML is in requirements.txt
        raise problem(path, "", "is YAML: reading it needs PyYAML (pip install pyyaml)") from None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        value = yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        raise problem(path, "", f"is not valid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(value, (dict, list)):
        raise problem(path, "", "is YAML but not a mapping or a list: not a tool's export")
    return value


class DuplicateKey(ValueError):
    """A JSON object that names a key twice (``json`` would keep the last value silently)."""


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    record = dict(pairs)
    if len(record) != len(pairs):
        seen: set[str] = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise DuplicateKey(
            f"an object names key {key!r} twice; which value is meant is not guessed "
            "(JSON readers differ: some keep the first, some the last)"
        )
    return record


def _loads(text: str):
    return json.loads(text, object_pairs_hook=_unique_keys)


def _line_of_duplicate(text: str) -> str:
    """ "line N" when the text is JSON Lines and line N holds the duplicate key, else ""."""
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            _loads(line)
        except DuplicateKey:
            return f"line {number}"
        except (json.JSONDecodeError, RecursionError):
            return ""  # one JSON value over many lines
    return ""


def number(value, path, where: str, *, allow_none: bool = False) -> float:
    """``value`` as a float, or an ``ExportError`` naming ``where`` (record and field).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if value is None:
        if allow_none:
            return math.nan
        raise problem(path, where, "is missing (null)")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise problem(path, where, f"must be a number, not {type(value).__name__} {value!r:.60}")
    try:
        return float(value)
    except ValueError:
        raise problem(path, where, f"must be a number, not {value!r:.60}") from None


def numbers(values, path, where: str) -> list[float]:
    """A list of numbers (chunk gaps, timestamps) or an ``ExportError`` naming ``where``.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if values is None:
        return []
    if not isinstance(values, (list, tuple)):
        raise problem(path, where, f"must be a list of numbers, not {type(values).__name__}")
    return [number(v, path, f"{where}[{i}]") for i, v in enumerate(values)]


def field_of(record, key: str, path, where: str, *, default=...):
    """``record[key]`` with an ``ExportError`` naming record and field when it is missing.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if not isinstance(record, dict):
        raise problem(path, where, f"must be a JSON object, not {type(record).__name__}")
    if key in record:
        return record[key]
    if default is not ...:
        return default
    raise problem(path, f"{where}, field {key!r}", "is missing")


def run_index(count: int, benchmark, what: str = "benchmark") -> int:
    """``benchmark`` (one run's index, negative from the end) checked against the ``count``
    runs a file holds (``what``: the tool's word for one, in the message) and made
    non-negative; ValueError says what is wrong.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if isinstance(benchmark, bool) or not isinstance(benchmark, int):
        raise ValueError(f"benchmark={benchmark!r} must be an int index (0 … {count - 1})")
    if not -count <= benchmark < count:
        raise ValueError(f"benchmark={benchmark!r}: the file holds {count} {what}(s)")
    return benchmark % count
