"""The planted letter prior (testing/planted.py): an adapter trained by the package's own trainer on OBQA
questions whose gold is always " A" learns the letter, and the order audit finds it.

The tiny model knows nothing of the questions, so its only learnable signal is the letter: the audit
must see accuracy that depends on where the gold is shown (CircularEval below the identity order's
accuracy), picks far from uniform with PriDe's prior on " A", and predictions that follow the letter.
A model that also knows the answers (where debiasing can help) is the slow SmolLM2 test below.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from lm_eval_evidential.testing.planted import OBQA_TRAIN, easy_questions, write_easy_mirror, write_planted_mirror

CYCLIC = {"permutations": "cyclic"}


def test_the_planted_mirror_moves_only_the_training_gold(tmp_path):
    from lm_eval_evidential.testing.tiny import sample_data_dir

    root = write_planted_mirror(tmp_path / "data", "B")
    before = [json.loads(x) for x in (sample_data_dir() / OBQA_TRAIN).read_text().splitlines()]
    after = [json.loads(x) for x in (root / OBQA_TRAIN).read_text().splitlines()]
    for old, new in zip(before, after):
        assert new["answerKey"] == "B"
        gold = old["choices"]["text"][old["choices"]["label"].index(old["answerKey"])]
        assert new["choices"]["text"][1] == gold and sorted(new["choices"]["text"]) == sorted(old["choices"]["text"])
    test = OBQA_TRAIN.with_name("test.jsonl")
    assert (root / test).read_bytes() == (sample_data_dir() / test).read_bytes()


def _rows(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_the_easy_questions_are_right_and_their_golds_uniform():
    rows = easy_questions(400, seed=3)
    counts = np.bincount(["ABCD".index(r["answerKey"]) for r in rows], minlength=4)
    assert counts.min() > 70  # 100 expected a letter
    capitals = {"France": "Paris", "Japan": "Tokyo", "Egypt": "Cairo", "Austria": "Vienna"}  # by hand
    checked = 0
    for r in rows:
        q, texts = r["question_stem"], r["choices"]["text"]
        gold = texts["ABCD".index(r["answerKey"])]
        assert len(set(texts)) == 4, r
        if q.startswith("What is ") and " + " in q:
            a, b = q.removeprefix("What is ").removesuffix("?").split(" + ")
            assert gold == str(int(a) + int(b))
            checked += 1
        elif q.startswith("What is the capital of ") and q[23:-1] in capitals:
            assert gold == capitals[q[23:-1]]
            checked += 1
    assert checked > 50


def test_the_match_questions_name_their_gold_and_no_other_option():
    from lm_eval_evidential.testing.planted import EASY_KINDS, MATCH_KINDS

    rows = easy_questions(200, seed=7, kinds=MATCH_KINDS)
    for r in rows:
        texts = r["choices"]["text"]
        named = r["question_stem"].removeprefix("Which option is the word ").removesuffix("?")
        assert texts["ABCD".index(r["answerKey"])] == named and texts.count(named) == 1 and len(set(texts)) == 4
    assert easy_questions(50, seed=7) == easy_questions(50, seed=7, kinds=EASY_KINDS)  # the default kinds


@pytest.mark.parametrize("share", [0.0, 0.5, 1.0])
def test_the_easy_mirror_plants_the_letter_in_a_share_of_the_training_golds_only(tmp_path, share):
    root = write_easy_mirror(tmp_path / "data", "C", share, n_train=300, n_test=80, seed=4)
    train, test = _rows(root / OBQA_TRAIN), _rows(root / OBQA_TRAIN.with_name("test.jsonl"))
    plain = easy_questions(300, seed=6, prefix="easy-train")
    assert [r["id"] for r in train] == [r["id"] for r in plain] and len(test) == 80
    moved = [a["answerKey"] != b["answerKey"] for a, b in zip(train, plain)]
    for new, old in zip(train, plain):  # same options, the gold's text kept, only its place moved to C
        gold = old["choices"]["text"]["ABCD".index(old["answerKey"])]
        assert new["choices"]["text"]["ABCD".index(new["answerKey"])] == gold
        assert sorted(new["choices"]["text"]) == sorted(old["choices"]["text"])
        assert new["answerKey"] in ("C", old["answerKey"])
    at_c = np.mean([r["answerKey"] == "C" for r in train])
    assert at_c == pytest.approx(share + (1 - share) / 4, abs=0.08) and (share > 0 or not any(moved))
    assert test == easy_questions(80, seed=5, prefix="easy-test")  # the test split is never moved


@pytest.fixture(scope="module")
def planted(tiny_model, tmp_path_factory):
    """(permuted records of obqa_edl's test split under the planted adapter, the audit's summary)."""
    import lm_eval

    from lm_eval_evidential.audits.permutations import permutation_summary
    from lm_eval_evidential.training.config import TrainConfig
    from lm_eval_evidential.training.trainer import train
    from tests.harness.test_model import make_lm, our_tasks

    root = tmp_path_factory.mktemp("planted")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EVIDENTIAL_DATA_DIR", str(write_planted_mirror(root / "data", "A")))
        task = our_tasks({"load_all_splits": True}).load(["obqa_edl"])["tasks"]["obqa_edl"]
        config = TrainConfig(
            output_dir=str(root / "adapter"),
            max_steps=30,
            learning_rate=1e-2,
            warmup_steps=0,
            logging_steps=10,
            save_steps=1000,
            max_train_docs=64,
            seed=0,
        )
        adapter = train(tiny_model, task, config)
        results = lm_eval.simple_evaluate(
            model=make_lm(tiny_model, adapter, batch_size=8),
            tasks=["obqa_edl"],
            limit=40,
            bootstrap_iters=0,
            task_manager=our_tasks(CYCLIC),
        )
    records = results.records["obqa_edl"]
    return records, permutation_summary(records, pride_fraction=0.1)


def test_the_audit_finds_the_planted_letter_prior(planted):
    records, summary = planted
    assert summary["n_questions"] == 40 and summary["n_records"] == 160
    assert summary["letter_pick_rate"]["A"] > 0.9  # the training data's letter
    assert summary["letter_uniformity"]["p_value"] < 1e-6
    prior = summary["pride"]["by_k"][4]["prior"]
    assert int(np.argmax(prior)) == 0 and prior[0] > 0.5
    assert summary["circular_accuracy"] < summary["accuracy"]  # right only where the gold happens to be at A
    assert summary["prediction_follows"]["letter"] > 0.9
    # accuracy moves with the letter of the gold: each order's accuracy is the share of golds it puts at A
    shift = records.order[:, 0]
    for s, accuracy in enumerate(summary["accuracy_per_order"]):
        assert accuracy == pytest.approx(np.mean(records.gold[shift == s] == 0), abs=0.05)
    assert summary["letter_mean_evidence"]["A"] > max(v for a, v in summary["letter_mean_evidence"].items() if a != "A")


@pytest.mark.slow
def test_on_real_smollm2_the_audit_finds_the_planted_prior(tmp_path):
    """SmolLM2-135M-Instruct with the planted " A": the audit finds the prior on a real model and tokenizer.

    PriDe's debiased accuracy is not asserted: on the bundled sample questions SmolLM2 is near chance, so
    removing the prior gave nothing back (2026-11-27: 0.222 debiased against 0.241 on 54 questions). Nor on the
    easy questions of ``write_easy_mirror``: without an adapter SmolLM2 is at chance there too (60 questions, cyclic:
    0.217, CircularEval 0), and 40 steps (lr 2e-3, batch 4, gold at " A" in half the training questions) taught the
    letter, not the format — " A" picked in 160 of 160 records, accuracy 0.25, PriDe 0.194 on 36 questions. Letter
    answering (symbol binding) needs a longer fine-tune than a CPU test affords; the easy mirror is its fixture.
    """
    import lm_eval

    from lm_eval_evidential.audits.permutations import permutation_summary
    from lm_eval_evidential.testing.smollm2 import smollm2_checkpoint
    from lm_eval_evidential.training.config import TrainConfig
    from lm_eval_evidential.training.trainer import train
    from tests.harness.test_model import make_lm, our_tasks

    model = smollm2_checkpoint()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EVIDENTIAL_DATA_DIR", str(write_planted_mirror(tmp_path / "data", "A")))
        task = our_tasks({"load_all_splits": True}).load(["obqa_edl"])["tasks"]["obqa_edl"]
        config = TrainConfig(
            output_dir=str(tmp_path / "adapter"),
            max_steps=20,
            learning_rate=1e-3,
            warmup_steps=0,
            logging_steps=10,
            save_steps=1000,
            max_train_docs=80,
            dtype="float32",
            seed=0,
        )
        adapter = train(model, task, config)
        results = lm_eval.simple_evaluate(
            model=make_lm(model, adapter, batch_size=8),
            tasks=["obqa_edl"],
            limit=60,
            bootstrap_iters=0,
            task_manager=our_tasks(CYCLIC),
        )
    summary = permutation_summary(results.records["obqa_edl"], pride_fraction=0.1)
    assert summary["letter_pick_rate"]["A"] > 0.5 and summary["letter_uniformity"]["p_value"] < 1e-3
    assert int(np.argmax(summary["pride"]["by_k"][4]["prior"])) == 0
    assert summary["circular_accuracy"] < summary["accuracy"]
