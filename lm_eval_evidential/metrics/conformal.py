"""Split conformal prediction sets over each example's own K options: LAC, APS and RAPS.

A nonconformity score ``s(x, y)`` says how unusual label ``y`` is for ``x`` (higher = less
conforming). On ``n`` calibration examples with gold labels the threshold is the
:math:`\\lceil (n+1)(1-\\alpha) \\rceil`-th smallest score; a test example's prediction set is
every option whose score is at most that threshold. If calibration and test examples are
exchangeable the set contains the gold label with probability at least ``1 - alpha``
(and at most ``1 - alpha + 1/(n+1)`` when the scores have no ties; Vovk et al. 2005; Angelopoulos
& Bates 2023, section 1 and appendix D).

Conventions (the same for both scores, written once here):

- **Quantile level.** :func:`conformal_quantile` is the
  :math:`\\lceil (n+1)(1-\\alpha) \\rceil`-th smallest calibration score, i.e. ``np.quantile``
  at level :math:`\\lceil (n+1)(1-\\alpha) \\rceil / n` with ``method="lower"`` (MAPIE's
  ``_compute_classification_quantile``). When that rank exceeds ``n`` the threshold is
  ``+inf`` and every set is the full option set (MAPIE raises instead).
- **Ties.** An option whose score equals the threshold is in the set (``<=``); APS counts tied
  probabilities together (below), so it does not depend on the order of the options.
- **Empty sets** are kept empty (LAC gives them when no option is probable enough) and counted
  as misses; their share is reported. LLM-Uncertainty-Bench (Ye et al. 2024) replaces an empty
  set by the top option instead.
- **The K of each example** bounds its set: options beyond its own K (the NaN padding) are never
  in it. Set sizes are comparable only between examples of equal K (a set of 4 of 5 options is not
  the same statement as 4 of 4); the audits refuse other comparisons.

Scores, from the predictive probabilities ``p`` of an example (``E[p] = alpha / S`` for EDL):

- ``lac`` (least ambiguous set-valued classifier, Sadinle, Lei & Wasserman 2019):
  :math:`s(x, y) = 1 - p_y`.
- ``aps`` (adaptive prediction sets, Romano, Sesia & Candès 2020, non-randomised):
  :math:`s(x, y) = \\sum_{j:\\, p_j \\ge p_y} p_j`, the mass of the options at least as probable
  as ``y``, computed as ``1 -`` the mass of the less probable ones, so that the least probable
  option scores exactly 1 and rounding never decides whether a set is full (APS scores have a
  point mass there: every example whose gold option is its least probable one). MAPIE
  randomises the calibration score (``- u p_y``, ``u`` uniform) and includes the option that
  crosses the threshold; LLM-Uncertainty-Bench breaks ties by ``np.argsort``'s order.
- ``raps`` (regularized adaptive prediction sets, Angelopoulos, Bates, Malik & Jordan 2021,
  non-randomised): the APS score plus :math:`\\lambda\\,(o(y) - k_{reg})^+`, where :math:`o(y)` is
  the number of options at least as probable as ``y`` (its rank, tied options together): a penalty
  on each option beyond the ``k_reg`` most probable, so that sets stop growing through many
  improbable options. The paper picks :math:`\\lambda` and :math:`k_{reg}` on held-out data (MAPIE
  tries :math:`\\lambda \\in \\{0.001, 0.01, 0.1, 0.2, 0.5\\}` with :math:`k_{reg}` the
  :math:`(1-\\alpha)` quantile of the true label's rank on a split of the calibration data); here
  they are given (:data:`RAPS_LAMBDA`, :data:`RAPS_K_REG` by default: with K ≤ 5 options every option
  beyond the top one is penalised, by MAPIE's middle :math:`\\lambda`). MAPIE randomises and includes
  the crossing option, as for APS.

References
----------
.. [1] Vovk, V., Gammerman, A. and Shafer, G. (2005). *Algorithmic Learning in a Random World*.
       Springer.
.. [2] Angelopoulos, A. N. and Bates, S. (2023). Conformal prediction: a gentle introduction.
       *Foundations and Trends in Machine Learning* 16(4), 494-591.
.. [3] Sadinle, M., Lei, J. and Wasserman, L. (2019). Least ambiguous set-valued classifiers with
       bounded error levels. *JASA* 114(525), 223-234.
.. [4] Romano, Y., Sesia, M. and Candès, E. (2020). Classification with valid and adaptive
       coverage. *NeurIPS*.
.. [5] Angelopoulos, A. N., Bates, S., Malik, J. and Jordan, M. I. (2021). Uncertainty sets for image
       classifiers using conformal prediction. *ICLR* (RAPS).
.. [6] Ye, F., Yang, M., Pang, J., Wang, L., Wong, D. F., Yilmaz, E., Shi, S. and Tu, Z. (2024).
       Benchmarking LLMs via uncertainty quantification. *NeurIPS Datasets and Benchmarks*
       (LLM-Uncertainty-Bench: coverage, set size, UAcc).
"""

