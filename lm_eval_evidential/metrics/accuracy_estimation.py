"""Unsupervised accuracy estimation: Average Thresholded Confidence (ATC) and DoC.

ATC (Garg et al. 2022; Maaz et al. 2023, §2.1, Eqs. 1-3): on a labelled in-distribution (ID) split,
learn a score threshold ``t`` such that the share of ID examples scoring **at or above** ``t``
equals the ID accuracy; on an unlabelled target set, the estimated accuracy is the share of
target examples scoring at or above ``t``. Scores are confidences, **higher = more confident**,
so a target set whose scores are shifted up gets a higher (never lower) estimate.

ATC depends on the score only through the order it induces (Maaz et al. 2023, Lemma 1): any strictly
increasing transform of the score gives exactly the same estimate, here bit for bit, because
the threshold is always one of the observed ID scores (or ``+inf``).
References
----------
.. [1] Garg, S., Balakrishnan, S., Lipton, Z. C., Neyshabur, B. and Sedghi, H. (2022).
       Leveraging unlabeled data to predict out-of-distribution performance. *ICLR* (ATC).
.. [2] Maaz, M., Qiao, R., Zhou, Y. and Zhang, R. (2023). On orderings of probability vectors
       and unsupervised performance estimation. arXiv:2306.10160 (Eqs. 1-3, Lemma 1, Theorem 1).
.. [3] Guillory, D., Shankar, V., Ebrahimi, S., Darrell, T. and Schmidt, L. (2021). Predicting
       with confidence on unseen distributions. *ICCV*, 1134-1144 (DoC).
"""

from __future__ import annotations

import numpy as np

from lm_eval_evidential.errors import InvalidValueError

from ._validation import (
    as_1d_float,
    as_binary_labels,
    check_same_length,
    first_outside_unit_interval,
    undefined,
)
from .scores import available_scores, check_score_names, compute_score

__all__ = ["atc_threshold", "atc_estimate", "atc", "doc_estimate", "atc_by_score"]


def atc_threshold(id_score, id_correct) -> float:
    r"""ATC threshold ``t`` learned on the labelled ID split.

    ``t`` is chosen among the candidates ``{distinct ID scores} U {+inf}`` to minimise

    .. math::

        \left| \#\{i : s_i \ge t\} - \#\mathrm{correct} \right|

    (Maaz et al. (2023), Eq. 2, written for accuracy: with error ``1 - acc`` it is the
    same objective ``|P(s < t) - err|``; counts are integers, so the comparison is exact). The
    share of ID examples at or above the ``j``-th smallest distinct score is
    ``1 - (#scores below it) / n``; ``+inf`` adds the share 0, so an all-wrong ID split gets
    ``t = +inf`` (estimate 0 everywhere), and an all-correct split ``t = min(id_score)``. When
    the shares cannot match the accuracy exactly (ties in the score) and two candidates are
    equally close, the **larger** ``t`` is taken, i.e. the one whose ID share is below the
    accuracy, so a tie-break never inflates the estimate. Deterministic, and invariant to the
    input order.

    Parameters
    ----------
    id_score : array-like of shape (n_samples,)
        Confidence on the labelled ID split, higher = more confident.
    id_correct : array-like of shape (n_samples,), 0/1 or bool
        1 where the ID prediction was right.

    Returns
    -------
    t : float
        One of the distinct ID scores, or ``+inf``.

    Raises
    ------
    ValueError
        For an empty ID split (nothing to learn from).

    Examples
    --------
    >>> from lm_eval_evidential.metrics.accuracy_estimation import atc_threshold
    >>> atc_threshold([0.9, 0.8, 0.6, 0.3], [1, 1, 0, 0])  # 2 of 4 at or above 0.8 = accuracy
    0.8
    """
    s = as_1d_float(id_score, "id_score")
    y = as_binary_labels(id_correct, "id_correct")
    n = check_same_length(id_score=s, id_correct=y)
    if n == 0:
        raise InvalidValueError("atc_threshold needs at least one labelled ID example, got 0")
    values, counts = np.unique(s, return_counts=True)
    at_or_above = n - np.concatenate(([0], np.cumsum(counts)[:-1]))
    candidates = np.concatenate((values, [np.inf]))
    gap = np.abs(np.concatenate((at_or_above, [0])) - int(y.sum()))
    # argmin returns the first minimum; searching the reversed array picks the largest t.
    j = candidates.size - 1 - int(np.argmin(gap[::-1]))
    return float(candidates[j])


