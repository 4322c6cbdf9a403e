"""Conformal prediction sets of saved records under the K rules: calibrate once, evaluate each set.

The threshold is calibrated on held-out in-distribution records (a seeded split of the ID task,
:func:`split_calibration`, or a separate calibration task) and applied to the ID test part and to
each OOD task. Rows (:data:`CONFORMAL_KEYS`) give coverage, mean set size and UAcc with bootstrap
intervals, the shares of empty and full sets, coverage per set size and per K. The formulas and
conventions (quantile level, ties, empty sets) are in :mod:`lm_eval_evidential.metrics.conformal`.

K rules. A prediction set over 5 options is not comparable with one over 4, and a threshold
calibrated on 4-option questions says nothing about 5-option ones: every evaluated set goes
through :func:`~lm_eval_evidential.metrics.cardinality.check_cardinality` against the calibration
records under ``k_policy`` (``assert`` refuses a K mismatch with the remedy, ``restrict`` keeps
the evaluated examples with the calibration K, ``report`` computes anyway and marks the row
``matched: false``). Coverage is reported per K in every row (``coverage_by_k``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.metrics.cardinality import check_cardinality, format_k
from lm_eval_evidential.metrics.conformal import (
    ALPHA,
    K_REG,
    LAM,
    RAPS_K_REG,
    RAPS_LAMBDA,
    conformal_quantile,
    nonconformity,
    prediction_sets,
    set_summary,
    set_summary_ci,
)
from lm_eval_evidential.metrics.intervals import SEED
from lm_eval_evidential.params import Interval, Param, Real, validate_params
from lm_eval_evidential.records import Records, check_same_producer
from lm_eval_evidential.records.orders import refuses_permuted

from ._common import collect, finish_row
from .ood import k_summary, subset_records
from .table import AuditRow, column, k_column, matched_column, reason_field

__all__ = [
    "ConformalRow",
    "CONFORMAL_KEYS",
    "K_MISMATCH_REASON",
    "Calibration",
    "split_calibration",
    "check_calibration_k",
    "calibrate",
    "conformal_row",
]

#: Why a conformal comparison across K is refused (said once after the refusals).
K_MISMATCH_REASON = (
    "a threshold calibrated on questions with one K carries no coverage guarantee on questions with another, and "
    "a set of m of 5 options is not the statement m of 4 is: set sizes are compared only at equal K."
)


@dataclass(frozen=True, eq=False)
class ConformalRow(AuditRow):
    """One evaluated set's conformal prediction sets (:func:`conformal_row`), the threshold calibrated once."""

    set: str = column("set")
    role: str = column("role")
    method: str = column("method")
    alpha: float = column("alpha")
    k: int | dict = k_column()
    k_cal: int | dict = column("calibration K", "k")
    n: int = column("n")
    n_cal: int = column("n calibration")
    n_dropped: int = column("dropped")
    matched: bool = matched_column()
    qhat: float = column("qhat")
    coverage: float = column("coverage")
    coverage_ci: list[float] = column("coverage CI", "interval")
    mean_set_size: float = column("mean set size", digits=2)
    mean_set_size_ci: list[float] = column("mean set size CI", "interval")
    uacc: float = column("UAcc")
    uacc_ci: list[float] = column("UAcc CI", "interval")
    acc: float = column("accuracy")
    share_empty: float = column("empty")
    share_full: float = column("full")
    coverage_by_size: dict = column("coverage by set size", "shares")
    n_by_size: dict = column("n by set size")
    coverage_by_k: dict = column("coverage by K")
    calibration: str = column("calibration")
    reason: str | None = reason_field()


CONFORMAL_KEYS = ConformalRow.field_names()[:-1]  # ``reason`` only where a number is NaN


#: ``calibration_fraction``: the share of the ID records a split calibrates on (the rest are tested).
CALIBRATION_FRACTION = Param(Interval(Real, 0, 1, closed="neither"), why="the ID records calibrated on", example="0.5")


@refuses_permuted
@validate_params({"fraction": CALIBRATION_FRACTION, "seed": SEED})
def split_calibration(records: Records, fraction: float, seed: int = 0) -> tuple[Records, Records]:
    """``(calibration, test)``: a seeded random ``fraction`` of ``records`` and the rest.

    ``numpy.random.default_rng(seed).permutation``; the calibration part is the first
    ``round(fraction * n)`` examples of the permutation. Both parts must be non-empty.
    """
    f = float(fraction)
    n = len(records)
    n_cal = int(round(f * n))
    if n_cal == 0 or n_cal == n:
        part = "calibration" if n_cal == 0 else "test"
        raise InvalidValueError(
            f"a calibration fraction of {f} of {records.task}'s {n} records leaves no {part} examples; choose a "
            f"fraction between {1 / n if n else 0:.3g} and {1 - 1 / n if n else 0:.3g}, or give a separate "
            "calibration task"
        )
    order = np.random.default_rng(seed).permutation(n)
    keep = np.zeros(n, dtype=bool)
    keep[order[:n_cal]] = True
    return subset_records(records, keep), subset_records(records, ~keep)


