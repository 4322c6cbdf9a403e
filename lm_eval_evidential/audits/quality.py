"""Beyond AUROC: calibration, selective prediction, label-free accuracy estimates, score orderings.

Row-producing audits over loaded :class:`~lm_eval_evidential.records.Records` (one per task),
shared by the ``calibration``, ``selective``, ``atc``, ``orders`` and ``report`` commands.
Each function returns a list of rows (one per table row; typed :class:`~.table.AuditRow` rows where
declared, else plain dicts) whose numbers come straight from the numpy core
(:mod:`lm_eval_evidential.metrics`); nothing is re-implemented here.

Score names are the keys of :data:`lm_eval_evidential.metrics.scores.SCORES`, defined once in
``core/scores.py`` (with their formulas); every function and command here takes and reports
those same strings. Every score is a confidence, **higher = more confident / more
in-distribution**. By default each audit uses every score the records can give:
:func:`~lm_eval_evidential.metrics.scores.available_scores` (the Dirichlet-alpha scores such as
``reciprocal_vacuity`` only for evidential records, not ``method=softmax`` ones).

Undefined values. A metric that is undefined on the data (e.g. PRR when every answer is
correct) is NaN and the row gets a ``reason`` key saying why (the core's
:class:`~lm_eval_evidential.metrics._validation.UndefinedMetricWarning` messages, collected
here instead of being printed); a row with no NaN has no ``reason`` key. Invalid input
(an unknown score name, malformed arrays) raises ValueError.

Pure numpy/scipy (+ matplotlib inside the two figure functions): imports neither torch nor
lm_eval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from lm_eval_evidential.records.orders import refuses_permuted

from ..metrics.accuracy_estimation import atc, atc_by_score, doc_estimate
from ..metrics.calibration import adaptive_ece, brier, ece, nll
from ..metrics.rejection import Ranking
from ..metrics.score_orders import order_audit
from ..metrics.scores import available_scores, computable_scores
from ..metrics.selective import selective_report
from ._common import (
    answer_logits,
    check_records_by_task,
    check_scores,
    collect,
    finish_row,
    keep_dense_ranks,
    no_alpha_reason,
    record_scores,
    score_inputs,
    taken_dense_ranks,
    without_k1_undefined,
)
from .table import AuditRow, column, per_parameter, reason_field

__all__ = [
    "PRR_CAPS",
    "PROBABILITY_SCORES",
    "CalibrationRow",
    "CALIBRATION_KEYS",
    "SelectiveRow",
    "SELECTIVE_KEYS",
    "RISK_COVERAGE",
    "selective_keys",
    "ATCRow",
    "ATC_KEYS",
    "OrderRow",
    "ORDER_KEYS",
    "calibration_rows",
    "selective_rows",
    "atc_rows",
    "order_rows",
    "equivalence_groups",
]

#: Rejection caps of the PRR columns: 0.5 (earlier work) and 0.75 (Goloburda et al. 2026, §4.1).
PRR_CAPS = (0.5, 0.75)

#: Scores that are a probability of the prediction being right, on the accuracy scale, so that
#: DoC ("accuracy drop = confidence drop") means something. Other scores in [0, 1] (e.g.
#: ``l2_to_uniform``) would give DoC a number with no accuracy meaning; ATC needs no such scale.
PROBABILITY_SCORES = ("max_prob",)


@dataclass(frozen=True, eq=False)
class CalibrationRow(AuditRow):
    """One task's calibration (:func:`calibration_rows`): lower is better for the four errors."""

    task: str = column("task")
    ece: float = column("ECE (equal-width bins)")
    adaptive_ece: float = column("adaptive ECE")
    nll: float = column("NLL")
    brier: float = column("Brier")
    acc: float = column("accuracy")
    reason: str | None = reason_field()


CALIBRATION_KEYS = CalibrationRow.field_names()[:-1]  # ``reason`` only where a number is NaN
#: Default coverage of the ``risk_at_<coverage>`` column (torch-uncertainty's ``RiskAt80Cov``).
RISK_COVERAGE = 0.8


