"""records/orders.py: a permuted run's orders averaged into one record per question, and the one rule.

Oracles: the records of several members built by ``make_records`` (its own member path) from each
order's logits moved back to their options by a Python loop (EDL and softmax); for IB-EDL, whose
alpha is not a function of its logits, the mixture by closed form in numpy per question.
"""

from __future__ import annotations

import numpy as np
import pytest

from lm_eval_evidential.errors import OrderMismatchError, PermutedRecordsError, UnsupportedRequestError
from lm_eval_evidential.records import Records, make_records
from lm_eval_evidential.records.orders import ORDER_AVERAGED, average_orders, records_for_audit

FIELDS = ("doc_id", "k", "labels", "gold", "logits", "evidence", "alpha", "strength", "vacuity", "max_prob", "pred",
          "correct")  # fmt: skip
COLUMNS = ("doc_id", "k", "gold", "pred", "correct", "logits", "alpha", "evidence", "strength", "vacuity", "max_prob")


def permuted_run(method: str, *, seed=0, n=14, orders="cyclic", shuffle=False, lam=1.0) -> tuple[Records, dict]:
    """A permuted run of questions with K = 3 or 4 (so cyclic orders give 3 or 4 records a question), and
    each question's per-order logits and alpha by option (the oracle's input)."""
    rng = np.random.default_rng(seed)
    rows = {"doc_ids": [], "labels": [], "gold": [], "logits": [], "alpha": [], "order": []}
    by_option = {}
    for q in range(n):
        k = 3 + q % 2
        g = int(rng.integers(k))
        shifts = range(k) if orders == "cyclic" else [0, 2]
        for s in shifts:
            order = [(j + s) % k for j in range(k)]
            z = rng.normal(0, 2, size=k)
            a = np.logaddexp(0, z) + lam + (rng.uniform(0, 3, size=k) if method == "ib_edl" else 0.0)
            rows["doc_ids"].append(q)
            rows["labels"].append(list("ABCD"[:k]))
            rows["gold"].append(order.index(g))
            rows["logits"].append(z.tolist())
            rows["alpha"].append(a.tolist())
            rows["order"].append(order)
            z_opt, a_opt = [0.0] * k, [0.0] * k
            for j, o in enumerate(order):  # the oracle's own move back to the options' places
                z_opt[o], a_opt[o] = float(z[j]), float(a[j])
            by_option.setdefault(q, {"gold": g, "k": k, "z": [], "a": []})
            by_option[q]["z"].append(z_opt)
            by_option[q]["a"].append(a_opt)
    index = rng.permutation(len(rows["doc_ids"])) if shuffle else np.arange(len(rows["doc_ids"]))
    pick = {key: [v[i] for i in index] for key, v in rows.items()}
    made = make_records(
        task="t",
        doc_ids=pick["doc_ids"],
        labels=pick["labels"],
        gold=pick["gold"],
        logits=pick["logits"],
        alpha=None if method == "softmax" else pick["alpha"],
        prior_weight=lam,
        optional={"order": pick["order"]},
    )
    meta = {"method": method, "prior_weight": lam, "pretrained": "m", "permutations": {"spec": orders, "seed": 0}}
    return Records.from_rows(made, task="t", meta=meta), by_option


def _oracle_rows(by_option: dict, method: str, lam: float) -> list[dict]:
    """The records of each question's orders as its members, by make_records' own member path (one call per
    member count: a run of members has one count), sorted by question."""
    rows = []
    for m in sorted({len(v["z"]) for v in by_option.values()}):
        qs = sorted(q for q, v in by_option.items() if len(v["z"]) == m)
        rows += make_records(
            task="t",
            doc_ids=qs,
            labels=[list("ABCD"[: by_option[q]["k"]]) for q in qs],
            gold=[by_option[q]["gold"] for q in qs],
            logits=None,
            alpha=None,
            prior_weight=lam,
            optional={"member_logits": [by_option[q]["z"] for q in qs]},
            members_method=method,
        )
    return sorted(rows, key=lambda r: r["doc_id"])


