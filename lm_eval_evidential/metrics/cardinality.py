"""The K audit: class-count (K) checks before OOD metrics, and the K sweep of McNamara (2026), Table 1.

Vacuity ``u = lambda K / S`` depends on the class count K itself (McNamara 2026, Proposition 1,
see :func:`lm_eval_evidential.metrics.dirichlet.invariant_extra_alpha`), so an ID-vs-OOD AUROC
computed across different K partly measures K, not uncertainty. :func:`check_cardinality`
enforces the comparison is K-matched (or makes the mismatch explicit);
:func:`ksweep` measures, on fixed alphas, how much each score moves when K alone changes.
References
----------
.. [1] McNamara, C. (2026). Rethinking vacuity for OOD detection in evidential deep learning.
       arXiv:2605.06382 (Proposition 1; Table 1 and Figure 1, the K sweep).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .detection import _aupr_in_from, _auroc_from, _merge_blocks
from .dirichlet import _check_prior_weight, _expand, _padded, _probs_of
from .scores import OOD_DEFAULT_SCORES, SCORES, check_score_names

__all__ = [
    "CardinalityMismatchError",
    "MISMATCH_REASON",
    "POLICIES",
    "KCheck",
    "k_histogram",
    "check_cardinality",
    "ksweep",
    "classify_k_sensitivity",
]

POLICIES = ("assert", "restrict", "report")


class CardinalityMismatchError(ValueError):
    """ID and OOD examples do not share one class count K, so vacuity-based metrics would be confounded.

    ``str(error)`` is the whole message. Its parts, for callers that print them apart (a report
    lists the refusal once and its remedy once): ``summary`` (what was refused, with both K
    histograms), :meth:`remedy` (what to do instead, for this policy and these histograms),
    ``policy``, ``id_name``, ``hist_id``, ``ood_name``, ``hist_ood`` and ``controls`` (the
    K-matched control tasks the remedy names).
    """

    def __init__(
        self,
        summary: str,
        *,
        policy: str,
        id_name: str,
        hist_id: dict,
        ood_name: str,
        hist_ood: dict,
        controls: Sequence[str] = (),
    ):
        self.summary, self.policy, self.controls = summary, policy, tuple(controls)
        self.id_name, self.hist_id, self.ood_name, self.hist_ood = id_name, hist_id, ood_name, hist_ood
        super().__init__(f"{summary}. {MISMATCH_REASON} {self.remedy()}")

    def remedy(self, controls: Sequence[str] | None = None) -> str:
        """What to do instead: ``k_policy=restrict`` only where the OOD side has questions with the ID
        side's K, the K-matched control tasks (``controls``, default the ones given at construction)
        where there are any, and ``k_policy=report`` to show the artefact on purpose."""
        controls = self.controls if controls is None else tuple(controls)
        k = _single(self.hist_id)
        report = "or k_policy=report computes it anyway, to show the artefact on purpose (rows marked matched: false)."
        if k is None:
            return (
                f"Remedy: {self.id_name} mixes several K, so no single K can be kept: choose an ID task whose "
                f"questions all have the same number of options, {report}"
            )
        named = " or ".join(controls)
        n_keep, n_ood = self.hist_ood.get(k, 0), sum(self.hist_ood.values())
        if n_keep and self.policy == "assert":
            control = f"; or compare with its K-matched control {named}" if controls else ""
            return (
                f"Remedy: k_policy=restrict compares only the {n_keep} of {n_ood} {self.ood_name} questions with "
                f"K = {k}{control}; {report}"
            )
        task = named if controls else f"a K-matched control task (questions with K = {k})"
        return (
            f"Remedy: no {self.ood_name} question has K = {k}, so compare {self.id_name} with {task} instead; {report}"
        )


MISMATCH_REASON = (
    "Vacuity-based scores depend on K itself, so AUROC/AUPR across different K partly measure the class "
    "count rather than uncertainty (McNamara (2026) arXiv:2605.06382, Proposition 1)."
)


@dataclass(frozen=True)
class KCheck:
    """Outcome of :func:`check_cardinality`.

    ``keep_id``/``keep_ood``: boolean masks of the examples to evaluate; ``n_dropped_*``: how
    many each side lost; ``matched``: every kept example has the same K; ``k_id``/``k_ood``:
    the single K of each kept side, or None where that side is mixed; ``policy``: as given.
    """

    keep_id: np.ndarray = field(repr=False)
    keep_ood: np.ndarray = field(repr=False)
    n_dropped_id: int
    n_dropped_ood: int
    matched: bool
    k_id: int | None
    k_ood: int | None
    policy: str


def _as_k(k, name: str) -> np.ndarray:
    arr = np.asarray(k)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise ValueError(
            f"{name} must be a 1-D integer array of class counts, got dtype {arr.dtype}, shape {arr.shape}"
        )
    arr = arr.astype(np.int64, copy=False)
    if (arr < 1).any():
        i = int(np.flatnonzero(arr < 1)[0])
        raise ValueError(f"{name} must contain class counts >= 1, found {int(arr[i])} at index {i}")
    return arr


def k_histogram(k) -> dict[int, int]:
    r"""``{K: number of examples}`` for a 1-D array of class counts, sorted by K (plain ints).

    Parameters
    ----------
    k : array-like of int, shape (n_samples,)
        Class counts >= 1.

    Returns
    -------
    dict of int to int

    Examples
    --------
    >>> from lm_eval_evidential.metrics.cardinality import k_histogram
    >>> k_histogram([4, 4, 5, 3])
    {3: 1, 4: 2, 5: 1}
    """
    values, counts = np.unique(_as_k(k, "k"), return_counts=True)
    return {int(v): int(c) for v, c in zip(values, counts)}


def _single(hist: dict[int, int]) -> int | None:
    return next(iter(hist)) if len(hist) == 1 else None


def _refuse(summary: str, policy: str, id_name, hist_id, ood_name, hist_ood, controls) -> CardinalityMismatchError:
    return CardinalityMismatchError(
        f"{summary}: {id_name} {hist_id} vs {ood_name} {hist_ood} (K: number of examples)",
        policy=policy,
        id_name=id_name,
        hist_id=hist_id,
        ood_name=ood_name,
        hist_ood=hist_ood,
        controls=controls,
    )


def check_cardinality(
    k_id, k_ood, *, policy: str = "assert", id_name: str = "ID", ood_name: str = "OOD", controls: Sequence[str] = ()
) -> KCheck:
    r"""Check that ID and OOD examples share one class count K, under ``policy``.

    Vacuity ``u = lambda K / S`` depends on K itself, so an AUROC across different K
    partly measures K. The comparison is valid only when

    .. math::

        K_i = K_j \quad \text{for every ID and OOD example } i, j.

    - ``"assert"`` (default): raise :class:`CardinalityMismatchError` unless every example on
      both sides has the same K.
    - ``"restrict"``: the ID side must have a single K (else the error); keep only the
      examples, on either side, whose K equals it; the error also when a side is left empty.
    - ``"report"``: keep everything; ``matched`` says whether all K are equal.

    Parameters
    ----------
    k_id, k_ood : array-like of int
        Per-example class counts of each side (non-empty).
    policy : {"assert", "restrict", "report"}, default="assert"
    id_name, ood_name : str
        Names used in the messages (e.g. the task names).
    controls : sequence of str, default=()
        K-matched control tasks of the OOD side, named in the remedy (e.g. ``csqa4_edl`` for ``csqa_edl``).

    Returns
    -------
    KCheck
        The masks of the examples to evaluate and what was dropped.

    Raises
    ------
    CardinalityMismatchError
        The message gives both K histograms, e.g.
        ``obqa_edl {4: 500} vs arc_c_edl {3: 4, 4: 1165, 5: 3}``, and the remedy that fits:
        ``restrict`` only where the OOD side has questions with the ID side's K, the
        ``controls``, and ``report`` to show the artefact on purpose.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.cardinality import check_cardinality
    >>> check = check_cardinality([4, 4], [4, 5], policy="restrict")
    >>> check.keep_ood.tolist(), check.n_dropped_ood, check.matched
    ([True, False], 1, True)
    >>> check_cardinality([4, 4], [5, 5], id_name="obqa", ood_name="csqa")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lm_eval_evidential.metrics.cardinality.CardinalityMismatchError: K mismatch between ID and OOD: ...
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown k_policy {policy!r}; valid policies are: {', '.join(POLICIES)}")
    kid, kood = _as_k(k_id, "k_id"), _as_k(k_ood, "k_ood")
    for arr, name in ((kid, id_name), (kood, ood_name)):
        if arr.size == 0:
            raise ValueError(f"the {name} side has no examples; OOD detection needs both sides")
    hist_id, hist_ood = k_histogram(kid), k_histogram(kood)
    all_k = set(hist_id) | set(hist_ood)
    keep_id = np.ones(kid.size, dtype=bool)
    keep_ood = np.ones(kood.size, dtype=bool)

    if policy == "report":
        return KCheck(keep_id, keep_ood, 0, 0, len(all_k) == 1, _single(hist_id), _single(hist_ood), policy)
    if policy == "assert":
        if len(all_k) != 1:
            raise _refuse("K mismatch between ID and OOD", policy, id_name, hist_id, ood_name, hist_ood, controls)
        k = next(iter(all_k))
        return KCheck(keep_id, keep_ood, 0, 0, True, k, k, policy)

    target = _single(hist_id)
    if target is None:
        raise _refuse(
            "k_policy=restrict needs a single K on the ID side, but the ID side is mixed",
            policy,
            id_name,
            hist_id,
            ood_name,
            hist_ood,
            controls,
        )
    keep_ood = kood == target
    if not keep_ood.any():
        raise _refuse(
            f"k_policy=restrict left no {ood_name} examples with K = {target}",
            policy,
            id_name,
            hist_id,
            ood_name,
            hist_ood,
            controls,
        )
    return KCheck(keep_id, keep_ood, 0, int((~keep_ood).sum()), True, target, target, policy)


