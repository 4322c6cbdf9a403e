"""Detection metrics against scikit-learn, brute-force loops and their defining properties.

Convention under test: ID = positive = label 1, higher score = more in-distribution.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm
from sklearn.metrics import average_precision_score, roc_auc_score, roc_curve

from lm_eval_evidential.metrics import detection as M
from lm_eval_evidential.metrics import intervals
from lm_eval_evidential.metrics._validation import UndefinedMetricWarning

SETTINGS = settings(max_examples=80, deadline=None)


@st.composite
def labelled_scores(draw, tie_heavy=None, min_size=2, max_size=60):
    """(y, s) with both classes present; scores either tie-heavy (few integers) or floats."""
    n = draw(st.integers(min_size, max_size))
    y = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    y[0], y[1] = True, False
    heavy = draw(st.booleans()) if tie_heavy is None else tie_heavy
    elem = st.integers(-3, 3).map(float) if heavy else st.floats(-1e6, 1e6, allow_nan=False)
    s = np.array(draw(st.lists(elem, min_size=n, max_size=n)), dtype=float)
    return y.astype(int), s


# ---------------------------------------------------------------- oracles


def brute_fpr(y, s, tpr):
    y = y.astype(bool)
    best = np.inf
    for t in np.unique(s):
        if np.mean(s[y] >= t) >= tpr:
            best = min(best, np.mean(s[~y] >= t))
    return best


def brute_delong(y, *scores):
    """Textbook DeLong (1988): explicit psi kernel over all ID x OOD pairs, np.cov of components."""
    y = y.astype(bool)
    v10, v01, aucs = [], [], []
    for s in scores:
        x, z = s[y], s[~y]
        psi = (x[:, None] > z[None, :]) + 0.5 * (x[:, None] == z[None, :])
        v10.append(psi.mean(axis=1))
        v01.append(psi.mean(axis=0))
        aucs.append(psi.mean())
    cov = np.atleast_2d(np.cov(np.array(v10))) / y.sum() + np.atleast_2d(np.cov(np.array(v01))) / (~y).sum()
    return np.array(aucs), cov


# ---------------------------------------------------------------- agreement with scikit-learn


@SETTINGS
@given(labelled_scores())
def test_agrees_with_sklearn_including_heavy_ties(data):
    y, s = data
    assert abs(M.auroc(y, s) - roc_auc_score(y, s)) <= 1e-12
    assert abs(M.aupr_in(y, s) - average_precision_score(y, s)) <= 1e-12
    assert abs(M.aupr_out(y, s) - average_precision_score(1 - y, -s)) <= 1e-12
    fpr, tpr, _ = roc_curve(y, s, drop_intermediate=False)
    assert M.fpr_at_95_tpr(y, s) == fpr[np.argmax(tpr >= 0.95)]


def test_agrees_with_sklearn_large_tied():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 200_000)
    s = np.round(rng.normal(size=y.size) + 0.3 * y, 2)  # ~800 distinct values: heavy ties
    assert abs(M.auroc(y, s) - roc_auc_score(y, s)) <= 1e-12
    assert abs(M.aupr_in(y, s) - average_precision_score(y, s)) <= 1e-12
    assert abs(M.aupr_out(y, s) - average_precision_score(1 - y, -s)) <= 1e-12


# ---------------------------------------------------------------- properties


@SETTINGS
@given(labelled_scores(tie_heavy=False), st.sampled_from(["exp", "cube", "arctan", "affine"]))
def test_invariant_under_strictly_increasing_transform(data, kind):
    y, s = data
    s = np.round(s)  # integer scores: distinct values stay distinct after the transforms below
    f = {
        "exp": lambda v: np.exp(v / 2e5),
        "cube": lambda v: v**3,
        "arctan": lambda v: np.arctan(v / 1e5),
        "affine": lambda v: 3 * v - 7,
    }[kind]
    t = f(s)
    assert len(np.unique(t)) == len(np.unique(s))
    assert M.auroc(y, t) == M.auroc(y, s)
    assert M.aupr_in(y, t) == M.aupr_in(y, s)
    assert M.fpr_at_95_tpr(y, t) == M.fpr_at_95_tpr(y, s)


@SETTINGS
@given(labelled_scores())
def test_label_swap_complements_auroc_and_bounds(data):
    y, s = data
    a = M.auroc(y, s)
    assert abs(M.auroc(1 - y, s) - (1 - a)) <= 1e-12
    assert abs(M.auroc(y, -s) - (1 - a)) <= 1e-12
    assert abs(M.aupr_out(y, s) - M.aupr_in(1 - y, -s)) <= 1e-12
    for v in (a, M.aupr_in(y, s), M.aupr_out(y, s), M.fpr_at_95_tpr(y, s)):
        assert 0.0 <= v <= 1.0


@SETTINGS
@given(labelled_scores(), st.sampled_from([0.95, 0.5, 0.8, 1.0, 0.01]))
def test_fpr_matches_brute_force_threshold_loop(data, tpr):
    y, s = data
    assert M.fpr_at_95_tpr(y, s, tpr=tpr) == brute_fpr(y, s, tpr)


def test_fpr_tie_semantics_by_hand():
    # ID scores 1..20 and OOD all tied at 2: accepting >= 95% of ID (19 of 20) needs t <= 2,
    # which accepts the whole tied OOD block at once.
    y = np.r_[np.ones(20, int), np.zeros(5, int)]
    s = np.r_[np.arange(1, 21), np.full(5, 2)].astype(float)
    assert M.fpr_at_95_tpr(y, s) == 1.0
    s[20:] = 1.5
    assert M.fpr_at_95_tpr(y, s) == 0.0  # t = 2 keeps 19/20 ID and rejects every OOD


def test_perfect_and_reversed_separation():
    y = np.array([1, 1, 1, 0, 0])
    s = np.array([5.0, 4, 3, 2, 1])
    assert M.auroc(y, s) == 1.0 and M.aupr_in(y, s) == 1.0 and M.aupr_out(y, s) == 1.0
    assert M.fpr_at_95_tpr(y, s) == 0.0
    assert M.auroc(y, -s) == 0.0 and M.fpr_at_95_tpr(y, -s) == 1.0
    assert M.auroc(y, np.zeros(5)) == 0.5
    assert M.aupr_baseline(y) == 0.6


@pytest.mark.parametrize(
    "fn",
    [
        M.auroc,
        M.aupr_in,
        M.aupr_out,
        M.fpr_at_95_tpr,
        lambda y, s: M.delong_ci(y, s)[0],
        lambda y, s: M.delong_test(y, s, s)[0],
        lambda y, s: M.bootstrap_ci(M.auroc, y, s)[0],
        lambda y, s: M.detection_report(y, s)["auroc"],
    ],
)
def test_single_class_is_undefined_nan(fn):
    with pytest.warns(UndefinedMetricWarning, match="n_id=3, n_ood=0"):
        assert np.isnan(fn(np.ones(3, int), np.array([0.1, 0.2, 0.3])))


def test_input_validation():
    with pytest.raises(ValueError, match="same length"):
        M.auroc([1, 0, 1], [0.1, 0.2])
    with pytest.raises(ValueError, match="only 0 and 1"):
        M.auroc([1, 2], [0.1, 0.2])
    with pytest.raises(ValueError, match="non-finite"):
        M.auroc([1, 0], [0.1, np.nan])
    with pytest.raises(ValueError, match="tpr"):
        M.fpr_at_95_tpr([1, 0], [0.1, 0.2], tpr=0.0)
    with pytest.raises(ValueError, match="level"):
        M.delong_ci([1, 0], [0.1, 0.2], level=1.0)
    with pytest.raises(ValueError, match="n_boot"):
        M.bootstrap_ci(M.auroc, [1, 0], [0.1, 0.2], n_boot=1)
    with pytest.warns(UndefinedMetricWarning):
        assert np.isnan(M.aupr_baseline([]))


# ---------------------------------------------------------------- DeLong


@SETTINGS
@given(labelled_scores(min_size=4, max_size=40), st.sampled_from([0.9, 0.95, 0.99]))
def test_delong_ci_matches_textbook_variance(data, level):
    y, s = data
    if min(y.sum(), (1 - y).sum()) < 2:
        y[2], y[3] = 1, 0
    auc, lo, hi = M.delong_ci(y, s, level=level)
    aucs, cov = brute_delong(y, s)
    assert abs(auc - aucs[0]) <= 1e-12
    half = norm.ppf(0.5 + level / 2) * np.sqrt(cov[0, 0])
    assert abs(lo - max(0.0, auc - half)) <= 1e-9 and abs(hi - min(1.0, auc + half)) <= 1e-9
    assert 0.0 <= lo <= auc <= hi <= 1.0


@SETTINGS
@given(labelled_scores(min_size=4, max_size=40), st.integers(0, 2**32 - 1))
def test_delong_test_matches_textbook_covariance(data, seed):
    y, a = data
    if min(y.sum(), (1 - y).sum()) < 2:
        y[2], y[3] = 1, 0
    b = np.round(a + np.random.default_rng(seed).normal(scale=2.0, size=a.size))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)  # zero-variance draws are checked below
        auc_a, auc_b, diff, z, p = M.delong_test(y, a, b)
    aucs, cov = brute_delong(y, a, b)
    assert abs(auc_a - aucs[0]) <= 1e-12 and abs(auc_b - aucs[1]) <= 1e-12
    assert diff == auc_a - auc_b
    var = cov[0, 0] + cov[1, 1] - 2 * cov[0, 1]
    if var > 1e-12:
        assert abs(z - diff / np.sqrt(var)) <= 1e-6 * max(1.0, abs(z))
        assert abs(p - 2 * norm.sf(abs(diff / np.sqrt(var)))) <= 1e-9
        assert 0.0 <= p <= 1.0
    else:  # (numerically) zero variance: undefined, or a degenerate z
        assert np.isnan(z) or diff == 0 or abs(z) > 1e3


def test_delong_test_identical_rankings_is_undefined():
    y = np.array([1, 0, 1, 0, 1, 0])
    s = np.array([0.9, 0.1, 0.4, 0.5, 0.7, 0.2])
    with pytest.warns(UndefinedMetricWarning, match="variance"):
        auc_a, auc_b, diff, z, p = M.delong_test(y, s, np.exp(s))
    assert auc_a == auc_b and diff == 0.0 and np.isnan(z) and np.isnan(p)


def test_delong_se_agrees_with_bootstrap():
    rng = np.random.default_rng(7)
    y = np.r_[np.ones(300, int), np.zeros(300, int)]
    s = rng.normal(size=600) + 0.8 * y
    auc, lo, hi = M.delong_ci(y, s)
    est, blo, bhi = M.bootstrap_ci(M.auroc, y, s, n_boot=2000, seed=1)
    assert est == auc
    assert blo <= auc <= bhi
    ratio = (hi - lo) / (bhi - blo)
    assert 0.85 < ratio < 1.15, ratio


def test_delong_large_n_matches_an_independent_midrank_implementation():
    """1,000,000 examples with heavy ties: no int overflow, AUROC equals scikit-learn's, and the
    interval equals DeLong's variance computed independently from scipy's midranks (Sun & Xu
    2014). Speed is measured in benchmarks/bench_audit.py, not asserted here."""
    from scipy.stats import norm, rankdata

    rng = np.random.default_rng(11)
    n = 1_000_000
    y = rng.integers(0, 2, n).astype(bool)
    s = np.round(rng.normal(size=n) + 0.25 * y, 3)
    auc, lo, hi = M.delong_ci(y, s)
    assert abs(auc - roc_auc_score(y, s)) <= 1e-12
    n_id, n_ood = int(y.sum()), int((~y).sum())
    r_all, r_id, r_ood = rankdata(s), rankdata(s[y]), rankdata(s[~y])
    v10 = (r_all[y] - r_id) / n_ood
    v01 = 1.0 - (r_all[~y] - r_ood) / n_id
    half = norm.ppf(0.975) * np.sqrt(v10.var(ddof=1) / n_id + v01.var(ddof=1) / n_ood)
    assert abs(v10.mean() - auc) <= 1e-9
    assert lo == pytest.approx(auc - half, abs=1e-9) and hi == pytest.approx(auc + half, abs=1e-9)
    assert 0 < hi - lo < 0.01


# ---------------------------------------------------------------- bootstrap


def test_bootstrap_is_stratified_and_seeded():
    rng = np.random.default_rng(0)
    y = np.r_[np.ones(30, int), np.zeros(70, int)]
    s = rng.normal(size=100) + y
    n_id = lambda yy, ss: float(np.sum(yy))
    assert M.bootstrap_ci(n_id, y, s, n_boot=50) == (30.0, 30.0, 30.0)
    # the resampled ID scores come from the ID examples only
    max_id = lambda yy, ss: float(ss[yy.astype(bool)].max())
    est, lo, hi = M.bootstrap_ci(max_id, y, s, n_boot=200)
    assert hi <= s[:30].max() and lo >= s[:30].min()
    a = M.bootstrap_ci(M.aupr_in, y, s, n_boot=300, seed=5)
    assert a == M.bootstrap_ci(M.aupr_in, y, s, n_boot=300, seed=5)
    assert a != M.bootstrap_ci(M.aupr_in, y, s, n_boot=300, seed=6)
    assert a[1] <= a[0] <= a[2]


@SETTINGS
@given(labelled_scores(min_size=4), st.integers(0, 9))
def test_bootstrap_of_a_block_metric_equals_the_metric_on_each_resample(data, seed):
    # auroc / aupr_in / aupr_out replicates are counted on the data's blocks (no sort per replicate); a
    # wrapper takes the generic path, which resamples the scores and calls the function on each resample
    y, s = data
    if min(y.sum(), (1 - y).sum()) < 2:
        y[2], y[3] = 1, 0
    for metric, oracle in (
        (M.auroc, roc_auc_score),
        (M.aupr_in, average_precision_score),
        (M.aupr_out, lambda yy, ss: average_precision_score(1 - yy, -ss)),
    ):
        fast = M.bootstrap_ci(metric, y, s, n_boot=20, seed=seed)
        assert fast == M.bootstrap_ci(lambda yy, ss, f=metric: f(yy, ss), y, s, n_boot=20, seed=seed)
        np.testing.assert_allclose(fast, M.bootstrap_ci(oracle, y, s, n_boot=20, seed=seed), rtol=0, atol=1e-12)


def test_bootstrap_nan_replicates_are_reported():
    y = np.array([1, 0, 1, 0])
    with pytest.warns(UndefinedMetricWarning, match="replicates"):
        est, lo, hi = M.bootstrap_ci(lambda yy, ss: float("nan"), y, np.arange(4.0), n_boot=10)
    assert np.isnan(lo) and np.isnan(hi)


# ---------------------------------------------------------------- AUPR-In interval on large data


def ij_variance_by_finite_differences(y, s, eps=1e-6):
    """The infinitesimal-jackknife variance of AUPR-In, oracle: central differences of scikit-learn's
    weighted average precision in each example's weight, centred within each class."""
    y = y.astype(bool)
    g = np.empty(y.size)
    for i in range(y.size):
        w = np.ones(y.size)
        w[i] += eps
        up = average_precision_score(y, s, sample_weight=w)
        w[i] -= 2 * eps
        g[i] = (up - average_precision_score(y, s, sample_weight=w)) / (2 * eps)
    return float(((g[y] - g[y].mean()) ** 2).sum() + ((g[~y] - g[~y].mean()) ** 2).sum())


