"""Do two confidence scores order the examples the same way?

Maaz et al. (2023, §2.2, Definition 1): two scores are *order-isomorphic* on a set when, for every
pair of examples, one is strictly below / equal to / strictly above the other under both
scores alike. Every rank-based metric (AUROC, AUPR, ATC, PRR, AURC) is then identical for the
two, so such scores are one choice, not two. This module measures how far two scores are from
that: the share of pairs they order oppositely (discordant, Kendall) and the share of pairs
tied under exactly one of them.
References
----------
.. [1] Maaz, M., Qiao, R., Zhou, Y. and Zhang, R. (2023). On orderings of probability vectors
       and unsupervised performance estimation. arXiv:2306.10160 (section 2.2, Definition 1;
       Theorems 1 and 2).
.. [2] Kendall, M. G. (1938). A new measure of rank correlation. *Biometrika* 30(1/2), 81-93.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from lm_eval_evidential.errors import InvalidValueError

from ._validation import as_1d_float, check_same_length, undefined
from .scores import available_scores, check_score_names, compute_score

__all__ = ["discordant_fraction", "order_audit", "score_order_audit"]

# Largest pair count for which the discordant count is recovered from scipy's tau-b exactly:
# the float64 reconstruction error is at most ~8 ulp of the pair count, kept below 1/2 here.
_EXACT_TAU_PAIRS = 2**49

#: scipy's own exact discordant-pair count (a Fenwick tree in Cython), what ``kendalltau`` counts with, or None
#: in a scipy that moved it. Private: read because scipy exposes tau but not the count, and recovering the count
#: from tau costs kendalltau's two sorts of each pair again; without it, the count comes from the tau-b. Found on
#: first use (:func:`_scipy_kendall_dis`), not at import: the CLI's parser imports this module, and scipy.stats
#: alone takes about a second to import.
_kendall_dis = ...


def _scipy_kendall_dis():
    global _kendall_dis
    if _kendall_dis is ...:
        try:
            from scipy.stats._stats import _kendall_dis as found
        except ImportError:  # pragma: no cover - a scipy that moved it
            found = None
        _kendall_dis = found
    return _kendall_dis


def _tied_ranks(ranks: np.ndarray) -> int:
    """Number of pairs with equal dense ranks ``0..m-1`` (sum over tie groups of c (c - 1) / 2), exact."""
    c = np.bincount(ranks).astype(np.int64)
    return int((c * (c - 1) // 2).sum())


def _joint_sort(ra: np.ndarray, rb: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """``(x, v, tied_both)``: the pairs ``(ra_i, rb_i)`` in lexicographic order as two arrays (one sort of a
    combined key) and the number of example pairs tied under both rankings. ``ra``, ``rb``: dense ranks, n >= 1."""
    width = int(rb.max()) + 1
    key = np.sort(ra * width + rb)
    x = key // width
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    c = np.diff(np.r_[starts, key.size])
    return x, key - x * width, int((c * (c - 1) // 2).sum())


def _tied_both(ra: np.ndarray, rb: np.ndarray) -> int:
    """Number of pairs tied under both dense rankings."""
    return _joint_sort(ra, rb)[2] if ra.size else 0


def _pair_counts(ra: np.ndarray, rb: np.ndarray, tie_a: int, tie_b: int) -> tuple[int, int]:
    """``(discordant, tied_both)`` pair counts of two dense rankings (n >= 2), exactly, from one sort: the
    discordant pairs are the strict inversions of ``rb`` in ``(ra, rb)`` order across different ``ra``,
    which scipy's ``_kendall_dis`` counts (the tau-b route of :func:`_discordant_pairs` without it)."""
    n = ra.size
    kendall_dis = _scipy_kendall_dis()
    if kendall_dis is not None and 0 in (tie_a, tie_b):
        # A ranking without ties is a permutation, so the other's ranks in its order are a scatter, not a sort
        # (the discordant count is symmetric; no pair is tied under both).
        perm, other = (ra, rb) if tie_a == 0 else (rb, ra)
        v = np.empty_like(other)
        v[perm] = other
        return int(kendall_dis(np.arange(n, dtype=np.intp), (v + 1).astype(np.intp, copy=False))), 0
    x, v, both = _joint_sort(ra, rb)
    if kendall_dis is None:
        return _discordant_pairs(ra, rb, (tie_a, tie_b, both)), both
    total = n * (n - 1) // 2
    if tie_a == total or tie_b == total:
        return 0, both  # one score is constant: every pair is tied, none discordant
    # 1-based: _kendall_dis's Fenwick tree has no slot 0.
    return int(kendall_dis(x.astype(np.intp, copy=False), (v + 1).astype(np.intp, copy=False))), both


