from itertools import combinations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lm_eval_evidential.metrics._validation import UndefinedMetricWarning
from lm_eval_evidential.metrics.accuracy_estimation import (
    atc,
    atc_by_score,
    atc_estimate,
    atc_threshold,
    doc_estimate,
)
from lm_eval_evidential.metrics.score_orders import (
    _dense_ranks,
    _discordant_merge,
    _discordant_pairs,
    _pair_counts,
    _tied_both,
    _tied_ranks,
    discordant_fraction,
    order_audit,
    score_order_audit,
)
from lm_eval_evidential.metrics.scores import available_scores, compute_score

FAST = settings(max_examples=60, deadline=None)
SEED_003_SIX = ("max_prob", "neg_entropy", "l2_norm", "l1_to_uniform", "l2_to_uniform", "js_to_uniform")


# ---------------------------------------------------------------- ATC


def _threshold_brute(scores, correct):
    """Maaz et al. (2023), Eq. 2 by enumeration, candidates = observed scores + inf, ties -> larger t."""
    n, acc = len(scores), sum(correct) / len(scores)
    best_t, best_gap = None, None
    for t in sorted(set(scores)) + [float("inf")]:
        gap = abs(sum(1 for s in scores if s >= t) / n - acc)
        if best_gap is None or gap <= best_gap + 1e-15:  # '<=': a later (larger) t wins ties
            best_t, best_gap = t, gap
    return best_t


id_sets = st.integers(1, 40).flatmap(
    lambda n: st.tuples(
        st.lists(st.one_of(st.integers(0, 6).map(float), st.floats(-5, 5)), min_size=n, max_size=n),
        st.lists(st.booleans(), min_size=n, max_size=n),
    )
)


@FAST
@given(case=id_sets)
def test_atc_threshold_matches_brute_force_eq2(case):
    scores, correct = case
    assert atc_threshold(scores, correct) == _threshold_brute(scores, correct)


@FAST
@given(
    case=st.integers(1, 40).flatmap(
        lambda n: st.tuples(
            st.lists(st.floats(-5, 5), min_size=n, max_size=n, unique=True),
            st.lists(st.booleans(), min_size=n, max_size=n),
        )
    )
)
def test_atc_on_the_id_split_recovers_accuracy_when_scores_are_distinct(case):
    scores, correct = case
    assert atc(scores, correct, scores) == sum(correct) / len(correct)


STRICTLY_INCREASING = {
    "exp": np.exp,
    "affine": lambda x: 3.0 * x - 7.0,
    "cube": lambda x: x**3 + x,
    "arctan": np.arctan,
    "logistic": lambda x: 1.0 / (1.0 + np.exp(-x)),
}


@FAST
@given(
    case=id_sets,
    target=st.lists(st.floats(-6, 6), min_size=1, max_size=40),
    g=st.sampled_from(sorted(STRICTLY_INCREASING)),
)
def test_atc_is_exactly_invariant_to_strictly_increasing_transforms(case, target, g):
    scores, correct = case
    f = STRICTLY_INCREASING[g]
    both = np.array(scores + target)
    # Floating point can merge two close values; the theorem is about transforms that keep
    # the order, so only keep cases where g really is order-preserving on these values.
    assume(np.array_equal(_dense_ranks(both), _dense_ranks(f(both))))
    assert atc(f(np.array(scores)), correct, f(np.array(target))) == atc(scores, correct, target)


def test_atc_direction_more_confident_target_gets_higher_estimate():
    # The reversed implementation (share *below* t) would give the opposite ordering.
    rng = np.random.default_rng(0)
    s_id = rng.random(1000)
    correct = rng.random(1000) < s_id  # ID accuracy ~0.5
    t = atc_threshold(s_id, correct)
    target = rng.random(1000)
    base = atc_estimate(t, target)
    up = atc_estimate(t, np.minimum(target + 0.2, 1.0))
    down = atc_estimate(t, target - 0.2)
    assert down < base < up
    assert atc(s_id, correct, s_id + 10.0) == 1.0  # every target above every ID score
    assert atc(s_id, correct, s_id - 10.0) == 0.0
    # Eq. 3 of Maaz et al. (2023) estimates the *error* as P(s < t); accuracy is its complement.
    assert base == pytest.approx(1.0 - np.mean(target < t))


def test_atc_extremes_and_validation():
    assert atc_threshold([0.2, 0.5, 0.9], [1, 1, 1]) == 0.2
    assert atc_threshold([0.2, 0.5, 0.9], [0, 0, 0]) == np.inf
    assert atc([0.2, 0.5, 0.9], [0, 0, 0], [5.0, 9.0]) == 0.0
    # ties: shares available are 1 (t=0.5) and 0 (t=inf); accuracy 0.5 is equidistant -> larger t
    assert atc_threshold([0.5, 0.5], [1, 0]) == np.inf
    with pytest.raises(ValueError, match="at least one"):
        atc_threshold([], [])
    with pytest.warns(UndefinedMetricWarning, match="empty"):
        assert np.isnan(atc([], [], [0.3]))
    with pytest.warns(UndefinedMetricWarning, match="empty target"):
        assert np.isnan(atc([0.3], [1], []))
    with pytest.raises(ValueError, match="NaN"):
        atc_estimate(float("nan"), [0.1])