def selective_keys(coverage: float = RISK_COVERAGE) -> tuple[str, ...]:
    """The keys of a :func:`selective_rows` row (before ``reason``), the risk column named for ``coverage``."""
    return (
        "task",
        "score",
        *(f"prr_{c}" for c in PRR_CAPS),
        "prr_normalized",
        "aurc",
        "eaurc",
        "augrc",
        f"risk_at_{coverage}",
        "spearman",
    )


SELECTIVE_KEYS = selective_keys()


@dataclass(frozen=True, eq=False)
class SelectiveRow(AuditRow):
    """How well one score of a task ranks right answers above wrong ones (:func:`selective_rows`): one PRR column
    per rejection cap (``prr_0.5``, ``prr_0.75``) and a risk column for the coverage asked (``risk_at_0.8``)."""

    task: str = column("task")
    score: str = column("score")
    prr: tuple[tuple[float, float], ...] = per_parameter("prr_{}", "PRR@{}")
    prr_normalized: float = column("PRR (polygraph)")
    aurc: float = column("AURC")
    eaurc: float = column("E-AURC")
    augrc: float = column("AUGRC")
    risk_at: tuple[tuple[float, float], ...] = per_parameter("risk_at_{}", "risk@{} coverage")
    spearman: float = column("Spearman")
    reason: str | None = reason_field()


@dataclass(frozen=True, eq=False)
class ATCRow(AuditRow):
    """One label-free accuracy estimate of a target task against its true accuracy (:func:`atc_rows`)."""

    id_task: str = column("ID task")
    target_task: str = column("target")
    score: str = column("score")
    estimate: float = column("estimate")
    true_acc: float = column("true accuracy")
    abs_error: float = column("|error|")
    method: str = column("method")
    reason: str | None = reason_field()


@dataclass(frozen=True, eq=False)
class OrderRow(AuditRow):
    """Whether two scores order a task's examples alike (:func:`order_rows`)."""

    task: str = column("task")
    score_a: str = column("score A")
    score_b: str = column("score B")
    discordant_fraction: float = column("discordant pairs", digits=4)
    order_equivalent: bool = column("order-equivalent")
    reason: str | None = reason_field()


ATC_KEYS = ATCRow.field_names()[:-1]  # the keys of every row; ``reason`` only where a number is NaN
ORDER_KEYS = OrderRow.field_names()[:-1]


# ------------------------------------------------------------------ calibration


@refuses_permuted
def calibration_rows(records_by_task, n_bins: int = 15) -> list[CalibrationRow]:
    """One row per task: ``task, ece, adaptive_ece, nll, brier, acc`` (+ ``reason`` if NaN).

    Confidence = ``max_prob`` (the predicted class's ``E[p]``; softmax for ``method=softmax``),
    correct = ``pred == gold``. ``ece`` uses ``n_bins`` equal-width bins, ``adaptive_ece``
    ``n_bins`` equal-count bins (:mod:`lm_eval_evidential.metrics.calibration`); ``nll`` (nats)
    and ``brier`` (summed over each row's own K classes) score the whole ``E[p]`` vector
    against the gold class. Lower is better for all four; ``acc`` is the accuracy. The tasks
    must come from one producer (FingerprintMismatchError unless checked together before).
    """
    check_records_by_task(records_by_task)
    rows = []
    for task, r in records_by_task.items():
        reasons: list[str] = []
        if len(r) == 0:
            nan = float("nan")
            rows.append(
                finish_row(
                    dict(task=task, ece=nan, adaptive_ece=nan, nll=nan, brier=nan, acc=nan),
                    [f"task {task!r} has no records (0 examples)"],
                )
            )
            continue
        probs = r.probs
        rows.append(
            finish_row(
                {
                    "task": task,
                    "ece": collect(reasons, ece, r.max_prob, r.correct, n_bins),
                    "adaptive_ece": collect(reasons, adaptive_ece, r.max_prob, r.correct, n_bins),
                    "nll": collect(reasons, nll, probs, r.gold),
                    "brier": collect(reasons, brier, probs, r.gold),
                    "acc": float(np.mean(r.correct)),
                },
                reasons,
            )
        )
    return [CalibrationRow.of(row) for row in rows]


