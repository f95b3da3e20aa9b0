"""The learner's language: English (the default) or Chinese, for everything llminfer says.

Checker messages and hints, explorer titles and labels, figure titles and axis labels and
chapter 7's diagnosis report are written in English in the code, marked with ``_()`` (or
``N_()`` where the text is a constant translated later), and translated through gettext
catalogs in ``llminfer/language/locale/<lang>/LC_MESSAGES/`` (one catalog per part of the
package; ``make catalogs`` extracts, updates and compiles them with Babel). Switch with
``llminfer.set_language("zh")`` or the environment variable ``LLMINFER_LANG=zh``; the Chinese
notebooks (``notebooks/zh/``) do the former in their first code cell.

``glossary`` holds the one list of terms both editions use.
"""

from __future__ import annotations

import gettext as _gettext
import os
from functools import cache
from importlib import resources

#: Languages with a catalog; "en" is the source language (no catalog).
LANGUAGES: tuple[str, ...] = ("en", "zh")
#: The environment variable read when ``set_language`` was not called.
LANGUAGE_ENV = "LLMINFER_LANG"
#: The catalogs, one per part of the package (gettext domains), searched in this order.
DOMAINS: tuple[str, ...] = ("exercises", "widgets", "plots", "diagnose", "cli", "cost")

_chosen: str | None = None


def _normalise(code: str) -> str:
    """'zh', 'zh_CN', 'zh-Hans', 'zh_CN.UTF-8' → 'zh'; 'en_US' → 'en'."""
    base = str(code).strip().replace("-", "_").split(".")[0].split("_")[0].lower()
    if base not in LANGUAGES:
        raise ValueError(
            f"language {code!r} is not one llminfer speaks; choose one of {', '.join(LANGUAGES)}"
        )
    return base


def set_language(code: str) -> None:
    """Speak ``code`` ("en" or "zh"; "zh_CN", "zh-Hans" and the like are accepted) from now on.

    (It returns nothing, so that a notebook's first cell shows no output; ``get_language()``
    says what was in use, for a caller that puts it back.)

    Introduced in: notebooks/01_introduction.ipynb
    """
    global _chosen
    _chosen = _normalise(code)


def get_language() -> str:
    """The language in use: the last ``set_language``, else ``$LLMINFER_LANG``, else "en".

    Introduced in: notebooks/01_introduction.ipynb
    """
    if _chosen is not None:
        return _chosen
    env = os.environ.get(LANGUAGE_ENV, "")
    try:
        return _normalise(env) if env else "en"
    except ValueError:
        return "en"  # an unknown value in the environment must not break an import


@cache
def _catalog(language: str) -> _gettext.NullTranslations:
    """The language's catalogs chained into one (a message is looked up domain by domain)."""
    chain = _gettext.NullTranslations()
    folder = resources.files(__name__) / "locale" / language / "LC_MESSAGES"
    for domain in reversed(DOMAINS):
        mo = folder / f"{domain}.mo"
        if not mo.is_file():
            continue
        with mo.open("rb") as handle:
            catalog = _gettext.GNUTranslations(handle)
        catalog.add_fallback(chain)
        chain = catalog
    return chain


def _(message: str) -> str:
    """``message`` in the language in use (itself where it has no translation)."""
    language = get_language()
    if language == "en":
        return message
    return _catalog(language).gettext(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    """The singular or plural form of a message, in the language in use.

    Introduced in: notebooks/01_introduction.ipynb
    """
    language = get_language()
    if language == "en":
        return singular if n == 1 else plural
    return _catalog(language).ngettext(singular, plural, n)


def N_(message: str) -> str:
    """Mark a constant for the catalogs without translating it now (translate it with ``_``
    where it is shown, so that ``set_language`` afterwards still takes effect).

    Introduced in: notebooks/01_introduction.ipynb
    """
    return message
