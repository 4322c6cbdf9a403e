"""Dirichlet (evidential) quantities on NaN right-padded batches.

Convention: a batch is a float64 array of shape ``(n, K_max)`` whose row ``i`` holds that
example's own ``K_i`` values in columns ``0..K_i-1`` and NaN beyond (``K_i = class_counts``).
NaN is padding, never a class; a NaN inside a row's first ``K_i`` entries is an error.

EDL: evidence ``e = softplus(logit) >= 0``, concentration ``alpha = e + lambda`` (prior weight
``lambda > 0``, default 1), strength ``S = sum(alpha)``, expected probabilities
``E[p] = alpha / S``, vacuity ``u = lambda * K / S`` (in ``(0, 1]``, 1 iff all evidence is 0).
References
----------
.. [1] Sensoy, M., Kaplan, L. and Kandemir, M. (2018). Evidential deep learning to quantify
       classification uncertainty. *NeurIPS*, 3183-3193 (evidence, alpha, strength, vacuity).
.. [2] Malinin, A. and Gales, M. (2018). Predictive uncertainty estimation via prior networks.
       *NeurIPS*, 7047-7058 (expected entropy, mutual information).
.. [3] McNamara, C. (2026). Rethinking vacuity for OOD detection in evidential deep learning.
       arXiv:2605.06382 (vacuity depends on K: Proposition 1, Table 1).
"""

from __future__ import annotations

import numpy as np

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.params import Integral, Interval, Param, validate_params

# The batch convention's validation and kernels live in ._batches, where every metric imports them from.
from ._batches import (
    PRIOR_WEIGHT,
    check_padded,
    entropy_of,
    expected_entropy_of,
    fill_padding,
    masked_max,
    masked_sum,
    probs_of,
)

__all__ = [
    "edl_alpha",
    "strength",
    "expected_probs",
    "vacuity",
    "class_counts",
    "expected_entropy",
    "mutual_information",
    "entropy",
    "softmax",
    "invariant_extra_alpha",
    "expand_classes",
]


def class_counts(arr) -> np.ndarray:
    r"""Per-row class count K (the number of non-NaN entries) of a NaN right-padded batch.

    .. math::

        K_i = \#\{j : x_{ij} \ne \mathrm{NaN}\}

    Parameters
    ----------
    arr : array-like of shape (n_samples, K_max)
        A NaN right-padded batch (logits, alpha or probabilities).

    Returns
    -------
    k : ndarray of int64, shape (n_samples,)

    Examples
    --------
    >>> from lm_eval_evidential.metrics.dirichlet import class_counts
    >>> class_counts([[0.1, 0.2, 0.7], [0.5, 0.5, float("nan")]]).tolist()
    [3, 2]
    """
    return check_padded(arr, "arr")[1]


@validate_params({"prior_weight": PRIOR_WEIGHT})
def edl_alpha(logits, prior_weight: float = 1.0) -> np.ndarray:
    r"""Dirichlet concentrations from logits (Sensoy et al. 2018), NaN padding preserved.

    .. math::

        \alpha_i = \mathrm{softplus}(z_i) + \lambda = \log(1 + e^{z_i}) + \lambda

    computed as ``np.logaddexp(0, z)``, which neither overflows for large ``z`` nor loses the
    ``exp(z)`` tail for very negative ``z``.

    Parameters
    ----------
    logits : array-like of shape (n_samples, K_max)
        Answer-token logits, NaN right-padded beyond each row's own K.
    prior_weight : float > 0, default=1.0
        The prior weight ``lambda`` added to every evidence.

    Returns
    -------
    alpha : ndarray of shape (n_samples, K_max)

    Examples
    --------
    >>> from lm_eval_evidential.metrics.dirichlet import edl_alpha
    >>> edl_alpha([[0.0, 2.0, float("nan")]]).round(4).tolist()  # softplus(0) = log 2
    [[1.6931, 3.1269, nan]]
    """
    lam = float(prior_weight)
    a, _, mask = check_padded(logits, "logits")
    # Padding is zero-filled for the arithmetic (logaddexp warns on NaN) and restored after.
    out = np.logaddexp(0.0, fill_padding(a, mask, 0.0))
    out += lam
    return fill_padding(out, mask, np.nan)


