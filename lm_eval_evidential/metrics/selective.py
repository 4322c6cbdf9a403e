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


def _minmax(quality: np.ndarray) -> np.ndarray:
    """lm-polygraph's ``normalize``: quality scaled to [0, 1]; a constant quality becomes 0.5."""
    lo, hi = quality.min(), quality.max()
    if np.isclose(lo, hi):
        lo, hi = lo - 1.0, hi + 1.0
    return (quality - lo) / (hi - lo)


def _polygraph_inputs(score, quality, max_rejection: float, name: str):
    """Validated ``(score, min-max quality, number rejected)``, or a reason the area is undefined."""
    cap = float(max_rejection)
    if not (0.0 < cap <= 1.0):
        raise InvalidValueError(f"max_rejection must be in (0, 1], got {max_rejection!r}")
    s = as_1d_float(score, "score")
    q = as_1d_float(quality, "quality")
    n = check_same_length(score=s, quality=q)
    n_rejected = int(cap * n)
    if n_rejected == 0:
        return (
            s,
            q,
            0,
            (f"{name} is undefined: int(max_rejection * n) = int({cap} * {n}) = 0, so no example is rejected"),
        )
    return s, _minmax(q), n_rejected, None


def _polygraph_area(s: np.ndarray, q: np.ndarray, n_rejected: int) -> float:
    return float(_retained_means(_by_confidence(s, q))[:n_rejected].mean())


def prediction_rejection_area(score, quality, max_rejection: float = 1.0) -> float:
    r"""Area under the prediction-rejection curve as lm-polygraph computes it (its ``prr``).

    .. math::

        \mathrm{PRA} = \frac{1}{R} \sum_{r=0}^{R-1} \tilde Q(r), \qquad R = \lfloor
        \text{max\_rejection} \cdot n \rfloor,

    where :math:`\tilde Q(r)` is the mean *min-max normalised* quality (lm-polygraph's
    ``normalize``: ``(q - min) / (max - min)``, a constant quality becomes 0.5) of the ``n - r``
    most confident examples. This is lm-polygraph's ``PredictionRejectionArea(max_rejection)``,
    reported under the name ``prr`` (``prr_<max_rejection>`` below 1), unnormalised: higher is
    better, but its value depends on the accuracy. Use :func:`prr_normalized` to compare scores.

    Differences from lm-polygraph: ``score`` is a confidence (polygraph's ``estimator`` is an
    uncertainty, its negation), and ties in ``score`` are averaged (the expectation over random
    tie-breaking) where polygraph keeps ``np.argsort``'s order.

    Parameters
    ----------
    score : array-like of shape (n_samples,)
        Confidence; the least confident examples are rejected first.
    quality : array-like of shape (n_samples,)
        Per-example quality, higher = better (1/0 correctness, or a continuous generation metric).
    max_rejection : float in (0, 1], default=1.0
        Largest rejected fraction (lm-polygraph's ``max_rejection``).

    Returns
    -------
    area : float
        In ``[0, 1]``; NaN (with an :class:`UndefinedMetricWarning`) when
        ``int(max_rejection * n) == 0``.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.selective import prediction_rejection_area
    >>> score, correct = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4], [1, 1, 0, 1, 0, 0]
    >>> round(prediction_rejection_area(score, correct), 4)  # mean of [1/2, 3/5, 3/4, 2/3, 1, 1]
    0.7528
    """
    s, q, n_rejected, reason = _polygraph_inputs(score, quality, max_rejection, "prediction_rejection_area")
    if reason:
        return undefined(reason)
    return _polygraph_area(s, q, n_rejected)


def prr_normalized(score, quality, max_rejection: float = 1.0) -> float:
    r"""lm-polygraph's ``prr_normalized``: the rejection area between random (0) and oracle (1).

    .. math::

        \mathrm{PRR}_{norm} = \frac{\mathrm{PRA}(s) - \mathrm{PRA}_{random}}
        {\mathrm{PRA}(q) - \mathrm{PRA}_{random}}, \qquad
        \mathrm{PRA}_{random} = \frac{1}{n} \sum_i \tilde q_i

    with :math:`\mathrm{PRA}` :func:`prediction_rejection_area`. As lm-polygraph's
    ``UEManager.eval_ue`` computes it: the oracle is the area of the quality itself used as the
    confidence (polygraph's ``ue_metric(-metric, metric)``), and the random baseline is the
    area's expectation under a uniformly random rejection order. Polygraph estimates that
    expectation by 1000 seeded shuffles (``get_random_scores``); here it is exact: a uniformly
    random kept subset has expected mean quality equal to the overall mean at every ``r``, so
    the random area is the mean normalised quality. With 0/1 correctness and
    ``max_rejection * n`` an integer this equals :func:`prr` at ``rejection_cap=max_rejection``.

    Parameters
    ----------
    score : array-like of shape (n_samples,)
        Confidence; the least confident examples are rejected first.
    quality : array-like of shape (n_samples,)
        Per-example quality, higher = better.
    max_rejection : float in (0, 1], default=1.0
        Largest rejected fraction.

    Returns
    -------
    prr_normalized : float
        1 = oracle, 0 = random. NaN (with an :class:`UndefinedMetricWarning`) when the oracle
        equals random (a constant quality: nothing to rank) or ``int(max_rejection * n) == 0``.
        Polygraph returns the unnormalised area in the first case; a number that is not a
        ratio is not reported here.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.selective import prr_normalized
    >>> score, correct = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4], [1, 1, 0, 1, 0, 0]
    >>> round(prr_normalized(score, correct), 4)  # (0.7528 - 0.5) / (0.8083 - 0.5)
    0.8198
    >>> prr_normalized(score, correct, max_rejection=0.5)
    1.0
    """
    s, q, n_rejected, reason = _polygraph_inputs(score, quality, max_rejection, "prr_normalized")
    if reason:
        return undefined(reason)
    random = float(q.mean())
    oracle = _polygraph_area(q, q, n_rejected)
    if np.isclose(oracle, random, rtol=0.0, atol=1e-12):
        return undefined(
            f"prr_normalized is undefined: the oracle and random rejection areas coincide ({oracle:.6g}); "
            "the quality is constant over the rejected range, so there is nothing to rank"
        )
    return (_polygraph_area(s, q, n_rejected) - random) / (oracle - random)


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
