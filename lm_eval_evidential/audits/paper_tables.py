"""McNamara (2026)'s Tables 1 and 3-6 from one evaluation run, with the published values beside ours.

The paper fine-tunes Llama-3-8B on OBQA (ID) and scores ARC-C, ARC-E, CSQA and MMLU Math as OOD,
with max-prob (MP) and reciprocal vacuity (UM), ID = positive:

- **Table 1** (standard EDL, OBQA -> ARC-C): the K sweep with zero-evidence options appended
  to the OOD side only or to both sides (:func:`~lm_eval_evidential.audits.ood.ksweep_rows`;
  any ``phantom`` mode here).
- **Tables 3-4** (Implementation A; IB-EDL, standard EDL): each 4-option OOD task scored at
  K = 5 with the model's real " E" ("5 (mismatch)", :func:`~lm_eval_evidential.audits.ood.forced_k_scores`
  with ``phantom="model"``) against K = 4 ("4 (correct)"); CSQA as-is (K = 5) against its
  "removed E" control (``csqa4_edl``).
- **Tables 5-6** (Implementation B): the same rows where "5 (mismatch)" leaves max-prob exactly
  unchanged; ``phantom="count"`` (vacuity's K alone) is the one construction with that
  property, so it is what these rows are computed with here.

Each row has AUPR_base (the ID share), MP and UM AUROC and AUPR-In, and on the second row of each
dataset the deltas (second minus first, the paper's "drop"). The OOD side of the ARC and MMLU
rows keeps only its questions with the ID task's K (``k_policy="restrict"``: ARC has a few 3- and
5-option questions), so the two rows differ by K alone. The published values are shown where the
setting matches (ID task ``obqa_edl``, the same OOD task, the table's method); they are for
Llama-3-8B, ours for the records' model: compare the pattern (the deltas), not the values.

References
----------
.. [1] McNamara, C. (2026). Rethinking vacuity for OOD detection in evidential deep learning.
       arXiv:2605.06382 (Tables 1, 3-6).
"""

from __future__ import annotations

from dataclasses import dataclass

from lm_eval_evidential.audits.ood import (
    CardinalityMismatchError,
    KSweepRow,
    k_check,
    ksweep_rows,
    ood_rows,
    subset_records,
)
from lm_eval_evidential.audits.table import AuditRow, column, k_column, reason_field, row_with
from lm_eval_evidential.records import Records
from lm_eval_evidential.records.orders import refuses_permuted

__all__ = ["PUBLISHED", "PUBLISHED_TABLE1", "DATASETS", "Table1Row", "ImplementationRow", "paper_tables"]

#: Our task for each of the paper's datasets (CSQA's "removed E" row is its control ``csqa4_edl``).
DATASETS = {"arc_c_edl": "ARC-C", "arc_e_edl": "ARC-E", "csqa_edl": "CSQA", "mmlu_math_edl": "MMLU Math"}
#: The lettered views of the stock ARC tasks: the same questions in the same prompt (docs/tasks.md).
DATASETS.update({"arc_challenge_edl": "ARC-C", "arc_easy_edl": "ARC-E"})
METRICS = ("aupr_base", "mp_auroc", "mp_aupr", "um_auroc", "um_aupr")

