"""The Chinese edition: one language setting, complete catalogs, one glossary, code parity
between the editions, and figures that draw Chinese where a CJK font exists (issue 25)."""

from __future__ import annotations

import importlib.util
import re
import sys
import warnings
from pathlib import Path

import nbformat
import pytest

import llminfer
from llminfer import language
from llminfer.language import glossary

ROOT = Path(__file__).resolve().parent.parent
ENGLISH = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CHINESE = sorted((ROOT / "notebooks" / "zh").glob("[0-9][0-9]_*.ipynb"))
EN_LINE = 'set_language("en")  # 中文版 (notebooks/zh/): set_language("zh")'
ZH_LINE = 'set_language("zh")  # English edition (notebooks/): set_language("en")'


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# --- the setting ---------------------------------------------------------------------------


def test_english_by_default_and_the_environment_or_a_call_switches(language_back, monkeypatch):
    language._chosen = None
    assert language.get_language() == "en"
    monkeypatch.setenv(language.LANGUAGE_ENV, "zh_CN.UTF-8")
    assert language.get_language() == "zh"
    monkeypatch.setenv(language.LANGUAGE_ENV, "klingon")
    assert language.get_language() == "en"  # a bad environment never breaks an import
    llminfer.set_language("zh-Hans")
    assert llminfer.get_language() == "zh"
    assert llminfer.set_language("en") is None  # a first cell shows no output
    assert language.get_language() == "en"


def test_an_unknown_language_is_a_clear_error(language_back):
    with pytest.raises(ValueError, match="choose one of en, zh"):
        llminfer.set_language("fr")


def test_english_is_the_message_itself_and_chinese_comes_from_the_catalogs(language_back):
    llminfer.set_language("en")
    assert language._("no such message ✓") == "no such message ✓"
    assert language.ngettext("{n} request", "{n} requests", 2) == "{n} requests"
    llminfer.set_language("zh")
    assert language._("no such message ✓") == "no such message ✓"  # untranslated: itself


# --- the catalogs --------------------------------------------------------------------------


def test_every_message_the_package_marks_has_a_chinese_entry_and_compiled_catalogs_are_fresh():
    catalogs = _script("catalogs")
    problems = []
    for domain in language.DOMAINS:
        template = catalogs.extract(domain)
        problems += [f"{domain}: {m!r}" for m in catalogs.untranslated(template, "zh", domain)]
        if catalogs.stale_mo("zh", domain):
            problems.append(f"{domain}: .mo older than .po (run make catalogs)")
    assert not problems, "\n".join(problems[:40])


def test_a_translated_message_keeps_every_placeholder():
    catalogs = _script("catalogs")
    field = re.compile(r"\{[^{}]*\}")
    bad = []
    for domain in language.DOMAINS:
        catalog = catalogs.read_catalog(catalogs.po_path("zh", domain), "zh")
        for message in catalog:
            if not message.id or not message.string:
                continue
            ids = message.id if isinstance(message.id, tuple) else (message.id,)
            strings = message.string if isinstance(message.string, tuple) else (message.string,)
            want = sorted(field.findall(ids[-1]))
            bad += [(domain, ids[0]) for s in strings if sorted(field.findall(s)) != want]
    assert not bad, bad[:10]


# --- the glossary --------------------------------------------------------------------------


def test_each_term_once_with_both_languages_and_no_variant_that_is_another_terms_word():
    entries = glossary.terms()
    assert len(entries) >= 50
    for entry in entries.values():
        assert entry.zh and entry.en and entry.unit, entry.key
        assert entry.definition_en and re.search(r"[\u4e00-\u9fff]", entry.definition_zh)
        assert entry.zh not in entry.variants_zh
    zh_terms = [e.zh for e in entries.values()]
    assert len(zh_terms) == len(set(zh_terms)), "two terms share a Chinese word"
    proper = set(zh_terms)
    clashes = [(e.key, v) for e in entries.values() for v in e.variants_zh if v in proper]
    assert not clashes, clashes


def test_the_article_own_words_are_the_terms():
    # seed article, chapter 2: "长 Prompt 的首字时间"; chapter 3: "端到端延迟和系统吞吐";
    # chapter 2: "算术强度", "显存带宽"; the article leaves Prefill, Decode, KV Cache in English.
    expected = {
        "ttft": "首字时间",
        "e2e": "端到端延迟",
        "tps": "系统吞吐",
        "arithmetic_intensity": "算术强度",
        "memory_bandwidth": "显存带宽",
        "prefill": "Prefill",
        "decode": "Decode",
        "kv_cache": "KV Cache",
        "quantisation": "量化",
        "prefix_caching": "前缀缓存",
        "speculative_decoding": "推测解码",
    }
    assert {k: glossary.term(k).zh for k in expected} == expected
    with pytest.raises(KeyError, match="no glossary term 'ttfb'"):
        glossary.term("ttfb")


def test_variants_are_found_in_prose_not_in_code_or_inside_a_proper_term():
    text = "首字延迟很高。`首字延迟` 在代码里不算；混合专家模型不是变体；激活参数量是。"
    found = [v for v, _ in glossary.variants_in(text, "zh")]
    assert found == ["首字延迟", "激活参数量"]


