"""K-controlled OOD audit of saved records: detection rows, the K sweep and its figure.

Conventions (as in :mod:`lm_eval_evidential.metrics.detection`): the in-distribution (ID) task
is the positive class (label 1), the OOD task label 0, and every score is oriented
**higher = more in-distribution**. Before any metric is computed the class counts K of the
two sides go through :func:`lm_eval_evidential.metrics.cardinality.check_cardinality` under a
``k_policy``:

- ``assert`` (default): refuse (``CardinalityMismatchError``) unless every example has one K;
- ``restrict``: keep only the examples whose K equals the ID side's single K;
- ``report``: keep everything; rows say ``matched: false`` when the K differ.

Vacuity is ``lambda K / S``, so across different K an AUROC partly measures K itself
(McNamara 2026, Proposition 1 and Table 1); the policy makes that explicit instead of silent.

Every function here first refuses records of different producers
(:func:`~lm_eval_evidential.records.provenance.check_same_producer`, a
``FingerprintMismatchError``) unless they were checked together before, where the user
gives ``allow_fingerprint_mismatch``: :func:`~lm_eval_evidential.records.loading.load_run`,
``build_report`` or :func:`~lm_eval_evidential.records.provenance.checked_together`. The
check runs once, where records enter; the rule the CLI applies holds for Python callers too.
Pure numpy + records: no torch, no lm_eval, no figures (those are in :mod:`lm_eval_evidential.plots`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.metrics.cardinality import (
    POLICIES,
    CardinalityMismatchError,
    KCheck,
    check_cardinality,
    check_phantom_mode,
    classify_k_sensitivity,
    k_histogram,
    ksweep,
    phantom_options,
    phantom_scores,
)
from lm_eval_evidential.metrics.detection import (
    aupr_in,
    bootstrap_ci,
    delong_test,
    detection_report,
)
from lm_eval_evidential.metrics.dirichlet import edl_alpha
from lm_eval_evidential.metrics.scores import (
    OOD_DEFAULT_SCORES,
    SCORES,
    available_scores,
    check_score_names,
    computable_scores,
    no_alpha_reason,
)
from lm_eval_evidential.records import Records, check_same_producer

from ._common import record_scores, without_k1_undefined

__all__ = [
    "POLICIES",
    "CardinalityMismatchError",
    "OOD_ROW_KEYS",
    "KSWEEP_ROW_KEYS",
    "k_check",
    "k_summary",
    "subset_records",
    "record_scores",
    "resolve_scores",
    "ood_rows",
    "ksweep_rows",
    "ksweep_delong",
    "forced_k_scores",
    "sensitivity_lines",
    "phantom_evidence_line",
]

OOD_ROW_KEYS = (
    "id_task",
    "ood_task",
    "score",
    "k_id",
    "k_ood",
    "n_id",
    "n_ood",
    "n_dropped",
    "matched",
    "auroc",
    "auroc_ci",
    "aupr_in",
    "aupr_in_ci",
    "aupr_out",
    "fpr95",
    "aupr_baseline",
    "forced_k",
    "phantom",
)
KSWEEP_ROW_KEYS = (
    "condition",
    "extra",
    "k_id",
    "k_ood",
    "score",
    "auroc",
    "aupr_in",
    "delta_auroc",
    "delta_aupr",
    "sensitivity",
    "phantom",
    "phantom_evidence_id",
    "phantom_evidence_ood",
    "invariant_evidence_id",
    "invariant_evidence_ood",
)


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


def ood_rows(
    id_records: Records,
    ood_records: Records,
    *,
    scores: Iterable[str] | None = None,
    k_policy: str = "assert",
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    force_k: int | None = None,
    phantom: str = "model",
    progress: Callable[[int, int, str], None] | None = None,
) -> list[dict]:
    """OOD-detection rows, one per score, for ID = ``id_records`` (label 1) vs ``ood_records`` (0).

    ``progress(done, total, score)`` is called before each score's metrics (the bootstrap makes each take
    minutes on millions of records), so a command can show that it is working.

    ``force_k`` scores the OOD side at that K (:func:`forced_k_scores`: each question's own
    options plus phantom options by ``phantom``): with ``phantom="model"`` it reproduces the
    published bug of McNamara (2026)'s Implementation A, 4-option ARC scored at K = 5 with the
    model's real " E" logit. Never a default: the forced K differs from the ID side's, so the
    ``assert`` policy refuses it unless ``k_policy="report"`` asks for it explicitly (rows then
    say ``matched: false``, ``forced_k`` and ``phantom``).

    The K check runs first under ``k_policy`` (see the module docstring); under ``assert`` a
    K mismatch raises :class:`CardinalityMismatchError` whose message gives both K histograms.
    Each row has exactly the keys of :data:`OOD_ROW_KEYS`:

    - ``k_id``/``k_ood``: the single K of the evaluated examples, or their ``{K: count}``
      histogram when mixed; ``n_id``/``n_ood``: examples evaluated; ``n_dropped``:
      ``{"id": a, "ood": b}`` examples dropped by ``restrict``; ``matched``: whether every
      evaluated example has the same K (false rows compare different K and are confounded);
    - ``auroc`` with ``auroc_ci`` = ``[lo, hi]`` (DeLong, at ``level``); ``aupr_in`` (ID
      positive) with ``aupr_in_ci`` from the stratified percentile bootstrap (``n_boot``
      replicates, ``seed``; ``n_boot=0`` skips it and gives ``[nan, nan]``); ``aupr_out``
      (OOD positive); ``fpr95`` (OOD accepted at 95% ID recall; lower is better);
      ``aupr_baseline`` (the ID share, AUPR-In at chance).

    ``scores`` defaults to every registered score computable from both sides. Records of
    different producers raise ``FingerprintMismatchError`` unless checked together before.
    """
    check_same_producer([id_records, ood_records])
    k_ood_all = ood_records.k if force_k is None else _forced_k(ood_records, force_k)
    check = check_cardinality(
        id_records.k, k_ood_all, policy=k_policy, id_name=id_records.task, ood_name=ood_records.task
    )
    names = resolve_scores(scores, id_records, ood_records)
    s_id = record_scores(id_records, names, check.keep_id)
    if force_k is None:
        s_ood = record_scores(ood_records, names, check.keep_ood)
    else:
        forced = forced_k_scores(ood_records, force_k, scores=names, phantom=phantom)
        s_ood = {name: values[check.keep_ood] for name, values in forced.items()}
    k_id, k_ood = id_records.k[check.keep_id], k_ood_all[check.keep_ood]
    n_id, n_ood = int(k_id.size), int(k_ood.size)
    y = np.concatenate((np.ones(n_id, dtype=bool), np.zeros(n_ood, dtype=bool)))
    common = {
        "id_task": id_records.task,
        "ood_task": ood_records.task,
        "k_id": k_summary(k_id),
        "k_ood": k_summary(k_ood),
        "n_id": n_id,
        "n_ood": n_ood,
        "matched": bool(check.matched),
    }
    rows = []
    for done, name in enumerate(names):
        if progress is not None:
            progress(done, len(names), name)
        s = np.concatenate((s_id[name], s_ood[name]))
        rep = detection_report(y, s, level=level)
        # n_boot = 0 gives [nan, nan]; the one n_boot rule is bootstrap_ci's.
        _, lo, hi = bootstrap_ci(aupr_in, y, s, n_boot=n_boot, level=level, seed=seed)
        row = {
            **common,
            "score": name,
            "n_dropped": {"id": int(check.n_dropped_id), "ood": int(check.n_dropped_ood)},
            "auroc": rep["auroc"],
            "auroc_ci": [rep["auroc_lo"], rep["auroc_hi"]],
            "aupr_in": rep["aupr_in"],
            "aupr_in_ci": [lo, hi],
            "aupr_out": rep["aupr_out"],
            "fpr95": rep["fpr_at_tpr"],
            "aupr_baseline": rep["aupr_baseline"],
            "forced_k": None if force_k is None else int(force_k),
            "phantom": None if force_k is None else phantom,
        }
        rows.append({key: row[key] for key in OOD_ROW_KEYS})
    return rows


def _forced_k(records: Records, force_k) -> np.ndarray:
    """Every row's K set to ``force_k``; ValueError for a K below some question's own."""
    if isinstance(force_k, bool) or not isinstance(force_k, (int, np.integer)) or force_k < 1:
        raise InvalidValueError(f"force_k must be a whole number >= 1, got {force_k!r}")
    if records.k.size and int(records.k.max()) > force_k:
        raise InvalidValueError(
            f"force_k={force_k} is below the K of {int((records.k > force_k).sum())} {records.task} questions "
            f"(up to {int(records.k.max())}); a forced K can add phantom options, never remove real ones"
        )
    return np.full(records.k.shape, int(force_k), dtype=np.int64)


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
    phantom = check_phantom_mode(phantom)
    k_forced = _forced_k(records, force_k)
    names = resolve_scores(scores, records)
    _require_alpha(records, phantom=phantom)
    out = {name: np.full(len(records), np.nan) for name in names}
    for k in np.unique(records.k):
        group = records.k == k
        side = _side(records, group, phantom, names, extra=int(k_forced[0] - k))
        values, _ = phantom_scores(
            side["alpha"],
            int(k_forced[0] - k),
            phantom=phantom,
            prior_weight=records.prior_weight,
            scores=names,
            phantom_alpha=side["phantom"],
            logits=side["logits"],
            phantom_logits=side["phantom_logits"],
        )
        for name in names:
            out[name][group] = values[name]
    return out


def _require_alpha(*records: Records, phantom: str = "zero") -> float:
    """The shared prior weight of the records; ValueError for unequal lambdas, and for softmax records
    unless ``phantom="model"`` (the one mode defined without evidence: renormalised probabilities), and
    for records of several members (their phantom options' logits are not kept per member)."""
    with_members = [r.task for r in records if r.has_members]
    if with_members:
        raise InvalidValueError(
            f"the K sweep appends options to one model's prediction, but the records of {with_members} were scored by "
            "several members (ensemble or MC dropout): the phantom options' logits are not kept per member, so no "
            "member's appended option can be given; compare K-matched sets with `ood` instead, or sweep one member's "
            "own records (evaluate it alone: peft=DIR/member_0)"
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


def _side(records: Records, keep, phantom: str, names, extra=0) -> dict:
    """``ksweep``'s inputs for one side: alpha (for softmax records ``exp(z - max z)``, whose ``alpha / S``
    is the softmax, so appended ``exp(z_phantom - max z)`` renormalises it), logits, and in model mode
    the phantom options' concentrations by the records' head and their logits."""
    k = records.k[keep]
    z = records.logits[keep]
    needs_logits = any(SCORES[n].needs_logits for n in names)
    out = {"logits": z if needs_logits else None, "phantom": None, "phantom_logits": None}
    zp = records.phantom_logits[keep] if records.has_phantoms else np.empty((k.size, 0))
    if records.has_alpha:
        out["alpha"] = records.alpha[keep]
    else:
        shift = np.fmax(np.nanmax(z, axis=1), np.nanmax(np.where(np.isnan(zp), -np.inf, zp), axis=1, initial=-np.inf))
        out["alpha"] = np.exp(z - shift[:, None])
    if phantom != "model":
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


def ksweep_rows(
    id_records: Records,
    ood_records: Records,
    *,
    max_extra: int = 4,
    scores: Iterable[str] | None = None,
    k_policy: str = "assert",
    phantom: str = "zero",
) -> list[dict]:
    """McNamara (2026), Table 1, on saved records: AUROC/AUPR-In as phantom options are appended.

    ``phantom`` (:data:`~lm_eval_evidential.metrics.cardinality.PHANTOM_MODES`) says how: ``zero``
    (zero-evidence options, the paper's Table 1), ``model`` (the model's own next labels, " E"..,
    from the records' phantom logits: for EDL their evidence by the head, for softmax records the
    probabilities renormalised over the grown options; IB-EDL refused, its phantom sigma is not
    kept) or ``count`` (only vacuity's K grows).

    The K check runs first under ``k_policy``; the sweep then runs on the kept examples'
    fixed alphas (:func:`lm_eval_evidential.metrics.cardinality.ksweep`): ``x = 0..max_extra`` classes
    with ``alpha = lambda`` appended to the OOD side only (``condition="ood_only"``) and to
    both sides (``"matched"``). Rows have the keys of :data:`KSWEEP_ROW_KEYS`; deltas are
    against ``x = 0`` and ``sensitivity`` is the score's
    :func:`~lm_eval_evidential.metrics.cardinality.classify_k_sensitivity` label ("K-sensitive" or
    "K-invariant"), the same on every row of that score. ``scores`` defaults to
    ``OOD_DEFAULT_SCORES``. Needs evidential records with one prior weight, from one producer
    (unless checked together before).
    """
    check_same_producer([id_records, ood_records])
    check = k_check(id_records, ood_records, k_policy)
    phantom = check_phantom_mode(phantom)
    lam = _require_alpha(id_records, ood_records, phantom=phantom)
    names = resolve_scores(scores, id_records, ood_records, default=OOD_DEFAULT_SCORES)
    a = _side(id_records, check.keep_id, phantom, names, extra=max_extra)
    b = _side(ood_records, check.keep_ood, phantom, names, extra=max_extra)
    rows = ksweep(
        a["alpha"],
        b["alpha"],
        prior_weight=lam,
        max_extra=max_extra,
        scores=names,
        phantom=phantom,
        phantom_id=a["phantom"],
        phantom_ood=b["phantom"],
        logits_id=a["logits"],
        logits_ood=b["logits"],
        phantom_logits_id=a["phantom_logits"],
        phantom_logits_ood=b["phantom_logits"],
    )
    if not (id_records.has_alpha and ood_records.has_alpha):  # softmax: no evidence to compare
        undefined = ("phantom_evidence_id", "phantom_evidence_ood", "invariant_evidence_id", "invariant_evidence_ood")
        rows = [{**row, **dict.fromkeys(undefined, float("nan"))} for row in rows]
    labels = classify_k_sensitivity(rows)
    return [{key: {**row, "sensitivity": labels[row["score"]]}[key] for key in KSWEEP_ROW_KEYS} for row in rows]


def ksweep_delong(
    id_records: Records,
    ood_records: Records,
    *,
    extra: int = 1,
    score: str = "reciprocal_vacuity",
    k_policy: str = "assert",
    phantom: str = "zero",
) -> dict:
    """DeLong test of the OOD-only K inflation: AUROC with ``extra`` phantom OOD options vs none.

    Both AUROCs are on the same examples (only the OOD side gains ``extra`` options, appended
    as ``phantom`` says: zero evidence, the model's own, or vacuity's count), so they are
    correlated and DeLong's paired test applies. Returns ``{id_task, ood_task, score,
    condition: "ood_only", extra, phantom, auroc_expanded, auroc_base, diff, z, p_value}`` with
    ``diff = auroc_expanded - auroc_base``; ``z``/``p_value`` are NaN (with a warning) when the
    variance of the difference is 0. The sampling noise the test measures is that of the
    evaluation set; the shift itself is a deterministic artefact of K. Records of different
    producers are refused unless checked together before.
    """
    check_same_producer([id_records, ood_records])
    check = k_check(id_records, ood_records, k_policy)
    phantom = check_phantom_mode(phantom)
    lam = _require_alpha(id_records, ood_records, phantom=phantom)
    (score,) = check_score_names([score])
    a = _side(id_records, check.keep_id, phantom, [score])
    b = _side(ood_records, check.keep_ood, phantom, [score], extra=extra)
    common = {"phantom": phantom, "prior_weight": lam, "scores": [score]}
    s_id = phantom_scores(a["alpha"], 0, logits=a["logits"], **common)[0][score]
    s_ood = phantom_scores(b["alpha"], 0, logits=b["logits"], **common)[0][score]
    s_grown = phantom_scores(
        b["alpha"], extra, phantom_alpha=b["phantom"], logits=b["logits"], phantom_logits=b["phantom_logits"], **common
    )[0][score]
    y = np.concatenate((np.ones(s_id.size, dtype=bool), np.zeros(s_ood.size, dtype=bool)))
    auc_x, auc_0, diff, z, p = delong_test(y, np.concatenate((s_id, s_grown)), np.concatenate((s_id, s_ood)))
    return {
        "id_task": id_records.task,
        "ood_task": ood_records.task,
        "score": score,
        "condition": "ood_only",
        "extra": int(extra),
        "phantom": phantom,
        "auroc_expanded": auc_x,
        "auroc_base": auc_0,
        "diff": diff,
        "z": z,
        "p_value": p,
    }


def _signed(value: float, digits: int = 4) -> str:
    """``+0.3628``; a value that rounds to zero prints as ``+0.0000``, never ``-0.0000``."""
    return f"{value if round(value, digits) else 0.0:+.{digits}f}"


def phantom_evidence_line(rows: list[dict]) -> str | None:
    """Proposition 1 on the sweep's first OOD-only step: the appended options' mean evidence against
    the evidence S_K/K - lambda that would leave vacuity unchanged (None when undefined: softmax)."""
    first = next((r for r in rows if r["condition"] == "ood_only" and r["extra"] == 1), None)
    if first is None or first["invariant_evidence_ood"] != first["invariant_evidence_ood"]:
        return None
    e, inv = first["phantom_evidence_ood"], first["invariant_evidence_ood"]
    side = "below" if e < inv else "above" if e > inv else "at"
    effect = {"below": "raises OOD vacuity", "above": "lowers OOD vacuity", "at": "leaves vacuity unchanged"}[side]
    return (
        f"Proposition 1 (McNamara 2026): an appended option leaves vacuity unchanged when its evidence is "
        f"S_K/K - lambda, on average {inv:.4g} on the OOD side; the --phantom {first['phantom']} option has {e:.4g} "
        f"(x=1), {side} it, so it {effect}"
    )


def sensitivity_lines(rows: list[dict], digits: int = 4) -> list[str]:
    """One line per score: its label and the largest AUROC/AUPR-In move under OOD-only expansion (``digits``
    decimals: the CLI's tables have 4, the report's 3)."""
    lines = []
    for name in dict.fromkeys(r["score"] for r in rows):
        mine = [r for r in rows if r["score"] == name]
        if mine[0]["sensitivity"] == "K-invariant":
            lines.append(f"{name}: K-invariant on this data")
            continue
        ood = [r for r in mine if r["condition"] == "ood_only"] or mine
        worst = max(ood, key=lambda r: abs(r["delta_auroc"]))
        matched = [r for r in mine if r["condition"] == "matched"]
        still = all(r["delta_auroc"] == 0.0 and r["delta_aupr"] == 0.0 for r in matched)
        x = worst["extra"]
        lines.append(
            f"{name}: K-sensitive ({x} {phantom_options(worst.get('phantom', 'zero'), x)} appended "
            "to the OOD side only "
            f"move{'s' if x == 1 else ''} AUROC by {_signed(worst['delta_auroc'], digits)}, AUPR-In by "
            f"{_signed(worst['delta_aupr'], digits)}; appended to both sides, "
            + ("they leave it exactly unchanged)" if still else "they move it too)")
        )
    return lines
