"""Figures speak the learner's language where they can: in Chinese (with a CJK font) every
title, axis label, legend and annotation comes from the plots catalog; without a CJK font, and
in English, they are what they always were."""

from __future__ import annotations

import re
import warnings

import matplotlib
import pandas as pd
import pytest

from llminfer import plots
from llminfer.language import set_language
from llminfer.plots import fonts

HAN = re.compile(r"[\u4e00-\u9fff]")
#: English words no Chinese figure should still show (names, units and symbols aside).
ENGLISH = re.compile(
    r"\b(the|of|per|time|since|share|requests?|weights|memory|latency|throughput|load|"
    r"step|before|after|target|fits?|free|reserve|queue|network|prefill|decode|estimate|"
    r"ideal|measured|model|standard|added|batching|preemptions|hit|rate|tokens(?!/s))\b"
)
CJK_NAME = "Noto Sans CJK SC"


@pytest.fixture
def zh_font(cjk_font_as, language_back):
    """Chinese chosen and a CJK font "found" (whether or not this machine has one)."""
    cjk_font_as(CJK_NAME)
    set_language("zh")


@pytest.fixture
def no_font(cjk_font_as, language_back):
    cjk_font_as(None)
    set_language("zh")


def _words(fig) -> list[str]:
    """What a reader reads in ``fig``: titles, axis labels, legends, annotations (not ticks)."""
    found = [fig.get_suptitle()] if fig._suptitle is not None else []
    for ax in fig.axes:
        found += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        legend = ax.get_legend()
        if legend is not None:
            found += [t.get_text() for t in legend.get_texts()]
            found.append(legend.get_title().get_text())
        found += [t.get_text() for t in ax.texts]
    for legend in fig.legends:
        found += [t.get_text() for t in legend.get_texts()]
    return [w for w in found if w]


def _figures() -> dict:
    from llminfer.cost.latency import decode_batch_table, estimate_latency, request_breakdown
    from llminfer.cost.memory import plan_memory
    from llminfer.exercises.ch06 import ARTICLE_LOG
    from llminfer.sim import disaggregation, techniques
    from llminfer.sim.expert_parallel import ep_sweep
    from llminfer.specs.presets import get_gpu, get_model

    model, gpu = get_model("llama-3.1-8b"), get_gpu("h100-sxm")
    est = estimate_latency(model, gpu, 2048, 256)
    log = ARTICLE_LOG.assign(scheduled_ts=ARTICLE_LOG.start_ts + 0.1)
    sweep = pd.DataFrame(
        {
            "rate": [1, 4, 16],
            "output_tps": [200.0, 700.0, 900.0],
            **{f"{m}_p{q}": [0.1, 0.2, 2.0] for m in ("ttft_s", "tpot_s") for q in (50, 99)},
        }
    )
    links = {"NVLink (same node)": 450e9, "100 Gb/s Ethernet": 12.5e9}
    return {
        "memory_bar": plots.memory_bar(plan_memory(model, gpu)),
        "latency_cdf": plots.latency_cdf(log, slo={"ttft_s": 0.5}),
        "request_timeline": plots.request_timeline(log),
        "request_anatomy": plots.request_anatomy(log),
        "request_breakdown": plots.request_breakdown_chart(request_breakdown(est, 0.05, 0.2)),
        "roofline": plots.roofline_chart(gpu, {"Decode": est.decode_cost}),
        "decode_batch": plots.decode_batch_chart(decode_batch_table(model, gpu, [1, 64], 2048)),
        "throughput_latency": plots.throughput_latency(
            sweep, knee_load=4, best=1, slo={"ttft_s": 1.0}
        ),
        "fragmentation": plots.fragmentation_bars(
            techniques.fragmentation_simulation((1, 64), (1, 64), 256, (16,), n_requests=50)
        ),
        "disaggregation": plots.disaggregation_bars(
            disaggregation.disaggregation_table(model, gpu, [512], links=links, transfer="pull")
        ),
        "ep_sweep": plots.ep_sweep_chart(
            ep_sweep(get_model("deepseek-v3"), get_gpu("h800"), [16, 64], [144], 4989)
        ),
    }


