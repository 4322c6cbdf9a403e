"""``lm-eval-evidential eval`` and plain ``lm_eval --model evidential`` as a new user meets them: a run
without --output_path (which keeps no records) said before any weights load and at the end, refused by
``eval`` unless ``--no_output_path``; a mistyped task with the nearest names; ``--help`` that says what
``--model evidential`` is."""

from __future__ import annotations

import logging

import pytest

from lm_eval_evidential.cli.main import EXIT_ERROR, EXIT_OK, main
from lm_eval_evidential.integration.policy import RUN_POLICY


@pytest.fixture
def our_tasks_only(monkeypatch):
    """The stock CLI in-process over this package's tasks only (indexing lm_eval's takes tens of seconds)."""
    import lm_eval.__main__
    import lm_eval.tasks

    from lm_eval_evidential.tasks import tasks_dir

    class OurTasksOnly(lm_eval.tasks.TaskManager):
        def __init__(self, *args, include_path=None, **kwargs):
            given = [include_path] if isinstance(include_path, str) else list(include_path or [])
            super().__init__(*args, **{**kwargs, "include_path": [str(tasks_dir()), *given], "include_defaults": False})

    monkeypatch.setattr(lm_eval.tasks, "TaskManager", OurTasksOnly)
    monkeypatch.setattr(lm_eval.__main__, "setup_logging", lambda *args, **kwargs: None)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


@pytest.fixture
def at_exit(monkeypatch):
    """What the plugin would print when the process ends (collected instead of printed at pytest's exit)."""
    said: list[str] = []
    monkeypatch.setattr(RUN_POLICY, "say_at_exit", said.append)
    return said


def _model_loads(monkeypatch) -> list:
    """Record every attempt to build the model (the weights load there)."""
    from lm_eval_evidential.harness.model import EvidentialLM

    built = []
    original = EvidentialLM.__init__

    def spy(self, *args, **kwargs):
        built.append(kwargs)
        original(self, *args, **kwargs)

    monkeypatch.setattr(EvidentialLM, "__init__", spy)
    return built


def _argv(tiny_model, *extra):
    return [
        "eval",
        "--model",
        "evidential",
        "--model_args",
        f"pretrained={tiny_model},device=cpu",
        "--tasks",
        "obqa_edl",
        "--limit",
        "2",
        *extra,
    ]


def test_eval_refuses_a_run_that_keeps_nothing_before_the_weights_load(
    tiny_model, use_mirror, our_tasks_only, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    built = _model_loads(monkeypatch)
    assert main(_argv(tiny_model)) == EXIT_ERROR
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    line = err[0]
    assert line.startswith("lm-eval-evidential eval: error: no --output_path")
    for words in ("obqa_edl", "records_<task>_<date_id>.parquet", "--output_path DIR", "--no_output_path"):
        assert words in line
    assert built == [] and list(tmp_path.iterdir()) == []
    assert RUN_POLICY.no_output_path == "warn"  # plain lm_eval in the same process still only warns


def test_eval_refuses_it_before_the_harness_indexes_its_tasks(tiny_model, our_tasks_only, monkeypatch, capsys):
    """Said at once, not after lm_eval has read its thousands of task files; the tasks named as given."""
    import lm_eval.tasks

    monkeypatch.setattr(lm_eval.tasks.TaskManager, "__init__", lambda *a, **k: pytest.fail("tasks were indexed"))
    argv = _argv(tiny_model)
    at = argv.index("obqa_edl")
    argv[at : at + 1] = ["obqa_edl,csqa4_edl", "mmlu_math_edl"]  # lm_eval takes commas and spaces
    assert main(argv) == EXIT_ERROR
    line = capsys.readouterr().err.strip()
    assert "no --output_path: the evidential records of obqa_edl, csqa4_edl, mmlu_math_edl" in line


def test_eval_with_no_output_path_runs_and_keeps_nothing(
    tiny_model, use_mirror, our_tasks_only, tmp_path, monkeypatch, capsys, at_exit
):
    monkeypatch.chdir(tmp_path)
    assert main(_argv(tiny_model, "--no_output_path")) == EXIT_OK
    assert "obqa_edl" in capsys.readouterr().out  # the table
    assert list(tmp_path.iterdir()) == [] and at_exit == []  # asked for: no nagging


def test_eval_with_output_path_writes_the_records(tiny_model, use_mirror, our_tasks_only, tmp_path, at_exit):
    import lm_eval_evidential

    assert main(_argv(tiny_model, "--output_path", str(tmp_path / "out"))) == EXIT_OK
    assert len(lm_eval_evidential.load_records(tmp_path / "out", "obqa_edl")) == 2
    assert at_exit == []


def test_plain_lm_eval_without_output_path_says_so_before_the_weights_and_at_the_end(
    tiny_model, use_mirror, our_tasks_only, tmp_path, monkeypatch, at_exit
):
    """Stock lm_eval without --output_path warns once before the weights load and once at exit, and writes
    nothing: its ``EvaluationTracker(output_path=None)`` saves as a user's own Python would."""
    import sys

    import lm_eval_evidential._import_hook as hook

    hook.install()
    from lm_eval.__main__ import cli_evaluate

    from lm_eval_evidential.harness.model import EvidentialLM

    order = []
    original = EvidentialLM.__init__

    def spy(self, *args, **kwargs):
        order.append("model")
        original(self, *args, **kwargs)

    monkeypatch.setattr(EvidentialLM, "__init__", spy)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["lm_eval", *_argv(tiny_model)[1:]])

    class Spy(logging.Handler):
        def emit(self, record):
            order.append(record.getMessage())

    monkeypatch.setattr(logging.getLogger("lm_eval.evidential"), "handlers", [Spy(logging.WARNING)])
    cli_evaluate()
    warnings = [line for line in order if line != "model"]
    assert len(warnings) == 1 and warnings[0].startswith("no --output_path: the evidential records of obqa_edl")
    assert "--output_path DIR" in warnings[0]
    assert order[:2] == [warnings[0], "model"]  # said before any weights load
    assert len(at_exit) == 1 and "obqa_edl were NOT written" in at_exit[0] and "--output_path DIR" in at_exit[0]
    assert list(tmp_path.iterdir()) == []


def test_a_mistyped_task_is_one_line_with_the_nearest_names(
    tiny_model, use_mirror, our_tasks_only, tmp_path, monkeypatch, capsys
):
    built = _model_loads(monkeypatch)
    argv = _argv(tiny_model, "--output_path", str(tmp_path / "out"))
    argv[argv.index("obqa_edl")] = "obqa_ed,csqa4_edl,zzzz,obqa"
    assert main(argv) == EXIT_ERROR
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "Tasks not found: obqa_ed, zzzz, obqa" in err[0]
    assert "'obqa_ed': did you mean obqa_edl" in err[0] and "'zzzz': no close name" in err[0]
    assert "'obqa': did you mean obqa_edl or" in err[0]  # the task the short name begins, not coqa
    assert built == []


def test_eval_help_says_what_model_evidential_is_before_the_stock_help(capsys):
    with pytest.raises(SystemExit) as info:
        main(["eval", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    ours = out.index("--model evidential")
    for words in ("method=edl|ib_edl|softmax", "prior_weight=1", "--output_path DIR", "--no_output_path", "obqa_edl"):
        assert out.index(words) > ours - 1
    stock = out.index("usage: lm-eval run")  # the stock run's arguments, not the subcommand list
    assert ours < stock and "--model_args" in out[stock:]
