"""The stock lm_eval CLI in a subprocess and the import hook (a run without --output_path:
tests/cli/test_eval_cli.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest


def run(cmd, env_extra=None, cwd=None, timeout=600):
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        **(env_extra or {}),
    }
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)


def test_hook_costs_nothing_to_unrelated_processes():
    code = (
        "import sys; print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'lm_eval', 'numpy', 'transformers', 'lm_eval_evidential')))"
    )
    out = run([sys.executable, "-c", code])
    assert out.returncode == 0, out.stderr
    loaded = eval(out.stdout)
    assert loaded == ["lm_eval_evidential", "lm_eval_evidential._import_hook"], loaded


def test_registry_knows_both_the_harness_models_and_ours():
    code = (
        "import sys; from lm_eval.api.registry import get_model; "
        "print(get_model('hf').__name__, get_model('evidential').__name__, get_model('dummy').__name__)"
    )
    out = run([sys.executable, "-c", code])
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["HFLM", "EvidentialLM", "DummyLM"]


def test_task_manager_lists_our_tasks_without_include_path():
    code = (
        "from lm_eval.tasks import TaskManager; t = TaskManager(); "
        "print(sorted(x for x in t.all_tasks if 'edl' in x)); print('arc_easy' in t.all_tasks)"
    )
    out = run([sys.executable, "-c", code])
    assert out.returncode == 0, out.stderr
    names, stock = out.stdout.strip().splitlines()
    for name in (
        "obqa_edl",
        "arc_c_edl",
        "arc_e_edl",
        "csqa_edl",
        "csqa4_edl",
        "mmlu_math_edl",
        "obqa_edl_vs_csqa4_edl",
        "obqa_edl_ood",
    ):
        assert name in names
    assert stock == "True"


@pytest.mark.slow
def test_stock_cli_end_to_end(tiny_model, tiny_adapter, mirror, tmp_path):
    import lm_eval_evidential

    out_dir = tmp_path / "out"
    proc = run(
        [
            "lm_eval",
            "--model",
            "evidential",
            "--model_args",
            f"pretrained={tiny_model},peft={tiny_adapter},device=cpu,dtype=float32",
            "--batch_size",
            "4",
            "--tasks",
            "obqa_edl,arc_c_edl",
            "--output_path",
            str(out_dir),
            "--limit",
            "6",
        ],
        env_extra={"EVIDENTIAL_DATA_DIR": str(mirror)},
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "obqa_edl" in proc.stdout and "vacuity" in proc.stdout and "acc" in proc.stdout
    results = json.loads(next(out_dir.rglob("results_*.json")).read_text())
    for task in ("obqa_edl", "arc_c_edl"):
        records = lm_eval_evidential.load_records(out_dir, task)
        assert len(records) == 6
        assert results["results"][task]["acc,none"] == pytest.approx(float(np.mean(records.correct)))
        assert records.path.parent == next(out_dir.rglob("results_*.json")).parent
    assert not list(out_dir.rglob("*.tmp"))


@pytest.mark.slow
def test_stock_hf_model_runs_our_tasks(tiny_model, mirror, tmp_path):
    import lm_eval_evidential

    proc = run(
        [
            "lm_eval",
            "--model",
            "hf",
            "--model_args",
            f"pretrained={tiny_model},dtype=float32",
            "--device",
            "cpu",
            "--tasks",
            "obqa_edl",
            "--limit",
            "4",
            "--output_path",
            str(tmp_path / "out"),
        ],
        env_extra={"EVIDENTIAL_DATA_DIR": str(mirror)},
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = lm_eval_evidential.load_records(tmp_path / "out", "obqa_edl")
    assert records.meta["method"] == "softmax" and np.isnan(records.vacuity).all()


@pytest.mark.slow
def test_python_m_entry_forwards_to_the_harness(tiny_model, mirror, tmp_path):
    proc = run(
        [
            sys.executable,
            "-S",
            "-m",
            "lm_eval_evidential",
            "eval",
            "--model",
            "evidential",
            "--model_args",
            f"pretrained={tiny_model},device=cpu",
            "--tasks",
            "obqa_edl",
            "--limit",
            "2",
            "--no_output_path",  # this command's own flag: stripped before the stock CLI parses the rest
        ],
        env_extra={"EVIDENTIAL_DATA_DIR": str(mirror), "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "obqa_edl" in proc.stdout
