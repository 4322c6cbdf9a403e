"""The harness's contracts: (float, bool) responses, evidence by (task, doc), records per evaluation,
stock multiple-choice tasks (each question its own K), refusals before any forward pass."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import numpy as np
import pytest

from .test_model import evaluate, make_lm

pytestmark = pytest.mark.usefixtures("use_mirror")

LM_EVAL_TASKS = Path(__import__("lm_eval.tasks", fromlist=["x"]).__file__).resolve().parent


def test_loglikelihood_returns_exactly_float_bool_pairs_and_files_the_evidence(tiny_model, tiny_adapter):
    from lm_eval.api.instance import Instance

    lm = make_lm(tiny_model, tiny_adapter)
    requests = [
        Instance("loglikelihood", {}, (f"Question {d}?\nAnswer:", f" {x}"), idx=j, metadata=("custom", d, 1))
        for d in (0, 1)
        for j, x in enumerate("ABC")
    ]
    responses = lm.loglikelihood(requests)
    assert len(responses) == len(requests)
    for response in responses:
        assert type(response) is tuple and len(response) == 2
        assert type(response[0]) is float and type(response[1]) is bool
    for d in (0, 1):
        mine = responses[3 * d : 3 * d + 3]
        assert sum(greedy for _, greedy in mine) == 1
        question = lm.evidence.get("custom", d)
        alpha = np.array(question.alpha)
        np.testing.assert_allclose([math.exp(lp) for lp, _ in mine], alpha / alpha.sum(), atol=1e-12)
        np.testing.assert_allclose(alpha, np.logaddexp(0, question.logits) + 1, atol=1e-12)
        assert mine[int(np.argmax(alpha))][1] is True
    assert len(lm.evidence.take()) == 2 and len(lm.evidence) == 0


def test_two_evaluations_in_one_process_give_two_separate_record_sets(tiny_model, tiny_adapter):
    lm = make_lm(tiny_model, tiny_adapter)
    first, first_records = evaluate(lm, ["obqa_edl"], limit=5)
    second, second_records = evaluate(lm, ["arc_c_edl"], limit=3)
    assert set(first_records) == {"obqa_edl"} and set(second_records) == {"arc_c_edl"}
    assert len(first_records["obqa_edl"]) == 5 and len(second_records["arc_c_edl"]) == 3
    assert len(lm.evidence) == 0  # nothing carried over
    # each set equals what a fresh model gives for that evaluation alone
    alone = evaluate(make_lm(tiny_model, tiny_adapter), ["arc_c_edl"], limit=3)[1]["arc_c_edl"]
    assert list(alone) == list(second_records["arc_c_edl"])
    again = evaluate(lm, ["obqa_edl"], limit=5)[1]["obqa_edl"]
    assert list(again) == list(first_records["obqa_edl"])


def _stock_task_yaml(tmp_path: Path, include: Path, task: str, data: Path, split: str = "test", **extra) -> Path:
    """A stock lm_eval task YAML, pointed at local files in the hub dataset's own schema."""
    folder = tmp_path / "stock_tasks"
    folder.mkdir(exist_ok=True)
    body = {
        "include": str(include),
        "task": task,
        "dataset_path": "json",
        "dataset_name": None,
        "dataset_kwargs": {"data_files": {split: str(data)}},
        **extra,
    }
    (folder / f"{task}.yaml").write_text(json.dumps(body))
    return folder


def _load(folder: Path, *names):
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=str(folder), include_defaults=False)


