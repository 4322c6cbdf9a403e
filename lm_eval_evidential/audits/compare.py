"""Methods side by side: one run folder per method (EDL, IB-EDL, softmax, ensembles, MC dropout, Laplace-LoRA).

The table an EDL paper puts its method in (Li et al. 2025, Tables 1-3): for each method, the ID
task's accuracy, ECE, NLL and Brier score with percentile-bootstrap intervals (questions resampled
with replacement, scipy.stats.bootstrap), and for each OOD task and score the AUROC (DeLong
interval) and AUPR-In (stratified bootstrap interval) of :func:`~lm_eval_evidential.audits.ood.ood_rows`
— the numbers of ``calibration`` and ``ood`` on the same records, one computation each.

Every OOD row says its protocol:

- ``K-matched``: every ID and OOD question has one K;
- ``K-matched subset``: the OOD task mixes K (ARC: 3-5 options), so only its questions with the ID
  task's K are scored (``k_policy="restrict"``; the row says how many were dropped);
- ``K-MISMATCHED``: the papers' protocol (e.g. OBQA, K = 4, against CSQA, K = 5), computed only on
  request (``k_mismatched=True``, ``--k-mismatched``): its AUROC moves with K itself (McNamara 2026,
  Proposition 1), so it is marked, never a default; without the request such a pair is listed among
  the refusals with the remedy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from lm_eval_evidential.audits.ood import OODRow, k_check, ood_rows, resolve_scores
from lm_eval_evidential.audits.table import AuditRow, column, k_column, row_with
from lm_eval_evidential.metrics.calibration import brier, ece, nll
from lm_eval_evidential.records import Records
from lm_eval_evidential.records.orders import refuses_permuted

__all__ = [
    "refuse_one_run_twice",
    "refuse_other_questions",
    "MethodCalibrationRow",
    "MethodOODRow",
    "COMPARE_SCORES",
    "CALIBRATION_COLUMNS",
    "OOD_COLUMNS",
    "compare_methods",
    "method_kind",
]

#: The scores compared by default, where a method's records give them: max-prob and entropy for every
#: method, mutual information (BALD) for members, reciprocal vacuity for Dirichlet heads.
COMPARE_SCORES = ("max_prob", "neg_entropy", "neg_mutual_information", "reciprocal_vacuity")


@dataclass(frozen=True, eq=False)
class MethodCalibrationRow(AuditRow):
    """One method's accuracy and calibration on the ID task, with percentile-bootstrap intervals."""

    method: str = column("method")
    kind: str = column("kind")
    task: str = column("task")
    k: int | list[int] = k_column()
    n: int = column("n")
    acc: float = column("accuracy")
    acc_ci: list[float] = column("accuracy CI", "interval")
    ece: float = column("ECE")
    ece_ci: list[float] = column("ECE CI", "interval")
    nll: float = column("NLL")
    nll_ci: list[float] = column("NLL CI", "interval")
    brier: float = column("Brier")
    brier_ci: list[float] = column("Brier CI", "interval")


#: One method's OOD row: the method and the protocol (K-matched, its subset, or K-MISMATCHED) before the
#: :class:`~lm_eval_evidential.audits.ood.OODRow` it labels, whose columns it keeps as declared there.
MethodOODRow = row_with(
    "MethodOODRow", OODRow, __name__, before=[("method", str, column("method")), ("protocol", str, column("protocol"))]
)

#: The printed columns (every key is in --json).
CALIBRATION_COLUMNS = MethodCalibrationRow.columns()
OOD_COLUMNS = MethodOODRow.columns(
    "method",
    "ood_task",
    "protocol",
    "k_id",
    "k_ood",
    "n_ood",
    "score",
    "auroc",
    "auroc_ci",
    "aupr_in",
    "aupr_in_ci",
    "aupr_baseline",
)


def method_kind(records: Records) -> str:
    """What produced ``records``, in words: the head's method and, with members, their source and number."""
    meta = records.meta or {}
    members = meta.get("members") or {}
    method = str(meta.get("method") or "?")
    if not members:
        return method
    count = len(members.get("names") or ()) or members.get("samples")
    return f"{members.get('source')} ×{count} ({method})"


def _calibration(records: Records, n_bins: int, n_boot: int, level: float, seed: int) -> dict:
    """Accuracy, ECE, NLL and Brier of ``records`` with percentile-bootstrap intervals over its questions."""
    import inspect

    from scipy.stats import bootstrap

    probs, gold, conf, correct = records.probs, records.gold, records.max_prob, records.correct.astype(bool)
    seeded = "rng" if "rng" in inspect.signature(bootstrap).parameters else "random_state"  # scipy < 1.15
    metrics = {
        "acc": lambda i: float(correct[i].mean()),
        "ece": lambda i: ece(conf[i], correct[i], n_bins),
        "nll": lambda i: nll(probs[i], gold[i]),
        "brier": lambda i: brier(probs[i], gold[i]),
    }
    index = np.arange(len(records))
    row = {}
    for name, fn in metrics.items():
        row[name] = fn(index)
        if n_boot and len(records) > 1:
            res = bootstrap(
                (index,),
                fn,
                n_resamples=n_boot,
                confidence_level=level,
                method="percentile",
                vectorized=False,
                **{seeded: np.random.default_rng(seed)},
            )
            row[f"{name}_ci"] = [float(res.confidence_interval.low), float(res.confidence_interval.high)]
        else:
            row[f"{name}_ci"] = [float("nan"), float("nan")]
    return row


