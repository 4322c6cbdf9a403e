"""Calibration metrics on per-example confidences and on NaN right-padded probability rows.

Confidence-based metrics (:func:`ece`, :func:`adaptive_ece`, :func:`reliability_diagram`) take
the confidence of the *predicted* class (e.g. ``max_i E[p_i]``) and whether that prediction was
correct (1 = correct). Row-wise metrics (:func:`nll`, :func:`brier`) take an ``(n, K_max)``
probability batch right-padded with NaN beyond each row's own ``K`` (see
:mod:`lm_eval_evidential.metrics.dirichlet`) and the gold class index per row. Lower is better for
every metric here. An empty input returns NaN with an
:class:`~lm_eval_evidential.metrics._validation.UndefinedMetricWarning`.
References
----------
.. [1] Guo, C., Pleiss, G., Sun, Y. and Weinberger, K. Q. (2017). On calibration of modern
       neural networks. *ICML*, 1321-1330.
.. [2] Naeini, M. P., Cooper, G. F. and Hauskrecht, M. (2015). Obtaining well calibrated
       probabilities using Bayesian binning. *AAAI*, 2901-2907.
.. [3] Nixon, J., Dusenberry, M. W., Zhang, L., Jerfel, G. and Tran, D. (2019). Measuring
       calibration in deep learning. *CVPR Workshops*, 38-41.
.. [4] Brier, G. W. (1950). Verification of forecasts expressed in terms of probability.
       *Monthly Weather Review* 78(1), 1-3.
"""

from __future__ import annotations

import numpy as np

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.params import Integral, Interval, Param, validate_params

from ._batches import check_padded
from ._validation import (
    as_1d_float,
    as_binary_labels,
    check_same_length,
    first_outside_unit_interval,
    undefined,
)
from .scores import check_simplex

__all__ = [
    "NLL_FLOOR",
    "ece",
    "adaptive_ece",
    "reliability_diagram",
    "nll",
    "brier",
]

#: Probabilities below this are raised to it inside :func:`nll`, so one impossible-looking gold
#: class costs at most ``-log(NLL_FLOOR) ~= 36.04`` nats instead of ``inf``. It is float64
#: machine epsilon, the same floor as :func:`sklearn.metrics.log_loss` uses for float64 input.
NLL_FLOOR = float(np.finfo(np.float64).eps)


#: Upper bound of bins: beyond it most bins are empty or hold one example, and the bin arrays,
#: not the data, would set the work and memory.
MAX_BINS = 10_000


#: ``n_bins``: the bins of an ECE or a reliability diagram (declared once: the report takes it too).
N_BINS = Param(Interval(Integral, 1, MAX_BINS), example="n_bins=15")


def _confidence_correct(confidence, correct):
    c = as_1d_float(confidence, "confidence")
    y = as_binary_labels(correct, "correct")
    check_same_length(confidence=c, correct=y)
    i = first_outside_unit_interval(c)
    if i is not None:
        raise InvalidValueError(
            f"confidence must lie in [0, 1] (a probability of the predicted class), found {c[i]!r} at "
            f"index {i}; pass probabilities, not logits or Dirichlet strengths"
        )
    return c, y


def _equal_width_bins(c: np.ndarray, n_bins: int):
    # Inner edges k / n_bins (k = 1..n_bins-1), each the correctly rounded float64 quotient.
    # searchsorted(side="right") counts the inner edges <= c, so a value equal to an edge goes
    # to the bin it opens, and 1.0 (no inner edge above it) to the last bin without clamping.
    edges = np.arange(n_bins + 1, dtype=np.float64) / n_bins
    return edges, np.searchsorted(edges[1:-1], c, side="right")


def _binned_gap(c, y, bins, n_bins) -> float:
    # sum_b (n_b / n) |acc_b - conf_b| == sum_b |sum_acc_b - sum_conf_b| / n: no per-bin division.
    conf_sum = np.bincount(bins, weights=c, minlength=n_bins)
    acc_sum = np.bincount(bins, weights=y.astype(np.float64), minlength=n_bins)
    return float(np.abs(acc_sum - conf_sum).sum() / c.size)