def test_stock_mmlu_subtask_gives_records_and_the_harness_acc(tiny_model, tiny_adapter, mirror, tmp_path):
    data = mirror / "cais" / "mmlu" / "college_mathematics" / "test.jsonl"
    include = LM_EVAL_TASKS / "mmlu" / "default" / "mmlu_college_mathematics.yaml"
    folder = _stock_task_yaml(tmp_path, include, "mmlu_college_mathematics", data, fewshot_split=None)
    import lm_eval

    results = lm_eval.simple_evaluate(
        model=make_lm(tiny_model, tiny_adapter),
        tasks=["mmlu_college_mathematics"],
        bootstrap_iters=0,
        task_manager=_load(folder),
        limit=10,
    )
    records = results.records["mmlu_college_mathematics"]
    rows = [json.loads(line) for line in data.read_text().splitlines()[:10]]
    assert len(records) == 10 and set(records.k) == {4}
    np.testing.assert_array_equal(records.gold, [r["answer"] for r in rows])
    assert records.labels[0] == ["A", "B", "C", "D"]
    assert results["results"]["mmlu_college_mathematics"]["acc,none"] == pytest.approx(
        float(np.mean(records.correct)), abs=1e-12
    )
    assert "ece,none" not in results["results"]["mmlu_college_mathematics"]  # a stock task's table stays stock
    assert records.meta["method"] == "edl" and records.meta["answer_token_ids"].keys() == {" A", " B", " C", " D"}