def refuse_one_run_twice(runs: Mapping[str, Mapping[str, Records]], id_task: str) -> None:
    """Two methods whose ID records are the same predictions (one folder given twice, or a copy of it) are one
    method compared with itself: every row would tie, and the takeaway would name a leader among equals."""
    import hashlib

    from lm_eval_evidential.errors import SameRunTwiceError

    seen: dict[str, str] = {}
    for name, by_task in runs.items():
        r = by_task[id_task]
        digest = hashlib.sha256()
        for part in (r.doc_id, r.logits, r.alpha if r.has_alpha else None):
            if part is not None:
                digest.update(np.ascontiguousarray(part).tobytes())
        key = digest.hexdigest()
        if key in seen:
            raise SameRunTwiceError(
                f"methods {seen[key]!r} and {name!r} hold the same predictions on {id_task} (the same run given twice, "
                f"or a copy of it: {by_task[id_task].path or 'records'}); comparing a method with itself ties every "
                "row — pass each method's own output folder once"
            )
        seen[key] = name


def refuse_other_questions(runs: Mapping[str, Mapping[str, Records]], tasks: Sequence[str]) -> None:
    """Methods side by side must answer the same questions of each task: a run evaluated with another ``--limit``
    or on another subset would differ by its questions as well as by its method, and the takeaway would name a
    leader for that difference."""
    from lm_eval_evidential.errors import QuestionMismatchError

    for task in tasks:
        first, *others = ((name, by_task[task]) for name, by_task in runs.items() if task in by_task)
        ids = np.unique(first[1].doc_id)
        for name, records in others:
            theirs = np.unique(records.doc_id)
            if len(theirs) == len(ids) and (theirs == ids).all():
                continue
            only = np.setdiff1d(ids, theirs)
            holder, doc = (first[0], only[0]) if only.size else (name, np.setdiff1d(theirs, ids)[0])
            raise QuestionMismatchError(
                f"{task}: methods {first[0]!r} and {name!r} were evaluated on different questions ({first[0]}: "
                f"{len(ids)}, {name}: {len(theirs)}; doc_id {int(doc)} only in {holder}'s records): side by side "
                "their numbers would differ by the questions as well as by the method — evaluate every method on "
                "the same questions (the same task data and --limit)"
            )


@refuses_permuted
def compare_methods(
    runs: Mapping[str, Mapping[str, Records]],
    id_task: str,
    ood_tasks: Sequence[str],
    *,
    scores: Sequence[str] | None = None,
    k_mismatched: bool = False,
    n_bins: int = 15,
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
    remedy: str = "--k-mismatched",
) -> dict:
    """``{"calibration": rows, "ood": rows, "refused": [(method, ood_task, reason)]}`` for ``runs``
    (``{method name: {task: Records}}``, each method's records from one run).

    ``scores``: the scores of the OOD rows (default: those of :data:`COMPARE_SCORES` each method's
    records give). A K-mismatched pair is refused (listed with the remedy) unless ``k_mismatched``,
    which computes it marked ``K-MISMATCHED``; a mixed-K OOD task is also scored on its questions with
    the ID task's K (``K-matched subset``). ``remedy``: the option that computes a refused pair marked, as the
    refusal names it (``compare``'s ``--k-mismatched``; the report's ``--k-policy …,report``).
    """
    refuse_one_run_twice(runs, id_task)
    refuse_other_questions(runs, [id_task, *ood_tasks])
    calibration, ood, refused = [], [], []
    for name, by_task in runs.items():
        id_records = by_task[id_task]
        kind = method_kind(id_records)
        k = np.unique(id_records.k)
        calibration.append(
            MethodCalibrationRow(
                method=name,
                kind=kind,
                task=id_task,
                k=int(k[0]) if k.size == 1 else sorted(int(x) for x in k),
                n=len(id_records),
                **_calibration(id_records, n_bins, n_boot, level, seed),
            )
        )
        for task in ood_tasks:
            ood_records = by_task[task]
            names = resolve_scores(scores, id_records, ood_records, default=None if scores else COMPARE_SCORES)
            check = k_check(id_records, ood_records, "report")
            policies = []
            if check.matched:
                policies.append(("assert", "K-matched"))
            else:
                same_k = np.isin(ood_records.k, id_records.k) if np.unique(id_records.k).size == 1 else None
                if same_k is not None and same_k.any():
                    dropped = int((~same_k).sum())
                    policies.append(("restrict", f"K-matched subset ({dropped} OOD questions of another K dropped)"))
                if k_mismatched:
                    policies.append(("report", "K-MISMATCHED (the papers' protocol; confounded by K)"))
                else:
                    refused.append(
                        (
                            name,
                            task,
                            f"K_ID = {sorted(set(id_records.k.tolist()))} vs "
                            f"K_OOD = {sorted(set(ood_records.k.tolist()))}: "
                            f"not compared (the score moves with K itself); {remedy} computes it marked "
                            "K-MISMATCHED, or compare a K-matched control (e.g. csqa4_edl for csqa_edl)",
                        )
                    )
            for policy, protocol in policies:
                rows = ood_rows(
                    id_records, ood_records, scores=names, k_policy=policy, n_boot=n_boot, seed=seed, level=level
                )
                for r in rows:
                    ood.append(MethodOODRow(method=name, protocol=protocol, **r))
    return {"calibration": calibration, "ood": ood, "refused": refused}