def strength(alpha) -> np.ndarray:
    r"""Dirichlet strength per row (Sensoy et al. 2018).

    .. math::

        S = \sum_{i < K} \alpha_i

    Parameters
    ----------
    alpha : array-like of shape (n_samples, K_max)
        Concentrations to sum, each row over its own K classes (NaN padding beyond).

    Returns
    -------
    S : ndarray of shape (n_samples,)
        Total concentration of each row; ``S >= lambda K``.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.dirichlet import strength
    >>> strength([[3.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, float("nan")]]).tolist()
    [6.0, 6.0]
    """
    a, _, mask = check_padded(alpha, "alpha", positive=True)
    return masked_sum(a, mask)


def expected_probs(alpha) -> np.ndarray:
    r"""Expected class probabilities under the Dirichlet (NaN padding preserved).

    .. math::

        E[p_i] = \alpha_i / S

    Parameters
    ----------
    alpha : array-like of shape (n_samples, K_max)
        Concentrations, all > 0, NaN right-padded; each row is normalised by its own sum.

    Returns
    -------
    probs : ndarray of shape (n_samples, K_max)
        Each row sums to 1 over its own K classes.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.dirichlet import expected_probs
    >>> expected_probs([[3.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, float("nan")]]).round(4).tolist()
    [[0.5, 0.1667, 0.1667, 0.1667], [0.3333, 0.3333, 0.3333, nan]]
    """
    a, _, mask = check_padded(alpha, "alpha", positive=True)
    return probs_of(a, mask)


@validate_params({"prior_weight": PRIOR_WEIGHT})
def vacuity(alpha, prior_weight: float = 1.0) -> np.ndarray:
    r"""Vacuity (uncertainty mass) per row; higher = more uncertain.

    .. math::

        u = \frac{\lambda K}{S} \in (0, 1]

    1 iff every class has zero evidence (Sensoy et al. 2018). It depends on ``K`` directly,
    which is why vacuity-based OOD scores must compare sets of equal ``K`` (McNamara 2026; see
    :func:`invariant_extra_alpha`).

    Parameters
    ----------
    alpha : array-like of shape (n_samples, K_max)
        Concentrations; the count of non-NaN entries of each row is its ``K``.
    prior_weight : float > 0, default=1.0
        The prior weight ``lambda`` of the model that produced ``alpha``.

    Returns
    -------
    u : ndarray of shape (n_samples,)
        Vacuity of each row.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.dirichlet import vacuity
    >>> vacuity([[3.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, float("nan")]]).round(4).tolist()  # 4/6, 3/6
    [0.6667, 0.5]
    """
    lam = float(prior_weight)
    a, k, mask = check_padded(alpha, "alpha", positive=True)
    return lam * k / masked_sum(a, mask)


def entropy(probs) -> np.ndarray:
    r"""Shannon entropy per row (natural log, ``0 log 0 = 0``).

    .. math::

        H(p) = -\sum_{i < K} p_i \log p_i

    Parameters
    ----------
    probs : array-like of shape (n_samples, K_max)
        Probability rows, NaN right-padded beyond each row's own K.

    Returns
    -------
    h : ndarray of shape (n_samples,)
        In nats, in ``[0, log K]``.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.dirichlet import entropy
    >>> entropy([[0.5, 0.5, float("nan")], [1.0, 0.0, 0.0]]).round(4).tolist()  # log 2, 0
    [0.6931, 0.0]
    """
    p, _, mask = check_padded(probs, "probs")
    return entropy_of(p, mask)


