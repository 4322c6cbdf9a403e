"""lm-eval's own offline tests give the same outcomes with and without this package's hook."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "lm_eval_suite.py"


@pytest.mark.slow
def test_lm_evals_own_tests_are_unchanged_by_the_hook(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("lm_eval_suite", TOOL)
    suite = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(suite)
    cache = Path.home() / ".cache" / "lm-eval-evidential" / "lm-eval-tests"
    try:
        root = suite.fetch_tests(cache)
    except (subprocess.CalledProcessError, ValueError, OSError) as exc:  # no package registry reachable
        pytest.skip(f"cannot download lm-eval's sdist for its tests: {exc}")
    assert suite.compare(root, suite.DEFAULT_TESTS) == []
