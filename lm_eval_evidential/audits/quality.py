"""Beyond AUROC: calibration, selective prediction, label-free accuracy estimates, score orderings.

Row-producing audits over loaded :class:`~lm_eval_evidential.records.Records` (one per task),
shared by the ``calibration``, ``selective``, ``atc``, ``orders`` and ``report`` commands.
Each function returns a list of plain dicts (one per table row) whose numbers come straight
from the numpy core (:mod:`lm_eval_evidential.metrics`); nothing is re-implemented here.

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

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from ..metrics._validation import UndefinedMetricWarning
from ..metrics.accuracy_estimation import atc_estimate, atc_threshold, doc_estimate
from ..metrics.calibration import adaptive_ece, brier, ece, nll
from ..metrics.score_orders import order_audit
from ..metrics.scores import SCORES, available_scores, compute_score
from ..metrics.selective import aurc, prr, spearman

__all__ = [
    "PRR_CAPS",
    "PROBABILITY_SCORES",
    "CALIBRATION_KEYS",
    "SELECTIVE_KEYS",
    "ATC_KEYS",
    "ORDER_KEYS",
    "check_scores",
    "parse_names",
    "parse_scores",
    "reason_lines",
    "load_records_by_task",
    "calibration_rows",
    "selective_rows",
    "atc_rows",
    "order_rows",
]

#: Rejection caps of the PRR columns: 0.5 (earlier work) and 0.75 (paper 004 §4.1).
PRR_CAPS = (0.5, 0.75)

#: Scores that are a probability of the prediction being right, on the accuracy scale, so that
#: DoC ("accuracy drop = confidence drop") means something. Other scores in [0, 1] (e.g.
#: ``l2_to_uniform``) would give DoC a number with no accuracy meaning; ATC needs no such scale.
PROBABILITY_SCORES = ("max_prob",)

CALIBRATION_KEYS = ("task", "ece", "adaptive_ece", "nll", "brier", "acc")
SELECTIVE_KEYS = ("task", "score", *(f"prr_{c}" for c in PRR_CAPS), "aurc", "spearman")
ATC_KEYS = ("id_task", "target_task", "score", "estimate", "true_acc", "abs_error", "method")
ORDER_KEYS = ("task", "score_a", "score_b", "discordant_fraction", "order_equivalent")


# ------------------------------------------------------------------ helpers


def _call(reasons: list[str], fn, *args, **kwargs) -> float:
    """``fn(*args, **kwargs)``, appending any UndefinedMetricWarning message to ``reasons``.

    The message goes into the row's ``reason`` instead of stderr; other warnings are re-issued.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = fn(*args, **kwargs)
    for w in caught:
        if issubclass(w.category, UndefinedMetricWarning):
            reasons.append(str(w.message))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return value


def _finish(row: dict, reasons: Iterable[str]) -> dict:
    """Add ``reason`` (unique messages, in order) when any number in the row is NaN."""
    if any(isinstance(v, float) and math.isnan(v) for v in row.values()):
        unique = list(dict.fromkeys(r for r in reasons if r))
        row["reason"] = "; ".join(unique) if unique else "undefined on these records"
    return row


def check_scores(scores: Sequence[str] | None) -> list[str] | None:
    """Validate score names against the registry; None stays None (= every available score)."""
    if scores is None:
        return None
    if isinstance(scores, str):
        scores = [scores]
    names = list(dict.fromkeys(scores))
    unknown = [s for s in names if s not in SCORES]
    if unknown:
        raise ValueError(f"unknown score(s) {unknown}; valid scores are: {', '.join(SCORES)}")
    if not names:
        raise ValueError(f"no score names given; valid scores are: {', '.join(SCORES)}")
    return names


def parse_names(text: str | None, what: str = "task") -> list[str] | None:
    """Comma-separated names (``"a,b , c"`` -> ``["a", "b", "c"]``, duplicates dropped); None stays None."""
    if text is None:
        return None
    names = list(dict.fromkeys(t.strip() for t in str(text).split(",") if t.strip()))
    if not names:
        raise ValueError(f"no {what} names in {text!r}; give one or more, separated by commas")
    return names


