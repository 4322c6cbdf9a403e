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


@FAST
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 3000), ties=st.booleans())
def test_spearman_equals_scipy(seed, n, ties):
    from scipy.stats import spearmanr

    rng = np.random.default_rng(seed)
    correct = rng.random(n) < 0.6
    score = rng.integers(0, 5, n).astype(float) if ties else rng.normal(size=n) + correct
    if correct.all() or not correct.any() or np.all(score == score[0]):
        return
    assert spearman(score, correct) == pytest.approx(spearmanr(score, correct).statistic, rel=1e-12, abs=1e-15)


def test_spearman_undefined_for_one_example():
    with pytest.warns(UndefinedMetricWarning, match="at least 2"):
        assert np.isnan(spearman([0.3], [1]))


# ---------------------------------------------------------------- AUGRC, E-AURC, risk@coverage, polygraph PRR
# The oracles below are ports of the reference implementations (read with the search tools):
# - fd-shifts (Traub et al.'s code), IML-DKFZ/fd-shifts@8ac4f6dbb5dd4bc3cb3a9756758f4ee31fd5aa5d
#   fd_shifts/analysis/rc_stats_utils.py ``generalized_risk_stats`` integrated as in rc_stats.py
#   (@56276af1d8d2ebcfe94c85bf06ad68c079169833) ``evaluate_auc``: ``-np.trapz(risks, coverages)``.
# - torch-uncertainty, ENSTA-U2IS-AI/torch-uncertainty@0d0df2b2e553139edeb2cdd1b99a88efb68f1945
#   src/torch_uncertainty/metrics/classification/risk_coverage.py ``AUGRC.compute``, ``RiskAtxCov``.
# - lm-polygraph, IINemo/lm-polygraph@efea882d810d07770e71d3a80e02416d09751435
#   src/lm_polygraph/ue_metrics/pred_rej_area.py ``PredictionRejectionArea``, ue_metric.py
#   ``normalize``/``get_random_scores``/``normalize_metric`` and utils/manager.py ``eval_ue``
#   (oracle ``ue_metric(-metric, metric)``). Neither package is installed: torch-uncertainty pulls
#   lightning and torchvision, lm-polygraph a full generation stack (transformers pins, openai,
#   spacy ...), far beyond a formula a page long.

from sklearn.metrics import roc_auc_score  # noqa: E402

from lm_eval_evidential.metrics.selective import (  # noqa: E402
    augrc,
    eaurc,
    prediction_rejection_area,
    prr_normalized,
    risk_at_coverage,
    selective_report,
)


def _fd_shifts_augrc(confids, residuals):
    n = len(residuals)
    idx = np.argsort(confids)
    residuals, confidence = residuals[idx], confids[idx]
    error_sum = sum(residuals)
    coverages, risks = [1.0], [error_sum / n]
    cov = n
    for i in range(n - 1):
        cov -= 1
        error_sum -= residuals[i]
        if confidence[i] != confidence[i + 1]:
            coverages.append(cov / n)
            risks.append(error_sum / n)
    coverages.append(0)
    risks.append(0)
    c, r = np.array(coverages), np.array(risks)
    return float(-np.sum((r[1:] + r[:-1]) * np.diff(c)) / 2)  # np.trapz, removed in numpy 2


def _torch_uncertainty_error_rates(scores, errors):
    errors = errors[np.argsort(-scores, kind="stable")]
    return np.cumsum(errors) / np.arange(1, len(scores) + 1)


def _torch_uncertainty_augrc(scores, errors):
    n = len(scores)
    rates = _torch_uncertainty_error_rates(scores, errors)
    cov = np.arange(1, n + 1) / n
    y = rates * cov
    return float(np.sum((y[1:] + y[:-1]) * np.diff(cov)) / 2) / (1 - 1 / n)


def _polygraph_normalize(target):
    min_t, max_t = np.min(target), np.max(target)
    if np.isclose(min_t, max_t):
        min_t -= 1
        max_t += 1
    return (np.array(target) - min_t) / (max_t - min_t)


def _polygraph_pra(estimator, target, max_rejection=1.0):
    target = _polygraph_normalize(target)
    ue = np.array(estimator)
    num_obs = len(ue)
    num_rej = int(max_rejection * num_obs)
    sorted_metrics = np.array(target)[np.argsort(ue)]
    cumsum = np.cumsum(sorted_metrics)[-num_rej:]
    scores = (cumsum / np.arange((num_obs - num_rej) + 1, num_obs + 1))[::-1]
    return np.sum(scores) / num_rej


def _polygraph_random(function, metrics, num_iter=1000, seed=42):
    rng = np.random.RandomState(seed)  # np.random.seed(seed) + np.random.shuffle in polygraph
    rand_scores = np.arange(len(metrics))
    values = []
    for _ in range(num_iter):
        rng.shuffle(rand_scores)
        values.append(function(rand_scores, metrics))
    return np.mean(values)