def test_doc_estimate_closed_form_direction_and_range():
    s_id, y = [0.9, 0.8, 0.7, 0.6], [1, 1, 0, 1]
    assert doc_estimate(s_id, y, [0.5, 0.5]) == pytest.approx(0.75 - (0.75 - 0.5))
    assert doc_estimate(s_id, y, [0.95, 0.95]) > doc_estimate(s_id, y, [0.75]) == pytest.approx(0.75)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        doc_estimate([2.0, 3.0], [1, 0], [2.5])
    with pytest.warns(UndefinedMetricWarning):
        assert np.isnan(doc_estimate([0.5], [1], []))


def _grid_probs_k2(rng, n, denom=64):
    a = rng.integers(0, denom + 1, n) / denom  # dyadic: exact, includes 0, 1/2 and 1
    return np.stack([a, 1.0 - a], axis=1)


def test_atc_six_scores_agree_for_k2():
    rng = np.random.default_rng(3)
    p_id, p_t = _grid_probs_k2(rng, 500), _grid_probs_k2(rng, 300)
    correct = rng.random(500) < p_id.max(axis=1)
    k_id, k_t = np.full(500, 2), np.full(300, 2)
    est = atc_by_score(p_id, k_id, correct, p_t, k_t, names=SEED_003_SIX)
    assert set(est) == set(SEED_003_SIX)
    assert len(set(est.values())) == 1  # Theorem 1 + Lemma 1: one estimate, bit for bit
    assert set(atc_by_score(p_id, k_id, correct, p_t, k_t)) == set(available_scores(False))
    with pytest.raises(ValueError, match="unknown score"):
        atc_by_score(p_id, k_id, correct, p_t, k_t, names=["nope"])


# ---------------------------------------------------------------- orders


def _discordant_brute(a, b):
    return sum(1 for i, j in combinations(range(len(a)), 2) if (a[i] - a[j]) * (b[i] - b[j]) < 0)


def _tie_mismatch_brute(a, b):
    return sum(1 for i, j in combinations(range(len(a)), 2) if (a[i] == a[j]) != (b[i] == b[j]))


pairs_of_scores = st.integers(2, 40).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 5).map(float), min_size=n, max_size=n),
        st.lists(st.one_of(st.integers(0, 5).map(float), st.floats(-1, 1)), min_size=n, max_size=n),
    )
)


