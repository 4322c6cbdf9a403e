r"""Answer-order effects of multiple-choice predictions: numpy/scipy over (question, order) rows.

A permuted evaluation (``metadata.permutations``) shows each question under several orders of its
options. Each row here is one (question, order): ``question`` its question's id, ``order`` the
option indices shown at letters 0..K-1 (-1 padded), ``gold``/``pred`` indices *as shown*. The
order's **slot** is its rank among its question's orders (lexicographic, so slot 0 is the
identity, and under ``cyclic`` slot s is the shift by s); statistics "per order" are per slot.

- :func:`circular_accuracy`: the share of questions answered right under every order
  (CircularEval, Liu et al. 2023, "MMBench: Is Your Multi-modal Model an All-around Player?");
- :func:`prediction_following`: whether each question's prediction follows an *option* (the
  same option wherever it is shown) or a *letter* (the same letter whatever is shown there);
- :func:`letter_uniformity`: Pearson's chi-square test that predictions pick the letters
  uniformly (``scipy.stats.chisquare``; groups of different K add their statistics and degrees of
  freedom);
- :func:`pride_prior` / :func:`pride_predictions`: PriDe (Zheng et al., ICLR 2024, "Large
  Language Models Are Not Robust Multiple Choice Selectors", Sec. 4, Eq. 3-5): the prior over
  letters of a question is the softmax of the mean log-probability of each letter over the
  question's cyclic orders (each option visits each letter once, so the options' own
  probabilities cancel up to a constant); the task's prior is the mean of those priors over a
  small estimation subset; other questions are debiased by
  :math:`\arg\max_j \log p_j - \log \pi_j` (their code: ``debias_utils.simple`` and
  ``debias_pride.py``, github.com/chujiezheng/LLM-MCQ-Bias);
- :func:`as_original`, :func:`order_average`, :func:`order_spread` and
  :func:`rank_correlation_to_identity`: a per-row value across its question's orders
  (:mod:`.order_values`, re-exported here).

References
----------
.. [1] Zheng, C., Zhou, H., Meng, F., Zhou, J. and Huang, M. (2024). Large Language Models Are Not
       Robust Multiple Choice Selectors. *ICLR* (selection bias; PriDe, Sec. 4).
.. [2] Liu, Y. et al. (2023). MMBench: Is Your Multi-modal Model an All-around Player?
       arXiv:2307.06281 (CircularEval).
.. [3] Pearson, K. (1900). On the criterion that a given system of deviations from the probable in
       the case of a correlated system of variables is such that it can be reasonably supposed to
       have arisen from random sampling. *Philosophical Magazine* 50(302), 157-175 (chi-square).
"""

from __future__ import annotations

import numpy as np

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.metrics._validation import undefined

# The values across a question's orders live in .order_values; they stay importable from here.
from .order_values import as_original, order_average, order_spread, rank_correlation_to_identity

__all__ = [
    "order_slots",
    "accuracy_per_slot",
    "circular_accuracy",
    "prediction_following",
    "letter_counts",
    "letter_uniformity",
    "balanced_questions",
    "pride_prior",
    "pride_predictions",
    "order_spread",
    "rank_correlation_to_identity",
    "order_average",
    "as_original",
]


def _rows(question, order, k=None):
    question = np.asarray(question, dtype=np.int64)
    order = np.asarray(order, dtype=np.int64)
    if order.ndim != 2 or order.shape[0] != question.shape[0]:
        raise InvalidValueError(f"order must be (n, K_max) for {question.shape[0]} rows, got shape {order.shape}")
    if k is None:
        k = (order >= 0).sum(axis=1)
    return question, order, np.asarray(k, dtype=np.int64)


