"""The distractor-removal controls (csqa_k4_edl, arc_c_k4_edl, arc_e_k4_edl) on the fixture mirror.

Oracles are the mirror's raw rows: each question is kept (gold text kept, options a subsequence
of the original in order, K = the ID task's) or excluded for having fewer options; the same
options are removed on every build and whatever the row order.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from lm_eval_evidential.metrics.cardinality import check_cardinality, k_histogram
from lm_eval_evidential.tasks import tasks_dir
from lm_eval_evidential.tasks.datasets import DatasetError
from lm_eval_evidential.tasks.distractors import control_tasks
from tests.harness.test_model import evaluate, make_lm, our_tasks

pytestmark = pytest.mark.usefixtures("use_mirror")

CONTROLS = {  # control task: (source task, mirror file of its evaluated split)
    "csqa_k4_edl": ("csqa_edl", "tau/commonsense_qa/default/validation.jsonl"),
    "arc_c_k4_edl": ("arc_c_edl", "allenai/ai2_arc/ARC-Challenge/test.jsonl"),
    "arc_e_k4_edl": ("arc_e_edl", "allenai/ai2_arc/ARC-Easy/test.jsonl"),
}


def load(name, metadata=None):
    return our_tasks(metadata).load([name])["tasks"][name]


def raw_rows(root: Path, rel: str) -> list[dict]:
    return [json.loads(line) for line in (root / rel).read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("control", sorted(CONTROLS))
def test_every_question_is_kept_with_its_gold_or_excluded_with_a_reason(control, use_mirror):
    source, rel = CONTROLS[control]
    task = load(control)
    docs = {d["source_id"]: d for d in task.eval_docs}
    id_k = {d["k"] for d in load("obqa_edl").eval_docs}
    assert len(id_k) == 1 and {d["k"] for d in docs.values()} == id_k  # K exactly the ID task's
    k = id_k.pop()
    rows = raw_rows(use_mirror, rel)
    short = [r for r in rows if len(r["choices"]["text"]) < k]
    for row in rows:
        texts, labels = row["choices"]["text"], row["choices"]["label"]
        if len(texts) < k:
            assert row["id"] not in docs
            continue
        doc = docs.pop(row["id"])
        assert doc["options"][doc["gold"]] == texts[labels.index(row["answerKey"])]  # the gold is kept
        positions = [texts.index(o) for o in doc["options"]]
        assert positions == sorted(positions) and len(positions) == k  # original order, wrong ones removed
        assert doc["letters"] == ["A", "B", "C", "D"][:k]  # re-lettered
    assert not docs  # nothing kept that was not in the source
    c = task.control
    assert (c["of"], c["k_from"], c["target_k"], c["n_questions"]) == (source, "obqa_edl", k, len(rows))
    assert c["n_excluded"] == len(short) and c["n_kept"] == len(rows) - len(short)
    assert c["n_reduced"] == sum(len(r["choices"]["text"]) > k for r in rows)
    assert sum(c["excluded"].values()) == len(short)
    assert all(f"< {k}" in reason and "never padded" in reason for reason in c["excluded"])
    if control == "csqa_k4_edl":
        assert c["n_kept"] == len(rows)  # CSQA: every question kept, unlike csqa4_edl
    else:
        assert short, "the fixture should have ARC questions with fewer than K options"
    check = check_cardinality([k] * 3, [d["k"] for d in task.eval_docs], policy="assert")
    assert check.matched


@pytest.mark.parametrize("control", sorted(CONTROLS))
def test_the_same_options_are_removed_on_every_build_and_in_any_row_order(control, mirror, tmp_path, monkeypatch):
    _, rel = CONTROLS[control]
    first = {d["source_id"]: d["options"] for d in load(control).eval_docs}
    again = {d["source_id"]: d["options"] for d in load(control).eval_docs}
    shuffled = tmp_path / "data"
    shutil.copytree(mirror, shuffled)
    rows = raw_rows(mirror, rel)
    rng = np.random.default_rng(0)
    lines = [json.dumps(rows[i]) for i in rng.permutation(len(rows))]
    (shuffled / rel).write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setenv("EVIDENTIAL_DATA_DIR", str(shuffled))
    reordered = {d["source_id"]: d["options"] for d in load(control).eval_docs}
    assert first == again == reordered
    assert any(len(o) < len(r["choices"]["text"]) for r in rows for sid, o in first.items() if sid == r["id"])


def test_another_seed_removes_other_options_but_keeps_the_same_questions():
    base = {d["source_id"]: d for d in load("csqa_k4_edl").eval_docs}
    other = {d["source_id"]: d for d in load("csqa_k4_edl", metadata={"removal_seed": 7}).eval_docs}
    assert base.keys() == other.keys()
    assert any(base[s]["options"] != other[s]["options"] for s in base)
    assert all(base[s]["options"][base[s]["gold"]] == other[s]["options"][other[s]["gold"]] for s in base)


def test_the_target_k_follows_the_id_task_named_in_k_from():
    # Matching a 5-option ID task instead: only ARC's 5-option questions remain, none reduced.
    task = load("arc_c_k4_edl", metadata={"k_from": "csqa_edl"})
    assert {d["k"] for d in task.eval_docs} == {5}
    assert task.control["target_k"] == 5 and task.control["n_reduced"] == 0
    three = load("csqa_k4_edl", metadata={"target_k": 3})
    assert {d["k"] for d in three.eval_docs} == {3} and three.control["n_kept"] == three.control["n_questions"]


@pytest.mark.parametrize(
    "metadata, message",
    [
        ({"k_from": "arc_c_edl"}, "has mixed K"),
        ({"k_from": "no_such_task"}, "not one of this package's tasks"),
        ({"k_from": None}, "needs metadata.k_from"),
        ({"target_k": 1}, r"metadata\.target_k=1 must be an integer >= 2 \(the options each question keeps\)"),
        ({"removal_seed": "x"}, r"metadata\.removal_seed='x' must be an integer >= 0 \(which wrong options go\)"),
        (
            {"removal_seed": -1},
            r"metadata\.removal_seed=-1 must be an integer >= 0 .*; fix the task YAML or --metadata",
        ),
    ],
)
def test_bad_control_settings_are_refused_with_the_fix(metadata, message):
    with pytest.raises(DatasetError, match=message) as err:
        load("csqa_k4_edl", metadata=metadata)
    assert "csqa_k4_edl" in str(err.value)


def test_shipped_controls_are_listed_and_in_the_ood_group():
    listed = control_tasks(tasks_dir())
    assert {c["task"] for c in listed["csqa_edl"]} == {"csqa4_edl", "csqa_k4_edl"}
    assert [c["task"] for c in listed["arc_c_edl"]] == ["arc_c_k4_edl"]
    assert [c["task"] for c in listed["arc_e_edl"]] == ["arc_e_k4_edl"]
    assert all(c["control"] for cs in listed.values() for c in cs)
    group = (tasks_dir() / "obqa_edl_ood.yaml").read_text(encoding="utf-8")
    for control in CONTROLS:
        assert f"- obqa_edl_vs_{control}\n" in group


@pytest.fixture
def small_mirror(mirror, tmp_path, monkeypatch) -> Path:
    """The mirror cut to 12 questions per evaluated split, keeping every question whose K is not 4."""
    root = tmp_path / "data"
    shutil.copytree(mirror, root)
    for rel in ["allenai/openbookqa/main/test.jsonl", *(rel for _, rel in CONTROLS.values())]:
        rows = raw_rows(mirror, rel)
        odd = [r for r in rows if len(r["choices"]["text"]) != 4]
        four = [r for r in rows if r not in odd]
        kept = odd[:4] + four[: 12 - len(odd[:4])]
        (root / rel).write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")
    monkeypatch.setenv("EVIDENTIAL_DATA_DIR", str(root))
    return root


def test_pairs_and_records_of_the_controls_pass_the_k_assertion(tiny_model, tiny_adapter, small_mirror):
    from lm_eval_evidential.audits.ood import ood_rows

    pairs = [f"obqa_edl_vs_{c}" for c in sorted(CONTROLS)]
    results, records = evaluate(make_lm(tiny_model, tiny_adapter), ["obqa_edl", *sorted(CONTROLS), *pairs], limit=None)
    n_id = len(records["obqa_edl"])
    for control in CONTROLS:
        rec = records[control]
        assert k_histogram(rec.k) == {4: len(rec)} and k_histogram(records["obqa_edl"].k) == {4: n_id}
        assert rec.meta["control"]["n_kept"] == len(rec) and rec.meta["control"]["target_k"] == 4
        rows = ood_rows(records["obqa_edl"], rec, k_policy="assert", n_boot=0)
        assert rows and all(r["matched"] and r["n_ood"] == len(rec) for r in rows)
        pair = results["results"][f"obqa_edl_vs_{control}"]
        assert pair["k_matched,none"] == 1.0 and pair["n_ood,none"] == len(rec) and pair["n_id,none"] == n_id
        shown = results["configs"][control]["metadata"]["control_summary"]  # the counts in the results JSON
        assert shown == rec.meta["control"] and shown["n_kept"] + shown["n_excluded"] == shown["n_questions"]


def test_splits_loaded_later_get_the_same_removal_and_do_not_change_the_counts(use_mirror):
    from lm_eval_evidential.tasks.datasets import load_split, normalise

    task = load("csqa_k4_edl")
    counts = dict(task.control)
    rows = load_split(task="csqa_k4_edl", dataset_path="tau/commonsense_qa", configs=["default"], split="train")
    docs = normalise(
        rows, task._convert, task="csqa_k4_edl", answer_tokens=task.answer_tokens
    )  # e.g. few-shot examples
    assert len(docs) == len(rows) and {d["k"] for d in docs} == {4}
    assert {d["k"] for d in task.fewshot_pool()} == {4}  # --num_fewshot examples come at the control's K too
    assert task.control == counts  # the evaluated split's summary is untouched
