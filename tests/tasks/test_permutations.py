"""Permuted evaluation (``metadata.permutations``): docs, prompts, records and refusals.

Oracles: the unpermuted docs and prompts (each order's prompt is the unpermuted prompt with the
option lines moved, built here by hand), an unpermuted run of the same model (its records equal the
identity order's), and the model's own logits of each logged prompt by transformers/peft directly.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from lm_eval_evidential.tasks.permutations import MAX_ORDERS, PermutationError, orders_for, parse_spec, permute_docs
from tests.harness.test_model import evaluate, make_lm, our_tasks

pytestmark = pytest.mark.usefixtures("use_mirror")
CYCLIC = {"permutations": "cyclic"}


def load(name, metadata=None):
    return our_tasks(metadata).load([name])["tasks"][name]


# ---------------------------------------------------------------------------------------- orders
@pytest.mark.parametrize("k", [2, 3, 5])
def test_cyclic_orders_put_each_option_at_each_letter_once(k):
    orders = np.array(orders_for("cyclic", None, k))
    assert orders[0].tolist() == list(range(k))
    for column in orders.T:  # each letter shows every option once
        assert sorted(column) == list(range(k))
    for row in orders:
        assert sorted(row) == list(range(k))


def test_all_and_random_orders_are_distinct_permutations_with_the_identity_first():
    every = orders_for("all", None, 4)
    assert len(every) == 24 == len({tuple(o) for o in every}) and every[0] == [0, 1, 2, 3]
    drawn = orders_for("random", 6, 4, question="Which gas?", seed=0)
    assert len({tuple(o) for o in drawn}) == 6 and drawn[0] == [0, 1, 2, 3]
    assert drawn == orders_for("random", 6, 4, question="Which gas?", seed=0)  # seeded by question and seed
    assert drawn != orders_for("random", 6, 4, question="Which gas?", seed=1)
    assert len(orders_for("random", 50, 3, question="q")) == math.factorial(3)  # capped at K!


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: orders_for("cyclic", None, 1, task="t", where=" doc 'q1'"), r"task 't' doc 'q1': K = 1: a question"),
        (lambda: orders_for("all", None, 10, task="t"), rf"3628800 orders .* bound of {MAX_ORDERS} orders"),
        (lambda: parse_spec("shuffle", task="t"), r"must be 'cyclic' .*'random:N'.* got 'shuffle'"),
        (lambda: parse_spec("random:1", task="t"), r"give N from 2 to"),
        (lambda: parse_spec(f"random:{MAX_ORDERS + 1}", task="t"), r"give N from 2 to"),
        (
            lambda: permute_docs([], "cyclic", task="t", seed=1.5),
            r"task 't': metadata\.permutation_seed=1\.5 must be an integer; e\.g\. 0; fix the task YAML or --metadata",
        ),
    ],
)
def test_bad_settings_are_one_line_naming_task_and_fix(call, message):
    with pytest.raises(PermutationError, match=message) as err:
        call()
    assert "\n" not in str(err.value)


# ---------------------------------------------------------------------------------------- docs
def _option_lines(prompt: str) -> list[str]:
    return [line for line in prompt.splitlines() if len(line) > 2 and line[1] == ")"]


def test_each_order_is_the_question_with_only_its_options_moved():
    plain = load("arc_c_edl")
    permuted = load("arc_c_edl", CYCLIC)
    questions = list(plain.eval_docs)
    docs = list(permuted.eval_docs)
    assert len(docs) == sum(d["k"] for d in questions)  # K orders of each question, mixed K included
    for doc in docs:
        question = questions[doc["question_id"]]
        order = doc["permutation"]
        assert doc["options"][doc["gold"]] == question["options"][question["gold"]]  # the gold follows its option
        before, after = plain.doc_to_text(question), permuted.doc_to_text(doc)
        lines = _option_lines(before)
        moved = [f"{letter}) {question['options'][i]}" for letter, i in zip(question["letters"], order)]
        assert after == before.replace("\n".join(lines), "\n".join(moved))  # nothing else of the prompt moves
        if order == list(range(doc["k"])):
            assert after == before
            assert {k: v for k, v in doc.items() if k not in ("permutation", "question_id")} == question


def test_the_control_tasks_are_permuted_after_their_distractor_removal():
    control = load("csqa_k4_edl", CYCLIC)
    plain = list(load("csqa_k4_edl").eval_docs)
    docs = list(control.eval_docs)
    assert len(docs) == 4 * len(plain) and {d["k"] for d in docs} == {4}
    assert all(sorted(d["options"]) == sorted(plain[d["question_id"]]["options"]) for d in docs)


def test_a_task_without_the_setting_is_unchanged():
    assert list(load("obqa_edl").eval_docs) == list(load("obqa_edl", {"other": 1}).eval_docs)
    assert "permutations" not in load("obqa_edl").fingerprint


@pytest.mark.parametrize("key", ["permutation", "Permutations", "permutaions", "permutation-seed", "Permutation_Seed"])
def test_a_near_miss_of_a_permutation_key_is_refused_not_ignored(key):
    """lm-eval passes every metadata key on: a misspelt key used to evaluate the task unpermuted, exit 0."""
    with pytest.raises(PermutationError, match=rf"task 'obqa_edl': metadata key '{key}' is not one this package"):
        load("obqa_edl", {key: "cyclic"}).test_docs()


def test_a_seed_that_draws_nothing_is_a_warning_that_says_what_happens(caplog):
    """The warning's two claims hold: the orders are those of seed 0, and the records' metadata keep the seed."""
    with caplog.at_level("WARNING"):
        task = load("obqa_edl", {"permutations": "cyclic", "permutation_seed": 3})
        docs = task.test_docs()
    assert (
        "metadata.permutation_seed=3 draws nothing under permutations 'cyclic' (only 'random:N' draws its orders); "
        "the orders do not depend on it, though the records' metadata keep it as given"
    ) in caplog.text
    assert docs == load("obqa_edl", {"permutations": "cyclic"}).test_docs()
    assert task.fingerprint["permutations"] == {"spec": "cyclic", "seed": 3}


def test_a_seed_without_permutations_is_a_warning_and_changes_no_record(caplog):
    with caplog.at_level("WARNING"):
        task = load("obqa_edl", {"permutation_seed": 3})
        docs = task.test_docs()
    assert (
        "metadata.permutation_seed=3 draws nothing without metadata.permutations (the options are shown in their "
        "own order); the records do not depend on it"
    ) in caplog.text
    assert docs == load("obqa_edl").test_docs() and task.fingerprint == load("obqa_edl").fingerprint


def test_the_records_store_the_spec_in_its_one_spelling():
    from lm_eval_evidential.tasks.permutations import canonical_spec

    assert [canonical_spec(s, task="t") for s in (" Cyclic ", "ALL", "random:03")] == ["cyclic", "all", "random:3"]


def test_k_1_questions_are_refused_naming_task_and_doc(tmp_path, use_mirror):
    import json

    folder = tmp_path / "tasks"
    folder.mkdir()
    rows = [{"id": "q1", "q": "Is it?", "options": ["yes"], "answer": 0}]
    (folder / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "one_option_edl.yaml").write_text(
        "task: one_option_edl\n"
        "class: !function lm_eval_evidential.tasks.evidential_task.EvidentialMCQATask\n"
        f"dataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {folder / 'rows.jsonl'}\n"
        "test_split: test\n"
        "metadata:\n  version: 1.0\n  answer_tokens: [' A', ' B']\n  permutations: cyclic\n"
        "  fields: {id: id, question: q, options: options, answer: answer}\n"
    )
    from lm_eval.tasks import TaskManager

    with pytest.raises(PermutationError, match=r"task 'one_option_edl' doc 'q1': K = 1"):
        TaskManager(include_path=str(folder), include_defaults=False).load(["one_option_edl"])


# ---------------------------------------------------------------------------------------- records
@pytest.fixture(scope="module")
def permuted_run(tiny_model, tiny_adapter):
    with pytest.MonkeyPatch.context() as mp:
        from lm_eval_evidential.testing.tiny import sample_data_dir

        mp.setenv("EVIDENTIAL_DATA_DIR", str(sample_data_dir()))
        # One prompt per forward pass in both runs: the identity order's forward is then today's, bit for bit
        # (in batches, padding to other neighbours moves float32 logits by ~1e-8, as in any run).
        lm = make_lm(tiny_model, tiny_adapter, batch_size=1)
        permuted = evaluate(
            lm, ["arc_c_edl", "obqa_edl", "obqa_edl_vs_arc_c_edl"], limit=4, metadata=CYCLIC, log_samples=True
        )
        plain = evaluate(make_lm(tiny_model, tiny_adapter, batch_size=1), ["arc_c_edl"], limit=4)
    return permuted, plain


def test_the_identity_order_is_todays_unpermuted_record_exactly(permuted_run):
    (_, records), (_, plain) = permuted_run
    rec, base = records["arc_c_edl"], plain["arc_c_edl"]
    assert len(rec) == int(base.k.sum())  # every --limit question, each in all K orders: --limit counts questions
    assert sorted(set(rec.doc_id.tolist())) == base.doc_id.tolist()
    identity = [i for i in range(len(rec)) if rec.order_of(i) == list(range(int(rec.k[i])))]
    assert [int(rec.doc_id[i]) for i in identity] == base.doc_id.tolist()
    for i, want in zip(identity, base):
        got = dict(rec[i])
        assert got.pop("order") == list(range(want["k"])) and want.pop("order") is None
        assert got == want  # every field, bit for bit
    assert rec.meta["permutations"] == {"spec": "cyclic", "seed": 0} and "permutations" not in base.meta


def test_every_order_is_the_models_own_logits_of_its_logged_prompt(permuted_run, tiny_model, tiny_adapter):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    (results, records), _ = permuted_run
    rec = records["arc_c_edl"]
    tok = AutoTokenizer.from_pretrained(tiny_model)
    model = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32), tiny_adapter
    ).eval()
    samples = results["samples"]["arc_c_edl"]
    assert len(samples) == len(rec)
    where = {(int(d), tuple(rec.order_of(i))): i for i, d in enumerate(rec.doc_id)}
    for sample in samples:
        doc = sample["doc"]
        i = where[(doc["question_id"], tuple(doc["permutation"]))]
        prompt = sample["arguments"][0][0]
        ids = tok(prompt)["input_ids"]
        answer = [tok(prompt + " " + x)["input_ids"][-1] for x in doc["letters"]]
        with torch.no_grad():
            z = model(torch.tensor([ids])).logits[0, -1].double().numpy()[answer]
        np.testing.assert_allclose(rec.logits[i, : rec.k[i]], z, atol=1e-5, rtol=0)
        assert sample["evidence"]["logits"] == rec.logits[i, : rec.k[i]].tolist()  # the logged sample's own record
        assert int(rec.gold[i]) == doc["gold"] and rec.order_of(i) == doc["permutation"]


def test_a_permuted_pair_keeps_every_order_of_each_question(permuted_run):
    (results, _), _ = permuted_run
    row = results["results"]["obqa_edl_vs_arc_c_edl"]
    # --limit 4 per side counts questions: 4 OBQA questions x 4 orders, 4 K=4 ARC questions x 4 orders
    assert (row["n_id,none"], row["n_ood,none"]) == (16, 16)


def test_a_lettered_view_is_permuted_after_its_gold_shuffle(tmp_path, monkeypatch):
    from lm_eval.tasks import TaskManager

    monkeypatch.delenv("EVIDENTIAL_DATA_DIR")  # the stock task reads its local files

    from .test_lettered import local_task

    rows = [
        {"q": "Which is a mammal?", "options": ["a trout", "a crow", "a frog", "a whale"]},
        {"q": "Which is a metal?", "options": ["wood", "glass", "paper", "copper"]},
    ]
    local_task(tmp_path, "gold_last", rows, text="{{q}}", choices="{{options}}", target="3")  # gold stored last
    view = TaskManager(include_path=str(tmp_path), include_defaults=False, metadata=CYCLIC).load(["gold_last_edl"])
    plain = TaskManager(include_path=str(tmp_path), include_defaults=False).load(["gold_last_edl"])
    view, plain = view["tasks"]["gold_last_edl"], list(plain["tasks"]["gold_last_edl"].eval_docs)
    docs = list(view.eval_docs)
    assert len(docs) == 8
    for doc in docs:
        stock = rows[doc["question_id"]]["options"]
        question = plain[doc["question_id"]]
        # order: the stock positions shown (the view's shuffle composed with the permutation)
        assert doc["options"] == [stock[i] for i in doc["order"]]
        assert doc["order"] == [question["order"][i] for i in doc["permutation"]]
        assert doc["options"][doc["gold"]] == stock[3]
    assert view.fingerprint["data_source"]["sha256"] == plain_source(tmp_path)  # the questions', not the orders'


def plain_source(folder):
    from lm_eval.tasks import TaskManager

    task = TaskManager(include_path=str(folder), include_defaults=False).load(["gold_last_edl"])["tasks"][
        "gold_last_edl"
    ]
    return task.fingerprint["data_source"]["sha256"]


def test_a_permuted_pair_reports_how_far_reordering_moves_each_auroc(permuted_run):
    (results, _), _ = permuted_run
    row = results["results"]["obqa_edl_vs_arc_c_edl"]
    better = results["higher_is_better"]["obqa_edl_vs_arc_c_edl"]
    for score in ("reciprocal_vacuity", "max_prob", "neg_norm_entropy"):  # the pair's scores
        assert 0 <= row[f"auroc_order_range_{score},none"] <= 1 and better[f"auroc_order_range_{score}"] is False
        assert 0 <= row[f"auroc_order_averaged_{score},none"] <= 1
    plain_pair = {k for k in row if k.startswith("auroc_") and "order" not in k}
    assert plain_pair == {"auroc_reciprocal_vacuity,none", "auroc_max_prob,none", "auroc_neg_norm_entropy,none"}


def test_the_pair_s_order_spread_is_the_permutations_audit_s_on_the_same_questions(permuted_run, tmp_path):
    """The pair's per-order AUROC min/median/max and order-averaged AUROC equal ``permutations --id --ood --json``
    on the records of its two tasks evaluated alone (the same questions, 4 a side, in the same orders)."""
    import json

    from lm_eval_evidential.cli.main import EXIT_OK, main
    from lm_eval_evidential.records import records_path, write_records

    (results, records), _ = permuted_run
    for task in ("obqa_edl", "arc_c_edl"):
        write_records(records_path(tmp_path / "run" / "tiny", task, "2026-11-27T20-00-00.000000"), records[task])
    out = tmp_path / "orders.json"
    argv = ["permutations", str(tmp_path / "run"), "--task", "obqa_edl", "--id", "obqa_edl", "--ood", "arc_c_edl"]
    assert main([*argv, "--json", str(out), "--scores", "reciprocal_vacuity,max_prob,neg_norm_entropy"]) == EXIT_OK
    rows = json.loads(out.read_text())["ood"]
    pair = results["results"]["obqa_edl_vs_arc_c_edl"]
    better = results["higher_is_better"]["obqa_edl_vs_arc_c_edl"]
    assert {r["score"] for r in rows} == {"reciprocal_vacuity", "max_prob", "neg_norm_entropy"}
    assert any(r["auroc_min"] < r["auroc_median"] < r["auroc_max"] for r in rows)  # a swap of two would show
    for r in rows:
        assert r["n_orders"] == 4 and r["n_id_questions"] == 4 and r["n_ood_questions"] == 4
        for stat in ("min", "median", "max"):
            assert pair[f"auroc_order_{stat}_{r['score']},none"] == pytest.approx(r[f"auroc_{stat}"], abs=1e-12)
            assert better[f"auroc_order_{stat}_{r['score']}"] is True
        assert pair[f"auroc_order_averaged_{r['score']},none"] == pytest.approx(r["auroc_order_averaged"], abs=1e-12)
        assert pair[f"auroc_order_range_{r['score']},none"] == pytest.approx(r["auroc_range"], abs=1e-12)


def _prompts(task, n_shots):
    task.set_fewshot_seed(1234)
    return [task.fewshot_context(doc, n_shots) for doc in task.eval_docs]


def test_every_order_of_a_question_sees_the_few_shot_examples_its_unpermuted_prompt_has():
    # lm-eval's default sampler draws from one generator in docs order: without the replay each order
    # (its own doc) got other examples, and the order audit mixed option order with example choice
    plain, permuted = load("obqa_edl"), load("obqa_edl", CYCLIC)
    questions, docs = list(plain.eval_docs), list(permuted.eval_docs)
    before, after = _prompts(plain, 3), _prompts(permuted, 3)
    assert len(set(before)) == len(before)  # the draws differ between questions (the default sampler)
    for doc, prompt in zip(docs, after):
        question = doc["question_id"]
        shots = before[question][: -len(plain.doc_to_text(questions[question]))]
        assert prompt == shots + permuted.doc_to_text(doc)
        if doc["permutation"] == list(range(doc["k"])):
            assert prompt == before[question]  # the identity order's prompt is the unpermuted prompt
    # the draw of a question does not depend on which docs came before it (process count, --limit order)
    permuted.set_fewshot_seed(1234)
    assert [permuted.fewshot_context(doc, 3) for doc in reversed(docs)] == after[::-1]
