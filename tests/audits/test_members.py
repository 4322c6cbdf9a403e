"""The audits on records of several members (ensembles, MC dropout): the K checks hold, the member scores come in."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy.special import digamma
from sklearn.metrics import roc_auc_score

from lm_eval_evidential.cli import main
from lm_eval_evidential.errors import RecordsError
from lm_eval_evidential.metrics.members import mutual_information_of_members
from lm_eval_evidential.records import Records, make_records, read_records_file, records_path, write_records

DATE = "2026-11-27T12-00-00.000001"


def _records(task, k, n, shift, seed, method, m=4, phantoms=True):
    rng = np.random.default_rng(seed)
    members = [rng.normal(shift, 1.5, size=(1, k)) + rng.normal(0, 0.7 + (1.0 - shift), size=(m, k)) for _ in range(n)]
    # each member's own phantom logits (" E".. after the last label), 3 per question as phantom_count=3 keeps
    phantom = [rng.normal(shift - 1.0, 1.0, size=(1, 3)) + rng.normal(0, 0.8, size=(m, 3)) for _ in range(n)]
    optional = {
        "member_logits": members,
        **({"member_phantom_logits": [p.tolist() for p in phantom]} if phantoms else {}),
    }
    rows = make_records(
        task=task,
        doc_ids=range(n),
        labels=[list("ABCDE"[:k])] * n,
        gold=rng.integers(k, size=n).tolist(),
        logits=None,
        alpha=None,
        optional=optional,
        members_method=method,
    )
    meta = {"method": method, "prior_weight": 1.0, "pretrained": "synthetic-llm", "peft": "ens", "phantom_count": 3}
    meta["members"] = {"source": "ensemble", "names": [f"member_{i}" for i in range(m)]}
    return Records.from_rows(rows, task=task, meta=meta), (np.asarray(members), np.asarray(phantom))


@pytest.fixture(scope="module", params=["softmax", "edl"])
def run(request, tmp_path_factory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("members")
    members = {}
    for task, k, n, shift, seed in (("id4", 4, 120, 1.0, 1), ("ood4", 4, 100, 0.0, 2), ("ood5", 5, 90, 0.0, 3)):
        rec, members[task] = _records(task, k, n, shift, seed, request.param)
        write_records(records_path(root / "synthetic-llm", task, DATE), rec)
    return root, members, request.param


def test_ood_refuses_k_mismatched_member_records(run, capsys):
    root, _, _ = run
    assert main(["ood", str(root), "--id", "id4", "--ood", "ood5"]) == 2
    err = capsys.readouterr().err
    assert "K" in err and "id4" in err and "ood5" in err


def test_ood_scores_member_records_with_the_member_scores(run, tmp_path, capsys):
    root, members, method = run
    out = tmp_path / "rows.json"
    scores = "neg_mutual_information,neg_max_prob_variance,max_prob"
    assert main(["ood", str(root), "--id", "id4", "--ood", "ood4", "--scores", scores, "--json", str(out)]) == 0
    rows = {r["score"]: r for r in json.loads(out.read_text())}
    # the mutual information's AUROC, from the members by an independent route (metrics.members + scikit-learn)
    mi = [mutual_information_of_members(members[t][0], method) for t in ("id4", "ood4")]
    y = np.r_[np.ones(len(mi[0])), np.zeros(len(mi[1]))]
    assert rows["neg_mutual_information"]["auroc"] == pytest.approx(roc_auc_score(y, -np.r_[mi[0], mi[1]]), abs=1e-12)
    assert set(rows) == set(scores.split(","))


def _grown_scores(members, phantom, x, mode, method):
    """The oracle: each member grown alone by hand (numpy), then the mixture's scores (module docstring of
    metrics.member_phantoms), one question at a time."""
    out = {"max_prob": [], "neg_entropy": [], "neg_mutual_information": [], "reciprocal_vacuity": []}
    for z, zp in zip(members, phantom):
        if mode == "model":
            z = np.concatenate([z, zp[:, :x]], axis=1)
        if method == "softmax":
            p = np.exp(z - z.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            h = -(p * np.log(p)).sum(axis=1)
            s_m = None
        else:
            alpha = np.log1p(np.exp(z)) + 1.0
            if mode == "zero":
                alpha = np.concatenate([alpha, np.ones((alpha.shape[0], x))], axis=1)
            s_m = alpha.sum(axis=1)
            p = alpha / s_m[:, None]
            h = digamma(s_m + 1) - (p * digamma(alpha + 1)).sum(axis=1)  # E_Dir[H(p)]
        mean = p.mean(axis=0)
        entropy = -(mean * np.log(mean)).sum()
        out["max_prob"].append(mean.max())
        out["neg_entropy"].append(-entropy)
        out["neg_mutual_information"].append(-(entropy - h.mean()))
        if s_m is not None:  # the summary Dirichlet's vacuity is the members' mean vacuity; count grows its K
            k = z.shape[1] + (x if mode in ("zero", "count") else 0)
            out["reciprocal_vacuity"].append(1.0 / np.mean(k / s_m))
    return {name: np.asarray(v) for name, v in out.items() if v}


@pytest.mark.parametrize("mode", ["model", "zero", "count"])
def test_ksweep_on_member_records_grows_each_member_by_its_own_phantoms(run, mode, tmp_path, capsys):
    root, members, method = run
    out = tmp_path / "sweep.json"
    scores = "max_prob,neg_entropy,neg_mutual_information" + (",reciprocal_vacuity" if method == "edl" else "")
    argv = ["ksweep", str(root), "--id", "id4", "--ood", "ood4", "--scores", scores, "--json", str(out)]
    code = main([*argv, "--phantom", mode, "--max-extra", "3"])
    if method == "softmax" and mode != "model":  # no evidence: as for one softmax model
        assert code == 1 and "have no alpha" in capsys.readouterr().err
        return
    assert code == 0, capsys.readouterr().err
    rows = json.loads(out.read_text())["rows"]
    assert {(r["condition"], r["extra"]) for r in rows} == {(c, x) for c in ("ood_only", "matched") for x in range(4)}
    for row in rows:
        x = row["extra"]
        grown_id = x if row["condition"] == "matched" else 0
        s_id = _grown_scores(*members["id4"], grown_id, mode, method)[row["score"]]
        s_ood = _grown_scores(*members["ood4"], x, mode, method)[row["score"]]
        y = np.r_[np.ones(len(s_id)), np.zeros(len(s_ood))]
        assert row["auroc"] == pytest.approx(roc_auc_score(y, np.r_[s_id, s_ood]), abs=1e-12), row
    moved = {r["score"] for r in rows if r["condition"] == "ood_only" and abs(r["delta_auroc"]) > 1e-3}
    assert "neg_mutual_information" in moved or mode == "count"  # the sweep does move the member scores


def test_force_k_on_member_records_scores_each_member_at_the_forced_k(run, tmp_path, capsys):
    root, members, method = run
    out = tmp_path / "forced.json"
    argv = ["ood", str(root), "--id", "id4", "--ood", "ood4", "--scores", "neg_mutual_information,max_prob"]
    assert main([*argv, "--force-k", "6", "--k-policy", "report", "--json", str(out)]) == 0, capsys.readouterr().err
    rows = {r["score"]: r for r in json.loads(out.read_text())}
    for name, row in rows.items():
        s_id = _grown_scores(*members["id4"], 0, "model", method)[name]
        s_ood = _grown_scores(*members["ood4"], 2, "model", method)[name]
        y = np.r_[np.ones(len(s_id)), np.zeros(len(s_ood))]
        assert row["auroc"] == pytest.approx(roc_auc_score(y, np.r_[s_id, s_ood]), abs=1e-12)


def test_member_records_without_their_phantoms_load_and_refuse_phantom_model_with_the_reason(tmp_path, capsys):
    for task, seed in (("id4", 1), ("ood4", 2)):
        rec, _ = _records(task, 4, 30, 1.0 if task == "id4" else 0.0, seed, "edl", phantoms=False)
        assert rec.member_phantom_logits is None and "member_phantom_logits" not in rec.to_table().column_names
        write_records(records_path(tmp_path / "synthetic-llm", task, DATE), rec)
    argv = ["ksweep", str(tmp_path), "--id", "id4", "--ood", "ood4"]
    assert main([*argv, "--phantom", "model"]) == 1
    err = capsys.readouterr().err
    assert "before lm-eval-evidential kept each member's phantom logits" in err and "re-run" in err
    assert main([*argv, "--phantom", "zero"]) == 0  # EDL members: zero-evidence options need no phantom logits


def test_member_phantoms_round_trip_and_the_loader_checks_them(tmp_path):
    rec, (members, phantom) = _records("id4", 4, 12, 1.0, 7, "softmax")
    path = records_path(tmp_path, "id4", DATE)
    write_records(path, rec)
    back = read_records_file(path)
    np.testing.assert_array_equal(back.member_phantom_logits, phantom)
    assert back[3]["member_phantom_logits"] == phantom[3].tolist()
    table = back.to_table()
    column = table.column("member_phantom_logits").to_pylist()
    column[5] = [column[5][0][:2], *column[5][1:]]  # one member of one question lost a phantom logit
    bad = table.set_column(
        table.column_names.index("member_phantom_logits"),
        "member_phantom_logits",
        pa.array(column, type=table.schema.field("member_phantom_logits").type),
    )
    pq.write_table(bad, path)
    with pytest.raises(RecordsError, match=r"row 5: its members have \[2, 3, 3, 3\] phantom logits"):
        read_records_file(path)


def test_report_takeaway_says_how_far_the_k_artefact_moves_the_baselines_mutual_information(run, tmp_path, capsys):
    from lm_eval_evidential.report.format import format_number

    root, members, method = run
    sweep = tmp_path / "sweep.json"
    argv = ["ksweep", str(root), "--id", "id4", "--ood", "ood4", "--json", str(sweep)]
    assert main([*argv, "--phantom", "model", "--max-extra", "3"]) == 0
    rows = json.loads(sweep.read_text())["rows"]
    mi = next(r for r in rows if (r["condition"], r["extra"], r["score"]) == ("ood_only", 1, "neg_mutual_information"))
    s_id = _grown_scores(*members["id4"], 0, "model", method)["neg_mutual_information"]
    s_ood = _grown_scores(*members["ood4"], 1, "model", method)["neg_mutual_information"]
    y = np.r_[np.ones(len(s_id)), np.zeros(len(s_ood))]
    base = roc_auc_score(y, np.r_[s_id, _grown_scores(*members["ood4"], 0, "model", method)["neg_mutual_information"]])
    assert mi["delta_auroc"] == pytest.approx(roc_auc_score(y, np.r_[s_id, s_ood]) - base, abs=1e-12)
    out = tmp_path / "report"
    argv = ["report", str(root), "--id", "id4", "--ood", "ood4", "--phantom", "model", "--max-extra", "3"]
    assert main([*argv, "--out", str(out)]) == 0, capsys.readouterr().err
    takeaway = next(line for line in (out / "report.md").read_text().splitlines() if line.startswith("**Takeaway"))
    delta = format_number(mi["delta_auroc"], signed=True)
    words = f"this ensemble ×4 ({method}) baseline's mutual information AUROC by {delta}"
    assert words in takeaway, takeaway
