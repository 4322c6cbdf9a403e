"""The plugin changes nothing else: TaskManager arguments and signature as stock, our tasks only
with lm_eval's defaults, one clear line when lm_eval's internals moved or a run is refused."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

import pytest


def _stock_signature():
    from lm_eval.tasks.manager import TaskManager

    return inspect.signature(inspect.unwrap(TaskManager.__init__))


def test_task_manager_signature_and_arguments_are_stock(tmp_path):
    from lm_eval.tasks import TaskManager

    assert getattr(TaskManager.__init__, "_evidential_patched", False)
    assert inspect.signature(TaskManager.__init__) == _stock_signature()
    (tmp_path / "mine.yaml").write_text("task: mine\ndataset_path: json\noutput_type: multiple_choice\n")
    without = TaskManager(include_defaults=False)
    assert without.all_tasks == [] and without.include_path is None
    positional = TaskManager(None, str(tmp_path), False)  # verbosity, include_path, include_defaults
    assert positional.all_tasks == ["mine"] and positional.include_path == str(tmp_path)


def test_default_task_manager_adds_our_tasks_between_lm_evals_and_the_users(tmp_path):
    from lm_eval.tasks import TaskManager

    from lm_eval_evidential.harness.plugin import tasks_dir

    # the user's task of the same name as ours wins; lm_eval's own tasks are all there
    (tmp_path / "obqa_edl.yaml").write_text("task: obqa_edl\ndataset_path: json\noutput_type: multiple_choice\n")
    manager = TaskManager(None, [str(tmp_path)])
    assert manager.include_path == [str(tmp_path)]
    assert {"arc_easy", "mmlu_college_mathematics", "csqa4_edl", "obqa_edl_ood"} <= set(manager.all_tasks)
    assert manager.task_index["obqa_edl"].yaml_path.parent == tmp_path
    assert manager.task_index["csqa4_edl"].yaml_path.parent == tasks_dir()


def test_moved_harness_internals_fail_at_once_naming_versions_and_the_fallback(tiny_model, monkeypatch):
    from lm_eval_evidential.harness import plugin
    from lm_eval_evidential.harness.model import EvidentialLM

    monkeypatch.setattr(plugin, "HOOKED", {**plugin.HOOKED, "lm_eval.tasks.registry_that_moved": "TaskManager"})
    loaded = []
    monkeypatch.setattr(EvidentialLM, "_create_model", lambda *a, **k: loaded.append(1))
    with pytest.raises(plugin.HarnessVersionError) as info:
        EvidentialLM(pretrained=str(tiny_model), device="cpu")
    message = str(info.value)
    assert "\n" not in message and not loaded
    assert "lm_eval.tasks.registry_that_moved" in message and "supported: lm-eval" in message
    assert ">=0.4.13" in message and "<0.5" in message
    assert f"--include_path {plugin.tasks_dir()}" in message


def _python(code: str):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def test_expected_conditions_end_in_one_line_and_other_errors_keep_their_traceback():
    ours = _python(
        "import lm_eval.models\n"
        "import numpy as np\n"
        "from lm_eval_evidential.metrics.cardinality import check_cardinality\n"
        "check_cardinality(np.full(3, 4), np.full(2, 5), id_name='obqa_edl', ood_name='csqa_edl')"
    )
    assert ours.returncode == 1
    # One line: "error: " and the refusal's own message (K histograms, remedies), no traceback.
    assert ours.stderr.startswith("error: ") and ours.stderr.count("\n") == 1, ours.stderr
    assert "Traceback" not in ours.stderr and "obqa_edl" in ours.stderr and "csqa_edl" in ours.stderr
    other = _python("import lm_eval.models\nraise KeyError('x')")
    assert other.returncode == 1 and "Traceback" in other.stderr


def test_a_refused_pair_task_through_the_harness_is_one_readable_error(tiny_model, mirror):
    code = (
        "import lm_eval\n"
        "from lm_eval.tasks import TaskManager\n"
        "from lm_eval_evidential.harness.plugin import tasks_dir\n"
        f"lm_eval.simple_evaluate(model='hf', model_args='pretrained={tiny_model},device=cpu', "
        "tasks=['obqa_edl_vs_csqa_edl'], task_manager=TaskManager(include_path=str(tasks_dir()), "
        "include_defaults=False))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "EVIDENTIAL_DATA_DIR": str(mirror), "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    [line] = [x for x in proc.stderr.splitlines() if x.startswith("error: ")]
    assert "obqa_edl" in line and "csqa_edl" in line