from __future__ import annotations

import math

import numpy as np

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.params import Integral, Interval, Options, Param, Real, validate_params

from ._batches import check_padded
from ._validation import as_1d_float, as_binary_labels, check_same_length, undefined
from .calibration import probs_and_gold
from .intervals import LEVEL, N_BOOT
from .scores import check_simplex

__all__ = [
    "METHODS",
    "RAPS_K_REG",
    "RAPS_LAMBDA",
    "conformal_quantile",
    "nonconformity",
    "prediction_sets",
    "set_summary",
    "set_summary_ci",
]

#: The nonconformity scores: LAC (score thresholding), APS (adaptive prediction sets), RAPS (regularized APS).
METHODS = ("lac", "aps", "raps")
#: RAPS's default penalty per option beyond the ``k_reg`` most probable, and ``k_reg``.
RAPS_LAMBDA = 0.1
RAPS_K_REG = 1


#: The parameters of a conformal set, declared once (the audit and the report take them too).
ALPHA = Param(Interval(Real, 0, 1, closed="neither"), why="a miscoverage rate", example="alpha=0.1 for 90% sets")
METHOD = Param(Options(METHODS), noun="conformal method")
LAM = Param(Interval(Real, 0), why="RAPS's penalty per option beyond the k_reg most probable")
K_REG = Param(Interval(Integral, 0), why="RAPS: the most probable options not penalised")


@validate_params({"alpha": ALPHA})
def conformal_quantile(scores, alpha: float) -> float:
    r"""Split-conformal threshold: the :math:`\lceil (n+1)(1-\alpha) \rceil`-th smallest score.

    .. math::

        \hat q = s_{(\lceil (n+1)(1-\alpha) \rceil)}, \qquad
        P\big(s_{n+1} \le \hat q\big) \ge 1 - \alpha

    for a new score exchangeable with the ``n`` calibration scores. Equal to ``np.quantile`` at
    level :math:`\lceil (n+1)(1-\alpha) \rceil / n` with ``method="lower"`` (MAPIE). When the
    rank exceeds ``n`` (``n < 1/alpha - 1``) no finite threshold guarantees the level: ``+inf``
    (every option of every example is then in its set).

    Parameters
    ----------
    scores : array-like of shape (n_samples,)
        Calibration nonconformity scores (finite).
    alpha : float in (0, 1)
        Target miscoverage.

    Returns
    -------
    qhat : float
        The threshold; ``inf`` when the calibration set is too small for ``alpha``. NaN (with an
        :class:`UndefinedMetricWarning`) for 0 scores.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.conformal import conformal_quantile
    >>> conformal_quantile([0.1, 0.5, 0.2, 0.9, 0.3, 0.7, 0.4, 0.6, 0.8], alpha=0.2)  # rank ceil(10 * 0.8) = 8
    0.8
    >>> conformal_quantile([0.1, 0.5, 0.2], alpha=0.1)  # rank ceil(4 * 0.9) = 4 > 3
    inf
    """
    a = float(alpha)
    s = as_1d_float(scores, "scores")
    n = s.size
    if n == 0:
        return undefined("the conformal quantile is undefined for 0 calibration scores")
    rank = math.ceil(round((n + 1) * (1.0 - a), 9))  # round: (n+1)(1-a) = 9.000000000000002 is rank 9
    if rank > n:
        return math.inf
    return float(np.partition(s, rank - 1)[rank - 1])


