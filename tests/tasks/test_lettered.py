"""Lettered views of stock multiple-choice tasks (``--tasks hellaswag_edl``), on our own fixtures in each hub schema."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.harness.test_model import make_lm

from . import lettered_fixtures as fixtures

VIEWS = ["arc_challenge", "hellaswag", "winogrande", "piqa", "truthfulqa_mc1", "sciq"]


@pytest.fixture(scope="module")
def lettered_mirror(tmp_path_factory):
    import shutil

    from lm_eval_evidential.testing.tiny import sample_data_dir

    root = fixtures.write(tmp_path_factory.mktemp("lettered") / "data")
    shutil.copytree(sample_data_dir() / "allenai" / "openbookqa", root / "allenai" / "openbookqa")  # the ID task
    return root


@pytest.fixture(scope="module")
def manager(lettered_mirror):
    """One TaskManager (lm_eval's defaults, the package's tasks, a user's MMLU-Pro-schema task) for the module."""
    import os

    from lm_eval.tasks import TaskManager

    folder = lettered_mirror.parent / "user_tasks"
    folder.mkdir(exist_ok=True)
    (folder / "my_mmlu_pro.yaml").write_text(fixtures.MY_MMLU_PRO_YAML)
    before = os.environ.get("EVIDENTIAL_DATA_DIR")
    os.environ["EVIDENTIAL_DATA_DIR"] = str(lettered_mirror)
    yield TaskManager(include_path=str(folder))
    if before is None:
        os.environ.pop("EVIDENTIAL_DATA_DIR", None)
    else:
        os.environ["EVIDENTIAL_DATA_DIR"] = before


@pytest.fixture(scope="module")
def views(manager):
    names = [f"{t}_edl" for t in [*VIEWS, "my_mmlu_pro"]]
    return manager.load(names)["tasks"]


@pytest.mark.parametrize("stock", [*VIEWS, "my_mmlu_pro"])
def test_view_shows_the_stock_question_lettered_with_its_own_k_and_gold(views, stock):
    from lm_eval_evidential.tasks.lettered import question_text, shuffled_order

    task = views[f"{stock}_edl"]
    docs = list(task.eval_docs)
    want = fixtures.expected(stock)
    assert len(docs) == len(want)
    shuffled = stock in ("sciq", "truthfulqa_mc1")  # the stock gold sits at a fixed position
    for doc, (question, options, gold) in zip(docs, want):
        k = len(options)
        assert doc["k"] == k and doc["letters"] == list("ABCDEFGHIJ"[:k])
        assert task.doc_to_choice(doc) == doc["letters"]
        order = shuffled_order(doc["question"], k) if shuffled else list(range(k))
        assert doc["order"] == order and sorted(order) == list(range(k))
        assert doc["options"] == [options[i] for i in order]
        assert doc["options"][task.doc_to_target(doc)] == options[gold]  # gold = the stock target, followed
        prompt = task.doc_to_text(doc)
        assert prompt.startswith("Return the label of the correct answer for the question below.\n\n")
        assert prompt.endswith("".join(f"{x}) {o}\n" for x, o in zip(doc["letters"], doc["options"])) + "Answer:")
        if stock == "truthfulqa_mc1":  # the stock primer is kept; the question is its last line
            assert doc["question"].endswith(f"\n\nQ: {question}")
        else:
            assert doc["question"] == question_text(question) == question.strip()
    if stock == "my_mmlu_pro":
        assert [d["k"] for d in docs] == [10, 3]


def test_shuffle_moves_a_fixed_gold_off_its_position():
    from lm_eval_evidential.tasks.lettered import shuffled_order

    golds = [shuffled_order(f"question {i}", 4).index(3) for i in range(400)]
    counts = np.bincount(golds, minlength=4)
    assert counts.min() > 60, counts  # each letter about a quarter of the time
    assert shuffled_order("q", 4, seed=1) != shuffled_order("q", 4, seed=0) or shuffled_order(
        "r", 4, seed=1
    ) != shuffled_order("r", 4, seed=0)


def test_views_are_resolved_by_name_only_and_index_nothing(manager):
    from lm_eval.tasks import TaskManager

    stock = TaskManager(include_defaults=False, include_path=str(manager.include_path))
    assert "my_mmlu_pro_edl" not in stock.all_tasks  # nothing listed ahead of time
    assert stock.match_tasks(["my_mmlu_pro_edl"]) == ["my_mmlu_pro_edl"]
    assert stock.match_tasks(["nonexistent_edl"]) == []
    assert stock.match_tasks(["my_mmlu_pro_edl_edl"]) == []  # no view of a view
    assert "my_mmlu_pro" in stock.match_tasks(["my_mmlu_pro"])


def test_a_tag_or_group_has_a_view_made_of_its_members_views(manager):
    loaded = manager.load(["ai2_arc_edl"])
    assert loaded["group_map"] == {"ai2_arc_edl": ["arc_challenge_edl", "arc_easy_edl"]}
    assert [d["k"] for d in loaded["tasks"]["arc_easy_edl"].eval_docs] == [4, 3, 5]


def test_refusals_name_the_task_and_why(manager, lettered_mirror):
    from lm_eval_evidential.tasks.lettered import LetteredViewError

    with pytest.raises(LetteredViewError, match="'leaderboard_mmlu_pro' are already answer labels.*run"):
        manager.load(["leaderboard_mmlu_pro_edl"])
    with pytest.raises(LetteredViewError, match="generate_until task; lettered views exist for multiple_choice"):
        manager.load(["mmlu_pro_biology_edl"])


def test_more_than_26_options_is_refused_naming_task_and_doc(tmp_path, monkeypatch):
    from lm_eval.tasks import TaskManager

    from lm_eval_evidential.tasks.lettered import LetteredViewError

    rows = [
        {
            "question_id": 0,
            "question": "Pick the first.",
            "options": [f"option {i}" for i in range(3)],
            "answer_index": 0,
        },
        {
            "question_id": 1,
            "question": "Pick the last.",
            "options": [f"option {i}" for i in range(27)],
            "answer_index": 26,
        },
    ]
    data = tmp_path / "data" / "TIGER-Lab" / "MMLU-Pro" / "default"
    data.mkdir(parents=True)
    (data / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "my_mmlu_pro.yaml").write_text(fixtures.MY_MMLU_PRO_YAML)
    monkeypatch.setenv("EVIDENTIAL_DATA_DIR", str(tmp_path / "data"))
    tm = TaskManager(include_path=str(tmp_path), include_defaults=False)
    with pytest.raises(LetteredViewError, match=r"'my_mmlu_pro_edl' .*test doc 1: 27 options, more than the 26"):
        tm.load(["my_mmlu_pro_edl"])


def test_evidential_records_of_the_views_are_the_models_own_logits(views, tiny_model, tiny_adapter):
    import lm_eval
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..oracles import own_logits

    names = ["hellaswag_edl", "winogrande_edl", "truthfulqa_mc1_edl", "my_mmlu_pro_edl"]
    results = lm_eval.simple_evaluate(
        model=make_lm(tiny_model, tiny_adapter),
        tasks=[views[n] for n in names],
        bootstrap_iters=0,
        log_samples=True,
    )
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    base = AutoModelForCausalLM.from_pretrained(tiny_model)
    model = PeftModel.from_pretrained(base, tiny_adapter).eval()
    for name in names:
        records, task = results.records[name], views[name]
        docs = list(task.eval_docs)
        assert list(records.k) == [d["k"] for d in docs]
        assert list(records.gold) == [d["gold"] for d in docs]
        for row, record in zip(records.logits, records):  # one at a time: K differs between questions
            z = own_logits(model, tokenizer, [record], task)[0][0]
            np.testing.assert_allclose(row[: len(z)], z, atol=1e-5)
        meta = records.meta
        stock = name[: -len("_edl")]
        assert meta["lettered_view"]["stock_task"] == stock
        assert meta["data_source"]["stock_task"] == stock and meta["data_source"]["origin"].startswith("mirror")
        assert meta["data_source"]["dataset"] == task.stock.config.dataset_path
        sample = results["samples"][name][0]
        prompt, answer = sample["arguments"][0][:2]  # the lettered prompt and " A" were scored
        assert prompt == task.doc_to_text(docs[int(sample["doc_id"])]) and answer == " A"
        assert sample["doc"]["order"] == docs[0]["order"]
    assert results.records["truthfulqa_mc1_edl"].meta["lettered_view"]["orders"] == [
        d["order"] for d in views["truthfulqa_mc1_edl"].eval_docs
    ]
    assert results["results"]["hellaswag_edl"]["acc,none"] == pytest.approx(
        float(np.mean(results.records["hellaswag_edl"].correct))
    )


def local_task(folder, name: str, rows: list[dict], *, text: str, choices: str, target: str, metrics=("acc",)):
    """A stock-style multiple-choice task ``name`` on local JSON lines (``rows``) in ``folder``."""
    data = folder / f"{name}.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = {
        "task": name,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(data)}},
        "test_split": "test",
        "output_type": "multiple_choice",
        "doc_to_text": text,
        "doc_to_target": target,
        "doc_to_choice": json.loads(choices) if choices.startswith("[") else choices,
        "metric_list": [{"metric": m} for m in metrics],
        "metadata": {"version": 1.0},
    }
    (folder / f"{name}.yaml").write_text(json.dumps(config))  # JSON is YAML


