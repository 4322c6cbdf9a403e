"""docs/tasks.md "Your own tasks": a user's MCQA files become an EDL task and an ID/OOD pair by YAML alone."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from tests.harness.test_model import make_lm

TASKS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "tasks.md"


def _readme_yaml(name: str) -> str:
    """The YAML block of docs/tasks.md that starts with ``# <name>``."""
    blocks = re.findall(r"```yaml\n(.*?)```", TASKS_PAGE.read_text(), flags=re.S)
    [block] = [b for b in blocks if b.startswith(f"# {name}\n")]
    return block


def _questions(prefix: str, n: int) -> list[dict]:
    colours = ["red", "green", "blue", "yellow"]
    return [
        {
            "qid": f"{prefix}-{i}",
            "prompt": f"{prefix} question number {i}: which colour is listed "
            f"{['first', 'second', 'third', 'fourth'][i % 4]}?",
            "answers": colours,
            "correct": i % 4,
        }
        for i in range(n)
    ]


def test_users_own_dataset_becomes_an_edl_task_and_a_pair_by_yaml_alone(
    tiny_model, tiny_adapter, tmp_path, monkeypatch
):
    import lm_eval
    from lm_eval.tasks import TaskManager

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EVIDENTIAL_DATA_DIR", raising=False)  # a user's files are read wherever the mirror points
    folder = tmp_path / "my_tasks"
    folder.mkdir()
    for name, rows in (("my_quiz.jsonl", _questions("quiz", 6)), ("my_trivia.jsonl", _questions("trivia", 5))):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    for name in ("my_quiz_edl", "my_trivia_edl", "my_quiz_edl_vs_my_trivia_edl"):
        (folder / f"{name}.yaml").write_text(_readme_yaml(name))

    results = lm_eval.simple_evaluate(
        model=make_lm(tiny_model, tiny_adapter),
        tasks=["my_quiz_edl", "my_trivia_edl", "my_quiz_edl_vs_my_trivia_edl"],
        bootstrap_iters=0,
        task_manager=TaskManager(include_path=str(folder), include_defaults=False),
    )
    quiz = results.records["my_quiz_edl"]
    assert len(quiz) == 6 and set(quiz.k) == {4}
    np.testing.assert_array_equal(quiz.gold, [i % 4 for i in range(6)])
    assert quiz.meta["data_source"]["origin"] == "local files"
    pair = results["results"]["my_quiz_edl_vs_my_trivia_edl"]
    assert pair["n_id,none"] == 6 and pair["n_ood,none"] == 5 and pair["k_matched,none"] == 1.0
    assert 0.0 <= pair["auroc_reciprocal_vacuity,none"] <= 1.0
    assert "ece,none" in results["results"]["my_quiz_edl"]


def test_a_pair_of_other_ks_is_refused_under_the_declared_policy(tiny_model, tmp_path, monkeypatch):
    import lm_eval
    from lm_eval.tasks import TaskManager

    from lm_eval_evidential.metrics.cardinality import CardinalityMismatchError

    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "my_tasks"
    folder.mkdir()
    rows = _questions("quiz", 4)
    three = [{**r, "answers": r["answers"][:3], "correct": r["correct"] % 3} for r in _questions("trivia", 4)]
    (tmp_path / "my_quiz.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "my_trivia.jsonl").write_text("".join(json.dumps(r) + "\n" for r in three))
    for name in ("my_quiz_edl", "my_trivia_edl", "my_quiz_edl_vs_my_trivia_edl"):
        (folder / f"{name}.yaml").write_text(_readme_yaml(name))
    with pytest.raises(CardinalityMismatchError, match="my_trivia_edl"):
        lm_eval.simple_evaluate(
            model=make_lm(tiny_model),
            tasks=["my_quiz_edl_vs_my_trivia_edl"],
            bootstrap_iters=0,
            task_manager=TaskManager(include_path=str(folder), include_defaults=False),
        )


@pytest.mark.parametrize("module", ["lm_eval_evidential.tasks", "lm_eval_evidential.harness"])
def test_a_yaml_naming_the_task_classes_by_the_old_path_still_builds(tmp_path, monkeypatch, module):
    from lm_eval.tasks import TaskManager

    from lm_eval_evidential.tasks.evidential_task import EvidentialMCQATask
    from lm_eval_evidential.tasks.pairs import OODPairTask

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EVIDENTIAL_DATA_DIR", raising=False)
    folder = tmp_path / "my_tasks"
    folder.mkdir()
    for name, rows in (("my_quiz.jsonl", _questions("quiz", 3)), ("my_trivia.jsonl", _questions("trivia", 3))):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    for name in ("my_quiz_edl", "my_trivia_edl", "my_quiz_edl_vs_my_trivia_edl"):
        text = _readme_yaml(name)  # the docs name the classes' homes in tasks/
        if module == "lm_eval_evidential.harness":  # the old YAMLs named harness.evidential_task for both
            text = re.sub(r"lm_eval_evidential\.tasks\.(evidential_task|pairs)\.", f"{module}.evidential_task.", text)
        (folder / f"{name}.yaml").write_text(text)
    tasks = TaskManager(include_path=str(folder), include_defaults=False).load_task_or_group(
        ["my_quiz_edl", "my_quiz_edl_vs_my_trivia_edl"]
    )
    assert type(tasks["my_quiz_edl"]) is EvidentialMCQATask
    assert type(tasks["my_quiz_edl_vs_my_trivia_edl"]) is OODPairTask
