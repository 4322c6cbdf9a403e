"""Prediction rejection: how much of the oracle's gain does rejecting the least confident answers recover?

The prediction rejection ratio (PRR) of Malinin & Gales (2021) as lm-polygraph and Goloburda et al. (2026)
compute it, its rejection curve and lm-polygraph's normalised area. Split from
:mod:`lm_eval_evidential.metrics.selective` (which re-exports every name here) by what each part is: this module
ranks by *quality retained*, ``selective`` by *risk at coverage*.

Convention: ``score`` is a confidence, **higher = more confident**; the least confident examples are rejected
first. Ties: every metric is the expected value over uniformly random tie-breaking, obtained exactly by
replacing each example's quality with its tie group's mean (see :mod:`lm_eval_evidential.metrics.selective`).

References
----------
.. [1] Goloburda, M., Vashurin, R., Chernogorsky, F., Laiyk, N., Orel, D., Nakov, P. and
       Panov, M. (2026). Why Don't You Know? Evaluating the impact of uncertainty sources on
       uncertainty quantification in LLMs. arXiv:2604.10495, section 4.1 (PRR).
.. [2] Malinin, A. and Gales, M. (2021). Uncertainty estimation in autoregressive structured
       prediction. *ICLR* (the prediction rejection ratio).
.. [3] Fadeeva, E., Vashurin, R., Tsvigun, A., et al. (2023). LM-Polygraph: uncertainty estimation
       for language models. *EMNLP System Demonstrations* (``prr``, ``prr_normalized``).
"""

from __future__ import annotations

import numpy as np

from lm_eval_evidential.params import Interval, Param, Real, validate_params

from ._validation import as_1d_float, as_binary_labels, check_same_length, undefined

__all__ = ["rejection_curve", "prr", "prediction_rejection_area", "prr_normalized"]


class Ranking:
    """One score's examples from most to least confident and their tie groups: the one sort of a score, made
    once and shared by every curve drawn from it (the PRR caps, AURC, E-AURC, AUGRC and risk@coverage of
    :func:`~lm_eval_evidential.metrics.selective.selective_report`), since sorting is their whole cost at
    millions of examples. ``score`` is a validated non-empty float array."""

    __slots__ = ("order", "new_group", "group", "sizes")

    def __init__(self, score: np.ndarray):
        self.order = np.argsort(-score, kind="stable")
        s = score[self.order]
        self.new_group = np.r_[True, s[1:] != s[:-1]]
        self.group = np.cumsum(self.new_group) - 1
        self.sizes = np.bincount(self.group)

    def dense_ranks(self) -> np.ndarray:
        """Each example's dense rank in ascending score order, 0 for the lowest: ``np.unique(score,
        return_inverse=True)[1]`` of a score without NaN, read off this sort instead of sorting again (NaNs would
        each be a group of their own here, one group there)."""
        ranks = np.empty(self.order.size, dtype=np.int64)
        ranks[self.order] = self.group[-1] - self.group
        return ranks

    def means(self, quality: np.ndarray) -> np.ndarray:
        """``quality`` ordered from most to least confident, tie groups replaced by their group mean."""
        means = np.bincount(self.group, weights=quality[self.order]) / self.sizes
        return means[self.group]


def by_confidence(score: np.ndarray, quality: np.ndarray) -> np.ndarray:
    """Quality ordered from most to least confident, tie groups replaced by their group mean."""
    if score.size == 0:
        return np.zeros(0)
    return Ranking(score).means(quality)


def descending_two_valued(v: np.ndarray) -> np.ndarray:
    """``np.sort(v)[::-1]`` of a non-empty ``v`` that takes at most two values (0/1 correctness, or its min-max
    normalisation), by counting instead of sorting; it is also ``by_confidence(v, v)``, whose tie groups
    then hold equal values, so their means are those values exactly."""
    lo, hi = v.min(), v.max()
    n_hi = int(np.count_nonzero(v == hi))
    return np.repeat([hi, lo], [n_hi, v.size - n_hi])


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
    return np.arange(n) / n, _retained_means(by_confidence(s, q))