def _no_tie_case(seed, n):
    rng = np.random.default_rng(seed)
    correct = rng.random(n) < rng.uniform(0.2, 0.9)
    if correct.all() or not correct.any():
        correct[0] = not correct[0]
    score = rng.normal(size=n) + rng.uniform(0, 2) * correct  # continuous: no ties
    return score, correct


@FAST
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 300), ties=st.booleans())
def test_augrc_equals_fd_shifts_and_the_closed_form(seed, n, ties):
    rng = np.random.default_rng(seed)
    correct = rng.random(n) < 0.7
    score = rng.integers(0, 4, n).astype(float) if ties else rng.normal(size=n) + correct
    err = (~correct).astype(float)
    got = augrc(score, correct)
    assert got == pytest.approx(_fd_shifts_augrc(score, err), abs=1e-12)
    pi = err.mean()
    if 0 < pi < 1:  # closed form (Traub et al. 2024) with sklearn's AUROC (ties at half credit)
        auroc_f = roc_auc_score(correct, score)
        assert got == pytest.approx(0.5 * pi**2 + pi * (1 - pi) * (1 - auroc_f), abs=1e-12)
    # perfect ranking: pi^2 / 2; a constant score (random): pi / 2
    assert augrc(correct + rng.random(n) * 0.5, correct) == pytest.approx(0.5 * pi**2, abs=1e-12)
    assert augrc(np.zeros(n), correct) == pytest.approx(0.5 * pi, abs=1e-12)


@FAST
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 300))
def test_augrc_differs_from_torch_uncertainty_only_by_its_first_segment_and_rescaling(seed, n):
    score, correct = _no_tie_case(seed, n)
    err = (~correct).astype(float)
    top_error = err[np.argmax(score)]
    # torch-uncertainty drops the trapezoid from (0, 0) to (1/n, e_top/n) and divides by 1 - 1/n.
    want = (augrc(score, correct) - top_error / (2 * n * n)) / (1 - 1 / n)
    assert _torch_uncertainty_augrc(score, err) == pytest.approx(want, abs=1e-12)


@FAST
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 200), ties=st.booleans())
def test_eaurc_is_aurc_minus_the_perfect_rankings(seed, n, ties):
    rng = np.random.default_rng(seed)
    correct = rng.random(n) < 0.6
    score = rng.integers(0, 3, n).astype(float) if ties else rng.normal(size=n)
    perfect = correct + rng.random(n) * 0.5
    assert eaurc(score, correct) == pytest.approx(aurc(score, correct) - aurc(perfect, correct), abs=1e-12)
    assert eaurc(perfect, correct) == 0.0
    assert eaurc(score, correct) >= 0.0
    # The large-n limit fd-shifts subtracts, r + (1 - r) ln(1 - r), is within O(log n / n).
    r = 1 - correct.mean()
    if 0 < r < 1:
        limit = r + (1 - r) * np.log(1 - r)
        assert abs(aurc(perfect, correct) - limit) <= (np.log(n) + 2) / n


@FAST
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 200), cov=st.sampled_from([0.1, 0.25, 0.5, 0.8, 0.95, 1.0]))
def test_risk_at_coverage_equals_torch_uncertainty(seed, n, cov):
    score, correct = _no_tie_case(seed, n)
    err = (~correct).astype(float)
    rates = _torch_uncertainty_error_rates(score, err)
    want = rates[int(np.ceil(round(n * cov, 9))) - 1]  # RiskAtxCov: error_rates[ceil(n * cov) - 1]
    assert risk_at_coverage(score, correct, cov) == pytest.approx(want, abs=1e-12)
    assert risk_at_coverage(score, correct, 1.0) == pytest.approx(err.mean(), abs=1e-12)


def test_risk_at_coverage_rounds_the_float_product():
    # 0.7 * 10 = 7.000000000000001 in floating point: 7 examples are kept, not 8.
    assert risk_at_coverage(np.arange(10.0)[::-1], [1] * 7 + [0] * 3, 0.7) == 0.0
    for bad in (0.0, 1.01, -0.5):
        with pytest.raises(ValueError, match="coverage"):
            risk_at_coverage([1.0, 2.0], [1, 0], bad)


@FAST
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 200),
    max_rejection=st.sampled_from([1.0, 0.5, 0.75, 0.3]),
    continuous=st.booleans(),
)
def test_prr_normalized_equals_lm_polygraph(seed, n, max_rejection, continuous):
    rng = np.random.default_rng(seed)
    quality = rng.random(n) if continuous else (rng.random(n) < 0.6).astype(float)
    score = rng.normal(size=n) + quality  # no ties (polygraph breaks them by np.argsort's order)
    if int(max_rejection * n) == 0:
        with pytest.warns(UndefinedMetricWarning, match="no example is rejected"):
            assert np.isnan(prr_normalized(score, quality, max_rejection))
        return
    estimator = -score  # polygraph's estimator is an uncertainty
    area = _polygraph_pra(estimator, quality, max_rejection)
    assert prediction_rejection_area(score, quality, max_rejection) == pytest.approx(area, abs=1e-12)
    ue_metric = lambda e, t: _polygraph_pra(e, t, max_rejection)  # noqa: E731
    oracle = ue_metric(-quality, quality)
    exact_random = _polygraph_normalize(quality).mean()
    if np.isclose(oracle, exact_random, atol=1e-12):
        with pytest.warns(UndefinedMetricWarning, match="oracle and random"):
            assert np.isnan(prr_normalized(score, quality, max_rejection))
        return
    want = (area - exact_random) / (oracle - exact_random)
    assert prr_normalized(score, quality, max_rejection) == pytest.approx(want, abs=1e-10)
    if not continuous and (max_rejection * n).is_integer():
        assert prr_normalized(score, quality, max_rejection) == pytest.approx(prr(score, quality, max_rejection))