def _han_share(words: list[str]) -> float:
    text = " ".join(words)
    # names, symbols, units and the terms Chinese keeps in English (glossary): EP144, TTFT, p95,
    # ms, tokens/s, Prefill, Decode, Token, Prompt, KV Cache
    kept = r"\b(ms|µs|s|x|tokens/s|Prefill|Decode|Token|Prompt|Cache)\b"
    text = re.sub(r"[A-Za-z_]+[0-9][\w.-]*|[A-Z]{2,}\w*|" + kept, " ", text)
    han = len(HAN.findall(text))
    return han / max(1, han + len(re.findall(r"[A-Za-z]", text)))


def test_every_figure_speaks_chinese_with_a_cjk_font(zh_font):
    assert fonts.speaks_chinese()
    for name, fig in _figures().items():
        words = _words(fig)
        assert words, name
        assert _han_share(words) > 0.6, (name, words)
        left = [w for w in words if ENGLISH.search(w)]
        assert not left, (name, left)
    # the CJK font sits behind the default family, glyph by glyph
    assert matplotlib.rcParams["font.family"][-1] == CJK_NAME


def test_chinese_labels_in_detail(zh_font):
    from llminfer.cost.memory import plan_memory
    from llminfer.specs.presets import get_gpu, get_model

    fig = plots.memory_bar(plan_memory(get_model("llama-3.1-8b"), get_gpu("h100-sxm")))
    assert fig.axes[0].get_title() == "先放权重，剩下的都归 KV Cache"
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend[:3] == ["权重", "预留", "KV Cache"]
    assert fig.axes[0].texts[0].get_text().startswith("  放得下\n  1 × 131,072 Token；最多")


def test_without_a_cjk_font_figures_stay_english(no_font):
    assert not fonts.speaks_chinese()
    figures = _figures()
    assert figures["memory_bar"].axes[0].get_title() == (
        "Weights first, the rest belongs to the KV cache"
    )
    for name, fig in figures.items():
        assert not any(HAN.search(w) for w in _words(fig)), name


def test_english_is_what_it_always_was(language_back):
    set_language("en")
    figures = _figures()
    assert figures["memory_bar"].axes[0].get_title() == (
        "Weights first, the rest belongs to the KV cache"
    )
    anatomy = [t.get_text() for t in figures["request_anatomy"].axes[0].texts]
    assert "queue 100 ms" in anatomy and "prefill 320 ms" in anatomy, anatomy
    assert figures["latency_cdf"].get_suptitle() == "Latency distributions (successful requests)"
    assert figures["disaggregation"].axes[0].get_legend().get_texts()[1].get_text() == (
        "NVLink (same node): added to TTFT"
    )
    for name, fig in figures.items():
        assert not any(HAN.search(w) for w in _words(fig)), name


def test_the_latency_table_names_its_rows_in_the_language_font_or_not(no_font):
    from llminfer.exercises.ch06 import ARTICLE_LOG
    from llminfer.logs.summary import summarize
    from llminfer.plots.logs import latency_table

    table = latency_table(summarize(ARTICLE_LOG))
    assert table.index[0] == "首字时间（TTFT）（ms）"
    assert table.index.name == "latency" and "p99" in table.columns  # what code reads stays
    set_language("en")
    english = latency_table(summarize(ARTICLE_LOG))
    assert english.index[0] == "Time to first token (TTFT) (ms)"


def test_a_chinese_figure_draws_every_glyph_where_a_cjk_font_is_installed(language_back):
    from llminfer.plots._figure import figure_png

    fonts.cjk_font.cache_clear()
    if fonts.cjk_font() is None:
        pytest.skip("no CJK font here (apt-get install fonts-noto-cjk); figures stay English")
    family = list(matplotlib.rcParams["font.family"])
    set_language("zh")
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=".*missing from font.*")
            for fig in _figures().values():
                figure_png(fig)
    finally:
        matplotlib.rcParams["font.family"] = family
