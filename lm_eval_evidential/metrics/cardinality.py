"""The K audit: class-count (K) checks before OOD metrics, and the K sweep of McNamara (2026), Table 1.

Vacuity ``u = lambda K / S`` depends on the class count K itself (McNamara 2026, Proposition 1,
see :func:`lm_eval_evidential.metrics.dirichlet.invariant_extra_alpha`), so an ID-vs-OOD AUROC
computed across different K partly measures K, not uncertainty. :func:`check_cardinality`
enforces the comparison is K-matched (or makes the mismatch explicit);
:func:`ksweep` (:mod:`.ksweep`, re-exported here) measures, on fixed alphas, how much each score
moves when K alone changes.

References
----------
.. [1] McNamara, C. (2026). Rethinking vacuity for OOD detection in evidential deep learning.
       arXiv:2605.06382 (Proposition 1; Table 1 and Figure 1, the K sweep).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from lm_eval_evidential.errors import InvalidValueError, RefusalError

# The K sweep lives in .ksweep; its public names stay importable from here, the K audit's module.
from .ksweep import (  # noqa: F401 (EXTRA, MAX_EXTRA, PHANTOM, phantom_options: importers of the K audit)
    EXTRA,
    MAX_EXTRA,
    PHANTOM,
    PHANTOM_MODES,
    classify_k_sensitivity,
    ksweep,
    phantom_options,
    phantom_scores,
)

__all__ = [
    "CardinalityMismatchError",
    "MISMATCH_REASON",
    "POLICIES",
    "KCheck",
    "k_histogram",
    "format_k",
    "check_cardinality",
    "ksweep",
    "classify_k_sensitivity",
    "PHANTOM_MODES",
    "phantom_scores",
]

POLICIES = ("assert", "restrict", "report")


class CardinalityMismatchError(RefusalError, ValueError):
    """ID and OOD examples do not share one class count K, so vacuity-based metrics would be confounded.

    ``str(error)`` is the whole message. Its parts, for callers that print them apart (a report
    lists the refusal once and its remedy once): ``summary`` (what was refused, with both K
    histograms), :meth:`remedy` (what to do instead, for this policy and these histograms),
    ``policy``, ``id_name``, ``hist_id``, ``ood_name``, ``hist_ood`` and ``controls`` (the
    K-matched control tasks the remedy names); ``remedy``: the caller's own remedy where the sides are
    not an ID and an OOD task (a calibration task of another K), said before ``k_policy=report``'s.
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
        remedy: str | None = None,
    ):
        self.summary, self.policy, self.controls, self._remedy = summary, policy, tuple(controls), remedy
        self.id_name, self.hist_id, self.ood_name, self.hist_ood = id_name, hist_id, ood_name, hist_ood
        super().__init__(f"{summary}. {MISMATCH_REASON} {self.remedy()}")

    def remedy(self, controls: Sequence[str] | None = None) -> str:
        """What to do instead: ``k_policy=restrict`` only where the OOD side has questions with the ID
        side's K, the K-matched control tasks (``controls``, default the ones given at construction)
        where there are any, and ``k_policy=report`` to show the artefact on purpose."""
        controls = self.controls if controls is None else tuple(controls)
        k = _single(self.hist_id)
        report = "or k_policy=report computes it anyway, to show the artefact on purpose (rows marked matched: false)."
        if self._remedy:  # the caller's own first remedy (e.g. another calibration task), then report's
            return f"Remedy: {self._remedy}; {report}"
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
        raise InvalidValueError(
            f"{name} must be a 1-D integer array of class counts, got dtype {arr.dtype}, shape {arr.shape}"
        )
    arr = arr.astype(np.int64, copy=False)
    if (arr < 1).any():
        i = int(np.flatnonzero(arr < 1)[0])
        raise InvalidValueError(f"{name} must contain class counts >= 1, found {int(arr[i])} at index {i}")
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


def format_k(v) -> str:
    """How a class count is written everywhere (messages, tables, the report).

    Parameters
    ----------
    v : int, dict of int to int, or None
        A single K, a ``{K: number of examples}`` histogram (:func:`k_histogram`), or None for
        "several K" where no histogram is at hand.

    Returns
    -------
    str
        The number, the histogram ``{K: n, …}``, or ``mixed``.

    Examples
    --------
    >>> format_k(4), format_k({4: 1165, 5: 3}), format_k(None)
    ('4', '{4: 1165, 5: 3}', 'mixed')
    """
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {n}" for k, n in v.items()) + "}"
    return "mixed" if v is None else str(v)


def _single(hist: dict[int, int]) -> int | None:
    return next(iter(hist)) if len(hist) == 1 else None


def _refuse(
    summary: str, policy: str, id_name, hist_id, ood_name, hist_ood, controls, remedy=None
) -> CardinalityMismatchError:
    return CardinalityMismatchError(
        f"{summary}: {id_name} {format_k(hist_id)} vs {ood_name} {format_k(hist_ood)} (K: number of examples)",
        policy=policy,
        id_name=id_name,
        hist_id=hist_id,
        ood_name=ood_name,
        hist_ood=hist_ood,
        controls=controls,
        remedy=remedy,
    )


def check_cardinality(
    k_id, k_ood, *, policy="assert", id_name="ID", ood_name="OOD", controls=(), sides="ID and OOD", remedy=None
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
    sides, remedy : str, default="ID and OOD", None
        What the two sides are (``"K mismatch between {sides}"``); the remedy to name first where the
        generic one (restrict, a control task) does not fit (a calibration task of another K).

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
        raise InvalidValueError(f"unknown k_policy {policy!r}; valid policies are: {', '.join(POLICIES)}")
    kid, kood = _as_k(k_id, "k_id"), _as_k(k_ood, "k_ood")
    for arr, name in ((kid, id_name), (kood, ood_name)):
        if arr.size == 0:
            raise InvalidValueError(f"the {name} side has no examples; OOD detection needs both sides")
    hist_id, hist_ood = k_histogram(kid), k_histogram(kood)
    all_k = set(hist_id) | set(hist_ood)
    keep_id = np.ones(kid.size, dtype=bool)
    keep_ood = np.ones(kood.size, dtype=bool)

    if policy == "report":
        return KCheck(keep_id, keep_ood, 0, 0, len(all_k) == 1, _single(hist_id), _single(hist_ood), policy)
    if policy == "assert":
        if len(all_k) != 1:
            raise _refuse(f"K mismatch between {sides}", policy, id_name, hist_id, ood_name, hist_ood, controls, remedy)
        k = next(iter(all_k))
        return KCheck(keep_id, keep_ood, 0, 0, True, k, k, policy)

    return _restrict(kid, kood, hist_id, hist_ood, id_name, ood_name, controls, remedy)


def _restrict(kid, kood, hist_id, hist_ood, id_name: str, ood_name: str, controls, remedy=None) -> KCheck:
    """:func:`check_cardinality` under ``policy="restrict"``: keep the OOD examples with the ID side's one K."""
    policy = "restrict"
    keep_id = np.ones(kid.size, dtype=bool)
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
            remedy,
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
            remedy,
        )
    return KCheck(keep_id, keep_ood, 0, int((~keep_ood).sum()), True, target, target, policy)
