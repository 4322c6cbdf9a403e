"""How records reach disk: records first, results last (naming them); stale temp files cleaned;
file names safe whatever the task name; the harness table equals the audit commands' output."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from ..harness.test_model import make_lm, our_tasks

pytestmark = pytest.mark.usefixtures("use_mirror")


def _run(lm, tasks, out: Path, limit=None, **kwargs):
    import lm_eval
    from lm_eval.loggers import EvaluationTracker

    tracker = EvaluationTracker(output_path=str(out))
    results = lm_eval.simple_evaluate(
        model=lm,
        tasks=tasks,
        limit=limit,
        bootstrap_iters=0,
        task_manager=our_tasks(),
        evaluation_tracker=tracker,
        **kwargs,
    )
    tracker.save_results_aggregated(results=results, samples=None)
    return results


def test_results_file_names_the_records_written_before_it(tiny_model, tiny_adapter, tmp_path):
    from lm_eval_evidential.records import read_records_file

    results = _run(make_lm(tiny_model, tiny_adapter), ["obqa_edl", "csqa4_edl"], tmp_path, limit=6)
    [results_file] = tmp_path.rglob("results_*.json")
    saved = json.loads(results_file.read_text())
    named = saved["evidential_records"]
    assert set(named) == {"obqa_edl", "csqa4_edl"}
    for task, name in named.items():
        path = results_file.parent / name
        assert path.stat().st_mtime_ns <= results_file.stat().st_mtime_ns
        assert read_records_file(path).task == task
        assert list(read_records_file(path)) == list(results.records[task])


def test_interrupted_results_write_leaves_records_and_no_results(tiny_model, tiny_adapter, tmp_path, monkeypatch):
    import lm_eval
    from lm_eval.loggers import EvaluationTracker

    tracker = EvaluationTracker(output_path=str(tmp_path))
    results = lm_eval.simple_evaluate(
        model=make_lm(tiny_model, tiny_adapter),
        tasks=["obqa_edl"],
        limit=3,
        bootstrap_iters=0,
        task_manager=our_tasks(),
        evaluation_tracker=tracker,
    )

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", interrupted)  # the harness writes results_*.json with write_text
    with pytest.raises(KeyboardInterrupt):
        tracker.save_results_aggregated(results=results, samples=None)
    assert not list(tmp_path.rglob("results_*.json"))
    assert len(list(tmp_path.rglob("records_obqa_edl_*.parquet"))) == 1


def test_stale_temp_files_are_removed_by_the_next_run_and_young_ones_kept(tiny_model, tiny_adapter, tmp_path):
    from lm_eval_evidential.integration.run_output import STALE_TEMP_SECONDS

    folder = tmp_path / "models"
    first = _run(make_lm(tiny_model, tiny_adapter), ["obqa_edl"], tmp_path, limit=2)
    [records_file] = tmp_path.rglob("records_*.parquet")
    stale = records_file.parent / f".{records_file.name}.abc123.tmp"
    young = records_file.parent / f".{records_file.name}.def456.tmp"
    for path in (stale, young):
        path.write_bytes(b"partial")
    old = time.time() - STALE_TEMP_SECONDS - 5
    os.utime(stale, (old, old))
    _run(make_lm(tiny_model, tiny_adapter), ["obqa_edl"], tmp_path, limit=2)
    assert not stale.exists() and young.exists()
    assert first is not None and folder is not None


@pytest.mark.parametrize("name", ["../escape", "/abs/path", "a/b\\c", "dots..", "nul\x00name", ".hidden", "x" * 300])
def test_records_file_names_stay_in_the_folder_and_the_file_keeps_the_task_name(tmp_path, name):
    from lm_eval_evidential.integration.run_output import write_run_records
    from lm_eval_evidential.records import Records, make_record, read_records_file

    rows = [make_record(task=name, doc_id=0, labels=["A", "B"], gold=0, logits=[0.5, -0.5], alpha=[2.0, 1.5])]
    folder = tmp_path / "out"
    written = write_run_records(folder, {name: Records.from_rows(rows, task=name, meta={"method": "ib_edl"})})
    path = written[name]
    assert path.parent == folder and path.resolve().parent == folder.resolve()
    assert not path.name.startswith(".") and len(path.name.encode()) <= 255 and "\x00" not in path.name
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == [path]
    assert read_records_file(path).task == name


def test_harness_table_equals_the_audit_commands_on_the_same_records(tiny_model, tiny_adapter, tmp_path, capsys):
    from lm_eval_evidential.cli.main import main

    tasks = ["obqa_edl", "csqa4_edl", "obqa_edl_vs_csqa4_edl"]
    results = _run(make_lm(tiny_model, tiny_adapter), tasks, tmp_path, limit=8)  # the pair: 8 per side, the same docs
    table = results["results"]
    assert (
        main(["calibration", str(tmp_path), "--task", "obqa_edl,csqa4_edl", "--json", str(tmp_path / "cal.json")]) == 0
    )
    for row in json.loads((tmp_path / "cal.json").read_text()):
        for metric in ("ece", "adaptive_ece", "nll", "brier", "acc"):
            assert table[row["task"]][f"{metric},none"] == pytest.approx(row[metric], abs=1e-12, rel=0)
        assert table[row["task"]]["vacuity,none"] == pytest.approx(
            float(np.mean(results.records[row["task"]].vacuity)), abs=1e-12, rel=0
        )
    assert (
        main(
            [
                "ood",
                str(tmp_path),
                "--id",
                "obqa_edl",
                "--ood",
                "csqa4_edl",
                "--n-boot",
                "0",
                "--json",
                str(tmp_path / "ood.json"),
            ]
        )
        == 0
    )
    pair = table["obqa_edl_vs_csqa4_edl"]
    from lm_eval_evidential.metrics.scores import OOD_DEFAULT_SCORES

    rows = [r for r in json.loads((tmp_path / "ood.json").read_text()) if r["score"] in OOD_DEFAULT_SCORES]
    assert len(rows) == len(OOD_DEFAULT_SCORES)
    for row in rows:
        assert pair[f"auroc_{row['score']},none"] == pytest.approx(row["auroc"], abs=1e-12, rel=0)
        assert pair[f"aupr_in_{row['score']},none"] == pytest.approx(row["aupr_in"], abs=1e-12, rel=0)
    assert pair["n_id,none"] == rows[0]["n_id"] and pair["n_ood,none"] == rows[0]["n_ood"]
    capsys.readouterr()


@pytest.mark.parametrize("problem", ["unwritable", "under a file"])
def test_stock_simple_evaluate_refuses_an_output_path_it_cannot_write_before_loading(
    tiny_model, tmp_path, monkeypatch, problem
):
    import errno
    import tempfile

    import lm_eval
    from lm_eval.loggers import EvaluationTracker

    from lm_eval_evidential.errors import OutputPathError, OutputWriteError
    from lm_eval_evidential.harness.model import EvidentialLM

    out = tmp_path / "out"
    if problem == "unwritable":  # root ignores permission bits: the probe's own call is made to fail

        def denied(*args, **kwargs):
            raise PermissionError(errno.EACCES, "Permission denied", str(kwargs.get("dir")))

        monkeypatch.setattr(tempfile, "TemporaryFile", denied)
    else:
        out.write_text("a file")
        out = out / "run"
    monkeypatch.setattr(EvidentialLM, "__init__", lambda *a, **k: pytest.fail("the model loaded before the refusal"))
    expected = OutputWriteError if problem == "unwritable" else OutputPathError
    with pytest.raises(expected, match=str(tmp_path)):
        lm_eval.simple_evaluate(
            model="evidential",
            model_args=f"pretrained={tiny_model}",
            tasks=["obqa_edl"],
            task_manager=our_tasks(),
            evaluation_tracker=EvaluationTracker(output_path=str(out)),
        )
