"""The report's audit sections (report/sections.py): the AUPR-In interval the OOD rows got, the controls table."""

from __future__ import annotations

import numpy as np
import pytest

from lm_eval_evidential.audits.ood import ood_rows
from lm_eval_evidential.metrics.intervals import BOOTSTRAP_MAX_EXAMPLES, aupr_in_ci, aupr_in_ij_ci
from lm_eval_evidential.records import Records, make_records
from lm_eval_evidential.report.sections import md_ood

NAN = float("nan")


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


def test_the_controls_table_says_what_each_control_keeps_costs_and_measures():
    from lm_eval_evidential.report.sections import md_controls
    from lm_eval_evidential.report.types import ControlRow

    common = {"matched": True, "error": None, "auroc": {}, "evaluated": True, "excluded": {}, "n_excluded": None}
    rows = [
        ControlRow(
            **{
                **common,
                "source": "csqa_edl",
                "control": "csqa_k4_edl",
                "description": "hashed",
                "n_source": 100,
                "n_kept": 24,
                "n_excluded": 76,
                "auroc": {"max_prob": {"auroc": 0.6824, "auroc_ci": [0.5, 0.8431]}},
            }
        ),  # fmt: skip
        ControlRow(
            **{
                **common,
                "source": "csqa_edl",
                "control": "restrict",
                "description": "K = 4 only",
                "n_source": 24,
                "n_kept": 0,
                "n_excluded": 24,
                "excluded": {"K ≠ 4": 24},
                "error": "no K = 4 left",
            }
        ),  # fmt: skip
        ControlRow(
            **{
                **common,
                "source": "arc_c_edl",
                "control": "arc_c_k4_edl",
                "description": "hashed",
                "evaluated": False,
                "n_source": None,
                "n_kept": None,
                "matched": None,
            }
        ),  # fmt: skip
        ControlRow(
            **{
                **common,
                "source": "arc_c_edl",
                "control": "restrict",
                "description": "K = 4 only",
                "n_source": 24,
                "n_kept": 22,
                "excluded": {"K ≠ 4": 2},
                "auroc": {"neg_entropy": {"auroc": 0.14, "auroc_ci": [NAN, NAN]}},
            }
        ),  # fmt: skip
    ]
    table = md_controls({"controls": rows, "id_task": "obqa_edl"})[4:]
    assert table == [
        "| OOD data | control | what it does | kept / n | excluded | AUROC max_prob [95% CI] "
        "| AUROC neg_entropy [95% CI] |",
        "|---|---|---|---|---|---|---|",
        "| csqa_edl | csqa_k4_edl | hashed | 24 / 100 | 76 | 0.682 [0.500, 0.843] | n/a |",
        "| csqa_edl | restrict | K = 4 only | 0 / 24 | 24: K ≠ 4 | refused: no K = 4 left |  |",
        "| arc_c_edl | arc_c_k4_edl | hashed | — | — | not in these records: evaluate arc_c_k4_edl |  |",
        "| arc_c_edl | restrict | K = 4 only | 22 / 24 | 2: K ≠ 4 | n/a | 0.140 n/a |",
        "",
    ]