def softmax(logits) -> np.ndarray:
    r"""Row-wise softmax over each row's own K logits; padding stays NaN.

    .. math::

        p_i = \frac{e^{z_i}}{\sum_{j < K} e^{z_j}}

    computed after subtracting the row maximum, so large logits do not overflow.

    Parameters
    ----------
    logits : array-like of shape (n_samples, K_max)
        Logits to normalise, NaN right-padded beyond each row's own K.

    Returns
    -------
    p : ndarray of shape (n_samples, K_max)

    Examples
    --------
    >>> import math
    >>> from lm_eval_evidential.metrics.dirichlet import softmax
    >>> softmax([[0.0, math.log(3.0), float("nan")]]).round(4).tolist()
    [[0.25, 0.75, nan]]
    """
    a, _, mask = check_padded(logits, "logits")
    z = fill_padding(a, mask, -np.inf) - masked_max(a, mask)[:, None]
    ez = np.exp(z)  # exp(-inf) = 0, so the padding contributes nothing to the normaliser
    return fill_padding(ez / masked_sum(ez, mask)[:, None], mask, np.nan)


def expected_entropy(alpha) -> np.ndarray:
    r"""Expected entropy under the Dirichlet (aleatoric uncertainty), per row.

    .. math::

        E_{p \sim \mathrm{Dir}(\alpha)}[H(p)] = \psi(S + 1) - \sum_{i < K} \frac{\alpha_i}{S} \psi(\alpha_i + 1)

    with ``psi`` the digamma function, natural log units (Malinin & Gales 2018).

    Parameters
    ----------
    alpha : array-like of shape (n_samples, K_max)
        Concentrations; the expectation is over ``p ~ Dir(alpha)`` of each row.

    Returns
    -------
    ndarray of shape (n_samples,)
        Aleatoric uncertainty of each row, in nats, in ``[0, log K]``.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.dirichlet import expected_entropy
    >>> expected_entropy([[3.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, float("nan")]]).round(4).tolist()
    [1.0333, 0.95]
    """
    a, _, mask = check_padded(alpha, "alpha", positive=True)
    return expected_entropy_of(a, mask)


def mutual_information(alpha) -> np.ndarray:
    r"""Mutual information (epistemic uncertainty) per row; >= 0 up to rounding.

    .. math::

        I = H(E[p]) - E_{\mathrm{Dir}(\alpha)}[H(p)]

    (Malinin & Gales 2018). Not clipped at 0: values like -1e-17 are float cancellation at
    very large S, reported as is.

    Parameters
    ----------
    alpha : array-like of shape (n_samples, K_max)
        Concentrations; large ``S`` (much evidence) drives the information to 0.

    Returns
    -------
    ndarray of shape (n_samples,)
        Epistemic uncertainty of each row, in nats.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.dirichlet import mutual_information
    >>> little, much = [3.0, 1.0, 1.0, 1.0], [20.0, 20.0, 20.0, float("nan")]  # S = 6 and S = 60
    >>> mutual_information([little, much]).round(4).tolist()
    [0.2091, 0.0165]
    """
    a, _, mask = check_padded(alpha, "alpha", positive=True)
    return entropy_of(probs_of(a, mask), mask) - expected_entropy_of(a, mask)


