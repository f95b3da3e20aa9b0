"""Reading a request log's file: what kind of file it is, how its text is encoded, which
delimiter separates its cells, and on which line of the file each data row starts.

``llminfer.logs`` validates the rows; this module gets the bytes into a DataFrame or says, in
one sentence naming the file, why it cannot:

- a directory, an empty file, a header with no data rows: refused, saying so;
- gzip, bzip2 and xz files are decompressed (pandas reads them once told the compression);
- a byte-order mark (UTF-8, UTF-16 LE/BE, UTF-32) selects the encoding; text without one must
  be UTF-8 — other text (Latin-1, Windows-1252) is refused with the line and byte, never
  guessed at, because a wrong guess silently changes ids;
- Parquet, ZIP/Excel, old Office and other binary files are refused by name;
- the delimiter is the one of ``,``, ``;``, tab or ``|`` that splits the header into the
  article's columns (a semicolon file with decimal commas, as European spreadsheets save it,
  is read with ``decimal=","``); each choice is returned as an assumption, never made silently.

Row locations: ``row`` in a rejected-row report is the 0-based position among the data rows.
``record_lines`` turns rows into 1-based line numbers of the file, counting the blank lines
pandas skips and the line breaks inside quoted cells.
"""

from __future__ import annotations

import bz2
import codecs
import csv
import gzip
import io
import lzma
import mmap
import re
import sys
import warnings
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from pandas._libs.parsers import STR_NA_VALUES  # the texts read_csv takes as missing

from llminfer.logs.schema import ARTICLE_COLUMNS
from llminfer.runtime import can_mmap

