"""Post-hoc temperature scaling of saved records: fitted on ID validation records, applied to the ID
test part and each OOD task, calibration and OOD detection before and after in one table.

The temperature (:func:`lm_eval_evidential.metrics.temperature.fit_temperature`, Guo et al. 2017)
is fitted by NLL on held-out ID records (a seeded share of the ID task or a separate task, as
for conformal sets: :func:`lm_eval_evidential.audits.conformal.split_calibration`) and is kept
in every row (``temperature``), never applied silently. Rows per evaluated set, one per
probability vector:

- ``records``: the records' own predictive probabilities (E[p] = alpha/S for EDL records, the
  softmax of the answer logits otherwise), what every other audit uses;
- ``softmax(z)``: the softmax of the answer logits at T = 1 (EDL records only: for softmax
  records it is the ``records`` row);
- ``softmax(z/T)``: the same logits at the fitted T.

Calibration (ECE with 15 bins, NLL, Brier, accuracy: :mod:`lm_eval_evidential.metrics.calibration`)
on every set; OOD detection (AUROC, AUPR-In, FPR@95 with ID positive, of ``max_prob`` of that
probability vector, ID test part vs the OOD task: :func:`lm_eval_evidential.metrics.detection.detection_report`)
on OOD rows, after the K check of ``ood`` (a K-mismatched OOD task is refused under
``assert``). The records T is fitted on and the ID test part share one K, by the rule of conformal
sets (:func:`lm_eval_evidential.audits.conformal.check_calibration_k`): a calibration task of another
K is refused under ``assert`` with the remedy, ``restrict`` keeps the ID test examples of the
calibration K, ``report`` computes and marks every row ``matched: false``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lm_eval_evidential.metrics.calibration import brier, ece, nll
from lm_eval_evidential.metrics.cardinality import check_cardinality
from lm_eval_evidential.metrics.detection import detection_report
from lm_eval_evidential.metrics.dirichlet import softmax
from lm_eval_evidential.metrics.temperature import fit_temperature, scaled_softmax, temperature_nll
from lm_eval_evidential.records import Records, check_same_producer
from lm_eval_evidential.records.orders import refuses_permuted

from ._common import collect, finish_row
from .conformal import check_calibration_k
from .ood import k_summary, subset_records
from .table import AuditRow, column, k_column, matched_column, reason_field

__all__ = ["TemperatureRow", "TEMPERATURE_KEYS", "K_MISMATCH_REASON", "Fit", "fit", "temperature_rows"]

#: Why a temperature is not carried across K (said once after a calibration refusal).
K_MISMATCH_REASON = (
    "a temperature fitted on questions with one K is not the temperature of questions with another: the softmax "
    "over K options, its NLL and its max-prob all depend on K itself."
)


@dataclass(frozen=True, eq=False)
class TemperatureRow(AuditRow):
    """One evaluated set under one probability vector (:func:`temperature_rows`): calibration, and max-prob OOD
    detection against the ID test part on OOD rows (None on the ID rows)."""

    set: str = column("set")
    role: str = column("role")
    probs: str = column("probs")
    temperature: float | None = column("T", "temperature")
    k: int | dict = k_column()
    n: int = column("n")
    matched: bool = matched_column()
    acc: float = column("acc")
    ece: float = column("ECE")
    nll: float = column("NLL")
    brier: float = column("Brier")
    auroc: float | None = column("AUROC", "optional")
    aupr_in: float | None = column("AUPR-In", "optional")
    fpr95: float | None = column("FPR95", "optional")
    validation: str = column("validation")
    reason: str | None = reason_field()


TEMPERATURE_KEYS = TemperatureRow.field_names()[:-1]  # ``reason`` only where a number is NaN


class Fit:
    """A fitted temperature, what it was fitted on, and the validation NLL before and after."""

    def __init__(self, records: Records, description: str):
        self.records, self.description, self.reasons = records, description, []
        self.temperature = collect(self.reasons, fit_temperature, records.logits, records.gold)
        self.nll_before = collect(self.reasons, temperature_nll, records.logits, records.gold, 1.0)
        self.nll_after = (
            collect(self.reasons, temperature_nll, records.logits, records.gold, self.temperature)
            if math.isfinite(self.temperature)
            else math.nan
        )

    def line(self) -> str:
        return (
            f"temperature: T = {self.temperature:.4g} fitted by NLL on {self.description} (n = {len(self.records)}): "
            f"validation NLL {self.nll_before:.4f} at T = 1 -> {self.nll_after:.4f} at T"
        )


@refuses_permuted
def fit(records: Records, description: str | None = None) -> Fit:
    """The temperature of ``records``' answer logits (Guo et al. 2017), with its validation NLL."""
    return Fit(records, description or records.task)