@settings(max_examples=25, deadline=None)
@given(labelled_scores(min_size=6, max_size=40))
def test_aupr_in_ij_variance_is_the_derivative_of_scikit_learns_weighted_ap(data):
    y, s = data
    y[2], y[3] = 1, 0  # two of each class
    ap, lo, hi = M.aupr_in_ij_ci(y, s)
    assert ap == pytest.approx(average_precision_score(y, s), abs=1e-12)
    var = ij_variance_by_finite_differences(y, s)
    if lo == hi:  # no spread (every ID example above every OOD one, or one tie): as in every bootstrap resample
        assert var < 1e-12 and lo == ap
        return
    # the interval is logit(ap) +- z se / (ap (1 - ap)): read se back from its width
    se = (np.log(hi / (1 - hi)) - np.log(lo / (1 - lo))) / (2 * norm.ppf(0.975)) * ap * (1 - ap)
    assert se**2 == pytest.approx(var, rel=1e-5, abs=1e-12)
    assert 0 < lo < ap < hi < 1


def test_aupr_in_ij_interval_of_one_tie_is_the_point_itself():
    """All examples in one tie: the spread is zero up to rounding (about 1e-33 here), and the interval is the
    estimate itself, not the estimate moved by an ulp through the logit round trip (hypothesis found it)."""
    y = np.array([0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0])
    ap, lo, hi = M.aupr_in_ij_ci(y, np.zeros(y.size))
    assert ap == average_precision_score(y, np.zeros(y.size)) and lo == ap == hi


