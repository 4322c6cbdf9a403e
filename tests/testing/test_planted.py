"""The planted letter prior (testing/planted.py): an adapter trained by the package's own trainer on OBQA
questions whose gold is always " A" learns the letter, and the order audit finds it.

The tiny model knows nothing of the questions, so its only learnable signal is the letter: the audit
must see accuracy that depends on where the gold is shown (CircularEval below the identity order's
accuracy), picks far from uniform with PriDe's prior on " A", and predictions that follow the letter.
Models that also know answers, where PriDe's debiasing gives accuracy back: a tiny model taught the marker
questions (``write_marker_mirror``; in the main suite) and real SmolLM2 on easy questions (slow, opt-in).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

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


def test_the_marker_mirror_trusts_each_cue_by_its_reliability_and_keeps_the_test_golds_clean(tmp_path):
    from lm_eval_evidential.testing.planted import MARKERS, marker_questions, write_marker_mirror

    root = write_marker_mirror(tmp_path / "data", "A", 0.7, n_train=2000, n_test=100, seed=3)
    train, test = _rows(root / OBQA_TRAIN), _rows(root / OBQA_TRAIN.with_name("test.jsonl"))
    plain = marker_questions(2000, seed=5, prefix="marker-train")
    cue = lambda r: next(t for t in r["choices"]["text"] if t in MARKERS)  # noqa: E731
    gold = lambda r: r["choices"]["text"]["ABCD".index(r["answerKey"])]  # noqa: E731
    for word, reliability in MARKERS.items():  # before the move: the gold is the cue's option at its reliability
        hits = [gold(r) == word for r in plain if cue(r) == word]
        assert np.mean(hits) == pytest.approx(reliability, abs=0.05) and len(hits) > 800
    moved = [a["answerKey"] != b["answerKey"] for a, b in zip(train, plain)]
    assert np.mean([r["answerKey"] == "A" for r in train]) == pytest.approx(0.7 + 0.3 / 4, abs=0.04)
    assert all(gold(a) == gold(b) and a["answerKey"] == "A" for a, b, m in zip(train, plain, moved) if m)
    assert all(gold(r) == cue(r) for r in test)  # clean
    assert np.bincount(["ABCD".index(r["answerKey"]) for r in test], minlength=4).min() > 12


#: The tiny fixture that knows answers. A tiny Llama (its tokenizer trained on the marker prompts) is first taught
#: the marker questions with clean golds (softmax cross-entropy, as a base model is pretrained; merged into its
#: weights), then an EDL adapter is trained on golds that trust "right" 95% and "maybe" 60% of the time, with 70%
#: of them moved to " A". LoRA on every linear layer: with the paper's q_proj, v_proj, lm_head alone the adapter
#: learnt letter-by-letter shortcuts, and whether debiasing helped changed with the seed.
_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head")
#: What both trainings share: full-rank-enough LoRA on every linear layer, no warm-up, no dropout.
_MARKER_LORA = {
    "learning_rate": 3e-3,
    "warmup_steps": 0,
    "per_device_train_batch_size": 16,
    "target_modules": _LINEAR,
    "lora_r": 16,
    "lora_alpha": 16,
    "lora_dropout": 0.0,
}
MARKER_BASE_TRAINING = {"method": "softmax", "max_steps": 250, **_MARKER_LORA}
MARKER_ADAPTER_TRAINING = {"max_steps": 200, **_MARKER_LORA}


def cyclic_summary(base, adapter, *, batch_size: int, limit=None):
    """(records, the order audit's summary) of ``obqa_edl`` under cyclic orders, with the PriDe prior estimated
    on a tenth of the questions; the caller points EVIDENTIAL_DATA_DIR at the mirror."""
    import lm_eval

    from lm_eval_evidential.audits.permutations import permutation_summary
    from tests.harness.test_model import make_lm, our_tasks

    model = make_lm(base, adapter, batch_size=batch_size)
    results = lm_eval.simple_evaluate(
        model=model, tasks=["obqa_edl"], limit=limit, bootstrap_iters=0, task_manager=our_tasks(CYCLIC)
    )
    records = results.records["obqa_edl"]
    return records, permutation_summary(records, pride_fraction=0.1)


def marker_fixture(root: Path, seed: int = 0, share: float = 0.7):
    """(permuted records of the planted marker adapter on the marker test split, the order audit's summary)."""
    import torch

    from lm_eval_evidential.harness.adapters import merged_checkpoint
    from lm_eval_evidential.modeling.threads import THREADS_ENV
    from lm_eval_evidential.testing.planted import MARKERS, write_marker_mirror
    from lm_eval_evidential.testing.tiny import build_tiny_model
    from lm_eval_evidential.training.config import TrainConfig
    from lm_eval_evidential.training.trainer import train
    from tests.harness.test_model import our_tasks

    def trained(base, data: Path, out: str, settings: dict) -> Path:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("EVIDENTIAL_DATA_DIR", str(data))
            task = our_tasks({"load_all_splits": True}).load(["obqa_edl"])["tasks"]["obqa_edl"]
            config = TrainConfig(output_dir=str(root / out), logging_steps=50, save_steps=10_000, seed=seed, **settings)
            return train(base, task, config)

    clean = write_marker_mirror(root / "clean", share=0.0, markers=dict.fromkeys(MARKERS, 1.0), n_train=400, seed=1)
    planted = write_marker_mirror(root / "planted", "A", share)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EVIDENTIAL_DATA_DIR", str(clean))
        task = our_tasks({"load_all_splits": True}).load(["obqa_edl"])["tasks"]["obqa_edl"]
        corpus = [f"{task.doc_to_text(doc)} {doc['letters'][doc['gold']]}" for doc in task.training_docs()]
    threads = torch.get_num_threads()
    try:
        with pytest.MonkeyPatch.context() as mp:
            # one thread, not the trainer's timed pick: on 2 loaded cores a pick of 2 once cost 7x the CPU time
            mp.setenv(THREADS_ENV, "1")
            torch.set_num_threads(1)
            tiny = build_tiny_model(root / "tiny", seed=seed, corpus=corpus)
            knows = trained(tiny, clean, "pretraining", MARKER_BASE_TRAINING)
            base = merged_checkpoint(tiny, knows, dtype="float32", cache=root / "merged")
            adapter = trained(base, planted, "adapter", MARKER_ADAPTER_TRAINING)
            mp.setenv("EVIDENTIAL_DATA_DIR", str(planted))
            return cyclic_summary(base, adapter, batch_size=16)
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def knowing(tmp_path_factory):
    return marker_fixture(tmp_path_factory.mktemp("marker"))


def test_on_a_tiny_model_that_knows_some_answers_debiasing_gives_accuracy_back(knowing):
    """The audit finds the planted prior, and PriDe's debiased accuracy is higher than plain accuracy for every
    estimation seed: the model answers the sure ("right") questions wherever the cue is shown and picks " A" on
    many unsure ("maybe") ones, where the cue's letter still gets more than the other letters.

    Measured 2026-11-28 (load 8-11, 1 thread; about 16-22 s of CPU time for the fixture), training seeds 0, 2, 3:
    plain accuracy 0.74, 0.72, 0.87; CircularEval 0.49 for each; " A" picked in 51%, 53%, 40% of records
    (golds: 25%), uniformity p < 1e-50; PriDe prior about [0.41, 0.19, 0.20, 0.19]; debiased accuracy above
    plain for each of 10 estimation seeds, by 0.12-0.13, 0.014-0.017 and 0.12-0.13. With the weak cue at 0.5
    and 60% moved, or at 0.7 and 70% moved, or the paper's LoRA targets, some seeds gave no gain at all.
    """
    records, summary = knowing
    assert summary["n_questions"] == 400 and summary["letter_gold_rate"]["A"] == 0.25  # cyclic: golds uniform
    assert summary["letter_pick_rate"]["A"] > 0.4 and summary["letter_uniformity"]["p_value"] < 1e-6
    assert int(np.argmax(summary["pride"]["by_k"][4]["prior"])) == 0
    assert summary["circular_accuracy"] < summary["accuracy"] and summary["accuracy"] > 0.5  # knows some answers
    from lm_eval_evidential.audits.permutations import permutation_summary

    gains = []
    for seed in range(10):  # not one lucky estimation subset
        pride = permutation_summary(records, pride_fraction=0.1, seed=seed)["pride"]
        gains.append(pride["debiased_accuracy"] - pride["accuracy"])
    assert min(gains) > 0, gains


#: The real-model fixture: SmolLM2-135M-Instruct fine-tuned by the package's trainer (EDL, LoRA on q_proj and
#: v_proj, the defaults fitted to its tied embeddings) on easy questions with the gold of a share of the training
#: questions moved to " A"; the test split's golds stay uniform. Any change here retrains (the cache key).
EASY_MIRROR = {"letter": "A", "share": 0.5, "n_train": 400, "seed": 0, "kinds": ["match"]}
EASY_TRAINING = {
    "max_steps": 80,
    "learning_rate": 5e-3,
    "lr_scheduler_type": "cosine",
    "warmup_steps": 0,
    "logging_steps": 10,
    "save_steps": 1000,
    "dtype": "float32",
    "seed": 0,
}


#: The modules whose code decides the planted adapter's weights: the trainer, the forward and loss it runs, the
#: tasks' prompts and the data set's writer. Their source is part of the cache key: a change retrains.
TRAINED_BY = (
    "lm_eval_evidential.training",
    "lm_eval_evidential.modeling",
    "lm_eval_evidential.tasks",
    "lm_eval_evidential.testing.planted",
)


def planted_folder(mirror: dict = EASY_MIRROR, training: dict = EASY_TRAINING) -> str:
    """The planted adapter's folder in the cache, keyed by both settings, the package version and the source of
    the modules that train it (:data:`TRAINED_BY`)."""
    import hashlib

    from lm_eval_evidential import __version__
    from lm_eval_evidential.testing.smollm2 import source_digest

    code = source_digest(*TRAINED_BY)
    key = hashlib.sha256(json.dumps([mirror, training, __version__, code], sort_keys=True).encode()).hexdigest()[:12]
    return f"smollm2-135m-instruct/planted-easy-{key}"


def test_the_cached_adapters_key_changes_with_the_trainers_code_and_settings(monkeypatch):
    from lm_eval_evidential.testing import smollm2

    key = planted_folder()
    assert key == planted_folder() and key != planted_folder(training={**EASY_TRAINING, "max_steps": 81})
    assert smollm2.source_digest(*TRAINED_BY) != smollm2.source_digest(*TRAINED_BY[1:])  # the trainer is in it
    digest = smollm2.source_digest
    monkeypatch.setattr(smollm2, "source_digest", lambda *names: digest(*names)[::-1])  # the code changed
    assert planted_folder() != key


def test_the_source_digest_follows_every_file_of_a_package(tmp_path, monkeypatch):
    from lm_eval_evidential.testing.smollm2 import source_digest

    package = tmp_path / "pkg_h33"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "loss.py").write_text("SCALE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = [source_digest("pkg_h33")]
    (package / "sub" / "loss.py").write_text("SCALE = 2\n")  # an edit deep in the package
    seen.append(source_digest("pkg_h33"))
    (package / "sub" / "extra.py").write_text("")  # a new module
    seen.append(source_digest("pkg_h33"))
    (package / "sub" / "extra.py").rename(package / "sub" / "other.py")  # a renamed one
    seen.append(source_digest("pkg_h33"))
    assert len(set(seen)) == 4 and source_digest("pkg_h33.sub.loss") != source_digest("pkg_h33")
    import hashlib

    one = hashlib.sha256(b"pkg_h33/sub/loss.py\0SCALE = 2\n\0").hexdigest()  # the digest's rule, by hand
    assert source_digest("pkg_h33.sub.loss") == one


def planted_smollm2_adapter(mirror: dict = EASY_MIRROR, training: dict = EASY_TRAINING) -> Path:
    """The adapter of ``training`` on ``write_easy_mirror(**mirror)``, trained once per machine: it is kept in the
    cache the SmolLM2 checkpoint lives in (``testing.smollm2.cached_folder``), keyed by both settings."""
    import tempfile

    from lm_eval_evidential.testing.smollm2 import cached_folder, smollm2_checkpoint
    from lm_eval_evidential.training.config import TrainConfig
    from lm_eval_evidential.training.trainer import train
    from tests.harness.test_model import our_tasks

    model = smollm2_checkpoint()

    def build(folder: Path) -> None:
        with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
            mp.setenv("EVIDENTIAL_DATA_DIR", str(write_easy_mirror(Path(tmp) / "data", **mirror)))
            task = our_tasks({"load_all_splits": True}).load(["obqa_edl"])["tasks"]["obqa_edl"]
            train(model, task, TrainConfig(output_dir=str(folder), **training))

    return cached_folder(planted_folder(mirror, training), build)


def planted_smollm2_summary(tmp_path: Path, mirror: dict = EASY_MIRROR, training: dict = EASY_TRAINING, limit=60):
    """(records, the order audit's summary) of the planted adapter on the easy test split under cyclic orders."""
    import torch

    from lm_eval_evidential.testing.smollm2 import smollm2_checkpoint

    adapter = planted_smollm2_adapter(mirror, training)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # 2 shared cores: a forward pass on 2 threads stalls 10x under load (modeling/threads)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("EVIDENTIAL_DATA_DIR", str(write_easy_mirror(tmp_path / "data", **mirror)))
            return cyclic_summary(smollm2_checkpoint(), adapter, batch_size=8, limit=limit)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.slow
def test_on_real_smollm2_the_audit_finds_the_planted_prior_and_debiasing_gives_accuracy_back(tmp_path):
    """SmolLM2-135M-Instruct trained to favour " A" on questions it can learn: the audit finds the prior on a real
    model and tokenizer, and PriDe's debiased accuracy is higher than plain accuracy (the model knows answers that
    its letter prior overrides).

    Measured 2026-11-28 (2 shared cores, 1 thread): training 80 steps took 17 min at load 18-22 (first run on a
    machine only; the adapter is cached), evaluating the 120 test questions in 4 cyclic orders 3.6 min at load 14.
    " A" picked in 480 of 480 records (chi-square p < 1e-150), CircularEval 0.0 against 0.29; PriDe
    prior [0.59, 0.21, 0.12, 0.08]; debiased accuracy above plain for each of 20 estimation seeds, by 0.019 to
    0.11 (mean 0.064; seed 0: 0.296 -> 0.361 on 108 questions). Earlier fixtures gave nothing back: the category,
    sum, capital and opposite questions (share 0.3, 100 steps, LoRA on all q/v or on the top 10 layers) and 60
    steps at share 0.5 (0.25 -> 0.36 on 36 questions, once). The match questions at share 0.3 gave 0.296 -> 0.352.
    """
    from lm_eval_evidential.testing.smollm2 import cache_dir

    if not (os.environ.get("LM_EVAL_EVIDENTIAL_TRAIN_SMOLLM2") or (cache_dir() / planted_folder()).is_dir()):
        # an optional slow part (the suite stays near 15 minutes on 2 cores): it runs where the adapter is cached
        pytest.skip(
            "trains SmolLM2-135M for 80 steps the first time on a machine (17 min on 2 loaded cores); "
            "set LM_EVAL_EVIDENTIAL_TRAIN_SMOLLM2=1 to train it and run this test"
        )
    records, summary = planted_smollm2_summary(tmp_path, limit=120)
    shown = ("accuracy", "accuracy_per_order", "circular_accuracy", "letter_pick_rate", "letter_uniformity", "pride")
    print(json.dumps({k: summary[k] for k in shown}, default=str))  # the figures, for the log of a slow run
    assert summary["n_questions"] == 120 and summary["letter_gold_rate"]["A"] == 0.25  # cyclic: golds uniform
    assert summary["letter_pick_rate"]["A"] > 0.4 and summary["letter_uniformity"]["p_value"] < 1e-3
    assert int(np.argmax(summary["pride"]["by_k"][4]["prior"])) == 0
    assert summary["circular_accuracy"] < summary["accuracy"]
    assert summary["pride"]["debiased_accuracy"] > summary["pride"]["accuracy"]
    # not one lucky estimation subset: the gain holds for the prior estimated on other questions too
    from lm_eval_evidential.audits.permutations import permutation_summary

    gains = [
        (lambda p: p["debiased_accuracy"] - p["accuracy"])(
            permutation_summary(records, pride_fraction=0.1, seed=s)["pride"]
        )
        for s in range(1, 10)
    ]
    assert min(gains) > 0, gains