def atc_estimate(t: float, target_score) -> float:
    r"""Estimated target accuracy: the share of target examples with ``score >= t``.

    .. math::

        \widehat{\mathrm{acc}} = \frac{1}{n} \sum_i [s_i \ge t]

    (Eq. 3 of Maaz et al. (2023), for accuracy). ``t`` comes from :func:`atc_threshold`
    on the same score function. Higher target scores give a higher estimate.

    Parameters
    ----------
    t : float
        The threshold (not NaN).
    target_score : array-like of shape (n_samples,)
        Confidence on the unlabelled target set.

    Returns
    -------
    estimate : float
        The estimated accuracy in [0, 1]; NaN (with an :class:`UndefinedMetricWarning`) for an empty target set.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.accuracy_estimation import atc_estimate
    >>> atc_estimate(0.8, [0.95, 0.85, 0.5, 0.2])
    0.5
    """
    t = float(t)
    if np.isnan(t):
        raise InvalidValueError("t is NaN; learn it with atc_threshold on a non-empty labelled ID split")
    s = as_1d_float(target_score, "target_score")
    if s.size == 0:
        return undefined("atc is undefined for an empty target set")
    return float(np.mean(s >= t))


def atc(id_score, id_correct, target_score) -> float:
    r"""ATC estimate of target accuracy, ``atc_estimate(atc_threshold(id_score, id_correct), target_score)``.

    Average Thresholded Confidence (Garg et al. 2022): learn ``t`` on the labelled ID split, then

    .. math::

        \widehat{\mathrm{acc}}_{target} = \frac{1}{n_t} \sum_i [s^{target}_i \ge t].

    It uses the score only through its order (Maaz et al. (2023), Lemma 1), so any
    strictly increasing transform of the score gives the same estimate.

    Parameters
    ----------
    id_score : array-like of shape (n_id,)
        Confidence on the labelled ID split, where the threshold is learned.
    id_correct : array-like of shape (n_id,), 0/1 or bool
        Correctness on the ID split; its mean is the share the threshold reproduces.
    target_score : array-like of shape (n_target,)
        Confidence on the unlabelled target set, counted above the threshold.

    Returns
    -------
    estimate : float
        NaN (with an :class:`UndefinedMetricWarning`) when the ID split or the target set is
        empty.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.accuracy_estimation import atc
    >>> id_score, id_correct = [0.9, 0.8, 0.6, 0.3], [1, 1, 0, 0]
    >>> target_score = [0.95, 0.85, 0.5, 0.2]
    >>> atc(id_score, id_correct, target_score)
    0.5
    """
    if np.asarray(id_score).size == 0:
        return undefined("atc is undefined: the labelled ID split is empty, so no threshold can be learned")
    return atc_estimate(atc_threshold(id_score, id_correct), target_score)


def doc_estimate(id_score, id_correct, target_score) -> float:
    r"""Difference-of-confidences (DoC) estimate of target accuracy.

    .. math::

        \widehat{\mathrm{acc}}_{target} = \mathrm{acc}_{ID} - \left(\overline{s}_{ID} - \overline{s}_{target}\right)

    The drop in mean confidence is taken as the drop in accuracy (Guillory et al. 2021), so a more confident
    target set gets a higher estimate. This only makes sense when the score is a probability
    of being right on the accuracy scale (e.g. ``max_prob``); scores outside ``[0, 1]`` are
    rejected with a ValueError, and a score that merely happens to lie in ``[0, 1]`` (e.g.
    ``l2_to_uniform``) gives a number with no accuracy meaning. The result is not clipped to
    ``[0, 1]``: a value outside it signals that the linear assumption failed.

    Parameters
    ----------
    id_score : array-like of shape (n_id,), values in [0, 1]
        Probability-like confidence on the labelled ID split, averaged.
    id_correct : array-like of shape (n_id,), 0/1 or bool
        Correctness on the ID split, averaged into the ID accuracy.
    target_score : array-like of shape (n_target,), values in [0, 1]
        Probability-like confidence on the unlabelled target set, averaged.

    Returns
    -------
    estimate : float
        Not clipped to [0, 1].        NaN (with an :class:`UndefinedMetricWarning`) when either set is empty.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.accuracy_estimation import doc_estimate
    >>> id_score, id_correct = [0.9, 0.8, 0.6, 0.3], [1, 1, 0, 0]
    >>> round(doc_estimate(id_score, id_correct, [0.95, 0.85, 0.5, 0.2]), 4)  # 0.5 - (0.65 - 0.625)
    0.475
    """
    s_id = as_1d_float(id_score, "id_score")
    y = as_binary_labels(id_correct, "id_correct")
    check_same_length(id_score=s_id, id_correct=y)
    s_t = as_1d_float(target_score, "target_score")
    for name, s in (("id_score", s_id), ("target_score", s_t)):
        i = first_outside_unit_interval(s)
        if i is not None:
            raise InvalidValueError(
                f"doc_estimate needs probability-like scores in [0, 1] (e.g. max_prob); {name}[{i}] = "
                f"{s[i]!r}. Use atc for other score functions"
            )
    if s_id.size == 0 or s_t.size == 0:
        return undefined("doc_estimate is undefined: the ID split or the target set is empty")
    return float(y.mean() - (s_id.mean() - s_t.mean()))


