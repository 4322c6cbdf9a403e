"""``lm-eval-evidential permutations`` and audits/permutations.py on synthetic permuted runs.

Synthetic records written as the harness writes a permuted run (one record per (question, cyclic
order), ``doc_id`` the question's, the gold following its option): each letter's logit is the worth of
the option shown there, plus a planted prior on " A" where asked, plus noise. Oracles: scikit-learn's
AUROC/average precision per order and on the order-averaged score, numpy for the spread, and the
planted prior itself (the audit must find it: CircularEval below plain accuracy, the letter prior not
uniform, PriDe's debiased accuracy higher).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

from lm_eval_evidential.audits.permutations import (
    PERMUTATION_KEYS,
    PERMUTATION_OOD_KEYS,
    SCORE_KEYS,
    permutation_ood_rows,
    permutation_summary,
)
from lm_eval_evidential.cli import main
from lm_eval_evidential.errors import OrderMismatchError, PermutedRecordsError
from lm_eval_evidential.metrics.order_effects import order_slots
from lm_eval_evidential.metrics.scores import compute_score
from lm_eval_evidential.records import Records, load_records, make_records, records_path, write_records

DATE = "2026-11-21T20-15-03.123456"
OLDER = "2026-11-20T10-00-00.000001"
META = {"method": "edl", "prior_weight": 1.0, "pretrained": "synthetic-llm"}


def permuted_records(task, n=60, k=4, *, bias=0.0, quality=2.0, shift=0.0, seed=0, permuted=True) -> Records:
    rng = np.random.default_rng(seed)
    doc_ids, labels, gold, logits, orders = [], [], [], [], []
    for q in range(n):
        g = int(rng.integers(k))
        worth = rng.normal(shift, 1.0, size=k)
        worth[g] += quality
        for s in range(k if permuted else 1):
            order = [(j + s) % k for j in range(k)]
            prior = np.zeros(k)
            prior[0] = bias
            doc_ids.append(q)
            labels.append(list("ABCDE"[:k]))
            gold.append(order.index(g))
            logits.append(worth[order] + prior + rng.normal(0, 0.3, size=k))
            orders.append(order)
    rows = make_records(
        task=task,
        doc_ids=doc_ids,
        labels=labels,
        gold=gold,
        logits=logits,
        alpha=[np.logaddexp(0, z) + 1.0 for z in logits],
        optional={"order": orders} if permuted else None,
    )
    meta = {**META, **({"permutations": {"spec": "cyclic", "seed": 0}} if permuted else {})}
    return Records.from_rows(rows, task=task, meta=meta)


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("permuted")
    folder = root / "synthetic-llm"
    for task, kwargs in {
        "planted": dict(bias=3.0, seed=1),
        "fair": dict(bias=0.0, seed=2),
        "ood4": dict(quality=0.5, shift=-0.5, seed=3),
        "ood5": dict(k=5, quality=0.5, seed=4),
        "plain_ood": dict(quality=0.5, seed=5, permuted=False),
    }.items():
        write_records(records_path(folder, task, DATE), permuted_records(task, **kwargs))
    return root


def test_the_audit_finds_a_planted_letter_prior(out_dir):
    planted = permutation_summary(load_records(out_dir, "planted"), pride_fraction=0.2)
    fair = permutation_summary(load_records(out_dir, "fair"), pride_fraction=0.2)
    assert tuple(planted) == PERMUTATION_KEYS
    assert planted["circular_accuracy"] < planted["accuracy"]
    assert planted["letter_pick_rate"]["A"] > 0.5 and planted["letter_uniformity"]["p_value"] < 1e-6
    assert planted["pride"]["by_k"][4]["prior"][0] == max(planted["pride"]["by_k"][4]["prior"])
    assert planted["pride"]["debiased_accuracy"] > planted["pride"]["accuracy"]
    assert planted["prediction_follows"]["letter"] > fair["prediction_follows"]["letter"]
    assert planted["letter_mean_evidence"]["A"] > planted["letter_mean_evidence"]["B"] + 1.0
    assert fair["letter_uniformity"]["p_value"] > 0.01 and fair["circular_accuracy"] > planted["circular_accuracy"]


def test_accuracy_rates_and_spread_equal_an_independent_numpy_computation(out_dir):
    rec = load_records(out_dir, "planted")
    out = permutation_summary(rec, scores=["max_prob", "reciprocal_vacuity"])
    shift = rec.order[:, 0]  # cyclic: order[0] is the shift
    assert out["accuracy_per_order"] == pytest.approx([rec.correct[shift == s].mean() for s in range(4)])
    assert out["accuracy"] == pytest.approx(rec.correct[shift == 0].mean())
    by_q = [np.flatnonzero(rec.doc_id == q) for q in np.unique(rec.doc_id)]
    assert out["circular_accuracy"] == pytest.approx(np.mean([rec.correct[i].all() for i in by_q]))
    assert out["letter_pick_rate"]["A"] == pytest.approx(np.mean(rec.pred == 0))
    assert out["letter_gold_rate"]["C"] == pytest.approx(np.mean(rec.gold == 2))
    for name in ("max_prob", "reciprocal_vacuity"):
        values = compute_score(name, probs=None, k=rec.k, alpha=rec.alpha, prior_weight=1.0)
        ranges = [np.ptp(values[i]) for i in by_q]
        entry = out["scores"][name]
        assert tuple(entry) == SCORE_KEYS
        assert entry["mean_range"] == pytest.approx(np.mean(ranges)) and entry["max_range"] == pytest.approx(
            max(ranges)
        )
        assert entry["mean_std"] == pytest.approx(np.mean([np.std(values[i]) for i in by_q]))


def test_auroc_per_order_and_of_the_order_average_equal_scikit_learn(out_dir):
    id_rec, ood_rec = load_records(out_dir, "fair"), load_records(out_dir, "ood4")
    rows = permutation_ood_rows(id_rec, ood_rec, scores=["max_prob"])
    (row,) = rows
    assert tuple(row) == PERMUTATION_OOD_KEYS and row["n_orders"] == 4 and row["matched"]
    s_id = compute_score("max_prob", probs=None, k=id_rec.k, alpha=id_rec.alpha, prior_weight=1.0)
    s_ood = compute_score("max_prob", probs=None, k=ood_rec.k, alpha=ood_rec.alpha, prior_weight=1.0)
    slot_id, slot_ood = order_slots(id_rec.doc_id, id_rec.order), order_slots(ood_rec.doc_id, ood_rec.order)
    aurocs, auprs = [], []
    for s in range(4):
        a, b = s_id[slot_id == s], s_ood[slot_ood == s]
        y = np.r_[np.ones(a.size), np.zeros(b.size)]
        aurocs.append(roc_auc_score(y, np.r_[a, b]))
        auprs.append(average_precision_score(y, np.r_[a, b]))
    assert row["auroc_identity"] == pytest.approx(aurocs[0])
    assert (row["auroc_min"], row["auroc_median"], row["auroc_max"]) == pytest.approx(
        (min(aurocs), np.median(aurocs), max(aurocs))
    )
    assert row["auroc_range"] == pytest.approx(max(aurocs) - min(aurocs))
    assert (row["aupr_in_min"], row["aupr_in_max"]) == pytest.approx((min(auprs), max(auprs)), abs=1e-9)
    mean_id = [s_id[id_rec.doc_id == q].mean() for q in np.unique(id_rec.doc_id)]
    mean_ood = [s_ood[ood_rec.doc_id == q].mean() for q in np.unique(ood_rec.doc_id)]
    y = np.r_[np.ones(len(mean_id)), np.zeros(len(mean_ood))]
    assert row["auroc_order_averaged"] == pytest.approx(roc_auc_score(y, np.r_[mean_id, mean_ood]))


def test_a_permuted_id_set_against_an_unpermuted_ood_set_is_refused(out_dir):
    with pytest.raises(OrderMismatchError, match="fair was evaluated in several answer orders .* plain_ood in one"):
        permutation_ood_rows(load_records(out_dir, "fair"), load_records(out_dir, "plain_ood"))


def test_the_cli_writes_the_interface_keys_and_the_k_check_refuses(out_dir, tmp_path, capsys):
    path = tmp_path / "order.json"
    code = main(["permutations", str(out_dir), "--task", "planted", "--json", str(path), "--id", "fair",
                 "--ood", "ood4,ood5", "--scores", "max_prob"])  # fmt: skip
    out = capsys.readouterr()
    assert code == 2  # ood5 has K = 5: refused as in `ood`, ood4 computed
    assert "refused fair vs ood5" in out.err and "CircularEval accuracy" in out.out
    written = json.loads(path.read_text())
    for key in ("accuracy", "circular_accuracy", "letter_pick_rate", "scores", "pride", "ood"):
        assert key in written
    assert set(written["scores"]["max_prob"]) >= {"mean_range", "spearman_min", "kendall_min"}
    assert [r["ood_task"] for r in written["ood"]] == ["ood4"]


@pytest.mark.parametrize(
    "argv, code, message",
    [
        (["--task", "fair", "--id", "fair", "--ood", "plain_ood"], 2, "refused: fair was evaluated in several"),
        (["--task", "plain_ood"], 1, "error: the records of 'plain_ood' have no answer orders"),
        (["--task", "fair", "--id", "fair"], 1, "--id and --ood go together"),
    ],
)
def test_bad_requests_are_one_line(out_dir, capsys, argv, code, message):
    assert main(["permutations", str(out_dir), *argv]) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert any(message in line for line in err), err


def test_a_folder_mixing_permuted_and_unpermuted_runs_of_a_task_is_one_line(tmp_path, capsys):
    folder = tmp_path / "out" / "synthetic-llm"
    write_records(records_path(folder, "t", DATE), permuted_records("t"))
    write_records(records_path(folder, "t", OLDER), permuted_records("t", permuted=False))
    assert main(["permutations", str(tmp_path / "out"), "--task", "t"]) == 1
    err = capsys.readouterr().err
    assert "holds runs of 't' evaluated in different answer orders (unpermuted: " in err and "--run DATE_ID" in err
    assert main(["permutations", str(tmp_path / "out"), "--task", "t", "--run", DATE]) == 0


def test_the_report_has_an_order_section_only_for_permuted_records(out_dir, tmp_path):
    import json as json_module

    from lm_eval_evidential.report import build_report

    fair, ood4 = load_records(out_dir, "fair"), load_records(out_dir, "ood4")
    with pytest.raises(PermutedRecordsError, match="pass --average-orders"):  # each (question, order) no example
        build_report(fair, [ood4], tmp_path / "r", n_boot=0, max_extra=1)
    data = build_report(
        fair,
        [ood4],
        tmp_path / "r",
        n_boot=0,
        max_extra=1,
        scores=["reciprocal_vacuity", "max_prob"],
        average_orders=True,
    )
    assert data["k_histograms"]["fair"] == {4: 60}  # the other sections: one record per question
    [spread] = data["summary"]["order"]
    [row] = permutation_ood_rows(fair, ood4, scores=["reciprocal_vacuity"])
    assert spread["auroc_range"] == row["auroc_range"] and spread["score"] == "reciprocal_vacuity"
    md = (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    summary = md.split("## Summary")[1].split("\n## ")[0]
    [line] = [x for x in summary.splitlines() if x.startswith("- **Answer order**")]
    assert f"moves it by up to {spread['auroc_range']:.3f}" in line and "against a K artefact of" in line
    assert "## Answer order" in md
    assert "answer_order" in json_module.loads((tmp_path / "r" / "report.json").read_text())
    # the same report of an unpermuted run: no order key, no order section
    plain = [permuted_records(t, permuted=False, seed=s) for t, s in (("fair_plain", 2), ("ood_plain", 3))]
    data = build_report(plain[0], plain[1:], tmp_path / "p", n_boot=0, max_extra=1, scores=["max_prob"])
    assert "order" not in data["summary"] and "answer_order" not in data
    assert "Answer order" not in (tmp_path / "p" / "report.md").read_text(encoding="utf-8")