#: McNamara (2026), Tables 3-6 (Llama-3-8B fine-tuned on OBQA): (dataset, row) -> METRICS.
PUBLISHED = {
    3: {  # Implementation A, IB-EDL (sigma_mult = 0)
        ("ARC-C", "mismatch"): (0.299, 0.910, 0.922, 0.947, 0.944),
        ("ARC-C", "correct"): (0.299, 0.653, 0.472, 0.642, 0.446),
        ("ARC-E", "mismatch"): (0.174, 0.902, 0.897, 0.940, 0.917),
        ("ARC-E", "correct"): (0.174, 0.581, 0.257, 0.580, 0.234),
        ("CSQA", "mismatch"): (0.291, 0.915, 0.921, 0.913, 0.859),
        ("CSQA", "correct"): (0.337, 0.651, 0.449, 0.612, 0.399),
    },
    4: {  # Implementation A, standard EDL
        ("ARC-C", "mismatch"): (0.299, 0.865, 0.879, 0.850, 0.862),
        ("ARC-C", "correct"): (0.299, 0.614, 0.394, 0.613, 0.393),
        ("ARC-E", "mismatch"): (0.174, 0.854, 0.848, 0.836, 0.817),
        ("ARC-E", "correct"): (0.174, 0.557, 0.206, 0.556, 0.203),
        ("CSQA", "mismatch"): (0.291, 0.862, 0.877, 0.841, 0.848),
        ("CSQA", "correct"): (0.337, 0.566, 0.381, 0.564, 0.371),
    },
    5: {  # Implementation B, IB-EDL
        ("MMLU Math", "mismatch"): (0.516, 0.871, 0.887, 0.936, 0.932),
        ("MMLU Math", "correct"): (0.516, 0.871, 0.887, 0.804, 0.765),
        ("ARC-C", "mismatch"): (0.303, 0.583, 0.371, 0.912, 0.912),
        ("ARC-C", "correct"): (0.303, 0.583, 0.371, 0.576, 0.364),
        ("ARC-E", "mismatch"): (0.180, 0.479, 0.171, 0.902, 0.893),
        ("ARC-E", "correct"): (0.180, 0.479, 0.171, 0.477, 0.177),
        ("CSQA", "mismatch"): (0.291, 0.916, 0.924, 0.911, 0.908),
        ("CSQA", "correct"): (0.337, 0.711, 0.560, 0.714, 0.551),
    },
    6: {  # Implementation B, standard EDL
        ("MMLU Math", "mismatch"): (0.516, 0.896, 0.888, 0.950, 0.964),
        ("MMLU Math", "correct"): (0.516, 0.896, 0.888, 0.907, 0.910),
        ("ARC-C", "mismatch"): (0.303, 0.563, 0.337, 0.850, 0.855),
        ("ARC-C", "correct"): (0.303, 0.563, 0.337, 0.571, 0.351),
        ("ARC-E", "mismatch"): (0.180, 0.510, 0.186, 0.835, 0.812),
        ("ARC-E", "correct"): (0.180, 0.510, 0.186, 0.517, 0.199),
        ("CSQA", "mismatch"): (0.291, 0.860, 0.862, 0.846, 0.839),
        ("CSQA", "correct"): (0.337, 0.619, 0.411, 0.623, 0.443),
    },
}
#: McNamara (2026), Table 1 (standard EDL, OBQA -> ARC-C, zero-evidence options): (condition, x) -> (AUROC, AUPR).
PUBLISHED_TABLE1 = {
    **{(c, 0): (0.570, 0.351) for c in ("ood_only", "matched")},
    ("ood_only", 1): (0.842, 0.845),
    ("ood_only", 2): (0.888, 0.901),
    ("ood_only", 3): (0.909, 0.921),
    ("ood_only", 4): (0.922, 0.935),
    **{("matched", x): (0.570, 0.351) for x in range(1, 5)},
}
#: Which table each (implementation, method) is; the softmax baseline has none.
TABLE_OF = {("A", "ib_edl"): 3, ("A", "edl"): 4, ("B", "ib_edl"): 5, ("B", "edl"): 6}
_PHANTOM_OF = {"A": "model", "B": "count"}
_SCORES = ("max_prob", "reciprocal_vacuity")


#: One step of Table 1's K sweep: the :class:`~lm_eval_evidential.audits.ood.KSweepRow`, with the published
#: ``(AUROC, AUPR)`` of that step where the setting is the paper's (None elsewhere).
Table1Row = row_with(
    "Table1Row", KSweepRow, __name__, after=[("published", "tuple[float, float] | None", column("paper AUROC, AUPR"))]
)


def _drop():
    """A number's move from its dataset's first row to its second (the paper's "drop"); the first row has none."""
    return column("Δ", "delta", omit_none=True)


@dataclass(frozen=True, eq=False, kw_only=True)
class ImplementationRow(AuditRow):
    """One row of Tables 3-6 (Implementation A or B): one OOD dataset at the mismatched K ("mismatch") or the
    correct one ("correct"); the second row of a dataset carries the deltas (second minus first, the paper's
    "drop"), the first none. Keys in the order ``tables --json`` has always written them."""

    aupr_base: float = column("AUPR base")
    mp_auroc: float = column("MP AUROC")
    mp_aupr: float = column("MP AUPR")
    um_auroc: float = column("UM AUROC")
    um_aupr: float = column("UM AUPR")
    n_ood: int = column("n OOD")
    k_ood: int | dict | None = k_column("K_OOD")
    reason: str | None = reason_field()
    row: str = column("row")
    dataset: str = column("Dataset")
    task: str = column("task")
    k_label: str = column("K")
    published: dict[str, float] | None = column("paper")
    delta_aupr_base: float | None = _drop()
    delta_mp_auroc: float | None = _drop()
    delta_mp_aupr: float | None = _drop()
    delta_um_auroc: float | None = _drop()
    delta_um_aupr: float | None = _drop()