def order_slots(question, order) -> np.ndarray:
    r"""Each row's rank among its question's orders, lexicographic (slot 0 is the identity).

    .. math::

        \mathrm{slot}_i = \#\{i' : q_{i'} = q_i,\ \mathrm{order}_{i'} <_{\mathrm{lex}} \mathrm{order}_i\}

    Parameters
    ----------
    question : array-like of shape (n_rows,), int
        The question of each row.
    order : array-like of shape (n_rows, K_max), int
        The options shown at each letter, -1 padded.

    Returns
    -------
    slots : ndarray of shape (n_rows,), int64

    Examples
    --------
    >>> order_slots([0, 0, 0, 1, 1], [[2, 0, 1], [0, 1, 2], [1, 2, 0], [1, 0, -1], [0, 1, -1]]).tolist()
    [2, 0, 1, 1, 0]
    """
    question, order, _ = _rows(question, order)
    keys = [order[:, j] for j in range(order.shape[1] - 1, -1, -1)] + [question]
    sorted_rows = np.lexsort(keys)
    slots = np.empty(len(question), dtype=np.int64)
    q_sorted = question[sorted_rows]
    starts = np.r_[0, np.flatnonzero(np.diff(q_sorted)) + 1] if len(q_sorted) else np.zeros(0, np.int64)
    first = np.repeat(starts, np.diff(np.r_[starts, len(q_sorted)]))
    slots[sorted_rows] = np.arange(len(q_sorted)) - first
    return slots


def accuracy_per_slot(correct, slots) -> list[float]:
    r"""Accuracy of the rows of each slot (slot 0: the identity order, today's accuracy).

    .. math::

        \mathrm{acc}_s = \frac{1}{|\{i: \mathrm{slot}_i = s\}|} \sum_{i: \mathrm{slot}_i = s} c_i

    Parameters
    ----------
    correct : array-like of shape (n_rows,), 0/1 or bool
    slots : array-like of shape (n_rows,), int
        From :func:`order_slots`.

    Returns
    -------
    accuracy : list of float, one per slot

    Examples
    --------
    >>> accuracy_per_slot([1, 0, 1, 1], [0, 1, 0, 1])
    [1.0, 0.5]
    """
    correct = np.asarray(correct, dtype=np.float64)
    slots = np.asarray(slots, dtype=np.int64)
    return [float(correct[slots == s].mean()) for s in range(int(slots.max()) + 1)] if slots.size else []


def circular_accuracy(correct, question) -> float:
    r"""The share of questions right under every one of their orders (CircularEval).

    .. math::

        \mathrm{acc}_{\circ} = \frac{1}{Q} \sum_q \prod_{i: q_i = q} c_i

    Parameters
    ----------
    correct : array-like of shape (n_rows,), 0/1 or bool
    question : array-like of shape (n_rows,), int

    Returns
    -------
    accuracy : float
        NaN (with an :class:`UndefinedMetricWarning`) without rows.

    Examples
    --------
    >>> circular_accuracy([1, 1, 1, 0], [0, 0, 1, 1])
    0.5
    """
    correct = np.asarray(correct, dtype=bool)
    question = np.asarray(question, dtype=np.int64)
    if not question.size:
        return undefined("circular accuracy is undefined without questions")
    ids, inverse = np.unique(question, return_inverse=True)
    wrong = np.zeros(len(ids), dtype=bool)
    np.logical_or.at(wrong, inverse, ~correct)
    return float(np.mean(~wrong))


