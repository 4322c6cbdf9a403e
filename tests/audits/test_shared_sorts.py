"""One computation of each score and one sort of it, shared by the report's sections (issue 36 class 7: the
report on 2M + 2M records): a kept score is what compute_score gives, a shared sort gives what sorting again
gives, and the audits' rows do not depend on whether a section before them kept anything."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lm_eval_evidential.audits import quality
from lm_eval_evidential.audits._common import keep_dense_ranks, record_scores, taken_dense_ranks
from lm_eval_evidential.metrics.rejection import Ranking
from lm_eval_evidential.metrics.score_orders import order_audit
from lm_eval_evidential.metrics.scores import available_scores, compute_score
from lm_eval_evidential.metrics.selective import selective_report
from lm_eval_evidential.records import Records, make_record

# Few distinct values, so that ties are common; -0.0 and 0.0 are one value for both sorts.
tied_values = st.lists(
    st.sampled_from([-1.5, -0.0, 0.0, 0.25, 0.25 + 1e-16, 1.0, 3.0, np.inf]), min_size=1, max_size=60
)


@settings(max_examples=200, deadline=None)
@given(values=tied_values)
def test_a_rankings_dense_ranks_are_np_uniques_inverse(values):
    s = np.array(values, dtype=np.float64)
    assert np.array_equal(Ranking(s).dense_ranks(), np.unique(s, return_inverse=True)[1])


@settings(max_examples=100, deadline=None)
@given(a=tied_values, seed=st.integers(0, 2**32 - 1))
def test_order_audit_with_ranks_given_is_the_order_audit(a, seed):
    a = np.array(a, dtype=np.float64)
    a = np.where(np.isinf(a), 7.0, a)  # the order audit takes finite scores only
    b = np.random.default_rng(seed).permutation(a)
    c = np.round(a * 0.5)
    scores = {"a": a, "b": b, "c": c}
    given_ranks = {name: Ranking(v).dense_ranks() for name, v in scores.items() if name != "c"}
    assert repr(order_audit(scores, ranks=given_ranks)) == repr(order_audit(scores))  # repr: NaN == NaN


@settings(max_examples=60, deadline=None)
@given(values=tied_values, correct_seed=st.integers(0, 2**32 - 1))
def test_selective_report_with_its_ranking_given_is_the_selective_report(values, correct_seed):
    s = np.array(values, dtype=np.float64)
    s = np.where(np.isinf(s), 7.0, s)
    y = np.random.default_rng(correct_seed).integers(0, 2, s.size)
    assert selective_report(s, y, ranking=Ranking(s)) == pytest.approx(selective_report(s, y), nan_ok=True, abs=0)


def _records(task: str, n: int, seed: int) -> Records:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        z = np.round(rng.normal(0.0, 2.0, size=4), 1)  # rounded: tied scores
        alpha = np.logaddexp(0.0, z) + 1.0
        rows.append(
            make_record(task=task, doc_id=i, labels=list("ABCD"), gold=int(rng.integers(4)), logits=z, alpha=alpha)
        )
    return Records.from_rows(rows, task=task, meta={"method": "edl", "prior_weight": 1.0, "pretrained": "synthetic"})


def test_a_kept_score_is_compute_scores_value_and_read_only():
    r = _records("id4", 50, 0)
    names = available_scores(True)
    kept = record_scores(r, names)
    for name in names:
        fresh = compute_score(name, probs=None, k=r.k, alpha=r.alpha, prior_weight=r.prior_weight)
        assert np.array_equal(kept[name], fresh, equal_nan=True), name
        assert record_scores(r, [name])[name] is kept[name]  # computed once
        with pytest.raises(ValueError):
            kept[name][0] = 0.0
    keep = np.arange(len(r)) % 3 != 0  # a subset is computed, not kept
    assert np.array_equal(record_scores(r, names[:1], keep)[names[0]], kept[names[0]][keep])


def test_dense_ranks_are_handed_over_once_and_never_for_a_score_with_nan():
    r = _records("id4", 30, 1)
    s = record_scores(r, ["max_prob"])["max_prob"]
    keep_dense_ranks(r, "max_prob", Ranking(s))
    taken = taken_dense_ranks(r)
    assert np.array_equal(taken["max_prob"], np.unique(s, return_inverse=True)[1])
    assert taken_dense_ranks(r) == {}
    keep_dense_ranks(r, "max_prob", Ranking(np.r_[s[:-1], np.nan]))  # not this score's sort: a NaN in it
    assert "max_prob" not in taken_dense_ranks(r) or not np.isnan(s).any()


def test_the_order_rows_after_the_selective_rows_are_the_order_rows_alone(monkeypatch):
    """The report runs selective_rows (which keeps each score's dense ranks) before order_rows (which takes
    them); on fresh records, order_rows sorts every score itself. Same rows, bit for bit."""
    import lm_eval_evidential.metrics.score_orders as orders

    alone = {t: _records(t, 80, seed) for t, seed in (("id4", 2), ("ood4", 3))}
    expected = [dict(row) for row in quality.order_rows(alone)]
    shared = {t: _records(t, 80, seed) for t, seed in (("id4", 2), ("ood4", 3))}
    quality.selective_rows(shared)

    def no_sort(x):
        raise AssertionError("order_rows sorted a score that selective_rows had sorted")

    monkeypatch.setattr(orders, "_dense_ranks", no_sort)
    assert [dict(row) for row in quality.order_rows(shared)] == expected