@refuses_permuted
def check_calibration_k(
    calibration: Records, description: str, records: Records, *, role: str, k_policy: str = "assert"
):
    """The one K rule of every audit calibrated on held-out records (conformal sets, temperature scaling): the
    calibration records and each evaluated set share one K, checked under ``k_policy`` by
    :func:`~lm_eval_evidential.metrics.cardinality.check_cardinality` (the calibration records are its ID side).

    ``assert`` refuses a mismatch (:class:`~lm_eval_evidential.metrics.cardinality.CardinalityMismatchError`,
    worded "K mismatch between the calibration and the evaluated records"); where the ID test set (``role``
    ``id``) has another K than a separate calibration task, the remedy is a calibration task of the ID task's K
    or a share of the ID task itself. ``restrict`` keeps the evaluated examples of the calibration K;
    ``report`` computes anyway (the row says ``matched: false``).
    """
    remedy = None
    if role == "id" and calibration.task != records.task:
        remedy = (
            f"calibrate on questions with {records.task}'s K = {format_k(k_summary(records.k))}: a --calibration-task "
            f"whose questions all have that K, or --calibration-fraction F (a share of {records.task} itself)"
        )
    return check_cardinality(
        calibration.k,
        records.k,
        policy=k_policy,
        id_name=description,
        ood_name=records.task,
        sides="the calibration and the evaluated records",
        remedy=remedy,
    )


class Calibration:
    """The calibrated threshold of one method and alpha, and what it was calibrated on."""

    @validate_params({"alpha": ALPHA, "lam": LAM, "k_reg": K_REG})
    def __init__(
        self,
        records: Records,
        *,
        alpha: float,
        method: str,
        description: str,
        lam: float = RAPS_LAMBDA,
        k_reg: int = RAPS_K_REG,
    ):
        self.records, self.alpha, self.method, self.description = records, float(alpha), method, description
        if len(records) == 0:
            raise InvalidValueError(f"the calibration records ({description}) are empty; nothing to calibrate on")
        lam, k_reg = float(lam), int(k_reg)
        #: The score's parameters (RAPS's penalty), passed to every set built with this threshold.
        self.params = {"lam": lam, "k_reg": k_reg} if method == "raps" else {}
        self.scores = nonconformity(records.probs, records.gold, method, **self.params)
        self.qhat = conformal_quantile(self.scores, self.alpha)
        self.n = len(records)
        self.rank = math.ceil(round((self.n + 1) * (1 - self.alpha), 9))

    def line(self) -> str:
        """One line saying what was calibrated on, and the threshold."""
        full = " (> n: every set is the full option set)" if math.isinf(self.qhat) else ""
        method = self.method + (
            f" (lambda = {self.params['lam']:g}, k_reg = {self.params['k_reg']})" if self.params else ""
        )
        return (
            f"calibration: {self.description}, n = {self.n}, K = {_k_text(self.records.k)}; {method}, "
            f"alpha = {self.alpha:g}: qhat = {self.qhat:.6g}, order statistic {self.rank} of {self.n} scores{full}"
        )


def _k_text(k) -> str:
    return format_k(k_summary(k))


@refuses_permuted
def calibrate(
    records: Records,
    *,
    alpha: float = 0.1,
    method: str = "lac",
    description: str | None = None,
    lam: float = RAPS_LAMBDA,
    k_reg: int = RAPS_K_REG,
):
    """A :class:`Calibration` of ``method`` at ``alpha`` on ``records`` (the threshold and its rank); ``lam`` and
    ``k_reg``: RAPS's penalty (:func:`~lm_eval_evidential.metrics.conformal.nonconformity`)."""
    return Calibration(
        records, alpha=alpha, method=method, description=description or records.task, lam=lam, k_reg=k_reg
    )


@refuses_permuted
def conformal_row(
    calibration: Calibration,
    records: Records,
    *,
    role: str,
    k_policy: str = "assert",
    n_boot: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> ConformalRow:
    """One row of :data:`CONFORMAL_KEYS` for the evaluated ``records`` (``role``: ``id`` or ``ood``).

    The K of ``records`` is checked against the calibration records' under ``k_policy``
    (:class:`~lm_eval_evidential.metrics.cardinality.CardinalityMismatchError`, a refusal, under
    ``assert``). ``coverage``, ``mean_set_size`` and ``uacc`` get ``level`` percentile-bootstrap
    intervals (``*_ci``) over the evaluated examples, the threshold held fixed.
    """
    cal = calibration.records
    check_same_producer([cal, records])
    if len(records) == 0:
        raise InvalidValueError(f"task {records.task!r} has no records (0 examples); nothing to evaluate")
    check = check_calibration_k(cal, calibration.description, records, role=role, k_policy=k_policy)
    kept = subset_records(records, check.keep_ood)
    sets = prediction_sets(kept.probs, calibration.qhat, calibration.method, **calibration.params)
    reasons: list[str] = []
    summary = collect(reasons, set_summary, sets, kept.k, kept.gold, kept.correct)
    cis = collect(reasons, set_summary_ci, sets, kept.k, kept.gold, kept.correct, n_boot=n_boot, level=level, seed=seed)
    row = {
        "set": records.task,
        "role": role,
        "method": calibration.method,
        "alpha": calibration.alpha,
        "k": k_summary(kept.k),
        "k_cal": k_summary(cal.k),
        "n": len(kept),
        "n_cal": calibration.n,
        "n_dropped": check.n_dropped_ood,
        "matched": bool(check.matched),
        "qhat": calibration.qhat,
        "coverage": summary["coverage"],
        "coverage_ci": list(cis["coverage"]),
        "mean_set_size": summary["mean_set_size"],
        "mean_set_size_ci": list(cis["mean_set_size"]),
        "uacc": summary["uacc"],
        "uacc_ci": list(cis["uacc"]),
        "acc": summary["acc"],
        "share_empty": summary["share_empty"],
        "share_full": summary["share_full"],
        "coverage_by_size": summary["coverage_by_size"],
        "n_by_size": summary["n_by_size"],
        "coverage_by_k": summary["coverage_by_k"],
        "calibration": calibration.description,
    }
    if n_boot and not all(math.isfinite(v) for v in cis["uacc"]) and math.isfinite(summary["uacc"]):
        reasons.append("the uacc interval is undefined: some bootstrap replicate has only empty sets")
    return ConformalRow.of(finish_row(row, reasons))
