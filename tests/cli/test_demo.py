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
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=900,
    )
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    assert "refused obqa_edl vs csqa_edl" in proc.stderr and "{5: " in proc.stderr
    assert out.count("-> exit status 2") == 2 and out.count("-> exit status 0") == 3  # ood refusal, report refusal
    assert "csqa4_edl" in out and "matched" in out
    # The demo says which scores the real fifth option moved for this model, and why, in one sentence.
    (story,) = [line for line in out.splitlines() if line.startswith("what moved, and why: ")]
    assert "(csqa_edl, K = 5, against csqa4_edl, the same source at K = 4) moved AUROC" in story
    assert "max_prob" in story and "reciprocal_vacuity" in story and story.count(". ") == 0
    assert "ILLUSTRATIVE ONLY" in out and "meta-llama/Meta-Llama-3-8B" in out
    demo = tmp_path / "demo"
    for name in (
        "ksweep.png",
        "ksweep.svg",
        "ksweep.json",
        "ood_matched.json",
        "ood_mismatched.json",
        "report/report.md",
        "report/appendix.md",
        "report/report.json",
    ):
        assert (demo / name).is_file(), name
    assert list((demo / "eval-edl").rglob("records_obqa_edl_*.parquet"))
    assert (demo / "adapter-edl" / "evidential_config.json").is_file()
    report = (demo / "report" / "report.md").read_text()
    assert "csqa_edl" in report and "refused" in report.lower()
    controls = report.split("## K-matched controls side by side")[1].split("\n## ")[0]
    assert "| csqa_edl | csqa_k4_edl |" in controls and "| arc_c_edl | arc_c_k4_edl |" in controls
    assert "not in these records" not in controls  # the demo evaluates every control it reports
    # The field's audits on the bundled samples: OpenOOD's groups (csqa_edl refused, named in near's mean),
    # conformal sets and temperature scaling, each with what it was calibrated on.
    groups = report.split("## OOD detection by group (OpenOOD layout)")[1].split("\n## ")[0]
    assert "**far (mean of 1)**" in groups and "csqa_edl refused (K mismatch)" in groups
    assert "csqa_edl (near)" in groups and "ood_groups_obqa_edl.png" in groups
    assert "Thresholds: lac qhat" in report and "temperature: T = " in report
    _check_demo_numbers(demo)
    # What a new user reads: a summary first, marked illustrative; no third-party noise; refusals once.
    assert report.index("Illustrative only") < report.index("## Summary") < report.index("## Class counts")
    assert "-0.000" not in report and "-0.000" not in out
    for noise in ("fatal: not a git repository", "is_gradient_checkpointing", "FutureWarning", "Traceback"):
        assert noise not in out + proc.stderr, noise
    assert proc.stderr.count("refused obqa_edl vs csqa_edl") == 2  # the ood command, then the report: one line each
    assert proc.stderr.count("Proposition 1") == 1
    assert "'mse'" in out and "'kl_weight'" in out and "logged `loss` can rise" in out  # the EDL loss, explained
    assert "Running loglikelihood requests" in proc.stderr  # the harness's own output, streamed
    assert f"edl: adapter in {demo / 'adapter-edl'}" in out
    assert not [line for line in out.splitlines() if line.strip() == str(demo / "adapter-edl")]
    # the README's main job may be run again in the same folder
    again = subprocess.run(
        [sys.executable, "-m", "lm_eval_evidential", "demo", "--fast", "--out", str(demo)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=900,
    )
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]


def _check_demo_numbers(demo):
    """The demo's files hold the audit of its own records, recomputed here independently."""
    import json

    import numpy as np
    from sklearn.metrics import roc_auc_score

    from lm_eval_evidential import load_run

    run = load_run(demo / "eval-edl", ["obqa_edl", "csqa4_edl", "mmlu_math_edl", "csqa_edl"])
    ident = run["obqa_edl"]
    rows = json.loads((demo / "ood_matched.json").read_text())
    assert {r["ood_task"] for r in rows} == {"csqa4_edl", "mmlu_math_edl"}
    for row in rows:
        assert row["matched"] is True and row["k_id"] == row["k_ood"] == 4
        if row["score"] == "reciprocal_vacuity":  # S / (lambda K), ID = 1: scikit-learn as the oracle
            ood = run[row["ood_task"]]
            y = np.r_[np.ones(len(ident)), np.zeros(len(ood))]
            s = np.r_[ident.strength / (ident.prior_weight * ident.k), ood.strength / (ood.prior_weight * ood.k)]
            assert abs(row["auroc"] - roc_auc_score(y, s)) <= 1e-12
    sweep = json.loads((demo / "ksweep.json").read_text())["rows"]
    vac = [r for r in sweep if r["score"] == "reciprocal_vacuity"]
    assert all(r["delta_auroc"] == 0.0 for r in vac if r["condition"] == "matched")  # McNamara (2026), Table 1
    assert all(r["delta_auroc"] >= 0.0 for r in vac if r["condition"] == "ood_only")
    report = json.loads((demo / "report" / "report.json").read_text())
    refused = {r["ood_task"]: r["error"] for r in report["ood"]["assert"]["refused"]}
    k5 = len(run["csqa_edl"])
    assert f"csqa_edl {{5: {k5}}}" in refused["csqa_edl"]
