r"""The K sweep of McNamara (2026), Table 1: how much each score moves when K alone changes.

:func:`ksweep` appends ``x = 0..max_extra`` phantom options (:data:`PHANTOM_MODES` says how) to the
OOD side and recomputes each score's AUROC/AUPR on fixed alphas; :func:`phantom_scores` is one side
at one ``x``. The K check that refuses K-mismatched comparisons is :mod:`.cardinality`'s.

Notes
-----
Proposition 1: vacuity is unchanged by an option of concentration

.. math::

    \alpha_{K+1} = S_K / K, \quad\text{i.e. evidence}\quad e_{K+1} = S_K / K - \lambda,

so :func:`ksweep` reports in each row the mean evidence of the appended options on each grown side
(``phantom_evidence_id``/``_ood``: 0 for ``zero``, ``-lambda`` for ``count``, the model's
own for ``model``; NaN where nothing was appended) beside that invariance value
(``invariant_evidence_id``/``_ood``, the side's mean ``S_K / K - lambda``): phantom evidence
below it lowers reciprocal vacuity, above it raises it.

Under matched zero-evidence expansion with a single K per side, reciprocal vacuity and
strength become

.. math::

    \frac{S + x \lambda}{\lambda (K + x)} \quad\text{and}\quad S + x \lambda,

strictly increasing in S for all rows alike, so their ranks and hence AUROC/AUPR are
unchanged exactly (up to two S values within one float ulp merging into a tie). Under
OOD-only zero-evidence expansion the OOD reciprocal vacuity can only fall (``S >= lambda K``),
so its AUROC can only rise.

References
----------
.. [1] McNamara, C. (2026). Rethinking vacuity for OOD detection in evidential deep learning.
       arXiv:2605.06382 (Table 1 and Figure 1, the K sweep; Tables 3-6, phantom options).
"""

from __future__ import annotations

import numpy as np

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.params import Integral, Interval, Options, Param, Real, validate_params

from ._batches import PRIOR_WEIGHT, check_padded, probs_of
from .dirichlet import EXTRA, expand_unchecked
from .member_phantoms import MemberSide, member_phantom_scores
from .ranking import aupr_in_from_blocks, auroc_from_blocks, merge_tie_blocks
from .score_functions import COUNT_SCORES
from .scores import OOD_DEFAULT_SCORES, SCORES, check_score_names

__all__ = [
    "ksweep",
    "classify_k_sensitivity",
    "PHANTOM_MODES",
    "phantom_scores",
]

#: How ``ksweep`` grows K by ``x`` phantom options (McNamara 2026, Table 1 and Tables 3-6):
#: ``zero`` appends ``x`` options with zero evidence (``alpha = lambda``, the paper's Table 1);
#: ``model`` appends the model's own phantom options (the next labels' concentrations, e.g. the
#: real " E" of Implementation A, Tables 3-4); ``count`` changes only the K of vacuity,
#: ``u = lambda (K + x) / S`` with S over the real options (every other score unchanged: the
#: pattern of Tables 5-6's "5 (mismatch)" rows, where max-prob does not move).
PHANTOM_MODES = ("zero", "model", "count")
#: What each mode appends, in words (singular, plural): the one source of every sentence, axis label
#: and caption that names a phantom mode, so the words say what the numbers were computed with.
PHANTOM_OPTIONS = {
    "zero": ("zero-evidence option", "zero-evidence options"),
    "model": ("option with the model's own evidence", "options with the model's own evidence"),
    "count": ("option counted in vacuity's K alone", "options counted in vacuity's K alone"),
}


#: ``phantom``: how the K sweep grows K (declared once: the audits, the report and the CLI take it).
PHANTOM = Param(Options(PHANTOM_MODES), noun="phantom mode")


@validate_params({"mode": PHANTOM})
def phantom_options(mode: str, n: int = 1) -> str:
    """What ``n`` options appended under ``mode`` are, in words.

    Examples
    --------
    >>> phantom_options("zero"), phantom_options("model", 2)
    ('zero-evidence option', "options with the model's own evidence")
    """
    return PHANTOM_OPTIONS[mode][n != 1]


def _side_scores(alpha, k, names, lam, k_count=None, logits=None) -> dict[str, np.ndarray]:
    # alpha is validated once by ksweep (expansions of it stay valid), so the registry's
    # kernels are called directly instead of re-validating through compute_score per score.
    mask = np.arange(alpha.shape[1]) < k[:, None]
    p = probs_of(alpha, mask)
    return {
        name: SCORES[name].fn(
            p, k if k_count is None or name not in COUNT_SCORES else k_count, mask, alpha, lam, logits
        )
        for name in names
    }


