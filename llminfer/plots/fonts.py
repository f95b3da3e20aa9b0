"""Figures in the learner's language: a CJK font found by name, or English labels, never boxes.

A Chinese label drawn in a font without Chinese glyphs comes out as empty boxes (and matplotlib
warns "Glyph … missing from font(s)"). So a plot's words go through ``_`` from this module,
not the package-wide one: in Chinese it translates them only when a CJK font is installed,
and then puts that font behind matplotlib's default as a per-glyph fallback (Latin letters and
digits keep DejaVu Sans; matplotlib ≥ 3.6 falls back glyph by glyph). Where no CJK font
exists, the figure stays English — readable, if not in the learner's language.
"""

from __future__ import annotations

from functools import cache

import matplotlib
from matplotlib import font_manager

from llminfer import language

#: CJK fonts by family name, most common first: Linux (Noto/Source Han from fonts-noto-cjk,
#: WenQuanYi, Droid), Windows (Microsoft YaHei, SimHei, DengXian), macOS (PingFang, Heiti,
#: Hiragino, Songti, Arial Unicode).
CJK_FONTS: tuple[str, ...] = (
    "Noto Sans CJK SC",
    "Noto Sans SC",
    "Source Han Sans SC",
    "Source Han Sans CN",
    "Noto Sans CJK JP",
    "Noto Serif CJK SC",
    "WenQuanYi Zen Hei",
    "WenQuanYi Micro Hei",
    "Droid Sans Fallback",
    "Microsoft YaHei",
    "SimHei",
    "DengXian",
    "SimSun",
    "PingFang SC",
    "Heiti SC",
    "Hiragino Sans GB",
    "Songti SC",
    "STHeiti",
    "Arial Unicode MS",
)


def _known_cjk_font() -> str | None:
    installed = {entry.name for entry in font_manager.fontManager.ttflist}
    return next((name for name in CJK_FONTS if name in installed), None)


@cache
def cjk_font() -> str | None:
    """The first of ``CJK_FONTS`` matplotlib can find on this computer, or None.

    matplotlib caches the font list the first time it runs, so a font installed afterwards
    (``apt-get install fonts-noto-cjk`` after ``make lab``) is not in it: when the list has no
    CJK font, the system's font files it does not know are added once before giving up.

    Introduced in: notebooks/01_introduction.ipynb
    """
    found = _known_cjk_font()
    if found is not None:
        return found
    known = {entry.fname for entry in font_manager.fontManager.ttflist}
    for path in font_manager.findSystemFonts():
        if path not in known:
            try:
                font_manager.fontManager.addfont(path)
            except (OSError, RuntimeError, ValueError):
                continue  # a file FreeType cannot read is not a font we can use
    return _known_cjk_font()


def speaks_chinese() -> bool:
    """Whether figures are drawn in Chinese now: Chinese chosen and a CJK font found.

    Introduced in: notebooks/01_introduction.ipynb
    """
    return language.get_language() == "zh" and cjk_font() is not None


def prepare_fonts() -> bool:
    """Before a figure is made: whether it is drawn in Chinese, and if so the CJK font put
    behind the default family so matplotlib falls back to it glyph by glyph.

    matplotlib falls back per glyph only across the families named in ``font.family`` (a
    generic "sans-serif" is not expanded into a chain), so the default family is named. Text
    takes the font in force when its artist is made, so this runs before the axes exist.

    Introduced in: notebooks/01_introduction.ipynb
    """
    if not speaks_chinese():
        return False
    font = cjk_font()
    family = list(matplotlib.rcParams["font.family"])
    if font not in family:
        if family == ["sans-serif"]:
            family = list(matplotlib.rcParams["font.sans-serif"][:1])
        matplotlib.rcParams["font.family"] = [*family, font]
    return True


def _(message: str) -> str:
    """A figure's word in the learner's language where it can be drawn, else in English."""
    return language._(message) if prepare_fonts() else message


N_ = language.N_
