"""Selective prediction: does the confidence score rank correct answers above wrong ones?

Convention: ``score`` is a confidence, **higher = more confident** (the orientation of every
score in :mod:`lm_eval_evidential.metrics.scores`); the least confident examples are rejected
(abstained on) first. ``correct`` is 1 where the model's answer was right.

Ties in the score are handled the same way everywhere here: a metric is the **expected value
over all orderings of tied examples**, i.e. over breaking ties uniformly at random. Since every
curve point is a sum over the retained examples divided by a fixed count, that expectation is
obtained exactly by replacing each example's quality with the mean quality of its tie group
(linearity of expectation), which also makes every metric invariant to the input order.
References
----------
.. [1] Goloburda, M., Vashurin, R., Chernogorsky, F., Laiyk, N., Orel, D., Nakov, P. and
       Panov, M. (2026). Why Don't You Know? Evaluating the impact of uncertainty sources on
       uncertainty quantification in LLMs. arXiv:2604.10495, section 4.1 (PRR, Spearman).
.. [2] Malinin, A. and Gales, M. (2021). Uncertainty estimation in autoregressive structured
       prediction. *ICLR* (the prediction rejection ratio).
.. [3] Geifman, Y. and El-Yaniv, R. (2017). Selective classification for deep neural networks.
       *NeurIPS*, 4878-4887.
.. [4] Geifman, Y., Uziel, G. and El-Yaniv, R. (2019). Bias-reduced uncertainty estimation for
       deep neural classifiers. *ICLR* (AURC).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr as _scipy_spearmanr

from lm_eval_evidential.errors import InvalidValueError

from ._validation import as_1d_float, as_binary_labels, check_same_length, undefined

__all__ = ["rejection_curve", "prr", "risk_coverage_curve", "aurc", "spearman"]


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
    r"""Prediction-rejection curve: mean quality of what is kept after rejecting the least confident.

    For ``r = 0..n-1`` examples rejected,

    .. math::

        Q(r) = \frac{1}{n - r} \sum_{i \in \text{top}_{n-r}(s)} q_i,

    the mean ``quality`` of the ``n - r`` most confident examples (expected value over
    orderings of tied scores, see the module docstring). ``Q(0)`` is the overall mean.

    Parameters
    ----------
    score : array-like of shape (n_samples,)
        Confidence, higher = more confident (an uncertainty with ``uncertainty=True``).
    quality : array-like of shape (n_samples,)
        Any finite per-example quality (1/0 correctness for :func:`prr`).
    uncertainty : bool, default=False
        ``score`` is an uncertainty (higher = less confident): the most uncertain go first.

    Returns
    -------
    rejected_fraction, mean_quality : ndarray of shape (n_samples,)
        ``rejected_fraction[r] = r / n`` and ``mean_quality[r] = Q(r)``.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.selective import rejection_curve
    >>> fraction, quality = rejection_curve([0.9, 0.8, 0.7, 0.6, 0.5, 0.4], [1, 1, 0, 1, 0, 0])
    >>> quality.round(4).tolist()
    [0.5, 0.6, 0.75, 0.6667, 1.0, 1.0]
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
    r"""Prediction rejection ratio: how much of the oracle's rejection gain the score achieves.

    .. math::

        \mathrm{PRR} = \frac{A_{score} - A_{random}}{A_{oracle} - A_{random}},
        \qquad A = \int_0^{cap} Q(\lfloor n x \rfloor) \, dx

    (Malinin & Gales 2021), as used for selective generation by Goloburda et al. (2026),
    section 4.1, who cap rejection at 0.75 while earlier work used 0.5. 1 = ranks like the
    oracle, 0 = no better than random, < 0 = worse than random.

    Exact definition. ``Q(r)`` is the mean correctness of the ``n - r`` most confident
    examples (:func:`rejection_curve`; ties in ``score`` averaged, which equals the expectation
    over random tie-breaking). The integral is ``(1/n) sum_{r < R} Q(r) + (cap - R/n) Q(R)``
    with ``R = floor(cap n)`` (the last step is cut at ``cap``, so ``A`` is continuous in
    ``cap``). When ``cap * n`` is an integer and there are no ties, ``A / cap`` is
    lm-polygraph's ``PredictionRejectionArea(max_rejection=cap)``.

    - Oracle: reject the wrong answers first; ``Q*(r)`` = mean of the ``n - r`` largest
      correctness values.
    - Random: exact expectation, no Monte Carlo. Under a uniformly random rejection order the
      ``n - r`` kept examples are a uniform random subset, whose expected mean is the overall
      mean ``c = mean(correct)`` for every ``r``. So the random curve is the constant ``c`` and
      ``A_random = cap * c``.

    Parameters
    ----------
    score : array-like of shape (n_samples,)
        Confidence; the least confident examples are rejected first.
    correct : array-like of shape (n_samples,), 0/1 or bool
        1 where the model's answer was right (the quality whose mean is tracked).
    rejection_cap : float in (0, 1], default=0.5
        Largest rejected fraction integrated over.

    Returns
    -------
    prr : float
        NaN (with an :class:`UndefinedMetricWarning`) when ``A_oracle == A_random``: all
        answers correct or all wrong (nothing to rank), or ``cap * n <= 1`` (no example is
        rejected before the cap).

    Examples
    --------
    >>> from lm_eval_evidential.metrics.selective import prr
    >>> score, correct = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4], [1, 1, 0, 1, 0, 0]
    >>> prr(score, correct)  # up to half rejected, the score rejects like the oracle
    1.0
    >>> round(prr(score, correct, rejection_cap=0.75), 4)
    0.697
    """
    cap = float(rejection_cap)
    if not (0.0 < cap <= 1.0):
        raise InvalidValueError(f"rejection_cap must be in (0, 1], got {rejection_cap!r}")
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
    r"""Risk-coverage curve of selective classification (Geifman & El-Yaniv 2017).

    Keeping the ``m`` most confident examples (coverage ``m / n``, ``m = 1..n``), the selective
    risk is their error rate,

    .. math::

        \mathrm{risk}(m / n) = \frac{1}{m} \sum_{i \in \text{top}_m(s)} (1 - c_i).

    Ties in ``score`` are averaged (expected risk over random tie-breaking). Lower risk at
    every coverage is better.

    Parameters
    ----------
    score : array-like of shape (n_samples,)
        Confidence; the most confident examples are kept first.
    correct : array-like of shape (n_samples,), 0/1 or bool
        Correctness, whose complement is the risk.

    Returns
    -------
    coverage, risk : ndarray of shape (n_samples,)
        Coverage ascending; ``risk[-1]`` is the overall error rate.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.selective import risk_coverage_curve
    >>> coverage, risk = risk_coverage_curve([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0])
    >>> list(zip(coverage.tolist(), risk.round(4).tolist()))  # keep the 1, 2, 3, 4 most confident
    [(0.25, 0.0), (0.5, 0.5), (0.75, 0.3333), (1.0, 0.5)]
    """
    s = as_1d_float(score, "score")
    err = 1.0 - as_binary_labels(correct, "correct").astype(np.float64)
    n = check_same_length(score=s, correct=err)
    m = np.arange(1, n + 1)
    return m / n, np.cumsum(_by_confidence(s, err)) / m