def parse_scores(text: str | None) -> list[str] | None:
    """Comma-separated score names, validated against the registry; None = every available score."""
    return check_scores(parse_names(text, "score"))


def reason_lines(rows: Sequence[dict], label_keys: Sequence[str]) -> list[str]:
    """``"<labels>: <reason>"`` for each row that has a ``reason`` (for printing under a table)."""
    return [f"{' / '.join(str(r[k]) for k in label_keys)}: {r['reason']}" for r in rows if r.get("reason")]


def _check_records_by_task(records_by_task) -> None:
    if not isinstance(records_by_task, Mapping):
        raise ValueError(
            f"records_by_task must map task name -> Records, got {type(records_by_task).__name__}; "
            "load them with lm_eval_evidential.audits.quality.load_records_by_task"
        )


def _no_alpha_reason(name: str, tasks: Sequence[str]) -> str:
    return (
        f"score {name!r} needs Dirichlet alpha, but the records of {', '.join(tasks)} are method=softmax "
        f"(no evidence); use one of {', '.join(available_scores(False))}"
    )


class _Scorer:
    """Per-example scores of one Records, computed once per name (E[p] derived once)."""

    def __init__(self, records):
        self.records = records
        self._probs = None
        self._cache: dict[str, np.ndarray] = {}

    def __call__(self, name: str) -> np.ndarray:
        if name not in self._cache:
            r = self.records
            if r.has_alpha:
                # probs=None: compute_score derives alpha / S itself from the validated alpha.
                s = compute_score(name, probs=None, k=r.k, alpha=r.alpha, prior_weight=r.prior_weight)
            else:
                if self._probs is None:
                    self._probs = r.probs
                s = compute_score(name, probs=self._probs, k=r.k, alpha=None, prior_weight=r.prior_weight)
            self._cache[name] = s
        return self._cache[name]


def load_records_by_task(output_path, tasks: Iterable[str], run: str | None = None) -> dict:
    """``{task: Records}`` for each task (duplicates dropped), from the ``--output_path`` folder.

    Each task takes the newest run that has it, or the run ``run`` (a date_id). Raises
    FileNotFoundError naming the ``lm_eval`` command to run first when a task has no records.
    """
    from ..records import load_records

    return {task: load_records(output_path, task, run=run) for task in dict.fromkeys(tasks)}


# ------------------------------------------------------------------ calibration


def calibration_rows(records_by_task, n_bins: int = 15) -> list[dict]:
    """One row per task: ``task, ece, adaptive_ece, nll, brier, acc`` (+ ``reason`` if NaN).

    Confidence = ``max_prob`` (the predicted class's ``E[p]``; softmax for ``method=softmax``),
    correct = ``pred == gold``. ``ece`` uses ``n_bins`` equal-width bins, ``adaptive_ece``
    ``n_bins`` equal-count bins (:mod:`lm_eval_evidential.metrics.calibration`); ``nll`` (nats)
    and ``brier`` (summed over each row's own K classes) score the whole ``E[p]`` vector
    against the gold class. Lower is better for all four; ``acc`` is the accuracy.
    """
    _check_records_by_task(records_by_task)
    rows = []
    for task, r in records_by_task.items():
        reasons: list[str] = []
        if len(r) == 0:
            nan = float("nan")
            rows.append(_finish(dict(task=task, ece=nan, adaptive_ece=nan, nll=nan, brier=nan, acc=nan),
                                [f"task {task!r} has no records (0 examples)"]))
            continue
        probs = r.probs
        rows.append(_finish({
            "task": task,
            "ece": _call(reasons, ece, r.max_prob, r.correct, n_bins),
            "adaptive_ece": _call(reasons, adaptive_ece, r.max_prob, r.correct, n_bins),
            "nll": _call(reasons, nll, probs, r.gold),
            "brier": _call(reasons, brier, probs, r.gold),
            "acc": float(np.mean(r.correct)),
        }, reasons))
    return rows