def _hf_table(tiny_model, folder, disable_hook: bool) -> str:
    import os
    import subprocess
    import sys

    code = (
        "import json, lm_eval\n"
        "from lm_eval.tasks import TaskManager\n"
        f"tm = TaskManager(include_path={str(folder)!r}, include_defaults=False)\n"
        f"r = lm_eval.simple_evaluate(model='hf', model_args='pretrained={tiny_model},dtype=float32', "
        "tasks=['my_piqa'], bootstrap_iters=0, device='cpu', task_manager=tm)\n"
        "print(json.dumps([r['results'], sorted(tm.all_tasks)], sort_keys=True))\n"
    )
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1"}
    env.pop("EVIDENTIAL_DATA_DIR", None)
    if disable_hook:
        env["LM_EVAL_EVIDENTIAL_DISABLE_HOOK"] = "1"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


def test_stock_model_on_a_stock_text_task_gives_the_same_table_with_and_without_the_package(tiny_model, tmp_path):
    local_task(
        tmp_path,
        "my_piqa",
        fixtures.piqa_rows(),
        text="Question: {{goal}}\nAnswer:",
        choices="{{[sol1, sol2]}}",
        target="label",
        metrics=("acc", "acc_norm"),
    )
    with_package = _hf_table(tiny_model, tmp_path, disable_hook=False)
    assert with_package == _hf_table(tiny_model, tmp_path, disable_hook=True)
    results, names = json.loads(with_package)
    assert names == ["my_piqa"] and set(results) == {"my_piqa"}  # no view is listed or evaluated


