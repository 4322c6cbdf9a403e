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
       deep neural classifiers. *ICLR* (AURC, E-AURC).
.. [5] Traub, J., Bungert, T. J., Lüth, C. T., Baumgartner, M., Maier-Hein, K. H., Maier-Hein, L. and
       Jaeger, P. F. (2024). Overcoming common flaws in the evaluation of selective classification
       systems. *NeurIPS* (AUGRC; arXiv:2407.01032).
.. [6] Fadeeva, E., Vashurin, R., Tsvigun, A., et al. (2023). LM-Polygraph: uncertainty estimation
       for language models. *EMNLP System Demonstrations* (``prr``, ``prr_normalized``).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import spearmanr as _scipy_spearmanr

from lm_eval_evidential.errors import InvalidValueError

from ._validation import as_1d_float, as_binary_labels, check_same_length, undefined

# The PRR family lives in .rejection; its names stay importable from here, where callers and docs name them.
from .rejection import _by_confidence, prediction_rejection_area, prr, prr_normalized, rejection_curve

__all__ = [
    "rejection_curve",
    "prr",
    "prediction_rejection_area",
    "prr_normalized",
    "risk_coverage_curve",
    "aurc",
    "eaurc",
    "augrc",
    "risk_at_coverage",
    "spearman",
]


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


def eaurc(score, correct) -> float:
    r"""Excess AURC (Geifman, Uziel & El-Yaniv 2019): :func:`aurc` minus a perfect ranking's AURC.

    .. math::

        \mathrm{E\text{-}AURC} = \mathrm{AURC}(s) - \frac{1}{n} \sum_{m=C+1}^{n} \frac{m - C}{m}

    with ``C`` right answers: the second term is the AURC of the same estimator when every
    right answer is more confident than every wrong one, so E-AURC is 0 exactly for a perfect
    ranking and never negative (ties in ``score`` averaged). Lower is better. fd-shifts and
    several papers subtract the large-``n`` limit ``r + (1 - r) ln(1 - r)`` (``r`` the error
    rate) instead, which differs from the finite-``n`` optimum by ``O(log(n) / n)`` and can make a
    perfect ranking's E-AURC non-zero.

    Parameters
    ----------
    score, correct : array-like of shape (n_samples,)
        As for :func:`aurc`: confidence (kept first when higher) and 0/1 correctness.

    Returns
    -------
    eaurc : float
        ``>= 0``, 0 for a perfect ranking; NaN (with an :class:`UndefinedMetricWarning`) for 0 examples.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.selective import eaurc
    >>> score, correct = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4], [1, 1, 0, 1, 0, 0]
    >>> round(eaurc(score, correct), 4)  # 0.2472 - mean of [0, 0, 0, 1/4, 2/5, 1/2]
    0.0556
    >>> eaurc([3, 2, 1], [1, 1, 0])  # a perfect ranking
    0.0
    """
    _, risk = risk_coverage_curve(score, correct)
    n = risk.size
    if n == 0:
        return undefined("eaurc is undefined for 0 examples")
    n_wrong = int(round(risk[-1] * n))
    m = np.arange(1, n + 1)
    perfect = np.maximum(m - (n - n_wrong), 0) / m  # a perfect ranking's risk curve
    return max(float(np.mean(risk - perfect)), 0.0)  # pointwise: exactly 0 for a perfect ranking