def _aps_option_scores(p: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``out[i, j]`` = mass of row i's options at least as probable as option j (NaN beyond K),
    as ``1 -`` the mass of the less probable ones: the least probable option scores exactly 1."""
    q = np.where(mask, p, 0.0)
    out = np.full(p.shape, np.nan)
    for j in range(p.shape[1]):  # K is small: one (n, K) temporary per column
        out[:, j] = 1.0 - np.where(q < q[:, j : j + 1], q, 0.0).sum(axis=1)
    out[~mask] = np.nan
    return out


def _rank_penalty(q: np.ndarray, ref: np.ndarray, lam: float, k_reg: int) -> np.ndarray:
    """RAPS's ``lam * (o - k_reg)^+``, ``o`` the number of options with ``q >= ref`` (ties together)."""
    rank = (q >= ref[..., None]).sum(axis=-1)
    return lam * np.maximum(rank - k_reg, 0)


def _option_scores(p: np.ndarray, mask: np.ndarray, method: str, raps: tuple[float, int]) -> np.ndarray:
    if method == "lac":
        return np.where(mask, 1.0 - p, np.nan)
    out = _aps_option_scores(p, mask)
    if method == "raps":
        q = np.where(mask, p, -np.inf)  # padding never counts toward an option's rank
        out = out + _rank_penalty(q[:, None, :], q, *raps)
    return out


@validate_params({"method": METHOD, "lam": LAM, "k_reg": K_REG})
def nonconformity(probs, gold, method: str = "lac", *, lam: float = RAPS_LAMBDA, k_reg: int = RAPS_K_REG) -> np.ndarray:
    r"""The nonconformity score of each example's gold option (the calibration scores).

    .. math::

        s_{lac}(x, y) = 1 - p_y, \qquad s_{aps}(x, y) = \sum_{j < K:\ p_j \ge p_y} p_j, \qquad
        s_{raps}(x, y) = s_{aps}(x, y) + \lambda \big(|\{j < K: p_j \ge p_y\}| - k_{reg}\big)^+

    Parameters
    ----------
    probs : array-like of shape (n_samples, K_max)
        Predictive probabilities over each row's own K options, NaN right-padded.
    gold : array-like of int, shape (n_samples,)
        The gold option of each row (``0 <= gold < K``).
    method : {"lac", "aps", "raps"}, default="lac"
    lam, k_reg : float >= 0, int >= 0
        RAPS's penalty per option beyond the ``k_reg`` most probable (ignored by the others).

    Returns
    -------
    scores : ndarray of shape (n_samples,)

    Examples
    --------
    >>> from lm_eval_evidential.metrics.conformal import nonconformity
    >>> probs = [[0.6, 0.3, 0.1], [0.2, 0.5, 0.3]]
    >>> nonconformity(probs, [1, 1]).round(2).tolist(), nonconformity(probs, [1, 1], "aps").round(2).tolist()
    ([0.7, 0.5], [0.9, 0.5])
    >>> nonconformity(probs, [1, 1], "raps", lam=0.1, k_reg=1).round(2).tolist()  # rank 2 and 1
    [1.0, 0.5]
    """
    raps = (float(lam), int(k_reg))
    p, _, mask, g = probs_and_gold(probs, gold)
    rows = np.arange(p.shape[0])
    if method == "lac":
        return 1.0 - p[rows, g]
    q = np.where(mask, p, 0.0)
    aps = 1.0 - np.where(q < q[rows, g][:, None], q, 0.0).sum(axis=1)
    if method == "aps":
        return aps
    return aps + _rank_penalty(np.where(mask, p, -np.inf), p[rows, g], *raps)


@validate_params({"method": METHOD, "lam": LAM, "k_reg": K_REG})
def prediction_sets(
    probs, qhat: float, method: str = "lac", *, lam: float = RAPS_LAMBDA, k_reg: int = RAPS_K_REG
) -> np.ndarray:
    r"""Boolean prediction sets: option ``j`` of row ``i`` is in the set iff ``j < K_i`` and its
    score is at most the threshold.

    .. math::

        C(x) = \{\, y < K : s(x, y) \le \hat q \,\}

    LAC: every option with :math:`p_y \ge 1 - \hat q` (possibly none); APS: the most probable
    options, in order, while their mass is at most :math:`\hat q` (tied options together); RAPS:
    the same with each option's rank penalty added (its score grows with the rank, so the set is
    still the most probable options).

    Parameters
    ----------
    probs : array-like of shape (n_samples, K_max)
        Predictive probabilities, NaN right-padded beyond each row's K.
    qhat : float
        Threshold from :func:`conformal_quantile` (``inf``: every option).
    method : {"lac", "aps", "raps"}, default="lac"
    lam, k_reg : float >= 0, int >= 0
        RAPS's penalty, as for :func:`nonconformity`.

    Returns
    -------
    sets : ndarray of bool, shape (n_samples, K_max)
        False beyond each row's K.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.conformal import prediction_sets
    >>> probs = [[0.6, 0.3, 0.1], [0.2, 0.5, 0.3]]
    >>> prediction_sets(probs, 0.7).astype(int).tolist()  # LAC: p >= 0.3
    [[1, 1, 0], [0, 1, 1]]
    >>> prediction_sets(probs, 0.85, "aps").astype(int).tolist()  # APS: mass <= 0.85
    [[1, 0, 0], [0, 1, 1]]
    """
    raps = (float(lam), int(k_reg))
    q = float(qhat)
    if math.isnan(q):
        raise InvalidValueError("qhat is NaN; compute it with conformal_quantile on a non-empty calibration set")
    p, _, mask = check_padded(probs, "probs")
    check_simplex(p, mask)
    return mask & (_option_scores(p, mask, method, raps) <= q)


def _summary_inputs(sets, k, gold, correct):
    s = np.asarray(sets)
    if s.ndim != 2 or s.dtype != bool:
        raise InvalidValueError(f"sets must be a 2-D boolean array (n_samples, K_max), got {s.dtype} {s.shape}")
    kk = np.asarray(k)
    g = np.asarray(gold)
    c = as_binary_labels(correct, "correct")
    check_same_length(sets=s, k=kk, gold=g, correct=c)
    if kk.dtype.kind not in "iu" or g.dtype.kind not in "iu":
        raise InvalidValueError("k and gold must hold integers (class counts and class indices)")
    if s.shape[0] and ((g < 0) | (g >= kk)).any():
        i = int(np.flatnonzero((g < 0) | (g >= kk))[0])
        raise InvalidValueError(f"gold[{i}] = {int(g[i])} is not one of row {i}'s K = {int(kk[i])} options")
    covered = s[np.arange(s.shape[0]), g] if s.shape[0] else np.zeros(0, dtype=bool)
    return covered, s.sum(axis=1), kk.astype(np.int64), c


def set_summary(sets, k, gold, correct) -> dict:
    r"""Coverage, set size and UAcc of prediction sets, overall, per set size and per K.

    .. math::

        \mathrm{coverage} = \frac{1}{n} \sum_i [g_i \in C_i], \quad
        \overline{|C|} = \frac{1}{n} \sum_i |C_i|, \quad
        \mathrm{UAcc} = \frac{\mathrm{acc}}{\overline{|C|}} \sqrt{K}

    UAcc is Ye et al. (2024)'s accuracy weighted by set size (higher is better; their code scales
    by the square root of the number of options). It needs one K: NaN with a reason otherwise.

    Parameters
    ----------
    sets : ndarray of bool, shape (n_samples, K_max)
        From :func:`prediction_sets`.
    k : array-like of int, shape (n_samples,)
        Each example's number of options.
    gold : array-like of int, shape (n_samples,)
        Gold option per example.
    correct : array-like of 0/1, shape (n_samples,)
        Whether the point prediction (argmax) was right: the accuracy in UAcc.

    Returns
    -------
    summary : dict
        ``n, coverage, mean_set_size, acc, uacc, share_empty, share_full`` (a full set has all K
        options), ``coverage_by_size`` and ``n_by_size`` (``{size: value}``, sizes present),
        ``coverage_by_k`` (``{K: coverage}``) and ``reason`` (None, or why a value is NaN).

    Examples
    --------
    >>> import numpy as np
    >>> from lm_eval_evidential.metrics.conformal import set_summary
    >>> sets = np.array([[1, 1, 0, 0], [0, 1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1]], dtype=bool)
    >>> row = set_summary(sets, [4, 4, 4, 4], gold=[1, 0, 2, 3], correct=[1, 0, 0, 1])
    >>> row["coverage"], row["mean_set_size"], row["uacc"], row["share_empty"], row["share_full"]
    (0.5, 1.75, 0.5714285714285714, 0.25, 0.25)
    >>> row["coverage_by_size"]
    {0: 0.0, 1: 0.0, 2: 1.0, 4: 1.0}
    """
    covered, size, kk, c = _summary_inputs(sets, k, gold, correct)
    n = covered.size
    nan = float("nan")
    if n == 0:
        reason = "no examples: coverage and set size are undefined"
        undefined(reason)
        numbers = dict.fromkeys(("coverage", "mean_set_size", "acc", "uacc", "share_empty", "share_full"), nan)
        return {"n": 0, **numbers, "coverage_by_size": {}, "n_by_size": {}, "coverage_by_k": {}, "reason": reason}
    mean_size = float(size.mean())
    acc = float(c.mean())
    ks = np.unique(kk)
    uacc, reason = _uacc(acc, mean_size, ks)
    sizes, inverse = np.unique(size, return_inverse=True)
    n_size = np.bincount(inverse)
    cov_size = np.bincount(inverse, weights=covered) / n_size
    k_inverse = np.searchsorted(ks, kk)
    cov_k = np.bincount(k_inverse, weights=covered) / np.bincount(k_inverse)
    return dict(
        n=int(n),
        coverage=float(covered.mean()),
        mean_set_size=mean_size,
        acc=acc,
        uacc=uacc,
        share_empty=float(np.mean(size == 0)),
        share_full=float(np.mean(size == kk)),
        coverage_by_size={int(s): float(v) for s, v in zip(sizes, cov_size)},
        n_by_size={int(s): int(v) for s, v in zip(sizes, n_size)},
        coverage_by_k={int(v): float(x) for v, x in zip(ks, cov_k)},
        reason=reason,
    )


def _uacc(acc: float, mean_size: float, ks: np.ndarray) -> tuple[float, str | None]:
    """:func:`set_summary`'s ``(uacc, reason)``: NaN, said once with its reason, unless one K and a non-empty set."""
    if ks.size > 1:
        reason = f"uacc is undefined: the examples have {ks.size} different K ({ks.tolist()}); it scales by sqrt(K)"
    elif mean_size == 0:
        reason = "uacc is undefined: every prediction set is empty (mean set size 0)"
    else:
        return acc / mean_size * math.sqrt(int(ks[0])), None
    undefined(reason)
    return float("nan"), reason


def _cells(*columns) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of the non-negative integer ``columns`` side by side, in lexicographic order, and their
    counts: ``np.unique(np.stack(columns, axis=1), axis=0, return_counts=True)`` by counting one mixed-radix key
    per example (first column most significant) instead of sorting rows, which took seconds at millions."""
    cols = [np.asarray(col).astype(np.int64) for col in columns]
    widths = [int(col.max()) + 1 for col in cols]
    key = np.zeros(cols[0].size, dtype=np.int64)
    for col, width in zip(cols, widths):
        key = key * width + col
    counts = np.bincount(key)
    present = np.flatnonzero(counts)
    cells = np.empty((present.size, len(cols)), dtype=np.int64)
    rest = present
    for j in range(len(cols) - 1, -1, -1):
        rest, cells[:, j] = np.divmod(rest, widths[j])
    return cells, counts[present]


@validate_params({"n_boot": N_BOOT, "level": LEVEL})
def set_summary_ci(
    sets, k, gold, correct, *, n_boot: int = 1000, level: float = 0.95, seed: int = 0
) -> dict[str, tuple[float, float]]:
    r"""Percentile-bootstrap intervals of coverage, mean set size and UAcc over the test examples.

    The calibration threshold is held fixed; the ``n`` test examples are resampled with
    replacement. Each example enters only through its cell ``(covered, |C|, correct, K)``, so a
    replicate is drawn exactly as a multinomial over the few occupied cells,

    .. math::

        (m_1, \dots, m_c) \sim \mathrm{Multinomial}(n; \hat\pi_1, \dots, \hat\pi_c),

    the same distribution as resampling the examples, at a cost independent of ``n`` (2 million
    records take no longer than 200). ``lo``/``hi`` are the ``(1 -/+ level) / 2`` quantiles of
    the replicate values (Efron & Tibshirani 1993).

    Parameters
    ----------
    sets, k, gold, correct
        As for :func:`set_summary`.
    n_boot : int, default=1000
        Replicates (0: no intervals, NaN).
    level : float in (0, 1), default=0.95
    seed : int, default=0
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    cis : dict
        ``{"coverage": (lo, hi), "mean_set_size": (lo, hi), "uacc": (lo, hi)}``; NaN where
        undefined (no examples, several K for UAcc, a replicate with only empty sets).

    Examples
    --------
    >>> import numpy as np
    >>> from lm_eval_evidential.metrics.conformal import set_summary_ci
    >>> rng = np.random.default_rng(0)
    >>> sets = rng.random((500, 4)) < 0.4
    >>> ci = set_summary_ci(sets, [4] * 500, rng.integers(0, 4, 500), rng.random(500) < 0.6, n_boot=200)
    >>> lo, hi = ci["mean_set_size"]
    >>> bool(lo < sets.sum(1).mean() < hi)
    True
    """
    n_boot, level = int(n_boot), float(level)
    covered, size, kk, c = _summary_inputs(sets, k, gold, correct)
    nan2 = (float("nan"), float("nan"))
    out = {"coverage": nan2, "mean_set_size": nan2, "uacc": nan2}
    n = covered.size
    if n == 0 or n_boot == 0:
        return out
    cells, counts = _cells(covered, size, c, kk)
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(n, counts / n, size=n_boot).astype(np.float64)  # (n_boot, n_cells)
    cov = draws @ cells[:, 0] / n
    mean_size = draws @ cells[:, 1] / n
    acc = draws @ cells[:, 2] / n
    q = [(1 - level) / 2, (1 + level) / 2]
    out["coverage"] = tuple(float(v) for v in np.quantile(cov, q))
    out["mean_set_size"] = tuple(float(v) for v in np.quantile(mean_size, q))
    if np.unique(kk).size == 1 and (mean_size > 0).all():
        uacc = acc / mean_size * math.sqrt(int(kk[0]))
        out["uacc"] = tuple(float(v) for v in np.quantile(uacc, q))
    return out
