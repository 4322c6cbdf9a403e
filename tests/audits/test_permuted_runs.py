"""Every audit but ``permutations`` on a permuted run: refused with the remedy (exit 2), or, with
``--average-orders``, run on one record per question and marked; never each (question, order) counted
as an example.

A synthetic permuted run (one EDL record per (question, cyclic order), written as the harness writes
it) and one unpermuted task. Oracles: the order-averaged scores by a Python loop over each question's
records (alpha moved back to its options by hand), and scikit-learn's AUROC of them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from lm_eval_evidential.cli.main import EXIT_ERROR, EXIT_OK, EXIT_REFUSED, build_parser, main
from lm_eval_evidential.records import Records, load_records, make_records, records_path, write_records

DATE = "2026-11-21T20-15-03.123456"


def _run(task, n, k, *, quality, seed, permuted=True) -> Records:
    rng = np.random.default_rng(seed)
    cols = {"doc_ids": [], "labels": [], "gold": [], "logits": [], "order": []}
    for q in range(n):
        g = int(rng.integers(k))
        worth = rng.normal(0, 1, size=k)
        worth[g] += quality
        for s in range(k if permuted else 1):
            order = [(j + s) % k for j in range(k)]
            cols["doc_ids"].append(q)
            cols["labels"].append(list("ABCDE"[:k]))
            cols["gold"].append(order.index(g))
            cols["logits"].append((worth[order] + rng.normal(0, 0.8, size=k)).tolist())
            cols["order"].append(order)
    rows = make_records(
        task=task,
        doc_ids=cols["doc_ids"],
        labels=cols["labels"],
        gold=cols["gold"],
        logits=cols["logits"],
        alpha=[(np.logaddexp(0, z) + 1.0).tolist() for z in cols["logits"]],
        optional={"order": cols["order"]} if permuted else None,
    )
    meta = {"method": "edl", "prior_weight": 1.0, "pretrained": "synthetic-llm"}
    if permuted:
        meta["permutations"] = {"spec": "cyclic", "seed": 0}
    return Records.from_rows(rows, task=task, meta=meta)


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("permuted_run")
    for task, n, quality, seed, permuted in (
        ("obqa_edl", 50, 2.5, 1, True),
        ("arc_c_edl", 40, 0.3, 2, True),
        ("csqa4_edl", 40, 0.3, 3, False),
    ):
        write_records(records_path(root / "synthetic-llm", task, DATE), _run(task, n, 4, quality=quality, seed=seed,
                                                                            permuted=permuted))  # fmt: skip
    return root


def _audits(out: Path, tmp: Path) -> dict[str, list[str]]:
    """One command per audit that reads records, on the permuted ID task (and OOD task)."""
    pair = ["--id", "obqa_edl", "--ood", "arc_c_edl"]
    return {
        "ood": ["ood", str(out), *pair, "--n-boot", "20"],
        "ksweep": ["ksweep", str(out), "--id", "obqa_edl", "--ood", "arc_c_edl"],
        "tables": ["tables", str(out), *pair],
        "report": ["report", str(out), *pair, "--out", str(tmp / "report"), "--n-boot", "0", "--max-extra", "1"],
        "calibration": ["calibration", str(out), "--task", "obqa_edl,arc_c_edl"],
        "selective": ["selective", str(out), "--task", "obqa_edl"],
        "atc": ["atc", str(out), "--id", "obqa_edl", "--target", "arc_c_edl"],
        "orders": ["orders", str(out), "--task", "obqa_edl"],
        "conformal": ["conformal", str(out), *pair, "--n-boot", "20"],
        "temperature": ["temperature", str(out), *pair],
    }


def test_every_audit_but_permutations_has_a_case_here(tmp_path):
    """An audit is a subcommand that reads an lm_eval output folder; each must be run on a permuted run below."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    audits = {
        name
        for name, p in sub.choices.items()
        if any(a.dest == "output_path" and not a.option_strings for a in p._actions)
    }
    assert "permutations" in audits  # the audit of the orders themselves reads them order by order
    missing = audits - {"permutations"} - set(_audits(tmp_path, tmp_path))
    assert not missing, f"add a permuted-run case for {sorted(missing)} to {__file__}"


