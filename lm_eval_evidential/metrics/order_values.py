"""A per-row value (a score, the probabilities) across its question's orders: numpy/scipy over (question, order) rows.

The rows are :mod:`.order_effects`' (one per question and order; ``slots`` from
:func:`~lm_eval_evidential.metrics.order_effects.order_slots`, which re-exports these):

- :func:`order_spread` and :func:`rank_correlation_to_identity`: how much a per-row score moves
  across a question's orders, and how well each order's ranking of the questions agrees with the
  identity's (Spearman and Kendall's tau-b, ``scipy.stats``);
- :func:`order_average`: each question's mean of a per-row value over its orders;
- :func:`as_original`: per-option values of a row moved from the letters they were shown at back to
  their options' places in the unpermuted question (what averaging a question's orders needs).

References
----------
.. [1] Spearman, C. (1904). The proof and measurement of association between two things.
       *The American Journal of Psychology* 15(1), 72-101.
.. [2] Kendall, M. G. (1938). A new measure of rank correlation. *Biometrika* 30(1/2), 81-93.
"""

from __future__ import annotations

import warnings

import numpy as np

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.metrics._validation import undefined

__all__ = ["order_spread", "rank_correlation_to_identity", "order_average", "as_original"]


def order_spread(values, question) -> dict[str, float]:
    r"""How far a per-row score moves across the orders of each question, summarised over questions.

    .. math::

        r_q = \max_{i: q_i = q} s_i - \min_{i: q_i = q} s_i, \qquad
        \sigma_q = \sqrt{\tfrac{1}{M_q}\sum_{i: q_i = q} (s_i - \bar s_q)^2}

    Parameters
    ----------
    values : array-like of shape (n_rows,), float
        The score of each (question, order).
    question : array-like of shape (n_rows,), int

    Returns
    -------
    spread : dict
        ``mean_range``, ``median_range``, ``max_range`` of :math:`r_q`; ``mean_std`` of :math:`\sigma_q`.

    Examples
    --------
    >>> order_spread([1.0, 3.0, 2.0, 2.0], [0, 0, 1, 1])
    {'mean_range': 1.0, 'median_range': 1.0, 'max_range': 2.0, 'mean_std': 0.5}
    """
    values = np.asarray(values, dtype=np.float64)
    ids, inverse = np.unique(np.asarray(question, dtype=np.int64), return_inverse=True)
    if not len(ids):
        nan = undefined("the order spread is undefined without questions")
        return {"mean_range": nan, "median_range": nan, "max_range": nan, "mean_std": nan}
    low, high = np.full(len(ids), np.inf), np.full(len(ids), -np.inf)
    np.minimum.at(low, inverse, values)
    np.maximum.at(high, inverse, values)
    count = np.bincount(inverse)
    mean = np.bincount(inverse, weights=values) / count
    std = np.sqrt(np.bincount(inverse, weights=(values - mean[inverse]) ** 2) / count)
    spread = high - low
    return {
        "mean_range": float(spread.mean()),
        "median_range": float(np.median(spread)),
        "max_range": float(spread.max()),
        "mean_std": float(std.mean()),
    }


def _by_slot(values, question, slots, slot: int) -> dict[int, float]:
    keep = slots == slot
    return dict(zip(np.asarray(question)[keep].tolist(), np.asarray(values, dtype=np.float64)[keep].tolist()))