_TIME_COLUMNS = ("start_ts", "first_token_ts", "end_ts")
_TOKEN_COLUMNS = ("input_tokens", "output_tokens")
#: Delimiters tried, in order, on the header line.
DELIMITERS = (",", ";", "\t", "|")
_SAMPLE_BYTES = 1 << 16
_COMPRESSION = {b"\x1f\x8b": "gzip", b"BZh": "bz2", b"\xfd7zXZ\x00": "xz"}
_OPENERS = {"gzip": gzip.open, "bz2": bz2.open, "xz": lzma.open, None: open}
#: Binary formats recognised by their first bytes, and what to do instead.
_BINARY = {
    b"PAR1": "a Parquet file; read it with pandas.read_parquet and pass the DataFrame to "
    "read_requests, or save it as CSV",
    b"PK\x03\x04": "a ZIP archive (an .xlsx workbook is one); unzip it or save the sheet as CSV",
    b"\xd0\xcf\x11\xe0": "an old Microsoft Office file (.xls); save the sheet as CSV",
    b"SQLite format 3\x00": "an SQLite database; export the table as CSV",
    b"%PDF": "a PDF document, not a log",
}
_BOMS = (  # longest first: the UTF-32 LE mark begins with the UTF-16 LE one
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
_DECIMAL_COMMA = re.compile(r"^\s*[-+]?\d+,\d+\s*$")
_DECIMAL_POINT = re.compile(r"^\s*[-+]?\d*\.\d+\s*$")
#: Most cells a header may have: a request log has a few dozen columns. Counted on the
#: header's first bytes before anything is parsed, so a runaway header is refused at once.
MAX_COLUMNS = 4096
#: What a damaged compressed stream raises while being read (gzip, bzip2, xz).
DAMAGED = (EOFError, lzma.LZMAError, zlib.error, gzip.BadGzipFile, OSError)


@contextmanager
def _no_field_limit() -> Iterator[None]:
    """The csv module's 128 KiB cell limit lifted while reading a log: a long cell is the
    validation's to report (with its row), not a reader's crash."""
    before = csv.field_size_limit()
    csv.field_size_limit(sys.maxsize)
    try:
        yield
    finally:
        csv.field_size_limit(before)


def damaged_message(path: Path, compression: str | None, exc: BaseException) -> str:
    """One sentence for a compressed file that cannot be read to its end.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    what = f"a damaged {compression} file" if compression else "a file that cannot be read"
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{_where(path)} is {what} (truncated or corrupt): {text}; copy or download it again"


@dataclass(frozen=True)
class CsvDialect:
    """How a CSV log file is stored: compression (None, ``gzip``, ``bz2``, ``xz``), text
    encoding, cell delimiter and decimal mark.

    Introduced in: notebooks/06_log_analysis.ipynb
    """

    compression: str | None = None
    encoding: str = "utf-8"
    delimiter: str = ","
    decimal: str = "."

    @property
    def plain(self) -> bool:
        """True for uncompressed UTF-8 text with commas and decimal points (the common case)."""
        return (
            self.compression is None
            and self.encoding == "utf-8"
            and self.delimiter == ","
            and self.decimal == "."
        )

    def assumptions(self) -> list[str]:
        """What was detected, in words (empty for the common case)."""
        said = []
        if self.compression:
            said.append(f"the file is {self.compression}-compressed; decompressed while reading")
        if self.encoding not in ("utf-8", "utf-8-sig"):
            said.append(f"text encoding {self.encoding.upper()} (from its byte-order mark)")
        if self.delimiter != ",":
            said.append(f"cells separated by {_name(self.delimiter)} (found in the header line)")
        if self.decimal != ".":
            said.append("decimal comma: '0,42' read as 0.42")
        return said

    def open_text(self, path: Path) -> io.TextIOBase:
        """The file opened as text (decompressed, decoded), for the csv module."""
        opener = _OPENERS[self.compression]
        return opener(path, "rt", encoding=self.encoding, newline="")


def _name(delimiter: str) -> str:
    return {",": "commas", ";": "semicolons", "\t": "tabs", "|": "vertical bars"}[delimiter]


def _where(path: Path) -> str:
    return f"source={str(path)!r}"


def check_path(path: Path) -> None:
    """Raise ValueError unless ``path`` names an existing regular file.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    if path.is_dir():
        raise ValueError(f"{_where(path)} is a directory, not a log file; name a file in it")
    if not path.exists():
        if path.is_symlink():
            raise ValueError(
                f"{_where(path)} is a symbolic link that leads to no file (broken, or a loop)"
            )
        raise ValueError(f"{_where(path)}: no such file")
    if not path.is_file():
        raise ValueError(f"{_where(path)} is not a regular file (a device or a pipe?)")


def is_structured(path: Path) -> bool:
    """Whether a file is Parquet or JSON / JSON Lines (a tool's export), from its first bytes.

    Looks through gzip, bzip2 and xz and a byte-order mark; reads at most 64 KiB. Anything else
    is treated as a delimited text table (``read_csv_file`` then says what is wrong with it).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    with path.open("rb") as file:
        magic = file.read(6)
    if magic[:4] == b"PAR1":
        return True
    compression = next((c for m, c in _COMPRESSION.items() if magic.startswith(m)), None)
    try:
        with _OPENERS[compression](path, "rb") as file:
            head = file.read(_SAMPLE_BYTES)
    except (OSError, EOFError, lzma.LZMAError):
        return False  # a damaged archive: the CSV reader names the problem
    for bom in (
        codecs.BOM_UTF8,
        codecs.BOM_UTF32_LE,
        codecs.BOM_UTF32_BE,
        codecs.BOM_UTF16_LE,
        codecs.BOM_UTF16_BE,
    ):
        if head.startswith(bom):
            head = head[len(bom) :]
            break
    first = head.lstrip(b" \t\r\n\x00")[:1]
    return first in (b"[", b"{") or is_yaml_mapping(head)


#: A YAML document's first line as GuideLLM (``--output kind=yaml``) writes one: ``---`` or a
#: top-level key that opens a block (``benchmarks:``), never a comma-separated header.
_YAML_FIRST_LINE = re.compile(rb"(---\s*|[A-Za-z_][\w.-]*:\s*)")


def is_yaml_mapping(head: bytes | str) -> bool:
    """Whether a file's first bytes open a YAML document (``---``, or ``key:`` alone on the
    first line): a tool's export written as YAML, not a table.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    raw = head.encode("utf-8", "replace") if isinstance(head, str) else head
    lines = raw.lstrip(b" \t\r\n\x00").splitlines()
    return bool(lines) and _YAML_FIRST_LINE.fullmatch(lines[0]) is not None