# ------------------------------------------------------------------ selective prediction


def selective_rows(records_by_task, scores: Sequence[str] | None = None) -> list[dict]:
    """One row per (task, score): ``task, score, prr_0.5, prr_0.75, aurc, spearman`` (+ ``reason``).

    Does the score rank right answers above wrong ones? ``prr_<cap>``: prediction rejection
    ratio with rejection capped at ``cap`` (1 = oracle, 0 = random, higher is better; paper
    004 §4.1); ``aurc``: area under the risk-coverage curve (lower is better); ``spearman``:
    rank correlation of score and correctness (higher is better). See
    :mod:`lm_eval_evidential.metrics.selective`. ``scores`` defaults to every score the task's
    records can give; an alpha score asked of softmax records is a NaN row with a reason.
    """
    _check_records_by_task(records_by_task)
    names = check_scores(scores)
    rows = []
    for task, r in records_by_task.items():
        scorer = _Scorer(r)
        for name in names or available_scores(r.has_alpha):
            row = {"task": task, "score": name}
            nan_row = {**row, **{f"prr_{c}": float("nan") for c in PRR_CAPS}, "aurc": float("nan"),
                       "spearman": float("nan")}
            if SCORES[name].needs_alpha and not r.has_alpha:
                rows.append(_finish(nan_row, [_no_alpha_reason(name, [task])]))
                continue
            if len(r) == 0:
                rows.append(_finish(nan_row, [f"task {task!r} has no records (0 examples)"]))
                continue
            s = scorer(name)
            reasons: list[str] = []
            for cap in PRR_CAPS:
                row[f"prr_{cap}"] = _call(reasons, prr, s, r.correct, cap)
            row["aurc"] = _call(reasons, aurc, s, r.correct)
            row["spearman"] = _call(reasons, spearman, s, r.correct)
            rows.append(_finish(row, reasons))
    return rows


# ------------------------------------------------------------------ ATC / DoC


def atc_rows(id_records, target_records: Sequence, scores: Sequence[str] | None = None) -> list[dict]:
    """Label-free accuracy estimates on each target task, compared with its true accuracy.

    One row per (target, score, method) with keys ``id_task, target_task, score, estimate,
    true_acc, abs_error, method`` (+ ``reason``):

    - ``method="atc"`` (Average Thresholded Confidence, Garg et al. 2022; paper 003 §2.1):
      the threshold ``t`` is learned on the labelled ID records (share of ID scores ``>= t``
      = ID accuracy), the estimate is the share of target scores ``>= t``. It uses the score
      only through its order (paper 003 Lemma 1), so order-equivalent scores give the same
      estimate (see :func:`order_rows`).
    - ``method="doc"`` (difference of confidences, Guillory et al. 2021): ``acc_ID -
      (mean score_ID - mean score_target)``. Only for :data:`PROBABILITY_SCORES`
      (``max_prob``), the one score on the accuracy scale; other scores get no DoC row.

    The targets are *treated* as unlabelled; their gold labels (always in our records) give
    ``true_acc`` and ``abs_error = |estimate - true_acc|``. A more confident target gets a
    higher (never lower) ATC estimate. When ID and target differ in K, every registered score's
    range moves with K (the table in ``core/scores.py``), so the estimate mixes the accuracy
    shift with the class-count shift. ``scores`` defaults to the scores both the ID and every
    target's records can give.
    """
    targets = list(target_records) if not hasattr(target_records, "has_alpha") else [target_records]
    names = check_scores(scores)
    id_task = id_records.task
    if names is None:
        names = available_scores(id_records.has_alpha and all(t.has_alpha for t in targets))
    id_scorer = _Scorer(id_records)
    thresholds: dict[str, tuple[float, list[str]]] = {}

    def threshold(name):
        # Learned once per score on the ID split, reused for every target.
        if name not in thresholds:
            if len(id_records) == 0:
                thresholds[name] = (float("nan"), [f"ID task {id_task!r} has no records, so no threshold can be learned"])
            else:
                thresholds[name] = (atc_threshold(id_scorer(name), id_records.correct), [])
        return thresholds[name]

    rows = []
    for target in targets:
        t_scorer = _Scorer(target)
        n_t = len(target)
        true_acc = float(np.mean(target.correct)) if n_t else float("nan")
        for name in names:
            methods = ("atc", "doc") if name in PROBABILITY_SCORES else ("atc",)
            for method in methods:
                reasons: list[str] = []
                row = {"id_task": id_task, "target_task": target.task, "score": name, "estimate": float("nan"),
                       "true_acc": true_acc, "abs_error": float("nan"), "method": method}
                lacking = [t.task for t in (id_records, target) if not t.has_alpha]
                if SCORES[name].needs_alpha and lacking:
                    rows.append(_finish(row, [_no_alpha_reason(name, list(dict.fromkeys(lacking)))]))
                    continue
                if n_t == 0:
                    rows.append(_finish(row, [f"target task {target.task!r} has no records (0 examples)"]))
                    continue
                if method == "atc":
                    t, why = threshold(name)
                    reasons += why
                    if not math.isnan(t):
                        row["estimate"] = _call(reasons, atc_estimate, t, t_scorer(name))
                elif len(id_records) == 0:
                    reasons.append(f"ID task {id_task!r} has no records")
                else:
                    row["estimate"] = _call(reasons, doc_estimate, id_scorer(name), id_records.correct, t_scorer(name))
                row["abs_error"] = abs(row["estimate"] - true_acc)
                rows.append(_finish(row, reasons))
    return rows


