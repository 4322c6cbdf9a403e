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

from lm_eval_evidential.params import Interval, Param, Real

from ._validation import as_1d_float, as_binary_labels, check_same_length, undefined

# The PRR family lives in .rejection; its names stay importable from here, where callers and docs name them.
from .rejection import (
    Ranking,
    area_of,
    by_confidence,
    checked_rejection_cap,
    descending_two_valued,
    minmax_normalize,
    prediction_rejection_area,
    prr,
    prr_normalized,
    prr_normalized_unchecked,
    prr_unchecked,
    rejection_curve,
)

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
    "selective_report",
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
    return m / n, _risk(by_confidence(s, err))


def _risk(err_desc: np.ndarray) -> np.ndarray:
    """The risk of :func:`risk_coverage_curve` from the errors ordered most to least confident."""
    return np.cumsum(err_desc) / np.arange(1, err_desc.size + 1)


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
    return _aurc(risk)


def _aurc(risk: np.ndarray) -> float:
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
    if risk.size == 0:
        return undefined("eaurc is undefined for 0 examples")
    return _eaurc(risk)


def _eaurc(risk: np.ndarray) -> float:
    n = risk.size
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
    return _augrc(Ranking(s), err)


def _augrc(ranking: Ranking, err: np.ndarray) -> float:
    n = err.size
    last_of_group = np.r_[ranking.new_group[1:], True]
    coverage = np.r_[0.0, np.flatnonzero(last_of_group) + 1.0] / n
    risk = np.r_[0.0, np.cumsum(err[ranking.order])[last_of_group]] / n
    return float(np.sum((risk[1:] + risk[:-1]) * np.diff(coverage)) / 2)


#: ``coverage``: the share of the examples kept, the most confident first.
COVERAGE = Param(Interval(Real, 0, 1, closed="right"), why="the share of examples kept", example="coverage=0.8")


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
    cov = _coverage(coverage)
    _, risk = risk_coverage_curve(score, correct)
    if risk.size == 0:
        return undefined("risk_at_coverage is undefined for 0 examples")
    return _risk_at(risk, cov)


def _coverage(coverage) -> float:
    """``coverage`` checked against its declaration (:data:`COVERAGE`), as a float."""
    return float(COVERAGE.check("coverage", coverage))


def _risk_at(risk: np.ndarray, cov: float) -> float:
    return float(risk[int(np.ceil(round(cov * risk.size, 9))) - 1])