def _side_scores(alpha, k, names, lam) -> dict[str, np.ndarray]:
    # alpha is validated once by ksweep (expansions of it stay valid), so the registry's
    # kernels are called directly instead of re-validating through compute_score per score.
    mask = np.arange(alpha.shape[1]) < k[:, None]
    p = _probs_of(alpha, mask)
    return {name: SCORES[name].fn(p, k, mask, alpha, lam) for name in names}


#: Upper bound of the K sweep's appended classes: each x recomputes every score's AUROC/AUPR on
#: both conditions over arrays K + x wide (McNamara 2026, Table 1, sweeps x <= 4).
MAX_EXTRA = 64


def check_max_extra(max_extra) -> int:
    """``max_extra`` if it is an integer in 0..:data:`MAX_EXTRA`, else ValueError."""
    if isinstance(max_extra, bool) or not isinstance(max_extra, (int, np.integer)) or not 0 <= max_extra <= MAX_EXTRA:
        raise ValueError(
            f"max_extra must be an integer in 0..{MAX_EXTRA} (appended zero-evidence classes), got {max_extra!r}"
        )
    return int(max_extra)


def ksweep(
    alpha_id, alpha_ood, *, prior_weight: float = 1.0, max_extra: int = 4, scores=OOD_DEFAULT_SCORES
) -> list[dict]:
    r"""McNamara (2026), Table 1, on fixed alphas: how far each score's AUROC/AUPR-In moves when only K changes.

    For ``x = 0..max_extra``, ``x`` zero-evidence classes (``alpha = lambda``) are appended to
    the OOD side only (``condition="ood_only"``) and to both sides (``condition="matched"``);
    the model outputs are untouched, so any change is an artefact of evaluation K. ID =
    positive (label 1), higher score = more ID.

    Under matched expansion with a single K per side, reciprocal vacuity and strength become

    .. math::

        \frac{S + x \lambda}{\lambda (K + x)} \quad\text{and}\quad S + x \lambda,

    strictly increasing in S for all rows alike, so their ranks and hence AUROC/AUPR are
    unchanged exactly (up to two S values within one float ulp merging into a tie). Under
    OOD-only expansion the OOD reciprocal vacuity can only fall (``S >= lambda K``), so its
    AUROC can only rise.

    Parameters
    ----------
    alpha_id, alpha_ood : array-like of shape (n, K_max)
        NaN right-padded Dirichlet concentrations of each side (non-empty).
    prior_weight : float > 0, default=1.0
        The prior weight ``lambda``.
    max_extra : int >= 0, default=4
        Largest number of appended classes.
    scores : iterable of str, default=OOD_DEFAULT_SCORES
        Score names (validated).

    Returns
    -------
    list of dict
        One row per (condition, extra, score) with keys ``condition, extra, k_id, k_ood,
        score, auroc, aupr_in, delta_auroc, delta_aupr`` (deltas against ``extra = 0``;
        ``k_id``/``k_ood`` the single K of each side after expansion, None where the side is
        mixed; checking K beforehand is the caller's job).

    Examples
    --------
    >>> import numpy as np
    >>> from lm_eval_evidential.metrics.cardinality import ksweep
    >>> alpha_id = np.array([[4.6, 1, 1, 1], [9.0, 1, 1, 1]])    # S / K = 1.9, 3.0
    >>> alpha_ood = np.array([[5.0, 1, 1, 1], [1.0, 1, 1, 1]])   # S / K = 2.0, 1.0
    >>> rows = ksweep(alpha_id, alpha_ood, max_extra=1, scores=["reciprocal_vacuity"])
    >>> [(r["condition"], r["extra"], r["k_ood"], r["auroc"]) for r in rows]
    [('ood_only', 0, 4, 0.75), ('ood_only', 1, 5, 1.0), ('matched', 0, 4, 0.75), ('matched', 1, 5, 0.75)]
    """
    lam = _check_prior_weight(prior_weight)
    max_extra = check_max_extra(max_extra)
    names = tuple(check_score_names(scores))
    a_id, k_id, _ = _padded(alpha_id, "alpha_id", positive=True)
    a_ood, k_ood, _ = _padded(alpha_ood, "alpha_ood", positive=True)
    if a_id.shape[0] == 0 or a_ood.shape[0] == 0:
        raise ValueError(f"ksweep needs examples on both sides, got n_id={a_id.shape[0]}, n_ood={a_ood.shape[0]}")

    def single_k(k):
        return int(k[0]) if (k == k[0]).all() else None

    def metrics(sorted_id, sorted_ood):
        b = _merge_blocks(sorted_id, sorted_ood)
        return _auroc_from(b), _aupr_in_from(b)

    def sorted_scores(alpha, k):
        return {name: np.sort(v) for name, v in _side_scores(alpha, k, names, lam).items()}

    # Each side's scores are computed and sorted once per x and shared by both conditions.
    base_id = sorted_scores(a_id, k_id)
    base = {name: metrics(base_id[name], v) for name, v in sorted_scores(a_ood, k_ood).items()}
    ood_cache: dict[int, tuple] = {}

    rows = []
    for condition in ("ood_only", "matched"):
        for x in range(max_extra + 1):
            if x == 0:
                res, kid_x, kood_x = base, k_id, k_ood
            else:
                if x not in ood_cache:
                    ax_ood, kood_x = _expand(a_ood, k_ood, x, lam)
                    ood_cache[x] = (kood_x, sorted_scores(ax_ood, kood_x))
                kood_x, sc_ood = ood_cache.pop(x) if condition == "matched" else ood_cache[x]
                if condition == "matched":
                    ax_id, kid_x = _expand(a_id, k_id, x, lam)
                    sc_id = sorted_scores(ax_id, kid_x)
                else:
                    kid_x, sc_id = k_id, base_id
                res = {name: metrics(sc_id[name], sc_ood[name]) for name in names}
            for name in names:
                auc, ap = res[name]
                rows.append(
                    {
                        "condition": condition,
                        "extra": x,
                        "k_id": single_k(kid_x),
                        "k_ood": single_k(kood_x),
                        "score": name,
                        "auroc": auc,
                        "aupr_in": ap,
                        "delta_auroc": auc - base[name][0],
                        "delta_aupr": ap - base[name][1],
                    }
                )
    return rows


