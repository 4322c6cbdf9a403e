"""What an OOD audit compares: each side's scores, the K check between the sides, a task's subset.

:func:`k_check` applies the ``k_policy`` of :mod:`.ood` (whose docstring states the conventions);
:func:`resolve_scores` names the scores a comparison can give; :func:`subset_records` takes a part of a
task's records; :func:`forced_k_scores` scores a side at a forced K with phantom options. :mod:`.ood`
(the detection rows and the K sweep) re-exports the public ones. Pure numpy + records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import numpy as np

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.metrics.cardinality import (
    PHANTOM,
    KCheck,
    check_cardinality,
    k_histogram,
    phantom_scores,
)
from lm_eval_evidential.metrics.dirichlet import edl_alpha
from lm_eval_evidential.metrics.member_phantoms import MemberSide
from lm_eval_evidential.metrics.scores import (
    SCORES,
    available_scores,
    check_score_names,
    computable_scores,
    no_alpha_reason,
)
from lm_eval_evidential.params import Integral, Interval, Param, validate_params
from lm_eval_evidential.records import Records
from lm_eval_evidential.records.orders import refuses_permuted

from ._common import without_k1_undefined

__all__ = ["k_check", "k_summary", "subset_records", "resolve_scores", "forced_k_scores"]


@refuses_permuted
def k_check(id_records: Records, ood_records: Records, k_policy: str = "assert") -> KCheck:
    """:func:`~lm_eval_evidential.metrics.cardinality.check_cardinality` on two tasks' records, named by task.

    (The two sides may carry one task name: a pair task splits its own records into ID and OOD.
    A user asking to compare a task with itself is refused where the task names are given: the
    ``ood``/``ksweep`` commands and :func:`lm_eval_evidential.report.build_report`.)
    """
    return check_cardinality(
        id_records.k, ood_records.k, policy=k_policy, id_name=id_records.task, ood_name=ood_records.task
    )


def k_summary(k) -> int | dict[int, int]:
    """The single K of a set of examples, or its ``{K: count}`` histogram when K is mixed."""
    hist = k_histogram(k)
    return next(iter(hist)) if len(hist) == 1 else hist


class _Taken(Sequence):
    """A lazy row selection of a label sequence (labels may be a lazy Arrow column)."""

    def __init__(self, base, index: np.ndarray):
        self._base, self._index = base, index

    def __len__(self):
        return len(self._index)

    def __getitem__(self, i):
        return self._base[int(self._index[i])]


def subset_records(records: Records, keep) -> Records:
    """The examples of ``records`` selected by the boolean mask ``keep`` (same task and meta)."""
    keep = np.asarray(keep)
    if keep.dtype != bool or keep.shape != (len(records),):
        raise InvalidValueError(
            f"keep must be a boolean mask of shape ({len(records)},), got {keep.dtype} {keep.shape}"
        )
    if keep.all():
        return records
    idx = np.flatnonzero(keep)
    labels = [records.labels[i] for i in idx] if isinstance(records.labels, list) else _Taken(records.labels, idx)
    arrays = {
        f.name: getattr(records, f.name)[idx]
        for f in dataclasses.fields(records)
        if isinstance(getattr(records, f.name), np.ndarray)
    }
    return dataclasses.replace(records, labels=labels, **arrays)


def resolve_scores(scores: Iterable[str] | None, *records: Records, default: Sequence[str] | None = None) -> list[str]:
    """Validated score names for ``records``.

    ``None`` gives ``default`` or, without one, every registered score computable from all
    the records (the alpha-based ones only when every side has Dirichlet alpha); a default
    drops ``neg_norm_entropy`` (with a warning) when some example has K = 1. Explicit names
    are checked: unknown names and alpha-based scores on ``method=softmax`` records raise
    ValueError.
    """
    has_alpha = all(r.has_alpha for r in records)
    has_members = all(r.has_members for r in records)
    if scores is None:
        names = computable_scores(
            default or available_scores(has_alpha, has_members=has_members), has_alpha, has_members
        )[0]
        return without_k1_undefined(names, *records)
    names = check_score_names(scores)
    needs = computable_scores(names, has_alpha, has_members)[1]
    if needs:
        raise InvalidValueError(no_alpha_reason(needs, [r.task for r in records if not r.has_alpha]))
    return names


#: ``force_k``: the options every question is scored at, its own plus phantom ones (McNamara 2026, Implementation A).
FORCE_K = Param(Interval(Integral, 1), why="the options each question is scored at", example="force_k=5")


def forced_k_of(records: Records, force_k) -> np.ndarray:
    """Every row's K set to ``force_k`` (checked against :data:`FORCE_K`); ValueError for a K below some question's
    own."""
    FORCE_K.check("force_k", force_k)
    if records.k.size and int(records.k.max()) > force_k:
        raise InvalidValueError(
            f"force_k={force_k} is below the K of {int((records.k > force_k).sum())} {records.task} questions "
            f"(up to {int(records.k.max())}); a forced K can add phantom options, never remove real ones"
        )
    return np.full(records.k.shape, int(force_k), dtype=np.int64)


@refuses_permuted
@validate_params({"phantom": PHANTOM})
def forced_k_scores(
    records: Records, force_k: int, *, scores: Iterable[str] | None = None, phantom: str = "model"
) -> dict[str, np.ndarray]:
    """Each question's scores at ``force_k`` options: its own plus ``force_k - K`` phantom options.

    McNamara (2026), section 4.3: the published IB-EDL code scored ARC-C and ARC-E (4 options) with
    ``n_labels = 5``, i.e. with the model's real " E" logit as a fifth class (Implementation A,
    Tables 3-4). ``phantom="model"`` reproduces that from the records' phantom logits (EDL: the
    head's evidence; softmax: the renormalised probabilities; IB-EDL refused, its phantom sigma is
    not kept); ``"count"`` the K of vacuity alone (Tables 5-6's "5 (mismatch)" rows); ``"zero"``
    zero-evidence options (Table 1).
    """
    k_forced = forced_k_of(records, force_k)
    names = resolve_scores(scores, records)
    shared_prior_weight(records, phantom=phantom)
    out = {name: np.full(len(records), np.nan) for name in names}
    for k in np.unique(records.k):
        group = records.k == k
        side = ksweep_side(records, group, phantom, names, extra=int(k_forced[0] - k))
        values, _ = phantom_scores(
            side["alpha"],
            int(k_forced[0] - k),
            phantom=phantom,
            prior_weight=records.prior_weight,
            scores=names,
            phantom_alpha=side["phantom"],
            logits=side["logits"],
            phantom_logits=side["phantom_logits"],
            members=side["members"],
        )
        for name in names:
            out[name][group] = values[name]
    return out


def shared_prior_weight(*records: Records, phantom: str = "zero") -> float:
    """The shared prior weight of the records; ValueError for unequal lambdas, and for softmax records
    unless ``phantom="model"`` (the one mode defined without evidence: renormalised probabilities), and
    ``phantom="model"`` on records of several members written before each member's phantom logits were kept."""
    without = [r.task for r in records if r.has_members and r.member_phantom_logits is None]
    if without and phantom == "model":
        raise InvalidValueError(
            f"--phantom model appends each member's own phantom options, but the records of {without} were scored by "
            "several members before lm-eval-evidential kept each member's phantom logits; re-run the evaluation, "
            "or use --phantom zero / --phantom count (EDL members)"
        )
    no_alpha = [r.task for r in records if not r.has_alpha]
    if no_alpha and phantom != "model":
        raise InvalidValueError(
            f"the K sweep with --phantom {phantom} appends to Dirichlet alphas, but the records of {no_alpha} are "
            "method=softmax and have no alpha; use --phantom model (the softmax over the answer and phantom "
            "logits) or evaluate with an evidential method (edl, ib_edl)"
        )
    lams = {r.prior_weight for r in records}
    if len(lams) != 1:
        raise InvalidValueError(
            f"the records were produced with different prior weights {sorted(lams)} "
            f"({', '.join(f'{r.task}: {r.prior_weight}' for r in records)}); the K sweep needs one lambda"
        )
    return lams.pop()


def _check_phantom_count(records: Records, keep, extra) -> None:
    """``--phantom model`` with ``extra`` options needs that many phantom logits on every kept question
    (``extra``: one number, or one per kept question)."""
    need = np.broadcast_to(np.asarray(extra, dtype=np.int64), records.k[keep].shape)
    have = records.n_phantom[keep]
    short = np.flatnonzero(have < need)
    if not short.size:
        return
    i = int(short[0])
    doc = int(records.doc_id[keep][i])
    count = records.meta.get("phantom_count")
    raise InvalidValueError(
        f"--phantom model: {short.size} question(s) of {records.task} have fewer phantom logits than the "
        f"{int(need[i])} options to add (doc_id {doc}: K={int(records.k[keep][i])}, {int(have[i])} kept; the "
        f"run's phantom_count={count}, and no letter exists after Z); re-evaluate with --model_args "
        f"phantom_count={int(need.max())} (or more), add fewer options, or use --phantom zero / --phantom count"
    )


def ksweep_side(records: Records, keep, phantom: str, names, extra=0) -> dict:
    """``ksweep``'s inputs for one side: alpha (for softmax records ``exp(z - max z)``, whose ``alpha / S``
    is the softmax, so appended ``exp(z_phantom - max z)`` renormalises it), logits, and in model mode
    the phantom options' concentrations by the records' head and their logits."""
    k = records.k[keep]
    z = records.logits[keep]
    needs_logits = any(SCORES[n].needs_logits for n in names)
    out = {"logits": z if needs_logits else None, "phantom": None, "phantom_logits": None, "members": None}
    if records.has_members:  # each member grows by its own phantom options (metrics.member_phantoms)
        if phantom == "model":
            _check_phantom_count(records, keep, extra)
        grown = records.member_phantom_logits[keep] if phantom == "model" else None
        out["members"] = MemberSide(records.member_logits[keep], grown, records.method)
    zp = records.phantom_logits[keep] if records.has_phantoms else np.empty((k.size, 0))
    if records.has_alpha:
        out["alpha"] = records.alpha[keep]
    else:
        shift = np.fmax(np.nanmax(z, axis=1), np.nanmax(np.where(np.isnan(zp), -np.inf, zp), axis=1, initial=-np.inf))
        out["alpha"] = np.exp(z - shift[:, None])
    if phantom != "model" or records.has_members:
        return out
    if not records.has_phantoms:
        raise InvalidValueError(
            f"--phantom model needs the phantom options' logits, but the records of {records.task} have none (written "
            "before lm-eval-evidential kept them, or by --model hf); re-run the evaluation with --model evidential"
        )
    if records.method == "ib_edl":
        raise InvalidValueError(
            f"--phantom model cannot give IB-EDL evidence for a phantom option ({records.task}): it needs that "
            "option's sigma (the last K + x vocabulary logits of a (K + x)-option head) and its noise draws, which "
            "the records do not keep; --phantom zero and --phantom count work on IB-EDL records, and method=edl "
            "records of the same checkpoint give the model's own phantom evidence"
        )
    _check_phantom_count(records, keep, extra)
    if records.has_alpha:
        out["phantom"] = edl_alpha(zp, records.prior_weight) if zp.shape[1] else np.full((k.size, 0), np.nan)
    else:
        out["phantom"] = np.exp(zp - shift[:, None])
    out["phantom_logits"] = zp if needs_logits else None
    return out
