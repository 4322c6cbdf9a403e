"""The report's side-by-side table of K-matched controls (restrict, csqa4_edl, *_k4_edl), on synthetic records.

Oracles: n kept is counted from the records' K, AUROC is scikit-learn's on the score computed
from the records, and the refused / not-evaluated controls are listed, never compared.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from lm_eval_evidential.metrics.scores import compute_score
from lm_eval_evidential.records import Records, make_record
from lm_eval_evidential.report import build_report, control_rows

LETTERS = "ABCDE"


def _records(task, ks, shift, seed, control=None) -> Records:
    rng = np.random.default_rng(seed)
    rows = []
    for i, k in enumerate(ks):
        z = rng.normal(shift, 1.5, size=int(k))
        alpha = np.logaddexp(0.0, z) + 1.0
        rows.append(
            make_record(task=task, doc_id=i, labels=list(LETTERS[:k]), gold=int(rng.integers(k)), logits=z, alpha=alpha)
        )
    meta = {"method": "edl", "prior_weight": 1.0, "pretrained": "synthetic-llm"}
    if control:
        meta["control"] = control
    return Records.from_rows(rows, task=task, meta=meta)


def _summary(of, n_questions, excluded):
    return {
        "of": of,
        "k_from": "obqa_edl",
        "method": "distractor_removal",
        "target_k": 4,
        "seed": 0,
        "n_questions": n_questions,
        "n_kept": n_questions - sum(excluded.values()),
        "n_excluded": sum(excluded.values()),
        "n_reduced": 0,
        "excluded": excluded,
        "rule": "…",
    }


@pytest.fixture(scope="module")
def records():
    arc_k = np.random.default_rng(5).choice([3, 4, 5], size=90, p=[0.2, 0.6, 0.2])
    n3 = int((arc_k == 3).sum())
    return {
        "obqa_edl": _records("obqa_edl", [4] * 120, 1.0, 1),
        "csqa_edl": _records("csqa_edl", [5] * 100, 0.0, 2),
        "csqa4_edl": _records("csqa4_edl", [4] * 80, 0.0, 3),
        "csqa_k4_edl": _records("csqa_k4_edl", [4] * 100, 0.0, 4, _summary("csqa_edl", 100, {})),
        "arc_c_edl": _records("arc_c_edl", arc_k, 0.0, 5),
        "arc_c_k4_edl": _records(
            "arc_c_k4_edl",
            [4] * (90 - n3),
            0.2,
            6,
            _summary("arc_c_edl", 90, {"K=3 < 4: fewer options than the target K (never padded)": n3}),
        ),
    }


def _auroc(id_rec, ood_rec, keep=None):
    keep = np.ones(len(ood_rec), bool) if keep is None else keep
    s = [
        compute_score("reciprocal_vacuity", probs=r.probs, k=r.k, alpha=r.alpha, prior_weight=1.0)
        for r in (id_rec, ood_rec)
    ]
    y = np.r_[np.ones(len(id_rec)), np.zeros(int(keep.sum()))]
    return roc_auc_score(y, np.r_[s[0], s[1][keep]])


def test_each_control_is_shown_with_what_it_keeps_and_its_auroc(records):
    ood = [records[t] for t in ("csqa_edl", "csqa4_edl", "csqa_k4_edl", "arc_c_edl", "arc_c_k4_edl")]
    rows = {
        (r["source"], r["control"]): r for r in control_rows(records["obqa_edl"], ood, scores=["reciprocal_vacuity"])
    }
    assert list(dict.fromkeys(s for s, _ in rows)) == ["csqa_edl", "arc_c_edl"]
    arc = records["arc_c_edl"]
    n4 = int((arc.k == 4).sum())

    restrict = rows["arc_c_edl", "restrict"]
    assert (restrict["n_kept"], restrict["n_source"], restrict["n_excluded"]) == (n4, 90, 90 - n4)
    assert restrict["auroc"]["reciprocal_vacuity"]["auroc"] == pytest.approx(
        _auroc(records["obqa_edl"], arc, arc.k == 4), abs=1e-12
    )
    k4 = rows["arc_c_edl", "arc_c_k4_edl"]
    assert (k4["n_kept"], k4["n_source"], k4["n_excluded"], k4["matched"]) == (
        len(records["arc_c_k4_edl"]),
        90,
        int((arc.k == 3).sum()),
        True,
    )
    assert k4["n_kept"] > restrict["n_kept"]  # removal keeps the 5-option questions that restrict drops
    assert list(k4["excluded"].values()) == [int((arc.k == 3).sum())]
    auc, (lo, hi) = k4["auroc"]["reciprocal_vacuity"]["auroc"], k4["auroc"]["reciprocal_vacuity"]["auroc_ci"]
    assert auc == pytest.approx(_auroc(records["obqa_edl"], records["arc_c_k4_edl"]), abs=1e-12) and lo <= auc <= hi

    refused = rows["csqa_edl", "restrict"]
    assert refused["n_kept"] == 0 and refused["n_excluded"] == 100 and "left no csqa_edl examples" in refused["error"]
    assert not refused["auroc"]
    assert (rows["csqa_edl", "csqa_k4_edl"]["n_kept"], rows["csqa_edl", "csqa_k4_edl"]["n_excluded"]) == (100, 0)
    e = rows["csqa_edl", "csqa4_edl"]
    assert (e["n_kept"], e["n_source"], e["n_excluded"]) == (80, 100, 20) and "answered E" in e["description"]


def test_controls_missing_from_the_records_are_named_not_compared(records):
    rows = control_rows(records["obqa_edl"], [records["arc_c_edl"]])
    assert [(r["control"], r["evaluated"]) for r in rows] == [("restrict", True), ("arc_c_k4_edl", False)]
    assert rows[1]["auroc"] == {} and rows[1]["n_kept"] is None


def test_the_report_has_the_side_by_side_section(records, tmp_path):
    ood = [records[t] for t in ("csqa_edl", "csqa4_edl", "csqa_k4_edl", "arc_c_edl")]
    report = build_report(
        records["obqa_edl"],
        ood,
        tmp_path,
        k_policy=["assert", "restrict"],
        n_boot=0,
        max_extra=1,
        scores=["reciprocal_vacuity", "max_prob"],
    )
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "## K-matched controls side by side" in md
    section = md.split("## K-matched controls side by side")[1].split("\n## ")[0]
    assert "| csqa_edl | csqa_k4_edl |" in section and "| csqa_edl | csqa4_edl |" in section
    assert "| 100 / 100 |" in section and "| 80 / 100 |" in section and "refused" in section
    assert "not in these records: evaluate arc_c_k4_edl" in section
    assert json.loads((tmp_path / "report.json").read_text())["controls"] == json.loads(json.dumps(report["controls"]))
    refusal = next(r for r in report["ood"]["assert"]["refused"] if r["ood_task"] == "csqa_edl")
    assert "csqa4_edl or csqa_k4_edl" in refusal["suggestion"]
    arc = next(r for r in report["ood"]["assert"]["refused"] if r["ood_task"] == "arc_c_edl")
    assert "arc_c_k4_edl" in arc["suggestion"] and "csqa4" not in arc["suggestion"]
