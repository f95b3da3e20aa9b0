"""The explorers speak the learner's language: in Chinese every title, control label, dropdown
display name, readout, the "Not feasible" line and the plain-text stand-in come from the
widgets catalog (values stay what code reads); in English they are what they always were."""

from __future__ import annotations

import html
import re

import pytest
from conftest import wait_for_a_picture_ahead

import llminfer.widgets as widgets
from llminfer.language import get_language, set_language
from llminfer.plots import fonts
from llminfer.widgets import _prefetch

HAN = re.compile(r"[\u4e00-\u9fff]")
#: Words of the English readouts and labels that no Chinese explorer should still show.
ENGLISH = re.compile(
    r"\b(the|of|per|and|at|on|to|from|fits?|does|not|model|batch|target|weights|context|"
    r"prompt|output|network|queue|wait|goodput|completed|good|failed|best|load|knee|"
    r"sequences|experts|step|attention|bound|hit|rate|shared|prefix|block|size|reserved|"
    r"length|transfer|pull|push|worst|case|copy|adds|efficiency|comm|speculate|draft|"
    r"acceptance|users|requests(?!/s)|tokens(?!/s)|overlap|degree|hottest|mean|engine|"
    r"percentile|"
    r"continuous|static|chunked|ridge|point|server|compute|memory|feasible|notebook)\b",
    re.IGNORECASE,
)
#: Labels that are names or identifiers in both languages.
NAMES = {"GPU", "max_num_seqs"}
CJK_NAME = "Noto Sans CJK SC"
# Where no CJK font is installed the pictures are drawn with a font name matplotlib cannot
# find: the glyphs are missing (a warning, and boxes nobody sees), the words are still Chinese.
pytestmark = pytest.mark.filterwarnings("ignore:Glyph .* missing from font:UserWarning")


@pytest.fixture
def language_back(monkeypatch, language_back):
    """The shared fixture, with no picture drawn ahead unless a test asks for it."""
    monkeypatch.setenv("LLMINFER_PREFETCH", "0")


def _font_for_pictures() -> str:
    fonts.cjk_font.cache_clear()
    return fonts.cjk_font() or CJK_NAME  # the real font where this machine has one


@pytest.fixture
def zh(cjk_font_as, language_back):
    """Chinese, with a CJK font "found" so that the pictures take the Chinese path too."""
    cjk_font_as(_font_for_pictures())
    set_language("zh")


def _explorers() -> dict:
    """One of every explorer (small or precomputed inputs, so each builds quickly)."""
    from llminfer.exercises.ch06 import ARTICLE_LOG
    from llminfer.sim.loadsweep import sweep
    from llminfer.sim.workload import Workload
    from llminfer.specs.presets import get_gpu, get_model

    table = sweep(
        Workload(60, rate=1, prompt_tokens=300, output_tokens=30),
        get_model("llama-3.1-8b"),
        get_gpu("h100-sxm"),
        rates=[1, 8, 64],
    )
    return {
        "RequestJourney": widgets.RequestJourney(),
        "RooflineExplorer": widgets.RooflineExplorer(),
        "MemoryExplorer": widgets.MemoryExplorer(),
        "SLOExplorer": widgets.SLOExplorer(ARTICLE_LOG),
        "LoadExplorer": widgets.LoadExplorer(table),
        "BatchingExplorer": widgets.BatchingExplorer(n_requests=40),
        "QuantizationExplorer": widgets.QuantizationExplorer(),
        "PagingExplorer": widgets.PagingExplorer(),
        "PrefixCacheExplorer": widgets.PrefixCacheExplorer(),
        "SpeculativeExplorer": widgets.SpeculativeExplorer(),
        "TensorParallelExplorer": widgets.TensorParallelExplorer(batch=4),
        "DisaggregationExplorer": widgets.DisaggregationExplorer(),
        "ExpertsExplorer": widgets.ExpertsExplorer(),
        "MoEServingExplorer": widgets.MoEServingExplorer(),
        "DiagnosisExplorer": widgets.DiagnosisExplorer(case="healthy"),
    }