def test_aupr_in_ij_interval_agrees_with_the_bootstrap_on_a_few_thousand_examples():
    rng = np.random.default_rng(3)
    y = np.r_[np.ones(3000, int), np.zeros(2000, int)]
    s = np.round(rng.normal(size=y.size) + 0.9 * y, 2)  # ties too
    ap, lo, hi = M.aupr_in_ij_ci(y, s)
    est, blo, bhi = M.bootstrap_ci(M.aupr_in, y, s, n_boot=2000, seed=1)
    assert est == ap
    width = bhi - blo
    assert 0.9 < (hi - lo) / width < 1.1, ((lo, hi), (blo, bhi))
    assert abs(lo - blo) < 0.1 * width and abs(hi - bhi) < 0.1 * width


def test_aupr_in_ij_interval_covers_the_population_value():
    """Coverage on binormal scores (ID ~ N(1, 1), OOD ~ N(0, 1), equal class sizes), whose population
    AUPR-In is the integral of the precision S1 / (S1 + S0) over the ID scores."""
    from scipy.integrate import quad

    truth = quad(lambda t: norm.sf(t - 1) / (norm.sf(t - 1) + norm.sf(t)) * norm.pdf(t - 1), -12, 14)[0]
    rng = np.random.default_rng(0)
    y = np.r_[np.ones(500, int), np.zeros(500, int)]
    covered = []
    for _ in range(400):
        _, lo, hi = M.aupr_in_ij_ci(y, rng.normal(size=y.size) + y)
        covered.append(lo <= truth <= hi)
    assert 0.92 <= np.mean(covered) <= 0.98, np.mean(covered)


