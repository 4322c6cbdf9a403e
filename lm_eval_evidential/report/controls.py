"""The K-matched controls side by side (what each keeps, what it measures), and the remedies of a refusal.

A control brings an OOD dataset to the ID task's K: ``k_policy=restrict`` (drop the questions
of another K), a distractor-removal control task (``*_k4_edl``) or csqa4_edl. The controls that
ship are read from their task YAMLs.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from lm_eval_evidential.audits.ood import CardinalityMismatchError, ood_rows, resolve_scores
from lm_eval_evidential.metrics.cardinality import k_histogram
from lm_eval_evidential.metrics.scores import OOD_DEFAULT_SCORES
from lm_eval_evidential.records import Records
from lm_eval_evidential.report.format import format_k
from lm_eval_evidential.report.types import ControlRow, Refusal

RESTRICT_CONTROL = "k_policy=restrict: only the questions whose K equals the ID task's K; the others dropped"


@functools.cache
def _shipped_controls() -> dict[str, list[dict]]:
    """``{OOD task: [{"task", "control"}]}``: the K-matched control tasks that ship (from their YAMLs)."""
    from lm_eval_evidential.tasks import tasks_dir
    from lm_eval_evidential.tasks.distractors import control_tasks

    return control_tasks(tasks_dir())


def refusal(policy: str, id_task: str, task: str, exc: CardinalityMismatchError) -> Refusal:
    """The row of a pair ``policy`` refuses: the error, its reason and the remedy (naming the shipped controls)."""
    controls = [c["task"] for c in _shipped_controls().get(task, [])]
    return Refusal(
        policy=policy,
        id_task=id_task,
        ood_task=task,
        error=str(exc),
        reason=exc.summary,
        suggestion=exc.remedy(controls),
    )


def control_rows(
    id_records: Records,
    ood_records: Sequence[Records],
    *,
    scores: Sequence[str] | None = None,
    level: float = 0.95,
) -> list[ControlRow]:
    """What each K-matched control keeps and what it measures, side by side, per OOD dataset.

    For every OOD task that has shipped controls (or whose control is among ``ood_records``):
    one row for ``k_policy=restrict`` on that task's own records and one per control task
    (records whose metadata names it in ``control.of``, or a shipped control of it). Row keys:
    ``source, control, description, evaluated, n_source, n_kept, n_excluded, excluded,
    matched, error, auroc`` (``{score: {"auroc", "auroc_ci"}}``, DeLong CI at ``level``).
    A control absent from the records is listed with ``evaluated: false`` (evaluate it to compare).
    Records of different producers are refused unless checked together before.
    """
    shipped = _shipped_controls()
    by_task = {r.task: r for r in ood_records}
    of = {r.task: (r.meta.get("control") or {}).get("of") for r in ood_records}
    for source, controls in shipped.items():
        for c in controls:
            of[c["task"]] = of.get(c["task"]) or source
    sources = list(dict.fromkeys([*(t for t in by_task if t in shipped), *(of[t] for t in by_task if of.get(t))]))
    rows = []
    for source in sources:
        described = {c["task"]: c["control"] for c in shipped.get(source, [])}
        controls = list(dict.fromkeys([*described, *(t for t in by_task if of.get(t) == source)]))
        src = by_task.get(source)
        rows.append(_control_row(id_records, src, source, "restrict", RESTRICT_CONTROL, src, scores, level))
        for name in controls:
            rows.append(
                _control_row(id_records, by_task.get(name), source, name, described.get(name, ""), src, scores, level)
            )
    return rows


def _control_row(id_records, records, source, control, description, source_records, scores, level) -> ControlRow:
    summary = (records.meta.get("control") or {}) if records is not None else {}
    n_source = summary.get("n_questions", len(source_records) if source_records is not None else None)
    row = dict(  # the row's fields, as they are found; typed once complete
        source=source,
        control=control,
        description=description or summary.get("rule", ""),
        evaluated=records is not None,
        n_source=n_source,
        n_kept=None,
        n_excluded=None,
        excluded=summary.get("excluded", {}),
        matched=None,
        error=None,
        auroc={},
    )
    if records is None:
        return ControlRow(**row)
    try:
        policy = "restrict" if control == "restrict" else "assert"
        names = resolve_scores(scores, id_records, records, default=OOD_DEFAULT_SCORES[:2])
        found = ood_rows(id_records, records, scores=names, k_policy=policy, n_boot=0, level=level)
    except CardinalityMismatchError as exc:
        row["error"] = str(exc).split(". ")[0]
        if control == "restrict":
            row.update(n_kept=0, n_excluded=n_source)
            hist = k_histogram(id_records.k)
            row["excluded"] = {f"K ≠ {format_k(next(iter(hist)) if len(hist) == 1 else hist)}": n_source}
        return ControlRow(**row)
    first = found[0]
    row["n_kept"], row["matched"] = first["n_ood"], first["matched"]
    if n_source is not None:
        row["n_excluded"] = n_source - first["n_ood"]
    if control == "restrict" and row["n_excluded"]:
        row["excluded"] = {f"K ≠ {format_k(first['k_id'])}": row["n_excluded"]}
    row["auroc"] = {r["score"]: {"auroc": r["auroc"], "auroc_ci": r["auroc_ci"]} for r in found}
    return ControlRow(**row)