def sniff(path: Path) -> CsvDialect:
    """Work out how a CSV log file is stored, from its first 64 KiB.

    Raises ValueError naming the file for an empty file, a binary format, text that is not
    UTF-8 in the sample, or a file with no header line.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    with path.open("rb") as file:
        head = file.read(_SAMPLE_BYTES)
    if not head:
        raise ValueError(
            f"{_where(path)} is empty (0 bytes); a request log starts with a header line: "
            + ",".join(ARTICLE_COLUMNS)
        )
    compression = next(
        (kind for magic, kind in _COMPRESSION.items() if head.startswith(magic)), None
    )
    if compression:
        try:
            with _OPENERS[compression](path, "rb") as file:
                head = file.read(_SAMPLE_BYTES)
        except DAMAGED as exc:
            raise ValueError(damaged_message(path, compression, exc)) from None
        if not head:
            raise ValueError(f"{_where(path)} is an empty {compression} file (nothing inside)")
    for magic, what in _BINARY.items():
        if head.startswith(magic):
            raise ValueError(f"{_where(path)} is {what}")
    encoding = next((name for bom, name in _BOMS if head.startswith(bom)), None)
    if encoding is None:
        if b"\x00" in head:
            hint = (
                "UTF-16 text without a byte-order mark? save it as UTF-8"
                if head[1::2].count(0) > len(head) // 4 or head[0::2].count(0) > len(head) // 4
                else "a binary file, not CSV text"
            )
            raise ValueError(f"{_where(path)} holds NUL bytes: {hint}")
        encoding = "utf-8"
        # The sample may end inside a multi-byte character: decode it incrementally.
        try:
            codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
        except UnicodeDecodeError:
            raise ValueError(not_utf8_message(path, compression)) from None
    text = head.decode(encoding, errors="replace")
    header = next((line for line in text.splitlines() if line.strip()), None)
    if header is not None:
        cells = max(header.count(d) for d in DELIMITERS) + 1
        if cells > MAX_COLUMNS:
            complete = "\n" in text.lstrip()[: len(header) + 2] or len(head) < _SAMPLE_BYTES
            raise ValueError(
                f"{_where(path)}: the header line has {'' if complete else 'more than '}"
                f"{cells:,} cells; a request log has a few dozen columns (at most "
                f"{MAX_COLUMNS:,} are read). Is this a log with a header line?"
            )
    if header is None:
        raise ValueError(
            f"{_where(path)} holds only blank lines; a request log starts with a header line: "
            + ",".join(ARTICLE_COLUMNS)
        )
    delimiter = ","
    for candidate in DELIMITERS:
        with _no_field_limit():
            names = {c.strip() for c in next(csv.reader([header], delimiter=candidate))}
        if set(ARTICLE_COLUMNS) <= names:
            delimiter = candidate
            break
    decimal = "."
    if delimiter != ",":
        # A semicolon (or tab) file whose numbers use a decimal comma: "0,42".
        with _no_field_limit():
            rows = list(csv.reader(io.StringIO(text), delimiter=delimiter))[1:50]
        if any(_DECIMAL_COMMA.match(cell) for row in rows for cell in row[1:]):
            decimal = ","
    return CsvDialect(compression, encoding, delimiter, decimal)


def not_utf8_message(path: Path, compression: str | None = None) -> str:
    """Name the first line and byte of a file that is not UTF-8 text (scans the file).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    with _OPENERS[compression](path, "rb") as file:
        for number, line in enumerate(file, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as exc:
                byte = line[exc.start]
                shown = line[max(0, exc.start - 10) : exc.start + 10].decode("latin-1")
                return (
                    f"{_where(path)} is not UTF-8 text: line {number} has byte 0x{byte:02x} "
                    f"(near {shown.strip()!r}); it looks like Latin-1 or Windows-1252. Save it "
                    "as UTF-8 (e.g. iconv -f latin1 -t utf-8 FILE > FILE.utf8.csv)"
                )
    return f"{_where(path)} is not UTF-8 text; save it as UTF-8"


def read_csv_file(path: Path) -> tuple[pd.DataFrame, list[str]]:
    """Read a CSV log file into a DataFrame (cells as pandas parses them; ``logs`` validates).

    ``request_id`` stays text exactly as written ("007", "NA" and "null" are ids, not numbers
    or missing values); a blank id stays ``""`` and is reported by validation. Returns the frame
    and the assumptions made about the file (compression, encoding, delimiter).

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    check_path(path)
    dialect = sniff(path)
    try:
        header = _header(path, dialect)
        _check_names(path, header)
        frame = _read_article_csv(path) if dialect.plain else None
        if frame is None:
            frame = _read_with_pandas(path, dialect)
    except DAMAGED as exc:
        if isinstance(exc, OSError) and not dialect.compression:
            raise
        raise ValueError(damaged_message(path, dialect.compression, exc)) from None
    if dialect.decimal == ",":
        frame = _decimal_comma_cells(frame)
    if len(frame) == 0:
        raise ValueError(
            f"{_where(path)} has a header line but no data rows: there are no requests to read"
        )
    if "token_ts" in frame.columns:
        frame["token_ts"] = _parse_array_column(frame["token_ts"], float)
    if "chunk_tokens" in frame.columns:
        frame["chunk_tokens"] = _parse_array_column(frame["chunk_tokens"], float)
    return frame, dialect.assumptions()


def _check_names(path: Path, header: list[str]) -> None:
    """Refuse a header that names a column twice: which of the two holds the values is not
    guessed (pandas would rename the second one ``start_ts.1`` and read the first)."""
    seen: dict[str, int] = {}
    for number, name in enumerate(header, start=1):
        key = name.strip()
        if not key:
            continue
        if key in seen:
            raise ValueError(
                f"{_where(path)}: the header names column {key!r} twice (cells {seen[key]} "
                f"and {number}); which one holds the values is not guessed: rename or drop one"
            )
        seen[key] = number


def _decimal_comma_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """In a decimal-comma file, a number column pandas left as text because of a few odd cells:
    its "0,42" cells converted one by one, so only the odd cells are reported (a "1.500" —
    1.5 or 1500? — is marked so that it is not read as 1.5)."""
    for name in (*_TIME_COLUMNS, *_TOKEN_COLUMNS, "scheduled_ts"):
        if name not in frame.columns or frame[name].dtype.kind in "biuf":
            continue

        def cell(value):
            if not isinstance(value, str):
                return value
            if _DECIMAL_COMMA.match(value) or re.match(r"^\s*[-+]?\d+\s*$", value):
                return float(value.replace(",", "."))
            if _DECIMAL_POINT.match(value):
                return f"{value} (a decimal point in a file of decimal commas)"
            return value

        frame[name] = frame[name].astype(object).map(cell)
    return frame


def _read_with_pandas(path: Path, dialect: CsvDialect) -> pd.DataFrame:
    header = _header(path, dialect)
    # request_id is read with no missing-value words: "NA" is an id. Every other column keeps
    # pandas' usual missing words ("", "NA", "null", …) and is re-checked by validation, so a
    # stray word in a number column is reported, not guessed at.
    na_values = {name: list(STR_NA_VALUES) for name in header if name != "request_id"}
    text_columns = {"request_id", "status", "error"}
    try:
        with warnings.catch_warnings():
            # A first data row with one cell more than the header: pandas would take the first
            # column as the index and shift every cell (or, with index_col=False, drop the
            # extra cell with only a warning). Both change data silently: refuse instead.
            warnings.simplefilter("error", pd.errors.ParserWarning)
            return pd.read_csv(
                path,
                sep=dialect.delimiter,
                decimal=dialect.decimal,
                encoding=dialect.encoding,
                compression=dialect.compression,
                dtype={name: object for name in header if name in text_columns},
                keep_default_na=False,
                na_values=na_values,
                skipinitialspace=dialect.delimiter != ",",
                index_col=False,
            )
    except UnicodeDecodeError:
        raise ValueError(not_utf8_message(path, dialect.compression)) from None
    except pd.errors.EmptyDataError:
        raise ValueError(f"{_where(path)} has no header line") from None
    except (pd.errors.ParserError, pd.errors.ParserWarning) as exc:
        raise ValueError(_ragged_message(path, dialect, exc)) from None


def _header(path: Path, dialect: CsvDialect) -> list[str]:
    with _no_field_limit(), dialect.open_text(path) as file:
        for row in csv.reader(file, delimiter=dialect.delimiter):
            if row and any(cell.strip() for cell in row):
                return [cell.strip() if dialect.delimiter != "," else cell for cell in row]
    return []


def _ragged_message(path: Path, dialect: CsvDialect, exc: Exception) -> str:
    """Find the first record whose number of cells differs from the header's."""
    try:
        with _no_field_limit(), dialect.open_text(path) as file:
            reader = csv.reader(file, delimiter=dialect.delimiter)
            width, line = None, 1
            for row in reader:
                if _skipped(row):
                    line = reader.line_num + 1
                    continue
                if width is None:
                    width = len(row)
                elif len(row) > width:
                    return (
                        f"{_where(path)}: line {line} has {len(row)} cells but the header has "
                        f"{width}; check for an unquoted {dialect.delimiter!r} inside a cell"
                    )
                line = reader.line_num + 1
    except (csv.Error, UnicodeDecodeError, *DAMAGED):
        pass
    text = " ".join(str(exc).split())
    return f"{_where(path)} is not a well-formed CSV file: {text}"


def _skipped(row: list[str]) -> bool:
    """A record pandas skips: a blank or whitespace-only line."""
    return not row or (len(row) == 1 and not row[0].strip())


def record_lines(path: str | Path, rows) -> dict[int, int]:
    """1-based file line on which each data row (0-based, as in ``RequestLog.rejected``) starts.

    Counts what a "row + 2" guess misses: blank lines (pandas skips them), line breaks inside
    quoted cells, leading blank lines. Scans the file once, up to the largest row asked for.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    return record_cells(path, rows)[0]


def record_cells(path: str | Path, rows) -> tuple[dict[int, int], dict[int, dict[str, str]]]:
    """For each data row asked for: its 1-based file line (as ``record_lines``) and its cells as
    written in the file, by column name — what a rejected row's value is quoted as ("NaN",
    "1e309", "-0", not the number pandas made of them). One scan, up to the largest row.

    Introduced in: notebooks/06_log_analysis.ipynb
    """
    path = Path(path)
    wanted = sorted({int(r) for r in np.asarray(rows).ravel()})
    if not wanted:
        return {}, {}
    dialect = sniff(path)
    found: dict[int, int] = {}
    cells: dict[int, dict[str, str]] = {}
    with _no_field_limit(), dialect.open_text(path) as file:
        reader = csv.reader(file, delimiter=dialect.delimiter)
        row, line, header, target = -1, 1, None, iter(wanted)
        goal = next(target)
        for record in reader:
            if not _skipped(record):
                if header is not None:
                    row += 1
                    if row == goal:
                        found[row] = line
                        cells[row] = dict(zip(header, record, strict=False))
                        goal = next(target, None)
                        if goal is None:
                            break
                else:
                    header = [c.strip() if dialect.delimiter != "," else c for c in record]
            line = reader.line_num + 1
    return found, cells


def _read_article_csv(path: Path) -> pd.DataFrame | None:
    """A log of exactly the article's columns read by pyarrow, or None: "read it with pandas".

    pyarrow's reader parses on every core and keeps ids as Arrow strings (no Python object per
    id): about 3× faster than pandas' reader on a million rows. It is only taken where its result
    is the one pandas' path gives: numbers are parsed strictly (no empty cell, no "NA"), so any
    cell validation would have to report — missing, a stray word — sends the log to pandas, and
    so does an empty log. Ids are kept as written, as pandas' path keeps them.
    """
    try:
        import pyarrow as pa
        from pyarrow import csv as pa_csv
    except ImportError:  # an optional speed-up: pandas reads every log without it
        return None
    with path.open(encoding="utf-8", newline="") as file:
        try:
            header = next(csv.reader(file), [])
        except (UnicodeDecodeError, csv.Error):
            return None
    if sorted(header) != sorted(ARTICLE_COLUMNS):
        return None
    if _has_hex(path):  # pyarrow reads "0x10" as the integer 16; pandas' path refuses it
        return None
    # Token counts as int64 and times as float64: the types pandas infers for them (whole
    # counts, fractional times), so values and the text shown for a rejected one agree.
    # Ids as large_string: the type pandas' ``str`` dtype stores, so the frame takes them as
    # they are (a cast of 10 M ids cost ~0.3 s).
    types = {"request_id": pa.large_string()}
    types.update({name: pa.float64() for name in _TIME_COLUMNS})
    types.update({name: pa.int64() for name in _TOKEN_COLUMNS})
    try:
        table = pa_csv.read_csv(
            path,
            # A quoted id may hold a line break, as pandas allows; telling pyarrow so makes it
            # cut the file into blocks one at a time (~20 % slower on 10 M rows), so it is only
            # told when the file has a quote at all.
            parse_options=pa_csv.ParseOptions(newlines_in_values=_has_quote(path)),
            convert_options=pa_csv.ConvertOptions(
                column_types=types, null_values=[], strings_can_be_null=False
            ),
        )
    except pa.ArrowInvalid:  # a cell that is not a plain number, a ragged row, bad UTF-8
        return None
    if table.num_rows == 0:
        return None
    for name in _TIME_COLUMNS:
        # pandas reads a column of whole numbers only ("3", not "3.0") as int64; a column
        # whose every time is whole may be one, so it is left to pandas.
        if _all_whole(table.column(name)):
            return None
    return table.to_pandas()


def _all_whole(column) -> bool:
    """Whether every value of a float Arrow column is a whole number; stops at the first
    chunk holding a fraction (real times have one in the first few rows)."""
    for chunk in column.chunks:
        values = chunk.to_numpy(zero_copy_only=False)
        if not (values == np.floor(values)).all():
            return False
    return True


def _has_hex(path: Path, use_mmap: bool | None = None) -> bool:
    """True when the (uncompressed) file holds "0x" or "0X" anywhere (memchr-speed scans)."""
    return _file_holds(path, (b"0x", b"0X"), use_mmap)


def _has_quote(path: Path, use_mmap: bool | None = None) -> bool:
    """True when the (uncompressed) file holds a double quote anywhere: one memchr-speed scan."""
    return _file_holds(path, (b'"',), use_mmap)


def _file_holds(path: Path, needles: tuple[bytes, ...], use_mmap: bool | None = None) -> bool:
    """Whether any of ``needles`` occurs in the file: scans of a memory map, or, where files
    cannot be mapped (Pyodide: "No such device"), of the file read in blocks, each block
    overlapping the one before by a needle's length less one (``use_mmap=False``; the default
    asks ``llminfer.runtime.can_mmap``). Both give the same answer."""
    with path.open("rb") as file:
        if path.stat().st_size == 0:
            return False
        if use_mmap is None:
            use_mmap = can_mmap()
        if use_mmap:
            with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as view:
                return any(view.find(needle) >= 0 for needle in needles)
        keep = max(len(needle) for needle in needles) - 1
        tail = b""
        while block := file.read(_SCAN_BLOCK):
            window = tail + block
            if any(needle in window for needle in needles):
                return True
            tail = window[-keep:] if keep else b""
        return False


#: Bytes read at a time by ``_file_holds`` where it cannot map the file.
_SCAN_BLOCK = 1 << 20


def _parse_array_column(column: pd.Series, dtype) -> pd.Series:
    """CSV cells holding space-separated numbers ("1.0 1.1 1.2") → arrays; blanks → None."""

    def parse(cell):
        if not isinstance(cell, str):
            return None if pd.isna(cell) else np.array([cell], dtype=dtype)
        if not cell.strip():
            return None
        try:
            return np.array(cell.split(), dtype=dtype)
        except ValueError:
            return cell  # left as text: validation reports it

    return column.map(parse)
