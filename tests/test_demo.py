"""The README's main job, end to end, in its fast setting."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_demo_runs_end_to_end(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env.pop("EVIDENTIAL_DATA_DIR", None)  # the demo must point the tasks at its bundled samples itself
    proc = subprocess.run(
        [sys.executable, "-m", "lm_eval_evidential", "demo", "--fast", "--out", str(tmp_path / "demo")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900,
    )  # fmt: skip
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    assert "refused obqa_edl vs csqa_edl" in proc.stderr and "{5: " in proc.stderr
    assert "-> exit status 2" in out
    assert "csqa4_edl" in out and "matched" in out
    assert "ILLUSTRATIVE ONLY" in out and "meta-llama/Meta-Llama-3-8B" in out
    demo = tmp_path / "demo"
    for name in ("ksweep.png", "ksweep.svg", "ksweep.json", "ood_matched.json", "report/report.md", "report/report.json"):
        assert (demo / name).is_file(), name
    assert list((demo / "eval-edl").rglob("records_obqa_edl_*.parquet"))
    assert (demo / "adapter-edl" / "evidential_config.json").is_file()
    report = (demo / "report" / "report.md").read_text()
    assert "csqa_edl" in report and "refused" in report.lower()
    controls = report.split("## K-matched controls side by side")[1].split("\n## ")[0]
    assert "| csqa_edl | csqa_k4_edl |" in controls and "| arc_c_edl | arc_c_k4_edl |" in controls
    assert "not in these records" not in controls  # the demo evaluates every control it reports
    # the README's main job may be run again in the same folder
    again = subprocess.run(
        [sys.executable, "-m", "lm_eval_evidential", "demo", "--fast", "--out", str(demo)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900,
    )  # fmt: skip
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