def test_aupr_in_ij_undefined_and_degenerate_cases():
    with pytest.warns(UndefinedMetricWarning, match="both ID"):
        assert all(np.isnan(M.aupr_in_ij_ci([1, 1], [0.1, 0.2])))
    with pytest.warns(UndefinedMetricWarning, match="n_id=1"):
        ap, lo, hi = M.aupr_in_ij_ci([1, 0, 0], [0.9, 0.1, 0.2])
    assert ap == 1.0 and np.isnan(lo) and np.isnan(hi)
    assert M.aupr_in_ij_ci([1, 1, 0, 0], [0.9, 0.8, 0.2, 0.1]) == (1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="level"):
        M.aupr_in_ij_ci([1, 1, 0, 0], [0.9, 0.8, 0.2, 0.1], level=1.5)


def test_aupr_in_ci_bootstraps_small_data_and_takes_the_limit_on_large(monkeypatch):
    rng = np.random.default_rng(5)
    y = np.r_[np.ones(60, int), np.zeros(40, int)]
    s = rng.normal(size=100) + y
    assert M.aupr_in_ci(y, s, n_boot=300, seed=2) == M.bootstrap_ci(M.aupr_in, y, s, n_boot=300, seed=2)
    monkeypatch.setattr(intervals, "BOOTSTRAP_MAX_EXAMPLES", 99)
    assert M.aupr_in_ci(y, s, n_boot=300, seed=2) == M.aupr_in_ij_ci(y, s)
    assert np.isnan(M.aupr_in_ci(y, s, n_boot=0)[1:]).all()  # n_boot = 0: no interval at any size
    with pytest.raises(ValueError, match="n_boot"):
        M.aupr_in_ci(y, s, n_boot=1)


# ---------------------------------------------------------------- one-sort report


@SETTINGS
@given(labelled_scores(min_size=4))
def test_detection_report_equals_single_metrics(data):
    y, s = data
    if min(y.sum(), (1 - y).sum()) < 2:
        y[2], y[3] = 1, 0
    r = M.detection_report(y, s)
    assert r["auroc"] == M.auroc(y, s)
    assert (r["auroc"], r["auroc_lo"], r["auroc_hi"]) == M.delong_ci(y, s)
    assert r["aupr_in"] == M.aupr_in(y, s) and r["aupr_out"] == M.aupr_out(y, s)
    assert r["fpr_at_tpr"] == M.fpr_at_95_tpr(y, s)
    assert r["aupr_baseline"] == M.aupr_baseline(y)
    assert r["n_id"] + r["n_ood"] == y.size and r["reason"] is None
