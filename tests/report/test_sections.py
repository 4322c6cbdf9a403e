"""The report's OOD table says which AUPR-In interval its rows got (report/sections.py)."""

from __future__ import annotations

import numpy as np
import pytest

from lm_eval_evidential.audits.ood import ood_rows
from lm_eval_evidential.metrics.intervals import BOOTSTRAP_MAX_EXAMPLES, aupr_in_ci, aupr_in_ij_ci
from lm_eval_evidential.records import Records, make_records
from lm_eval_evidential.report.sections import md_ood


def _records(task: str, n: int, shift: float, seed: int) -> Records:
    rng = np.random.default_rng(seed)
    z = rng.normal(shift, 1.5, size=(n, 4))
    rows = make_records(
        task=task,
        doc_ids=list(range(n)),
        labels=[list("ABCD")] * n,
        gold=rng.integers(4, size=n).tolist(),
        logits=z.tolist(),
        alpha=(np.logaddexp(0.0, z) + 1.0).tolist(),
    )
    return Records.from_rows(rows, task=task, meta={"method": "edl", "prior_weight": 1.0})


@pytest.mark.parametrize(
    "n_id, n_ood, header",
    [
        (300, 300, "95% CI (bootstrap)"),
        (BOOTSTRAP_MAX_EXAMPLES // 2 + 1, BOOTSTRAP_MAX_EXAMPLES // 2, "95% CI (large-sample)"),
    ],
)
def test_the_aupr_in_header_names_the_interval_its_rows_got(n_id, n_ood, header):
    id_records, ood_records = _records("id4", n_id, 1.0, 1), _records("ood4", n_ood, 0.0, 2)
    rows = ood_rows(id_records, ood_records, scores=["max_prob"], n_boot=20)
    table = md_ood({"ood": {"assert": {"rows": rows, "refused": []}}})
    head = next(line for line in table if line.startswith("| OOD task"))
    assert f"| {header} |" in head
    # the interval in the row is the one the header names
    y = np.r_[np.ones(n_id), np.zeros(n_ood)]
    s = np.r_[id_records.max_prob, ood_records.max_prob]
    want = aupr_in_ci(y, s, n_boot=20) if header.endswith("(bootstrap)") else aupr_in_ij_ci(y, s)
    np.testing.assert_allclose(rows[0]["aupr_in_ci"], want[1:])


def test_a_table_of_both_sizes_says_both():
    small = ood_rows(_records("id4", 100, 1.0, 1), _records("ood4", 100, 0.0, 2), scores=["max_prob"], n_boot=20)
    big = ood_rows(_records("id4", 10_001, 1.0, 3), _records("ood5", 10_000, 0.0, 4), scores=["max_prob"], n_boot=20)
    table = md_ood({"ood": {"assert": {"rows": small + big, "refused": []}}})
    assert any("| 95% CI (bootstrap; large-sample above 20,000) |" in line for line in table)
