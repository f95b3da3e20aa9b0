"""profile_table / profile_chart: where the "vllm" and "pytorch" engine profiles agree and part
(issue 21 point 1): Llama-3.1-8B on one H100 SXM."""

import matplotlib
import pytest

from llminfer import get_gpu, get_model
from llminfer.cost.latency import profile_table
from llminfer.plots import profile_chart

matplotlib.use("Agg")
LLAMA8, H100 = get_model("llama-3.1-8b"), get_gpu("h100-sxm")


def test_batch_one_at_32k_is_split_and_a_full_grid_is_not():
    table = profile_table(LLAMA8, H100, [1, 16], [512, 32768]).set_index(
        ["batch", "context_tokens"]
    )
    long = table.loc[(1, 32768)]
    # 8 KV heads x 14 splits (FlashAttention 3's wave rule, hand-worked in test_steptime.py)
    assert long.splits == 14
    assert long.pytorch_ms == pytest.approx(24.37, abs=0.01)
    assert long.vllm_ms == pytest.approx(8.78, abs=0.01)
    assert long.ratio == pytest.approx(long.pytorch_ms / long.vllm_ms)
    assert long.floor_ms < long.vllm_ms
    # 512 tokens = four 128-token blocks: never split; 16 x 8 = 128 blocks >= 0.8 x 132: full
    assert table.loc[(1, 512)].splits == 1
    assert table.loc[(16, 512)].splits == 1 and table.loc[(16, 512)].ratio == pytest.approx(1)


def test_tensor_parallel_splits_the_heads_and_so_more_splits():
    row = profile_table(LLAMA8, H100, [1], [32768], n_gpus=4).iloc[0]
    assert row.splits == 28  # 2 KV heads per GPU: wave_splits(2, 132, 32) = 28
    assert (round(row.pytorch_ms, 1), round(row.vllm_ms, 1)) == (21.5, 5.1)


def test_bad_input_is_refused_with_its_name():
    with pytest.raises(ValueError, match="at least two"):
        profile_table(LLAMA8, H100, [1], [1024], profiles=("vllm",))
    with pytest.raises(ValueError, match="must not repeat"):
        profile_table(LLAMA8, H100, [1], [1024], profiles=("vllm", "vllm"))
    with pytest.raises(ValueError, match="batch"):
        profile_table(LLAMA8, H100, [0], [1024])
    with pytest.raises(ValueError, match="context_tokens"):
        profile_table(LLAMA8, H100, [1], [0])


def test_the_chart_draws_each_batch_for_both_profiles():
    table = profile_table(LLAMA8, H100, [1, 64], [1024, 32768])
    fig = profile_chart(table)
    left, right = fig.axes
    assert len(left.lines) == 4 and len(right.lines) == 3  # 2 batches x 2 profiles; ratio + 1
    assert list(left.lines[1].get_ydata()) == list(table[table.batch == 1].vllm_ms)
    with pytest.raises(ValueError, match="step columns"):
        profile_chart(table.drop(columns="pytorch_ms"))
