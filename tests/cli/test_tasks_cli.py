"""``lm-eval-evidential tasks``: the census of lm-eval's multiple-choice tasks (table and --json)."""

from __future__ import annotations

import json

from lm_eval_evidential.cli.main import main

PATTERNS = [
    "arc_challenge",
    "sciq",
    "truthfulqa_mc1",
    "mmlu_abstract_algebra",
    "leaderboard_gpqa_main",
    "leaderboard_bbh_boolean_expressions",
    "zhoblimp_BA_deletion",
    "lambada_openai",
]


def test_census_rows_and_table(capsys, tmp_path):
    path = tmp_path / "census.json"
    assert main(["tasks", *PATTERNS, "--json", str(path)]) == 0
    captured = capsys.readouterr()
    table = captured.out
    # a pattern that matches nothing is said, not dropped
    assert "note: 'lambada_openai' matches no multiple-choice task; try '*lambada_openai*'" in captured.err
    rows = {row["task"]: row for row in json.loads(path.read_text())}
    assert set(rows) == set(PATTERNS) - {"lambada_openai"}  # multiple-choice tasks only
    assert rows["arc_challenge"] == {
        "task": "arc_challenge",
        "k": "per question",
        "choices": "texts",
        "as_is": "no",
        "view": "arc_challenge_edl",
        "note": "",
    }
    assert rows["sciq"]["k"] == 4 and "shuffles" in rows["sciq"]["note"]
    assert "shuffles" in rows["truthfulqa_mc1"]["note"]
    assert rows["mmlu_abstract_algebra"]["as_is"] == "yes" and not rows["mmlu_abstract_algebra"]["view"]
    assert rows["leaderboard_gpqa_main"]["choices"] == "(A) labels" and rows["leaderboard_gpqa_main"]["as_is"] == "yes"
    assert rows["leaderboard_bbh_boolean_expressions"]["choices"] == "words"
    assert not rows["zhoblimp_BA_deletion"]["view"] and "minimal pair" in rows["zhoblimp_BA_deletion"]["note"]
    assert table.splitlines()[0].split() == ["task", "k", "choices", "as_is", "view", "note"]
    assert "note: 7 multiple-choice tasks:" in table and "4 have a lettered view" in table
    assert main(["tasks", "no_such_task_*"]) == 1
    assert "patterns are globs over whole task names: try '*no_such_task_*'" in capsys.readouterr().err
