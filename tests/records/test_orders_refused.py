"""records/orders.py's one rule applied to the audit functions called from Python, not only to the commands.

A permuted run keeps one record per (question, order); every public audit function that counts records
as examples must refuse it (``refuses_permuted``), with the remedies a library caller can use, and
accept it order-averaged (``average_orders``) or deliberately pooled (``pool_orders``). The guard fails
when a public function of ``audits/`` has neither the check nor a stated reason to go without.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import numpy as np
import pytest

import lm_eval_evidential.audits as audits_pkg
from lm_eval_evidential.errors import PermutedRecordsError
from lm_eval_evidential.records.orders import ORDERS_POOLED, average_orders, pool_orders

from .test_order_average import permuted_run

#: Public audit functions that go without the check, and why (each must stay true).
EXEMPT = {
    "compare.refuse_one_run_twice": "compares the methods' predictions for identity, counts nothing",
    "compare.refuse_other_questions": "compares the methods' sets of doc ids (np.unique over orders), counts nothing",
    "permutations.check_permuted": "the order audit itself: it reads the orders",
    "permutations.permutation_summary": "the order audit itself: it reads the orders",
    "permutations.permutation_ood_rows": "the order audit itself: it reads the orders",
    "ood_scores.k_summary": "takes an array of K, not records",
    "ood_scores.subset_records": "selects records, counts nothing",
    "ood_scores.resolve_scores": "checks score names against the records' columns, counts nothing",
    "ood.phantom_evidence_line": "reads rows already computed",
    "ood.sensitivity_lines": "reads rows already computed",
    "quality.selective_keys": "takes a coverage, not records",
    "quality.equivalence_groups": "reads rows already computed (order_rows' pairs)",
    "compare.method_kind": "reads the records' metadata, counts nothing",
}


def _public_functions():
    for info in pkgutil.iter_modules(audits_pkg.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{audits_pkg.__name__}.{info.name}")
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if inspect.isfunction(obj) and obj.__module__ == module.__name__:
                yield f"{info.name}.{name}", obj


CHECKED = sorted((name, fn) for name, fn in _public_functions() if name not in EXEMPT)


def test_every_public_audit_function_refuses_permuted_records_or_says_why_not():
    found = dict(_public_functions())
    missing = [name for name, fn in found.items() if name not in EXEMPT and not getattr(fn, "refuses_permuted", False)]
    assert not missing, f"public audit functions without refuses_permuted (add it, or a reason in EXEMPT): {missing}"
    assert set(EXEMPT) <= set(found), f"EXEMPT names functions that are gone: {set(EXEMPT) - set(found)}"
    assert len(CHECKED) >= 15


@pytest.mark.parametrize("name, fn", CHECKED, ids=[n for n, _ in CHECKED])
def test_each_checked_function_refuses_a_permuted_run_before_it_computes(name, fn):
    records, _ = permuted_run("edl")
    # Every required argument is the permuted run, wrapped as a mapping (the check looks inside mappings and
    # lists too): the refusal must come from the check, before the function reads its arguments.
    args = {
        p.name: {records.task: records}
        for p in inspect.signature(fn).parameters.values()
        if p.default is inspect.Parameter.empty and p.kind is not p.VAR_KEYWORD and p.kind is not p.VAR_POSITIONAL
    }
    with pytest.raises(PermutedRecordsError) as info:
        fn(**args)
    line = str(info.value)
    assert "\n" not in line and f"`{name}` counts each record as an example" in line
    assert "records.orders.average_orders" in line and "permutation_summary" in line and "--average-orders" not in line


def test_averaged_and_pooled_runs_pass_and_give_their_own_numbers():
    from sklearn.metrics import roc_auc_score

    from lm_eval_evidential.audits.ood import ood_rows
    from lm_eval_evidential.audits.quality import calibration_rows

    a, b = permuted_run("edl", seed=1)[0], permuted_run("edl", seed=2)[0]
    b = type(b)(**{**{f: getattr(b, f) for f in b.__dataclass_fields__}, "task": "u"})
    averaged = [average_orders(r) for r in (a, b)]
    row = ood_rows(*averaged, scores=["max_prob"], k_policy="report", n_boot=0)[0]
    y = np.r_[np.ones(len(averaged[0])), np.zeros(len(averaged[1]))]
    assert row["n_id"] == 14 and row["auroc"] == pytest.approx(
        roc_auc_score(y, np.r_[averaged[0].max_prob, averaged[1].max_prob])
    )
    pooled = pool_orders(a)
    assert pooled.order is None and pooled.meta[ORDERS_POOLED] == "cyclic" and len(pooled) == len(a)
    # every (question, order) an example, on request: the accuracy of all the rows, not of the questions' mixtures
    assert calibration_rows({"t": pooled})[0]["acc"] == pytest.approx(np.mean(a.correct))
    assert calibration_rows({"t": averaged[0]})[0]["acc"] == pytest.approx(np.mean(averaged[0].correct))
    assert pool_orders(averaged[0]) is averaged[0]  # unpermuted: unchanged


def test_the_examples_of_records_orders_run():
    import doctest

    from lm_eval_evidential.records import orders

    failed, tried = doctest.testmod(orders)
    assert failed == 0 and tried >= 6