def classify_k_sensitivity(rows, atol: float = 1e-12) -> dict[str, str]:
    r"""``{score: "K-invariant" | "K-sensitive"}`` from :func:`ksweep` rows.

    A score is K-invariant when no row of either condition moves its AUROC or AUPR-In from the
    ``extra = 0`` baseline by more than ``atol``:

    .. math::

        \max_{x, \mathrm{condition}} \max(|\Delta \mathrm{AUROC}|, |\Delta \mathrm{AUPR}|) \le atol;

    otherwise K-sensitive.

    Parameters
    ----------
    rows : list of dict
        Rows of :func:`ksweep`.
    atol : float >= 0, default=1e-12

    Returns
    -------
    dict of str to str

    Examples
    --------
    >>> import numpy as np
    >>> from lm_eval_evidential.metrics.cardinality import classify_k_sensitivity, ksweep
    >>> alpha_id = np.array([[4.6, 1, 1, 1], [9.0, 1, 1, 1]])
    >>> alpha_ood = np.array([[5.0, 1, 1, 1], [1.0, 1, 1, 1]])
    >>> classify_k_sensitivity(ksweep(alpha_id, alpha_ood, max_extra=1, scores=["reciprocal_vacuity"]))
    {'reciprocal_vacuity': 'K-sensitive'}
    """
    if not (np.isfinite(atol) and atol >= 0):
        raise ValueError(f"atol must be a finite number >= 0, got {atol!r}")
    moved: dict[str, bool] = {}
    for row in rows:
        try:
            name, da, dp = row["score"], row["delta_auroc"], row["delta_aupr"]
        except KeyError as exc:
            raise ValueError(f"rows must come from ksweep (missing key {exc}); got {sorted(row)}") from None
        if not (np.isfinite(da) and np.isfinite(dp)):
            raise ValueError(f"cannot classify {name!r}: a ksweep row has a NaN delta ({row})")
        moved[name] = moved.get(name, False) or abs(da) > atol or abs(dp) > atol
    return {name: "K-sensitive" if m else "K-invariant" for name, m in moved.items()}
