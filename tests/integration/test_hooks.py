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

    from lm_eval_evidential.tasks import tasks_dir

    # the user's task of the same name as ours wins; lm_eval's own tasks are all there
    (tmp_path / "obqa_edl.yaml").write_text("task: obqa_edl\ndataset_path: json\noutput_type: multiple_choice\n")
    manager = TaskManager(None, [str(tmp_path)])
    assert manager.include_path == [str(tmp_path)]
    assert {"arc_easy", "mmlu_college_mathematics", "csqa4_edl", "obqa_edl_ood"} <= set(manager.all_tasks)
    assert manager.task_index["obqa_edl"].yaml_path.parent == tmp_path
    assert manager.task_index["csqa4_edl"].yaml_path.parent == tasks_dir()


def test_moved_harness_internals_fail_at_once_naming_versions_and_the_fallback(tiny_model, monkeypatch):
    from lm_eval_evidential.errors import HarnessVersionError
    from lm_eval_evidential.harness.model import EvidentialLM
    from lm_eval_evidential.integration import hooks
    from lm_eval_evidential.tasks import tasks_dir

    monkeypatch.setattr(hooks, "HOOKED", {**hooks.HOOKED, "lm_eval.tasks.registry_that_moved": "TaskManager"})
    loaded = []
    monkeypatch.setattr(EvidentialLM, "_create_model", lambda *a, **k: loaded.append(1))
    with pytest.raises(HarnessVersionError) as info:
        EvidentialLM(pretrained=str(tiny_model), device="cpu")
    message = str(info.value)
    assert "\n" not in message and not loaded
    assert "lm_eval.tasks.registry_that_moved" in message and "supported: lm-eval" in message
    assert ">=0.4.13" in message and "<0.5" in message
    assert f"--include_path {tasks_dir()}" in message


def _python(code: str):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def test_expected_conditions_end_in_one_line_and_other_errors_keep_their_traceback(tiny_model):
    """Once an EvidentialLM is built (what ``lm_eval --model evidential`` does), an uncaught error of ours
    is its one line; any other exception keeps its traceback."""
    build = (
        "from lm_eval_evidential.harness.model import EvidentialLM\n"
        f"EvidentialLM(pretrained={str(tiny_model)!r}, device='cpu')\n"
    )
    ours = _python(
        build + "import numpy as np\n"
        "from lm_eval_evidential.metrics.cardinality import check_cardinality\n"
        "check_cardinality(np.full(3, 4), np.full(2, 5), id_name='obqa_edl', ood_name='csqa_edl')"
    )
    assert ours.returncode == 1
    # One line (the last; loading the model drew its progress bar before): "refused: " and the refusal's
    # own message (K histograms, remedies), no traceback.
    last = ours.stderr.rstrip("\n").splitlines()[-1]
    assert last.startswith("refused: ") and ours.stderr.count("refused") == 1, ours.stderr
    assert "Traceback" not in ours.stderr and "obqa_edl" in last and "csqa_edl" in last
    other = _python(build + "raise KeyError('x')")
    assert other.returncode == 1 and "Traceback" in other.stderr
    bug = _python(build + "raise ValueError('a bug, not an expected condition')")
    assert bug.returncode == 1 and "Traceback" in bug.stderr and "ValueError: a bug" in bug.stderr


def test_a_missing_dependency_of_lm_eval_is_named_with_its_install_command():
    """lm_eval where it was but ``datasets`` not installed: one line naming the module and ``pip install datasets``,
    not "cannot hook into lm-eval" with a list of names that did not move."""
    proc = _python(
        "import sys\n"
        "sys.modules['datasets'] = None  # as if not installed: import raises ModuleNotFoundError\n"
        "from lm_eval_evidential.errors import one_line\n"
        "from lm_eval_evidential.integration.hooks import check_harness\n"
        "try:\n"
        "    check_harness()\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, one_line(exc))\n"
    )
    said = proc.stdout.strip()
    assert proc.returncode == 0 and "\n" not in said, proc.stderr
    assert said.startswith("HarnessVersionError error: lm-eval ") and "cannot be imported" in said
    assert "(datasets, needed by lm_eval." in said and said.endswith("install it: pip install datasets")
    assert "cannot hook into" not in said and "TaskManager" not in said


def test_the_install_command_names_lm_evals_own_requirement_or_lm_eval_itself():
    from lm_eval_evidential.lm_eval_compat import dependency_install

    assert dependency_install(["datasets", "rouge_score"], "0.4.13") == "pip install datasets rouge-score"
    # a module that is not a name lm_eval requires (scikit-learn installs sklearn): lm_eval again, which pip
    # completes with its missing dependencies
    assert dependency_install(["datasets", "sklearn"], "0.4.13") == "pip install lm_eval==0.4.13"


def test_importing_lm_eval_leaves_the_excepthook_alone():
    """A process that only imports lm_eval (the plugin's hooks run) keeps the interpreter's own excepthook."""
    proc = _python(
        "import sys, lm_eval.models, lm_eval.evaluator, lm_eval.tasks\n"
        "from lm_eval_evidential.integration.policy import RUN_POLICY\n"
        "print(sys.excepthook is sys.__excepthook__, 'lm_eval.models' in RUN_POLICY.hooked)"
    )
    assert proc.stdout.split() == ["True", "True"], proc.stderr


def test_a_moved_private_helper_fails_at_once_naming_it(tiny_model, monkeypatch):
    from lm_eval_evidential import lm_eval_compat
    from lm_eval_evidential.errors import HarnessVersionError
    from lm_eval_evidential.harness.model import EvidentialLM

    assert lm_eval_compat.missing_internals() == []
    monkeypatch.setattr(lm_eval_compat, "INTERNALS", (*lm_eval_compat.INTERNALS, "lm_eval.models.utils:_renamed"))
    loaded = []
    monkeypatch.setattr(EvidentialLM, "_create_model", lambda *a, **k: loaded.append(1))
    with pytest.raises(HarnessVersionError, match=r"lm_eval\.models\.utils:_renamed") as info:
        EvidentialLM(pretrained=str(tiny_model), device="cpu")
    assert "\n" not in str(info.value) and not loaded


def test_a_refused_pair_task_through_the_harness_is_one_readable_error(tiny_model, mirror):
    code = (
        "import lm_eval\n"
        "from lm_eval.tasks import TaskManager\n"
        "from lm_eval_evidential.tasks import tasks_dir\n"
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
    [line] = [x for x in proc.stderr.splitlines() if x.startswith("refused: ")]
    assert "obqa_edl" in line and "csqa_edl" in line