def test_acc_norm_under_the_evidential_model_is_the_records_accuracy(tiny_model, tiny_adapter, tmp_path):
    """Single-token choices of different lengths: length normalisation would rank them otherwise."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    rows = [
        {"prompt": f"Item {i}: which word names the {['letter', 'query', 'tag'][i % 3]}?", "gold": i % 7}
        for i in range(24)
    ]
    words = ["A", "question", "label", "the", "correct", "answer", "below"]
    local_task(
        tmp_path,
        "my_words",
        rows,
        text="{{prompt}}\nAnswer:",
        choices=json.dumps(words),
        target="gold",
        metrics=("acc", "acc_norm"),
    )
    results = lm_eval.simple_evaluate(
        model=make_lm(tiny_model, tiny_adapter),
        tasks=["my_words"],
        bootstrap_iters=0,
        task_manager=TaskManager(include_path=str(tmp_path), include_defaults=False),
        log_samples=True,
    )
    records, row = results.records["my_words"], results["results"]["my_words"]
    accuracy = float(np.mean(records.correct))
    # the harness's own acc_norm on these responses: argmax of log E[p_j] / len(" " + choice j)
    lengths = np.array([len(" " + w) for w in words], float)
    log_p = np.log(records.alpha / records.alpha.sum(axis=1, keepdims=True))
    stock_norm = np.argmax(log_p / lengths, axis=1)
    assert ((stock_norm == records.gold) != records.correct).any()  # a fixture where the two disagree
    assert row["acc,none"] == pytest.approx(accuracy) and row["acc_norm,none"] == pytest.approx(accuracy)
    by_doc = {int(s["doc_id"]): s["acc_norm"] for s in results["samples"]["my_words"]}
    assert [by_doc[int(d)] for d in records.doc_id] == [float(c) for c in records.correct]


def test_a_task_list_with_stock_text_tasks_names_every_refused_task_and_its_view(views, tiny_model):
    import lm_eval

    from lm_eval_evidential.harness.model import EvidentialInputError

    stock = [views[f"{name}_edl"].stock for name in ("piqa", "winogrande", "hellaswag")]
    with pytest.raises(EvidentialInputError) as info:
        lm_eval.simple_evaluate(model=make_lm(tiny_model), tasks=stock, bootstrap_iters=0)
    message = str(info.value)
    assert message.startswith("--model evidential cannot score 3 of the 3 tasks")
    assert "--tasks piqa_edl,winogrande_edl,hellaswag_edl" in message
    assert "use piqa_edl, the same questions" in message and "K different contexts" in message
    assert "\n" not in message


def test_shipped_pair_with_a_view_checks_k_and_a_pair_of_other_ks_is_refused(manager, tiny_model):
    import lm_eval

    from lm_eval_evidential.metrics.cardinality import CardinalityMismatchError
    from lm_eval_evidential.tasks.pairs import OODPairTask

    results = lm_eval.simple_evaluate(
        model=make_lm(tiny_model), tasks=["obqa_edl_vs_sciq_edl"], bootstrap_iters=0, task_manager=manager, limit=2
    )
    row = results["results"]["obqa_edl_vs_sciq_edl"]
    assert row["n_id,none"] == 2 and row["n_ood,none"] == 2 and row["k_matched,none"] == 1.0
    pair = {
        "task": "obqa_edl_vs_piqa_edl",
        "class": OODPairTask,
        "test_split": "test",
        "metadata": {
            "version": 1.0,
            "answer_tokens": [" A", " B", " C", " D"],
            "id_task": "obqa_edl",
            "ood_task": "piqa_edl",
            "k_policy": "assert",
        },
    }
    with pytest.raises(CardinalityMismatchError, match="piqa_edl"):
        manager.load([pair])


def test_parenthesised_labels_are_read_at_the_differing_token_after_their_shared_prefix(
    tiny_model, tiny_adapter, tmp_path
):
    import lm_eval
    import torch
    from lm_eval.tasks import TaskManager
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    rows = [
        {"prompt": f"Sample {i}: which colour is {['warm', 'leafy', 'cool'][i % 3]}?", "gold": i % 3} for i in range(5)
    ]
    local_task(
        tmp_path,
        "my_paren",
        rows,
        text="{{prompt}}\nOptions: (A) red (B) green (C) blue\nAnswer:",
        choices='["(A)", "(B)", "(C)"]',
        target="gold",
    )
    manager = TaskManager(include_path=str(tmp_path), include_defaults=False)
    results = lm_eval.simple_evaluate(
        model=make_lm(tiny_model, tiny_adapter), tasks=["my_paren"], bootstrap_iters=0, task_manager=manager
    )
    records = results.records["my_paren"]
    assert list(records.labels[0]) == ["(A)", "(B)", "(C)"] and list(records.gold) == [r["gold"] for r in rows]
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model), tiny_adapter).eval()
    task = manager.load(["my_paren"])["tasks"]["my_paren"]
    for record in records:
        prompt = task.doc_to_text(list(task.eval_docs)[record["doc_id"]])
        wholes = [tokenizer(f"{prompt} ({x})")["input_ids"] for x in "ABC"]
        assert len({tuple(w[:-2]) for w in wholes}) == 1 and len(wholes[0]) - len(tokenizer(prompt)["input_ids"]) == 3
        with torch.no_grad():
            logits = model(torch.tensor([wholes[0][:-2]])).logits[0, -1].double()  # after prompt + " ("
        np.testing.assert_allclose(record["logits"], logits[[w[-2] for w in wholes]].numpy(), atol=1e-5)


def test_labels_that_differ_in_more_than_one_token_are_refused_saying_why(tiny_model):
    from lm_eval_evidential.harness.model import EvidentialInputError

    lm = make_lm(tiny_model)

    class Req:
        def __init__(self, cont):
            self.args = ("Pick one. Answer:", cont)
            self.task_name, self.doc_id, self.doc = "custom", 3, {}

    with pytest.raises(
        EvidentialInputError,
        match=r"doc 3: .*single token, nor do the choices share a token prefix and differ in exactly one token",
    ):
        lm.loglikelihood([Req(" (A)"), Req(" (zebra-crossing)")])
