"""``lm-eval-evidential temperature`` on saved records: T printed and kept in every row; rows equal the core
functions on the records; a K-mismatched OOD task refused with exit 2."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lm_eval_evidential.audits.ood import subset_records
from lm_eval_evidential.audits.temperature import TEMPERATURE_KEYS
from lm_eval_evidential.metrics.calibration import ece, nll
from lm_eval_evidential.metrics.detection import auroc
from lm_eval_evidential.metrics.temperature import fit_temperature, scaled_softmax
from lm_eval_evidential.records import load_records
from tests.audits.test_conformal import out_dir  # noqa: F401 (the fixture: id4, cal4, ood4, ood5, mix)
from tests.audits.test_quality import cli as _cli


def test_rows_equal_the_core_functions_and_t_is_kept(out_dir, tmp_path, capsys):  # noqa: F811
    path = tmp_path / "t.json"
    rc, out, err = _cli(
        ["temperature", out_dir, "--id", "id4", "--ood", "ood4", "--calibration-fraction", "0.5", "--seed", "2",
         "--json", path],
        capsys,
    )  # fmt: skip
    assert rc == 0, err
    rows = json.loads(path.read_text())
    id4 = load_records(out_dir, "id4")
    order = np.random.default_rng(2).permutation(len(id4))
    keep = np.zeros(len(id4), dtype=bool)
    keep[order[:200]] = True
    val, test = subset_records(id4, keep), subset_records(id4, ~keep)
    t = fit_temperature(val.logits, val.gold)
    assert f"temperature: T = {t:.4g} fitted by NLL on id4 (0.5 of 400, seed 2)" in out
    assert [(r["set"], r["probs"]) for r in rows] == [
        ("id4", "records"),
        ("id4", "softmax(z)"),
        ("id4", "softmax(z/T)"),
        ("ood4", "records"),
        ("ood4", "softmax(z)"),
        ("ood4", "softmax(z/T)"),
    ]
    ood4 = load_records(out_dir, "ood4")
    for row in rows:
        assert tuple(k for k in row if k != "reason") == TEMPERATURE_KEYS
        rec = test if row["set"] == "id4" else ood4
        temp = row["temperature"]
        p = rec.probs if temp is None else scaled_softmax(rec.logits, temp)
        assert temp in (None, 1.0, pytest.approx(t, rel=1e-12))
        assert row["ece"] == pytest.approx(ece(np.nanmax(p, axis=1), rec.correct), abs=1e-12)
        assert row["nll"] == pytest.approx(nll(p, rec.gold), abs=1e-12)
        if row["set"] == "ood4":
            p_id = test.probs if temp is None else scaled_softmax(test.logits, temp)
            y = np.r_[np.ones(len(test)), np.zeros(len(ood4))].astype(int)
            s = np.r_[np.nanmax(p_id, axis=1), np.nanmax(p, axis=1)]
            assert row["auroc"] == pytest.approx(auroc(y, s), abs=1e-12)
        else:
            assert row["auroc"] is None
    # id4's records are overconfident softmax at T = 1 (sharper than their labels): T > 1 lowers the NLL
    by = {(r["set"], r["probs"]): r for r in rows}
    assert t > 1 and by["id4", "softmax(z/T)"]["nll"] < by["id4", "softmax(z)"]["nll"]


def test_a_k_mismatched_ood_task_is_refused(out_dir, capsys):  # noqa: F811
    rc, out, err = _cli(["temperature", out_dir, "--id", "id4", "--ood", "ood5,ood4"], capsys)
    assert rc == 2 and "refused id4 vs ood5" in err and "Traceback" not in err
    assert "ood4" in out and "temperature: T = " in out
    rc, _, err = _cli(["temperature", out_dir, "--id", "id4", "--calibration-task", "id4"], capsys)
    assert rc == 1 and "--calibration-task and --id both name 'id4'" in err
