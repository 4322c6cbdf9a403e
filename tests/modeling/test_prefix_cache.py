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
    SharedPrefix,
    cache_blocker,
    padded_width,
    prefix_cached_logits,
)
from lm_eval_evidential.modeling.prefix_plan import pays, plan_batches
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


STEMS = [[5 + s] * n for s, n in enumerate((20, 9, 33))]  # inner prefixes: a question before its options


def _positions(prompts, batch, inner) -> int:
    """Token positions a batch forwards besides its group's prefix, pads included, counted row by row: its
    distinct inner prefixes padded to the longest, and its suffixes padded to the longest."""
    stems = {tuple(prompts[i][batch.prefix_length : n]) for i, n in zip(batch.rows, inner) if n > batch.prefix_length}
    suffixes = [len(prompts[i]) - n for i, n in zip(batch.rows, inner)]
    return len(stems) * max((len(s) for s in stems), default=0) + len(suffixes) * max(suffixes)


@settings(max_examples=200, deadline=None)
@given(
    prompts=st.lists(
        st.lists(st.integers(0, 3), min_size=1, max_size=40).map(lambda t: [1] * 30 + t)
        | st.lists(st.integers(0, 3), min_size=1, max_size=40)
        | st.tuples(st.sampled_from(STEMS), st.lists(st.integers(0, 3), min_size=1, max_size=6)).map(
            lambda x: [1] * 30 + x[0] + x[1]
        ),
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
    # a group: consecutive batches that begin with the same prefix (its prefix run once for all of them)
    groups: list[list] = []
    for batch in batches:
        assert 1 <= len(batch.rows) <= batch_size
        key = (batch.prefix_length, tuple(prompts[batch.rows[0]][: batch.prefix_length]))
        if batch.prefix_length and groups and groups[-1][0] == key:
            groups[-1][1].extend(batch.rows)
        else:
            groups.append([key, list(batch.rows)])
    seen_plain = False
    for (prefix_length, prefix), members in groups:
        if not prefix_length:
            seen_plain = True
            continue
        assert not seen_plain  # groups first, plain batches after
        assert pays(prefix_length, len(members), batch_size, min_saved)
        assert all(len(prompts[i]) > prefix_length and tuple(prompts[i][:prefix_length]) == prefix for i in members)
        lengths = [len(prompts[i]) for i in members]
        if not any(b.inner for b in batches if b.rows[0] in members):
            assert lengths == sorted(lengths, reverse=True)  # longest first within a group: fewest pads
    for batch in batches:  # an inner prefix: shared by rows of its batch, and only where its batch saves enough
        if batch.inner is None:
            continue
        assert batch.prefix_length and len(batch.inner) == len(batch.rows)
        stems = [tuple(prompts[i][batch.prefix_length : n]) for i, n in zip(batch.rows, batch.inner)]
        assert all(batch.prefix_length <= n < len(prompts[i]) for i, n in zip(batch.rows, batch.inner))
        assert sum(len(stem) for stem in stems if stem) - sum(len(stem) for stem in set(stems)) >= min_saved
        lone = [j for j, stem in enumerate(stems) if stem and stems.count(stem) == 1]
        if lone:  # a row whose run the batch's edge cut runs its inner prefix alone only where that forwards less
            without = [batch.prefix_length if j in lone else n for j, n in enumerate(batch.inner)]
            assert _positions(prompts, batch, batch.inner) < _positions(prompts, batch, without)
    assert len({key for key, _ in groups if key[0]}) == sum(1 for key, _ in groups if key[0])  # one run each
    plain = plan_batches(prompts, batch_size, reuse=False)
    assert all(b.prefix_length == 0 for b in plain)
    assert [len(prompts[i]) for b in plain for i in b.rows] == sorted(map(len, prompts), reverse=True)


def test_orders_are_batched_with_the_fewest_pads():
    # Permuted orders behind a 30-token block: each question's orders share its stem (the question before its
    # options) and differ in their last tokens (the options).
    block = [1] * 30

    def question(token, stem, suffix, orders):
        return [block + [token] * stem + [token + 1 + (o + j) % suffix for j in range(suffix)] for o in range(orders)]

    # Questions of near length, options of unequal length. Longest prompt first pairs a (stem 40, options 2)
    # with b (11, 30) and c (38, 2) with d (9, 30): every batch pads its 4 suffixes to 30 and its 2 stems to
    # the longer, 120 + 80 + 120 + 76 = 396 positions. Longest options first pairs b with d and a with c:
    # 120 + 22 + 8 + 80 = 230.
    prompts = [*question(10, 40, 2, 2), *question(50, 11, 30, 2), *question(90, 38, 2, 2), *question(130, 9, 30, 2)]
    assert [len(p) for p in prompts[::2]] == [72, 71, 70, 69]
    batches = plan_batches(prompts, 4, min_saved=8)
    assert [(b.rows, b.prefix_length, b.inner) for b in batches] == [
        ([2, 3, 6, 7], 30, (41, 41, 39, 39)),
        ([0, 1, 4, 5], 30, (70, 70, 68, 68)),
    ]
    assert sum(_positions(prompts, b, b.inner) for b in batches) == 230

    # Three orders in batches of 4: the batch's edge cuts the second question's orders. Its order in the first
    # batch runs its stem alone rather than pad the batch's suffixes to stem and options (60 + 4 x 62 = 308
    # positions): the stems call 2 x 60 and the suffixes 4 x 2, 128.
    prompts = [p for token in (10, 90, 170, 250) for p in question(token, 60, 2, 3)]
    first = plan_batches(prompts, 4, min_saved=8)[0]
    assert (first.rows, first.prefix_length, first.inner) == ([0, 1, 2, 3], 30, (90, 90, 90, 90))
    assert _positions(prompts, first, first.inner) == 128
    assert _positions(prompts, first, (90, 90, 90, 30)) == 308


def test_a_few_shot_block_is_one_group_whatever_the_questions_share_beyond_it():
    rng = random.Random(1)
    shots = [rng.randrange(10, 90) for _ in range(300)]
    # questions that begin alike ("Question: What ...") in pairs, of lengths 5..60
    questions = [[7, 8, i % 3] + [rng.randrange(10, 90) for _ in range(rng.randrange(2, 58))] for i in range(70)]
    prompts = [shots + q for q in questions]
    batches = plan_batches(prompts, 16)
    assert [b.prefix_length for b in batches] == [300 + 2] * 5  # [7, 8] follow the shots in every prompt
    lengths = [len(prompts[i]) for b in batches for i in b.rows]
    assert lengths == sorted(lengths, reverse=True)


def test_a_short_shared_instruction_pays_only_in_batches_that_save_enough():
    instruction = list(range(100, 115))  # 15 tokens every zero-shot prompt of a task begins with
    prompts = [instruction + [i, i + 1, i + 2] for i in range(40)]
    assert all(b.prefix_length == 15 for b in plan_batches(prompts, 8))  # 15 x 8 >= 64: every batch saves
    assert all(b.prefix_length == 0 for b in plan_batches(prompts, 4))  # 15 x 4 < 64
    bos_only = [[1, i % 50, i // 50 + 60] for i in range(1000)]  # one BOS token shared by a thousand prompts
    assert all(b.prefix_length == 0 for b in plan_batches(bos_only, 32))


def test_a_groups_prefix_runs_once_for_its_batches_and_is_freed_after(family_models):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(family_models["llama"], dtype=torch.float32).eval()
    rng = random.Random(2)
    prefix = [rng.randrange(5, 60) for _ in range(30)]
    other = [rng.randrange(5, 60) for _ in range(30)]
    rows = [p + [rng.randrange(5, 60) for _ in range(n)] for p in (prefix, prefix, other) for n in (3, 1, 6)]
    shared = SharedPrefix(model, 0)
    with torch.inference_mode():
        got = [shared.logits(rows[i : i + 3], 30) for i in (0, 3, 6)]  # two batches of one prefix, then another
        want = last_position_logits(model, **left_pad(rows, 0))
    assert shared.runs == 2 and shared.ids == other
    torch.testing.assert_close(torch.cat(got), want, rtol=0, atol=TOL)
    shared.clear()
    assert shared.cache is None and shared.ids is None


def test_the_examples_run():
    import doctest

    import lm_eval_evidential.modeling.prefix_cache as cache
    import lm_eval_evidential.modeling.prefix_plan as plan

    results = [doctest.testmod(module) for module in (plan, cache)]
    assert all(r.failed == 0 for r in results)
    assert results[0].attempted >= 5 and results[1].attempted >= 1


def test_a_peft_wrapped_model_shares_its_prefix_exactly(family_models):
    # the regression: PEFT's forward takes **kwargs, so its signature names no cache argument; the name is read
    # off the transformers model underneath (on transformers 5.19 the wrapper's answer dropped every prefix)
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = AutoModelForCausalLM.from_pretrained(family_models["llama"], dtype=torch.float32)
    config = LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    model = get_peft_model(base, config).eval()
    tok = AutoTokenizer.from_pretrained(family_models["llama"])
    rng = random.Random(1)
    prefix = [tok.bos_token_id] + [rng.randrange(5, len(tok)) for _ in range(30)]
    rows = [prefix + [rng.randrange(5, len(tok)) for _ in range(n)] for n in (3, 7, 1)]
    assert cache_blocker(model, max(map(len, rows))) is None
    with torch.inference_mode():
        uncached = last_position_logits(model, **left_pad(rows, tok.pad_token_id))
        cached = prefix_cached_logits(model, rows, len(prefix), tok.pad_token_id)
    torch.testing.assert_close(cached, uncached, rtol=0, atol=TOL)


def test_the_cache_argument_is_read_off_the_wrapped_model():
    from lm_eval_evidential.modeling import prefix_cache

    class Old(torch.nn.Module):  # transformers before 5.2x: past_key_values
        def forward(self, input_ids=None, past_key_values=None, **kwargs): ...

    class New(torch.nn.Module):  # transformers 5.2x: cache
        def forward(self, input_ids=None, cache=None, **kwargs): ...

    class Neither(torch.nn.Module):
        def forward(self, input_ids=None, **kwargs): ...

    class Wrapper(torch.nn.Module):  # PEFT's shape: **kwargs only, the model underneath by get_base_model()
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def get_base_model(self):
            return self.inner

        def forward(self, *args, **kwargs): ...

    assert prefix_cache._cache_argument(Wrapper(Old())) == "past_key_values"
    assert prefix_cache._cache_argument(Wrapper(Wrapper(New()))) == "cache"
    assert prefix_cache._cache_argument(Wrapper(Neither())) is None


@pytest.mark.parametrize("family", list(FAMILIES))
def test_inner_prefixes_give_the_uncached_logits_on_every_family(family_models, family):
    # a prefix within the prefix: rows share the prefix, and in runs an inner prefix of their own (the question
    # before its options); inner prefixes of different lengths, one row alone behind its own (a question whose
    # other orders the batch's edge put in the next batch), and a row with none, in one batch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(family_models[family], dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(family_models[family])
    rng = random.Random(3)
    word = lambda n: [rng.randrange(5, len(tok)) for _ in range(n)]  # noqa: E731
    prefix = [tok.bos_token_id] + word(16)
    stems = [word(19), word(7), word(12), word(15)]
    rows, inner = [], []
    for stem, tails in zip(stems, ((1, 9, 4), (6, 2), (3, 3, 11), (2,))):
        for n in tails:
            rows.append(prefix + stem + word(n))
            inner.append(len(prefix) + len(stem))
    rows.append(prefix + word(5))
    inner.append(len(prefix))
    assert cache_blocker(model, padded_width(rows, len(prefix), inner)) is None
    shared = SharedPrefix(model, tok.pad_token_id)
    with torch.inference_mode():
        uncached = last_position_logits(model, **left_pad(rows, tok.pad_token_id))
        cached = shared.logits(rows, len(prefix), inner)
        again = shared.logits(rows[::-1], len(prefix), inner[::-1])  # the held prefix, other inner prefixes' order
    torch.testing.assert_close(cached, uncached, rtol=0, atol=TOL)
    torch.testing.assert_close(again, uncached.flip(0), rtol=0, atol=TOL)
    assert shared.runs == 1
    assert all(layer.inner is None and layer.captured is None for layer in shared.cache.layers)  # freed per batch


def test_an_inner_prefix_must_lie_within_its_row(family_models):
    from transformers import AutoModelForCausalLM

    from lm_eval_evidential.errors import InvalidValueError

    model = AutoModelForCausalLM.from_pretrained(family_models["llama"], dtype=torch.float32)
    with pytest.raises(InvalidValueError, match="inner prefix"):
        SharedPrefix(model, 0).logits([[1, 2, 3, 4], [1, 2, 5]], 2, (2, 3))


def test_prefix_and_inner_prefix_runs_project_no_position_through_the_output_layer(family_models, monkeypatch):
    # their keys and values are what is kept; the output layer (a 128k-row head costs as much for one row as for a
    # batch) sees only the suffix rows' last positions
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(family_models["llama"], dtype=torch.float32).eval()
    projected = []
    model.get_output_embeddings().register_forward_hook(lambda m, args, out: projected.append(out.shape[:-1].numel()))
    rng = random.Random(4)
    word = lambda n: [rng.randrange(5, 60) for _ in range(n)]  # noqa: E731
    prefix, stem = word(20), word(9)
    rows = [prefix + stem + word(n) for n in (2, 5)] + [prefix + word(3)]
    inner = [len(prefix) + len(stem)] * 2 + [len(prefix)]
    shared = SharedPrefix(model, 0)
    with torch.inference_mode():
        cached = shared.logits(rows, len(prefix), inner)
        want = last_position_logits(model, **left_pad(rows, 0))
    torch.testing.assert_close(cached, want, rtol=0, atol=TOL)
    # three calls (the prefix, the batch's inner prefix, its suffixes), then the uncached batch
    assert projected == [0, 0, 3, 3]
    # the same logits, bit for bit, as when those runs projected their last position (the keys and values are
    # all that is kept of them)
    from lm_eval_evidential.modeling import prefix_cache

    monkeypatch.setattr(prefix_cache, "_no_positions", lambda device: 1)
    with torch.inference_mode():
        projecting = SharedPrefix(model, 0).logits(rows, len(prefix), inner)
    assert projected[4:] == [1, 1, 3] and torch.equal(projecting, cached)


@pytest.mark.parametrize("batch_size", [0, 2.0, True])
def test_a_plan_refuses_a_batch_size_that_is_not_a_count(batch_size):
    with pytest.raises(ValueError, match=r"batch_size=.* must be an integer >= 1 \(prompts per forward pass\)"):
        plan_batches([[1, 2, 3]], batch_size)