def prediction_following(question, order, pred) -> dict[str, float]:
    r"""Shares of questions whose prediction follows an option, a letter, or neither.

    ``option``: the same option is predicted in every order, wherever it is shown; ``letter``:
    the same letter in every order while the option shown there changes; ``neither``: the rest.

    .. math::

        \mathrm{option} = \frac{1}{Q}\sum_q [\,|\{\mathrm{order}_i[\hat y_i] : q_i = q\}| = 1\,],\quad
        \mathrm{letter} = \frac{1}{Q}\sum_q [\,|\{\hat y_i : q_i = q\}| = 1 \wedge \neg\,\mathrm{option}_q\,]

    Parameters
    ----------
    question : array-like of shape (n_rows,), int
    order : array-like of shape (n_rows, K_max), int, -1 padded
    pred : array-like of shape (n_rows,), int
        The predicted letter (index as shown).

    Returns
    -------
    shares : dict with keys ``option``, ``letter``, ``neither`` (summing to 1)

    Examples
    --------
    >>> orders = [[0, 1, 2], [1, 2, 0], [2, 0, 1]] * 2
    >>> prediction_following([0, 0, 0, 1, 1, 1], orders, [2, 1, 0, 0, 0, 0])
    {'option': 0.5, 'letter': 0.5, 'neither': 0.0}
    """
    question, order, _ = _rows(question, order)
    pred = np.asarray(pred, dtype=np.int64)
    option = order[np.arange(len(pred)), pred]
    ids, inverse = np.unique(question, return_inverse=True)
    if not len(ids):
        nan = undefined("prediction following is undefined without questions")
        return {"option": nan, "letter": nan, "neither": nan}

    def constant(values):
        low = np.full(len(ids), np.iinfo(np.int64).max)
        high = np.full(len(ids), np.iinfo(np.int64).min)
        np.minimum.at(low, inverse, values)
        np.maximum.at(high, inverse, values)
        return low == high

    same_option, same_letter = constant(option), constant(pred)
    follows_letter = same_letter & ~same_option
    return {
        "option": float(np.mean(same_option)),
        "letter": float(np.mean(follows_letter)),
        "neither": float(np.mean(~same_option & ~follows_letter)),
    }