def _prose(text: str) -> str:
    """What a reader reads in a readout, without tags, names, numbers and code."""
    text = re.sub(r"<[^>]+>", " ", html.unescape(text))
    text = re.sub(r"[!-~]*[0-9_=][!-~]*", " ", text)  # numbers, identifiers: EP144, fp8, p99
    return re.sub(
        r"\b(NVLink|PCIe|Prefill|Decode|Token|Prompt|KV|Cache|TTFT|TPOT|E2E)\b", " ", text
    )


def _english_left(explorer) -> str:
    """The explorer's summary without what other parts of llminfer write (cost's reasons,
    the memory plan, the diagnosis): those come from other catalogs or stay English."""
    summary = explorer._summary.value
    result = explorer.result
    for foreign in (
        getattr(result, "reason", None),
        getattr(getattr(result, "estimate", None), "reason", None),
        str(getattr(result, "memory", "")),
        getattr(explorer, "warning", ""),
    ):
        if foreign:
            summary = summary.replace(html.escape(foreign), " ").replace(foreign, " ")
    if isinstance(explorer, widgets.DiagnosisExplorer):
        summary = summary.split("<br>")[1].split("</p>")[0]  # the explorer's own line
    return _prose(summary)


def test_every_explorer_speaks_chinese(zh):
    for name, explorer in _explorers().items():
        title = explorer.ui.children[0].value
        assert HAN.search(title) and not ENGLISH.search(_prose(title)), (name, title)
        for key, control in explorer.controls.items():
            label = control.description
            if label in NAMES:
                continue
            assert not ENGLISH.search(_prose(label)), (name, key, label)
        left = _english_left(explorer)
        assert HAN.search(left), (name, explorer._summary.value)
        assert not ENGLISH.search(left), (name, ENGLISH.findall(left), explorer._summary.value)
        plain = explorer._repr_mimebundle_()["text/plain"]
        assert plain.startswith(f"{name}：") and "运行笔记本" in plain, plain


def test_the_not_feasible_line_and_the_reasons_are_chinese(zh):
    memory = widgets.MemoryExplorer(model="llama-3.1-70b")
    assert memory.warning and "<b>⚠ 不可行：</b>" in memory._summary.value
    assert "<b style='color:#b00020'>放不下</b>" in memory._summary.value
    table = widgets.TensorParallelExplorer()
    assert table.warning.endswith("行放不下"), table.warning
    moe = widgets.MoEServingExplorer(batch=512, context_tokens=32768)
    assert moe.warning.startswith("每张 GPU 上 512 条 32,768 Token 的序列"), moe.warning
    experts = widgets.ExpertsExplorer(model="qwen3-30b-a3b")
    experts.controls["ep"].value = 256
    assert experts.error.startswith("ep=256 超过了 Qwen3-30B-A3B 的 128 个路由专家"), experts.error


def test_dropdown_labels_translate_and_values_stay(zh):
    explorer = widgets.DisaggregationExplorer()
    transfer = explorer.controls["transfer"]
    assert [value for _, value in transfer.options] == ["pull", "layerwise"]
    assert transfer.label.startswith("Prefill 后拉取") and transfer.value == "pull"
    transfer.value = "layerwise"
    assert "逐层推送" in explorer._summary.value and explorer.result["transfer"].iloc[0] == (
        "layerwise"
    )
    journey = widgets.RequestJourney()
    assert list(journey.result.stages) == ["network", "queue", "prefill", "decode"]  # data
    assert journey._summary.value.startswith("<p>网络 50 ms · 排队 200 ms · Prefill ")


def test_the_pictures_speak_chinese_and_are_kept_per_language(language_back, cjk_font_as):
    set_language("en")
    explorer = widgets.RooflineExplorer()
    english_png = bytes(explorer._image.value)
    english_key = explorer._key(explorer.values())
    cjk_font_as(_font_for_pictures())
    set_language("zh")
    assert explorer._key(explorer.values()) != english_key
    explorer.update()
    figure = explorer.figure
    assert figure.axes[0].get_title().endswith("的屋顶线模型：屋脊点左侧 = 内存带宽密集")
    labels = [t.get_text() for t in figure.axes[0].get_legend().get_texts()]
    assert labels[1:] == ["Prefill 1×2,048 个 Token", "Decode 批次大小 1"], labels
    assert bytes(explorer._image.value) != english_png
    set_language("en")
    explorer.update()  # back in English: the English picture, from the cache
    assert bytes(explorer._image.value) == english_png