# ------------------------------------------------------------------ selective prediction


@refuses_permuted
def selective_rows(
    records_by_task, scores: Sequence[str] | None = None, coverage: float = RISK_COVERAGE
) -> list[SelectiveRow]:
    """One row per (task, score): :func:`selective_keys` (+ ``reason``).

    Does the score rank right answers above wrong ones? ``prr_<cap>``: prediction rejection
    ratio with rejection capped at ``cap`` (1 = oracle, 0 = random, higher is better; Goloburda et al.
    2026, §4.1); ``prr_normalized``: lm-polygraph's normalised PRR over the whole rejection range
    (its name and normalisation); ``aurc``: area under the risk-coverage curve, ``eaurc`` its excess
    over a perfect ranking, ``augrc``: area under the generalized risk-coverage curve (Traub et al.
    2024), ``risk_at_<coverage>``: the error rate of the ``coverage`` most confident share (all
    four lower is better); ``spearman``: rank correlation of score and correctness (higher is
    better). See
    :mod:`lm_eval_evidential.metrics.selective`. ``scores`` defaults to every score the task's
    records can give; an alpha score asked of softmax records is a NaN row with a reason. The
    tasks must come from one producer (unless checked together before).
    """
    check_records_by_task(records_by_task)
    names = check_scores(scores)
    keys = selective_keys(coverage)
    rows = []
    for task, r in records_by_task.items():
        every = without_k1_undefined(available_scores(r.has_alpha, has_members=r.has_members), r)
        lacking = computable_scores(names or every, r.has_alpha, r.has_members)[1]
        for name in names or every:
            row = {"task": task, "score": name}
            nan_row = {**row, **{k: float("nan") for k in keys[2:]}}
            if name in lacking:
                rows.append(finish_row(nan_row, [no_alpha_reason(name, [task])]))
                continue
            if len(r) == 0:
                rows.append(finish_row(nan_row, [f"task {task!r} has no records (0 examples)"]))
                continue
            s = record_scores(r, [name])[name]
            reasons: list[str] = []
            # One sort of the score for every metric (the metrics one by one sorted it 8 times), and for the
            # order audit's dense ranks of this task (order_rows).
            ranking = Ranking(s) if s.dtype == np.float64 and s.ndim == 1 else None
            row.update(
                collect(reasons, selective_report, s, r.correct, prr_caps=PRR_CAPS, coverage=coverage, ranking=ranking)
            )
            if ranking is not None:
                keep_dense_ranks(r, name, ranking)
            rows.append(finish_row(row, reasons))
    return [SelectiveRow.of(row) for row in rows]


# ------------------------------------------------------------------ ATC / DoC