@pytest.mark.parametrize("method", ["edl", "softmax"])
@pytest.mark.parametrize("orders", ["cyclic", "random:2"])
def test_the_average_is_the_records_of_the_orders_as_members(method, orders):
    lam = 0.7
    records, by_option = permuted_run(method, seed=1, orders=orders, lam=lam)
    avg = average_orders(records)
    want = _oracle_rows(by_option, method, lam)
    assert len(avg) == len(want) and avg.order is None and avg.phantom_logits is None
    for got, exp in zip(avg, want):
        for name in FIELDS:
            if exp[name] is None or name == "labels":
                assert got[name] == exp[name], name
            elif isinstance(exp[name], list):
                np.testing.assert_allclose(got[name], exp[name], rtol=1e-12, atol=1e-12, err_msg=name)
            elif isinstance(exp[name], float) and np.isnan(exp[name]):
                assert np.isnan(got[name]), name
            else:
                assert got[name] == pytest.approx(exp[name], rel=1e-12, abs=1e-12), name
    said = avg.meta[ORDER_AVERAGED]
    assert said["permutations"] == orders and said["records"] == len(records)
    assert said["orders_per_question"] == ([3, 4] if orders == "cyclic" else [2, 2])


def test_ib_edl_orders_mix_their_own_alpha_by_the_closed_form():
    records, by_option = permuted_run("ib_edl", seed=2, lam=1.0)
    avg = average_orders(records)
    for i, q in enumerate(sorted(by_option)):
        a = np.asarray(by_option[q]["a"])  # (orders, K) by option
        s = a.sum(axis=1, keepdims=True)
        p_bar = (a / s).mean(axis=0)
        alpha = p_bar / (1.0 / s).mean()
        k = by_option[q]["k"]
        np.testing.assert_allclose(avg.alpha[i, :k], alpha, rtol=1e-12)
        np.testing.assert_allclose(np.exp(avg.logits[i, :k]), p_bar, rtol=1e-12)
        assert avg.vacuity[i] == pytest.approx(np.mean(1.0 * k / s))  # the orders' mean vacuity
        assert avg.pred[i] == int(np.argmax(p_bar)) and avg.gold[i] == by_option[q]["gold"]


def test_the_average_does_not_depend_on_the_rows_order():
    a = average_orders(permuted_run("edl", seed=3)[0])
    b = average_orders(permuted_run("edl", seed=3, shuffle=True)[0])
    for name in COLUMNS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


def test_the_rule_refuses_without_the_request_and_passes_unpermuted_records():
    records, _ = permuted_run("edl")
    plain = Records.from_rows(
        make_records(task="p", doc_ids=[0], labels=[["A", "B"]], gold=[0], logits=[[0.0, 1.0]], alpha=[[1.7, 2.3]]),
        task="p",
        meta={"method": "ib_edl"},
    )
    with pytest.raises(
        PermutedRecordsError, match=r"t holds a permuted run \(cyclic: 49 records of 14 questions, 3-4 "
    ):
        records_for_audit([plain, records], command="ood", average=False, compared=True)
    assert records_for_audit([plain], command="ood", average=False, compared=True)[0] is plain
    with pytest.raises(OrderMismatchError, match="t is cyclic orders averaged and p is shown in one order"):
        records_for_audit([records, plain], command="ood", average=True, compared=True)
    kept = records_for_audit([records, plain], command="calibration", average=True, compared=False)
    assert kept[1] is plain and len(kept[0]) == 14


def test_records_of_several_members_in_several_orders_are_refused():
    rows = make_records(
        task="m",
        doc_ids=[0, 0],
        labels=[["A", "B"]] * 2,
        gold=[0, 1],
        logits=None,
        alpha=None,
        optional={"member_logits": [[[0.0, 1.0], [1.0, 0.0]]] * 2, "order": [[0, 1], [1, 0]]},
        members_method="edl",
    )
    records = Records.from_rows(rows, task="m", meta={"method": "edl", "permutations": {"spec": "cyclic"}})
    with pytest.raises(UnsupportedRequestError, match="several members .* in several answer orders"):
        average_orders(records)