def augrc(score, correct) -> float:
    r"""Area under the generalized risk-coverage curve (Traub et al. 2024).

    The generalized risk at a confidence threshold is the share of *all* examples that are
    accepted and wrong, :math:`GR(\tau) = P(\text{wrong}, s \ge \tau)` (the selective risk
    times the coverage), so a confident error costs its own weight instead of dominating the
    low-coverage end as in AURC. Following the authors' implementation (fd-shifts,
    ``RiskCoverageStats.augrc``, without its display factor of 1000): one curve point per distinct
    score (ties enter together), plus ``(0, 0)``, integrated by the trapezoidal rule,

    .. math::

        \mathrm{AUGRC} = \sum_{g} \frac{GR_{g-1} + GR_g}{2} (c_g - c_{g-1}),

    which equals the closed form :math:`\tfrac12 \pi^2 + \pi (1 - \pi)(1 - \mathrm{AUROC}_f)`
    (``pi`` the error rate, ``AUROC_f`` the AUROC of the score separating right from wrong answers,
    ties at half credit; Traub et al. 2024, appendix). Lower is better; a perfect ranking attains
    ``pi**2 / 2``, a random one ``pi / 2``. torch-uncertainty's ``AUGRC`` integrates without the
    ``(0, 0)`` point and rescales by ``1 / (1 - 1/n)``, a difference of ``O(1 / n)``.

    Parameters
    ----------
    score : array-like of shape (n_samples,)
        Confidence; the most confident examples are accepted first.
    correct : array-like of shape (n_samples,), 0/1 or bool
        1 for a right answer, 0 for an error.

    Returns
    -------
    augrc : float
        Between ``pi**2 / 2`` (perfect ranking) and ``pi - pi**2 / 2`` (reversed); NaN (with an
        :class:`UndefinedMetricWarning`) for 0 examples.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.selective import augrc
    >>> score, correct = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4], [1, 1, 0, 1, 0, 0]
    >>> round(augrc(score, correct), 4)  # 0.5 * 0.5**2 + 0.5 * 0.5 * (1 - 8/9)
    0.1528
    """
    s = as_1d_float(score, "score")
    err = 1.0 - as_binary_labels(correct, "correct").astype(np.float64)
    n = check_same_length(score=s, correct=err)
    if n == 0:
        return undefined("augrc is undefined for 0 examples")
    order = np.argsort(-s, kind="stable")
    s_desc = s[order]
    last_of_group = np.r_[s_desc[1:] != s_desc[:-1], True]
    coverage = np.r_[0.0, np.flatnonzero(last_of_group) + 1.0] / n
    risk = np.r_[0.0, np.cumsum(err[order])[last_of_group]] / n
    return float(np.sum((risk[1:] + risk[:-1]) * np.diff(coverage)) / 2)


def risk_at_coverage(score, correct, coverage: float) -> float:
    r"""Selective risk when the ``ceil(coverage * n)`` most confident examples are kept.

    .. math::

        \mathrm{risk@cov} = \mathrm{risk}(m / n), \qquad m = \lceil \text{coverage} \cdot n \rceil

    the error rate of the smallest most-confident share that covers at least ``coverage`` of the
    examples (torch-uncertainty's ``RiskAtxCov``; ``RiskAt80Cov`` is ``coverage=0.8``), with
    ties in ``score`` averaged (:func:`risk_coverage_curve`). ``coverage * n`` is rounded to 9
    decimals first, so that ``0.7 * 10`` keeps 7 examples, not 8. Lower is better.

    Parameters
    ----------
    score, correct : array-like of shape (n_samples,)
        As for :func:`risk_coverage_curve`.
    coverage : float in (0, 1]
        Share of the examples kept.

    Returns
    -------
    risk : float
        The error rate of the kept examples; NaN (with an :class:`UndefinedMetricWarning`) if none.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.selective import risk_at_coverage
    >>> score, correct = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4], [1, 1, 0, 1, 0, 0]
    >>> risk_at_coverage(score, correct, 0.5)  # the 3 most confident: one wrong
    0.3333333333333333
    """
    cov = float(coverage)
    if not (0.0 < cov <= 1.0):
        raise InvalidValueError(f"coverage must be in (0, 1], got {coverage!r}")
    _, risk = risk_coverage_curve(score, correct)
    n = risk.size
    if n == 0:
        return undefined("risk_at_coverage is undefined for 0 examples")
    return float(risk[int(np.ceil(round(cov * n, 9))) - 1])


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
