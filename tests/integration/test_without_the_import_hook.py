"""Without the import hook (``python -S`` skips the ``.pth`` file; ``LM_EVAL_EVIDENTIAL_DISABLE_HOOK=1`` turns it
off), an ``EvidentialLM`` a user builds in Python still hooks lm_eval before its weights load
(``integration.hooks.check_harness``, which the backend calls): ``simple_evaluate`` with it gives the records."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

CODE = """
import json, sys
from lm_eval_evidential.harness.model import EvidentialLM
from lm_eval_evidential.integration.policy import RUN_POLICY
hook_installed = any(type(f).__name__ == "_Finder" for f in sys.meta_path)
lm = EvidentialLM(pretrained={model!r}, device="cpu")
import lm_eval
results = lm_eval.simple_evaluate(model=lm, tasks=["obqa_edl"], limit=3, bootstrap_iters=0)
records = results.records["obqa_edl"]
print(json.dumps({{
    "hook_installed": hook_installed,
    "hooked": sorted(RUN_POLICY.hooked),
    "n": len(records),
    "k": sorted(set(int(k) for k in records.k)),
    "acc_matches": abs(results["results"]["obqa_edl"]["acc,none"] - float(records.correct.mean())) < 1e-12,
}}))
"""


@pytest.mark.parametrize("how", ["python -S", "LM_EVAL_EVIDENTIAL_DISABLE_HOOK=1"])
def test_a_model_built_in_python_hooks_lm_eval_without_the_import_hook(tiny_model, mirror, how):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "EVIDENTIAL_DATA_DIR": str(mirror)}
    argv = [sys.executable]
    if how == "python -S":
        argv.append("-S")  # no site: no .pth file runs, so the package and lm_eval come from PYTHONPATH
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    else:
        env["LM_EVAL_EVIDENTIAL_DISABLE_HOOK"] = "1"
    proc = subprocess.run(
        [*argv, "-c", CODE.format(model=str(tiny_model))], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["hook_installed"] is False  # what follows is the backend's own check, not the import hook
    assert {"lm_eval.evaluator", "lm_eval.tasks.manager", "lm_eval.models"} <= set(seen["hooked"])
    assert seen["n"] == 3 and seen["k"] == [4] and seen["acc_matches"]
