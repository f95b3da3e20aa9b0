"""Chapter 4 plots: assert on the data behind the figure, not on pixels."""

import pytest

from llminfer import get_gpu, get_model, plan_memory
from llminfer.cost.memory_tables import concurrency_table
from llminfer.plots import concurrency_curve, memory_bar


def test_memory_bar_segments_are_the_plan_in_gib():
    plan = plan_memory(get_model("llama-3.1-8b"), get_gpu("h100-sxm"), context_tokens=8192)
    fig = memory_bar(plan)
    ax = fig.axes[0]
    widths = [patch.get_width() for patch in ax.patches]
    expected = [v / 2**30 for v in plan.breakdown().values() if v > 0]
    assert widths == pytest.approx(expected)
    assert sum(widths) == pytest.approx(81_559 / 1024)  # nvidia-smi: 81,559 MiB = 79.65 GiB
    assert "GiB" in ax.get_xlabel()
    assert fig._repr_png_().startswith(b"\x89PNG")


def test_memory_bar_rejects_nothing_to_plot():
    with pytest.raises(ValueError, match="plans"):
        memory_bar([])


def test_concurrency_curve_plots_the_table():
    table = concurrency_table(
        {"8B": (get_model("llama-3.1-8b"), get_gpu("h100-sxm"))}, [1024, 2048, 4096]
    )
    ax = concurrency_curve(table).axes[0]
    line = ax.get_lines()[0]
    assert list(line.get_ydata()) == list(table["max_concurrency"])
    assert "tokens" in ax.get_xlabel()
    with pytest.raises(ValueError, match="lacks columns"):
        concurrency_curve(table.drop(columns="label"))