@refuses_permuted
def atc_rows(
    id_records,
    target_records: Sequence,
    scores: Sequence[str] | None = None,
) -> list[ATCRow]:
    """Label-free accuracy estimates on each target task, compared with its true accuracy.

    One row per (target, score, method) with keys ``id_task, target_task, score, estimate,
    true_acc, abs_error, method`` (+ ``reason``):

    - ``method="atc"`` (Average Thresholded Confidence, Garg et al. 2022; Maaz et al. 2023, §2.1):
      the threshold ``t`` is learned on the labelled ID records (share of ID scores ``>= t``
      = ID accuracy), the estimate is the share of target scores ``>= t``. It uses the score
      only through its order (Maaz et al. 2023, Lemma 1), so order-equivalent scores give the same
      estimate (see :func:`order_rows`).
    - ``method="doc"`` (difference of confidences, Guillory et al. 2021): ``acc_ID -
      (mean score_ID - mean score_target)``. Only for :data:`PROBABILITY_SCORES`
      (``max_prob``), the one score on the accuracy scale; other scores get no DoC row.

    The targets are *treated* as unlabelled; their gold labels (always in our records) give
    ``true_acc`` and ``abs_error = |estimate - true_acc|``. A more confident target gets a
    higher (never lower) ATC estimate. When ID and target differ in K, every registered score's
    range moves with K (the table in :mod:`lm_eval_evidential.metrics.scores`), so the estimate mixes the accuracy
    shift with the class-count shift. ``scores`` defaults to the scores both the ID and every
    target's records can give. ID and targets must come from one producer (unless checked
    together before). The ATC estimates are
    :func:`~lm_eval_evidential.metrics.accuracy_estimation.atc_by_score`'s.
    """
    targets = list(target_records) if not hasattr(target_records, "has_alpha") else [target_records]
    check_records_by_task({r.task: r for r in (id_records, *targets)})
    names = check_scores(scores)
    id_task = id_records.task
    if names is None:
        has_alpha = id_records.has_alpha and all(t.has_alpha for t in targets)
        names = without_k1_undefined(available_scores(has_alpha), id_records, *targets)
    rows = []
    for target in targets:
        n_t = len(target)
        true_acc = float(np.mean(target.correct)) if n_t else float("nan")
        lacking = list(dict.fromkeys(t.task for t in (id_records, target) if not t.has_alpha))
        usable = computable_scores(names, not lacking)[0]
        reasons: list[str] = []
        if len(id_records) == 0:
            reasons.append(f"ID task {id_task!r} has no records, so no threshold can be learned")
        elif n_t == 0:
            reasons.append(f"target task {target.task!r} has no records (0 examples)")
        estimates = _atc_doc_estimates(id_records, target, usable, lacking, reasons) if not reasons and usable else {}
        for name in names:
            for method in ("atc", "doc") if name in PROBABILITY_SCORES else ("atc",):
                row = {
                    "id_task": id_task,
                    "target_task": target.task,
                    "score": name,
                    "estimate": float("nan"),
                    "true_acc": true_acc,
                    "abs_error": float("nan"),
                    "method": method,
                }
                if name not in usable:
                    rows.append(finish_row(row, [no_alpha_reason(name, lacking)]))
                    continue
                row["estimate"] = estimates.get((name, method), float("nan"))
                row["abs_error"] = abs(row["estimate"] - true_acc)
                rows.append(finish_row(row, reasons))
    return [ATCRow.of(row) for row in rows]


def _atc_doc_estimates(id_records, target, usable: Sequence[str], lacking: list[str], reasons: list[str]) -> dict:
    """:func:`atc_rows`'s ``{(score, method): estimate}`` of one target: ATC for every usable score, DoC for the
    probability scores; what could not be computed is added to ``reasons``."""
    both_alpha = not lacking
    if both_alpha:  # atc_by_score on the kept scores (record_scores: the same inputs), not computed again
        s_id, s_t = record_scores(id_records, usable), record_scores(target, usable)
        estimates = {(name, "atc"): collect(reasons, atc, s_id[name], id_records.correct, s_t[name]) for name in usable}
        return _with_doc_estimates(estimates, id_records, target, usable, reasons)
    id_in, t_in = (
        score_inputs(r) if both_alpha else {**score_inputs(r), "probs": r.probs, "alpha": None, "member_logits": None}
        for r in (id_records, target)
    )
    estimates = {
        (name, "atc"): v
        for name, v in collect(
            reasons,
            atc_by_score,
            id_in["probs"],
            id_in["k"],
            id_records.correct,
            t_in["probs"],
            t_in["k"],
            names=usable,
            id_alpha=id_in["alpha"],
            target_alpha=t_in["alpha"],
            prior_weight=id_records.prior_weight,
            id_member_logits=id_in.get("member_logits"),
            target_member_logits=t_in.get("member_logits"),
            id_logits=answer_logits(id_records, usable),
            target_logits=answer_logits(target, usable),
        ).items()
    }
    return _with_doc_estimates(estimates, id_records, target, usable, reasons)


