"""The run policy: one object for what the hooks keep between calls (no module globals)."""

from __future__ import annotations

import atexit
import gc
import weakref

import pytest

from lm_eval_evidential.integration import policy
from lm_eval_evidential.integration.policy import RunPolicy


def test_a_policy_set_for_one_run_is_restored_after_it_even_when_the_run_fails():
    run = RunPolicy()
    with run.no_output_path_as("refuse"):
        assert run.no_output_path == "refuse"
        with pytest.raises(RuntimeError), run.no_output_path_as("allow"):
            assert run.no_output_path == "allow"
            raise RuntimeError("the run failed")
        assert run.no_output_path == "refuse"
    assert run.no_output_path == "warn"


def test_lines_said_at_exit_are_registered_once_and_kept_in_order(monkeypatch):
    registered = []
    monkeypatch.setattr(atexit, "register", registered.append)
    run = RunPolicy()
    run.say_at_exit("first")
    run.say_at_exit("second")
    assert run.said_at_exit == ["first", "second"] and len(registered) == 1


def test_the_newest_task_manager_is_held_weakly():
    class Manager:
        pass

    run, manager = RunPolicy(), Manager()
    assert run.newest_task_manager() is None
    run.task_manager = weakref.ref(manager)
    assert run.newest_task_manager() is manager
    del manager
    gc.collect()
    assert run.newest_task_manager() is None


def test_the_hooks_read_the_one_process_policy():
    from lm_eval_evidential.integration import hooks, run_output

    assert hooks.RUN_POLICY is run_output.RUN_POLICY is policy.RUN_POLICY
    assert not any(name in vars(hooks) for name in ("_applied", "_task_managers", "NO_OUTPUT_PATH_POLICY"))
