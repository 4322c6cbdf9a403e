"""The audits on records of several members (ensembles, MC dropout): the K checks hold, the member scores come in."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from lm_eval_evidential.cli import main
from lm_eval_evidential.metrics.members import mutual_information_of_members
from lm_eval_evidential.records import Records, make_records, records_path, write_records

DATE = "2026-11-27T12-00-00.000001"


def _records(task, k, n, shift, seed, method, m=4):
    rng = np.random.default_rng(seed)
    members = [rng.normal(shift, 1.5, size=(1, k)) + rng.normal(0, 0.7 + (1.0 - shift), size=(m, k)) for _ in range(n)]
    rows = make_records(
        task=task,
        doc_ids=range(n),
        labels=[list("ABCDE"[:k])] * n,
        gold=rng.integers(k, size=n).tolist(),
        logits=None,
        alpha=None,
        optional={"member_logits": members},
        members_method=method,
    )
    meta = {"method": method, "prior_weight": 1.0, "pretrained": "synthetic-llm", "peft": "ens"}
    return Records.from_rows(rows, task=task, meta=meta), np.asarray(members)


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
    mi = [mutual_information_of_members(members[t], method) for t in ("id4", "ood4")]
    y = np.r_[np.ones(len(mi[0])), np.zeros(len(mi[1]))]
    assert rows["neg_mutual_information"]["auroc"] == pytest.approx(roc_auc_score(y, -np.r_[mi[0], mi[1]]), abs=1e-12)
    assert set(rows) == set(scores.split(","))


def test_ksweep_refuses_member_records_with_the_reason(run, capsys):
    root, _, _ = run
    assert main(["ksweep", str(root), "--id", "id4", "--ood", "ood4"]) == 1
    assert "phantom options' logits are not kept per member" in capsys.readouterr().err