@validate_params({"n_bins": N_BINS})
def ece(confidence, correct, n_bins: int = 15) -> float:
    r"""Expected calibration error with ``n_bins`` equal-width bins, L1 norm, count-weighted.

    .. math::

        \mathrm{ECE} = \sum_b \frac{n_b}{n} \left| \mathrm{acc}_b - \mathrm{conf}_b \right|

    where ``acc_b`` is the share of correct predictions and ``conf_b`` the mean confidence
    among the ``n_b`` examples in bin ``b`` (Naeini et al. 2015; Guo et al. 2017); empty bins
    contribute 0. Lower is better; 0 is perfectly calibrated at this binning. Range ``[0, 1]``.

    Binning: edges ``e_k = k / n_bins`` (``k = 0..n_bins``, correctly rounded float64). Bin
    ``b`` is ``[e_b, e_{b+1})`` for ``b < n_bins - 1`` and the last bin is closed,
    ``[e_{n_bins-1}, 1]``. So 0 is in bin 0, ``1/15`` opens bin 1 (with 15 bins), and 1.0 is in
    bin 14.

    This is the closed side of torchmetrics' multiclass calibration error
    (``_binning_bucketize``: ``torch.bucketize(confidences, linspace(0, 1, n_bins + 1),
    right=True) - 1``, i.e. bins ``[lo, hi)``), checked against torchmetrics 1.9.0 source, with
    two differences: (1) torchmetrics does *not* clamp that index, so a confidence of exactly 1.0
    lands in a hidden ``(n_bins + 1)``-th bin of its own (torchmetrics issue #3510) while here it
    is in the last bin as in the textbook definition; (2) torchmetrics bins in float32, whose
    edges can differ from ours by one float32 ulp, so a confidence within ~1e-7 of an inner edge
    may fall into the neighbouring bin there. Otherwise the values agree.

    Parameters
    ----------
    confidence : array-like of shape (n_samples,), values in [0, 1]
        Confidence of the predicted class (e.g. ``max_i E[p_i]``), binned by value.
    correct : array-like of shape (n_samples,), 0/1 or bool
        1 where the prediction was correct.
    n_bins : int >= 1, default=15
        Number of equal-width bins.

    Returns
    -------
    ece : float
        NaN (with an :class:`UndefinedMetricWarning`) for 0 examples.

    See Also
    --------
    adaptive_ece : the same gap over equal-count bins.
    reliability_diagram : the per-bin numbers behind it.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.calibration import ece
    >>> # bin [0, 0.5): conf 0.3, acc 0; bin [0.5, 1]: mean conf 0.7667, acc 2/3
    >>> round(ece([0.9, 0.8, 0.6, 0.3], [1, 1, 0, 0], n_bins=2), 4)  # (1/4)(0.3) + (3/4)(0.1)
    0.15
    """
    n_bins = int(n_bins)
    c, y = _confidence_correct(confidence, correct)
    if c.size == 0:
        return undefined("ece is undefined for 0 examples")
    _, bins = _equal_width_bins(c, n_bins)
    return _binned_gap(c, y, bins, n_bins)


def _equal_count_bins(c: np.ndarray, n_bins: int) -> np.ndarray:
    order = np.argsort(c, kind="stable")
    sorted_c = c[order]
    # np.array_split sizes: the first (n % n_bins) bins hold one extra example.
    q, r = divmod(c.size, n_bins)
    sizes = np.full(n_bins, q, dtype=np.int64)
    sizes[:r] += 1
    bin_of_position = np.repeat(np.arange(n_bins), sizes)
    # A tie group goes wholly to the bin of its lowest sorted position, so the result does not
    # depend on the input order of tied confidences.
    first_position = np.searchsorted(sorted_c, sorted_c, side="left")
    bins = np.empty(c.size, dtype=np.int64)
    bins[order] = bin_of_position[first_position]
    return bins


