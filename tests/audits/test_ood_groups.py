"""``ood --near/--far``: the OpenOOD layout, against a hand computation from the records and OpenOOD's formulas.

OpenOOD's FPR@95 is ported from Jingkang50/OpenOOD@3c35632ee91b54b09d1f085d04f94744cece7d0b
``openood/evaluators/metrics.py`` (``auc_and_fpr_recall``: OOD positive, ``roc_curve(ood_indicator,
-conf)``, the FPR at the first TPR >= 0.95), the mean rows from ``evaluation_api/evaluator.py``
(``np.mean`` over a group's datasets).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics

from lm_eval_evidential.audits.ood_groups import GROUP_ROW_KEYS
from lm_eval_evidential.metrics.detection import fpr_at_95_tpr
from lm_eval_evidential.metrics.scores import compute_score
from lm_eval_evidential.records import Records, load_records, make_record, records_path, write_records
from tests.audits.test_quality import cli as _cli  # in-process: (status, stdout, stderr)

DATE = "2026-11-21T20-15-03.123456"


def _openood_fpr(conf, ood_indicator, tpr_th=0.95, drop_intermediate=True):
    fpr_list, tpr_list, _ = metrics.roc_curve(ood_indicator, -conf, drop_intermediate=drop_intermediate)
    return fpr_list[np.argmax(tpr_list >= tpr_th)]


def _records(task, ks, shift, seed):
    rng = np.random.default_rng(seed)
    rows = []
    for i, k in enumerate(ks):
        z = rng.normal(shift, 1.5, size=int(k))
        alpha = np.logaddexp(0.0, z) + 1.0
        gold = int(np.argmax(alpha)) if rng.random() < 0.6 else int(rng.integers(k))
        rows.append(make_record(task=task, doc_id=i, labels=list("ABCDE"[:k]), gold=gold, logits=z, alpha=alpha))
    return Records.from_rows(rows, task=task, meta={"method": "edl", "prior_weight": 1.0, "pretrained": "synthetic"})


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("harness_out")
    for task, ks, shift, seed in (
        ("id4", [4] * 200, 1.0, 1),
        ("near_a", [4] * 120, 0.5, 2),
        ("near_b", [4] * 90, 0.3, 3),
        ("far_a", [4] * 100, -0.5, 4),
        ("far5", [5] * 80, -0.5, 5),
    ):
        write_records(records_path(root / "synthetic", task, DATE), _records(task, ks, shift, seed))
    return root


def _hand(out_dir, ood_task, score, fpr95):
    """One set's numbers straight from the records with scikit-learn and OpenOOD's formula."""
    idr, ood = load_records(out_dir, "id4"), load_records(out_dir, ood_task)
    conf = np.concatenate([compute_score(score, probs=r.probs, k=r.k, alpha=r.alpha) for r in (idr, ood)])
    is_id = np.r_[np.ones(len(idr)), np.zeros(len(ood))]
    fpr = _openood_fpr(conf, 1 - is_id) if fpr95 == "openood" else fpr_at_95_tpr(is_id, conf)
    return {
        "id_acc": np.mean(idr.correct),
        "fpr95": fpr,
        "auroc": metrics.roc_auc_score(is_id, conf),
        "aupr_in": metrics.average_precision_score(is_id, conf),
        "aupr_out": metrics.average_precision_score(1 - is_id, -conf),
    }


@pytest.mark.parametrize("fpr95", ["openood", "odin"])
def test_the_table_equals_a_hand_computation_from_the_records(out_dir, tmp_path, capsys, fpr95):
    path = tmp_path / "g.json"
    argv = ["ood", out_dir, "--id", "id4", "--near", "near_a,near_b", "--far", "far_a", "--scores", "max_prob"]
    rc, out, err = _cli([*argv, "--fpr95", fpr95, "--percent", "--json", path], capsys)
    assert rc == 0, err
    rows = json.loads(path.read_text())
    assert [(r["group"], r["set"]) for r in rows] == [
        ("near", "near_a"),
        ("near", "near_b"),
        ("near", "near"),
        ("far", "far_a"),
        ("far", "far"),
    ]
    for row in rows:
        assert tuple(row) == GROUP_ROW_KEYS and row["scale"] == 100 and row["fpr95_positive"] == fpr95
    hand = {t: _hand(out_dir, t, "max_prob", fpr95) for t in ("near_a", "near_b", "far_a")}
    for row in rows:
        members = [row["set"]] if row["set"] in hand else [t for t in hand if t.startswith(row["group"])]
        for key in ("id_acc", "fpr95", "auroc", "aupr_in", "aupr_out"):
            want = 100 * np.mean([hand[t][key] for t in members])  # a mean row: OpenOOD's np.mean over its sets
            assert row[key] == pytest.approx(want, abs=1e-9), (row["set"], key)
    positive = "OOD positive" if fpr95 == "openood" else "ID positive"
    assert f"FPR@95 ({fpr95}): {positive}" in out
    # The two directions really differ on these records (OpenOOD issue #308).
    a = hand["near_a"]["fpr95"]
    other = _hand(out_dir, "near_a", "max_prob", "odin" if fpr95 == "openood" else "openood")["fpr95"]
    assert a != pytest.approx(other, abs=1e-3)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_id=st.integers(2, 80), n_ood=st.integers(2, 80), ties=st.booleans())
def test_openood_direction_is_fpr_at_95_tpr_with_the_classes_swapped(seed, n_id, n_ood, ties):
    rng = np.random.default_rng(seed)
    conf = rng.integers(0, 5, n_id + n_ood).astype(float) if ties else rng.normal(size=n_id + n_ood)
    is_id = np.r_[np.ones(n_id, dtype=bool), np.zeros(n_ood, dtype=bool)]
    ours = fpr_at_95_tpr(~is_id, -conf)
    assert ours == _openood_fpr(conf, (~is_id).astype(int), drop_intermediate=False)
    if not ties:  # sklearn's drop_intermediate only merges collinear points: none matter without ties
        assert ours == _openood_fpr(conf, (~is_id).astype(int))


def test_a_group_with_a_refused_set_says_so_and_exits_2(out_dir, tmp_path, capsys):
    path = tmp_path / "g.json"
    argv = ["ood", out_dir, "--id", "id4", "--near", "near_a", "--far", "far_a,far5", "--scores", "max_prob"]
    rc, out, err = _cli([*argv, "--json", path], capsys)
    assert rc == 2 and "refused id4 vs far5" in err and "Traceback" not in err
    far = next(r for r in json.loads(path.read_text()) if r["set"] == "far")
    assert far["n_sets"] == 1 and "mean over 1 of the 2 far sets: far5 refused (K mismatch)" in far["reason"]
    assert "note: max_prob / far: mean over 1 of the 2 far sets" in out
    # --k-policy report: far5 gets its own row, marked, and stays out of the mean
    rc, out, err = _cli([*argv, "--k-policy", "report", "--json", path], capsys)
    rows = json.loads(path.read_text())
    assert rc == 0 and [r["set"] for r in rows] == ["near_a", "near", "far_a", "far5", "far"]
    assert rows[3]["matched"] is False and rows[4]["n_sets"] == 1
    assert rows[4]["auroc"] == rows[2]["auroc"] and "far5 compared across K (matched: false)" in rows[4]["reason"]


def test_bad_group_arguments_are_one_line(out_dir, capsys):
    for argv, message in (
        (["--ood", "near_a", "--near", "near_b"], "--ood and --near/--far are two layouts"),
        ([], "give the OOD task(s): --ood T1,T2, or the OpenOOD layout"),
        (["--near", "near_a", "--far", "near_a"], "near_a named in both --near and --far"),
        (["--near", "id4"], "--id and --near both name 'id4'"),
        (["--near", "near_a", "--force-k", "5"], "--force-k applies to the --ood table only"),
    ):
        rc, _, err = _cli(["ood", out_dir, "--id", "id4", *argv], capsys)
        assert rc == 1 and message in err and "Traceback" not in err, (argv, err)
