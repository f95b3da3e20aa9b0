"""One glossary for both editions: each term once, in the article's Chinese and in English.

``glossary.csv`` (beside this module) holds, per term: a key, the Chinese term (the article's
own wording where it has one: 首字时间 for TTFT, Prefill and Decode left in English as the article
leaves them), the English term, its symbol and unit, a one-line definition in each language, and
the variants the notebooks must not use (``|``-separated) so that a learner meets one word for
one idea. Every notebook's glossary cell is generated from it (``glossary_markdown``;
``scripts/glossary_cells.py`` writes the cells, a test holds them equal), and
``variants_in`` finds a variant in a notebook's prose.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from llminfer.language import LANGUAGES


@dataclass(frozen=True)
class Term:
    """One glossary entry; ``unit`` is the unit (or "—") the notebooks quote it in, ``unit_zh``
    the same in Chinese.

    Introduced in: notebooks/01_introduction.ipynb
    """

    key: str
    zh: str
    en: str
    symbol: str
    unit: str
    unit_zh: str
    definition_en: str
    definition_zh: str
    variants_zh: tuple[str, ...]
    variants_en: tuple[str, ...]

    def term(self, language: str) -> str:
        """The term in ``language`` ("zh" or "en")."""
        return self.zh if language == "zh" else self.en

    def definition(self, language: str) -> str:
        """The one-line definition in ``language``."""
        return self.definition_zh if language == "zh" else self.definition_en


@cache
def terms() -> dict[str, Term]:
    """Every term by key, in the file's order.

    Introduced in: notebooks/01_introduction.ipynb
    """
    text = (resources.files("llminfer.language") / "glossary.csv").read_text(encoding="utf-8")
    entries: dict[str, Term] = {}
    for row in csv.DictReader(io.StringIO(text)):
        if row["key"] in entries:
            raise ValueError(f"glossary.csv: term {row['key']!r} appears twice")
        entries[row["key"]] = Term(
            key=row["key"],
            zh=row["zh"],
            en=row["en"],
            symbol=row["symbol"],
            unit=row["unit"],
            unit_zh=row["unit_zh"],
            definition_en=row["definition_en"],
            definition_zh=row["definition_zh"],
            variants_zh=tuple(v for v in row["variants_zh"].split("|") if v),
            variants_en=tuple(v for v in row["variants_en"].split("|") if v),
        )
    return entries


def term(key: str) -> Term:
    """One term by key; a clear error naming the known keys for a wrong one.

    Introduced in: notebooks/01_introduction.ipynb
    """
    entries = terms()
    if key not in entries:
        raise KeyError(f"no glossary term {key!r}; known: {', '.join(entries)}")
    return entries[key]


_HEADERS = {
    "en": ("the article's term (中文)", "English term used here", "symbol · unit", "meaning"),
    "zh": ("术语", "英文", "符号 · 单位", "含义"),
}


def _cell(text: str) -> str:
    return text.replace("|", "\\|") if text else "—"


def glossary_markdown(keys: list[str] | tuple[str, ...], language: str) -> str:
    """The glossary table of a notebook that uses the terms ``keys``, in ``language``.

    The English edition puts the article's Chinese term first (the learner meets it in the
    article); the Chinese edition puts it first too and the English term second (the learner
    meets that in tools and papers).

    Introduced in: notebooks/01_introduction.ipynb
    """
    if language not in LANGUAGES:
        raise ValueError(f"language {language!r}: choose one of {', '.join(LANGUAGES)}")
    heading = "**术语表**" if language == "zh" else "**Glossary** (术语表)"
    lines = [heading, "", "| " + " | ".join(_HEADERS[language]) + " |", "|---|---|---|---|"]
    for key in keys:
        entry = term(key)
        unit = entry.unit_zh if language == "zh" else entry.unit
        symbol_unit = " · ".join(part for part in (entry.symbol, unit) if part)
        lines.append(
            "| "
            + " | ".join(
                _cell(part)
                for part in (entry.zh, entry.en, symbol_unit, entry.definition(language))
            )
            + " |"
        )
    return "\n".join(lines)


#: Code (fenced or inline) and web addresses are not prose.
_CODE = re.compile(r"```.*?```|`[^`\n]*`|<?https?://[^\s>)]+>?", re.DOTALL)


def variants_in(markdown: str, language: str) -> list[tuple[str, str]]:
    """(variant, the term to use instead) for each glossary variant in ``markdown``'s prose.

    Code (fenced or inline) and web addresses are left out, and a variant inside an
    occurrence of a proper term (混合专家 inside 混合专家模型) is not one.

    Introduced in: notebooks/01_introduction.ipynb
    """
    prose = _CODE.sub(" ", markdown)
    found: list[tuple[str, str]] = []
    entries = terms().values()
    proper = [entry.term(language) for entry in entries]
    spans = [
        (m.start(), m.end())
        for word in proper
        for m in re.finditer(re.escape(word), prose, re.IGNORECASE)
    ]
    for entry in entries:
        variants = entry.variants_zh if language == "zh" else entry.variants_en
        for variant in variants:
            for m in re.finditer(re.escape(variant), prose, re.IGNORECASE):
                inside = any(s <= m.start() and m.end() <= e for s, e in spans)
                if not inside:
                    found.append((variant, entry.term(language)))
    return found
