"""What an audit command costs before it says anything (issue 36 class 7: a long audit must not look hung).

Building the parser imports every subcommand's module for its option names and defaults; none of them may pull
in scipy, matplotlib, pyarrow, scikit-learn, torch or lm_eval, which take seconds on a loaded machine. ``report``
says which records it reads before it imports its own heavy modules.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from lm_eval_evidential.records import Records, make_record, records_path, write_records

HEAVY = ("scipy", "matplotlib", "pyarrow", "sklearn", "torch", "lm_eval", "transformers", "pandas")


def test_building_the_parser_imports_no_heavy_library():
    code = (
        "import sys; from lm_eval_evidential.cli.main import build_parser; build_parser(); "
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout


def _records(task: str, seed: int) -> Records:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(20):
        z = rng.normal(0.0, 2.0, size=4)
        alpha = np.logaddexp(0.0, z) + 1.0
        rows.append(make_record(task=task, doc_id=i, labels=list("ABCD"), gold=i % 4, logits=z, alpha=alpha))
    return Records.from_rows(rows, task=task, meta={"method": "edl", "prior_weight": 1.0, "pretrained": "synthetic"})


def test_report_says_what_it_reads_before_it_imports_scipy(tmp_path):
    """``-X importtime`` writes each import to stderr as it happens, in order with the command's own lines."""
    for task, seed in (("id4", 0), ("ood4", 1)):
        write_records(records_path(tmp_path / "run", task, "2026-11-21T20-15-03.123456"), _records(task, seed))
    argv = [sys.executable, "-X", "importtime", "-m", "lm_eval_evidential", "report", str(tmp_path)]
    argv += ["--id", "id4", "--ood", "ood4", "--out", str(tmp_path / "report")]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen = []
    try:
        for line in proc.stderr:
            if line.startswith("report: reading the records of id4, ood4"):
                break
            seen.append(line)
        else:
            raise AssertionError("report never said which records it reads:\n" + "".join(seen[-20:]))
    finally:
        proc.kill()
        proc.wait()
    imported = {line.split("|")[-1].strip().split(".")[0] for line in seen if line.startswith("import time:")}
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))
