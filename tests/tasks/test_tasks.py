"""The shipped tasks: the exact Table 7 prompt, K per question, label mapping, the offline mirror."""

from __future__ import annotations

import pytest

from tests.harness.test_model import our_tasks

pytestmark = pytest.mark.usefixtures("use_mirror")


def load(name):
    return our_tasks().load([name])["tasks"][name]


def test_prompt_is_exactly_table_7(use_mirror):
    task = load("arc_c_edl")
    doc = {
        "question": "Which gas do plants take in?",
        "options": ["oxygen", "carbon dioxide", "helium"],
        "letters": ["A", "B", "C"],
        "gold": 1,
        "k": 3,
    }
    assert task.doc_to_text(doc) == (
        "Return the label of the correct answer for the question below.\n\n"
        "Question: Which gas do plants take in?\nChoices:\nA) oxygen\nB) carbon dioxide\nC) helium\nAnswer:"
    )
    assert task.doc_to_choice(doc) == ["A", "B", "C"]
    assert task.doc_to_target(doc) == 1
    assert task.config.target_delimiter == " "  # continuations are " A", " B", …


def test_arc_numeric_labels_become_letters_and_k_is_per_question():
    docs = list(load("arc_c_edl").eval_docs)
    ks = {d["k"] for d in docs}
    assert {3, 4, 5} <= ks
    import json
    import os

    raw = [
        json.loads(line)
        for line in open(os.path.join(os.environ["EVIDENTIAL_DATA_DIR"], "allenai/ai2_arc/ARC-Challenge/test.jsonl"))
    ]
    numeric = [(r, d) for r, d in zip(raw, docs) if r["choices"]["label"][0] == "1"]
    assert numeric
    for row, doc in numeric:
        assert doc["letters"] == ["A", "B", "C", "D", "E"][: len(row["choices"]["label"])]
        assert doc["gold"] == row["choices"]["label"].index(row["answerKey"])
        assert doc["k"] == len(row["choices"]["text"])


def test_csqa4_removes_option_e_and_questions_answered_e():
    full = list(load("csqa_edl").eval_docs)
    four = list(load("csqa4_edl").eval_docs)
    answered_e = sum(1 for d in full if d["gold"] == 4)
    assert answered_e > 0 and len(four) == len(full) - answered_e
    assert {d["k"] for d in four} == {4} and {d["k"] for d in full} == {5}
    kept = [d for d in full if d["gold"] != 4]
    for a, b in zip(kept, four):
        assert b["options"] == a["options"][:4] and b["gold"] == a["gold"] and b["source_id"] == a["source_id"]


def test_mmlu_math_concatenates_its_three_subjects():
    docs = list(load("mmlu_math_edl").eval_docs)
    subjects = [d["source_id"].split("/")[0] for d in docs]
    assert list(dict.fromkeys(subjects)) == ["college_mathematics", "high_school_mathematics", "abstract_algebra"]
    assert {d["k"] for d in docs} == {4}


def test_obqa_declares_its_splits_and_answer_set():
    task = load("obqa_edl")
    assert (task.config.training_split, task.config.validation_split, task.config.test_split) == (
        "train",
        "validation",
        "test",
    )
    assert task.answer_tokens == [" A", " B", " C", " D"]
    assert len(list(task.eval_docs)) == 120


@pytest.mark.parametrize("name", ["obqa_edl", "arc_c_edl", "csqa_edl", "obqa_edl_vs_arc_c_edl"])
def test_cached_templates_render_exactly_as_the_harness(name):
    from lm_eval.api.task import ConfigurableTask

    task = load(name)
    for doc in list(task.eval_docs):  # one-field templates ({{letters}}, {{gold}}) return the field itself
        for method in ("doc_to_text", "doc_to_choice", "doc_to_target"):
            ours, harness = getattr(task, method)(doc), getattr(ConfigurableTask, method)(task, doc)
            assert ours == harness and type(ours) is type(harness)