def letter_counts(values, k, n_letters: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    r"""How often each letter is ``values`` (predicted or gold), and in how many rows it is shown.

    .. math::

        n_j = \sum_i [v_i = j], \qquad m_j = \sum_i [j < K_i]

    Parameters
    ----------
    values : array-like of shape (n_rows,), int
        A letter index per row.
    k : array-like of shape (n_rows,), int
    n_letters : int, optional
        The number of letters counted (default: the largest K).

    Returns
    -------
    counts, shown : ndarray of shape (n_letters,), int

    Examples
    --------
    >>> [c.tolist() for c in letter_counts([0, 2, 0, 1], [3, 3, 2, 2])]
    [[2, 1, 1], [4, 4, 2]]
    """
    values = np.asarray(values, dtype=np.int64)
    k = np.asarray(k, dtype=np.int64)
    width = int(n_letters if n_letters is not None else (k.max() if k.size else 0))
    counts = np.bincount(values, minlength=width)[:width]
    shown = (np.arange(width)[None, :] < k[:, None]).sum(axis=0)
    return counts, shown


def letter_uniformity(pred, k) -> dict:
    r"""Pearson's chi-square test that the predicted letters are uniform, per K and over all K.

    The rows of each K are one multinomial sample over that K's letters (expected count n_K / K
    each, ``scipy.stats.chisquare``); the groups' statistics and degrees of freedom add:

    .. math::

        \chi^2 = \sum_K \sum_{j<K} \frac{(n_{K,j} - n_K/K)^2}{n_K/K}, \qquad
        \mathrm{dof} = \sum_K (K - 1)

    Parameters
    ----------
    pred : array-like of shape (n_rows,), int
    k : array-like of shape (n_rows,), int

    Returns
    -------
    test : dict
        ``chi2``, ``dof``, ``p_value`` and ``by_k`` (``{K: {"chi2", "dof", "p_value", "n"}}``).

    Examples
    --------
    >>> out = letter_uniformity([0, 1, 2, 3] * 5, [4] * 20)
    >>> out["chi2"], out["dof"], out["p_value"]
    (0.0, 3, 1.0)
    """
    from scipy.stats import chi2 as chi2_dist
    from scipy.stats import chisquare

    pred = np.asarray(pred, dtype=np.int64)
    k = np.asarray(k, dtype=np.int64)
    by_k, total, dof = {}, 0.0, 0
    for group in np.unique(k):
        if group < 2:
            continue
        picks = pred[k == group]
        counts = np.bincount(picks, minlength=int(group))[: int(group)]
        stat, p = chisquare(counts)
        by_k[int(group)] = {"chi2": float(stat), "dof": int(group) - 1, "p_value": float(p), "n": int(picks.size)}
        total += float(stat)
        dof += int(group) - 1
    if not dof:
        nan = undefined("the uniformity test needs questions with K >= 2")
        return {"chi2": nan, "dof": 0, "p_value": nan, "by_k": by_k}
    return {"chi2": total, "dof": dof, "p_value": float(chi2_dist.sf(total, dof)), "by_k": by_k}


def balanced_questions(question, order, k) -> np.ndarray:
    r"""The questions whose orders show each option at each letter equally often (cyclic, all).

    PriDe's estimate needs them: only then do the options' own probabilities cancel.

    .. math::

        \#\{i : q_i = q,\ \mathrm{order}_i[j] = o\} = \mathrm{const} \quad \forall j, o

    Parameters
    ----------
    question : array-like of shape (n_rows,), int
    order : array-like of shape (n_rows, K_max), int, -1 padded
    k : array-like of shape (n_rows,), int

    Returns
    -------
    questions : ndarray of int64, sorted

    Examples
    --------
    >>> balanced_questions([0, 0, 1, 1], [[0, 1], [1, 0], [0, 1], [0, 1]], [2, 2, 2, 2]).tolist()
    [0]
    """
    question, order, k = _rows(question, order, k)
    out = []
    for q in np.unique(question):
        rows = order[question == q]
        kq = int(k[question == q][0])
        counts = np.zeros((kq, kq), dtype=np.int64)
        for row in rows:
            counts[np.arange(kq), row[:kq]] += 1
        if (counts == counts[0, 0]).all():
            out.append(int(q))
    return np.asarray(out, dtype=np.int64)


def pride_prior(probs_by_order) -> np.ndarray:
    r"""The PriDe prior over letters (Zheng et al. 2024, Sec. 4) from questions seen in balanced orders.

    .. math::

        \pi_q = \mathrm{softmax}_j\Big(\frac{1}{M}\sum_{m=1}^{M} \log p_{q,m,j}\Big), \qquad
        \pi = \frac{1}{Q}\sum_q \pi_q

    Parameters
    ----------
    probs_by_order : array-like of shape (n_questions, n_orders, K)
        Predictive probabilities *by letter*, in each order of each question.

    Returns
    -------
    prior : ndarray of shape (K,)

    Examples
    --------
    >>> p = np.array([[[0.7, 0.3], [0.6, 0.4]]])   # letter A favoured in both orders
    >>> np.round(pride_prior(p), 4).tolist()
    [0.6517, 0.3483]
    """
    p = np.asarray(probs_by_order, dtype=np.float64)
    if p.ndim != 3 or not p.size:
        raise InvalidValueError(f"probs_by_order must be (questions, orders, K), got shape {p.shape}")
    with np.errstate(divide="ignore"):
        mean_log = np.log(p).mean(axis=1)
    mean_log -= mean_log.max(axis=1, keepdims=True)
    per_question = np.exp(mean_log) / np.exp(mean_log).sum(axis=1, keepdims=True)
    return per_question.mean(axis=0)


def pride_predictions(probs, prior) -> np.ndarray:
    r"""PriDe's debiased predictions (first index on ties).

    .. math::

        \hat y = \arg\max_j\ \log p_j - \log \pi_j

    Parameters
    ----------
    probs : array-like of shape (n, K)
        Observed predictive probabilities by letter.
    prior : array-like of shape (K,)
        From :func:`pride_prior`.

    Returns
    -------
    pred : ndarray of shape (n,), int

    Examples
    --------
    >>> pride_predictions([[0.5, 0.4, 0.1]], [0.6, 0.2, 0.2]).tolist()
    [1]
    """
    p = np.asarray(probs, dtype=np.float64)
    prior = np.asarray(prior, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.argmax(np.log(p) - np.log(prior)[None, :], axis=1)