def _variants(records: Records, temperature: float) -> list[tuple[str, float | None, np.ndarray]]:
    out = [("records", None, records.probs)]
    if records.has_alpha:
        out.append(("softmax(z)", 1.0, softmax(records.logits)))
    if math.isfinite(temperature):
        out.append(("softmax(z/T)", temperature, scaled_softmax(records.logits, temperature)))
    return out


def _max_prob(p: np.ndarray) -> np.ndarray:
    return np.nanmax(p, axis=1)


@refuses_permuted
def temperature_rows(fitted: Fit, id_test: Records, ood: list[Records], *, k_policy: str = "assert"):
    """``(rows, refusals)``: :data:`TEMPERATURE_KEYS` rows for the ID test part and each OOD task that
    passes the K check against it (``refusals``: ``(id_task, ood_task, CardinalityMismatchError)``).

    First the records T was fitted on and the ID test part (:func:`check_calibration_k`); where that is
    refused, so is every row (``([], [("calibration " + fitted.description, id_test.task, error)])``)."""
    from lm_eval_evidential.metrics.cardinality import CardinalityMismatchError

    check_same_producer([fitted.records, id_test, *ood])
    try:
        cal_check = check_calibration_k(fitted.records, fitted.description, id_test, role="id", k_policy=k_policy)
    except CardinalityMismatchError as exc:
        return [], [(f"calibration {fitted.description}", id_test.task, exc)]
    id_test = subset_records(id_test, cal_check.keep_ood)
    t = fitted.temperature
    id_variants = _variants(id_test, t)
    rows, refusals = [], []
    sets = [("id", id_test, None)]
    for r in ood:
        try:
            check = check_cardinality(id_test.k, r.k, policy=k_policy, id_name=id_test.task, ood_name=r.task)
        except CardinalityMismatchError as exc:
            refusals.append((id_test.task, r.task, exc))
            continue
        sets.append(("ood", subset_records(r, check.keep_ood), check))
    for role, records, check in sets:
        for (name, temp, p), (_, _, p_id) in zip(_variants(records, t), id_variants):
            reasons = list(fitted.reasons)
            mp = _max_prob(p)
            row = {
                "set": records.task,
                "role": role,
                "probs": name,
                "temperature": temp,
                "k": k_summary(records.k),
                "n": len(records),
                "matched": bool(cal_check.matched) and (check is None or bool(check.matched)),
                "acc": float(np.mean(records.correct)),
                "ece": collect(reasons, ece, mp, records.correct),
                "nll": collect(reasons, nll, p, records.gold),
                "brier": collect(reasons, brier, p, records.gold),
                "auroc": None,  # OOD rows only (ID test part vs the OOD task)
                "aupr_in": None,
                "fpr95": None,
                "validation": fitted.description,
            }
            if role == "ood":
                y = np.r_[np.ones(len(id_test), dtype=bool), np.zeros(len(records), dtype=bool)]
                rep = collect(reasons, detection_report, y, np.concatenate([_max_prob(p_id), mp]))
                row.update(auroc=rep["auroc"], aupr_in=rep["aupr_in"], fpr95=rep["fpr_at_tpr"])
            rows.append(TemperatureRow.of(finish_row(row, reasons)))
    return rows, refusals
