"""benchmarks/gpu_check.py, the GPU check prepared for an accelerator, runs end to end on the CPU at a small shape."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_check_runs_every_way_on_the_cpu_at_a_small_shape(tmp_path):
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    cmd = [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--shape", "small", "--device", "cpu"]
    cmd += ["--dtype", "float32", "--questions", "4", "--shots", "2", "--batch-size", "4", "--repeats", "1"]
    proc = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    measured = {(r["way"], r["shots"]) for r in rows}
    ways = {("bare", 0), ("bare", 2), ("evidential", 0), ("evidential", 2), ("evidential cached", 2), ("hf", 2)}
    assert measured == ways
    assert all(r["questions"] == 4 and r["q_per_s"] > 0 for r in rows)
    ratios = dict(line.split(": ") for line in proc.stdout.splitlines() if line and line[0] not in "#{")
    assert len(ratios) == 6 and all(float(v) > 0 for v in ratios.values()), proc.stdout
    assert proc.stdout.startswith("# device cpu, shape small")
