"""Labels in the "(A)" style split once per prompt tail (QuestionPlanner.split_answers): the same prefix and answer ids,
and the same refusals, as the full path on every prompt, on every tokenizer family the suite trains; the 2K
whole-prompt tokenisations per question are gone for a repeated tail."""

from __future__ import annotations

import functools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lm_eval_evidential.harness.planning import FULL_CHECK, QuestionPlanner

from ..modeling.test_prefix_tokens import CUT_FAMILIES, WHOLE_FAMILIES, build, few_shot_prompts


@functools.cache
def tokenizer(family: str):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=build(family))


def planner(family: str, special: bool) -> QuestionPlanner:
    tok = tokenizer(family)
    return QuestionPlanner(
        tok,
        lambda text: tok(text, add_special_tokens=special)["input_ids"],
        prefix_token_id=None,
        add_bos_token=special,
        phantom_count=0,
    )


@functools.cache
def shared_planner(family: str, special: bool) -> QuestionPlanner:
    return planner(family, special)  # kept across examples: later prompts with a tail take the cached split


def outcome(plan: QuestionPlanner, context: str, choices):
    ids = plan.encode(context)
    try:
        return plan.split_answers(context, ids, choices, "custom", "task 'custom' doc 0")
    except Exception as exc:  # the refusal itself is the outcome to compare
        return type(exc), str(exc)


BODIES = ["Question: why?", "Q", "x\n", "\n", " ", "A) yes", "7", "<s>", "\n\n", "é", " \n", ")", "[SEP]"]
TAILS = ["Answer:", "Answer: ", "Answer:\n", "A)", "\nAnswer:", "Q: 7?\nAnswer:", "x", "Answer:\n\n"]
CHOICES = [
    (" (A)", " (B)", " (C)", " (D)"),
    ("(A)", "(B)", "(C)"),
    (" (1)", " (2)"),
    (" [A]", " [B]", " [C]"),
    (" (A)", " (A)"),
    (" A", " B"),
    (" a ruler", " a clock"),
    (" (A) yes", " (B) no"),
    (" zebra-crossing", " B"),
]


@pytest.mark.parametrize("family", CUT_FAMILIES + WHOLE_FAMILIES)
@pytest.mark.parametrize("special", [True, False])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.lists(st.sampled_from(BODIES), max_size=6), tail=st.sampled_from(TAILS), choices=st.sampled_from(CHOICES)
)
def test_the_split_at_the_tail_is_the_full_paths_on_every_prompt(family, special, body, tail, choices):
    context = "".join(body) + "\n" + tail
    fast = outcome(shared_planner(family, special), context, choices)
    assert fast == outcome(planner(family, special), context, choices), (family, context, choices)  # uncached: full


def counting(plan: QuestionPlanner) -> list[str]:
    calls: list[str] = []
    encode = plan.encode
    plan.encode = lambda text: calls.append(text) or encode(text)
    return calls


@pytest.mark.parametrize("family", ["gpt2", "llama3", "qwen2"])
def test_a_repeated_tail_is_split_on_its_first_whole_prompt_only(family):
    labels = (" (A)", " (B)", " (C)", " (D)")
    prompts = few_shot_prompts(12, shots=25)
    fast, full = planner(family, True), planner(family, True)
    fast_calls, full_calls = counting(fast), counting(full)
    want = [outcome(full, p, labels) for p in prompts]
    assert isinstance(want[0][0], list) and want[0][0], want[0]  # the labels do split, with a prefix
    full_calls.clear()
    assert [outcome(fast, p, labels) for p in prompts] == want
    # encode(prompt) once per prompt (outcome's own), and 2K whole prompts + choices for the first prompt only
    assert len(fast_calls) == len(prompts) + 2 * len(labels)
    assert all(call in prompts for call in fast_calls[2 * len(labels) + 1 :])
    assert fast._tail_splits[("Answer:", labels)][3] is True


def test_a_prompt_not_split_at_its_tail_takes_the_full_path():
    labels = (" (A)", " (B)")
    fast = planner("gpt2", True)
    tail_ids, prefix, answer_ids, _ = fast.tail_split("Answer:", labels)
    fast._tail_splits[("Answer:", labels)] = ([-1, *tail_ids], prefix, answer_ids, True)  # tokens no prompt ends in
    calls = counting(fast)
    context = "Question?\nAnswer:"
    assert outcome(fast, context, labels) == outcome(planner("gpt2", True), context, labels) == (prefix, answer_ids)
    assert calls.count(context + " (A)") == 2  # the single-token check and the split, each in full


def test_a_tail_whose_whole_prompt_disagrees_takes_the_full_path_from_then_on():
    labels = (" (A)", " (B)", " (C)")
    fast = planner("gpt2", True)
    tail_ids, prefix, answer_ids, _ = fast.tail_split("Answer:", labels)
    fast._tail_splits[("Answer:", labels)] = (tail_ids, prefix, answer_ids[::-1], False)  # a wrong tail result
    context = "Question?\nAnswer:"
    assert outcome(fast, context, labels) == (prefix, answer_ids)
    assert fast._tail_splits[("Answer:", labels)] is FULL_CHECK
    calls = counting(fast)
    assert outcome(fast, "Why?\nAnswer:", labels) == (prefix, answer_ids)
    assert len(calls) == 1 + 2 * len(labels)


def test_refusals_keep_their_message():
    fast = planner("gpt2", True)
    for _ in range(2):  # the second time with the tail's entry made
        kind, message = outcome(fast, "Question?\nAnswer:", (" a ruler", " a clock"))
        assert "nor do the choices share a token prefix and differ in exactly one token" in message