def _with_doc_estimates(estimates: dict, id_records, target, usable: Sequence[str], reasons: list[str]) -> dict:
    for name in (n for n in usable if n in PROBABILITY_SCORES):
        s_id, s_t = (record_scores(r, [name])[name] for r in (id_records, target))
        estimates[name, "doc"] = collect(reasons, doc_estimate, s_id, id_records.correct, s_t)
    return estimates


# ------------------------------------------------------------------ orderings


@refuses_permuted
def order_rows(records_by_task, scores: Sequence[str] | None = None) -> list[OrderRow]:
    """One row per task and unordered score pair: ``task, score_a, score_b, discordant_fraction,
    order_equivalent`` (+ ``reason``).

    ``discordant_fraction``: share of example pairs the two scores order oppositely (ties are
    not discordant). ``order_equivalent``: True iff no pair is discordant *and* no pair is tied
    under exactly one of them, i.e. the scores are order-isomorphic on this task (Maaz et al. 2023,
    Definition 1), so AUROC, AUPR, PRR, AURC and ATC are identical for both. The numbers are
    :func:`lm_eval_evidential.metrics.score_orders.order_audit`'s. ``scores`` defaults to
    every score the task's records can give (alpha scores requested of softmax records are
    skipped, with NaN rows and a reason). The tasks must come from one producer (unless
    checked together before).
    """
    check_records_by_task(records_by_task)
    names = check_scores(scores)
    rows = []
    for task, r in records_by_task.items():
        wanted = names or without_k1_undefined(available_scores(r.has_alpha, has_members=r.has_members), r)
        usable = computable_scores(wanted, r.has_alpha, r.has_members)[0]
        reasons: list[str] = []
        audited = {}
        if len(r) < 2:
            reasons.append(f"task {task!r} has {len(r)} example(s); comparing orders needs at least one pair")
        elif len(usable) >= 2:
            # order_audit on the kept scores (record_scores) is score_order_audit without computing them again.
            audit = collect(reasons, order_audit, record_scores(r, usable), ranks=taken_dense_ranks(r))
            audited = {(a["score_a"], a["score_b"]): a for a in audit}
        for i, a in enumerate(wanted):
            for b in wanted[i + 1 :]:
                row = {
                    "task": task,
                    "score_a": a,
                    "score_b": b,
                    "discordant_fraction": float("nan"),
                    "order_equivalent": False,
                }
                got = audited.get((a, b))
                if got is None:
                    missing = [n for n in (a, b) if n not in usable]
                    rows.append(finish_row(row, [no_alpha_reason(n, [task]) for n in missing] + reasons))
                    continue
                row["discordant_fraction"] = got["discordant_fraction"]
                row["order_equivalent"] = bool(got["order_equivalent"])
                rows.append(finish_row(row, [got.get("reason", ""), *reasons]))
    return [OrderRow.of(row) for row in rows]


def equivalence_groups(rows: Sequence[Mapping]) -> dict[str, list[list[str]]]:
    """``{task: [[score, score, ...], ...]}``: the groups of order-equivalent scores (two or more) of
    :func:`order_rows`' pairs, joined transitively.

    >>> pairs = [("a", "b", True), ("b", "c", True), ("a", "d", False)]
    >>> equivalence_groups([{"task": "t", "score_a": a, "score_b": b, "order_equivalent": e} for a, b, e in pairs])
    {'t': [['a', 'b', 'c']]}
    """
    groups: dict[str, list[list[str]]] = {}
    for task in dict.fromkeys(r["task"] for r in rows):
        parent: dict[str, str] = {}

        def find(x: str, parent: dict[str, str] = parent) -> str:
            while parent.setdefault(x, x) != x:
                x = parent[x]
            return x

        for r in (r for r in rows if r["task"] == task):
            a, b = find(r["score_a"]), find(r["score_b"])
            if r["order_equivalent"] and a != b:
                parent[b] = a
        members: dict[str, list[str]] = {}
        for score in parent:
            members.setdefault(find(score), []).append(score)
        groups[task] = [m for m in members.values() if len(m) > 1]
    return groups