def rank_correlation_to_identity(values, question, slots) -> dict[str, float]:
    r"""Spearman and Kendall's tau-b between the identity order's ranking of the questions and each other
    slot's, over the questions seen in both, summarised as min and median over the slots.

    .. math::

        \rho_s = \mathrm{corr}(\mathrm{rank}(s_{\cdot,0}), \mathrm{rank}(s_{\cdot,s})), \quad
        \tau_s = \tau_b(s_{\cdot,0}, s_{\cdot,s})

    Parameters
    ----------
    values : array-like of shape (n_rows,), float
    question : array-like of shape (n_rows,), int
    slots : array-like of shape (n_rows,), int
        From :func:`order_slots`.

    Returns
    -------
    correlation : dict
        ``spearman_min``, ``spearman_median``, ``kendall_min``, ``kendall_median``: NaN (with an
        :class:`UndefinedMetricWarning`) where no slot has 3 or more questions with a non-constant score.

    Examples
    --------
    >>> out = rank_correlation_to_identity([1.0, 1.1, 2.0, 2.2, 3.0, 3.3], [0, 0, 1, 1, 2, 2], [0, 1] * 3)
    >>> out["spearman_min"], out["kendall_min"]
    (1.0, 1.0)
    """
    from scipy.stats import kendalltau, spearmanr

    slots = np.asarray(slots, dtype=np.int64)
    identity = _by_slot(values, question, slots, 0)
    rho, tau = [], []
    for slot in range(1, int(slots.max(initial=0)) + 1):
        other = _by_slot(values, question, slots, slot)
        common = sorted(set(identity) & set(other))
        a = np.array([identity[q] for q in common])
        b = np.array([other[q] for q in common])
        if len(common) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rho.append(float(spearmanr(a, b).statistic))
            tau.append(float(kendalltau(a, b, variant="b").statistic))
    if not rho:
        nan = undefined("the rank correlation between orders needs 3 or more questions with a non-constant score")
        return {"spearman_min": nan, "spearman_median": nan, "kendall_min": nan, "kendall_median": nan}
    return {
        "spearman_min": min(rho),
        "spearman_median": float(np.median(rho)),
        "kendall_min": min(tau),
        "kendall_median": float(np.median(tau)),
    }


def order_average(values, question) -> tuple[np.ndarray, np.ndarray]:
    r"""The mean of a per-row score over each question's orders.

    .. math::

        \bar s_q = \frac{1}{M_q}\sum_{i: q_i = q} s_i

    Parameters
    ----------
    values : array-like of shape (n_rows,), float
    question : array-like of shape (n_rows,), int

    Returns
    -------
    ids, means : ndarray of shape (n_questions,)
        The question ids (sorted) and their order-averaged scores.

    Examples
    --------
    >>> [a.tolist() for a in order_average([1.0, 3.0, 5.0], [4, 4, 7])]
    [[4, 7], [2.0, 5.0]]
    """
    ids, inverse = np.unique(np.asarray(question, dtype=np.int64), return_inverse=True)
    values = np.asarray(values, dtype=np.float64)
    return ids, np.bincount(inverse, weights=values, minlength=len(ids)) / np.bincount(inverse, minlength=len(ids))


def as_original(values, order) -> np.ndarray:
    r"""Per-option values of rows as shown, moved back to their options' places in the unpermuted question.

    .. math::

        v^{\circ}_{i,\,\mathrm{order}_{i,j}} = v_{i,j} \qquad (j < K_i)

    Parameters
    ----------
    values : array-like of shape (n_rows, K_max), float
        One value per letter as shown, NaN right-padded beyond each row's own K.
    order : array-like of shape (n_rows, K_max), int
        The option shown at each letter, -1 padded (the records' ``order`` column).

    Returns
    -------
    ndarray of shape (n_rows, K_max), float64
        ``out[i, o]`` is the value of option ``o`` of row ``i``; NaN padded like ``values``.

    Examples
    --------
    >>> as_original([[0.1, 0.2, 0.7], [5.0, 6.0, np.nan]], [[2, 0, 1], [1, 0, -1]]).tolist()
    [[0.2, 0.7, 0.1], [6.0, 5.0, nan]]
    """
    values = np.asarray(values, dtype=np.float64)
    order = np.asarray(order, dtype=np.int64)
    if values.shape != order.shape:
        raise InvalidValueError(f"values {values.shape} and order {order.shape} must have one shape (n, K_max)")
    out = np.full(values.shape, np.nan)
    rows, letters = np.nonzero(order >= 0)
    out[rows, order[rows, letters]] = values[rows, letters]
    return out