def _capped_area(curve: np.ndarray, cap: float) -> float:
    """``integral_0^cap curve[floor(n x)] dx``: the step curve integrated up to exactly ``cap``."""
    n = curve.size
    full = min(int(np.floor(cap * n)), n)
    area = curve[:full].sum() / n
    if full < n:
        area += (cap - full / n) * curve[full]
    return float(area)


#: The share of examples a rejection curve's area is read to: ``prr``'s ``rejection_cap``, the polygraph
#: areas' ``max_rejection``.
REJECTED_SHARE = Param(Interval(Real, 0, 1, closed="right"), why="the share of examples rejected at most")


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
    cap = checked_rejection_cap(rejection_cap)
    s = as_1d_float(score, "score")
    y = as_binary_labels(correct, "correct").astype(np.float64)
    check_same_length(score=s, correct=y)
    return prr_unchecked(s, y, cap)


def checked_rejection_cap(rejection_cap) -> float:
    """``rejection_cap`` checked against its declaration (:data:`REJECTED_SHARE`), as a float."""
    return float(REJECTED_SHARE.check("rejection_cap", rejection_cap))


def prr_unchecked(s: np.ndarray, y: np.ndarray, cap: float, ranking: Ranking | None = None) -> float:
    """:func:`prr` of validated inputs (``y`` 0/1 floats); ``ranking``: ``s``'s, where the caller has it."""
    n = y.size
    if n == 0:
        return undefined("prr is undefined for 0 examples", stacklevel=4)
    n_correct = int(y.sum())
    if n_correct in (0, n):
        state = "correct" if n_correct == n else "wrong"
        return undefined(
            f"prr is undefined: all {n} answers are {state}, so the oracle and random rejection "
            "curves coincide (PRR would be 0/0)",
            stacklevel=4,
        )
    if cap * n <= 1.0:
        return undefined(
            f"prr is undefined: rejection_cap * n = {cap} * {n} <= 1, so no example is rejected "
            "before the cap and every curve equals the overall accuracy",
            stacklevel=4,
        )
    mean = n_correct / n
    ranking = ranking or Ranking(s)
    # Subtract the random curve before integrating: the differences are what the ratio compares.
    a_score = _capped_area(_retained_means(ranking.means(y)) - mean, cap)
    a_oracle = _capped_area(_retained_means(descending_two_valued(y)) - mean, cap)
    return a_score / a_oracle


def minmax_normalize(quality: np.ndarray) -> np.ndarray:
    """lm-polygraph's ``normalize``: quality scaled to [0, 1]; a constant quality becomes 0.5."""
    lo, hi = quality.min(), quality.max()
    if np.isclose(lo, hi):
        lo, hi = lo - 1.0, hi + 1.0
    return (quality - lo) / (hi - lo)


def _polygraph_inputs(score, quality, max_rejection: float, name: str):
    """Validated ``(score, min-max quality, number rejected)``, or a reason the area is undefined."""
    cap = float(max_rejection)
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
    return s, minmax_normalize(q), n_rejected, None


def _polygraph_area(s: np.ndarray, q: np.ndarray, n_rejected: int, ranking: Ranking | None = None) -> float:
    q_desc = ranking.means(q) if ranking is not None else by_confidence(s, q)
    return area_of(q_desc, n_rejected)


def area_of(q_desc: np.ndarray, n_rejected: int) -> float:
    """The polygraph area of a quality already ordered from most to least confident."""
    return float(_retained_means(q_desc)[:n_rejected].mean())


@validate_params({"max_rejection": REJECTED_SHARE})
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


@validate_params({"max_rejection": REJECTED_SHARE})
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
    return prr_normalized_unchecked(s, q, n_rejected, area_of(by_confidence(q, q), n_rejected))


def prr_normalized_unchecked(s: np.ndarray, q: np.ndarray, n_rejected: int, oracle: float, ranking=None) -> float:
    """:func:`prr_normalized` of validated inputs (``q`` min-max normalised) given the oracle's area."""
    random = float(q.mean())
    if np.isclose(oracle, random, rtol=0.0, atol=1e-12):
        return undefined(
            f"prr_normalized is undefined: the oracle and random rejection areas coincide ({oracle:.6g}); "
            "the quality is constant over the rejected range, so there is nothing to rank",
            stacklevel=4,
        )
    return (_polygraph_area(s, q, n_rejected, ranking) - random) / (oracle - random)
