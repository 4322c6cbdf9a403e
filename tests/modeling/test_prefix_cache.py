"""modeling/prefix_cache.py: a shared prefix run once gives the uncached logits (every family the
tests build, float32, 1e-5), the models it cannot serve exactly are named, and the planner covers
every prompt once and shares only what pays (tests/harness/test_model_prefix_cache.py: through
``--model evidential``)."""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lm_eval_evidential.modeling.encoding import last_position_logits, left_pad
from lm_eval_evidential.modeling.prefix_cache import (
    cache_blocker,
    common_prefix_length,
    pays,
    plan_batches,
    prefix_cached_logits,
)
from lm_eval_evidential.testing.tiny import FAMILIES

TOL = 1e-5


@pytest.fixture(scope="module")
def family_models(tiny_model, tmp_path_factory):
    from lm_eval_evidential.testing.tiny import build_tiny_model

    root = tmp_path_factory.mktemp("families")
    return {
        family: tiny_model
        if family == "llama"
        else build_tiny_model(root / family, family=family, seed=0, tokenizer_from=tiny_model)
        for family in FAMILIES
    }


@pytest.mark.parametrize("family", list(FAMILIES))
def test_shared_prefix_gives_the_uncached_logits_on_every_family(family_models, family):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(family_models[family], dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(family_models[family])
    rng = random.Random(0)
    prefix = [tok.bos_token_id] + [rng.randrange(5, len(tok)) for _ in range(37)]
    # suffixes of different lengths (left padding between prefix and suffix), one of a single token
    rows = [prefix + [rng.randrange(5, len(tok)) for _ in range(n)] for n in (1, 9, 4, 15, 2)]
    assert cache_blocker(model, max(map(len, rows))) is None
    with torch.inference_mode():
        uncached = last_position_logits(model, **left_pad(rows, tok.pad_token_id))
        cached = prefix_cached_logits(model, rows, len(prefix), tok.pad_token_id)
        shorter = prefix_cached_logits(model, rows, 20, tok.pad_token_id)  # a prefix shorter than the shared one
    assert cached.shape == uncached.shape
    torch.testing.assert_close(cached, uncached, rtol=0, atol=TOL)
    torch.testing.assert_close(shorter, uncached, rtol=0, atol=TOL)


def test_a_sliding_window_the_batch_would_exceed_falls_back(family_models):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(family_models["gemma2"], dtype=torch.float32)
    window = model.config.sliding_window
    assert cache_blocker(model, window) is None
    assert "sliding window" in cache_blocker(model, window + 1)
    model.config._attn_implementation = "flash_attention_2"
    assert "attention implementation" in cache_blocker(model, 8)


def test_rows_must_be_longer_than_the_prefix(family_models):
    from transformers import AutoModelForCausalLM

    from lm_eval_evidential.errors import InvalidValueError

    model = AutoModelForCausalLM.from_pretrained(family_models["llama"], dtype=torch.float32)
    with pytest.raises(InvalidValueError, match="longer than the shared prefix"):
        prefix_cached_logits(model, [[1, 2, 3], [1, 2]], 2, 0)


@settings(max_examples=200, deadline=None)
@given(
    prompts=st.lists(
        st.lists(st.integers(0, 3), min_size=1, max_size=40).map(lambda t: [1] * 30 + t)
        | st.lists(st.integers(0, 3), min_size=1, max_size=40),
        min_size=0,
        max_size=30,
    ),
    batch_size=st.integers(1, 9),
    min_saved=st.integers(1, 100),
)
def test_plan_covers_every_prompt_once_and_shares_only_what_pays(prompts, batch_size, min_saved):
    batches = plan_batches(prompts, batch_size, min_saved=min_saved)
    rows = [i for b in batches for i in b.rows]
    assert sorted(rows) == list(range(len(prompts)))
    for batch in batches:
        assert 1 <= len(batch.rows) <= batch_size
        if batch.prefix_length:
            assert pays(batch.prefix_length, len(batch.rows), min_saved)
            first = prompts[batch.rows[0]]
            assert all(len(prompts[i]) > batch.prefix_length for i in batch.rows)
            assert all(common_prefix_length(first, prompts[i]) >= batch.prefix_length for i in batch.rows)
    plain = plan_batches(prompts, batch_size, reuse=False)
    assert all(b.prefix_length == 0 for b in plain)
    assert [len(prompts[i]) for b in plain for i in b.rows] == sorted(map(len, prompts), reverse=True)
