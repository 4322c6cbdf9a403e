"""OOD-detection metrics for a per-example score.

Convention everywhere in this module: ``y_true`` is 1 (True) for **in-distribution (ID) = the
positive class** and 0 for OOD, and a **higher score = more in-distribution**. An undefined
metric (only one class present) is returned as NaN with an ``UndefinedMetricWarning``.

Why hand-rolled rather than ``sklearn.metrics``: the audit computes AUROC, AUPR-In, AUPR-Out,
FPR@95%TPR and the DeLong variance for 2,000,000 examples and a dozen scores. All of them are
functions of one descending sort of the score grouped into tied blocks (cumulative ID/OOD
counts per distinct score value), so :func:`detection_report` sorts once and derives every
metric from the block counts, with AUROC as an exact integer Mann-Whitney count (int64, no
trapezoid rounding and no float rank sums) and DeLong's midrank components read off the same
blocks. Results equal scikit-learn's ``roc_auc_score`` and
``average_precision_score`` to ~1e-15 (tested to 1e-12), ties included. The point metrics are
:mod:`.ranking`'s and their intervals :mod:`.intervals`' (both re-exported here); this module adds the
one-sort report.

References
----------
.. [1] Hanley, J. A. and McNeil, B. J. (1982). The meaning and use of the area under a
       receiver operating characteristic (ROC) curve. *Radiology* 143(1), 29-36.
.. [2] Hendrycks, D. and Gimpel, K. (2017). A baseline for detecting misclassified and
       out-of-distribution examples in neural networks. *ICLR*.
The intervals' references (DeLong; Sun & Xu; Efron; Boyd, Eng & Page; Clémençon & Vayatis) are
:mod:`.intervals`'.
"""

from __future__ import annotations

from lm_eval_evidential.params import validate_params

from ._validation import undefined

# The intervals live in .intervals, the point metrics in .ranking; the public ones stay importable from here.
from .intervals import (
    LEVEL,
    aupr_in_ci,
    aupr_in_ij_ci,
    bootstrap_ci,
    delong_ci,
    delong_from_blocks,
    delong_test,
)
from .ranking import (
    TPR,
    aupr_baseline,
    aupr_in,
    aupr_in_from_blocks,
    aupr_out,
    aupr_out_from_blocks,
    auroc,
    fpr_at_95_tpr,
    fpr_from_blocks,
    ranking_inputs,
    single_class_reason,
    tie_blocks,
)

__all__ = [
    "auroc",
    "aupr_in",
    "aupr_out",
    "fpr_at_95_tpr",
    "aupr_baseline",
    "delong_ci",
    "delong_test",
    "bootstrap_ci",
    "aupr_in_ij_ci",
    "aupr_in_ci",
    "detection_report",
]


@validate_params({"tpr": TPR, "level": LEVEL})
def detection_report(y_true, score, *, tpr: float = 0.95, level: float = 0.95) -> dict:
    r"""Every detection metric of one score from a single sort, as a flat dict row.

    ID = positive (label 1), higher score = more ID. The values equal those of
    :func:`auroc`, :func:`delong_ci`, :func:`aupr_in`, :func:`aupr_out`,
    :func:`aupr_baseline` and :func:`fpr_at_95_tpr` exactly, from one descending sort:

    .. math::

        \text{blocks } g: \; (v_g, \#ID_{s = v_g}, \#OOD_{s = v_g}) \rightarrow
        \mathrm{AUROC}, \mathrm{AP}_{in}, \mathrm{AP}_{out}, \mathrm{FPR}@\tau, \mathrm{Var}_{DeLong}

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        1 for ID, 0 for OOD.
    score : array-like of shape (n_samples,)
        Finite scores, sorted once for every metric.
    tpr : float in (0, 1], default=0.95
        ID recall of ``fpr_at_tpr``.
    level : float in (0, 1), default=0.95
        Confidence level of the DeLong interval.

    Returns
    -------
    row : dict
        Keys ``n_id, n_ood, tpr, level, auroc, auroc_lo, auroc_hi, aupr_in, aupr_out,
        aupr_baseline, fpr_at_tpr, reason`` (None, or why the NaN entries are undefined).

    Examples
    --------
    >>> from lm_eval_evidential.metrics.detection import detection_report
    >>> row = detection_report([1, 1, 0, 0], [0.9, 0.4, 0.5, 0.1])
    >>> row["auroc"], row["fpr_at_tpr"], row["aupr_baseline"], row["reason"]
    (0.75, 0.5, 0.5, None)
    """
    tpr, level = float(tpr), float(level)
    y, s = ranking_inputs(y_true, score)
    n_id = int(y.sum())
    row = {"n_id": n_id, "n_ood": int(y.size - n_id), "tpr": tpr, "level": level}
    nan = float("nan")
    reason = single_class_reason("OOD detection", y)
    if reason:
        undefined(reason)
        row.update(
            auroc=nan,
            auroc_lo=nan,
            auroc_hi=nan,
            aupr_in=nan,
            aupr_out=nan,
            aupr_baseline=n_id / y.size if y.size else nan,
            fpr_at_tpr=nan,
            reason=reason,
        )
        return row
    b = tie_blocks(y, s)
    auc, ci, reason = delong_from_blocks(b, level)
    if ci is None:
        undefined(reason)
        ci = (nan, nan)
    row.update(
        auroc=auc,
        auroc_lo=ci[0],
        auroc_hi=ci[1],
        aupr_in=aupr_in_from_blocks(b),
        aupr_out=aupr_out_from_blocks(b),
        aupr_baseline=n_id / y.size,
        fpr_at_tpr=fpr_from_blocks(b, tpr),
        reason=reason,
    )
    return row
