"""Post-hoc temperature scaling (Guo et al. 2017): one scalar T fitted by NLL on validation logits.

``softmax(z / T)`` keeps every prediction (the argmax does not move) and rescales the confidence:
T > 1 softens an overconfident model, T < 1 sharpens an underconfident one. T is fitted by
minimising the mean negative log-likelihood of the gold option on held-out validation examples,

.. math::

    \\hat T = \\arg\\min_{T > 0} -\\frac{1}{n} \\sum_i \\log \\mathrm{softmax}(z_i / T)_{g_i},

a one-dimensional convex problem in ``1/T`` (the NLL of a softmax is convex in its logits, and
``z / T`` is linear in ``1/T``), solved here by ``scipy.optimize.minimize_scalar`` over ``log T``.
At the optimum the first-order condition holds: the gold logit equals, on average, the logit
expected under the scaled softmax, :math:`\\frac1n \\sum_i (z_{i,g_i} - \\sum_j p_{ij} z_{ij}) = 0`.

Each row has its own K (NaN right-padding beyond it, which never enters a softmax).

For evidential records the answer logits ``z`` are what the evidence is computed from
(``e = softplus(z)``); scaling them by ``1/T`` gives the Guo et al. softmax of those logits,
not a rescaled Dirichlet. No published single-parameter analogue for evidence was found: the
nearest post-hoc method, the Evidential Transformation Network (Chun et al. 2026), learns a
sample-dependent affine map of the logits (a trained module, not one scalar).

References
----------
.. [1] Guo, C., Pleiss, G., Sun, Y. and Weinberger, K. Q. (2017). On calibration of modern
       neural networks. *ICML*, 1321-1330.
.. [2] Chun, Y., Park, C., Yoon, J., Seo, J. and Lim, H. (2026). Evidential Transformation Network:
       turning pretrained models into evidential models for post-hoc uncertainty estimation.
       *CVPR*, 6157-6166 (arXiv:2604.08627).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize_scalar

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.params import Interval, Param, Real, validate_params

from ._batches import check_padded
from ._validation import undefined

__all__ = ["LOG_T_BOUNDS", "scaled_softmax", "temperature_nll", "fit_temperature"]

#: Search interval of log T: T from about 0.0067 to 148.
LOG_T_BOUNDS = (-5.0, 5.0)


def _logits_gold(logits, gold):
    z, k, mask = check_padded(logits, "logits")
    g = np.asarray(gold)
    if g.ndim != 1 or g.shape[0] != z.shape[0] or g.dtype.kind not in "iu":
        raise InvalidValueError(
            f"gold must be 1-D integer class indices, one per row ({z.shape[0]}), got {g.dtype} {g.shape}"
        )
    if z.shape[0] and ((g < 0) | (g >= k)).any():
        i = int(np.flatnonzero((g < 0) | (g >= k))[0])
        raise InvalidValueError(f"gold[{i}] = {int(g[i])} is not one of row {i}'s K = {int(k[i])} options")
    return z, mask, g.astype(np.int64)


def _log_softmax(z: np.ndarray, mask: np.ndarray, inv_t: float) -> np.ndarray:
    x = np.where(mask, z * inv_t, -np.inf)
    x -= x.max(axis=1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=1, keepdims=True))


#: ``temperature``: what the logits are divided by before the softmax.
TEMPERATURE = Param(
    Interval(Real, 0, None, closed="neither"), why="the logits are divided by it", example="temperature=1.5"
)


@validate_params({"temperature": TEMPERATURE})
def scaled_softmax(logits, temperature: float) -> np.ndarray:
    r"""``softmax(z / T)`` over each row's own K options (NaN padding kept).

    .. math::

        p_{ij}(T) = \frac{\exp(z_{ij} / T)}{\sum_{l < K_i} \exp(z_{il} / T)}

    Parameters
    ----------
    logits : array-like of shape (n_samples, K_max)
        Answer logits, NaN right-padded beyond each row's K.
    temperature : float > 0

    Returns
    -------
    probs : ndarray of shape (n_samples, K_max)

    Examples
    --------
    >>> from lm_eval_evidential.metrics.temperature import scaled_softmax
    >>> scaled_softmax([[2.0, 0.0]], 2.0).round(4).tolist()  # softmax([1, 0])
    [[0.7311, 0.2689]]
    """
    t = float(temperature)
    z, _, mask = check_padded(logits, "logits")
    return np.where(mask, np.exp(_log_softmax(z, mask, 1.0 / t)), np.nan)


@validate_params({"temperature": TEMPERATURE})
def temperature_nll(logits, gold, temperature: float) -> float:
    r"""Mean negative log-likelihood (nats) of the gold option under ``softmax(z / T)``.

    .. math::

        \mathrm{NLL}(T) = -\frac{1}{n} \sum_i \log p_{i, g_i}(T)

    Parameters
    ----------
    logits : array-like of shape (n_samples, K_max)
        Answer logits, NaN right-padded.
    gold : array-like of int, shape (n_samples,)
    temperature : float > 0

    Returns
    -------
    nll : float
        In nats, the quantity :func:`fit_temperature` minimises; NaN (with an
        :class:`UndefinedMetricWarning`) when there is no example.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.temperature import temperature_nll
    >>> round(temperature_nll([[2.0, 0.0]], [0], 2.0), 4)  # -log 0.7311
    0.3133
    """
    z, mask, g = _logits_gold(logits, gold)
    if z.shape[0] == 0:
        return undefined("the NLL is undefined for 0 examples")
    t = float(temperature)
    return float(-_log_softmax(z, mask, 1.0 / t)[np.arange(z.shape[0]), g].mean())


def fit_temperature(logits, gold) -> float:
    r"""The temperature minimising the validation NLL (Guo et al. 2017).

    .. math::

        \hat T = \arg\min_{\log T \in [-5, 5]} \mathrm{NLL}(T)

    by bounded Brent search on ``log T`` (``scipy.optimize.minimize_scalar``, ``xatol=1e-10``).
    When every validation answer is right the NLL falls toward 0 as T -> 0 and has no finite
    optimum (NaN with the reason); when the optimum lies at a search bound the bound is returned
    and a warning says so.

    Parameters
    ----------
    logits : array-like of shape (n_samples, K_max)
        Validation answer logits, NaN right-padded.
    gold : array-like of int, shape (n_samples,)

    Returns
    -------
    temperature : float
        NaN (with an :class:`UndefinedMetricWarning`) for 0 examples, when every row has one
        option (K = 1: the NLL does not depend on T), or when every validation answer is right.

    Examples
    --------
    >>> import numpy as np
    >>> from lm_eval_evidential.metrics.temperature import fit_temperature
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=(2000, 4)) * 3.0  # a model 3x too sharp for its own labels...
    >>> gold = np.array([rng.choice(4, p=np.exp(r) / np.exp(r).sum()) for r in z / 3.0])
    >>> 2.7 < fit_temperature(z, gold) < 3.3  # ...is cooled by T close to 3 (2.9 on this sample)
    True
    """
    z, mask, g = _logits_gold(logits, gold)
    if z.shape[0] == 0:
        return undefined("the temperature is undefined for 0 validation examples")
    if not (mask.sum(axis=1) > 1).any():
        return undefined("the temperature is undefined: every validation row has K = 1, so its NLL is 0 at any T")
    rows = np.arange(z.shape[0])
    others = np.where(mask, z, -np.inf)
    others[rows, g] = -np.inf
    if (z[rows, g] > others.max(axis=1)).all():
        return undefined(
            "the temperature is undefined: every validation answer is right, so the NLL keeps falling toward 0 as "
            "T -> 0 and has no finite optimum"
        )

    def nll(log_t: float) -> float:
        return float(-_log_softmax(z, mask, math.exp(-log_t))[rows, g].mean())

    res = minimize_scalar(nll, bounds=LOG_T_BOUNDS, method="bounded", options={"xatol": 1e-10})
    log_t = float(res.x)
    if min(abs(log_t - b) for b in LOG_T_BOUNDS) < 1e-3:  # Brent stops just inside a bound
        undefined(
            f"the fitted temperature is at the search bound T = {math.exp(log_t):.4g}: the validation NLL keeps "
            "falling beyond it (e.g. every answer right and confident); the value is the bound, not an optimum"
        )
    return math.exp(log_t)