def _dense_ranks(x: np.ndarray) -> np.ndarray:
    return np.unique(x, return_inverse=True)[1].astype(np.int64).reshape(-1)


def _discordant_merge(ra: np.ndarray, rb: np.ndarray) -> int:
    """Exact discordant-pair count by a bottom-up merge sort, O(n log^2 n) numpy.

    Fallback for inputs too large for the tau-b reconstruction (and a second exact method for
    the tests). ``ra``, ``rb`` are dense integer ranks. Sorting by ``(ra, rb)`` turns discordant
    pairs into strict inversions of the ``rb`` sequence (pairs tied in ``ra`` are sorted by
    ``rb``, so they are never inversions); each merge level counts, for every element of a
    right block, the elements of its left block that are strictly greater.
    """
    n = ra.size
    v = rb[np.lexsort((rb, ra))]
    width = int(v.max()) + 1 if n else 1
    idx = np.arange(n, dtype=np.int64)
    total = 0
    w = 1
    while w < n:
        pair = idx // (2 * w)
        right = (idx // w) % 2 == 1
        key = pair * width + v  # every block is sorted, so left-block keys are sorted overall
        left_keys = key[~right]
        rp = pair[right]
        at_most = np.searchsorted(left_keys, key[right], side="right") - rp * w
        total += int((np.minimum(w, n - 2 * w * rp) - at_most).sum())
        key.sort()
        v = key - pair * width
        w *= 2
    return total


def _discordant_pairs(ra: np.ndarray, rb: np.ndarray, ties: tuple[int, int, int] | None = None) -> int:
    """Exact number of pairs with ``(a_i - a_j)(b_i - b_j) < 0``, from dense ranks.

    ``ties``: ``(tied in a, tied in b, tied in both)`` pair counts where the caller has them."""
    n = ra.size
    total = n * (n - 1) // 2
    tie_a, tie_b, tie_both = ties if ties is not None else (_tied_ranks(ra), _tied_ranks(rb), _tied_both(ra, rb))
    if tie_a == total or tie_b == total:
        return 0  # one score is constant: every pair is tied, none discordant
    # concordant + discordant = pairs tied in neither = total - tie_a - tie_b + tie_both
    untied = total - tie_a - tie_b + tie_both
    if total <= _EXACT_TAU_PAIRS:
        # scipy computes tau_b = (C - D) / sqrt((total - tie_a)(total - tie_b)) from its exact
        # integer counts; undoing that division recovers C - D to well under 1/2, and
        # D = (untied - (C - D)) / 2 is an integer, so rounding makes it exact. Written by hand
        # because scipy exposes tau but not the discordant count.
        from scipy.stats import kendalltau

        tau = kendalltau(ra, rb, variant="b").statistic
        c_minus_d = tau * np.sqrt(float(total - tie_a)) * np.sqrt(float(total - tie_b))
        half = (untied - c_minus_d) / 2.0
        d = int(round(half))
        if abs(half - d) < 0.25 and 0 <= d <= untied:
            return d
    return _discordant_merge(ra, rb)


def discordant_fraction(score_a, score_b) -> float:
    r"""Fraction of all ``n (n - 1) / 2`` pairs that the two scores order oppositely.

    .. math::

        D = \frac{\#\{i < j : (a_i - a_j)(b_i - b_j) < 0\}}{n (n - 1) / 2}

    Ties count as **not** discordant: a pair tied under either score (or both) is neither
    concordant nor discordant, and stays in the denominator. 0 = never ordered oppositely (see
    :func:`order_audit` for the tie side of order equivalence), 1 = one score strictly
    reverses the other. The count is exact, O(n log n) (scipy's own count behind ``kendalltau``, see
    ``_pair_counts``), so the fraction is exactly ``D`` in float64.

    Parameters
    ----------
    score_a, score_b : array-like of shape (n_samples,)
        Two scores of the same examples.

    Returns
    -------
    float
        NaN (with an :class:`UndefinedMetricWarning`) for ``n < 2``.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.score_orders import discordant_fraction
    >>> round(discordant_fraction([1, 2, 3, 4], [1, 3, 2, 4]), 4)  # one pair of six swapped
    0.1667
    """
    a = as_1d_float(score_a, "score_a")
    b = as_1d_float(score_b, "score_b")
    n = check_same_length(score_a=a, score_b=b)
    if n < 2:
        return undefined(f"discordant_fraction is undefined for {n} example(s); it needs at least one pair")
    ra, rb = _dense_ranks(a), _dense_ranks(b)
    return _pair_counts(ra, rb, _tied_ranks(ra), _tied_ranks(rb))[0] / (n * (n - 1) // 2)


def order_audit(scores: dict, *, ranks: dict | None = None) -> list[dict]:
    r"""Pairwise order comparison of named scores on the same examples.

    For each unordered pair of names, the share of example pairs ordered oppositely
    (:func:`discordant_fraction`) and the share tied under exactly one of the two,

    .. math::

        T = \frac{\#\{i < j : [a_i = a_j] \ne [b_i = b_j]\}}{n (n - 1) / 2};

    the scores are *order-isomorphic* on these examples iff both are exactly 0, and then
    every rank-based metric (AUROC, AUPR, PRR, AURC, ATC) agrees between them. Ties are exact
    float equality, so two scores that are equal in exact arithmetic can still differ in the
    last bit and be reported as not equivalent.

    Parameters
    ----------
    scores : dict of str to array-like of shape (n_samples,)
        Named scores of the same examples.
    ranks : dict of str to ndarray of int, optional
        The dense ranks of some of the scores (``np.unique(score, return_inverse=True)[1]``), where the caller
        has them from an earlier sort of the same values; the others are ranked here.

    Returns
    -------
    list of dict
        One row per unordered pair (in the dict's order): ``score_a``, ``score_b``,
        ``n_pairs``, ``discordant_fraction``, ``tie_mismatch_fraction``, ``order_equivalent``.
        With fewer than 2 examples the fractions are NaN (with an
        :class:`UndefinedMetricWarning`), ``order_equivalent`` is False and the row has a
        ``reason``.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.score_orders import order_audit
    >>> rows = order_audit({"a": [1, 2, 3], "b": [10, 20, 30], "c": [3, 2, 1]})
    >>> [(r["score_a"], r["score_b"], r["discordant_fraction"], r["order_equivalent"]) for r in rows]
    [('a', 'b', 0.0, True), ('a', 'c', 1.0, False), ('b', 'c', 1.0, False)]
    """
    if not isinstance(scores, dict):
        raise InvalidValueError(f"scores must be a dict mapping score name to a 1-D array, got {type(scores).__name__}")
    arrays = {str(name): as_1d_float(s, f"scores[{name!r}]") for name, s in scores.items()}
    n = check_same_length(**arrays) if arrays else 0
    total = n * (n - 1) // 2
    given = ranks or {}
    ranks = {name: given[name] if name in given else _dense_ranks(s) for name, s in arrays.items()}
    # Scores with identical dense ranks are order-isomorphic (no discordant pair, the same ties), exactly:
    # each class of them is compared with every other class once (Kendall runs are the cost at large n).
    same_as: dict[str, str] = {}
    for name, r in ranks.items():
        same_as[name] = next((rep for rep in dict.fromkeys(same_as.values()) if np.array_equal(ranks[rep], r)), name)
    ties = {name: _tied_ranks(r) for name, r in ranks.items() if same_as[name] == name}
    counted: dict[tuple[str, str], tuple[int, int]] = {}
    rows = []
    for name_a, name_b in combinations(arrays, 2):
        row = {"score_a": name_a, "score_b": name_b, "n_pairs": total}
        if total == 0:
            reason = f"order_audit is undefined for {n} example(s); it needs at least one pair"
            row.update(
                discordant_fraction=undefined(reason),
                tie_mismatch_fraction=float("nan"),
                order_equivalent=False,
                reason=reason,
            )
        else:
            a, b = same_as[name_a], same_as[name_b]
            if a == b:
                counted[a, b] = (0, 0)
            elif (a, b) not in counted:
                discordant, both = _pair_counts(ranks[a], ranks[b], ties[a], ties[b])
                counted[a, b] = (discordant, ties[a] + ties[b] - 2 * both)
            discordant, mismatch = counted[a, b]
            row.update(
                discordant_fraction=discordant / total,
                tie_mismatch_fraction=mismatch / total,
                order_equivalent=discordant == 0 and mismatch == 0,
            )
        rows.append(row)
    return rows


def score_order_audit(probs, k, *, names=None, alpha=None, prior_weight: float = 1.0, member_logits=None) -> list[dict]:
    r""":func:`order_audit` of registered score functions computed on one batch.

    For every pair of registered score functions ``s_a``, ``s_b`` on the same batch,

    .. math::

        \text{order-equivalent}(s_a, s_b) \iff D(s_a(p), s_b(p)) = 0 \text{ and } T(s_a(p), s_b(p)) = 0

    with ``D`` and ``T`` the discordant and tie-mismatch fractions of :func:`order_audit`.
    By Maaz et al. (2023), for K = 2 the six section-2.3 scores are all
    order-equivalent (Theorem 1); for any K, ``l2_norm`` and ``l2_to_uniform`` are
    (Theorem 2), but only within rows of the same K.

    Parameters
    ----------
    probs : array-like of shape (n_samples, K_max) or None
        NaN right-padded predictive distribution as in
        :func:`~lm_eval_evidential.metrics.scores.compute_score` (None: derived from alpha).
    k : array-like of int, shape (n_samples,)
        Per-example class counts.
    names : iterable of str, optional
        Score names (validated); default every score computable from the inputs.
    alpha : array-like of shape (n_samples, K_max), optional
        Dirichlet concentrations.
    prior_weight : float > 0, default=1.0
        The prior weight ``lambda``.
    member_logits : array-like of shape (n, M, K_max), optional
        The members' logits of records scored by several members (ensembles, MC dropout).

    Returns
    -------
    list of dict
        As :func:`order_audit`.

    Examples
    --------
    >>> import numpy as np
    >>> from lm_eval_evidential.metrics.score_orders import score_order_audit
    >>> probs = np.array([[0.5, 0.3, 0.2], [0.4, 0.4, 0.2], [0.6, 0.2, 0.2]])
    >>> rows = score_order_audit(probs, [3, 3, 3], names=["max_prob", "l2_norm", "l2_to_uniform"])
    >>> [(r["score_a"], r["score_b"], r["order_equivalent"]) for r in rows]
    [('max_prob', 'l2_norm', True), ('max_prob', 'l2_to_uniform', True), ('l2_norm', 'l2_to_uniform', True)]
    """
    if names is None:
        names = available_scores(alpha is not None, has_members=member_logits is not None)
    else:
        names = check_score_names(names)
    return order_audit(
        {
            name: compute_score(
                name, probs=probs, k=k, alpha=alpha, prior_weight=prior_weight, member_logits=member_logits
            )
            for name in names
        }
    )