@pytest.mark.parametrize("path", ENGLISH + CHINESE, ids=lambda p: "/".join(p.parts[-2:]))
def test_each_notebook_has_a_generated_glossary_and_no_variant_in_its_prose(path):
    tool = _script("glossary_cells")
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if tool.glossary_keys(c) is not None]
    assert len(cells) == 1, "one glossary cell per notebook"
    assert not tool.stale_cells(path), "run python scripts/glossary_cells.py"
    edition = tool.edition(path)
    found = [
        (index, variant, use)
        for index, cell in enumerate(nb.cells)
        if cell.cell_type == "markdown"
        for variant, use in glossary.variants_in(cell.source, edition)
    ]
    assert not found, [f"cell {i}: {v!r} → {u!r}" for i, v, u in found]


# --- the two editions ----------------------------------------------------------------------


def test_every_english_notebook_has_a_chinese_one():
    assert [p.name for p in CHINESE] == [p.name for p in ENGLISH]


@pytest.mark.parametrize("path", ENGLISH, ids=lambda p: p.stem)
def test_code_cells_are_identical_but_for_the_language_setting(path):
    zh_path = ROOT / "notebooks" / "zh" / path.name
    if not zh_path.exists():
        pytest.fail(f"{zh_path.relative_to(ROOT)} is missing")
    en = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    zh = [c.source for c in nbformat.read(zh_path, as_version=4).cells if c.cell_type == "code"]
    assert en[0].count(EN_LINE) == 1, "the English first code cell sets its language once"
    assert zh[0].count(ZH_LINE) == 1, "the Chinese first code cell sets its language once"
    assert [zh[0].replace(ZH_LINE, EN_LINE), *zh[1:]] == en
    assert not any("set_language" in source for source in en[1:])


@pytest.mark.parametrize("path", CHINESE, ids=lambda p: p.stem)
def test_the_chinese_edition_prose_is_chinese(path):
    nb = nbformat.read(path, as_version=4)
    prose = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    prose = re.sub(r"```.*?```|`[^`\n]*`|<?https?://\S+|\$[^$]*\$", " ", prose, flags=re.S)
    han = len(re.findall(r"[\u4e00-\u9fff]", prose))
    words = len(re.findall(r"[A-Za-z]{4,}", prose))
    assert han > 2000, han
    assert han > 4 * words, (han, words)  # English left only in names, symbols and units


@pytest.mark.parametrize("path", ENGLISH + CHINESE, ids=lambda p: "/".join(p.parts[-2:]))
def test_bold_renders_in_every_cell(path):
    # CommonMark will not close "**…：**" before a Chinese character (a closing ** after
    # punctuation must be followed by a space or punctuation), so the asterisks show: render
    # every markdown cell as JupyterLab's markdown parser does and look for them.
    from markdown_it import MarkdownIt

    renderer = MarkdownIt("commonmark").enable("table")
    nb = nbformat.read(path, as_version=4)
    shown = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        html = re.sub(
            r"<code>.*?</code>|<pre>.*?</pre>", "", renderer.render(cell.source), flags=re.S
        )
        shown += [f"cell {index}: …{m.group(0)}…" for m in re.finditer(r".{0,20}\*\*.{0,20}", html)]
    assert not shown, shown[:10]


# --- figures -------------------------------------------------------------------------------


def test_figures_fall_back_to_english_where_no_cjk_font_exists(language_back, monkeypatch):
    from llminfer.plots import fonts

    monkeypatch.setattr(fonts, "cjk_font", lambda: None)
    llminfer.set_language("zh")
    assert not fonts.speaks_chinese()
    assert fonts._("not translated anyway") == "not translated anyway"


def test_a_chinese_figure_renders_without_a_missing_glyph(language_back):
    from llminfer.plots import fonts
    from llminfer.plots._figure import figure_png, new_figure

    if fonts.cjk_font() is None:
        pytest.skip("no CJK font here (apt-get install fonts-noto-cjk); figures stay English")
    llminfer.set_language("zh")
    assert fonts.speaks_chinese()
    assert fonts.prepare_fonts()  # the CJK font behind the default family
    fig, ax = new_figure()
    ax.set_title("首字时间（TTFT）p95 与并发")
    ax.set_xlabel("并发（用户）")
    ax.plot([1, 2], [3, 4], label="实测")
    ax.legend()
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*missing from font.*")
        figure_png(fig)


def test_sync_editions_carries_a_code_change_and_keeps_the_translation(tmp_path, monkeypatch):
    tool = _script("sync_editions")
    (tmp_path / "zh").mkdir()
    english = tmp_path / ENGLISH[0].name
    chinese = tmp_path / "zh" / ENGLISH[0].name
    nb = nbformat.read(ENGLISH[0], as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    code[1].source += "\n# changed"
    nbformat.write(nb, english)
    chinese.write_bytes((ROOT / "notebooks" / "zh" / ENGLISH[0].name).read_bytes())
    monkeypatch.setattr(tool, "ROOT", tmp_path)
    assert tool.sync(english, check=True) == [
        f"{chinese.name}: code cells {[code[1].id]} differ from the English"
    ]
    assert tool.sync(english) == []
    synced = nbformat.read(chinese, as_version=4)
    zh_code = [c for c in synced.cells if c.cell_type == "code"]
    assert zh_code[1].source.endswith("# changed") and zh_code[1].outputs == []
    assert ZH_LINE in zh_code[0].source
    zh_prose = [c.source for c in synced.cells if c.cell_type == "markdown"]
    assert zh_prose == [
        c.source
        for c in nbformat.read(ROOT / "notebooks" / "zh" / ENGLISH[0].name, as_version=4).cells
        if c.cell_type == "markdown"
    ]
    assert tool.sync(english, check=True) == []
