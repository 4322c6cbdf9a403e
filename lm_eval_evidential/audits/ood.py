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

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from lm_eval_evidential.metrics.cardinality import (
    EXTRA,
    PHANTOM,
    POLICIES,
    CardinalityMismatchError,
    check_cardinality,
    classify_k_sensitivity,
    ksweep,
    phantom_options,
    phantom_scores,
)
from lm_eval_evidential.metrics.detection import (
    aupr_in_ci,
    delong_test,
    detection_report,
)
from lm_eval_evidential.metrics.scores import (
    OOD_DEFAULT_SCORES,
    check_score_names,
)
from lm_eval_evidential.params import validate_params
from lm_eval_evidential.records import Records, check_same_producer
from lm_eval_evidential.records.orders import refuses_permuted

from ._common import record_scores

# Each side's scores, the K check and subsets live in .ood_scores; the public ones stay importable from here.
from .ood_scores import (
    forced_k_of,
    forced_k_scores,
    k_check,
    k_summary,
    ksweep_side,
    resolve_scores,
    shared_prior_weight,
    subset_records,
)
from .table import AuditRow, column, k_column, matched_column

__all__ = [
    "POLICIES",
    "CardinalityMismatchError",
    "OODRow",
    "OOD_ROW_KEYS",
    "KSweepRow",
    "KSWEEP_ROW_KEYS",
    "DeLongTest",
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


@dataclass(frozen=True, eq=False)
class OODRow(AuditRow):
    """One score's OOD detection, ID task (positive) against OOD task (:func:`ood_rows`); each field is a column."""

    id_task: str = column("ID task")
    ood_task: str = column("OOD task")
    score: str = column("score")
    k_id: int | dict[int, int] = k_column("K_ID")
    k_ood: int | dict[int, int] = k_column("K_OOD")
    n_id: int = column("n_ID")
    n_ood: int = column("n_OOD")
    n_dropped: dict[str, int] = column("dropped ID/OOD", "dropped")
    matched: bool = matched_column()
    auroc: float = column("AUROC")
    auroc_ci: list[float] = column("95% CI (DeLong)", "interval")
    aupr_in: float = column("AUPR-In")
    aupr_in_ci: list[float] = column("95% CI (bootstrap)", "interval")
    aupr_out: float = column("AUPR-Out")
    fpr95: float = column("FPR95")
    aupr_baseline: float = column("AUPR base")
    forced_k: int | None = column("forced K")
    phantom: str | None = column("phantom")


OOD_ROW_KEYS = OODRow.field_names()


@dataclass(frozen=True, eq=False)
class KSweepRow(AuditRow):
    """One step of the K sweep (:func:`ksweep_rows`): a score's AUROC/AUPR-In with ``extra`` phantom options
    appended to one side or both, its move from ``extra = 0`` and the appended options' mean evidence."""

    condition: str = column("condition", "condition")
    extra: int = column("x")
    k_id: int | dict[int, int] = k_column("K_ID")
    k_ood: int | dict[int, int] = k_column("K_OOD")
    score: str = column("score")
    auroc: float = column("AUROC")
    aupr_in: float = column("AUPR-In")
    delta_auroc: float = column("ΔAUROC", "signed")
    delta_aupr: float = column("ΔAUPR", "signed")
    sensitivity: str = column("K sensitivity")
    phantom: str = column("phantom")
    phantom_evidence_id: float = column("phantom e (ID)")
    phantom_evidence_ood: float = column("phantom e (OOD)")
    invariant_evidence_id: float = column("S_K/K − λ (ID)")
    invariant_evidence_ood: float = column("S_K/K − λ (OOD)")


KSWEEP_ROW_KEYS = KSweepRow.field_names()


@dataclass(frozen=True, eq=False)
class DeLongTest(AuditRow):
    """:func:`ksweep_delong`'s paired test of the OOD-only K inflation (``diff = auroc_expanded - auroc_base``)."""

    id_task: str = column("ID task")
    ood_task: str = column("OOD task")
    score: str = column("score")
    condition: str = column("condition", "condition")
    extra: int = column("x")
    phantom: str = column("phantom")
    auroc_expanded: float = column("AUROC (x phantoms)")
    auroc_base: float = column("AUROC (x = 0)")
    diff: float = column("ΔAUROC", "signed")
    z: float = column("z")
    p_value: float = column("p", "p")


@refuses_permuted
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
) -> list[OODRow]:
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
    Each row is an :class:`OODRow` (keys :data:`OOD_ROW_KEYS`, read as a dict):

    - ``k_id``/``k_ood``: the single K of the evaluated examples, or their ``{K: count}``
      histogram when mixed; ``n_id``/``n_ood``: examples evaluated; ``n_dropped``:
      ``{"id": a, "ood": b}`` examples dropped by ``restrict``; ``matched``: whether every
      evaluated example has the same K (false rows compare different K and are confounded);
    - ``auroc`` with ``auroc_ci`` = ``[lo, hi]`` (DeLong, at ``level``); ``aupr_in`` (ID
      positive) with ``aupr_in_ci`` from the stratified percentile bootstrap (``n_boot``
      replicates, ``seed``; above 20,000 examples its large-sample limit, the infinitesimal
      jackknife: :func:`~lm_eval_evidential.metrics.detection.aupr_in_ci`; ``n_boot=0`` skips it
      and gives ``[nan, nan]``); ``aupr_out``
      (OOD positive); ``fpr95`` (OOD accepted at 95% ID recall; lower is better);
      ``aupr_baseline`` (the ID share, AUPR-In at chance).

    ``scores`` defaults to every registered score computable from both sides. Records of
    different producers raise ``FingerprintMismatchError`` unless checked together before.
    """
    check_same_producer([id_records, ood_records])
    k_ood_all = ood_records.k if force_k is None else forced_k_of(ood_records, force_k)
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
    y = np.concatenate((np.ones(k_id.size, dtype=bool), np.zeros(k_ood.size, dtype=bool)))
    common = {
        "id_task": id_records.task,
        "ood_task": ood_records.task,
        "k_id": k_summary(k_id),
        "k_ood": k_summary(k_ood),
        "n_id": int(k_id.size),
        "n_ood": int(k_ood.size),
        "n_dropped": {"id": int(check.n_dropped_id), "ood": int(check.n_dropped_ood)},
        "matched": bool(check.matched),
        "forced_k": None if force_k is None else int(force_k),
        "phantom": None if force_k is None else phantom,
    }
    rows = []
    for done, name in enumerate(names):
        if progress is not None:
            progress(done, len(names), name)
        s = np.concatenate((s_id[name], s_ood[name]))
        rows.append(OODRow(**common, score=name, **_detection(y, s, n_boot=n_boot, level=level, seed=seed)))
    return rows


def _detection(y: np.ndarray, s: np.ndarray, *, n_boot: int, level: float, seed: int) -> dict:
    """The detection columns of one score: AUROC with its DeLong interval, AUPR-In with its bootstrap
    interval (:func:`~lm_eval_evidential.metrics.detection.aupr_in_ci`: the bootstrap, or its large-sample limit
    on big data; ``n_boot = 0`` gives ``[nan, nan]``), AUPR-Out, FPR95,
    the AUPR-In baseline."""
    rep = detection_report(y, s, level=level)
    _, lo, hi = aupr_in_ci(y, s, n_boot=n_boot, level=level, seed=seed)
    return {
        "auroc": rep["auroc"],
        "auroc_ci": [rep["auroc_lo"], rep["auroc_hi"]],
        "aupr_in": rep["aupr_in"],
        "aupr_in_ci": [lo, hi],
        "aupr_out": rep["aupr_out"],
        "fpr95": rep["fpr_at_tpr"],
        "aupr_baseline": rep["aupr_baseline"],
    }


@refuses_permuted
@validate_params({"phantom": PHANTOM})
def ksweep_rows(
    id_records: Records,
    ood_records: Records,
    *,
    max_extra: int = 4,
    scores: Iterable[str] | None = None,
    k_policy: str = "assert",
    phantom: str = "zero",
) -> list[KSweepRow]:
    """McNamara (2026), Table 1, on saved records: AUROC/AUPR-In as phantom options are appended.

    ``phantom`` (:data:`~lm_eval_evidential.metrics.cardinality.PHANTOM_MODES`) says how: ``zero``
    (zero-evidence options, the paper's Table 1), ``model`` (the model's own next labels, " E"..,
    from the records' phantom logits: for EDL their evidence by the head, for softmax records the
    probabilities renormalised over the grown options; IB-EDL refused, its phantom sigma is not
    kept) or ``count`` (only vacuity's K grows).

    The K check runs first under ``k_policy``; the sweep then runs on the kept examples'
    fixed alphas (:func:`lm_eval_evidential.metrics.cardinality.ksweep`): ``x = 0..max_extra`` classes
    with ``alpha = lambda`` appended to the OOD side only (``condition="ood_only"``) and to
    both sides (``"matched"``). Rows are :class:`KSweepRow` (keys :data:`KSWEEP_ROW_KEYS`); deltas are
    against ``x = 0`` and ``sensitivity`` is the score's
    :func:`~lm_eval_evidential.metrics.cardinality.classify_k_sensitivity` label ("K-sensitive" or
    "K-invariant"), the same on every row of that score. ``scores`` defaults to
    ``OOD_DEFAULT_SCORES``. Needs evidential records with one prior weight, from one producer
    (unless checked together before).
    """
    check_same_producer([id_records, ood_records])
    check = k_check(id_records, ood_records, k_policy)
    lam = shared_prior_weight(id_records, ood_records, phantom=phantom)
    # records of several members: their own epistemic score, the mutual information, is swept too
    epistemic = ("neg_mutual_information",) if id_records.has_members and ood_records.has_members else ()
    names = resolve_scores(scores, id_records, ood_records, default=OOD_DEFAULT_SCORES + epistemic)
    a = ksweep_side(id_records, check.keep_id, phantom, names, extra=max_extra)
    b = ksweep_side(ood_records, check.keep_ood, phantom, names, extra=max_extra)
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
        members_id=a["members"],
        members_ood=b["members"],
    )
    if not (id_records.has_alpha and ood_records.has_alpha):  # softmax: no evidence to compare
        undefined = ("phantom_evidence_id", "phantom_evidence_ood", "invariant_evidence_id", "invariant_evidence_ood")
        rows = [{**row, **dict.fromkeys(undefined, float("nan"))} for row in rows]
    labels = classify_k_sensitivity(rows)
    measured = [key for key in KSWEEP_ROW_KEYS if key != "sensitivity"]
    return [KSweepRow(**{key: row[key] for key in measured}, sensitivity=labels[row["score"]]) for row in rows]


@refuses_permuted
@validate_params({"phantom": PHANTOM, "extra": EXTRA})
def ksweep_delong(
    id_records: Records,
    ood_records: Records,
    *,
    extra: int = 1,
    score: str | None = None,
    k_policy: str = "assert",
    phantom: str = "zero",
) -> DeLongTest:
    """DeLong test of the OOD-only K inflation: AUROC with ``extra`` phantom OOD options vs none.

    Both AUROCs are on the same examples (only the OOD side gains ``extra`` options, appended
    as ``phantom`` says: zero evidence, the model's own, or vacuity's count), so they are
    correlated and DeLong's paired test applies. Returns ``{id_task, ood_task, score,
    condition: "ood_only", extra, phantom, auroc_expanded, auroc_base, diff, z, p_value}`` with
    ``diff = auroc_expanded - auroc_base``; ``z``/``p_value`` are NaN (with a warning) when the
    variance of the difference is 0. The sampling noise the test measures is that of the
    evaluation set; the shift itself is a deterministic artefact of K. Records of different
    producers are refused unless checked together before. ``score`` defaults to
    ``reciprocal_vacuity``, and for softmax members (no Dirichlet) to their epistemic score,
    ``neg_mutual_information``.
    """
    check_same_producer([id_records, ood_records])
    check = k_check(id_records, ood_records, k_policy)
    lam = shared_prior_weight(id_records, ood_records, phantom=phantom)
    if score is None:
        score = (
            "neg_mutual_information" if id_records.has_members and not id_records.has_alpha else "reciprocal_vacuity"
        )
    (score,) = check_score_names([score])
    a = ksweep_side(id_records, check.keep_id, phantom, [score])
    b = ksweep_side(ood_records, check.keep_ood, phantom, [score], extra=extra)
    common = {"phantom": phantom, "prior_weight": lam, "scores": [score]}
    s_id = phantom_scores(a["alpha"], 0, logits=a["logits"], members=a["members"], **common)[0][score]
    s_ood = phantom_scores(b["alpha"], 0, logits=b["logits"], members=b["members"], **common)[0][score]
    grown = {"phantom_alpha": b["phantom"], "phantom_logits": b["phantom_logits"], "members": b["members"]}
    s_grown = phantom_scores(b["alpha"], extra, logits=b["logits"], **grown, **common)[0][score]
    y = np.concatenate((np.ones(s_id.size, dtype=bool), np.zeros(s_ood.size, dtype=bool)))
    auc_x, auc_0, diff, z, p = delong_test(y, np.concatenate((s_id, s_grown)), np.concatenate((s_id, s_ood)))
    return DeLongTest(
        id_task=id_records.task,
        ood_task=ood_records.task,
        score=score,
        condition="ood_only",
        extra=int(extra),
        phantom=phantom,
        auroc_expanded=auc_x,
        auroc_base=auc_0,
        diff=diff,
        z=z,
        p_value=p,
    )


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
