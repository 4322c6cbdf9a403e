"""``lm-eval-evidential compare``: methods side by side, each number against an independent computation.

Oracles: accuracy, NLL and Brier by numpy from the members' logits (the predictive: the mean softmax)
or the Dirichlet alpha; ECE = torchmetrics' MulticlassCalibrationError (l1, 15 bins); AUROC = scikit-learn's;
the accuracy interval within 0.03 of the normal approximation p ± 1.96 sqrt(p(1-p)/n). Protocols: a
K-matched pair is scored, a K-mismatched one is refused (noted with the remedy) unless --k-mismatched,
which marks it; a mixed-K OOD task is scored on its ID-K questions with the dropped count said.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy.special import softmax
from sklearn.metrics import roc_auc_score
from torchmetrics.functional.classification import multiclass_calibration_error

from lm_eval_evidential.cli import main
from lm_eval_evidential.records import Records, make_records, records_path, write_records

DATE = "2026-11-27T12-00-00.000001"


def _write(root, task, ks, seed, shift, kind):
    """Records of ``task`` (K of each question from ``ks``) for ``kind`` "ens" (3 softmax members) or "edl"."""
    rng = np.random.default_rng(seed)
    n = len(ks)
    gold = [int(rng.integers(k)) for k in ks]
    labels = [list("ABCDE"[:k]) for k in ks]
    if kind == "ens":
        members = [rng.normal(shift, 1.0, size=(3, k)) for k in ks]
        for m, g in zip(members, gold):
            m[:, g] += shift
        rows = make_records(
            task=task,
            doc_ids=range(n),
            labels=labels,
            gold=gold,
            logits=None,
            alpha=None,
            optional={"member_logits": members},
            members_method="softmax",
        )
        meta = {"method": "softmax", "members": {"source": "ensemble", "names": ["member_0", "member_1", "member_2"]}}
        probs = [softmax(m, axis=1).mean(0) for m in members]
    else:
        logits = [rng.normal(0, 1.0, size=k) for k in ks]
        for z, g in zip(logits, gold):
            z[g] += 2 * shift
        alpha = [np.logaddexp(0, z) + 1.0 for z in logits]
        rows = make_records(task=task, doc_ids=range(n), labels=labels, gold=gold, logits=logits, alpha=alpha)
        meta = {"method": "edl"}
        probs = [a / a.sum() for a in alpha]
    meta.update({"prior_weight": 1.0, "pretrained": "synthetic-llm", "peft": kind})
    write_records(records_path(root / "synthetic-llm", task, DATE), Records.from_rows(rows, task=task, meta=meta))
    return probs, np.asarray(gold)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = {}
    for kind in ("ens", "edl"):
        root = tmp_path_factory.mktemp(kind)
        truth = {"id4": _write(root, "id4", [4] * 150, 1, 1.0, kind)}
        truth["ood4"] = _write(root, "ood4", [4] * 100, 2, 0.0, kind)
        truth["ood5"] = _write(root, "ood5", [5] * 80, 3, 0.0, kind)
        truth["mixed"] = _write(root, "mixed", [4, 5, 3] * 30, 4, 0.0, kind)
        out[kind] = (root, truth)
    return out


def _compare(runs, tmp_path, *extra, status=2):
    """``compare --json``'s calibration and OOD rows; ``status`` 2 where a pair is refused (ood5 without
    --k-mismatched), 0 where none is."""
    path = tmp_path / "rows.json"
    argv = ["compare", str(runs["ens"][0]), str(runs["edl"][0]), "--names", "Ensemble,EDL", "--id", "id4"]
    assert main([*argv, "--ood", "ood4,ood5,mixed", "--n-boot", "300", "--json", str(path), *extra]) == status
    rows = json.loads(path.read_text())
    return [r for r in rows if r["table"] == "calibration"], [r for r in rows if r["table"] == "ood"]


def test_calibration_columns_equal_independent_computations(runs, tmp_path, capsys):
    calibration, _ = _compare(runs, tmp_path)
    assert [r["method"] for r in calibration] == ["Ensemble", "EDL"]
    assert calibration[0]["kind"] == "ensemble ×3 (softmax)" and calibration[1]["kind"] == "edl"
    for row, kind in zip(calibration, ("ens", "edl")):
        probs, gold = runs[kind][1]["id4"]
        p = np.stack(probs)
        correct = p.argmax(1) == gold
        assert row["acc"] == pytest.approx(correct.mean(), abs=1e-12)
        assert row["nll"] == pytest.approx(-np.log(p[np.arange(len(gold)), gold]).mean(), rel=1e-9)
        assert row["brier"] == pytest.approx(((p - np.eye(4)[gold]) ** 2).sum(1).mean(), rel=1e-9)
        want_ece = multiclass_calibration_error(torch.tensor(p), torch.tensor(gold), num_classes=4, n_bins=15)
        assert row["ece"] == pytest.approx(float(want_ece), abs=1e-6)
        half = 1.96 * np.sqrt(row["acc"] * (1 - row["acc"]) / len(gold))
        assert row["acc_ci"][0] == pytest.approx(row["acc"] - half, abs=0.03)
        assert row["acc_ci"][1] == pytest.approx(row["acc"] + half, abs=0.03)
        for name in ("ece", "nll", "brier"):
            assert row[f"{name}_ci"][0] <= row[name] <= row[f"{name}_ci"][1]
    out = capsys.readouterr().out
    assert "accuracy and calibration" in out and "Ensemble" in out


def test_ood_rows_k_matched_by_default_and_mismatched_only_on_request(runs, tmp_path, capsys):
    _, ood = _compare(runs, tmp_path)
    out = capsys.readouterr().out
    protocols = {(r["method"], r["ood_task"], r["protocol"].split(" (")[0]) for r in ood}
    assert ("Ensemble", "ood4", "K-matched") in protocols
    assert ("EDL", "mixed", "K-matched subset") in protocols
    assert not any(r["ood_task"] == "ood5" for r in ood)  # refused, noted with the remedy
    assert "note: Ensemble / ood5: K_ID = [4] vs K_OOD = [5]: not compared" in out and "--k-mismatched" in out
    subset = next(r for r in ood if r["ood_task"] == "mixed")
    assert "60 OOD questions of another K dropped" in subset["protocol"] and subset["n_ood"] == 30
    scores = {(r["method"], r["score"]) for r in ood if r["ood_task"] == "ood4"}
    assert ("Ensemble", "neg_mutual_information") in scores and ("EDL", "reciprocal_vacuity") in scores
    assert ("Ensemble", "reciprocal_vacuity") not in scores  # softmax members: no Dirichlet
    for r in ood:
        if r["ood_task"] != "ood4" or r["score"] != "max_prob":
            continue
        kind = "ens" if r["method"] == "Ensemble" else "edl"
        mp = [np.stack(runs[kind][1][t][0]).max(1) for t in ("id4", "ood4")]
        y = np.r_[np.ones(len(mp[0])), np.zeros(len(mp[1]))]
        assert r["auroc"] == pytest.approx(roc_auc_score(y, np.r_[mp[0], mp[1]]), abs=1e-12)
        assert r["auroc_ci"][0] <= r["auroc"] <= r["auroc_ci"][1]

    _, forced = _compare(runs, tmp_path, "--k-mismatched", "--scores", "max_prob", status=0)
    marked = [r for r in forced if r["ood_task"] == "ood5"]
    assert marked and all(r["protocol"].startswith("K-MISMATCHED") and r["matched"] is False for r in marked)
    assert {r["protocol"].split(" (")[0] for r in forced if r["ood_task"] == "mixed"} == {
        "K-matched subset",
        "K-MISMATCHED",
    }


def test_a_refused_pair_exits_2_after_the_accepted_ones(runs, tmp_path, capsys):
    """A K-mismatched pair is a refusal (exit 2, as ood and report) with every accepted row still written;
    without one, exit 0."""
    base = [
        "compare",
        str(runs["ens"][0]),
        str(runs["edl"][0]),
        "--names",
        "Ensemble,EDL",
        "--id",
        "id4",
        "--n-boot",
        "0",
    ]
    assert main([*base, "--ood", "ood4,ood5"]) == 2
    out = capsys.readouterr().out
    assert "note: EDL / ood5: K_ID = [4] vs K_OOD = [5]" in out and "ood4" in out.split("## OOD detection")[1]
    assert main([*base, "--ood", "ood4"]) == 0


def test_a_folder_given_as_dot_is_named_by_its_folder(runs, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(runs["ens"][0])
    path = tmp_path / "rows.json"
    argv = ["compare", ".", str(runs["edl"][0]), "--id", "id4", "--ood", "ood4", "--n-boot", "0", "--json", str(path)]
    assert main(argv) == 0
    methods = [r["method"] for r in json.loads(path.read_text()) if r["table"] == "calibration"]
    assert methods == [runs["ens"][0].name, runs["edl"][0].name] and all(methods)


def test_refusals(runs, tmp_path, capsys):
    base = ["compare", str(runs["ens"][0]), str(runs["edl"][0]), "--id", "id4", "--ood", "ood4"]
    assert main([*base, "--names", "A"]) == 1
    assert "--names gives 1 distinct name(s) for 2 run folders" in capsys.readouterr().err
    same = ["compare", str(runs["ens"][0]), str(runs["ens"][0]), "--id", "id4", "--ood", "ood4"]
    assert main(same) == 1
    assert "the folders' names repeat" in capsys.readouterr().err
