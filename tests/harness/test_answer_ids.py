"""Prompts tokenised in one batch, answer ids resolved once per prompt tail: the same ids and the
same refusals as tokenising every prompt + choice (the full check)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .test_model import evaluate, make_lm


@pytest.fixture(scope="module")
def lm(tiny_model):
    return make_lm(tiny_model)


def outcome(fn, *args):
    try:
        return fn(*args)
    except Exception as exc:  # the refusal itself is the outcome to compare
        return type(exc), str(exc)


@pytest.mark.parametrize("add_bos_token", [None, True, False])
def test_prompts_are_encoded_as_tok_encode_does(tiny_model, add_bos_token):
    lm = make_lm(tiny_model, **({} if add_bos_token is None else {"add_bos_token": add_bos_token}))
    bos = lm.tokenizer.decode(lm.prefix_token_id)
    contexts = ["Question: why?\nAnswer:", bos + "Question: why?\nAnswer:", "", "one line", "a\n\nb\n"]
    assert lm.planner.encode_prompts(contexts) == [lm.tok_encode(c) for c in contexts]


@pytest.mark.parametrize("add_bos_token", [None, True, False])
def test_few_shot_prompts_are_encoded_as_tok_encode_does(tiny_model, add_bos_token):
    # a shared block tokenised once (modeling/prefix_tokens.py), with and without BOS text before it
    from ..modeling.test_prefix_tokens import few_shot_prompts

    lm = make_lm(tiny_model, **({} if add_bos_token is None else {"add_bos_token": add_bos_token}))
    bos = lm.tokenizer.decode(lm.prefix_token_id)
    prompts = few_shot_prompts(6)
    block = prompts[0][: prompts[0].rindex("\n\n") + 2]
    contexts = prompts + [bos + p for p in prompts] + [block, block + "Question", bos + block]
    assert lm.planner.encode_prompts(contexts) == [lm.tok_encode(c) for c in contexts]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    texts=st.lists(
        st.lists(st.sampled_from(["<s>", "</s>", " ", "\n", "a", "Answer:", "é", "7", "🙂"]), max_size=8).map("".join),
        max_size=5,
    ),
    special=st.sampled_from([None, True, False]),
)
def test_the_backend_path_gives_the_tokenizer_calls_ids(lm, texts, special):
    from lm_eval_evidential.harness.planning import fast_backend

    assert fast_backend(lm.tokenizer) is not None  # the tiny tokenizer takes the backend's encode_batch_fast
    kwargs = {} if special is None else {"add_special_tokens": special}
    want = [list(ids) for ids in lm.tokenizer(texts, **kwargs)["input_ids"]] if texts else []
    assert lm.planner.encode_batch(texts, **kwargs) == want


def test_a_backend_that_truncates_is_called_through_the_tokenizer(tiny_model):
    # truncation set on the backend itself: transformers' call switches it off, the backend's own encode would not
    from lm_eval_evidential.harness.planning import fast_backend

    lm = make_lm(tiny_model)
    contexts = ["Question: why is the sky blue on a clear day?\nAnswer:", "one line"]
    want = [lm.tok_encode(c) for c in contexts]
    lm.tokenizer.backend_tokenizer.enable_truncation(max_length=3)
    assert fast_backend(lm.tokenizer) is None
    assert lm.planner.encode_prompts(contexts) == want


# Prompts from a small alphabet of what sits around a line break (spaces, newlines, colons,
# letters, digits, a chat marker), so that tails, blank lines and merges across the break occur.
PIECES = ["\n", " ", "  ", ":", "A", "Answer", "ab", "7", ")", ".", "<s>", "x\n", "\n\n", " \n"]
CHOICES = [
    (" A", " B", " C", " D"),
    ("A", "B", "C"),
    (" A", " A"),
    (" zebra-crossing", " B"),
    ("\nA", " B"),
    (":", " A"),
    ("", " A"),
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.lists(st.sampled_from(PIECES), min_size=1, max_size=12), choices=st.sampled_from(CHOICES))
def test_tail_resolution_accepts_and_refuses_exactly_as_the_full_check(lm, body, choices):
    # lm keeps its tail cache across examples, so later examples take the cached path
    assert_same_as_full_check(lm, "".join(body), choices)


def assert_same_as_full_check(lm, context, choices):
    ids = lm.tok_encode(context)
    fast = outcome(lm.planner.answer_ids_at_tail, context, ids, choices, "custom", "task 'custom' doc 0")
    full = outcome(lm.planner.answer_ids, context, ids, choices, "custom", "task 'custom' doc 0")
    assert fast == full, (context, choices)


def test_each_prompt_tail_is_checked_in_full_once(tiny_model, use_mirror, monkeypatch):
    lm = make_lm(tiny_model)
    full_checks = []
    original = lm.planner.answer_ids
    monkeypatch.setattr(lm.planner, "answer_ids", lambda *args: full_checks.append(args[0]) or original(*args))
    _, records = evaluate(lm, ["obqa_edl", "csqa_edl"], limit=8)
    assert {len(r) for r in records.values()} == {8}
    # one tail ("Answer:") with two choice sets (A-D, A-E): two whole prompts checked in full, not 16
    assert len(full_checks) == 2


def test_prompt_not_split_at_its_tail_takes_the_full_check(lm, monkeypatch):
    tail_ids, answer_ids, _ = lm.planner.tail_check("Answer:", (" A", " B"))
    key = ("Answer:", (" A", " B"))
    monkeypatch.setitem(lm.planner._tail_answers, key, ([-1, *tail_ids], answer_ids, True))  # tokens no prompt ends in
    full_checks = []
    original = lm.planner.answer_ids
    monkeypatch.setattr(lm.planner, "answer_ids", lambda *args: full_checks.append(args[0]) or original(*args))
    context = "Question?\nAnswer:"
    assert lm.planner.answer_ids_at_tail(context, lm.tok_encode(context), (" A", " B"), "t", "w") == answer_ids
    assert full_checks == [context]


def test_tail_whose_whole_prompt_disagrees_is_checked_in_full_from_then_on(lm, monkeypatch):
    from lm_eval_evidential.harness.planning import FULL_CHECK

    choices = (" A", " B", " C")  # a key no other test caches
    context = "Question?\nAnswer:"
    tail_ids, answer_ids, _ = lm.planner.tail_check("Answer:", choices)
    monkeypatch.setitem(
        lm.planner._tail_answers, ("Answer:", choices), (tail_ids, answer_ids[::-1], False)
    )  # a wrong tail result
    assert lm.planner.answer_ids_at_tail(context, lm.tok_encode(context), choices, "t", "w") == answer_ids
    assert lm.planner._tail_answers[("Answer:", choices)] is FULL_CHECK


def test_encoding_examples_run_as_doctests():
    import doctest

    import lm_eval_evidential.modeling.encoding as encoding

    failed, attempted = doctest.testmod(encoding)
    assert attempted >= 5 and failed == 0