def _scores(records: Records) -> tuple[str, ...]:
    """MP and UM, or MP alone for records without alpha (softmax: UM is undefined, its cells empty)."""
    return _SCORES if records.has_alpha else _SCORES[:1]


#: Why the UM (reciprocal vacuity) cells of softmax records are empty.
NO_VACUITY = "UM (reciprocal vacuity) needs Dirichlet alpha; method=softmax records have none"


def _metrics(rows: list[dict]) -> dict:
    by = {r["score"]: r for r in rows}
    mp, um = by["max_prob"], by.get("reciprocal_vacuity", {})
    return {
        "aupr_base": mp["aupr_baseline"],
        "mp_auroc": mp["auroc"],
        "mp_aupr": mp["aupr_in"],
        "um_auroc": um.get("auroc", float("nan")),
        "um_aupr": um.get("aupr_in", float("nan")),
        "n_ood": mp["n_ood"],
        "k_ood": mp["k_ood"],
    }


def _one_k(records: Records) -> int | None:
    """The records' K where every question has the same, else None."""
    ks = set(records.k.tolist()) if len(records) else set()
    return ks.pop() if len(ks) == 1 else None


def _undefined(reason: str) -> dict:
    return {**dict.fromkeys(METRICS, float("nan")), "n_ood": 0, "k_ood": None, "reason": reason}


def _same_k(id_records: Records, ood_records: Records) -> Records:
    """The OOD questions with the ID task's K (the paper's 4-option comparison), refused when there are none."""
    return subset_records(ood_records, k_check(id_records, ood_records, "restrict").keep_ood)


def _pair(id_records: Records, ood_records: Records, implementation: str, k_forced: int) -> list[dict]:
    """(mismatch, correct) rows of one OOD task at the ID task's K and at ``k_forced``."""
    kept = _same_k(id_records, ood_records)
    common = {"scores": _scores(id_records), "n_boot": 0}
    correct = {**_metrics(ood_rows(id_records, kept, **common)), "row": "correct"}
    try:
        rows = ood_rows(
            id_records, kept, **common, k_policy="report", force_k=k_forced, phantom=_PHANTOM_OF[implementation]
        )
        mismatch = {**_metrics(rows), "row": "mismatch"}
    except ValueError as exc:  # IB-EDL under model phantoms, records without phantom logits
        mismatch = {**_undefined(str(exc)), "row": "mismatch"}
    return [mismatch, correct]


@refuses_permuted
def paper_tables(
    id_records: Records,
    ood: dict[str, Records],
    *,
    phantom: str = "zero",
    max_extra: int = 4,
) -> dict:
    """The data of McNamara (2026)'s Tables 1 and 3-6 for ``id_records`` and the OOD records ``ood``.

    ``ood`` maps task names to records; the tasks of :data:`DATASETS` (and ``csqa4_edl``, CSQA's
    "removed E" row) are used, others ignored. Returns ``{"table1": {task: ksweep rows with the
    published (AUROC, AUPR) where the setting matches}, "A": [...], "B": [...], "method",
    "published_tables": {"A": n or None, "B": n or None}}``; each implementation's list has,
    per dataset, the rows "mismatch" and "correct" (keys ``dataset, task, k_label, row,`` the
    :data:`METRICS`, their ``delta_*`` on the second row, ``published`` (the paper's values or
    None) and ``reason`` where a row cannot be computed).
    """
    method = id_records.method
    k_id = _one_k(id_records)
    # The paper's setting: OBQA (K = 4) as ID; its published values are shown for that alone.
    matches_id = id_records.task == "obqa_edl" and k_id == 4
    out: dict = {
        "method": method,
        "id_task": id_records.task,
        "k_id": k_id,
        "table1": {},
        "ignored": [t for t in ood if t not in DATASETS and t != "csqa4_edl"],
        "notes": [] if id_records.has_alpha else [NO_VACUITY],
    }
    for task, records in ood.items():
        if task in DATASETS and task != "csqa_edl":
            out["table1"][task] = _table1(id_records, task, records, matches_id, phantom=phantom, max_extra=max_extra)
    for implementation in ("A", "B"):
        table = TABLE_OF.get((implementation, method))
        out.setdefault("published_tables", {})[implementation] = table if matches_id else None
        out[implementation] = _implementation(id_records, ood, implementation, k_id, table if matches_id else None)
    return out