def atc_by_score(
    id_probs,
    id_k,
    id_correct,
    target_probs,
    target_k,
    *,
    names=None,
    id_alpha=None,
    target_alpha=None,
    prior_weight: float = 1.0,
    id_member_logits=None,
    target_member_logits=None,
    id_logits=None,
    target_logits=None,
) -> dict[str, float]:
    r"""ATC target-accuracy estimate for each registered score function, ``{name: estimate}``.

    For each score function ``s`` of :mod:`~lm_eval_evidential.metrics.scores`,

    .. math::

        \widehat{\mathrm{acc}}_s = \mathrm{ATC}\left(s(p_{ID}), c_{ID}, s(p_{target})\right)

    i.e. ``atc(s(id), id_correct, s(target))``. By Maaz et al. (2023), Theorem 1, for K = 2
    the six section-2.3 scores (max_prob, neg_entropy, l2_norm, l1_to_uniform, l2_to_uniform,
    js_to_uniform) give identical estimates.

    Parameters
    ----------
    id_probs, target_probs : array-like of shape (n, K_max) or None
        NaN right-padded predictive distributions as in
        :func:`~lm_eval_evidential.metrics.scores.compute_score` (None: derived from alpha).
    id_k, target_k : array-like of int
        Per-example class counts.
    id_correct : array-like of shape (n_id,), 0/1 or bool
        1 where the ID prediction was right.
    names : iterable of str, optional
        Score names (validated); default every score computable from the inputs (the
        alpha-based ones only when both alphas are given).
    id_alpha, target_alpha : array-like, optional
        Dirichlet concentrations.
    prior_weight : float > 0, default=1.0
        The prior weight ``lambda``.
    id_member_logits, target_member_logits : array-like of shape (n, M, K_max), optional
        The members' logits of records scored by several members (both sides or neither).
    id_logits, target_logits : array-like of shape (n, K_max), optional
        The answer logits (NaN right-padded) the logit scores read: ``neg_energy``, ``max_logit``.

    Returns
    -------
    estimates : dict of str to float
        ``{score name: ATC estimate}`` in the order of ``names``.

    Examples
    --------
    >>> import numpy as np
    >>> from lm_eval_evidential.metrics.accuracy_estimation import atc_by_score
    >>> id_probs = np.array([[0.9, 0.1], [0.6, 0.4], [0.7, 0.3], [0.55, 0.45]])
    >>> target_probs = np.array([[0.8, 0.2], [0.5, 0.5], [0.65, 0.35]])
    >>> est = atc_by_score(id_probs, [2, 2, 2, 2], [1, 0, 1, 0], target_probs, [2, 2, 2],
    ...                    names=["max_prob", "neg_entropy", "l2_norm"])
    >>> {name: round(v, 4) for name, v in est.items()}  # K = 2: one estimate (Theorem 1)
    {'max_prob': 0.3333, 'neg_entropy': 0.3333, 'l2_norm': 0.3333}
    """
    if names is None:
        has_members = id_member_logits is not None and target_member_logits is not None
        names = available_scores(id_alpha is not None and target_alpha is not None, has_members=has_members)
    else:
        names = check_score_names(names)
    sides = (
        (id_probs, id_k, id_alpha, id_member_logits, id_logits),
        (target_probs, target_k, target_alpha, target_member_logits, target_logits),
    )
    out = {}
    for name in names:
        s_id, s_t = (_side_score(name, side, prior_weight) for side in sides)
        out[name] = atc(s_id, id_correct, s_t)
    return out


def _side_score(name: str, side: tuple, prior_weight: float):
    """One side's ``name`` score from its ``(probs, k, alpha, member_logits, logits)``."""
    probs, k, alpha, member_logits, logits = side
    return compute_score(
        name, probs=probs, k=k, alpha=alpha, prior_weight=prior_weight, member_logits=member_logits, logits=logits
    )
