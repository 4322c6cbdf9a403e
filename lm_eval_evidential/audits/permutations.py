"""The answer-order audit of a permuted run: does a number survive a reordering of the same options?

A permuted evaluation (``--metadata '{"permutations": "cyclic"}'``, see
:mod:`lm_eval_evidential.tasks.permutations`) keeps one record per (question, order) with the
order in its ``order`` column. From those records:

- :func:`permutation_summary` (one task): accuracy per order (slot 0 is the identity, today's
  accuracy), CircularEval accuracy, the share of questions whose prediction follows a letter
  rather than an option, the letter prior (pick rate, gold rate, mean evidence and logit per
  letter; a chi-square test of uniform picks), the PriDe prior estimated on a seeded subset of
  questions with the debiased accuracy of the others (Zheng et al., ICLR 2024), and for every
  score its spread across the orders of each question and the rank correlation of each order's
  ranking of the questions with the identity's;
- :func:`permutation_ood_rows` (an ID and an OOD task, both permuted alike): per score the AUROC
  and AUPR-In of each order (min, median, max) beside those of the order-averaged score, under the
  same K rules as ``ood`` (:func:`~lm_eval_evidential.metrics.cardinality.check_cardinality`, by
  question). A permuted side against an unpermuted one, or two permutation settings, is refused
  (:class:`~lm_eval_evidential.errors.OrderMismatchError`): their orders do not correspond.

Pure numpy + records, like every audit; the formulas are :mod:`lm_eval_evidential.metrics.order_effects`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from lm_eval_evidential.errors import OrderMismatchError, RecordsError
from lm_eval_evidential.metrics import order_effects as oe
from lm_eval_evidential.metrics.cardinality import check_cardinality
from lm_eval_evidential.metrics.detection import aupr_in, auroc
from lm_eval_evidential.metrics.intervals import SEED
from lm_eval_evidential.params import Interval, Param, Real, validate_params
from lm_eval_evidential.records import Records, check_same_producer

from ._common import collect, finish_row, record_scores
from .table import AuditRow, column, k_column, matched_column, reason_field

__all__ = [
    "PERMUTATION_KEYS",
    "PERMUTATION_OOD_KEYS",
    "SCORE_KEYS",
    "ScoreSpreadRow",
    "PermutationOODRow",
    "check_permuted",
    "permutation_summary",
    "permutation_ood_rows",
]

#: The keys of :func:`permutation_summary`'s dict, in order.
PERMUTATION_KEYS = (
    "task",
    "permutations",
    "n_questions",
    "n_records",
    "orders_per_question",
    "accuracy",
    "accuracy_per_order",
    "accuracy_min",
    "accuracy_max",
    "circular_accuracy",
    "prediction_follows",
    "letters",
    "letter_pick_rate",
    "letter_gold_rate",
    "letter_mean_evidence",
    "letter_mean_logit",
    "letter_uniformity",
    "pride",
    "scores",
)


@dataclass(frozen=True, eq=False)
class ScoreSpreadRow(AuditRow):
    """How far one score of a permuted task moves when only the order of the options changes (the values of
    :func:`permutation_summary`'s ``scores``, keyed by score): its range and spread over a question's orders,
    and the rank correlation of each order's scores with the identity order's."""

    mean_range: float = column("mean range")
    median_range: float = column("median range")
    max_range: float = column("max range")
    mean_std: float = column("mean std")
    spearman_min: float = column("Spearman min")
    spearman_median: float = column("Spearman median")
    kendall_min: float = column("Kendall min")
    kendall_median: float = column("Kendall median")
    reason: str | None = reason_field()


@dataclass(frozen=True, eq=False)
class PermutationOODRow(AuditRow):
    """One score's OOD detection per answer order (:func:`permutation_ood_rows`): order s of the ID task against
    order s of the OOD task, and the order-averaged score."""

    id_task: str = column("ID task")
    ood_task: str = column("OOD task")
    score: str = column("score")
    permutations: str | None = column("permutations")
    k_id: int | dict = k_column("K_ID")
    k_ood: int | dict = k_column("K_OOD")
    matched: bool = matched_column()
    n_id_questions: int = column("n ID questions")
    n_ood_questions: int = column("n OOD questions")
    n_orders: int = column("orders")
    auroc_identity: float = column("AUROC identity")
    auroc_min: float = column("AUROC min")
    auroc_median: float = column("AUROC median")
    auroc_max: float = column("AUROC max")
    auroc_range: float = column("AUROC range")
    auroc_order_averaged: float = column("order-averaged")
    aupr_in_min: float = column("AUPR-In min")
    aupr_in_median: float = column("AUPR-In median")
    aupr_in_max: float = column("AUPR-In max")
    aupr_in_order_averaged: float = column("AUPR-In order-averaged")
    reason: str | None = reason_field()


#: The keys of each score's entry in ``scores``.
SCORE_KEYS = ScoreSpreadRow.field_names()[:-1]  # ``reason`` only where a number is NaN
#: The keys of each row of :func:`permutation_ood_rows`.
PERMUTATION_OOD_KEYS = PermutationOODRow.field_names()[:-1]
_HOW = 'evaluate it with --metadata \'{"permutations": "cyclic"}\' (docs/audits.md, "The order audit")'


def _spec(records: Records) -> str | None:
    setting = records.meta.get("permutations")
    return setting.get("spec") if isinstance(setting, dict) else None


def check_permuted(records: Records) -> None:
    """Refuse records without orders (an unpermuted run), naming the task and how to get them."""
    if records.order is None:
        raise RecordsError(
            f"the records of {records.task!r} have no answer orders (an unpermuted run); to audit answer order, {_HOW}"
        )


def _letters(records: Records) -> list[str]:
    widest = int(np.argmax(records.k)) if len(records) else 0
    return [str(x) for x in records.labels[widest]] if len(records) else []


def _pride(records: Records, question: np.ndarray, slots: np.ndarray, fraction: float, seed: int) -> dict:
    """PriDe per K: the prior from a seeded ``fraction`` of the balanced questions, the others debiased."""
    probs, k = records.probs, records.k
    balanced = set(oe.balanced_questions(question, records.order, k).tolist())
    rng = np.random.default_rng(seed)
    by_k, plain, debiased, reasons = {}, [], [], []
    for kk in np.unique(k):
        kk = int(kk)
        ids = np.unique(question[k == kk])
        usable = np.array(sorted(set(ids.tolist()) & balanced), dtype=np.int64)
        if len(usable) < 2:
            reasons.append(
                f"K = {kk}: PriDe needs 2 or more questions seen in balanced orders (cyclic or all), got {len(usable)}"
            )
            continue
        n_estimate = min(len(usable) - 1, max(1, math.ceil(fraction * len(ids))))
        estimate = set(rng.choice(usable, size=n_estimate, replace=False).tolist())
        observed = np.stack(
            [probs[np.flatnonzero(question == q)][np.argsort(slots[question == q]), :kk] for q in sorted(estimate)]
        )
        prior = oe.pride_prior(observed)
        rest = np.flatnonzero((k == kk) & (slots == 0) & ~np.isin(question, list(estimate)))
        pred = oe.pride_predictions(probs[rest, :kk], prior)
        plain.append(records.correct[rest])
        debiased.append(pred == records.gold[rest])
        by_k[kk] = {
            "prior": prior.tolist(),
            "n_estimation": len(estimate),
            "n_debiased": int(rest.size),
            "accuracy": float(np.mean(records.correct[rest])),
            "debiased_accuracy": float(np.mean(pred == records.gold[rest])),
        }
    if not by_k:
        nan = float("nan")
        return {"accuracy": nan, "debiased_accuracy": nan, "fraction": fraction, "seed": seed, "by_k": {},
                "reason": "; ".join(reasons)}  # fmt: skip
    out = {
        "accuracy": float(np.mean(np.concatenate(plain))),
        "debiased_accuracy": float(np.mean(np.concatenate(debiased))),
        "fraction": fraction,
        "seed": seed,
        "by_k": by_k,
    }
    if reasons:
        out["reason"] = "; ".join(reasons)
    return out


#: ``pride_fraction``: the share of a task's questions PriDe estimates its prior on (Zheng et al. 2024: 5%).
PRIDE_FRACTION = Param(
    Interval(Real, 0, 1, closed="neither"),
    why="the share of questions PriDe estimates its prior on",
    example="pride_fraction=0.05",
)


@validate_params({"pride_fraction": PRIDE_FRACTION, "seed": SEED})
def permutation_summary(
    records: Records,
    *,
    scores: Iterable[str] | None = None,
    pride_fraction: float = 0.05,
    seed: int = 0,
) -> dict:
    """The order audit of one permuted task (keys :data:`PERMUTATION_KEYS`; see the module docstring).

    ``accuracy`` is the identity order's (today's number); ``accuracy_per_order`` one per slot
    (under ``cyclic`` slot s is the shift by s); ``letter_*`` are per letter over the records
    that show it; ``pride`` holds PriDe's prior per K (estimated on ``ceil(pride_fraction *
    questions)`` questions drawn with ``seed``; Zheng et al. use 5%) and the identity-order
    accuracy of the other questions before and after debiasing; ``scores`` maps each score to
    its order spread and rank correlation (:data:`SCORE_KEYS`).
    """
    from .ood import resolve_scores

    check_permuted(records)
    names = resolve_scores(scores, records)
    question, order, k = records.doc_id, records.order, records.k
    slots = oe.order_slots(question, order)
    letters = _letters(records)
    width = len(letters)
    picks, shown = oe.letter_counts(records.pred, k, width)
    golds, _ = oe.letter_counts(records.gold, k, width)
    real = np.arange(width)[None, :] < k[:, None]
    reasons: list[str] = []
    with np.errstate(invalid="ignore"):
        evidence = np.nanmean(np.where(real, records.evidence, np.nan), axis=0) if records.has_alpha else None
        logit = np.nanmean(np.where(real, records.logits, np.nan), axis=0)
    per_order = oe.accuracy_per_slot(records.correct, slots)
    counts = np.bincount(np.unique(question, return_inverse=True)[1])
    spread = {}
    for name, values in record_scores(records, names).items():
        entry = {
            **collect(reasons, oe.order_spread, values, question),
            **collect(reasons, oe.rank_correlation_to_identity, values, question, slots),
        }
        spread[name] = ScoreSpreadRow.of(finish_row({key: entry[key] for key in SCORE_KEYS}, reasons))
    out = {
        "task": records.task,
        "permutations": records.meta.get("permutations"),
        "n_questions": int(len(counts)),
        "n_records": len(records),
        "orders_per_question": {int(m): int(n) for m, n in zip(*np.unique(counts, return_counts=True))},
        "accuracy": per_order[0] if per_order else float("nan"),
        "accuracy_per_order": per_order,
        "accuracy_min": min(per_order, default=float("nan")),
        "accuracy_max": max(per_order, default=float("nan")),
        "circular_accuracy": collect(reasons, oe.circular_accuracy, records.correct, question),
        "prediction_follows": collect(reasons, oe.prediction_following, question, order, records.pred),
        "letters": letters,
        "letter_pick_rate": dict(zip(letters, (picks / shown).tolist())),
        "letter_gold_rate": dict(zip(letters, (golds / shown).tolist())),
        "letter_mean_evidence": None if evidence is None else dict(zip(letters, evidence.tolist())),
        "letter_mean_logit": dict(zip(letters, logit.tolist())),
        "letter_uniformity": collect(reasons, oe.letter_uniformity, records.pred, k),
        "pride": _pride(records, question, slots, float(pride_fraction), seed),
        "scores": spread,
    }
    return {key: out[key] for key in PERMUTATION_KEYS}


def _check_same_orders(id_records: Records, ood_records: Records) -> str:
    """The permutation setting both sides share; refused (exit 2) when they do not share one."""
    specs = {r.task: _spec(r) for r in (id_records, ood_records)}
    if None in specs.values() and set(specs.values()) != {None}:
        permuted = next(t for t, s in specs.items() if s is not None)
        plain = next(t for t, s in specs.items() if s is None)
        raise OrderMismatchError(
            f"{permuted} was evaluated in several answer orders ({specs[permuted]}) and {plain} in one: an order of "
            f"one side has no counterpart on the other, so AUROC per order would compare a reordered set with an "
            f"unreordered one; evaluate {plain} with the same --metadata permutations setting"
        )
    if None in specs.values():
        raise RecordsError(
            f"the records of {id_records.task!r} and {ood_records.task!r} have no answer orders; to audit answer "
            f"order, {_HOW}"
        )
    if len(set(specs.values())) > 1:
        a, b = specs.values()
        raise OrderMismatchError(
            f"{id_records.task} was evaluated in the orders {a!r} and {ood_records.task} in {b!r}: order s of one is "
            "not order s of the other; evaluate both with the same permutations setting"
        )
    return next(iter(specs.values()))


def _keep_questions(records: Records, keep_by_question: np.ndarray, questions: np.ndarray) -> np.ndarray:
    return np.isin(records.doc_id, questions[keep_by_question])


def _question_k(records: Records) -> tuple[np.ndarray, np.ndarray]:
    ids, first = np.unique(records.doc_id, return_index=True)
    return ids, records.k[first]


def permutation_ood_rows(
    id_records: Records, ood_records: Records, *, scores: Iterable[str] | None = None, k_policy: str = "assert"
) -> list[dict]:
    """Per score: OOD AUROC/AUPR-In of each order (min, median, max) and of the order-averaged score.

    Order s of the ID side is compared with order s of the OOD side (ID = positive, higher score =
    more in-distribution, as ``ood``). The K check is ``ood``'s, on one K per question; under
    ``restrict`` the dropped questions lose all their orders. Keys :data:`PERMUTATION_OOD_KEYS`.
    """
    from .ood import k_summary, resolve_scores

    spec = _check_same_orders(id_records, ood_records)
    check_same_producer([id_records, ood_records])
    ids_id, k_id = _question_k(id_records)
    ids_ood, k_ood = _question_k(ood_records)
    check = check_cardinality(k_id, k_ood, policy=k_policy, id_name=id_records.task, ood_name=ood_records.task)
    keep_id = _keep_questions(id_records, check.keep_id, ids_id)
    keep_ood = _keep_questions(ood_records, check.keep_ood, ids_ood)
    names = resolve_scores(scores, id_records, ood_records)
    s_id, s_ood = record_scores(id_records, names, keep_id), record_scores(ood_records, names, keep_ood)
    q_id, q_ood = id_records.doc_id[keep_id], ood_records.doc_id[keep_ood]
    slot_id = oe.order_slots(q_id, id_records.order[keep_id])
    slot_ood = oe.order_slots(q_ood, ood_records.order[keep_ood])
    n_slots = int(min(slot_id.max(initial=-1), slot_ood.max(initial=-1))) + 1
    rows = []
    for name in names:
        reasons: list[str] = []
        per_order = []
        for s in range(n_slots):
            a, b = s_id[name][slot_id == s], s_ood[name][slot_ood == s]
            y = np.r_[np.ones(a.size, bool), np.zeros(b.size, bool)]
            per_order.append((collect(reasons, auroc, y, np.r_[a, b]), collect(reasons, aupr_in, y, np.r_[a, b])))
        _, mean_id = oe.order_average(s_id[name], q_id)
        _, mean_ood = oe.order_average(s_ood[name], q_ood)
        y = np.r_[np.ones(mean_id.size, bool), np.zeros(mean_ood.size, bool)]
        aurocs = np.array([p[0] for p in per_order], dtype=np.float64)
        auprs = np.array([p[1] for p in per_order], dtype=np.float64)
        nan = float("nan")
        row = {
            "id_task": id_records.task,
            "ood_task": ood_records.task,
            "score": name,
            "permutations": spec,
            "k_id": k_summary(k_id[check.keep_id]),
            "k_ood": k_summary(k_ood[check.keep_ood]),
            "matched": bool(check.matched),
            "n_id_questions": int(check.keep_id.sum()),
            "n_ood_questions": int(check.keep_ood.sum()),
            "n_orders": n_slots,
            "auroc_identity": float(aurocs[0]) if n_slots else nan,
            "auroc_min": float(np.min(aurocs)) if n_slots else nan,
            "auroc_median": float(np.median(aurocs)) if n_slots else nan,
            "auroc_max": float(np.max(aurocs)) if n_slots else nan,
            "auroc_range": float(np.ptp(aurocs)) if n_slots else nan,
            "auroc_order_averaged": collect(reasons, auroc, y, np.r_[mean_id, mean_ood]),
            "aupr_in_min": float(np.min(auprs)) if n_slots else nan,
            "aupr_in_median": float(np.median(auprs)) if n_slots else nan,
            "aupr_in_max": float(np.max(auprs)) if n_slots else nan,
            "aupr_in_order_averaged": collect(reasons, aupr_in, y, np.r_[mean_id, mean_ood]),
        }
        rows.append(PermutationOODRow.of(finish_row({key: row[key] for key in PERMUTATION_OOD_KEYS}, reasons)))
    return rows
