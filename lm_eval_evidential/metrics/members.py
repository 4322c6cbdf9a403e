"""Predictions of several members per question: LoRA ensembles and MC dropout passes.

A question scored by ``M`` members (``M`` adapters of one base model, or ``M`` dropout passes
of one adapter) has ``M`` answer-logit vectors, kept in a NaN right-padded batch of shape
``(n, M, K_max)``: row ``i`` holds its own ``K_i`` values in the first columns of every member
and NaN beyond, as in :mod:`lm_eval_evidential.metrics.dirichlet`.

Predictive rule: the mixture of the members' predictive distributions,

.. math::

    \\bar p = \\frac{1}{M} \\sum_{m=1}^{M} p_m, \\qquad
    p_m = \\mathrm{softmax}(z_m) \\text{ (softmax members)}, \\quad
    p_m = \\alpha_m / S_m \\text{ (EDL members)},

i.e. the average of the members' probabilities for softmax members (the deep-ensemble rule of
Lakshminarayanan et al. 2017, the MC-dropout predictive of Gal & Ghahramani 2016) and the mean
of the members' Dirichlet means for EDL members (the mean of the mixture of Dirichlets
``(1/M) sum_m Dir(alpha_m)``; Malinin et al. 2020 ensemble Dirichlet models the same way).

Uncertainty of the mixture (Depeweg et al. 2018; BALD, Houlsby et al. 2011), in nats:
total ``H(p̄)``, aleatoric ``E[H] = (1/M) sum_m h_m`` with ``h_m = H(p_m)`` for a softmax member
and ``h_m = E_{Dir(alpha_m)}[H(p)]`` for an EDL member, epistemic ``MI = H(p̄) - E[H]`` (>= 0).
For one EDL member these are exactly the Dirichlet versions of
:func:`~lm_eval_evidential.metrics.dirichlet.expected_entropy` and
:func:`~lm_eval_evidential.metrics.dirichlet.mutual_information` (one computation: the kernels
are shared); for one softmax member the MI is 0.

Summary Dirichlet of EDL members (what records keep in ``alpha`` when ``M > 1``):
``alpha = p̄ / mean_m(1 / S_m)``, whose mean is ``p̄``, whose vacuity ``lambda K / S`` is the
members' mean vacuity and whose evidence ``alpha - lambda`` is ``>= 0`` (each member's
``alpha_{m,i} >= lambda`` gives ``p̄_i >= lambda mean_m(1/S_m)``).

References
----------
.. [1] Lakshminarayanan, B., Pritzel, A. and Blundell, C. (2017). Simple and scalable predictive
       uncertainty estimation using deep ensembles. *NeurIPS* (the mean-probability rule).
.. [2] Gal, Y. and Ghahramani, Z. (2016). Dropout as a Bayesian approximation. *ICML* (MC dropout).
.. [3] Houlsby, N., Huszár, F., Ghahramani, Z. and Lengyel, M. (2011). Bayesian active learning for
       classification and preference learning. arXiv:1112.5745 (BALD: mutual information).
.. [4] Depeweg, S., Hernández-Lobato, J. M., Doshi-Velez, F. and Udluft, S. (2018). Decomposition of
       uncertainty in Bayesian deep learning. *ICML* (total = aleatoric + epistemic).
.. [5] Malinin, A., Mlodozeniec, B. and Gales, M. (2020). Ensemble distribution distillation. *ICLR*
       (the ensemble of Dirichlets and its mutual information).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.params import validate_params

from ._batches import PRIOR_WEIGHT, check_padded, entropy_of, expected_entropy_of, masked_max, masked_sum

__all__ = [
    "Members",
    "member_probs",
    "mixture_probs",
    "mixture_alpha",
    "expected_entropy_of_members",
    "mutual_information_of_members",
    "max_prob_variance",
    "member_summary",
    "dirichlet_member_summary",
]

#: The member methods with a predictive rule here: softmax members and EDL members (alpha from logits).
MEMBER_METHODS = ("softmax", "edl")


class Members(NamedTuple):
    """Validated member arrays: ``probs`` (n, M, K_max) and, for EDL members, ``alpha`` (else None)."""

    probs: np.ndarray
    alpha: np.ndarray | None


#: The parameters every public function here takes (one text, put into each docstring by ``_shared_doc``).
_MEMBER_PARAMETERS = """Parameters
    ----------
    member_logits : array-like of shape (n_samples, n_members, K_max)
        The members' answer logits, NaN right-padded beyond each row's own K.
    method : {"softmax", "edl"}, default="softmax"
        The members' head: softmax, or EDL (``alpha = softplus(z) + lambda``).
    prior_weight : float > 0, default=1.0
        The EDL prior weight ``lambda``."""


_PER_ROW = """Returns
    -------
    ndarray of shape (n_samples,)

    Examples
    --------"""


def _shared_doc(fn):
    fn.__doc__ = fn.__doc__.replace("%(member_parameters)s", _MEMBER_PARAMETERS).replace("%(per_row)s", _PER_ROW)
    return fn


def _flat(arr: np.ndarray) -> np.ndarray:
    return arr.reshape(arr.shape[0] * arr.shape[1], arr.shape[2])


def _validated(arr, name: str, *, positive: bool = False):
    """``(arr, k, mask)`` of an (n, M, K_max) batch: every member of a row has the row's own K."""
    a = np.asarray(arr)
    if a.ndim != 3:
        raise InvalidValueError(
            f"{name} must be 3-D (n_examples, n_members, K_max), NaN right-padded, got shape {a.shape}"
        )
    if a.shape[1] < 1:
        raise InvalidValueError(f"{name} has no members (shape {a.shape}); every question needs at least one")
    flat, k_flat, _ = check_padded(_flat(a) if a.shape[0] else a.reshape(0, a.shape[2]), name, positive=positive)
    k_members = k_flat.reshape(a.shape[0], a.shape[1])
    k = k_members[:, 0] if a.shape[0] else np.zeros(0, dtype=np.int64)
    if (k_members != k[:, None]).any():
        i = int(np.flatnonzero((k_members != k[:, None]).any(axis=1))[0])
        raise InvalidValueError(
            f"{name} row {i}: its members have different numbers of options {k_members[i].tolist()}; every member "
            "scores the same K options"
        )
    mask = np.arange(a.shape[2]) < k[:, None]
    return flat.reshape(a.shape), k, mask