def test_the_worker_draws_in_the_kernels_language(language_back, monkeypatch):
    sent = []

    class Pool:
        def submit(self, *args):
            sent.append(args)
            return None

    monkeypatch.setattr(_prefetch, "executor", lambda: Pool())
    set_language("zh")
    explorer = widgets.SpeculativeExplorer()
    _prefetch.submit("token", explorer, {}, explorer.values())
    assert sent and sent[0][-1] == "zh"
    # in the worker: render() takes the language before drawing
    set_language("en")
    _prefetch.render("t-zh", type(explorer).__module__, "SpeculativeExplorer", {}, {}, "zh")
    assert get_language() == "zh"


def test_english_is_what_it_always_was(language_back):
    set_language("en")
    memory = widgets.MemoryExplorer(model="llama-3.1-70b")
    assert (
        memory.ui.children[0].value == "<b>Memory budget: weights first, the rest is KV cache</b>"
    )
    assert "<b>⚠ Not feasible:</b> weights (131.4 GiB)" in memory._summary.value
    assert memory.controls["n_gpus"].description == "GPUs (tensor parallel)"
    assert memory._repr_mimebundle_()["text/plain"] == (
        "MemoryExplorer: Memory budget: weights first, the rest is KV cache "
        "(run the notebook to move its controls)"
    )
    journey = widgets.RequestJourney()
    assert journey._summary.value.startswith("<p>network 50 ms · queue 200 ms · prefill ")
    assert "TTFT (server) " in journey._summary.value and ", compute-bound · TPOT " in (
        journey._summary.value
    )
    disaggregation = widgets.DisaggregationExplorer()
    assert disaggregation.controls["transfer"].label == (
        "pull after prefill (vLLM NixlConnector, default)"
    )
    assert disaggregation._summary.value.startswith(
        "KV cache pulled after the prefill. Worst case:"
    )
    speculative = widgets.SpeculativeExplorer(alpha=0.1, cost_ratio=0.5)
    assert speculative._summary.value == (
        "<p>Best: do not speculate (every γ > 0 is slower than plain decoding).</p>"
    )
    for explorer in _explorers().values():
        assert not HAN.search(explorer.ui.children[0].value)
        assert not any(HAN.search(c.description) for c in explorer.controls.values())


def test_a_picture_made_ahead_in_chinese_is_the_one_the_kernel_draws(language_back, monkeypatch):
    # a real worker process (spawned: it starts in English) draws in the kernel's language
    monkeypatch.setattr(_prefetch, "enabled", lambda: True)
    monkeypatch.setattr(_prefetch, "_waiting", [])
    set_language("zh")
    explorer = widgets.RequestJourney()
    control, step, _ = wait_for_a_picture_ahead(explorer)
    control.value = step
    made_ahead = bytes(explorer._image.value)
    explorer._pictures.clear()
    explorer.update()  # the same values drawn here, in this process, in Chinese
    assert bytes(explorer._image.value) == made_ahead
    for job in list(explorer._ahead.values()):
        job.cancel()


def test_a_message_in_several_catalogs_has_one_translation():
    # the catalogs are chained (exercises, widgets, plots, ...): a message found in two of
    # them is read from the first everywhere, so both must say the same
    from pathlib import Path

    from babel.messages.pofile import read_po

    folder = Path(widgets.__file__).parents[1] / "language" / "locale" / "zh" / "LC_MESSAGES"
    seen: dict[str, dict[str, str]] = {}
    for domain in ("exercises", "widgets", "plots"):
        with (folder / f"{domain}.po").open("rb") as handle:
            for message in read_po(handle, locale="zh"):
                if message.id:
                    seen.setdefault(message.id, {})[domain] = message.string
    differ = {k: v for k, v in seen.items() if len(set(v.values())) > 1}
    assert not differ, differ