def test_a_stock_lettered_task_asked_for_permutations_is_refused_before_any_forward_pass(
    tiny_model, tiny_adapter, mirror, tmp_path, monkeypatch
):
    """Stock mmlu writes its own lettered options (doc_to_text): --metadata permutations would leave it in one
    order in a run that asked for several, so the run is refused, naming the task, before any question is scored."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from lm_eval_evidential.errors import EvidentialInputError
    from lm_eval_evidential.harness.model import EvidentialLM

    data = mirror / "cais" / "mmlu" / "college_mathematics" / "test.jsonl"
    include = LM_EVAL_TASKS / "mmlu" / "default" / "mmlu_college_mathematics.yaml"
    folder = _stock_task_yaml(tmp_path, include, "mmlu_college_mathematics", data, fewshot_split=None)
    manager = TaskManager(include_path=str(folder), include_defaults=False, metadata={"permutations": "cyclic"})
    lm = make_lm(tiny_model, tiny_adapter)
    scored = []
    monkeypatch.setattr(EvidentialLM, "loglikelihood", lambda self, *a, **k: scored.append(1))
    with pytest.raises(EvidentialInputError) as info:
        lm_eval.simple_evaluate(
            model=lm, tasks=["mmlu_college_mathematics"], bootstrap_iters=0, task_manager=manager, limit=4
        )
    message = str(info.value)
    assert "task 'mmlu_college_mathematics': metadata.permutations ('cyclic')" in message and "\n" not in message
    assert "evaluate mmlu_college_mathematics in a run without permutations" in message and not scored


def _letters_task(folder: Path, name: str, data: Path, target: str) -> Path:
    """A stock-style multiple-choice task over ARC rows: choices are the labels, gold is ``target`` (Jinja)."""
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.yaml").write_text(
        textwrap.dedent(f"""\
        task: {name}
        dataset_path: json
        dataset_kwargs: {{data_files: {{test: "{data}"}}}}
        test_split: test
        output_type: multiple_choice
        doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
        doc_to_choice: "{{{{choices.label}}}}"
        doc_to_target: "{{{{{target}}}}}"
        metric_list: [{{metric: acc, aggregation: mean, higher_is_better: true}}]
        """)
    )
    return folder


def test_stock_style_task_keeps_each_questions_own_k(tiny_model, tiny_adapter, mirror, tmp_path):
    data = mirror / "allenai" / "ai2_arc" / "ARC-Challenge" / "test.jsonl"
    folder = _letters_task(tmp_path / "plain", "arc_letters", data, "choices.label.index(answerKey)")
    import lm_eval

    results = lm_eval.simple_evaluate(
        model=make_lm(tiny_model, tiny_adapter), tasks=["arc_letters"], bootstrap_iters=0, task_manager=_load(folder)
    )
    records = results.records["arc_letters"]
    rows = [json.loads(line) for line in data.read_text().splitlines()]
    np.testing.assert_array_equal(records.k, [len(r["choices"]["label"]) for r in rows])
    assert len(set(records.k)) > 1


def test_task_with_several_gold_answers_is_refused_before_any_forward(
    tiny_model, tiny_adapter, mirror, tmp_path, monkeypatch
):
    from lm_eval_evidential.harness.model import EvidentialInputError

    data = mirror / "allenai" / "ai2_arc" / "ARC-Challenge" / "test.jsonl"
    folder = _letters_task(tmp_path, "arc_two_golds", data, "[choices.label.index(answerKey), 0]")
    lm = make_lm(tiny_model, tiny_adapter)
    monkeypatch.setattr(lm, "_last_logits", lambda batch: pytest.fail("forward pass before the refusal"))
    import lm_eval

    with pytest.raises(EvidentialInputError, match="'arc_two_golds': its questions have several gold answers"):
        lm_eval.simple_evaluate(
            model=lm, tasks=["arc_two_golds"], bootstrap_iters=0, task_manager=_load(folder), limit=4
        )


def test_stock_task_with_multi_token_choices_is_refused_before_any_forward(
    tiny_model, tiny_adapter, mirror, tmp_path, monkeypatch
):
    from lm_eval_evidential.harness.model import EvidentialInputError

    data = mirror / "allenai" / "ai2_arc" / "ARC-Challenge" / "test.jsonl"
    folder = _stock_task_yaml(
        tmp_path,
        LM_EVAL_TASKS / "arc" / "arc_challenge.yaml",
        "arc_challenge",
        data,
        training_split=None,
        validation_split=None,
    )
    lm = make_lm(tiny_model, tiny_adapter)
    monkeypatch.setattr(lm, "_last_logits", lambda batch: pytest.fail("forward pass before the refusal"))
    import lm_eval

    with pytest.raises(EvidentialInputError) as info:
        lm_eval.simple_evaluate(
            model=lm, tasks=["arc_challenge"], bootstrap_iters=0, task_manager=_load(folder), limit=4
        )
    message = str(info.value)
    first = json.loads(data.read_text().splitlines()[0])
    assert "'arc_challenge'" in message and "arc_c_edl" in message
    assert any(repr(" " + text) in message for text in first["choices"]["text"])


def test_logged_samples_hold_the_evidence_as_json_fields(tiny_model, tiny_adapter):
    results, records = evaluate(make_lm(tiny_model, tiny_adapter), ["obqa_edl"], limit=4, log_samples=True)
    samples = results["samples"]["obqa_edl"]
    rec = records["obqa_edl"]
    for sample in samples:
        i = list(rec.doc_id).index(sample["doc_id"])
        k = int(rec.k[i])
        assert sample["evidence"] == {"logits": rec.logits[i, :k].tolist(), "alpha": rec.alpha[i, :k].tolist()}
        assert all(type(r[0]) is tuple and len(r[0]) == 2 for r in sample["resps"])
        json.dumps(sample)  # plain JSON, no repr strings
        assert len(json.dumps(sample["evidence"])) < 60 * k


def test_wandb_per_sample_table_builds_for_single_and_pair_tasks(tiny_model, tiny_adapter):
    from lm_eval.loggers.wandb_logger import WandbLogger

    results, _ = evaluate(
        make_lm(tiny_model, tiny_adapter), ["obqa_edl", "obqa_edl_vs_csqa4_edl"], limit=3, log_samples=True
    )
    for task in ("obqa_edl", "obqa_edl_vs_csqa4_edl"):
        table = WandbLogger._generate_dataset(None, results["samples"][task], results["configs"][task])
        assert len(table) == len(results["samples"][task])


def test_counts_are_not_higher_is_better_and_hf_has_no_vacuity_row(tiny_model):
    from lm_eval.utils import make_table

    results, records = evaluate(
        "hf",
        ["obqa_edl", "obqa_edl_vs_csqa4_edl"],
        limit=3,
        model_args=f"pretrained={tiny_model},device=cpu,dtype=float32",
    )
    hib = results["higher_is_better"]["obqa_edl_vs_csqa4_edl"]
    assert hib["n_id"] is None and hib["n_ood"] is None and hib["k_matched"] is None and hib["auroc_max_prob"] is True
    assert "vacuity,none" not in results["results"]["obqa_edl"]
    assert not any("vacuity" in k for k in results["results"]["obqa_edl_vs_csqa4_edl"])
    assert "auroc_max_prob,none" in results["results"]["obqa_edl_vs_csqa4_edl"]
    table = make_table(results)
    assert "vacuity" not in table and "nan" not in table.lower()
    assert records["obqa_edl"].meta["method"] == "softmax"