def invariant_extra_alpha(alpha) -> np.ndarray:
    r"""Concentration a new (K+1)-th class needs for vacuity to stay unchanged: ``S_K / K``.

    Proposition 1 of McNamara (2026), generalised to prior weight ``lambda``. With
    ``u_K = lambda K / S_K`` and ``u_{K+1} = lambda (K + 1) / (S_K + alpha_{K+1})``:

    .. math::

        u_{K+1} = u_K \iff (K + 1) S_K = K (S_K + \alpha_{K+1}) \iff \alpha_{K+1} = S_K / K

    (``lambda > 0`` cancels), i.e. the mean concentration of the existing classes, whatever
    ``lambda`` is; in evidence terms ``e_{K+1} = S_K / K - lambda``. Since
    ``S_K >= lambda K`` with equality iff every existing class has zero evidence, a
    zero-evidence class (``alpha = lambda``) leaves vacuity unchanged only for rows that have
    no evidence at all, and otherwise strictly raises it (lowers the reciprocal-vacuity score):
    that is the OOD-only inflation of McNamara (2026), Table 1.

    Parameters
    ----------
    alpha : array-like of shape (n_samples, K_max)
        Concentrations of the existing ``K`` classes of each row.

    Returns
    -------
    ndarray of shape (n_samples,)
        The concentration ``S_K / K`` the (K+1)-th class of each row needs.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.dirichlet import invariant_extra_alpha
    >>> alpha = [[3.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, float("nan")]]
    >>> invariant_extra_alpha(alpha).tolist()  # S_K / K: 6 / 4 and 6 / 3
    [1.5, 2.0]
    """
    a, k, mask = check_padded(alpha, "alpha", positive=True)
    return masked_sum(a, mask) / k


#: ``extra``: the options appended to each row (zero-evidence classes here, phantom options in the K sweep).
EXTRA = Param(Interval(Integral, 0), why="options appended to each row", example="extra=1")


@validate_params({"extra": EXTRA, "prior_weight": PRIOR_WEIGHT})
def expand_classes(alpha, extra: int, prior_weight: float = 1.0, rows=None):
    r"""Append ``extra`` zero-evidence classes (``alpha = lambda`` each) to rows; K grows by ``extra``.

    .. math::

        \alpha' = (\alpha_1, \dots, \alpha_K, \underbrace{\lambda, \dots, \lambda}_{extra}),
        \qquad K' = K + extra

    Each selected row's new classes go right after its own last class, so ragged rows stay
    correctly padded. This is the class expansion of McNamara (2026), Table 1.

    Parameters
    ----------
    alpha : array-like of shape (n_samples, K_max)
        Concentrations to extend, NaN right-padded (ragged rows stay ragged).
    extra : int >= 0
        Classes to append.
    prior_weight : float > 0, default=1.0
        The prior weight ``lambda``, the concentration of each new class.
    rows : array-like of bool, shape (n_samples,), optional
        Which rows grow (default all).

    Returns
    -------
    new_alpha : ndarray of shape (n_samples, max(k))
        The NaN right-padded concentrations.
    k : ndarray of int64, shape (n_samples,)
        The new per-row class counts.

    Examples
    --------
    >>> import numpy as np
    >>> from lm_eval_evidential.metrics.dirichlet import expand_classes, vacuity
    >>> grown, k = expand_classes(np.array([[3.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, np.nan]]), 1)
    >>> grown.tolist(), k.tolist()
    ([[3.0, 1.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 1.0, nan]], [5, 4])
    >>> vacuity(grown).round(4).tolist()  # up from [0.6667, 0.5]: the model did not change
    [0.7143, 0.5714]
    """
    lam = float(prior_weight)
    a, k, mask = check_padded(alpha, "alpha", positive=True)
    n = a.shape[0]
    if rows is None:
        grow = np.ones(n, dtype=bool)
    else:
        grow = np.asarray(rows)
        if grow.dtype != bool or grow.shape != (n,):
            raise InvalidValueError(
                f"rows must be a boolean mask of shape ({n},), got dtype {grow.dtype} and shape {grow.shape}"
            )
    return expand_unchecked(a, k, np.where(grow, int(extra), 0), lam)


def expand_unchecked(a: np.ndarray, k: np.ndarray, extra: np.ndarray | int, lam: float):
    """Unchecked core of :func:`expand_classes` on a validated batch; ``extra`` per row or scalar."""
    n = a.shape[0]
    new_k = k + extra
    width = int(new_k.max()) if n else a.shape[1] + int(np.max(extra, initial=0))
    out = np.full((n, width), np.nan)
    out[:, : a.shape[1]] = a  # a's own padding is NaN already
    cols = np.arange(width)
    np.copyto(out, lam, where=(cols >= k[:, None]) & (cols < new_k[:, None]))
    return out, new_k