def _append(values: np.ndarray, k: np.ndarray, extra: np.ndarray, x: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's own values followed by the first ``x`` of ``extra`` (NaN right-padded, both)."""
    n = values.shape[0]
    new_k = k + x
    out = np.full((n, int(new_k.max()) if n else values.shape[1] + x), np.nan)
    out[:, : values.shape[1]] = values[:, : out.shape[1]]
    rows = np.arange(n)
    for j in range(x):
        out[rows, k + j] = extra[:, j]
    return out, new_k


def _n_phantom(phantom, n: int) -> np.ndarray:
    return np.zeros(n, dtype=np.int64) if phantom is None else (~np.isnan(phantom)).sum(axis=1)


def _grow(a, k, x: int, mode: str, lam: float, names, phantom=None, z=None, z_phantom=None, members=None):
    """(per-example scores, evaluated K, mean appended evidence) of validated rows with ``x`` phantom options;
    rows of several members (``members``, a :class:`MemberSide`) grow each member (:mod:`.member_phantoms`)."""
    if members is not None:
        return member_phantom_scores(members, x, phantom=mode, prior_weight=lam, scores=names)
    if x == 0:
        return _side_scores(a, k, names, lam, logits=z), k, float("nan")
    if mode == "count":
        return _side_scores(a, k, names, lam, k_count=k + x, logits=z), k + x, -lam
    if mode == "zero":
        ax, kx = expand_unchecked(a, k, x, lam)
        evidence = 0.0
    else:
        ax, kx = _append(a, k, phantom, x)
        evidence = float(np.mean(phantom[:, :x]) - lam)
        if z is not None:
            z = _append(z, k, z_phantom, x)[0]
    return _side_scores(ax, kx, names, lam, logits=z), kx, evidence


@validate_params({"phantom": PHANTOM, "extra": EXTRA, "prior_weight": PRIOR_WEIGHT})
def phantom_scores(
    alpha,
    extra: int,
    *,
    phantom: str = "zero",
    prior_weight: float = 1.0,
    scores=OOD_DEFAULT_SCORES,
    phantom_alpha=None,
    logits=None,
    phantom_logits=None,
    members: MemberSide | None = None,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    r"""Each example's scores with ``extra`` phantom options appended by ``phantom`` (see :func:`ksweep`).

    The scoring of one side of :func:`ksweep` at one ``x``; with ``phantom="model"`` and the
    real next-label concentrations it is the forced-K scoring of McNamara (2026)'s
    Implementation A (a 4-option task scored at K = 5 with its real " E"). Each row is scored on

    .. math::

        (\alpha_1, \dots, \alpha_K, \alpha_{K+1}, \dots, \alpha_{K+x}), \qquad
        \alpha_{K+j} = \lambda \ (\text{zero}), \ \text{the model's own} \ (\text{model}),

    or, for ``count``, on the K real options with vacuity's count ``K + x`` (``u = lambda (K + x) / S``).

    Parameters
    ----------
    alpha : array-like of shape (n, K_max)
        NaN right-padded concentrations.
    extra : int >= 0
        Phantom options to append to every row.
    phantom : {"zero", "model", "count"}, default="zero"
    prior_weight : float > 0, default=1.0
    scores : iterable of str, default=OOD_DEFAULT_SCORES
    phantom_alpha : array-like of shape (n, P_max), optional
        The phantom options' concentrations (``phantom="model"``: at least ``extra`` per row).
    logits, phantom_logits : array-like, optional
        Answer and phantom logits (logit scores).
    members : MemberSide, optional
        The rows' members: each grows by its own options (:mod:`.member_phantoms`; ``phantom_*`` unused).

    Returns
    -------
    scores : dict of str to ndarray of shape (n,)
    k : ndarray of shape (n,)
        The evaluated K of each row (``K + extra``).

    Examples
    --------
    >>> from lm_eval_evidential.metrics.cardinality import phantom_scores
    >>> s, k = phantom_scores([[3.0, 1.0]], 1, phantom="model", phantom_alpha=[[2.0]], scores=["max_prob"])
    >>> s["max_prob"].tolist(), k.tolist()   # 3 / (3 + 1 + 2)
    ([0.5], [3])
    """
    lam = float(prior_weight)
    mode = phantom
    names = tuple(check_score_names(scores))
    a, k, _ = check_padded(alpha, "alpha", positive=True)
    z = None if logits is None else np.asarray(logits, dtype=np.float64)
    if any(SCORES[n].needs_logits for n in names) and z is None:
        raise InvalidValueError("the logit scores need logits=")
    ph = zp = None
    if mode == "model" and extra and members is None:
        if phantom_alpha is None:
            raise InvalidValueError("phantom='model' needs phantom_alpha= (the phantom options' concentrations)")
        ph = np.asarray(phantom_alpha, dtype=np.float64).reshape(a.shape[0], -1)
        short = _n_phantom(ph, a.shape[0]) < extra
        if short.any():
            i = int(np.flatnonzero(short)[0])
            raise InvalidValueError(
                f"row {i} has {int(_n_phantom(ph, a.shape[0])[i])} phantom options, fewer than extra={extra}"
            )
        if z is not None:
            if phantom_logits is None:
                raise InvalidValueError("the logit scores under phantom='model' need phantom_logits=")
            zp = np.asarray(phantom_logits, dtype=np.float64).reshape(a.shape[0], -1)
    values, kx, _ = _grow(a, k, int(extra), mode, lam, names, ph, z, zp, members)
    return values, kx


#: The two sides of a comparison, in the order of every pair of per-side arguments.
SIDES = ("id", "ood")

#: Upper bound of the K sweep's appended classes: each x recomputes every score's AUROC/AUPR on
#: both conditions over arrays K + x wide (McNamara 2026, Table 1, sweeps x <= 4).
EXTRA_LIMIT = 64


#: ``max_extra``: the most options the K sweep appends (declared once: the audit, the report and the CLI take it).
MAX_EXTRA = Param(Interval(Integral, 0, EXTRA_LIMIT), why="appended zero-evidence classes")


@validate_params({"max_extra": MAX_EXTRA, "phantom": PHANTOM, "prior_weight": PRIOR_WEIGHT})
def ksweep(
    alpha_id,
    alpha_ood,
    *,
    prior_weight: float = 1.0,
    max_extra: int = 4,
    scores=OOD_DEFAULT_SCORES,
    phantom: str = "zero",
    phantom_id=None,
    phantom_ood=None,
    logits_id=None,
    logits_ood=None,
    phantom_logits_id=None,
    phantom_logits_ood=None,
    members_id: MemberSide | None = None,
    members_ood: MemberSide | None = None,
) -> list[dict]:
    r"""McNamara (2026), Table 1, on fixed alphas: how far each score's AUROC/AUPR-In moves when only K changes.

    For ``x = 0..max_extra``, ``x`` phantom options are appended to the OOD side only (``condition="ood_only"``) and
    to both sides (``condition="matched"``); the model outputs are untouched, so any change is an artefact of
    evaluation K. ID = positive (label 1), higher score = more ID. ``phantom`` (:data:`PHANTOM_MODES`) says how:

    - ``"zero"``: ``alpha = lambda`` (zero evidence), the paper's Table 1;
    - ``"model"``: the row's own phantom concentrations ``phantom_id``/``phantom_ood`` (the next labels' alpha by
      the records' head; x runs only as far as every row of the grown side(s) has phantoms);
    - ``"count"``: only the K of vacuity grows, ``u = lambda (K + x) / S`` with S over the real options, i.e. an
      option of concentration 0 for vacuity; the other scores are unchanged.

    Each row reports the mean evidence of the options appended to each side beside the evidence that leaves
    vacuity unchanged (Proposition 1; the module's Notes say why, and which rows cannot move):

    .. math::

        e_{K+1} = S_K / K - \lambda .

    Parameters
    ----------
    alpha_id, alpha_ood : array-like of shape (n, K_max)
        NaN right-padded Dirichlet concentrations of each side (non-empty).
    prior_weight : float > 0, default=1.0 (the prior weight ``lambda``)
    max_extra : int >= 0, default=4
        Largest number of appended classes.
    scores : iterable of str, default=OOD_DEFAULT_SCORES
    phantom : {"zero", "model", "count"}, default="zero"
    phantom_id, phantom_ood : array-like of shape (n, P_max), optional
        The phantom options' concentrations, NaN right-padded (needed by ``phantom="model"``).
    logits_id, logits_ood, phantom_logits_id, phantom_logits_ood : array-like, optional
        Answer and phantom logits, NaN right-padded (read by the logit scores; a model option adds its own).
    members_id, members_ood : MemberSide, optional
        A side's members: each grows by its own options (:mod:`.member_phantoms`; ``phantom_*`` unused).

    Returns
    -------
    list of dict
        One row per (condition, extra, score) with keys ``condition, extra, k_id, k_ood, score, auroc, aupr_in,
        delta_auroc, delta_aupr, phantom, phantom_evidence_id, phantom_evidence_ood, invariant_evidence_id,
        invariant_evidence_ood`` (deltas against ``extra = 0``; ``k_id``/``k_ood`` the single evaluated K of each
        side after expansion, None where the side is mixed; checking K beforehand is the caller's job).

    Examples
    --------
    >>> import numpy as np
    >>> from lm_eval_evidential.metrics.cardinality import ksweep
    >>> alpha_id = np.array([[4.6, 1, 1, 1], [9.0, 1, 1, 1]])    # S / K = 1.9, 3.0
    >>> alpha_ood = np.array([[5.0, 1, 1, 1], [1.0, 1, 1, 1]])   # S / K = 2.0, 1.0
    >>> rows = ksweep(alpha_id, alpha_ood, max_extra=1, scores=["reciprocal_vacuity"])
    >>> [(r["condition"], r["extra"], r["k_ood"], r["auroc"]) for r in rows]
    [('ood_only', 0, 4, 0.75), ('ood_only', 1, 5, 1.0), ('matched', 0, 4, 0.75), ('matched', 1, 5, 0.75)]
    >>> rows = ksweep(alpha_id, alpha_ood, max_extra=1, scores=["reciprocal_vacuity"], phantom="model",
    ...               phantom_id=[[1.9], [3.0]], phantom_ood=[[2.0], [1.0]])   # alpha = S / K: invariant
    >>> [(r["condition"], r["extra"], r["auroc"], r["phantom_evidence_ood"]) for r in rows if r["extra"]]
    [('ood_only', 1, 0.75, 0.5), ('matched', 1, 0.75, 0.5)]
    """
    lam, max_extra, mode = float(prior_weight), int(max_extra), phantom
    names = tuple(check_score_names(scores))
    alphas, logits, members = (alpha_id, alpha_ood), (logits_id, logits_ood), (members_id, members_ood)
    phantoms, phantom_logits = (phantom_id, phantom_ood), (phantom_logits_id, phantom_logits_ood)
    sides = _sweep_sides(alphas, names, mode, logits, phantoms, phantom_logits, members)
    return _sweep_rows(sides, names, mode, lam, max_extra)


def _sweep_sides(alphas, names, mode: str, logits, phantoms, phantom_logits, members=(None, None)) -> dict[str, dict]:
    """Validate :func:`ksweep`'s two sides: ``{"id"|"ood": {"alpha", "k", "z", "phantom", "z_phantom"}}``."""
    (a_id, k_id, _), (a_ood, k_ood, _) = (check_padded(a, f"alpha_{s}", positive=True) for a, s in zip(alphas, SIDES))
    if a_id.shape[0] == 0 or a_ood.shape[0] == 0:
        raise InvalidValueError(
            f"ksweep needs examples on both sides, got n_id={a_id.shape[0]}, n_ood={a_ood.shape[0]}"
        )
    sides = {"id": {"alpha": a_id, "k": k_id}, "ood": {"alpha": a_ood, "k": k_ood}}
    needs_logits = [name for name in names if SCORES[name].needs_logits]
    if needs_logits and (logits[0] is None or logits[1] is None):
        raise InvalidValueError(f"score(s) {needs_logits} read the answer logits: pass logits_id= and logits_ood=")
    for side, z, grown in zip(SIDES, logits, members):
        sides[side].update(
            z=np.asarray(z, dtype=np.float64) if needs_logits else None, phantom=None, z_phantom=None, members=grown
        )
    if mode == "model":
        _model_phantoms(sides, phantoms, phantom_logits if needs_logits else None)
    return sides


def _model_phantoms(sides: dict, phantoms, phantom_logits) -> None:
    """Validate ``phantom="model"``'s phantom concentrations (and logits, where the scores read them) into ``sides``."""
    if any(values is None and sides[s]["members"] is None for s, values in zip(SIDES, phantoms)):
        raise InvalidValueError(
            "phantom='model' needs the phantom options' concentrations: pass phantom_id= and phantom_ood="
        )
    for side, values in zip(SIDES, phantoms):
        if sides[side]["members"] is not None:  # each member's own phantoms, read by member_phantom_scores
            continue
        values = np.asarray(values, dtype=np.float64).reshape(sides[side]["alpha"].shape[0], -1)
        present = values[~np.isnan(values)]
        if not (np.isfinite(present) & (present > 0)).all():
            raise InvalidValueError(f"phantom_{side} must hold finite concentrations > 0 (NaN only as right padding)")
        sides[side]["phantom"] = values
    if phantom_logits is not None:
        if phantom_logits[0] is None or phantom_logits[1] is None:
            raise InvalidValueError(
                "the logit scores under phantom='model' need phantom_logits_id= and phantom_logits_ood="
            )
        for side, z in zip(SIDES, phantom_logits):
            if sides[side]["members"] is not None:
                continue
            sides[side]["z_phantom"] = np.asarray(z, dtype=np.float64).reshape(sides[side]["alpha"].shape[0], -1)


def _side_phantoms(side: dict) -> np.ndarray:
    """Phantom options per row of a validated side (its members' where it has members)."""
    return side["members"].n_phantom() if side["members"] is not None else _n_phantom(side["phantom"], 1)


def _single_k(k) -> int | None:
    return int(k[0]) if (k == k[0]).all() else None


def _auroc_aupr_in(sorted_id, sorted_ood) -> tuple[float, float]:
    b = merge_tie_blocks(sorted_id, sorted_ood)
    return auroc_from_blocks(b), aupr_in_from_blocks(b)


def _grown_sorted(side: dict, x: int, mode: str, lam: float, names) -> tuple[dict, np.ndarray, float]:
    """(scores sorted, evaluated K, mean appended evidence) of one side with x phantom options."""
    values, kx, evidence = _grow(
        side["alpha"], side["k"], x, mode, lam, names, side["phantom"], side["z"], side["z_phantom"], side["members"]
    )
    return {n: np.sort(v) for n, v in values.items()}, kx, evidence


def _sweep_rows(sides: dict, names, mode: str, lam: float, max_extra: int) -> list[dict]:
    """:func:`ksweep`'s rows on validated sides: each condition, each ``x`` its sides allow, each score."""
    available = {"id": max_extra, "ood": max_extra}
    if mode == "model":
        available = {s: min(max_extra, int(_side_phantoms(sides[s]).min())) for s in SIDES}
    invariant = {s: float(np.mean(np.nansum(sides[s]["alpha"], axis=1) / sides[s]["k"] - lam)) for s in SIDES}
    k_id, k_ood = sides["id"]["k"], sides["ood"]["k"]
    base_id, _, _ = _grown_sorted(sides["id"], 0, mode, lam, names)
    base_ood, _, _ = _grown_sorted(sides["ood"], 0, mode, lam, names)
    base = {name: _auroc_aupr_in(base_id[name], base_ood[name]) for name in names}
    ood_cache: dict[int, tuple] = {}

    rows = []
    for condition in ("ood_only", "matched"):
        last = available["ood"] if condition == "ood_only" else min(available.values())
        for x in range(last + 1):
            e_id = e_ood = float("nan")
            if x == 0:
                res, kid_x, kood_x = base, k_id, k_ood
            else:
                if x not in ood_cache:
                    ood_cache[x] = _grown_sorted(sides["ood"], x, mode, lam, names)
                sc_ood, kood_x, e_ood = ood_cache[x]
                if condition == "matched":
                    sc_id, kid_x, e_id = _grown_sorted(sides["id"], x, mode, lam, names)
                else:
                    kid_x, sc_id = k_id, base_id
                res = {name: _auroc_aupr_in(sc_id[name], sc_ood[name]) for name in names}
            for name in names:
                auc, ap = res[name]
                rows.append(
                    {
                        "condition": condition,
                        "extra": x,
                        "k_id": _single_k(kid_x),
                        "k_ood": _single_k(kood_x),
                        "score": name,
                        "auroc": auc,
                        "aupr_in": ap,
                        "delta_auroc": auc - base[name][0],
                        "delta_aupr": ap - base[name][1],
                        "phantom": mode,
                        "phantom_evidence_id": e_id,
                        "phantom_evidence_ood": e_ood,
                        "invariant_evidence_id": invariant["id"],
                        "invariant_evidence_ood": invariant["ood"],
                    }
                )
    return rows


#: ``atol``: how far a score's AUROC or AUPR-In may move and still count as K-invariant.
ATOL = Param(Interval(Real, 0), why="the largest move of a K-invariant score's AUROC or AUPR-In", example="atol=1e-12")


@validate_params({"atol": ATOL})
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
    moved: dict[str, bool] = {}
    for row in rows:
        try:
            name, da, dp = row["score"], row["delta_auroc"], row["delta_aupr"]
        except KeyError as exc:
            raise InvalidValueError(f"rows must come from ksweep (missing key {exc}); got {sorted(row)}") from None
        if not (np.isfinite(da) and np.isfinite(dp)):
            raise InvalidValueError(f"cannot classify {name!r}: a ksweep row has a NaN delta ({row})")
        moved[name] = moved.get(name, False) or abs(da) > atol or abs(dp) > atol
    return {name: "K-sensitive" if m else "K-invariant" for name, m in moved.items()}