def test_prr_normalized_random_baseline_is_polygraphs_monte_carlo_expectation():
    rng = np.random.default_rng(7)
    quality = (rng.random(150) < 0.65).astype(float)
    score = rng.normal(size=150) + quality
    estimator = -score
    polygraph_random = _polygraph_random(_polygraph_pra, quality)  # 1000 seeded shuffles
    exact_random = quality.mean()
    assert polygraph_random == pytest.approx(exact_random, abs=3e-3)  # Monte Carlo error ~ 1e-3
    area, oracle = _polygraph_pra(estimator, quality), _polygraph_pra(-quality, quality)
    polygraph_value = (area - polygraph_random) / (oracle - polygraph_random)
    assert prr_normalized(score, quality) == pytest.approx(polygraph_value, abs=2e-2)


def test_new_selective_metrics_undefined_and_invalid():
    for fn in (augrc, eaurc):
        with pytest.warns(UndefinedMetricWarning, match="0 examples"):
            assert np.isnan(fn([], []))
    with pytest.warns(UndefinedMetricWarning, match="0 examples"):
        assert np.isnan(risk_at_coverage([], [], 0.5))
    with pytest.warns(UndefinedMetricWarning, match="oracle and random"):
        assert np.isnan(prr_normalized([0.1, 0.2, 0.3], [1, 1, 1]))
    with pytest.raises(ValueError, match="max_rejection"):
        prr_normalized([0.1, 0.2], [0, 1], max_rejection=0)
    with pytest.raises(ValueError, match="0 and 1"):
        augrc([0.1, 0.2], [0, 2])


# ---------------------------------------------------------------- the one-sort report


def _one_by_one(score, correct, caps, coverage):
    """Each metric called on its own, and the UndefinedMetricWarning messages in call order."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        row = {
            **{f"prr_{c}": prr(score, correct, c) for c in caps},
            "prr_normalized": prr_normalized(score, correct),
            "aurc": aurc(score, correct),
            "eaurc": eaurc(score, correct),
            "augrc": augrc(score, correct),
            f"risk_at_{coverage}": risk_at_coverage(score, correct, coverage),
            "spearman": spearman(score, correct),
        }
    return row, [str(w.message) for w in caught if issubclass(w.category, UndefinedMetricWarning)]


@FAST
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 300),
    ties=st.booleans(),
    accuracy=st.sampled_from([0.0, 0.3, 0.7, 1.0]),
    caps=st.sampled_from([(0.5, 0.75), (0.3,), (1.0, 0.5, 0.01)]),
    coverage=st.sampled_from([0.8, 0.25, 1.0]),
)
def test_selective_report_is_each_metric_exactly(seed, n, ties, accuracy, caps, coverage):
    """One sort gives the numbers of the metrics called one by one bit for bit (NaN where they are NaN),
    with the same warnings in the same order: the report's selective rows do not change."""
    import warnings

    rng = np.random.default_rng(seed)
    correct = rng.random(n) < accuracy
    score = rng.integers(0, 4, n).astype(float) if ties else rng.normal(size=n) + correct
    expected, expected_reasons = _one_by_one(score, correct, caps, coverage)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = selective_report(score, correct, prr_caps=caps, coverage=coverage)
    assert list(got) == list(expected)
    for key, value in expected.items():
        assert got[key] == value or (np.isnan(got[key]) and np.isnan(value)), key
    assert [str(w.message) for w in caught if issubclass(w.category, UndefinedMetricWarning)] == expected_reasons


def test_selective_report_sorts_each_score_once(monkeypatch):
    """The point of the report: one argsort of the score for every metric."""
    import lm_eval_evidential.metrics.rejection as rejection

    calls = []
    real = rejection.Ranking.__init__

    def counting(self, score):
        calls.append(score.size)
        real(self, score)

    monkeypatch.setattr(rejection.Ranking, "__init__", counting)
    rng = np.random.default_rng(0)
    correct = rng.random(500) < 0.6
    selective_report(rng.normal(size=500) + correct, correct)
    assert calls == [500]


def test_selective_report_refuses_what_the_metrics_refuse():
    with pytest.raises(ValueError, match="rejection_cap"):
        selective_report([0.1, 0.2], [0, 1], prr_caps=(0.5, 0.0))
    with pytest.raises(ValueError, match="coverage"):
        selective_report([0.1, 0.2], [0, 1], coverage=1.5)
    with pytest.raises(ValueError, match="0 and 1"):
        selective_report([0.1, 0.2], [0, 2])
