"""The numpy toy transformer: cache equivalence, cache bytes, parameter count."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llminfer import kv_cache_bytes
from llminfer.cost.toy import ToyModel


def test_greedy_tokens_are_the_same_with_and_without_the_cache():
    toy = ToyModel(n_layers=2, hidden_size=64, n_heads=4, n_kv_heads=2, vocab_size=256, seed=3)
    prompt = [5, 17, 42, 99, 7, 1]
    cached = toy.generate(prompt, 24)
    uncached = toy.generate(prompt, 24, use_cache=False)
    assert cached.tokens == uncached.tokens
    assert len(cached.tokens) == 24 and len(cached.decode_s) == 23
    assert uncached.cache_bytes == 0


def test_cached_logits_match_a_full_forward_pass():
    toy = ToyModel(seed=1)
    ids = [3, 1, 4, 1, 5, 9, 2, 6]
    full = toy.forward(ids)
    cache = toy.new_cache(len(ids))
    toy.forward(ids[:5], 0, cache)
    step = toy.forward(ids[5:], 5, cache)
    np.testing.assert_allclose(step, full[5:], rtol=1e-4, atol=1e-4)


@settings(max_examples=15, deadline=None)
@given(
    n_layers=st.integers(1, 3),
    n_kv_heads=st.sampled_from([1, 2, 4]),
    prompt_len=st.integers(1, 12),
    n_new=st.integers(1, 6),
    dtype=st.sampled_from(["float32", "float16"]),
)
def test_cache_bytes_equal_kv_cache_bytes_exactly(n_layers, n_kv_heads, prompt_len, n_new, dtype):
    toy = ToyModel(n_layers, 32, 4, n_kv_heads, vocab_size=64, dtype=dtype)
    out = toy.generate(list(range(prompt_len)), n_new)
    kv_dtype = {"float32": "fp32", "float16": "fp16"}[dtype]
    assert out.cache_tokens == prompt_len + n_new - 1
    assert out.cache_bytes == kv_cache_bytes(toy.config, out.cache_tokens, kv_dtype)


def test_config_matches_the_real_arrays():
    toy = ToyModel(n_layers=3, hidden_size=96, n_heads=6, n_kv_heads=2, vocab_size=500)
    assert toy.config.n_params == toy.n_params
    assert toy.config.attention == "GQA" and toy.config.head_dim == 16
    assert toy.weight_bytes == toy.n_params * 4


def test_same_seed_same_weights_and_tokens():
    a, b = ToyModel(seed=7), ToyModel(seed=7)
    assert a.generate([1, 2, 3], 5).tokens == b.generate([1, 2, 3], 5).tokens
    assert not np.array_equal(a.lm_head, ToyModel(seed=8).lm_head)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"prompt_ids": []}, "prompt_ids"),
        ({"prompt_ids": [1, 999]}, "prompt_ids contains 999"),
        ({"n_new": 0}, "n_new=0"),
        ({"n_new": 5000}, "max_context"),
    ],
)
def test_generate_rejects_bad_input(kwargs, name):
    args = {"prompt_ids": [1, 2], "n_new": 3, **kwargs}
    with pytest.raises(ValueError, match=name):
        ToyModel().generate(**args)


def test_toy_rejects_unknown_dtype():
    with pytest.raises(ValueError, match="dtype='float64'"):
        ToyModel(dtype="float64")
