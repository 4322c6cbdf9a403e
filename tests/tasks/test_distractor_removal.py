"""The distractor-removal rule on its own: gold kept, order kept, stable, gold-independent."""

from __future__ import annotations

import hashlib
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lm_eval_evidential.tasks.distractors import (
    DistractorRemoval,
    Exclusion,
    removal_order,
    remove_distractors,
)

LABELS = list("ABCDEFGH")


@st.composite
def questions(draw):
    n = draw(st.integers(1, 8))
    labels = draw(st.sampled_from([LABELS[:n], [str(i + 1) for i in range(n)]]))
    qid = draw(st.text(string.ascii_letters + string.digits + "_-", min_size=1, max_size=20))
    options = [f"option {i} of {qid}" for i in range(n)]
    return qid, labels, options


def removed_labels(qid, labels, options, gold, k, seed):
    out = remove_distractors((qid, "Q?", options, labels, labels[gold]), k=k, seed=seed)
    return None if isinstance(out, Exclusion) else [x for x in labels if x not in out[3]]


@settings(max_examples=200, deadline=None)
@given(questions(), st.integers(1, 8), st.integers(0, 2**31))
def test_removal_depends_on_the_gold_only_by_keeping_it(q, k, seed):
    qid, labels, options = q
    n = len(labels)
    removed = {g: removed_labels(qid, labels, options, g, k, seed) for g in range(n)}
    if n < k:
        assert all(r is None for r in removed.values())
        return
    for g, r in removed.items():
        assert labels[g] not in r and len(r) == n - k
    # Any two golds that each survive the other's removal see the very same removal.
    for g1, r1 in removed.items():
        for g2, r2 in removed.items():
            if labels[g1] not in r2 and labels[g2] not in r1:
                assert r1 == r2

    # The documented rule, written independently: the first n - k non-gold labels by digest.
    def digest(label):
        return hashlib.sha256(f"{seed}:{qid}:{label}".encode()).hexdigest()

    for g, r in removed.items():
        expected = sorted((x for x in labels if x != labels[g]), key=digest)[: n - k]
        assert sorted(r) == sorted(expected)


@settings(max_examples=200, deadline=None)
@given(questions(), st.integers(2, 8), st.integers(0, 2**31), st.data())
def test_kept_options_keep_their_order_and_the_gold_text(q, k, seed, data):
    qid, labels, options = q
    gold = data.draw(st.integers(0, len(labels) - 1))
    out = remove_distractors((qid, "Q?", options, labels, labels[gold]), k=k, seed=seed)
    if len(labels) < k:
        assert isinstance(out, Exclusion) and f"K={len(labels)} < {k}" in out.reason and out.source_id == qid
        return
    _, _, kept_options, kept_labels, key = out
    assert len(kept_options) == k == len(kept_labels)
    assert key == labels[gold] and kept_options[kept_labels.index(key)] == options[gold]
    positions = [labels.index(x) for x in kept_labels]
    assert positions == sorted(positions) and [options[i] for i in positions] == kept_options


def test_order_is_pinned_across_runs_and_machines():
    # sha256 is the same everywhere, so these orders are facts, not a snapshot of one machine:
    # a change here changes every published control and must be deliberate (and documented).
    assert removal_order("Mercury_1234", list("ABCDE"), seed=0) == [1, 3, 0, 2, 4]
    assert removal_order("Mercury_1234", list("ABCDE"), seed=1) == [0, 1, 3, 2, 4]
    assert removal_order("NYSEDREGENTS_2010_4_4", ["1", "2", "3", "4", "5"], seed=0) == [0, 3, 1, 2, 4]
    # Gold B of a 5-option question: the first non-gold option in that order goes (D, index 3).
    q = ("Mercury_1234", "Q?", ["a", "b", "c", "d", "e"], list("ABCDE"), "B")
    assert remove_distractors(q, k=4)[2] == ["a", "b", "c", "e"]


def test_questions_that_the_normaliser_must_refuse_are_passed_through_unchanged():
    bad_key = ("q", "Q?", ["a", "b", "c", "d", "e"], list("ABCDE"), "Z")
    repeated = ("q", "Q?", ["a", "b", "c", "d", "e"], list("ABCDA"), "A")
    assert remove_distractors(bad_key, k=4) is bad_key and remove_distractors(repeated, k=4) is repeated


def test_converter_counts_kept_reduced_and_excluded_with_reasons():
    rows = [
        {"id": "a", "n": 5, "key": "B"},
        {"id": "b", "n": 4, "key": "A"},
        {"id": "c", "n": 3, "key": "C"},
        {"id": "d", "n": 5, "key": "E"},
    ]

    def convert(row, index):
        labels = LABELS[: row["n"]]
        return row["id"], "Q?", [f"{row['id']}{x}" for x in labels], labels, row["key"]

    removal = DistractorRemoval(convert, k=4, seed=0)
    out = [removal(r, i) for i, r in enumerate(rows)]
    assert out[2] is None and all(o is not None for j, o in enumerate(out) if j != 2)
    assert [len(o[2]) for o in out if o] == [4, 4, 4]
    s = removal.summary()
    assert (s["n_questions"], s["n_kept"], s["n_reduced"], s["n_excluded"]) == (4, 3, 2, 1)
    assert s["excluded"] == {"K=3 < 4: fewer options than the target K (never padded)": 1}
    assert [e.source_id for e in removal.excluded] == ["c"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"k": 1}, r"k=1 must be an integer >= 2 \(the options each question keeps\)"),
        ({"k": 4.0}, r"k=4\.0 must be an integer >= 2"),
        ({"k": 4, "seed": True}, r"seed=True must be an integer >= 0 \(which wrong options go\)"),
    ],
)
def test_a_removal_refuses_settings_outside_its_declaration(kwargs, message):
    """The Python API meets the declarations a task's metadata is checked against (TARGET_K, REMOVAL_SEED)."""
    with pytest.raises(ValueError, match=message):
        DistractorRemoval(lambda row, index: None, **kwargs)
