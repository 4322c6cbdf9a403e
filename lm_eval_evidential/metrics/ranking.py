"""The point values of the OOD-detection metrics, read off one sort of the score in tied blocks.

AUROC (an exact integer Mann-Whitney count), AUPR-In, AUPR-Out, FPR at a TPR and the AUPR
baseline; the conventions (ID = positive = 1, higher score = more ID, NaN with a warning where a
metric is undefined) and why the sort is hand-rolled are :mod:`.detection`'s, which adds the
intervals (DeLong, bootstrap) and the one-sort report and re-exports these.

References
----------
.. [1] Hanley, J. A. and McNeil, B. J. (1982). The meaning and use of the area under a
       receiver operating characteristic (ROC) curve. *Radiology* 143(1), 29-36.
.. [2] Davis, J. and Goadrich, M. (2006). The relationship between precision-recall and ROC
       curves. *ICML*, 233-240.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lm_eval_evidential.params import Interval, Param, Real, validate_params

from ._validation import as_1d_float, as_binary_labels, check_same_length, undefined

__all__ = ["auroc", "aupr_in", "aupr_out", "fpr_at_95_tpr", "aupr_baseline"]


@dataclass(frozen=True)
class TieBlocks:
    """Tied blocks of the descending score sort: block g holds the examples with score v_g.

    ``tps[g]`` / ``fps[g]``: number of ID / OOD examples with score >= v_g (cumulative);
    ``dtp``/``dfp``: the counts inside block g; ``gid``: block index of each example in input
    order (only when requested, for DeLong's per-example components).
    """

    tps: np.ndarray
    fps: np.ndarray
    dtp: np.ndarray
    dfp: np.ndarray
    n_id: int
    n_ood: int
    gid: np.ndarray | None


def ranking_inputs(y_true, score, score_name: str = "score"):
    y = as_binary_labels(y_true, "y_true")
    s = as_1d_float(score, score_name)
    check_same_length(y_true=y, **{score_name: s})
    return y, s


def tie_blocks(y: np.ndarray, s: np.ndarray, *, with_gid: bool = False) -> TieBlocks:
    s_id, s_ood = s[y], s[~y]
    if not with_gid:
        return merge_tie_blocks(np.sort(s_id), np.sort(s_ood))
    o_id, o_ood = np.argsort(s_id), np.argsort(s_ood)
    b = merge_tie_blocks(s_id[o_id], s_ood[o_ood], with_gid=True)
    gid = np.empty(s.size, dtype=np.int64)  # block ids back in input order
    gid[np.flatnonzero(y)[o_id]] = b.gid[: s_id.size]
    gid[np.flatnonzero(~y)[o_ood]] = b.gid[s_id.size :]
    return TieBlocks(b.tps, b.fps, b.dtp, b.dfp, b.n_id, b.n_ood, gid)


def merge_tie_blocks(sid: np.ndarray, sood: np.ndarray, *, with_gid: bool = False) -> TieBlocks:
    """Blocks from the ascending-sorted ID and OOD scores.

    Sorting each side and merging with a stable argsort (timsort finds the two runs and does
    one linear merge) is ~1.5x faster than one argsort of everything, and lets the K sweep
    reuse the sorted ID side. With ``with_gid``, ``gid`` is indexed by position in
    ``concatenate((sid, sood))``.
    """
    n_id = sid.size
    c = np.concatenate((sid, sood))
    order = np.argsort(c, kind="stable")[::-1]  # descending; order within a tie is irrelevant
    cs = c[order]
    new_block = cs[1:] != cs[:-1]
    last = np.append(np.flatnonzero(new_block), c.size - 1)
    tps = np.cumsum(order < n_id, dtype=np.int64)[last]
    fps = (last + 1) - tps
    gid = None
    if with_gid:
        gid = np.empty(c.size, dtype=np.int64)
        gid[order] = np.concatenate(([0], np.cumsum(new_block, dtype=np.int64)))
    dtp, dfp = tps.copy(), fps.copy()
    dtp[1:] -= tps[:-1]
    dfp[1:] -= fps[:-1]
    return TieBlocks(tps, fps, dtp, dfp, n_id, sood.size, gid)


def single_class_reason(metric: str, y: np.ndarray) -> str | None:
    n_id = int(y.sum())
    n_ood = int(y.size - n_id)
    if n_id and n_ood:
        return None
    return (
        f"{metric} is undefined: it needs both ID (label 1) and OOD (label 0) examples, got n_id={n_id}, n_ood={n_ood}"
    )


def _blockwise(metric: str, y_true, score, compute: Callable[[TieBlocks], float]) -> float:
    """``compute`` on the blocks of the validated inputs, or NaN with the reason when a class is absent."""
    y, s = ranking_inputs(y_true, score)
    reason = single_class_reason(metric, y)
    return undefined(reason, stacklevel=4) if reason else compute(tie_blocks(y, s))


def auroc_from_blocks(b: TieBlocks) -> float:
    # Mann-Whitney U counted exactly: each OOD example in block g is beaten by the tps[g-1]
    # ID examples above it and ties with the dtp[g] in its block (worth 1/2). Doubled to stay
    # integral; 2U <= 2 n_id n_ood fits int64 for any n below ~4e9.
    two_u = int(np.dot(b.dfp, 2 * (b.tps - b.dtp) + b.dtp))
    return two_u / (2 * b.n_id * b.n_ood)  # Python ints: one correctly rounded division


def aupr_in_from_blocks(b: TieBlocks) -> float:
    # scikit-learn's step-wise AP: sum over thresholds of (recall increase) x precision. A product
    # summed, not np.dot: BLAS threads on a busy machine made each call ~100x slower (25 ms against
    # 0.23 ms on 40k blocks, load 13; bootstrap CIs make 1,000 calls per score).
    precision = b.tps / (b.tps + b.fps)
    return float((b.dtp * precision).sum() / b.n_id)


def aupr_out_from_blocks(b: TieBlocks) -> float:
    # OOD positive, score negated = thresholds walked upwards: at block g the accepted set
    # is {score <= v_g}, holding n_ood - fps[g-1] OOD out of n - tps[g-1] - fps[g-1].
    tp_prev = b.tps - b.dtp
    fp_prev = b.fps - b.dfp
    n = b.n_id + b.n_ood
    precision = (b.n_ood - fp_prev) / (n - tp_prev - fp_prev)
    return float((b.dfp * precision).sum() / b.n_ood)  # not np.dot: see aupr_in_from_blocks


#: ``tpr``: the ID recall at which the share of OOD accepted is read.
TPR = Param(Interval(Real, 0, 1, closed="right"), example="tpr=0.95")


def fpr_from_blocks(b: TieBlocks, tpr: float) -> float:
    ok = b.tps / b.n_id >= tpr
    return float(b.fps[int(np.argmax(ok))] / b.n_ood)  # ok[-1] is True since tps[-1] = n_id


def auroc(y_true, score) -> float:
    r"""Area under the ROC curve with ID = positive (label 1) and higher score = more ID.

    .. math::

        \mathrm{AUROC} = P(s_{ID} > s_{OOD}) + \tfrac{1}{2} P(s_{ID} = s_{OOD})

    the Mann-Whitney probability, counted exactly over all ID x OOD pairs (Hanley & McNeil
    1982, module references). 0.5 is chance, 1 perfect separation; invariant to any strictly
    increasing transform of the score. Ties count one half, exactly as
    ``sklearn.metrics.roc_auc_score``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        1 (or True) for in-distribution (ID, the positive class), 0 for OOD.
    score : array-like of shape (n_samples,)
        Finite scores compared pairwise, ID against OOD; higher = more in-distribution.

    Returns
    -------
    auroc : float
        In [0, 1]; NaN (with an :class:`UndefinedMetricWarning`) without both classes.

    See Also
    --------
    delong_ci : the same AUROC with its DeLong confidence interval.
    detection_report : every detection metric of a score from one sort.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.detection import auroc
    >>> auroc([1, 1, 0, 0], [0.9, 0.4, 0.5, 0.1])
    0.75
    >>> auroc([1, 0], [0.3, 0.3])  # a tie counts one half
    0.5
    """
    return _blockwise("AUROC", y_true, score, auroc_from_blocks)


def aupr_in(y_true, score) -> float:
    r"""Average precision with ID = positive (label 1) and higher score = more ID (AUPR-In).

    Step-wise AP as in ``sklearn.metrics.average_precision_score``, no interpolation:

    .. math::

        \mathrm{AP} = \sum_t (R_t - R_{t-1}) P_t

    over the distinct score values ``t`` taken as thresholds (``score >= t`` accepted as ID);
    tied scores form one threshold. Chance level is :func:`aupr_baseline` (the ID share).
    The OOD-detection convention of Hendrycks & Gimpel (2017).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        1 for the positive class here, in-distribution; 0 for OOD.
    score : array-like of shape (n_samples,)
        Finite scores; each distinct value is one threshold, ``score >= t`` accepted as ID.

    Returns
    -------
    aupr_in : float
        NaN (with an :class:`UndefinedMetricWarning`) when a class is absent.

    See Also
    --------
    aupr_out : the same with OOD as the positive class.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.detection import aupr_in
    >>> aupr_in([1, 1, 0, 0], [0.9, 0.4, 0.5, 0.1])  # (1/2)(1) + (1/2)(2/3)
    0.8333333333333333
    """
    return _blockwise("AUPR-In", y_true, score, aupr_in_from_blocks)


def aupr_out(y_true, score) -> float:
    r"""Average precision with **OOD** as the positive class (AUPR-Out); score higher = more ID.

    The step-wise AP of :func:`aupr_in` with the labels flipped and the score negated,

    .. math::

        \mathrm{AUPR\text{-}Out}(y, s) = \mathrm{AP}(1 - y, -s),

    i.e. ``average_precision_score(1 - y_true, -score)``; chance level is the OOD share.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        1 for ID and 0 for OOD, which is the positive class of this metric.
    score : array-like of shape (n_samples,)
        Finite scores, higher = more ID, so the lowest scores are accepted first as OOD.

    Returns
    -------
    aupr_out : float
        Undefined (NaN, with an :class:`UndefinedMetricWarning`) with a single class.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.detection import aupr_out
    >>> aupr_out([1, 1, 0, 0], [0.9, 0.4, 0.5, 0.1])
    0.8333333333333333
    """
    return _blockwise("AUPR-Out", y_true, score, aupr_out_from_blocks)


#: The metrics :func:`bootstrap_ci` computes from resampled blocks (the same values, without a sort per replicate).
FROM_BLOCKS = {auroc: auroc_from_blocks, aupr_in: aupr_in_from_blocks, aupr_out: aupr_out_from_blocks}


@validate_params({"tpr": TPR})
def fpr_at_95_tpr(y_true, score, tpr: float = 0.95) -> float:
    r"""FPR at ``tpr`` TPR: the fraction of OOD accepted when at least ``tpr`` of ID is accepted.

    ID = positive (label 1), higher score = more ID; lower is better. A threshold ``t``
    accepts every example with ``score >= t`` as ID, so tied examples are accepted or
    rejected together:

    .. math::

        \mathrm{FPR}@\tau = \min_{t:\ \mathrm{TPR}(t) \ge \tau} \mathrm{FPR}(t), \quad
        \mathrm{TPR}(t) = \frac{\#\{ID: s \ge t\}}{n_{ID}}, \quad
        \mathrm{FPR}(t) = \frac{\#\{OOD: s \ge t\}}{n_{OOD}}

    (the highest such threshold, as FPR only falls as ``t`` rises). No interpolation between
    thresholds; the same as reading ``fpr`` at the first ``tpr`` entry ``>= 0.95`` of
    ``sklearn.metrics.roc_curve(..., drop_intermediate=False)``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        1 for ID (whose recall must reach ``tpr``), 0 for OOD (whose acceptance is measured).
    score : array-like of shape (n_samples,)
        Finite scores; ``score >= t`` is accepted as ID at threshold ``t``.
    tpr : float in (0, 1], default=0.95
        The ID recall to reach.

    Returns
    -------
    fpr : float
        The share of OOD accepted; NaN (with an :class:`UndefinedMetricWarning`) when a
        class is absent.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.detection import fpr_at_95_tpr
    >>> fpr_at_95_tpr([1, 1, 0, 0], [0.9, 0.4, 0.5, 0.1])  # t = 0.4 also accepts the OOD 0.5
    0.5
    >>> fpr_at_95_tpr([1, 1, 0, 0], [0.9, 0.4, 0.5, 0.1], tpr=0.5)
    0.0
    """
    tpr = float(tpr)
    y, s = ranking_inputs(y_true, score)
    reason = single_class_reason(f"FPR@{tpr:g}TPR", y)
    if reason:
        return undefined(reason)
    return fpr_from_blocks(tie_blocks(y, s), tpr)


def aupr_baseline(y_true) -> float:
    r"""Chance level of :func:`aupr_in`: the share of ID (label 1) examples.

    .. math::

        \mathrm{AUPR}_{base} = n_{ID} / n

    The chance level of :func:`aupr_out` is ``1 - aupr_baseline``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Labels, 1 for in-distribution; only their share matters.

    Returns
    -------
    share : float
        NaN (with an :class:`UndefinedMetricWarning`) for empty input.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.detection import aupr_baseline
    >>> aupr_baseline([1, 0, 0, 0])
    0.25
    """
    y = as_binary_labels(y_true, "y_true")
    if y.size == 0:
        return undefined("AUPR baseline is undefined for an empty y_true")
    return float(y.mean())
