"""Implementation A (McNamara 2026, section 4.3): a 4-option OOD task scored at a forced K = 5 with the
model's real " E" logit, against a computation by hand; refused by the K check unless asked for."""

from __future__ import annotations

import json
import math

import pytest

from lm_eval_evidential.audits.ood import CardinalityMismatchError, ood_rows
from lm_eval_evidential.cli import main
from lm_eval_evidential.records import Records, make_record, records_path, write_records

DATE = "2026-11-21T20-15-03.123456"
META = {"method": "edl", "prior_weight": 1.0, "pretrained": "synthetic-llm", "phantom_count": 4}
ID_LOGITS = [[2.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0]]
OOD_LOGITS = [[0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]]
OOD_E = [3.0, 2.0]  # the real " E" logit of each OOD question


def _records(task, logits, phantoms):
    rows = [
        make_record(
            task=task,
            doc_id=i,
            labels=list("ABCD"),
            gold=0,
            logits=z,
            alpha=[math.log1p(math.exp(v)) + 1.0 for v in z],
            optional={"phantom_logits": p},
        )
        for i, (z, p) in enumerate(zip(logits, phantoms))
    ]
    return Records.from_rows(rows, task=task, meta=META)


def _by_hand():
    """UM (S / K) and MP (max alpha / S) of each question, the OOD ones with " E" as a fifth class; AUROC by pairs."""

    def scores(z):
        alpha = [math.log1p(math.exp(v)) + 1.0 for v in z]
        s = sum(alpha)
        return s / len(z), max(alpha) / s

    ids = [scores(z) for z in ID_LOGITS]
    oods = [scores(z + [e]) for z, e in zip(OOD_LOGITS, OOD_E)]

    def auroc(j):
        wins = [1.0 if a[j] > b[j] else 0.5 if a[j] == b[j] else 0.0 for a in ids for b in oods]
        return sum(wins) / len(wins)

    return {"reciprocal_vacuity": auroc(0), "max_prob": auroc(1)}


@pytest.fixture
def pair():
    return _records("id4", ID_LOGITS, [[0.0] * 4] * 3), _records(
        "ood4", OOD_LOGITS, [[e, 0.0, 0.0, 0.0] for e in OOD_E]
    )


def test_forced_k_equals_the_hand_computation(pair):
    rows = ood_rows(*pair, scores=["reciprocal_vacuity", "max_prob"], force_k=5, k_policy="report", n_boot=0)
    want = _by_hand()
    for r in rows:
        assert r["auroc"] == pytest.approx(want[r["score"]], abs=1e-12)
        assert (r["k_ood"], r["forced_k"], r["phantom"], r["matched"]) == (5, 5, "model", False)
    plain = ood_rows(*pair, scores=["reciprocal_vacuity"], n_boot=0)[0]
    assert plain["forced_k"] is None and plain["k_ood"] == 4


def test_forced_k_is_refused_by_the_k_assertion_unless_asked_for(pair, tmp_path, capsys):
    with pytest.raises(CardinalityMismatchError):
        ood_rows(*pair, force_k=5, n_boot=0)
    folder = tmp_path / "out" / "synthetic-llm"
    for rec in pair:
        write_records(records_path(folder, rec.task, DATE), rec)
    args = ["ood", str(tmp_path / "out"), "--id", "id4", "--ood", "ood4", "--force-k", "5", "--n-boot", "0"]
    assert main(args) == 2
    assert "--k-policy report" in capsys.readouterr().err
    out = tmp_path / "a.json"
    assert main([*args, "--k-policy", "report", "--scores", "max_prob", "--json", str(out)]) == 0
    assert "5 (model phantom)" in capsys.readouterr().out
    (row,) = json.loads(out.read_text())
    assert row["auroc"] == pytest.approx(_by_hand()["max_prob"], abs=1e-12)


def test_forced_k_below_a_questions_own_k_is_an_error(pair):
    with pytest.raises(ValueError, match="never remove real ones"):
        ood_rows(*pair, force_k=3, k_policy="report", n_boot=0)
    for bad in (0, 4.0, True):  # FORCE_K's own refusal, the line `ood --force-k 0` gives
        with pytest.raises(ValueError, match=rf"^force_k={bad!r} must be an integer >= 1 \(the options each question"):
            ood_rows(*pair, force_k=bad, k_policy="report", n_boot=0)
