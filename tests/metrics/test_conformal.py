"""Conformal prediction sets against MAPIE, LLM-Uncertainty-Bench's formulas, and their coverage guarantee.

MAPIE 1.6.0 (scikit-learn-contrib, installed with the test extras: pure Python on top of
scikit-learn, nothing else) is the oracle for the quantile and for LAC end to end. Its APS differs
by design (a randomised calibration score, the crossing option included), so APS is checked
against LLM-Uncertainty-Bench's ``APS_CP`` (smartyfh/LLM-Uncertainty-Bench@b17c5e0da1927756498a76498bf10b61e657010f,
uncertainty_quantification_via_cp.py) ported below without its "empty set -> top option" rule,
and against a brute-force loop over options.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lm_eval_evidential.metrics._validation import UndefinedMetricWarning
from lm_eval_evidential.metrics.conformal import (
    _cells,
    conformal_quantile,
    nonconformity,
    prediction_sets,
    set_summary,
    set_summary_ci,
)

mapie_classification = pytest.importorskip("mapie.classification")
mapie_utils = pytest.importorskip("mapie.utils")

FAST = settings(max_examples=40, deadline=None)


def _mapie_lac_sets(probs_cal, y_cal, probs_test, alpha):
    from sklearn.base import BaseEstimator, ClassifierMixin

    probs = np.concatenate([probs_cal, probs_test])

    class Fixed(ClassifierMixin, BaseEstimator):  # a prefit "model" that returns the records' probabilities
        def fit(self, X, y):
            self.classes_ = np.arange(probs.shape[1])
            return self

        def predict_proba(self, X):
            return probs[np.asarray(X)[:, 0].astype(int)]

        def predict(self, X):
            return self.predict_proba(X).argmax(axis=1)

    X = np.arange(len(probs))[:, None]
    m = mapie_classification.SplitConformalClassifier(
        Fixed().fit(None, None), confidence_level=1 - alpha, conformity_score="lac", prefit=True
    )
    m.conformalize(X[: len(probs_cal)], y_cal)
    return m.predict_set(X[len(probs_cal) :])[1][:, :, 0]


def _ye_aps_cal_score(probs, truth):
    cal_pi = np.argsort(probs)[::-1]
    cal_sum = np.take_along_axis(probs, cal_pi, axis=0).cumsum()
    return np.take_along_axis(cal_sum, cal_pi.argsort(), axis=0)[truth]


def _ye_aps_set(probs, qhat):
    cal_pi = np.argsort(probs)[::-1]
    cal_sum = np.take_along_axis(probs, cal_pi, axis=0).cumsum()
    out = np.zeros(len(probs), dtype=bool)
    ii = 0
    while ii < len(cal_sum) and cal_sum[ii] <= qhat:
        out[cal_pi[ii]] = True
        ii += 1
    return out


@FAST
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 400), alpha=st.sampled_from([0.05, 0.1, 0.2, 0.5, 0.33]))
def test_quantile_equals_mapie_and_the_order_statistic(seed, n, alpha):
    s = np.random.default_rng(seed).random(n)
    rank = math.ceil((n + 1) * (1 - alpha) - 1e-9)
    got = conformal_quantile(s, alpha)
    if rank > n:
        assert got == math.inf
        with pytest.raises(ValueError):  # MAPIE/numpy: level above 1
            mapie_utils._compute_classification_quantile(s, np.array([alpha]))
        return
    assert got == np.sort(s)[rank - 1]
    assert got == mapie_utils._compute_classification_quantile(s, np.array([alpha]))[0]
    # LLM-Uncertainty-Bench's method="higher" at the same level is one order statistic above (when rank < n).
    ye = np.quantile(s, math.ceil((n + 1) * (1 - alpha)) / n, method="higher")
    assert ye == np.sort(s)[min(rank, n - 1)]


@FAST
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(2, 6), alpha=st.sampled_from([0.05, 0.1, 0.2]))
def test_lac_sets_equal_mapie(seed, k, alpha):
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.full(k, 0.7), size=300)
    y = np.array([rng.choice(k, p=p) for p in probs])
    cal, test = slice(0, 150), slice(150, 300)
    qhat = conformal_quantile(nonconformity(probs[cal], y[cal], "lac"), alpha)
    ours = prediction_sets(probs[test], qhat, "lac")
    np.testing.assert_array_equal(ours, _mapie_lac_sets(probs[cal], y[cal], probs[test], alpha))


@FAST
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(2, 6), ties=st.booleans())
def test_aps_scores_and_sets_equal_the_ported_formula_and_a_loop(seed, k, ties):
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.full(k, 0.7), size=60)
    if ties:  # round to few values, renormalise: tied options
        probs = np.round(probs * 4) + 1
        probs /= probs.sum(axis=1, keepdims=True)
    y = rng.integers(0, k, 60)
    scores = nonconformity(probs, y, "aps")
    for i, (p, t) in enumerate(zip(probs, y)):
        loop = sum(p[j] for j in range(k) if p[j] >= p[t])  # brute force: every option at least as probable
        assert scores[i] == pytest.approx(loop, abs=1e-12)
        if not ties:
            assert scores[i] == pytest.approx(_ye_aps_cal_score(p, t), abs=1e-12)
    for qhat in (0.3, 0.6, 0.9, float(np.median(scores))):
        sets = prediction_sets(probs, qhat, "aps")
        for i, p in enumerate(probs):
            loop = [1 - sum(p[m] for m in range(k) if p[m] < p[j]) <= qhat for j in range(k)]
            np.testing.assert_array_equal(sets[i], loop)
            if not ties and qhat < 0.95:  # the port's cumsum may round the full mass to 1 +/- 1e-16
                np.testing.assert_array_equal(sets[i], _ye_aps_set(p, qhat))


@FAST
@given(
    seed=st.integers(0, 2**32 - 1),
    k=st.integers(2, 6),
    ties=st.booleans(),
    lam=st.sampled_from([0.0, 0.001, 0.1, 0.5]),
    k_reg=st.integers(0, 3),
)
def test_raps_scores_equal_mapies_regularisation_and_sets_a_loop(seed, k, ties, lam, k_reg):
    """RAPS = APS + MAPIE's ``RAPSConformityScore._regularize_conformity_score`` (lambda * (rank - k_star)^+, the
    rank of the gold option as its position among the options sorted by probability, 1-based); the sets are every
    option whose own regularised score is at most qhat, by a loop; MAPIE's prediction-phase ``_add_regularization``
    on the sorted cumulative mass gives the same option scores where no two options tie."""
    from mapie.conformity_scores.sets.raps import RAPSConformityScore

    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.full(k, 0.7), size=50)
    if ties:
        probs = np.round(probs * 4) + 1
        probs /= probs.sum(axis=1, keepdims=True)
    y = rng.integers(0, k, 50)
    got = nonconformity(probs, y, "raps", lam=lam, k_reg=k_reg)
    aps = nonconformity(probs, y, "aps")
    rank = np.array([sum(p[j] >= p[t] for j in range(k)) for p, t in zip(probs, y)])  # ties: counted together
    mapie = RAPSConformityScore._regularize_conformity_score(np.array([k_reg]), lam, aps[:, None], rank)
    np.testing.assert_allclose(got, mapie[:, 0, 0], rtol=0, atol=1e-12)
    if not ties:  # MAPIE's prediction-phase scores: the sorted cumulative mass plus the same penalty
        score = RAPSConformityScore()
        score.lambda_star, score.k_star = lam, k_reg
        order = np.argsort(-probs, axis=1)
        cumsum = np.take_along_axis(probs, order, axis=1).cumsum(axis=1)
        regularised = score._add_regularization(cumsum.copy(), prediction_phase=True)
        ours = np.take_along_axis(
            np.stack([nonconformity(probs, np.full(50, j), "raps", lam=lam, k_reg=k_reg) for j in range(k)], 1),
            order,
            axis=1,
        )
        np.testing.assert_allclose(ours, regularised, rtol=0, atol=1e-12)
    for qhat in (0.5, 0.9, 1.05, float(np.median(got))):
        sets = prediction_sets(probs, qhat, "raps", lam=lam, k_reg=k_reg)
        for i, p in enumerate(probs):
            loop = [
                1 - sum(p[m] for m in range(k) if p[m] < p[j]) + lam * max(0, sum(p >= p[j]) - k_reg) <= qhat
                for j in range(k)
            ]
            np.testing.assert_array_equal(sets[i], loop)
    with pytest.raises(ValueError, match=r"lam=-0\.1 must be a finite number >= 0 \(RAPS's penalty"):
        nonconformity(probs, y, "raps", lam=-0.1)
    with pytest.raises(ValueError, match=r"k_reg=1\.5 must be an integer >= 0"):
        prediction_sets(probs, 0.5, "raps", k_reg=1.5)


def test_sets_respect_each_rows_own_k():
    probs = np.array([[0.5, 0.3, 0.2, np.nan], [0.25, 0.25, 0.25, 0.25]])
    for method in ("lac", "aps", "raps"):
        sets = prediction_sets(probs, math.inf, method)
        assert sets.tolist() == [[True, True, True, False], [True, True, True, True]]
    assert nonconformity(probs, [0, 3], "aps").tolist() == [0.5, 1.0]  # ties: all four options together


# ---------------------------------------------------------------- the coverage guarantee


def _mean_coverage(method, alpha, n_cal, n_seeds, rank_shift=0):
    """Mean test coverage over ``n_seeds`` exchangeable calibration/test draws (K = 4, no ties)."""
    covs = []
    for seed in range(n_seeds):
        rng = np.random.default_rng(seed)
        n = n_cal + 200
        probs = rng.dirichlet(np.full(4, 0.8), size=n)
        y = (rng.random(n)[:, None] > probs.cumsum(axis=1)).sum(axis=1)  # gold drawn from the model itself
        y = np.minimum(y, 3)
        cal_scores = nonconformity(probs[:n_cal], y[:n_cal], method)
        if rank_shift:
            rank = math.ceil((n_cal + 1) * (1 - alpha)) + rank_shift
            qhat = np.sort(cal_scores)[rank - 1]
        else:
            qhat = conformal_quantile(cal_scores, alpha)
        sets = prediction_sets(probs[n_cal:], qhat, method)
        covs.append(sets[np.arange(200), y[n_cal:]].mean())
    return float(np.mean(covs)), float(np.std(covs) / np.sqrt(n_seeds))


@pytest.mark.parametrize("method", ["lac", "aps", "raps"])
def test_coverage_within_the_finite_sample_bound_and_off_by_one_fails(method):
    # n = 19, alpha = 0.1: rank ceil(20 * 0.9) = 18, so without ties E[coverage] = 18/20 = 0.9 exactly,
    # inside [1 - alpha, 1 - alpha + 1/(n+1)] = [0.9, 0.95]. A rank one lower gives 0.85, one higher 0.95.
    alpha, n_cal, n_seeds = 0.1, 19, 400

    def within_bound(mean, se):
        return 1 - alpha - 4 * se <= mean <= 1 - alpha + 1 / (n_cal + 1) + 4 * se

    def at_its_rank(mean, se, rank):
        return abs(mean - rank / (n_cal + 1)) <= 4 * se

    mean, se = _mean_coverage(method, alpha, n_cal, n_seeds)
    assert se < 0.006
    assert within_bound(mean, se) and at_its_rank(mean, se, 18)
    low, se_low = _mean_coverage(method, alpha, n_cal, n_seeds, rank_shift=-1)
    assert not within_bound(low, se_low)  # the check fails for a quantile one order statistic too low
    high, se_high = _mean_coverage(method, alpha, n_cal, n_seeds, rank_shift=+1)
    assert not at_its_rank(high, se_high, 18)  # and detects one too high (0.95: at the bound's edge)


# ---------------------------------------------------------------- summaries


@FAST
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 80))
def test_set_summary_equals_a_loop(seed, n):
    rng = np.random.default_rng(seed)
    k = rng.choice([4, 5], size=n) if seed % 2 else np.full(n, 4)
    sets = (rng.random((n, 5)) < 0.5) & (np.arange(5) < k[:, None])
    gold = np.array([rng.integers(0, kk) for kk in k])
    correct = rng.random(n) < 0.6
    row = set_summary(sets, k, gold, correct) if len(set(k)) == 1 else None
    if row is None:
        with pytest.warns(UndefinedMetricWarning, match="different K"):
            row = set_summary(sets, k, gold, correct)
        assert math.isnan(row["uacc"])
    covered = [bool(sets[i, gold[i]]) for i in range(n)]
    sizes = [int(sets[i].sum()) for i in range(n)]
    assert row["coverage"] == pytest.approx(sum(covered) / n)
    assert row["mean_set_size"] == pytest.approx(sum(sizes) / n)
    assert row["share_empty"] == pytest.approx(sizes.count(0) / n)
    assert row["share_full"] == pytest.approx(sum(s == kk for s, kk in zip(sizes, k)) / n)
    for size, cov in row["coverage_by_size"].items():
        members = [c for c, s in zip(covered, sizes) if s == size]
        assert cov == pytest.approx(sum(members) / len(members)) and row["n_by_size"][size] == len(members)
    for kk, cov in row["coverage_by_k"].items():
        members = [c for c, x in zip(covered, k) if x == kk]
        assert cov == pytest.approx(sum(members) / len(members))
    if len(set(k)) == 1 and sum(sizes):
        assert row["uacc"] == pytest.approx(np.mean(correct) / np.mean(sizes) * math.sqrt(k[0]))


def test_multinomial_bootstrap_matches_resampling_the_examples():
    rng = np.random.default_rng(3)
    n = 300
    sets = rng.random((n, 4)) < 0.45
    gold, correct = rng.integers(0, 4, n), rng.random(n) < 0.6
    ci = set_summary_ci(sets, np.full(n, 4), gold, correct, n_boot=4000, seed=1)
    covered, size = sets[np.arange(n), gold], sets.sum(axis=1)
    idx = rng.integers(0, n, size=(4000, n))  # the textbook bootstrap: resample examples
    cov, ms = covered[idx].mean(axis=1), size[idx].mean(axis=1)
    uacc = correct[idx].mean(axis=1) / ms * 2
    for name, reps in (("coverage", cov), ("mean_set_size", ms), ("uacc", uacc)):
        want = np.quantile(reps, [0.025, 0.975])
        spread = want[1] - want[0]
        np.testing.assert_allclose(ci[name], want, atol=0.06 * spread)


@FAST
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 300), k_max=st.integers(2, 7))
def test_bootstrap_cells_are_numpys_unique_rows(seed, n, k_max):
    """The bootstrap's cells (covered, set size, correct, K) counted by key are np.unique's rows, in its order,
    with its counts: the multinomial draws, and so the intervals, are unchanged."""
    rng = np.random.default_rng(seed)
    kk = rng.integers(2, k_max + 1, n)
    columns = (rng.random(n) < 0.5, rng.integers(0, kk + 1), rng.random(n) < 0.6, kk)
    cells, counts = _cells(*columns)
    want_cells, want_counts = np.unique(np.stack(columns, axis=1).astype(np.int64), axis=0, return_counts=True)
    np.testing.assert_array_equal(cells, want_cells)
    np.testing.assert_array_equal(counts, want_counts)


def test_undefined_and_invalid():
    with pytest.warns(UndefinedMetricWarning, match="0 calibration"):
        assert math.isnan(conformal_quantile([], 0.1))
    for bad in (0, 1, -0.1, 1.5, "x"):
        with pytest.raises(ValueError, match="alpha"):
            conformal_quantile([0.1, 0.2], bad)
    with pytest.raises(ValueError, match="unknown conformal method"):
        prediction_sets([[0.5, 0.5]], 0.5, "thr")
    with pytest.raises(ValueError, match="not a probability vector"):
        prediction_sets([[2.0, 3.0]], 0.5)
    with pytest.raises(ValueError, match="qhat is NaN"):
        prediction_sets([[0.5, 0.5]], float("nan"))
    with pytest.warns(UndefinedMetricWarning, match="every prediction set is empty"):
        row = set_summary(np.zeros((2, 2), dtype=bool), [2, 2], [0, 1], [1, 0])
    assert row["coverage"] == 0.0 and math.isnan(row["uacc"]) and row["share_empty"] == 1.0