@validate_params({"n_bins": N_BINS})
def adaptive_ece(confidence, correct, n_bins: int = 15) -> float:
    r"""Calibration error with ``n_bins`` equal-count (adaptive) bins, L1 norm, count-weighted.

    Same formula as :func:`ece`,

    .. math::

        \mathrm{ACE} = \sum_b \frac{n_b}{n} \left| \mathrm{acc}_b - \mathrm{conf}_b \right|,

    but the bins are quantile bins of the confidences (equal-mass binning, Nixon et al. 2019),
    which spends resolution where the confidences are. Lower is better.

    Bin assignment, exactly: sort the confidences ascending (stable sort) and cut the sorted
    positions as ``np.array_split(positions, n_bins)`` does, i.e. the first ``n % n_bins`` bins
    get ``n // n_bins + 1`` positions and the rest ``n // n_bins`` (bins are empty when
    ``n < n_bins``). Ties: all examples with the same confidence go to the bin of the *first*
    sorted position holding that value, so a tie group that straddles a cut moves wholly into
    the lower bin (bins are then not exactly equal-sized, and a bin can be emptied). This makes
    the result invariant to the input order. Unlike Nixon et al.'s ACE this weights bins by
    their counts (identical when ``n`` is a multiple of ``n_bins`` and there are no ties) and
    uses only the predicted class.

    Parameters
    ----------
    confidence : array-like of shape (n_samples,), values in [0, 1]
        Confidence of the predicted class, binned by rank.
    correct : array-like of shape (n_samples,), 0/1 or bool
        Whether each prediction was right (1) or wrong (0).
    n_bins : int >= 1, default=15
        Number of equal-count bins.

    Returns
    -------
    ace : float
        NaN (with an :class:`UndefinedMetricWarning`) without examples.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.calibration import adaptive_ece
    >>> # bins {0.3, 0.6} (conf 0.45, acc 0) and {0.8, 0.9} (conf 0.85, acc 1)
    >>> round(adaptive_ece([0.9, 0.8, 0.6, 0.3], [1, 1, 0, 0], n_bins=2), 4)
    0.3
    """
    n_bins = int(n_bins)
    c, y = _confidence_correct(confidence, correct)
    if c.size == 0:
        return undefined("adaptive_ece is undefined for 0 examples")
    return _binned_gap(c, y, _equal_count_bins(c, n_bins), n_bins)


@validate_params({"n_bins": N_BINS})
def reliability_diagram(confidence, correct, n_bins: int = 15) -> dict:
    r"""Per-bin statistics of the equal-width binning used by :func:`ece` (same edges, same sides).

    Perfect calibration is ``accuracy == mean_confidence`` in every non-empty bin, and

    .. math::

        \mathrm{ECE} = \sum_b \frac{\mathrm{counts}_b}{n}
        \left| \mathrm{accuracy}_b - \mathrm{mean\_confidence}_b \right|.

    Parameters
    ----------
    confidence : array-like of shape (n_samples,), values in [0, 1]
        Predicted-class confidences to tabulate per bin.
    correct : array-like of shape (n_samples,), 0/1 or bool
        Correctness, averaged per bin into ``accuracy``.
    n_bins : int >= 1, default=15
        Number of bins of width ``1 / n_bins``.

    Returns
    -------
    diagram : dict
        Arrays indexed by bin ``b``: ``edges`` (n_bins + 1,), the edges ``k / n_bins``;
        ``counts`` (n_bins,) int64; ``mean_confidence`` and ``accuracy`` (n_bins,), NaN for an
        empty bin; and ``ece``, :func:`ece` of the same input (NaN for an empty input).

    Examples
    --------
    >>> from lm_eval_evidential.metrics.calibration import reliability_diagram
    >>> d = reliability_diagram([0.9, 0.8, 0.6, 0.3], [1, 1, 0, 0], n_bins=2)
    >>> d["edges"].tolist(), d["counts"].tolist(), d["accuracy"].round(4).tolist()
    ([0.0, 0.5, 1.0], [1, 3], [0.0, 0.6667])
    """
    n_bins = int(n_bins)
    c, y = _confidence_correct(confidence, correct)
    edges, bins = _equal_width_bins(c, n_bins)
    counts = np.bincount(bins, minlength=n_bins).astype(np.int64)
    conf_sum = np.bincount(bins, weights=c, minlength=n_bins)
    acc_sum = np.bincount(bins, weights=y.astype(np.float64), minlength=n_bins)
    nonempty = counts > 0
    safe = np.where(nonempty, counts, 1)
    return {
        "edges": edges,
        "counts": counts,
        "mean_confidence": np.where(nonempty, conf_sum / safe, np.nan),
        "accuracy": np.where(nonempty, acc_sum / safe, np.nan),
        "ece": _binned_gap(c, y, bins, n_bins) if c.size else undefined("ece is undefined for 0 examples"),
    }


