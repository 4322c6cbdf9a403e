"""Intervals of the OOD-detection metrics: DeLong's for AUROC, the stratified bootstrap for any
metric, and AUPR-In's large-sample interval (the bootstrap's limit, used above
:data:`BOOTSTRAP_MAX_EXAMPLES` examples, where resampling millions of examples per score is hours).

Conventions as in :mod:`.detection` (ID = positive = 1, higher score = more ID, NaN with an
``UndefinedMetricWarning`` where undefined); every interval is read off :mod:`.ranking`'s one
descending sort in tied blocks. The public functions are also importable from :mod:`.detection`,
the package's face for detection metrics.

References
----------
.. [1] DeLong, E. R., DeLong, D. M. and Clarke-Pearson, D. L. (1988). Comparing the areas under two or more
       correlated receiver operating characteristic curves: a nonparametric approach. *Biometrics* 44(3), 837-845.
.. [2] Sun, X. and Xu, W. (2014). Fast implementation of DeLong's algorithm for comparing the areas under
       correlated receiver operating characteristic curves. *IEEE Signal Processing Letters* 21(11), 1389-1393.
.. [3] Efron, B. and Tibshirani, R. J. (1993). *An Introduction to the Bootstrap*. Chapman & Hall, chapter 13.
.. [4] Efron, B. (1981). Nonparametric estimates of standard error: the jackknife, the bootstrap and other
       methods. *Biometrika* 68(3), 589-599.
.. [5] Boyd, K., Eng, K. H. and Page, C. D. (2013). Area under the precision-recall curve: point estimates and
       confidence intervals. *ECML PKDD*, LNCS 8190, 451-466.
.. [6] Clémençon, S. and Vayatis, N. (2009). Nonparametric estimation of the precision-recall curve. *ICML*, 185-192.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from lm_eval_evidential.params import Integral, Interval, Options, Param, Real, validate_params

from ._validation import undefined
from .ranking import (
    FROM_BLOCKS,
    TieBlocks,
    aupr_in,
    aupr_in_from_blocks,
    auroc_from_blocks,
    ranking_inputs,
    single_class_reason,
    tie_blocks,
)

__all__ = [
    "delong_ci",
    "delong_test",
    "bootstrap_ci",
    "aupr_in_ij_ci",
    "aupr_in_ci",
    "aupr_in_interval_label",
]


def _delong_components(b: TieBlocks):
    """Per-block DeLong structural components (Sun & Xu 2014 midrank form, via the block counts).

    V10 for an ID example in block g = share of OOD below it (+1/2 of ties);
    V01 for an OOD example in block g = share of ID above it (+1/2 of ties).
    """
    v10 = (b.n_ood - b.fps + 0.5 * b.dfp) / b.n_ood
    v01 = (b.tps - b.dtp + 0.5 * b.dtp) / b.n_id
    return v10, v01


def _weighted_var(values: np.ndarray, weights: np.ndarray, total: int) -> float:
    mean = np.dot(weights, values) / total
    dev = values - mean
    return float(np.dot(weights, dev * dev) / (total - 1))


def delong_from_blocks(b: TieBlocks, level: float):
    from scipy.special import ndtri  # here, not at the top: the CLI's parser imports this module

    auc = auroc_from_blocks(b)
    if b.n_id < 2 or b.n_ood < 2:
        return (
            auc,
            None,
            (f"DeLong variance is undefined with fewer than 2 examples per class (n_id={b.n_id}, n_ood={b.n_ood})"),
        )
    v10, v01 = _delong_components(b)
    var = _weighted_var(v10, b.dtp, b.n_id) / b.n_id + _weighted_var(v01, b.dfp, b.n_ood) / b.n_ood
    half = float(ndtri(0.5 + level / 2)) * np.sqrt(max(var, 0.0))
    return auc, (float(max(0.0, auc - half)), float(min(1.0, auc + half))), None


#: Upper bound of bootstrap replicates: each recomputes the metric on every example, so the work
#: is n_boot x (n_ID + n_OOD) log(n); 100,000 replicates are far beyond what a percentile CI needs.
MAX_N_BOOT = 100_000


#: ``n_boot``: bootstrap replicates, 0 for no interval (declared once: every audit and the report take it).
N_BOOT = Param(
    Options((0,)), Interval(Integral, 2, MAX_N_BOOT), must=f"0 (no interval) or an integer in 2..{MAX_N_BOOT}"
)
#: ``level``: the confidence level of an interval.
LEVEL = Param(Interval(Real, 0, 1, closed="neither"), example="level=0.95")
#: ``seed``: the seed of a numpy generator (the bootstrap's, and every audit's seeded draw), which takes none
#: below 0.
SEED = Param(Interval(Integral, 0), example="seed=0")


def _interval(metric: str, y_true, score, level: float, from_blocks) -> tuple[float, float, float]:
    """``(estimate, lo, hi)`` of an interval read off the blocks by ``from_blocks(blocks, level)``, which gives
    ``(estimate, (lo, hi) or None, reason)``; NaN with an :class:`UndefinedMetricWarning` where undefined."""
    y, s = ranking_inputs(y_true, score)
    reason = single_class_reason(metric, y)
    if reason:
        nan = undefined(reason)
        return nan, nan, nan
    estimate, ci, reason = from_blocks(tie_blocks(y, s), float(level))
    if ci is None:
        nan = undefined(reason)
        return estimate, nan, nan
    return estimate, ci[0], ci[1]


@validate_params({"level": LEVEL})
def delong_ci(y_true, score, level: float = 0.95) -> tuple[float, float, float]:
    r"""AUROC and its DeLong confidence interval: ``(auroc, lo, hi)``, clipped to [0, 1].

    ID = positive (label 1), higher score = more ID. With the structural components
    ``V10_i`` (share of OOD scores below ID example ``i``, ties 1/2) and ``V01_j`` (share of ID
    scores above OOD example ``j``, ties 1/2), computed in the O(n log n) midrank form of Sun &
    Xu (2014):

    .. math::

        \widehat{\mathrm{Var}} = \frac{S^2(V_{10})}{n_{ID}} + \frac{S^2(V_{01})}{n_{OOD}},
        \qquad \mathrm{AUROC} \pm z_{(1+\mathrm{level})/2} \sqrt{\widehat{\mathrm{Var}}}

    with sample variances ``S^2`` (DeLong, DeLong & Clarke-Pearson 1988). With perfect
    separation the variance is 0 and the interval collapses to the point.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        1 for ID, 0 for OOD; at least 2 of each for a variance.
    score : array-like of shape (n_samples,)
        Finite scores whose AUROC and its sampling variance are estimated.
    level : float in (0, 1), default=0.95
        Confidence level.

    Returns
    -------
    auroc, lo, hi : float
        ``(nan, nan, nan)`` with one class; ``(auroc, nan, nan)`` with fewer than 2 examples
        in a class (each with an :class:`UndefinedMetricWarning`).

    Examples
    --------
    >>> from lm_eval_evidential.metrics.intervals import delong_ci
    >>> auc, lo, hi = delong_ci([1, 1, 1, 0, 0, 0], [0.9, 0.8, 0.4, 0.5, 0.3, 0.1])
    >>> round(auc, 4), round(lo, 4), round(hi, 4)
    (0.8889, 0.5809, 1.0)
    """
    level = float(level)
    return _interval("AUROC", y_true, score, level, delong_from_blocks)


def delong_test(y_true, score_a, score_b) -> tuple[float, float, float, float, float]:
    r"""DeLong test of two correlated AUROCs on the same examples.

    ID = positive (label 1), higher score = more ID for both scores. With the structural
    components of :func:`delong_ci` taken per example for each score,

    .. math::

        z = \frac{\mathrm{AUROC}_a - \mathrm{AUROC}_b}{\sqrt{
            S^2(V_{10}^a - V_{10}^b) / n_{ID} + S^2(V_{01}^a - V_{01}^b) / n_{OOD}}}

    (DeLong's covariance estimate, on the per-example differences), two-sided normal p-value.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        1 for ID, 0 for OOD, shared by both scores.
    score_a, score_b : array-like of shape (n_samples,)
        Two scores of the same examples, higher = more in-distribution.

    Returns
    -------
    auc_a, auc_b, diff, z, p_value : float
        ``diff = auc_a - auc_b``. ``z`` and ``p_value`` are NaN with an
        :class:`UndefinedMetricWarning` when the variance is 0 (e.g. the two scores rank the
        examples identically) or a class has fewer than 2 examples.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.intervals import delong_test
    >>> y = [1, 1, 1, 0, 0, 0]
    >>> a, b, diff, z, p = delong_test(y, [0.9, 0.8, 0.4, 0.5, 0.3, 0.1], [0.9, 0.8, 0.6, 0.5, 0.3, 0.1])
    >>> round(a, 4), b, round(diff, 4), round(z, 4), round(p, 4)
    (0.8889, 1.0, -0.1111, -0.7071, 0.4795)
    """
    from scipy.special import ndtr

    y, a = ranking_inputs(y_true, score_a, "score_a")
    _, b_ = ranking_inputs(y_true, score_b, "score_b")
    reason = single_class_reason("AUROC", y)
    if reason:
        nan = undefined(reason)
        return nan, nan, nan, nan, nan
    ba, bb = tie_blocks(y, a, with_gid=True), tie_blocks(y, b_, with_gid=True)
    auc_a, auc_b = auroc_from_blocks(ba), auroc_from_blocks(bb)
    diff = auc_a - auc_b
    if ba.n_id < 2 or ba.n_ood < 2:
        nan = undefined(f"DeLong test is undefined with n_id={ba.n_id}, n_ood={ba.n_ood} (needs >= 2 each)")
        return auc_a, auc_b, diff, nan, nan
    v10a, v01a = _delong_components(ba)
    v10b, v01b = _delong_components(bb)
    d10 = v10a[ba.gid[y]] - v10b[bb.gid[y]]
    d01 = v01a[ba.gid[~y]] - v01b[bb.gid[~y]]
    var = float(np.var(d10, ddof=1) / ba.n_id + np.var(d01, ddof=1) / ba.n_ood)
    if not var > 0:
        nan = undefined(
            "DeLong test is undefined: the estimated variance of the AUROC difference is 0 (e.g. the "
            f"two scores order ID against OOD identically; auc_a={auc_a!r}, auc_b={auc_b!r})"
        )
        return auc_a, auc_b, diff, nan, nan
    z = diff / np.sqrt(var)
    return auc_a, auc_b, diff, float(z), float(2 * ndtr(-abs(z)))


@validate_params({"n_boot": N_BOOT, "level": LEVEL})
def bootstrap_ci(
    metric_fn: Callable[[np.ndarray, np.ndarray], float],
    y_true,
    score,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float, float]:
    r"""Stratified percentile-bootstrap CI of ``metric_fn(y_true, score)``: ``(estimate, lo, hi)``.

    ID (label 1) and OOD (label 0) examples are resampled with replacement separately, so
    every replicate keeps the original class sizes and the metric stays defined. ``lo``/``hi``
    are the ``(1 -/+ level) / 2`` quantiles of the replicate values

    .. math::

        m_b = \mathrm{metric}(y, s^{*}_b), \quad b = 1, \dots, n_{boot}

    drawn from ``numpy.random.default_rng(seed)`` (reproducible; Efron & Tibshirani 1993).
    ``estimate`` is the metric on the full data. The resample indices depend only on the seed
    and the class sizes, so every score of the same examples is resampled with the same draws
    (the paired bootstrap). The work is ``n_boot`` x the examples: the audits use
    :func:`aupr_in_ci`, which takes the bootstrap's large-sample limit on big data.

    Parameters
    ----------
    metric_fn : callable ``(y_true, score) -> float``
        E.g. :func:`aupr_in`.
    y_true : array-like of shape (n_samples,)
        1 for ID, 0 for OOD; each class is resampled on its own.
    score : array-like of shape (n_samples,)
        Finite scores, resampled together with their labels.
    n_boot : int, default=1000
        Replicates: 0 (no interval: ``lo = hi = nan``, no warning) or at least 2. The one
        rule for every caller (the audits pass their ``n_boot`` straight through).
    level : float in (0, 1), default=0.95
        Confidence level.
    seed : int, default=0
        Seed of the resampling generator.

    Returns
    -------
    estimate, lo, hi : float
        If any replicate is NaN the interval is NaN with an :class:`UndefinedMetricWarning`.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.detection import auroc
    >>> from lm_eval_evidential.metrics.intervals import bootstrap_ci
    >>> y, s = [1, 1, 1, 0, 0, 0], [0.9, 0.8, 0.4, 0.5, 0.3, 0.1]
    >>> est, lo, hi = bootstrap_ci(auroc, y, s, n_boot=200, seed=0)
    >>> round(est, 4), lo <= est <= hi
    (0.8889, True)
    >>> bootstrap_ci(auroc, y, s, n_boot=0)[1:]
    (nan, nan)
    """
    level, n_boot = float(level), int(n_boot)
    y, s = ranking_inputs(y_true, score)
    reason = single_class_reason("a stratified bootstrap", y)
    if reason:
        nan = undefined(reason)
        return nan, nan, nan
    estimate = float(metric_fn(y, s))
    if n_boot == 0:
        return estimate, float("nan"), float("nan")
    reps = _replicates(metric_fn, y, s, n_boot, seed)
    bad = ~np.isfinite(reps)
    if bad.any():
        nan = undefined(f"bootstrap CI is undefined: {int(bad.sum())} of {n_boot} replicates were not finite")
        return estimate, nan, nan
    lo, hi = np.quantile(reps, [(1 - level) / 2, (1 + level) / 2])
    return estimate, float(lo), float(hi)


def _replicates(metric_fn, y: np.ndarray, s: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """``n_boot`` stratified replicates of ``metric_fn``, the indices drawn in vectorised chunks."""
    s_id, s_ood = s[y], s[~y]
    n_id, n_ood = s_id.size, s_ood.size
    yb = np.concatenate((np.ones(n_id, dtype=bool), np.zeros(n_ood, dtype=bool)))
    rng = np.random.default_rng(seed)
    reps = np.empty(n_boot)
    chunk = max(1, min(n_boot, (1 << 22) // (n_id + n_ood)))
    from_blocks = FROM_BLOCKS.get(metric_fn)
    if from_blocks is not None:  # the replicates' blocks counted on the data's own, no sort per replicate
        gid = tie_blocks(y, s, with_gid=True).gid
        gid_id, gid_ood = gid[y], gid[~y]
    for start in range(0, n_boot, chunk):
        m = min(chunk, n_boot - start)
        pick_id, pick_ood = rng.integers(0, n_id, size=(m, n_id)), rng.integers(0, n_ood, size=(m, n_ood))
        if from_blocks is not None:
            for j in range(m):
                reps[start + j] = from_blocks(_resampled_blocks(gid_id[pick_id[j]], gid_ood[pick_ood[j]]))
            continue
        scores = np.concatenate((s_id[pick_id], s_ood[pick_ood]), axis=1)
        for j in range(m):
            reps[start + j] = metric_fn(yb, scores[j])
    return reps


def _resampled_blocks(gid_id: np.ndarray, gid_ood: np.ndarray) -> TieBlocks:
    """The blocks of a resample, from the data's block of each drawn ID and OOD example.

    A resample's distinct scores are those of the data that were drawn, in the same order, so its
    blocks are the data's blocks that hold a drawn example, with the drawn counts: the arrays
    :func:`merge_tie_blocks` would build from the resampled scores, integer for integer, in O(n)
    instead of a sort.
    """
    size = int(max(gid_id.max(initial=0), gid_ood.max(initial=0))) + 1
    dtp, dfp = np.bincount(gid_id, minlength=size), np.bincount(gid_ood, minlength=size)
    drawn = (dtp + dfp) > 0
    dtp, dfp = dtp[drawn], dfp[drawn]
    return TieBlocks(np.cumsum(dtp), np.cumsum(dfp), dtp, dfp, gid_id.size, gid_ood.size, None)


#: Above this many examples (ID + OOD) :func:`aupr_in_ci` gives the bootstrap's large-sample limit
#: (:func:`aupr_in_ij_ci`) instead of resampling: ``n_boot`` replicates cost ``n_boot`` x the examples
#: (1.9 s a replicate at 2M + 2M on the shared cores, so about 8 h for 13 scores), and at this size the
#: two intervals agree to a few percent of their width (tests/metrics/test_detection.py).
BOOTSTRAP_MAX_EXAMPLES = 20_000


def _weighted_ss(values: np.ndarray, weights: np.ndarray, total: int) -> float:
    """Sum of squared deviations from the weighted mean (``weights`` = examples per value)."""
    dev = values - (weights * values).sum() / total
    return float((weights * dev * dev).sum())


def _aupr_in_ij_from(b: TieBlocks, level: float):
    """AUPR-In and its infinitesimal-jackknife logit interval from the blocks (see :func:`aupr_in_ij_ci`)."""
    from scipy.special import expit, ndtri

    ap = aupr_in_from_blocks(b)
    if b.n_id < 2 or b.n_ood < 2:
        return ap, None, f"the AUPR-In interval is undefined with n_id={b.n_id}, n_ood={b.n_ood} (needs >= 2 each)"
    total = (b.tps + b.fps).astype(np.float64)  # >= 1 in every block: it counts the block itself
    sq = total * total
    # Suffix sums over the blocks g >= k, at or below block k in the descending sort (cumulative counts
    # through g include every example of block k); written without np.dot, see ranking.aupr_in_from_blocks.
    through_id = np.cumsum((b.dtp * b.fps / sq)[::-1])[::-1]
    through_ood = np.cumsum((b.dtp * b.tps / sq)[::-1])[::-1]
    spread = _weighted_ss(b.tps / total + through_id, b.dtp, b.n_id) + _weighted_ss(through_ood, b.dfp, b.n_ood)
    var = spread / float(b.n_id) ** 2
    if not var > 1e-300 or ap >= 1.0:  # no spread: every ID example above every OOD one, or one tie
        return ap, (ap, ap), None
    half, logit = float(ndtri(0.5 + level / 2)) * np.sqrt(var) / (ap * (1.0 - ap)), np.log(ap / (1.0 - ap))
    lo, hi = float(expit(logit - half)), float(expit(logit + half))
    return ap, ((ap, ap) if lo == hi else (lo, hi)), None  # lo == hi: a rounding-size spread, the point itself


@validate_params({"level": LEVEL})
def aupr_in_ij_ci(y_true, score, level: float = 0.95) -> tuple[float, float, float]:
    r"""AUPR-In and the large-sample limit of its stratified bootstrap interval: ``(aupr_in, lo, hi)``.

    ID = positive (label 1), higher score = more ID. The variance is the infinitesimal
    jackknife's (Efron 1981), the bootstrap variance as the sample grows: with each example
    weighted and ``g_i`` the derivative of AUPR-In in the weight of example ``i`` (read off the
    tied blocks of one sort, as DeLong's components are for AUROC),

    .. math::

        \widehat{\mathrm{Var}} = \sum_{c \in \{ID, OOD\}} \sum_{i \in c} (g_i - \bar g_c)^2,
        \quad n_{ID}\, g_i = P_{k(i)} + \sum_{h \ge k(i)} \frac{\Delta TP_h\, FP_h}{(TP_h + FP_h)^2}
        \ (i \in ID), \quad
        n_{ID}\, g_j = -\sum_{h \ge k(j)} \frac{\Delta TP_h\, TP_h}{(TP_h + FP_h)^2} \ (j \in OOD)

    (blocks ``h`` in descending score order, ``TP_h``/``FP_h`` cumulative, ``P_h`` their
    precision, each class centred on its own mean: the class sizes are fixed, as in the
    stratified bootstrap). The interval is normal on the logit scale, Boyd, Eng & Page's (2013)
    logit interval with this standard error, so it stays inside (0, 1); the empirical PR curve
    is asymptotically normal (Clémençon & Vayatis 2009). O(n log n), one sort.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        1 for ID, 0 for OOD; at least 2 of each for a variance.
    score : array-like of shape (n_samples,)
        Finite scores whose AUPR-In and its sampling variance are estimated.
    level : float in (0, 1), default=0.95
        Confidence level.

    Returns
    -------
    aupr_in, lo, hi : float
        ``(nan, nan, nan)`` with one class; ``(aupr_in, nan, nan)`` with fewer than 2 examples
        in a class (each with an :class:`UndefinedMetricWarning`). With no spread (every ID
        example above every OOD one, or all in one tie) the interval is the point, as the
        bootstrap's is.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.intervals import aupr_in_ij_ci
    >>> ap, lo, hi = aupr_in_ij_ci([1, 1, 1, 0, 0, 0], [0.9, 0.8, 0.4, 0.5, 0.3, 0.1])
    >>> round(ap, 4), round(lo, 4), round(hi, 4)
    (0.9167, 0.5537, 0.9899)
    """
    return _interval("AUPR-In", y_true, score, level, _aupr_in_ij_from)


@validate_params({"n_boot": N_BOOT, "level": LEVEL})
def aupr_in_ci(y_true, score, *, n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    r"""AUPR-In and its interval as the audits report it: ``(aupr_in, lo, hi)``.

    The stratified percentile bootstrap (:func:`bootstrap_ci`, ``n_boot`` replicates, ``seed``)
    up to :data:`BOOTSTRAP_MAX_EXAMPLES` examples; above, its large-sample limit
    (:func:`aupr_in_ij_ci`), as scipy's ``mannwhitneyu(method="auto")`` leaves its exact
    distribution for the asymptotic one on large samples. Both estimate the sampling spread of
    AUPR-In with the class sizes fixed. ``n_boot = 0`` gives no interval at any size.

    .. math::

        \mathrm{AUPR\text{-}In} = \sum_k (R_k - R_{k-1})\, P_k

    (``P_k``, ``R_k``: precision and recall of ID at the k-th threshold, descending).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        1 for ID, 0 for OOD.
    score : array-like of shape (n_samples,)
        Finite scores, higher = more ID.
    n_boot : int, default=1000
        Bootstrap replicates at or below :data:`BOOTSTRAP_MAX_EXAMPLES` examples; 0 for no interval.
    level : float in (0, 1), default=0.95
        Confidence level.
    seed : int, default=0
        Seed of the bootstrap's resampling.

    Returns
    -------
    aupr_in, lo, hi : float
        The point estimate and the interval's bounds (NaN bounds when ``n_boot = 0``).

    Examples
    --------
    >>> from lm_eval_evidential.metrics.intervals import aupr_in_ci
    >>> y, s = [1, 1, 1, 0, 0, 0], [0.9, 0.8, 0.4, 0.5, 0.3, 0.1]
    >>> aupr_in_ci(y, s, n_boot=0)[1:]
    (nan, nan)
    """
    y, s = ranking_inputs(y_true, score)
    if int(n_boot) == 0 or _interval_kind(y.size) == "bootstrap":
        return bootstrap_ci(aupr_in, y, s, n_boot=n_boot, level=level, seed=seed)
    return aupr_in_ij_ci(y, s, level)


def _interval_kind(n_examples: int) -> str:
    """Which interval :func:`aupr_in_ci` gives on ``n_examples`` (ID + OOD)."""
    return "bootstrap" if n_examples <= BOOTSTRAP_MAX_EXAMPLES else "large-sample"


def aupr_in_interval_label(sizes) -> str:
    """What a table's header says of the AUPR-In intervals :func:`aupr_in_ci` gave its rows.

    Parameters
    ----------
    sizes : iterable of int
        Each row's number of examples, ID + OOD.

    Returns
    -------
    label : str
        ``"bootstrap"`` when every row has at most :data:`BOOTSTRAP_MAX_EXAMPLES` examples,
        ``"large-sample"`` (:func:`aupr_in_ij_ci`) when every row has more, and both, with the
        threshold, when the rows fall on both sides.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.intervals import aupr_in_interval_label
    >>> aupr_in_interval_label([600]), aupr_in_interval_label([40_000]), aupr_in_interval_label([600, 40_000])
    ('bootstrap', 'large-sample', 'bootstrap; large-sample above 20,000')
    """
    kinds = {_interval_kind(int(n)) for n in sizes} or {"bootstrap"}
    if len(kinds) == 1:
        return kinds.pop()
    return f"bootstrap; large-sample above {BOOTSTRAP_MAX_EXAMPLES:,}"