def spearman(score, correct) -> float:
    r"""Spearman rank correlation between ``score`` and correctness (``scipy.stats.spearmanr``'s numbers).

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
    check_same_length(score=s, correct=y)
    return _spearman(s, y)


def _spearman(s: np.ndarray, y: np.ndarray, ranking: Ranking | None = None) -> float:
    """:func:`spearman` of validated inputs (``y`` 0/1 floats); ``ranking``: ``s``'s, where the caller has it.

    The average ranks come from the score's one descending sort (a tie group whose ``lo`` examples score lower
    and ``hi`` no higher ranks ``(lo + hi + 1) / 2``, exact in float64) and from counting correctness's two
    groups; their correlation is ``np.corrcoef`` of the two rank rows, as ``scipy.stats.spearmanr`` computes it
    (tests: equal to scipy's)."""
    n = y.size
    if n < 2:
        return undefined(f"spearman is undefined for {n} example(s); it needs at least 2", stacklevel=4)
    if np.all(s == s[0]):
        return undefined("spearman is undefined: score is constant, so it has no ranking", stacklevel=4)
    if np.all(y == y[0]):
        return undefined(
            "spearman is undefined: all answers are equally correct, so correctness has no ranking", stacklevel=4
        )
    ranking = ranking or Ranking(s)
    above = np.flatnonzero(ranking.new_group)  # examples scoring higher than each tie group
    group_rank = 0.5 * ((n - above - ranking.sizes) + (n - above) + 1).astype(np.float64)
    rank_s = np.empty(n)
    rank_s[ranking.order] = group_rank[ranking.group]
    n_wrong = int(np.count_nonzero(y == 0))
    rank_y = np.where(y == 0, 0.5 * (n_wrong + 1), 0.5 * (n_wrong + n + 1))
    return float(np.corrcoef(np.vstack((rank_s, rank_y)))[1, 0])


def selective_report(score, correct, *, prr_caps=(0.5, 0.75), coverage: float = 0.8, ranking=None) -> dict:
    r"""Every selective-prediction metric of one score from a single sort, as a flat dict.

    The values equal those of :func:`prr` (at each cap), :func:`prr_normalized`, :func:`aurc`,
    :func:`eaurc`, :func:`augrc`, :func:`risk_at_coverage` and :func:`spearman` called one by one,
    exactly (the same operations on the same arrays), with their warnings in that order; but the
    score is sorted once, not once per metric, and the oracles' curves are counted, not sorted:

    .. math::

        \text{one order of } s \rightarrow Q(r),\ \mathrm{risk}(m / n),\ GR_g
        \rightarrow \mathrm{PRR}_{cap},\ \mathrm{PRR}_{norm},\ \mathrm{AURC},\ \mathrm{E\text{-}AURC},
        \ \mathrm{AUGRC},\ \mathrm{risk@cov}

    (Spearman's average ranks come from the same sort, see :func:`spearman`).

    Parameters
    ----------
    score : array-like of shape (n_samples,)
        Confidence; the most confident examples are kept first.
    correct : array-like of shape (n_samples,), 0/1 or bool
        1 for a right answer.
    prr_caps : sequence of float in (0, 1], default=(0.5, 0.75)
        The rejection caps of the ``prr_<cap>`` entries.
    coverage : float in (0, 1], default=0.8
        The coverage of the ``risk_at_<coverage>`` entry.
    ranking : Ranking, optional
        :class:`~lm_eval_evidential.metrics.rejection.Ranking` of this very score (as float64), when the caller
        made it to share the sort with others (:meth:`~lm_eval_evidential.metrics.rejection.Ranking.dense_ranks`);
        made here otherwise.

    Returns
    -------
    row : dict
        ``prr_<cap>`` for each cap, ``prr_normalized`` (over the whole rejection range), ``aurc``,
        ``eaurc``, ``augrc``, ``risk_at_<coverage>``, ``spearman``; NaN entries as the metric alone
        gives them (with its :class:`UndefinedMetricWarning`).

    Examples
    --------
    >>> from lm_eval_evidential.metrics.selective import selective_report
    >>> row = selective_report([0.9, 0.8, 0.7, 0.6, 0.5, 0.4], [1, 1, 0, 1, 0, 0])
    >>> {k: round(v, 4) for k, v in row.items()}  # doctest: +NORMALIZE_WHITESPACE
    {'prr_0.5': 1.0, 'prr_0.75': 0.697, 'prr_normalized': 0.8198, 'aurc': 0.2472, 'eaurc': 0.0556,
     'augrc': 0.1528, 'risk_at_0.8': 0.4, 'spearman': 0.6831}
    """
    caps = [checked_rejection_cap(c) for c in prr_caps]
    cov = _coverage(coverage)
    s = as_1d_float(score, "score")
    y = as_binary_labels(correct, "correct").astype(np.float64)
    n = check_same_length(score=s, correct=y)
    risk_key = f"risk_at_{coverage}"
    if n == 0:  # nothing to sort: each metric says in its own words why it is undefined
        return {
            **{f"prr_{c}": prr(s, y, c) for c in prr_caps},
            "prr_normalized": prr_normalized(s, y),
            "aurc": aurc(s, y),
            "eaurc": eaurc(s, y),
            "augrc": augrc(s, y),
            risk_key: risk_at_coverage(s, y, cov),
            "spearman": spearman(s, y),
        }
    ranking = Ranking(s) if ranking is None else ranking
    row = {f"prr_{c}": prr_unchecked(s, y, cap, ranking) for c, cap in zip(prr_caps, caps)}
    q = minmax_normalize(y)  # prr_normalized's quality: y itself, or 0.5 everywhere when y is constant
    row["prr_normalized"] = prr_normalized_unchecked(s, q, n, area_of(descending_two_valued(q), n), ranking)
    err = 1.0 - y
    risk = _risk(ranking.means(err))
    row["aurc"] = _aurc(risk)
    row["eaurc"] = _eaurc(risk)
    row["augrc"] = _augrc(ranking, err)
    row[risk_key] = _risk_at(risk, cov)
    row["spearman"] = _spearman(s, y, ranking)
    return row