@pytest.mark.parametrize("audit", list(_audits(Path("."), Path("."))))
def test_every_audit_refuses_a_permuted_run_naming_the_remedy(audit, out, tmp_path, capsys):
    assert main(_audits(out, tmp_path)[audit]) == EXIT_REFUSED
    [line] = [x for x in capsys.readouterr().err.splitlines() if x.startswith("lm-eval-evidential")]
    assert (
        f"{audit}: refused: obqa_edl holds a permuted run (cyclic: 200 records of 50 questions, 4 orders each)" in line
    )
    assert f"`{audit}` counts each record as an example" in line and "pass --average-orders" in line
    assert "lm-eval-evidential permutations OUT --task obqa_edl" in line
    assert not (tmp_path / "report").exists()  # a refusal writes nothing


@pytest.mark.parametrize("audit", list(_audits(Path("."), Path("."))))
def test_every_audit_averages_the_orders_on_request_and_says_so(audit, out, tmp_path, capsys):
    assert main([*_audits(out, tmp_path)[audit], "--average-orders"]) == EXIT_OK, capsys.readouterr().err
    err = capsys.readouterr().err
    if audit == "report":  # marked in the report itself, beside its answer-order section of the orders
        md = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
        assert "- **Answer orders**: each question was shown in 4 orders (cyclic); every section but" in md
        assert "## Answer order" in md
        meta = json.loads((tmp_path / "report" / "report.json").read_text())["meta"]["order_averaged"]
        assert meta == {"permutations": "cyclic", "orders_per_question": [4, 4], "records": 200}
    else:
        assert (
            "note: obqa_edl: each question's 4 answer orders (cyclic) averaged into one record (200 records -> 50"
            in err
        )


def _averaged_by_hand(records: Records) -> dict[str, np.ndarray]:
    """max_prob and reciprocal vacuity of each question's mixture of orders, a loop per question."""
    by_q: dict[int, list[np.ndarray]] = {}
    for i in range(len(records)):
        k = int(records.k[i])
        alpha = np.empty(k)
        for j, o in enumerate(records.order[i, :k]):
            alpha[o] = records.alpha[i, j]
        by_q.setdefault(int(records.doc_id[i]), []).append(alpha)
    max_prob, reciprocal = [], []
    for q in sorted(by_q):
        alphas = np.array(by_q[q])
        s = alphas.sum(axis=1)
        max_prob.append(float((alphas / s[:, None]).mean(axis=0).max()))
        reciprocal.append(1.0 / float(np.mean(alphas.shape[1] / s)))  # 1 / the orders' mean vacuity (λ = 1)
    return {"max_prob": np.array(max_prob), "reciprocal_vacuity": np.array(reciprocal)}


def test_ood_of_the_averaged_orders_equals_scikit_learn_on_the_mixture_by_hand(out, tmp_path):
    path = tmp_path / "rows.json"
    argv = ["ood", str(out), "--id", "obqa_edl", "--ood", "arc_c_edl", "--average-orders", "--n-boot", "0"]
    assert main([*argv, "--scores", "max_prob,reciprocal_vacuity", "--json", str(path)]) == EXIT_OK
    rows = {r["score"]: r for r in json.loads(path.read_text())}
    a, b = (_averaged_by_hand(load_records(out, t)) for t in ("obqa_edl", "arc_c_edl"))
    y = np.r_[np.ones(50), np.zeros(40)]
    for score in ("max_prob", "reciprocal_vacuity"):
        assert rows[score]["n_id"] == 50 and rows[score]["n_ood"] == 40  # questions, not (question, order) rows
        assert rows[score]["auroc"] == pytest.approx(roc_auc_score(y, np.r_[a[score], b[score]]), abs=1e-12)


def test_an_averaged_side_against_an_unpermuted_side_is_refused(out, capsys):
    argv = ["ood", str(out), "--id", "obqa_edl", "--ood", "csqa4_edl", "--average-orders"]
    assert main(argv) == EXIT_REFUSED
    err = capsys.readouterr().err
    assert "refused: obqa_edl is cyclic orders averaged and csqa4_edl is shown in one order" in err


def test_the_logit_scores_are_refused_on_averaged_orders(out, capsys):
    argv = ["ood", str(out), "--id", "obqa_edl", "--ood", "arc_c_edl", "--average-orders", "--scores", "neg_energy"]
    assert main(argv) == EXIT_ERROR
    assert "neg_energy read one forward pass's answer logits" in capsys.readouterr().err


def test_an_unpermuted_task_is_read_as_before_with_or_without_the_flag(out, tmp_path):
    rows = []
    for flag in ([], ["--average-orders"]):
        path = tmp_path / f"cal{len(flag)}.json"
        assert main(["calibration", str(out), "--task", "csqa4_edl", "--json", str(path), *flag]) == EXIT_OK
        rows.append(json.loads(path.read_text()))
    assert rows[0] == rows[1]