@FAST
@given(case=pairs_of_scores)
def test_discordant_fraction_matches_brute_force(case):
    a, b = case
    n = len(a)
    d = _discordant_brute(a, b)
    assert discordant_fraction(a, b) == d / (n * (n - 1) // 2)
    assert discordant_fraction(b, a) == discordant_fraction(a, b)
    assert _discordant_merge(_dense_ranks(np.array(a)), _dense_ranks(np.array(b))) == d


@FAST
@given(case=pairs_of_scores)
def test_order_audit_rows_match_brute_force(case):
    a, b = case
    n = len(a)
    (row,) = order_audit({"a": a, "b": b})
    total = n * (n - 1) // 2
    assert row["score_a"] == "a" and row["score_b"] == "b" and row["n_pairs"] == total
    assert row["discordant_fraction"] == _discordant_brute(a, b) / total
    assert row["tie_mismatch_fraction"] == _tie_mismatch_brute(a, b) / total
    assert row["order_equivalent"] == (_discordant_brute(a, b) == 0 and _tie_mismatch_brute(a, b) == 0)


def test_discordant_fraction_extremes_and_exact_count_at_scale():
    x = np.arange(10.0)
    assert discordant_fraction(x, -x) == 1.0
    assert discordant_fraction(x, np.exp(x)) == 0.0
    assert discordant_fraction(x, np.zeros(10)) == 0.0  # ties are never discordant
    with pytest.warns(UndefinedMetricWarning):
        assert np.isnan(discordant_fraction([1.0], [2.0]))
    # A large case where the tau-b route and the merge count must agree exactly.
    rng = np.random.default_rng(0)
    a = rng.integers(0, 1000, 100_000).astype(float)
    b = a + rng.normal(0, 100, a.size)
    n = a.size
    ra, rb = _dense_ranks(a), _dense_ranks(b)
    d = _discordant_merge(ra, rb)
    assert _discordant_pairs(ra, rb) == d  # via scipy's tau-b
    assert discordant_fraction(a, b) == d / (n * (n - 1) // 2)  # via scipy's count (_kendall_dis)
    assert _pair_counts(ra, rb, _tied_ranks(ra), _tied_ranks(rb)) == (d, _tied_both(ra, rb))
    # One ranking without ties (a permutation, counted without a sort), on either side.
    rc = _dense_ranks(b + rng.normal(0, 1e-3, n))
    assert _tied_ranks(rc) == 0 and _tied_ranks(ra) > 0
    want = _discordant_merge(ra, rc)
    assert _pair_counts(ra, rc, _tied_ranks(ra), 0) == (want, 0) == _pair_counts(rc, ra, 0, _tied_ranks(ra))
    assert _pair_counts(rb, rc, _tied_ranks(rb), 0) == (_discordant_merge(rb, rc), 0)


@FAST
@given(case=pairs_of_scores)
def test_pair_counts_without_scipys_private_count_are_the_same(case):
    """Where scipy no longer has ``_kendall_dis``, the tau-b route gives the same counts."""
    import lm_eval_evidential.metrics.score_orders as orders

    a, b = (np.array(v) for v in case)
    ra, rb = _dense_ranks(a), _dense_ranks(b)
    ties = (_tied_ranks(ra), _tied_ranks(rb))
    with_scipy = _pair_counts(ra, rb, *ties)
    saved, orders._kendall_dis = orders._kendall_dis, None
    try:
        assert _pair_counts(ra, rb, *ties) == with_scipy
    finally:
        orders._kendall_dis = saved
    assert with_scipy[0] == _discordant_brute(a, b)
    assert with_scipy[1] == sum(1 for i, j in combinations(range(len(a)), 2) if a[i] == a[j] and b[i] == b[j])


def test_order_audit_shape_and_counterexample_from_paper_003():
    # §2.5: p = (0.5, 0.2, 0.3), q = (0.5, 0.5, 0): tied in max_prob, not in l2_norm.
    probs = np.array([[0.5, 0.2, 0.3], [0.5, 0.5, 0.0]])
    rows = score_order_audit(probs, np.array([3, 3]), names=["max_prob", "l2_norm", "l2_to_uniform"])
    assert [(r["score_a"], r["score_b"]) for r in rows] == [
        ("max_prob", "l2_norm"),
        ("max_prob", "l2_to_uniform"),
        ("l2_norm", "l2_to_uniform"),
    ]
    by_pair = {(r["score_a"], r["score_b"]): r for r in rows}
    assert by_pair[("max_prob", "l2_norm")]["order_equivalent"] is False
    assert by_pair[("max_prob", "l2_norm")]["tie_mismatch_fraction"] == 1.0
    assert by_pair[("l2_norm", "l2_to_uniform")]["order_equivalent"] is True
    with pytest.warns(UndefinedMetricWarning):
        (row,) = order_audit({"a": [1.0], "b": [2.0]})
    assert row["order_equivalent"] is False and "reason" in row
    assert order_audit({}) == []
    with pytest.raises(ValueError, match="same length"):
        order_audit({"a": [1.0, 2.0], "b": [1.0]})


@FAST
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 300))
def test_theorem1_all_six_scores_order_equivalent_for_k2(seed, n):
    probs = _grid_probs_k2(np.random.default_rng(seed), n)
    rows = score_order_audit(probs, np.full(n, 2), names=SEED_003_SIX)
    assert len(rows) == 15
    assert all(r["order_equivalent"] for r in rows), [r for r in rows if not r["order_equivalent"]]


@FAST
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 300), k=st.sampled_from([3, 4, 5, 7]))
def test_theorem2_l2_norm_and_l2_to_uniform_order_equivalent_any_k(seed, n, k):
    rng = np.random.default_rng(seed)
    if k == 4:
        # Dyadic probabilities: every score is exact, so exact ties (permuted rows) are kept.
        counts = rng.multinomial(16, np.ones(k) / k, size=n)
        probs = counts / 16.0
    else:
        # 1/K is inexact here, so use continuous samples (no exact ties to disagree on).
        probs = rng.dirichlet(np.ones(k) * 0.5, size=n)
    rows = score_order_audit(probs, np.full(n, k), names=["l2_norm", "l2_to_uniform"])
    assert rows[0]["order_equivalent"], rows


def test_six_scores_are_not_all_equivalent_for_k3():
    # The converse of Theorem 1 for K >= 3 (Maaz et al. 2023, §2.5): some pairs disagree.
    rng = np.random.default_rng(7)
    probs = rng.dirichlet(np.ones(3), size=400)
    rows = score_order_audit(probs, np.full(400, 3), names=SEED_003_SIX)
    assert not all(r["order_equivalent"] for r in rows)
    pair = {(r["score_a"], r["score_b"]): r for r in rows}
    assert pair[("max_prob", "neg_entropy")]["discordant_fraction"] > 0


def test_score_functions_from_registry_agree_with_order_audit_input():
    rng = np.random.default_rng(11)
    probs = rng.dirichlet(np.ones(4), size=50)
    k = np.full(50, 4)
    rows = score_order_audit(probs, k, names=["max_prob", "neg_entropy"])
    direct = discordant_fraction(
        compute_score("max_prob", probs=probs, k=k), compute_score("neg_entropy", probs=probs, k=k)
    )
    assert rows[0]["discordant_fraction"] == direct
    with pytest.raises(ValueError, match="unknown score"):
        score_order_audit(probs, k, names=["nope"])