def _over_members(values: np.ndarray, mask: np.ndarray, kernel) -> np.ndarray:
    """``kernel(flat, flat_mask)`` of every (row, member), as an (n, M) array."""
    n, m = values.shape[:2]
    return kernel(_flat(values), np.repeat(mask, m, axis=0)).reshape(n, m)


def _member_probs_of(z: np.ndarray, mask: np.ndarray, method: str, lam: float) -> Members:
    """Member probabilities (and EDL alpha) from validated member logits."""
    if z.shape[0] == 0 or z.shape[2] == 0:  # no examples: nothing to normalise (and no axis to reduce)
        return Members(z.copy(), z.copy() if method == "edl" else None)
    filled = np.where(mask[:, None, :], z, np.nan)
    if method == "edl":
        alpha = np.where(mask[:, None, :], np.logaddexp(0.0, np.nan_to_num(filled, nan=0.0)) + lam, np.nan)
        return Members(member_means_of(alpha, mask), alpha)
    shifted = np.where(mask[:, None, :], filled - np.nanmax(filled, axis=2, keepdims=True), -np.inf)
    ez = np.exp(shifted)
    probs = ez / ez.sum(axis=2, keepdims=True)
    return Members(np.where(mask[:, None, :], probs, np.nan), None)


def member_means_of(alpha: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Each member's Dirichlet mean ``alpha_m / S_m`` (n, M, K_max)."""
    s = _over_members(alpha, mask, masked_sum)
    return alpha / s[:, :, None]


def mixture_probs_of(members: Members) -> np.ndarray:
    return members.probs.mean(axis=1)


def mean_member_entropy_of(members: Members, mask: np.ndarray) -> np.ndarray:
    """``(1/M) sum_m h_m``: E_Dir[H] of EDL members, H(p_m) of softmax members (module docstring)."""
    if members.alpha is not None:
        return _over_members(members.alpha, mask, expected_entropy_of).mean(axis=1)
    return _over_members(members.probs, mask, entropy_of).mean(axis=1)


def max_prob_variance_of(members: Members, mask: np.ndarray) -> np.ndarray:
    return _over_members(members.probs, mask, masked_max).var(axis=1)


def summary_alpha_of(members: Members, mask: np.ndarray) -> np.ndarray:
    s = _over_members(members.alpha, mask, masked_sum)
    return mixture_probs_of(members) / np.mean(1.0 / s, axis=1)[:, None]


@validate_params({"prior_weight": PRIOR_WEIGHT})
def members_of(member_logits, method: str, prior_weight: float = 1.0) -> tuple[Members, np.ndarray, np.ndarray]:
    """``(Members, k, mask)`` from (n, M, K_max) member logits of ``method`` (validated)."""
    if method not in MEMBER_METHODS:
        raise InvalidValueError(
            f"members of method {method!r} have no predictive rule here (one of {', '.join(MEMBER_METHODS)}); "
            "IB-EDL's alpha depends on sigma and noise draws that member logits do not carry"
        )
    lam = float(prior_weight)
    z, k, mask = _validated(member_logits, "member_logits")
    return _member_probs_of(z, mask, method, lam), k, mask


@_shared_doc
def member_probs(member_logits, method: str = "softmax", prior_weight: float = 1.0) -> np.ndarray:
    r"""Each member's predictive distribution: ``softmax(z_m)`` or, for EDL members, ``alpha_m / S_m``.

    .. math::

        p_{m,i} = \frac{e^{z_{m,i}}}{\sum_j e^{z_{m,j}}} \quad \text{or} \quad
        p_{m,i} = \frac{\alpha_{m,i}}{S_m}, \; \alpha_{m,i} = \mathrm{softplus}(z_{m,i}) + \lambda

    %(member_parameters)s

    Returns
    -------
    ndarray of shape (n_samples, n_members, K_max)

    Examples
    --------
    >>> import numpy as np
    >>> from lm_eval_evidential.metrics.members import member_probs
    >>> member_probs([[[0.0, np.log(3.0)], [0.0, 0.0]]]).round(4).tolist()
    [[[0.25, 0.75], [0.5, 0.5]]]
    """
    return members_of(member_logits, method, prior_weight)[0].probs


@_shared_doc
def mixture_probs(member_logits, method: str = "softmax", prior_weight: float = 1.0) -> np.ndarray:
    r"""The predictive distribution of M members: the mean of their probabilities (module docstring).

    .. math::

        \bar p = \frac{1}{M} \sum_m p_m

    %(member_parameters)s

    Returns
    -------
    ndarray of shape (n_samples, K_max)

    Examples
    --------
    >>> import numpy as np
    >>> from lm_eval_evidential.metrics.members import mixture_probs
    >>> mixture_probs([[[0.0, np.log(3.0), np.nan], [0.0, 0.0, np.nan]]]).round(4).tolist()
    [[0.375, 0.625, nan]]
    """
    return mixture_probs_of(members_of(member_logits, method, prior_weight)[0])


def mixture_alpha(member_logits, prior_weight: float = 1.0) -> np.ndarray:
    r"""The summary Dirichlet of EDL members: mean ``p̄``, vacuity the members' mean vacuity.

    .. math::

        \alpha = \bar p \Big/ \frac{1}{M} \sum_m \frac{1}{S_m}, \qquad
        \frac{\lambda K}{\sum_i \alpha_i} = \frac{1}{M} \sum_m \frac{\lambda K}{S_m}

    Every ``alpha_i >= lambda`` (evidence stays non-negative): see the module docstring.

    Parameters
    ----------
    member_logits : array-like of shape (n_samples, n_members, K_max)
        EDL members' answer logits (``alpha_m = softplus(z_m) + lambda``).
    prior_weight : float > 0, default=1.0
        The prior weight ``lambda``.

    Returns
    -------
    ndarray of shape (n_samples, K_max)
        NaN right-padded like the input; ``alpha - lambda`` is the records' evidence.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.dirichlet import edl_alpha, vacuity
    >>> from lm_eval_evidential.metrics.members import mixture_alpha
    >>> z = [[[2.0, -1.0, 0.0], [0.5, 0.5, 3.0]]]
    >>> round(float(vacuity(mixture_alpha(z))[0]), 12) == round(float(vacuity(edl_alpha(z[0])).mean()), 12)
    True
    """
    members, _, mask = members_of(member_logits, "edl", prior_weight)
    return np.where(mask, summary_alpha_of(members, mask), np.nan)


@_shared_doc
def expected_entropy_of_members(member_logits, method: str = "softmax", prior_weight: float = 1.0) -> np.ndarray:
    r"""Expected entropy (aleatoric uncertainty) of M members, per row, in nats.

    .. math::

        \mathbb{E}[H] = \frac{1}{M} \sum_m h_m, \quad h_m = H(p_m) \text{ (softmax)}, \quad
        h_m = \mathbb{E}_{\mathrm{Dir}(\alpha_m)}[H(p)] \text{ (EDL)}

    %(member_parameters)s

    %(per_row)s
    >>> import numpy as np
    >>> from lm_eval_evidential.metrics.members import expected_entropy_of_members
    >>> z = [[[0.0, 0.0], [50.0, 0.0]]]  # one flat member (log 2), one certain member (0)
    >>> expected_entropy_of_members(z).round(4).tolist()  # (log 2 + 0) / 2
    [0.3466]
    """
    members, _, mask = members_of(member_logits, method, prior_weight)
    return mean_member_entropy_of(members, mask)


@_shared_doc
def mutual_information_of_members(member_logits, method: str = "softmax", prior_weight: float = 1.0) -> np.ndarray:
    r"""Mutual information (BALD, epistemic uncertainty) of M members, per row, in nats.

    .. math::

        I = H(\bar p) - \frac{1}{M} \sum_m h_m

    0 when softmax members agree, up to rounding.

    %(member_parameters)s

    %(per_row)s
    >>> from lm_eval_evidential.metrics.members import mutual_information_of_members
    >>> z = [[[50.0, 0.0], [0.0, 50.0]], [[1.0, 0.0], [1.0, 0.0]]]  # two certain members disagree; two agree
    >>> mutual_information_of_members(z).round(4).tolist()  # log 2, 0
    [0.6931, 0.0]
    """
    members, _, mask = members_of(member_logits, method, prior_weight)
    return entropy_of(mixture_probs_of(members), mask) - mean_member_entropy_of(members, mask)


@_shared_doc
def max_prob_variance(member_logits, method: str = "softmax", prior_weight: float = 1.0) -> np.ndarray:
    r"""Variance over members of each member's own (gold-free) maximum probability.

    .. math::

        \mathrm{Var}_m\big[\max_i p_{m,i}\big] = \frac{1}{M} \sum_m \big(\max_i p_{m,i}\big)^2
        - \Big(\frac{1}{M} \sum_m \max_i p_{m,i}\Big)^2

    (population variance, ``ddof=0``: the spread of these ``M`` members, not an estimate of a
    larger population's).

    %(member_parameters)s

    %(per_row)s
    >>> import numpy as np
    >>> from lm_eval_evidential.metrics.members import max_prob_variance
    >>> max_prob_variance([[[0.0, np.log(3.0)], [0.0, 0.0]]]).round(6).tolist()  # max probs 0.75, 0.5
    [0.015625]
    """
    members, _, mask = members_of(member_logits, method, prior_weight)
    return max_prob_variance_of(members, mask)


@_shared_doc
def member_summary(member_logits, method: str, prior_weight: float = 1.0) -> tuple[np.ndarray, np.ndarray | None]:
    r"""What records of M members keep in ``logits`` and ``alpha``: ``log p̄`` and the summary Dirichlet.

    .. math::

        \log \bar p_i = \operatorname{logsumexp}_m \log p_{m,i} - \log M, \qquad
        \alpha = \bar p \Big/ \frac{1}{M} \sum_m \frac{1}{S_m} \text{ (EDL members; None for softmax)}

    ``log p̄`` is formed from the members' log probabilities, so it stays finite where ``p̄``
    itself would underflow to 0; ``softmax(log p̄) = p̄``.

    %(member_parameters)s

    Returns
    -------
    log_mean : ndarray of shape (n_samples, K_max)
        ``log p̄``, NaN right-padded.
    alpha : ndarray of shape (n_samples, K_max) or None
        :func:`mixture_alpha` for EDL members, None for softmax members.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.members import member_summary
    >>> z, alpha = member_summary([[[0.0, 0.0], [1000.0, 0.0]]], "softmax")
    >>> z.round(4).tolist(), alpha  # p̄ = (0.75, 0.25); exp(-1000) / 2 would be 0 in float64
    ([[-0.2877, -1.3863]], None)
    """
    members, _, mask = members_of(member_logits, method, prior_weight)
    return _summary(members, mask, np.asarray(member_logits, dtype=np.float64))


def dirichlet_member_summary(member_alpha) -> tuple[np.ndarray, np.ndarray]:
    r""":func:`member_summary` of members given by their Dirichlet ``alpha`` rather than their logits.

    For members whose alpha is not a function of logits kept in the records (IB-EDL, whose alpha
    depends on noise draws), and for the answer orders of one question of a permuted run, each
    an EDL prediction (:func:`lm_eval_evidential.records.orders.average_orders`). The same rule:
    ``p̄`` the mean of the members' Dirichlet means, the summary alpha ``p̄ / mean_m(1/S_m)``:

    .. math::

        \bar p_k = \frac{1}{M} \sum_{m=1}^{M} \frac{\alpha_{mk}}{S_m}, \qquad
        \bar\alpha_k = \frac{\bar p_k}{\frac{1}{M} \sum_{m=1}^{M} 1 / S_m}, \qquad S_m = \sum_k \alpha_{mk}.

    Parameters
    ----------
    member_alpha : array-like of shape (n_samples, n_members, K_max)
        The members' Dirichlet alpha (> 0), NaN right-padded beyond each row's own K.

    Returns
    -------
    log_mean : ndarray of shape (n_samples, K_max)
        ``log p̄``, NaN right-padded.
    alpha : ndarray of shape (n_samples, K_max)
        The summary Dirichlet, NaN right-padded.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.members import dirichlet_member_summary
    >>> z, alpha = dirichlet_member_summary([[[3.0, 1.0], [1.0, 1.0]]])  # means (0.75, 0.25), (0.5, 0.5)
    >>> np.exp(z).round(4).tolist(), alpha.round(4).tolist()  # p̄ = (0.625, 0.375); mean 1/S = 3/8
    ([[0.625, 0.375]], [[1.6667, 1.0]])
    """
    a, _, mask = _validated(member_alpha, "member_alpha", positive=True)
    return _summary(Members(member_means_of(a, mask), a), mask, a)


def _summary(members: Members, mask: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """``(log p̄, summary alpha or None)`` of validated members; ``z`` their logits (softmax members)."""
    alpha = None if members.alpha is None else np.where(mask, summary_alpha_of(members, mask), np.nan)
    if z.shape[0] == 0 or z.shape[2] == 0:
        return np.full((z.shape[0], z.shape[2]), np.nan), alpha
    real = mask[:, None, :]
    # Each member's log probabilities, with the padding 0 (not -inf) so that nothing below warns.
    if members.alpha is None:
        shifted = np.where(real, z - np.max(np.where(real, z, -np.inf), axis=2, keepdims=True), -np.inf)
        log_p = shifted - np.log(np.sum(np.exp(shifted), axis=2, keepdims=True))
    else:
        s = _over_members(members.alpha, mask, masked_sum)
        log_p = np.log(np.where(real, members.alpha, 1.0)) - np.log(s)[:, :, None]
    log_p = np.where(real, log_p, 0.0)
    peak = np.max(log_p, axis=1)
    log_mean = peak + np.log(np.mean(np.exp(log_p - peak[:, None, :]), axis=1))
    return np.where(mask, log_mean, np.nan), alpha