def aurc(score, correct) -> float:
    r"""Area under the risk-coverage curve (Geifman, Uziel & El-Yaniv 2019).

    .. math::

        \mathrm{AURC} = \frac{1}{n} \sum_{m=1}^{n} \mathrm{risk}(m / n)

    the mean selective risk over the ``n`` coverage levels of :func:`risk_coverage_curve` (a
    right Riemann sum over coverage, no interpolation). Lower is better; range ``[0, 1]``. A
    perfect ranking attains ``(1/n) sum_{m > C} (m - C) / m`` with ``C`` correct answers,
    which is not 0 unless all are correct (subtract it for E-AURC). Ties in ``score`` are
    averaged.

    Parameters
    ----------
    score : array-like of shape (n_samples,)
        Confidence ranking the examples from kept-first to kept-last.
    correct : array-like of shape (n_samples,), 0/1 or bool
        1 for a right answer, 0 for an error counted in the risk.

    Returns
    -------
    aurc : float
        In ``[0, 1]``; NaN (with an :class:`UndefinedMetricWarning`) when there is no example.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.selective import aurc
    >>> round(aurc([0.9, 0.8, 0.7, 0.6, 0.5, 0.4], [1, 1, 0, 1, 0, 0]), 4)  # mean of [0, 0, 1/3, 1/4, 2/5, 1/2]
    0.2472
    """
    _, risk = risk_coverage_curve(score, correct)
    if risk.size == 0:
        return undefined("aurc is undefined for 0 examples")
    return float(risk.mean())


def spearman(score, correct) -> float:
    r"""Spearman rank correlation between ``score`` and correctness (``scipy.stats.spearmanr``).

    .. math::

        \rho = \mathrm{corr}(\mathrm{rank}(s), \mathrm{rank}(c))

    with average ranks for ties (0/1 correctness is two tie groups), as reported next to PRR by
    Goloburda et al. (2026). Positive = more confident examples are more often correct.

    Parameters
    ----------
    score : array-like of shape (n_samples,)
        Confidence, ranked with average ranks for ties.
    correct : array-like of shape (n_samples,), 0/1 or bool
        Correctness, two tie groups when ranked.

    Returns
    -------
    rho : float
        NaN (with an :class:`UndefinedMetricWarning`) when either input is constant or
        ``n < 2``.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.selective import spearman
    >>> round(spearman([0.9, 0.8, 0.7, 0.6, 0.5, 0.4], [1, 1, 0, 1, 0, 0]), 4)
    0.6831
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
