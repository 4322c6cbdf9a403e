"""OpenOOD-style OOD tables: named groups of OOD sets (near, far), a mean row per group, ID accuracy.

OpenOOD v1.5's evaluator (``openood/evaluation_api/evaluator.py``) prints, for one ID dataset,
one row per OOD dataset and a mean row per group (``nearood``, ``farood``) with FPR@95, AUROC,
AUPR-In, AUPR-Out and the ID accuracy, times 100. :func:`group_rows` gives that layout per score,
with this package's K rules:

- every OOD set goes through the K check against the ID records under ``k_policy`` (the check of
  :func:`lm_eval_evidential.audits.ood.k_check`); a refused set has no row, and its group's mean
  row says so;
- a mean row averages only the K-matched sets of its group (``matched: true``); a set compared
  under ``k_policy=report`` across different K keeps its own row, marked, and stays out of the
  mean, which says so.

FPR@95 has two directions in the literature (OpenOOD issue #308): OpenOOD v1.5 takes OOD as the
positive class (the share of ID questions flagged as OOD when 95% of the OOD questions are
flagged), ODIN (Liang et al. 2018) and this package's ``ood`` table take ID as positive (the share
of OOD questions accepted as ID when 95% of the ID questions are accepted). ``fpr95`` selects one
(:data:`FPR95_DIRECTIONS`, default ``openood``) and every row names it (``fpr95_positive``).
AUROC is the same either way; AUPR-In takes ID as positive, AUPR-Out OOD, both step-wise average
precision (:mod:`lm_eval_evidential.metrics.detection`), where OpenOOD integrates the PR curve by
trapezoids (``sklearn.metrics.auc(recall, precision)``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from lm_eval_evidential.metrics.cardinality import CardinalityMismatchError
from lm_eval_evidential.metrics.detection import detection_report, fpr_at_95_tpr
from lm_eval_evidential.params import Options, Param, validate_params
from lm_eval_evidential.records import Records, check_same_producer
from lm_eval_evidential.records.orders import refuses_permuted

from ._common import collect, finish_row, record_scores
from .ood import k_check, k_summary, resolve_scores
from .table import AuditRow, column, k_column, matched_column, reason_field

__all__ = ["GroupRow", "FPR95", "FPR95_DIRECTIONS", "GROUP_ROW_KEYS", "METRIC_KEYS", "group_rows"]

#: What FPR@95 measures under each convention (said in every row and above every table).
FPR95_DIRECTIONS = {
    "openood": "OOD positive: share of ID questions flagged as OOD when 95% of OOD questions are flagged "
    "(OpenOOD v1.5, openood/evaluators/metrics.py)",
    "odin": "ID positive: share of OOD questions accepted as ID when 95% of ID questions are accepted "
    "(ODIN, Liang et al. 2018; the ood table's fpr95)",
}
#: ``fpr95``: which convention FPR@95 follows (declared once: the report takes it too).
FPR95 = Param(Options(tuple(FPR95_DIRECTIONS)), noun="fpr95 direction")
#: The numbers a mean row averages (and ``percent`` scales).
METRIC_KEYS = ("id_acc", "fpr95", "auroc", "aupr_in", "aupr_out")


@dataclass(frozen=True, eq=False)
class GroupRow(AuditRow):
    """One OOD set of a group, or the group's mean (``set`` = the group's name), for one score (:func:`group_rows`):
    the OpenOOD layout, numbers scaled by ``scale`` (100 under ``percent``)."""

    group: str = column("group")
    set: str = column("set")
    score: str = column("score")
    k_id: int | dict | None = k_column("K_ID")
    k_ood: int | dict | None = k_column("K_OOD")
    n_id: int = column("n ID")
    n_ood: int = column("n OOD")
    n_sets: int = column("sets")
    matched: bool = matched_column()
    id_acc: float = column("ID acc")
    fpr95: float = column("FPR@95")
    auroc: float = column("AUROC")
    aupr_in: float = column("AUPR-In")
    aupr_out: float = column("AUPR-Out")
    fpr95_positive: str = column("FPR@95 positive")
    scale: float = column("scale")
    reason: str | None = reason_field()


GROUP_ROW_KEYS = GroupRow.field_names()[:-1]  # ``reason`` only where a number is NaN or a mean leaves sets out


def _set_metrics(y: np.ndarray, s: np.ndarray, fpr95: str) -> tuple[dict, list[str]]:
    reasons: list[str] = []
    rep = collect(reasons, detection_report, y, s)
    fpr = rep["fpr_at_tpr"] if fpr95 == "odin" else collect(reasons, fpr_at_95_tpr, ~y, -s)
    return {"fpr95": fpr, "auroc": rep["auroc"], "aupr_in": rep["aupr_in"], "aupr_out": rep["aupr_out"]}, reasons


@refuses_permuted
@validate_params({"fpr95": FPR95})
def group_rows(
    id_records: Records,
    groups: Mapping[str, Sequence[Records]],
    *,
    scores: Iterable[str] | None = None,
    k_policy: str = "assert",
    fpr95: str = "openood",
    percent: bool = False,
) -> tuple[list[GroupRow], list[tuple[str, str, CardinalityMismatchError]]]:
    """The OpenOOD layout: ``(rows, refusals)``.

    Per score, each group's set rows in order, then the group's mean row (``set`` = the group's
    name, e.g. ``near``; ``n_sets`` = how many sets it averages). Each row has the keys of
    :data:`GROUP_ROW_KEYS` (+ ``reason`` where a number is NaN or a mean leaves sets out);
    ``percent`` multiplies :data:`METRIC_KEYS` by 100 (``scale`` says 100 or 1). ``refusals``:
    ``(id_task, ood_task, CardinalityMismatchError)`` for each set the K check refused. ID =
    positive for AUROC and AUPR-In, higher score = more in-distribution.
    """
    every = [r for sets in groups.values() for r in sets]
    check_same_producer([id_records, *every])
    names = resolve_scores(scores, id_records, *every)
    scale = 100.0 if percent else 1.0
    id_acc = float(np.mean(id_records.correct)) if len(id_records) else math.nan
    s_id = record_scores(id_records, names)
    rows_by_score: dict[str, list[GroupRow]] = {name: [] for name in names}
    refusals = []
    for group, sets in groups.items():
        set_rows: dict[str, list[GroupRow]] = {name: [] for name in names}
        refused = []
        for ood in sets:
            try:
                check = k_check(id_records, ood, k_policy)
            except CardinalityMismatchError as exc:
                refusals.append((id_records.task, ood.task, exc))
                refused.append(ood.task)
                continue
            s_ood = record_scores(ood, names, check.keep_ood)
            n_id, n_ood = len(id_records), int(check.keep_ood.sum())
            y = np.concatenate((np.ones(n_id, dtype=bool), np.zeros(n_ood, dtype=bool)))
            for name in names:
                values, reasons = _set_metrics(y, np.concatenate((s_id[name], s_ood[name])), fpr95)
                row = {
                    "group": group,
                    "set": ood.task,
                    "score": name,
                    "k_id": k_summary(id_records.k),
                    "k_ood": k_summary(ood.k[check.keep_ood]),
                    "n_id": n_id,
                    "n_ood": n_ood,
                    "n_sets": 1,
                    "matched": bool(check.matched),
                    "id_acc": id_acc * scale,
                    **{k: v * scale for k, v in values.items()},
                    "fpr95_positive": fpr95,
                    "scale": scale,
                }
                set_rows[name].append(GroupRow.of(finish_row(row, reasons)))
        for name in names:
            rows_by_score[name] += set_rows[name] + [
                _mean_row(group, name, set_rows[name], refused, id_acc, fpr95, scale)
            ]
    return [row for name in names for row in rows_by_score[name]], refusals


def _mean_row(group, name, set_rows, refused, id_acc, fpr95, scale) -> GroupRow:
    matched = [r for r in set_rows if r["matched"]]
    left_out = [f"{t} refused (K mismatch)" for t in refused]
    left_out += [f"{r['set']} compared across K (matched: false)" for r in set_rows if not r["matched"]]
    row = {
        "group": group,
        "set": group,
        "score": name,
        "k_id": matched[0]["k_id"] if matched else None,
        "k_ood": _common_k(matched),
        "n_id": matched[0]["n_id"] if matched else 0,
        "n_ood": sum(r["n_ood"] for r in matched),
        "n_sets": len(matched),
        "matched": bool(matched),
        "id_acc": id_acc * scale,
        **{k: float(np.mean([r[k] for r in matched])) if matched else math.nan for k in METRIC_KEYS[1:]},
        "fpr95_positive": fpr95,
        "scale": scale,
    }
    reasons = []
    if left_out:
        total = len(set_rows) + len(refused)
        reasons.append(f"mean over {len(matched)} of the {total} {group} sets: " + "; ".join(left_out))
    reasons += [f"{r['set']}: {r['reason']}" for r in matched if r.get("reason")]
    finished = finish_row(row, reasons)
    if reasons and "reason" not in finished:
        finished["reason"] = "; ".join(reasons)
    return GroupRow.of(finished)


def _common_k(rows: Sequence[dict]):
    ks = {str(r["k_ood"]) for r in rows}
    return rows[0]["k_ood"] if len(ks) == 1 else None