def _table1(id_records: Records, task: str, records: Records, matches_id: bool, *, phantom: str, max_extra: int):
    """Table 1 of one OOD task: its K-sweep rows of reciprocal vacuity, each with the published (AUROC, AUPR)
    where the setting is the paper's, or why there are none."""
    if not id_records.has_alpha:
        return {"reason": f"Table 1 sweeps reciprocal vacuity: {NO_VACUITY}", "rows": []}
    try:
        rows = ksweep_rows(
            id_records,
            _same_k(id_records, records),
            max_extra=max_extra,
            scores=["reciprocal_vacuity"],
            phantom=phantom,
        )
    except (CardinalityMismatchError, ValueError) as exc:
        return {"reason": str(exc), "rows": []}
    published = matches_id and task == "arc_c_edl" and id_records.method == "edl" and phantom == "zero"
    return {
        "rows": [
            Table1Row(**r, published=PUBLISHED_TABLE1.get((r["condition"], r["extra"])) if published else None)
            for r in rows
        ]
    }


def _implementation(
    id_records: Records, ood: dict[str, Records], implementation: str, k_id, table
) -> list[ImplementationRow]:
    """One implementation's rows ("mismatch" and "correct" per dataset), with the published values of ``table``
    (None: the setting is not the paper's) and the second row's deltas."""
    rows: list[ImplementationRow] = []
    for task, dataset in DATASETS.items():
        if task not in ood or (implementation == "A" and task == "mmlu_math_edl"):
            continue
        k_ood = _one_k(ood[task])
        if task == "csqa_edl":
            pair = [{**_metrics(_as_is(id_records, ood[task])), "row": "mismatch"}]
            if "csqa4_edl" in ood:
                pair.append(
                    {
                        **_metrics(
                            ood_rows(
                                id_records,
                                ood["csqa4_edl"],
                                scores=_scores(id_records),
                                n_boot=0,
                            )
                        ),
                        "row": "correct",
                    }
                )
            else:
                pair.append(
                    {**_undefined("csqa4_edl (CSQA with option E removed) is not in this run"), "row": "correct"}
                )
            k_removed = _one_k(ood["csqa4_edl"]) if "csqa4_edl" in ood else None
            labels = (f"{_k_text(k_ood)} (as-is)", f'{_k_text(k_removed)} (removed "E")')
        elif k_id is None:
            pair = [{**_undefined(_MIXED_K.format(task=id_records.task)), "row": r} for r in ("mismatch", "correct")]
            labels = ("K + 1 (mismatch)", "K (correct)")
        else:  # the labels are the data's K: the ID task's, and one more for the mismatch row
            pair = _pair(id_records, ood[task], implementation, k_id + 1)
            labels = (f"{k_id + 1} (mismatch)", f"{k_id} (correct)")
        for r, label in zip(pair, labels):
            r.update(dataset=dataset, task=task, k_label=label)
            published = PUBLISHED.get(table, {}).get((dataset, r["row"])) if table else None
            r["published"] = None if published is None else dict(zip(METRICS, published))
        first, second = pair
        for m in METRICS:
            second[f"delta_{m}"] = second[m] - first[m]
        rows += [ImplementationRow(**r) for r in pair]
    return rows


def _as_is(id_records: Records, records: Records) -> list[dict]:
    """CSQA scored with its own K = 5 against a K = 4 ID task (the paper's "5 (as-is)" row)."""
    return ood_rows(id_records, records, scores=_scores(id_records), n_boot=0, k_policy="report")


_MIXED_K = "the ID task {task} has questions of several K; the paper's rows compare one K with one more"


def _k_text(k: int | None) -> str:
    return "mixed K" if k is None else str(k)
