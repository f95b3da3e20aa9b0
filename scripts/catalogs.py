"""Extract, update and compile llminfer's gettext catalogs with Babel.

One catalog (gettext domain) per part of the package that speaks to the learner
(``llminfer.language.DOMAINS``): the messages marked ``_("…")``, ``N_("…")`` and
``ngettext("…", "…", n)`` in that part's source are extracted into
``llminfer/language/locale/<domain>.pot``, merged into each language's
``locale/<lang>/LC_MESSAGES/<domain>.po`` (new messages arrive untranslated, vanished ones are
dropped) and compiled into the ``.mo`` files the package reads.

    python scripts/catalogs.py            # extract + update + compile (after adding messages)
    python scripts/catalogs.py --compile  # compile only (after translating a .po)
    python scripts/catalogs.py --check    # what tests/test_language.py checks, as a report

Run by ``make catalogs``.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract as extract_file
from babel.messages.extract import extract_from_dir
from babel.messages.mofile import read_mo, write_mo
from babel.messages.pofile import read_po, write_po

from llminfer.language import DOMAINS, LANGUAGES

ROOT = Path(__file__).resolve().parent.parent
LOCALE = ROOT / "llminfer" / "language" / "locale"
#: Where each domain's messages are written, relative to the repository root.
SOURCES = {
    "exercises": ["llminfer/exercises"],
    "widgets": ["llminfer/widgets"],
    "plots": ["llminfer/plots"],
    "diagnose": ["llminfer/diagnose"],
    "cli": ["llminfer/cli.py"],
    "cost": ["llminfer/cost/memory.py"],  # why a plan does not fit: the explorers' "Not feasible"
}
KEYWORDS = {"_": None, "N_": None, "ngettext": (1, 2)}
TRANSLATED = [language for language in LANGUAGES if language != "en"]


def extract(domain: str) -> Catalog:
    """Every marked message in ``domain``'s source, with where it is used."""
    catalog = Catalog(project="llminfer", domain=domain, fuzzy=False)
    for source in SOURCES[domain]:
        path = ROOT / source
        if path.is_file():
            with path.open("rb") as handle:
                found = [
                    (path.name, lineno, message, comments, context)
                    for lineno, message, comments, context in extract_file(
                        "python", handle, keywords=KEYWORDS, comment_tags=("TRANSLATORS:",)
                    )
                ]
            base = path.parent
        else:
            found = list(
                extract_from_dir(
                    path,
                    method_map=[("**.py", "python")],
                    keywords=KEYWORDS,
                    comment_tags=("TRANSLATORS:",),
                )
            )
            base = path
        for filename, lineno, message, comments, context in found:
            where = (str((base / filename).relative_to(ROOT)), lineno)
            catalog.add(message, locations=[where], auto_comments=comments, context=context)
    return catalog


def po_path(language: str, domain: str) -> Path:
    return LOCALE / language / "LC_MESSAGES" / f"{domain}.po"


def read_catalog(path: Path, language: str) -> Catalog:
    if not path.exists():
        return Catalog(locale=language, domain=path.stem, project="llminfer", fuzzy=False)
    with path.open("rb") as handle:
        return read_po(handle, locale=language)


def untranslated(template: Catalog, language: str, domain: str) -> list[str]:
    """The template's messages that ``language``'s catalog lacks or leaves empty or fuzzy."""
    catalog = read_catalog(po_path(language, domain), language)
    missing = []
    for message in template:
        if not message.id:
            continue
        found = catalog.get(message.id)
        strings = found.string if found else None
        empty = not strings or (isinstance(strings, tuple) and not all(strings))
        if found is None or empty or found.fuzzy:
            missing.append(message.id if isinstance(message.id, str) else message.id[0])
    return missing


def stale_mo(language: str, domain: str) -> bool:
    """Whether the compiled .mo says something other than its .po."""
    po, mo = po_path(language, domain), po_path(language, domain).with_suffix(".mo")
    if not po.exists():
        return False
    if not mo.exists():
        return True
    catalog = read_catalog(po, language)
    with mo.open("rb") as handle:
        compiled = read_mo(handle)
    want = {m.id: m.string for m in catalog if m.id and m.string and not m.fuzzy}
    have = {m.id: m.string for m in compiled if m.id}
    return want != have


def update(domain: str) -> None:
    template = extract(domain)
    LOCALE.mkdir(parents=True, exist_ok=True)
    with (LOCALE / f"{domain}.pot").open("wb") as handle:
        write_po(handle, template, omit_header=False, sort_output=True, width=100)
    for language in TRANSLATED:
        path = po_path(language, domain)
        path.parent.mkdir(parents=True, exist_ok=True)
        catalog = read_catalog(path, language)
        catalog.update(template, no_fuzzy_matching=True)
        catalog.obsolete.clear()
        with path.open("wb") as handle:
            write_po(handle, catalog, sort_output=True, width=100)


def compile_mo(domain: str) -> None:
    for language in TRANSLATED:
        path = po_path(language, domain)
        if not path.exists():
            continue
        catalog = read_catalog(path, language)
        buffer = io.BytesIO()
        write_mo(buffer, catalog, use_fuzzy=False)
        path.with_suffix(".mo").write_bytes(buffer.getvalue())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--compile", action="store_true", help="compile the .po files only")
    mode.add_argument("--check", action="store_true", help="report what is missing or stale")
    parser.add_argument("domains", nargs="*", default=list(DOMAINS))
    args = parser.parse_args(argv)
    problems = 0
    for domain in args.domains:
        if args.check:
            template = extract(domain)
            for language in TRANSLATED:
                for message in untranslated(template, language, domain):
                    problems += 1
                    print(f"{domain} [{language}]: untranslated: {message!r}", file=sys.stderr)
                if stale_mo(language, domain):
                    problems += 1
                    print(f"{domain} [{language}]: .mo older than .po (make catalogs)")
            continue
        if not args.compile:
            update(domain)
        compile_mo(domain)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