def probs_and_gold(probs, gold):
    p, k, mask = check_padded(probs, "probs")
    check_simplex(p, mask)
    g = np.asarray(gold)
    if g.ndim != 1 or g.shape[0] != p.shape[0]:
        raise InvalidValueError(f"gold must be 1-D with one class index per row ({p.shape[0]}), got shape {g.shape}")
    if g.dtype.kind not in "iu":
        raise InvalidValueError(f"gold must hold integer class indices, got dtype {g.dtype}")
    g = g.astype(np.int64, copy=False)
    bad = (g < 0) | (g >= k)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidValueError(
            f"gold[{i}] = {int(g[i])} is not a class of row {i}, which has K = {int(k[i])} classes "
            f"(valid indices 0..{int(k[i]) - 1}); the columns beyond K are NaN padding"
        )
    return p, k, mask, g


def nll(probs, gold) -> float:
    r"""Mean negative log-likelihood of the gold class (nats), floored at ``NLL_FLOOR``.

    .. math::

        \mathrm{NLL} = -\frac{1}{n} \sum_i \log \max(p_{i, g_i}, \epsilon)

    with ``epsilon = NLL_FLOOR`` (float64 eps, ~2.22e-16), so an exactly-zero gold probability
    costs ~36.04 nats; this matches :func:`sklearn.metrics.log_loss`, which clips to
    ``[eps, 1 - eps]`` (the upper clip changes a loss by at most ~1.1e-16). Lower is better.

    Parameters
    ----------
    probs : array-like of shape (n_samples, K_max)
        Probability rows over each row's own K classes, NaN right-padded beyond K (each sums
        to 1 within 1e-3); only the gold entry is read.
    gold : array-like of int, shape (n_samples,)
        Index of the correct class, ``0 <= gold[i] < K_i``.

    Returns
    -------
    nll : float
        NaN (with an :class:`UndefinedMetricWarning`) for 0 examples.

    Examples
    --------
    >>> import numpy as np
    >>> from lm_eval_evidential.metrics.calibration import nll
    >>> probs = np.array([[0.5, 0.25, 0.25, np.nan], [0.25, 0.25, 0.25, 0.25]])  # K = 3 and 4
    >>> round(nll(probs, [0, 3]), 4)  # (log 2 + log 4) / 2
    1.0397
    """
    p, _, _, g = probs_and_gold(probs, gold)
    if p.shape[0] == 0:
        return undefined("nll is undefined for 0 examples")
    p_gold = p[np.arange(p.shape[0]), g]
    return float(np.mean(-np.log(np.maximum(p_gold, NLL_FLOOR))))


def brier(probs, gold) -> float:
    r"""Multi-class Brier score over each row's own K classes (Brier 1950).

    .. math::

        \mathrm{BS} = \frac{1}{n} \sum_i \sum_{j < K_i} \left(p_{ij} - [j = g_i]\right)^2

    The NaN padding is not a class, so a row's score lies in ``[0, 2]``; lower is better. For
    a fixed K >= 3 this equals :func:`sklearn.metrics.brier_score_loss` (sum over classes, mean
    over examples, no division by K); for K = 2 sklearn scores only the positive class, which
    is half of this two-class sum.

    Parameters
    ----------
    probs : array-like of shape (n_samples, K_max)
        Every entry of each row's own K classes is scored against the one-hot gold vector;
        NaN padding beyond K.
    gold : array-like of int, shape (n_samples,)
        The class index that is 1 in the one-hot target of each row.

    Returns
    -------
    brier : float
        Undefined (NaN, with an :class:`UndefinedMetricWarning`) without examples.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.calibration import brier
    >>> brier([[0.5, 0.25, 0.25, float("nan")], [0.25, 0.25, 0.25, 0.25]], [0, 3])  # (0.375 + 0.75) / 2
    0.5625
    """
    p, _, mask, g = probs_and_gold(probs, gold)
    if p.shape[0] == 0:
        return undefined("brier is undefined for 0 examples")
    onehot = np.arange(p.shape[1]) == g[:, None]
    sq = np.where(mask, (p - onehot) ** 2, 0.0)
    return float(sq.sum(axis=1).mean())
