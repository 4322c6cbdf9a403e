import io
from fractions import Fraction
from itertools import permutations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lm_eval_evidential.metrics._validation import UndefinedMetricWarning
from lm_eval_evidential.metrics.selective import (
    aurc,
    prr,
    rejection_curve,
    risk_coverage_curve,
    spearman,
)
from lm_eval_evidential.plots import plot_risk_coverage

FAST = settings(max_examples=40, deadline=None)


# ---------------------------------------------------------------- brute-force oracles
# Everything below enumerates rejection orders explicitly (exact Fractions), so ties and the
# random baseline are true expectations over orderings, computed without the implementation's
# group-mean shortcut.


def _curve_of_order(order, quality):
    """Kept-mean quality after rejecting r = 0..n-1 examples; ``order`` runs least -> most confident."""
    n = len(order)
    return [sum(Fraction(quality[i]) for i in order[r:]) / (n - r) for r in range(n)]


def _mean_curve(orders, quality):
    curves = [_curve_of_order(o, quality) for o in orders]
    return [sum(c[r] for c in curves) / len(curves) for r in range(len(quality))]


def _score_orders(score):
    """All least->most-confident orders consistent with ``score`` (ties in any order)."""
    n = len(score)
    return [p for p in permutations(range(n)) if all(score[p[j]] <= score[p[j + 1]] for j in range(n - 1))]


def _area(curve, cap):
    n = len(curve)
    cap = Fraction(cap)
    total = Fraction(0)
    for r, q in enumerate(curve):
        lo, hi = Fraction(r, n), min(cap, Fraction(r + 1, n))
        if hi > lo:
            total += (hi - lo) * q
    return total


def _prr_brute(score, correct, cap):
    n = len(score)
    everything = list(permutations(range(n)))
    a_score = _area(_mean_curve(_score_orders(score), correct), cap)
    a_random = _area(_mean_curve(everything, correct), cap)
    a_oracle = _area(_curve_of_order(sorted(range(n), key=lambda i: correct[i]), correct), cap)
    return float((a_score - a_random) / (a_oracle - a_random)), a_random


small_cases = st.integers(3, 5).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 3), min_size=n, max_size=n),  # few values -> many ties
        st.lists(st.integers(0, 1), min_size=n, max_size=n).filter(lambda y: 0 < sum(y) < n),
    )
)


@FAST
@given(case=small_cases, cap=st.sampled_from([0.5, 0.75, 0.3, 1.0]))
def test_prr_matches_expectation_over_all_orderings(case, cap):
    score, correct = case
    if cap * len(score) <= 1:  # the oracle never rejects before the cap: 0/0
        with pytest.warns(UndefinedMetricWarning):
            assert np.isnan(prr(score, correct, cap))
        return
    want, a_random = _prr_brute(score, correct, cap)
    # The random baseline really is the constant mean: cap * accuracy.
    assert a_random == Fraction(cap) * Fraction(sum(correct), len(correct))
    assert prr(score, correct, cap) == pytest.approx(want, abs=1e-12)


@FAST
@given(case=small_cases)
def test_rejection_curve_matches_expectation_over_tie_orders(case):
    score, quality = case
    frac, curve = rejection_curve(score, quality)
    n = len(score)
    np.testing.assert_array_equal(frac, np.arange(n) / n)
    want = [float(v) for v in _mean_curve(_score_orders(score), quality)]
    np.testing.assert_allclose(curve, want, rtol=0, atol=1e-12)
    # An uncertainty is the negated score.
    np.testing.assert_allclose(rejection_curve(-np.array(score), quality, uncertainty=True)[1], curve)


def _lm_polygraph_style_area(score, correct, cap):
    """lm-polygraph PredictionRejectionArea: mean over r < cap*n of the kept mean (no ties)."""
    order = np.argsort(-np.asarray(score))  # most confident first
    q = np.asarray(correct, dtype=float)[order]
    n = len(q)
    num_rej = int(cap * n)
    kept = np.cumsum(q)[::-1] / np.arange(n, 0, -1)
    return kept[:num_rej].mean()


def test_prr_at_caps_half_and_three_quarters_matches_lm_polygraph_convention():
    rng = np.random.default_rng(123)
    n = 400
    correct = rng.random(n) < 0.7
    score = correct * 0.8 + rng.normal(0, 0.5, n)  # informative but noisy, no ties
    mean = correct.mean()
    for cap, expected_value in ((0.5, 0.69742207), (0.75, 0.78755129)):
        a = _lm_polygraph_style_area(score, correct, cap)
        a_orc = _lm_polygraph_style_area(correct + np.arange(n) * 1e-9, correct, cap)
        want = (a - mean) / (a_orc - mean)
        got = prr(score, correct, cap)
        assert got == pytest.approx(want, abs=1e-12)
        assert got == pytest.approx(expected_value, abs=1e-8)  # pinned regression values


@FAST
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(4, 200), cap=st.floats(0.3, 1.0))
def test_prr_properties(seed, n, cap):
    rng = np.random.default_rng(seed)
    correct = rng.random(n) < 0.6
    if correct.all() or not correct.any():
        correct[0] = not correct[0]
    score = rng.normal(size=n)
    p = prr(score, correct, cap)
    # Oracle ranking scores 1, a constant score 0 (ties averaged = random), exactly.
    assert prr(correct + rng.random(n) * 0.5, correct, cap) == pytest.approx(1.0, abs=1e-12)
    assert prr(np.zeros(n), correct, cap) == pytest.approx(0.0, abs=1e-12)
    # Strictly increasing transforms change nothing; reversing the score flips the sign of the gain.
    assert prr(np.exp(score), correct, cap) == p
    assert prr(3 * score + 1, correct, cap) == pytest.approx(p, abs=1e-12)
    assert p <= 1.0 + 1e-12
    perm = rng.permutation(n)
    assert prr(score[perm], correct[perm], cap) == pytest.approx(p, abs=1e-12)


