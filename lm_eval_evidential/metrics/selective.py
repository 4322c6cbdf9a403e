"""Selective prediction: does the confidence score rank correct answers above wrong ones?

Convention: ``score`` is a confidence, **higher = more confident** (the orientation of every
score in :mod:`lm_eval_evidential.metrics.scores`); the least confident examples are rejected
(abstained on) first. ``correct`` is 1 where the model's answer was right.

Ties in the score are handled the same way everywhere here: a metric is the **expected value
over all orderings of tied examples**, i.e. over breaking ties uniformly at random. Since every
curve point is a sum over the retained examples divided by a fixed count, that expectation is
obtained exactly by replacing each example's quality with the mean quality of its tie group
(linearity of expectation), which also makes every metric invariant to the input order.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr as _scipy_spearmanr

from ._validation import as_1d_float, as_binary_labels, check_same_length, undefined

__all__ = ["rejection_curve", "prr", "risk_coverage_curve", "aurc","spearman"]


def _by_confidence(score: np.ndarray, quality: np.ndarray) -> np.ndarray:
    """Quality ordered from most to least confident, tie groups replaced by their group mean."""
    if score.size == 0:
        return np.zeros(0)
    order = np.argsort(-score, kind="stable")
    s = score[order]
    q = quality[order]
    group = np.cumsum(np.r_[True, s[1:] != s[:-1]]) - 1
    means = np.bincount(group, weights=q) / np.bincount(group)
    return means[group]


def _retained_means(q_desc: np.ndarray) -> np.ndarray:
    """``out[r]`` = mean quality of the ``n - r`` first (most confident) entries, ``r = 0..n-1``."""
    n = q_desc.size
    kept = np.arange(n, 0, -1)
    return np.cumsum(q_desc)[::-1] / kept


def rejection_curve(score, quality, *, uncertainty: bool = False):
    """Prediction-rejection curve: mean quality of what is kept after rejecting the least confident.

    For ``r = 0..n-1`` examples rejected, returns ``(rejected_fraction, mean_quality)`` with
    ``rejected_fraction[r] = r / n`` and ``mean_quality[r]`` the mean ``quality`` of the
    ``n - r`` most confident examples (expected value over orderings of tied scores, see the
    module docstring). ``mean_quality[0]`` is the overall mean. ``quality`` may be any finite
    real per-example quality (1/0 correctness for :func:`prr`). With ``uncertainty=True``,
    ``score`` is an uncertainty (higher = less confident) and the most uncertain go first.
    """
    s = as_1d_float(score, "score")
    q = as_1d_float(quality, "quality")
    n = check_same_length(score=s, quality=q)
    if uncertainty:
        s = -s
    if n == 0:
        return np.zeros(0), np.zeros(0)
    return np.arange(n) / n, _retained_means(_by_confidence(s, q))


def _capped_area(curve: np.ndarray, cap: float) -> float:
    """``integral_0^cap curve[floor(n x)] dx``: the step curve integrated up to exactly ``cap``."""
    n = curve.size
    full = min(int(np.floor(cap * n)), n)
    area = curve[:full].sum() / n
    if full < n:
        area += (cap - full / n) * curve[full]
    return float(area)


def prr(score, correct, rejection_cap: float = 0.5) -> float:
    """Prediction rejection ratio: how much of the oracle's rejection gain the score achieves.

    ``PRR = (A_score - A_random) / (A_oracle - A_random)`` (Malinin & Gales 2021; the selective
    generation metric of Goloburda et al. (2026), §4.1, which caps rejection at 0.75 while earlier work used
    0.5). 1 = ranks like the oracle, 0 = no better than random, < 0 = worse than random.
    ``score``: higher = more confident; ``correct``: 1/0 quality.

    Exact definition. Let ``Q(r)`` be the mean correctness of the ``n - r`` most confident
    examples (:func:`rejection_curve`; ties in ``score`` averaged, which equals the expectation
    over random tie-breaking). The curve is the step function ``x -> Q(floor(n x))`` of the
    rejected fraction ``x`` and ``A = integral_0^cap Q(floor(n x)) dx``, i.e.
    ``(1/n) sum_{r < R} Q(r) + (cap - R/n) Q(R)`` with ``R = floor(cap n)`` (the last step is
    cut at ``cap``, so ``A`` is continuous in ``cap``). When ``cap * n`` is an integer and there
    are no ties, ``A / cap`` is lm-polygraph's ``PredictionRejectionArea(max_rejection=cap)``.

    - Oracle: reject the wrong answers first; ``Q*(r)`` = mean of the ``n - r`` largest
      correctness values.
    - Random: exact expectation, no Monte Carlo. Under a uniformly random rejection order the
      ``n - r`` kept examples are a uniform random subset, whose expected mean is the overall
      mean ``c = mean(correct)`` for every ``r``. So the random curve is the constant ``c`` and
      ``A_random = cap * c``.

    Undefined (NaN with a warning) when ``A_oracle == A_random``: all answers correct or all
    wrong (nothing to rank), or ``cap * n <= 1`` (no example is rejected before the cap).
    """
    cap = float(rejection_cap)
    if not (0.0 < cap <= 1.0):
        raise ValueError(f"rejection_cap must be in (0, 1], got {rejection_cap!r}")
    s = as_1d_float(score, "score")
    y = as_binary_labels(correct, "correct").astype(np.float64)
    n = check_same_length(score=s, correct=y)
    if n == 0:
        return undefined("prr is undefined for 0 examples")
    n_correct = int(y.sum())
    if n_correct in (0, n):
        state = "correct" if n_correct == n else "wrong"
        return undefined(
            f"prr is undefined: all {n} answers are {state}, so the oracle and random rejection "
            "curves coincide (PRR would be 0/0)"
        )
    if cap * n <= 1.0:
        return undefined(
            f"prr is undefined: rejection_cap * n = {cap} * {n} <= 1, so no example is rejected "
            "before the cap and every curve equals the overall accuracy"
        )
    mean = n_correct / n
    # Subtract the random curve before integrating: the differences are what the ratio compares.
    a_score = _capped_area(_retained_means(_by_confidence(s, y)) - mean, cap)
    a_oracle = _capped_area(_retained_means(np.sort(y)[::-1]) - mean, cap)
    return a_score / a_oracle


def risk_coverage_curve(score, correct):
    """Risk-coverage curve of selective classification (Geifman & El-Yaniv 2017).

    Keeping the ``m`` most confident examples (coverage ``m / n``, ``m = 1..n``), the selective
    risk is their error rate. Returns ``(coverage, risk)``, both shape (n,), coverage
    ascending; ``risk[-1]`` is the overall error rate. Ties in ``score`` are averaged
    (expected risk over random tie-breaking). Lower risk at every coverage is better.
    """
    s = as_1d_float(score, "score")
    err = 1.0 - as_binary_labels(correct, "correct").astype(np.float64)
    n = check_same_length(score=s, correct=err)
    m = np.arange(1, n + 1)
    return m / n, np.cumsum(_by_confidence(s, err)) / m


def aurc(score, correct) -> float:
    """Area under the risk-coverage curve, ``AURC = (1/n) sum_{m=1..n} risk(m / n)``.

    The convention of Geifman, Uziel & El-Yaniv (ICLR 2019, "Bias-reduced uncertainty
    estimation for deep neural classifiers"): the mean selective risk over the ``n`` coverage
    levels ``m / n`` of :func:`risk_coverage_curve` (a right Riemann sum over coverage, no
    interpolation). Lower is better; range ``[0, 1]``. A perfect ranking attains
    ``(1/n) sum_{m > C} (m - C) / m`` with ``C`` correct answers, which is not 0 unless all are
    correct (subtract it for E-AURC). Ties in ``score`` are averaged.
    """
    _, risk = risk_coverage_curve(score, correct)
    if risk.size == 0:
        return undefined("aurc is undefined for 0 examples")
    return float(risk.mean())


def spearman(score, correct) -> float:
    """Spearman rank correlation between ``score`` and correctness (scipy.stats.spearmanr).

    Ties get average ranks (0/1 correctness is two tie groups), as in Goloburda et al. (2026), §4.1, which
    reports it next to PRR. Positive = more confident examples are more often correct. NaN with a warning when either input is constant or ``n < 2``.
    """
    s = as_1d_float(score, "score")
    y = as_binary_labels(correct, "correct").astype(np.float64)
    n = check_same_length(score=s, correct=y)
    if n < 2:
        return undefined(f"spearman is undefined for {n} example(s); it needs at least 2")
    if np.all(s == s[0]):
        return undefined("spearman is undefined: score is constant, so it has no ranking")
    if np.all(y == y[0]):
        return undefined("spearman is undefined: all answers are equally correct, so correctness has no ranking")
    return float(_scipy_spearmanr(s, y).statistic)