# ------------------------------------------------------------------ orderings


def order_rows(records_by_task, scores: Sequence[str] | None = None) -> list[dict]:
    """One row per task and unordered score pair: ``task, score_a, score_b, discordant_fraction,
    order_equivalent`` (+ ``reason``).

    ``discordant_fraction``: share of example pairs the two scores order oppositely (ties are
    not discordant). ``order_equivalent``: True iff no pair is discordant *and* no pair is tied
    under exactly one of them, i.e. the scores are order-isomorphic on this task (paper 003,
    Definition 1), so AUROC, AUPR, PRR, AURC and ATC are identical for both. See
    :func:`lm_eval_evidential.metrics.score_orders.order_audit`. ``scores`` defaults to every score
    the task's records can give (alpha scores requested of softmax records are skipped, with
    NaN rows and a reason).
    """
    _check_records_by_task(records_by_task)
    names = check_scores(scores)
    rows = []
    for task, r in records_by_task.items():
        wanted = names or available_scores(r.has_alpha)
        usable = [n for n in wanted if r.has_alpha or not SCORES[n].needs_alpha]
        scorer = _Scorer(r)
        reasons: list[str] = []
        audited = {}
        if len(r) < 2:
            reasons.append(f"task {task!r} has {len(r)} example(s); comparing orders needs at least one pair")
        elif len(usable) >= 2:
            audit = _call(reasons, order_audit, {n: scorer(n) for n in usable})
            audited = {(a["score_a"], a["score_b"]): a for a in audit}
        for i, a in enumerate(wanted):
            for b in wanted[i + 1:]:
                row = {"task": task, "score_a": a, "score_b": b, "discordant_fraction": float("nan"),
                       "order_equivalent": False}
                got = audited.get((a, b))
                if got is None:
                    missing = [n for n in (a, b) if n not in usable]
                    rows.append(_finish(row, [_no_alpha_reason(n, [task]) for n in missing] + reasons))
                    continue
                row["discordant_fraction"] = got["discordant_fraction"]
                row["order_equivalent"] = bool(got["order_equivalent"])
                rows.append(_finish(row, [got.get("reason", ""), *reasons]))
    return rows