def test_prr_is_continuous_in_the_cap():
    rng = np.random.default_rng(5)
    correct = rng.random(101) < 0.5
    score = rng.normal(size=101) + correct
    a = prr(score, correct, 50 / 101)
    assert prr(score, correct, 50 / 101 + 1e-9) == pytest.approx(a, abs=1e-6)
    assert prr(score, correct, 50 / 101 - 1e-9) == pytest.approx(a, abs=1e-6)


def test_prr_undefined_and_invalid():
    with pytest.warns(UndefinedMetricWarning, match="all 3 answers are correct"):
        assert np.isnan(prr([0.1, 0.2, 0.3], [1, 1, 1]))
    with pytest.warns(UndefinedMetricWarning, match="wrong"):
        assert np.isnan(prr([0.1, 0.2, 0.3], [0, 0, 0]))
    with pytest.warns(UndefinedMetricWarning, match="<= 1"):
        assert np.isnan(prr([0.1, 0.2], [0, 1], rejection_cap=0.5))
    with pytest.warns(UndefinedMetricWarning, match="0 examples"):
        assert np.isnan(prr([], []))
    for cap in (0.0, 1.5, -0.1):
        with pytest.raises(ValueError, match="rejection_cap"):
            prr([0.1, 0.2, 0.3], [0, 1, 1], cap)
    with pytest.raises(ValueError, match="0 and 1"):
        prr([0.1, 0.2], [0, 2])
    with pytest.raises(ValueError, match="non-finite"):
        prr([0.1, np.nan], [0, 1])


# ---------------------------------------------------------------- risk-coverage, AURC


def _aurc_brute(score, correct):
    n = len(score)
    orders = _score_orders(score)  # least -> most confident
    total = Fraction(0)
    for o in orders:
        most_first = o[::-1]
        total += sum(Fraction(sum(1 - correct[i] for i in most_first[:m]), m) for m in range(1, n + 1)) / n
    return float(total / len(orders))


@FAST
@given(
    case=st.integers(1, 6).flatmap(
        lambda n: st.tuples(
            st.lists(st.integers(0, 3), min_size=n, max_size=n), st.lists(st.integers(0, 1), min_size=n, max_size=n)
        )
    )
)
def test_aurc_matches_expectation_over_tie_orders(case):
    score, correct = case
    assert aurc(score, correct) == pytest.approx(_aurc_brute(score, correct), abs=1e-12)


def test_risk_coverage_curve_closed_form():
    cov, risk = risk_coverage_curve([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0])
    np.testing.assert_allclose(cov, [0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(risk, [0.0, 0.5, 1 / 3, 0.5])
    assert aurc([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0]) == pytest.approx((0 + 0.5 + 1 / 3 + 0.5) / 4)
    # Perfect ranking: (1/n) sum_{m > C} (m - C) / m.
    rng = np.random.default_rng(0)
    correct = rng.random(500) < 0.8
    c = int(correct.sum())
    optimal = sum((m - c) / m for m in range(c + 1, 501)) / 500
    assert aurc(correct + 0.1 * rng.random(500), correct) == pytest.approx(optimal, abs=1e-12)
    with pytest.warns(UndefinedMetricWarning):
        assert np.isnan(aurc([], []))


def test_plot_risk_coverage_returns_figure():
    from matplotlib.figure import Figure

    rng = np.random.default_rng(2)
    correct = rng.random(100) < 0.7
    fig = plot_risk_coverage(rng.normal(size=100) + correct, correct, label="max_prob", title="RC")
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert len(ax.lines) == 3 and ax.get_title() == "RC"
    assert plot_risk_coverage(rng.normal(size=100), correct, ax=ax, show_reference=False) is fig
    assert len(ax.lines) == 4
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    assert buf.getvalue().startswith(b"\x89PNG")


# ---------------------------------------------------------------- Spearman


def _average_ranks(x):
    ranks = [0.0] * len(x)
    for i, v in enumerate(x):
        below = sum(1 for w in x if w < v)
        equal = sum(1 for w in x if w == v)
        ranks[i] = below + (equal + 1) / 2
    return ranks


@FAST
@given(
    case=st.integers(2, 30).flatmap(
        lambda n: st.tuples(
            st.lists(st.integers(0, 5), min_size=n, max_size=n), st.lists(st.integers(0, 1), min_size=n, max_size=n)
        )
    )
)
def test_spearman_is_pearson_of_average_ranks(case):
    score, correct = case
    if len(set(score)) == 1 or len(set(correct)) == 1:
        with pytest.warns(UndefinedMetricWarning, match="constant|equally correct"):
            assert np.isnan(spearman(score, correct))
        return
    want = np.corrcoef(_average_ranks(score), _average_ranks(correct))[0, 1]
    assert spearman(score, correct) == pytest.approx(want, abs=1e-12)


def test_spearman_undefined_for_one_example():
    with pytest.warns(UndefinedMetricWarning, match="at least 2"):
        assert np.isnan(spearman([0.3], [1]))
