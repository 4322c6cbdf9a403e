"""The report's rows: what ``report.json`` holds, one typed row per kind (all JSON-ready dicts).

The rows of the audits themselves (OOD detection, K sweep, calibration, selective prediction,
ATC, score orders, conformal, temperature, OOD groups, answer order) are the rows :mod:`lm_eval_evidential.audits`
returns, kept as they are (typed rows, :class:`~lm_eval_evidential.audits.table.AuditRow`: they read as mappings
and are written to ``report.json`` as objects); the types here are the rows the report makes around them (a
control's row is an ``AuditRow`` too, the others typed dicts). Key order is the order of ``report.json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from lm_eval_evidential.audits.ood import OODRow
from lm_eval_evidential.audits.table import AuditRow as TableRow
from lm_eval_evidential.audits.table import column, declared, k_column, matched_column, row_type

#: A row of an audit (:func:`~lm_eval_evidential.audits.ood.ood_rows`, ``ksweep_rows``, the
#: :mod:`~lm_eval_evidential.audits.quality` rows), as the audit returns it.
AuditRow = Mapping[str, Any]


class Refusal(TypedDict):
    """An ID/OOD pair a K policy refuses to compare: the error, its one-line reason and the remedy."""

    policy: str
    id_task: str
    ood_task: str
    error: str
    reason: str
    suggestion: str


class OODSection(TypedDict):
    """The OOD-detection rows of every OOD task under one policy, and the refused pairs."""

    rows: list[AuditRow]
    refused: list[Refusal]


class AUROCWithCI(TypedDict):
    auroc: float
    auroc_ci: list[float]


@dataclass(frozen=True, eq=False)
class ControlRow(TableRow):
    """What one K-matched control of an OOD dataset keeps and what it then measures
    (:func:`~lm_eval_evidential.report.controls.control_rows`)."""

    source: str = column("OOD dataset")
    control: str = column("control")
    description: str = column("what it keeps")
    evaluated: bool = column("evaluated")
    n_source: int | None = column("n")
    n_kept: int | None = column("kept")
    n_excluded: int | None = column("excluded")
    excluded: dict[str, int] = column("excluded, why")
    matched: bool | None = matched_column()
    error: str | None = column("error")
    auroc: dict[str, AUROCWithCI] = column("AUROC (DeLong CI)")


@dataclass(frozen=True, eq=False)
class ForcedKRow(TableRow):
    """One OOD task and score of McNamara (2026)'s Implementation A: the K-matched number beside the one at
    the forced K + 1, with the model's own next option (report ``implementation_a``)."""

    ood_task: str = column("OOD task")
    score: str = column("score")
    k: int = column("K")
    auroc: float = column("AUROC")
    aupr_in: float = column("AUPR-In")
    forced_k: int = column("forced K")
    auroc_forced: float = column("AUROC (forced)")
    aupr_in_forced: float = column("AUPR-In (forced)")


class KSweepEntry(TypedDict, total=False):
    """The K sweep of one OOD task: its rows, DeLong test and figure; or why it was refused or skipped."""

    rows: list[AuditRow]
    delong_test: AuditRow | None
    figure: str
    skipped: str
    refused: Refusal
    #: the ID records' members in words (audits.compare.method_kind), where several members scored them
    members: str


class Skipped(TypedDict):
    """A section that could not be computed on these records, and why."""

    section: str
    reason: str


class Threshold(TypedDict):
    """One method's calibrated conformal threshold and the line that says what it was calibrated on."""

    method: str
    qhat: float
    rank: int  # qhat is the rank-th smallest of the n calibration scores (rank > n: qhat = inf, every set full)
    n: int
    line: str


class ConformalSection(TypedDict):
    """Conformal prediction sets (:mod:`lm_eval_evidential.audits.conformal`): per method, the rows of the ID test
    part and of each OOD task the K check admits; the refused tasks."""

    alpha: float
    level: float  # of the bootstrap intervals
    calibration: str
    thresholds: list[Threshold]
    rows: list[AuditRow]
    refused: list[Refusal]


class TemperatureSection(TypedDict):
    """Post-hoc temperature scaling (:mod:`lm_eval_evidential.audits.temperature`): the fitted T (also on every
    row), what it was fitted on, the rows, the refused tasks."""

    temperature: float
    line: str
    validation: str
    rows: list[AuditRow]
    refused: list[Refusal]


class GroupRefusal(Refusal):
    """A refused set of a named OOD group (its group's mean row leaves it out and says so)."""

    group: str


class OODGroupsSection(TypedDict):
    """OpenOOD's layout (:func:`lm_eval_evidential.audits.ood_groups.group_rows`): the groups named, FPR@95's
    positive class and what it measures, the scale (100 with ``percent``), the rows, the refused sets."""

    groups: dict[str, list[str]]
    fpr95_positive: str
    fpr95_direction: str
    scale: float
    rows: list[AuditRow]
    refused: list[GroupRefusal]


class CompareRefusal(TypedDict):
    """A method's ID/OOD pair the comparison refuses (K-mismatched), with the reason and the remedy."""

    method: str
    ood_task: str
    reason: str


class CompareSection(TypedDict):
    """Methods side by side (:mod:`lm_eval_evidential.report.comparison`): the methods (the report's run first),
    whether the K-mismatched protocol was computed (marked), the bootstrap's replicates and level, the rows of
    :func:`~lm_eval_evidential.audits.compare.compare_methods` (``compare --json``'s) and the refused pairs."""

    methods: list[str]
    k_mismatched: bool
    n_boot: int
    level: float
    calibration: list[AuditRow]
    ood: list[AuditRow]
    refused: list[CompareRefusal]


#: A K-matched comparison and its headline numbers (the summary's ``valid``): the numbers of the
#: :class:`~lm_eval_evidential.audits.ood.OODRow` it quotes, their columns as declared there.
ValidComparison = row_type(
    "ValidComparison",
    __name__,
    [
        *declared(OODRow, "ood_task"),
        ("policy", str, column("k_policy")),
        ("k", Any, k_column()),
        *declared(OODRow, "n_id", "n_ood"),
        ("n_dropped_ood", int, column("dropped OOD")),
        *declared(OODRow, "score", "auroc", "auroc_ci", "aupr_in", "aupr_in_ci"),
    ],
)


class MismatchedComparison(TypedDict):
    """A comparison across different K (``k_policy=report``): not valid."""

    ood_task: str
    policy: str
    score: str
    auroc: float
    k_id: Any
    k_ood: Any


class RefusedPair(TypedDict):
    """An OOD task with no valid comparison under any policy given."""

    ood_task: str
    policies: list[str]
    reason: str
    suggestion: str


class LargestMove(TypedDict):
    score: str
    extra: int
    delta_auroc: float


class Artefact(TypedDict):
    """The size of the K artefact of one swept pair (McNamara (2026), Table 1)."""

    ood_task: str
    score: str
    phantom: str
    auroc_base: float
    auroc_one_extra: float
    delta_auroc: float
    matched_delta_auroc: float | None
    p_value: float | None
    largest: LargestMove
    #: records of several members: what they are, and their mutual information's AUROC move at x = 1 (OOD only)
    members: NotRequired[str]
    epistemic_delta_auroc: NotRequired[float]


class OrderSpread(TypedDict):
    """How far reordering the options moves the headline AUROC of one permuted pair (the order audit)."""

    ood_task: str
    score: str
    n_orders: int
    auroc_min: float
    auroc_max: float
    auroc_range: float
    auroc_order_averaged: float


class Summary(TypedDict):
    """What a reader acts on (:func:`~lm_eval_evidential.report.summary.summarize`)."""

    illustrative: bool
    limited: dict[str, float]  # task -> the --limit its records were evaluated with (absent: every question)
    headline_score: str | None
    valid: list[ValidComparison]
    mismatched: list[MismatchedComparison]
    refused: list[RefusedPair]
    artefact: list[Artefact]
    #: Only where the records are permuted (``metadata.permutations``): reports of other runs are what they were.
    order: NotRequired[list[OrderSpread]]
    #: Only where other methods' runs are compared (``report --compare``): the comparison in one sentence.
    compare: NotRequired[str]


class Report(TypedDict):
    """Everything ``report.json`` holds; ``report.md`` is rendered from it alone."""

    id_task: str
    ood_tasks: list[str]
    summary: Summary
    meta: dict[str, Any]
    meta_warnings: list[str]
    illustrative: bool
    limits: dict[str, float | None]
    runs: dict[str, str | None]
    k_histograms: dict[str, dict[int, int]]
    policies: list[str]
    #: The K sweep's phantom mode (``zero``, ``model``, ``count``): what its appended options are.
    phantom: str
    mismatch_statement: str
    #: One sentence per OOD task with more options than the ID task and a K-matched control among the OOD tasks:
    #: which scores the real extra option moved for this model, and why
    #: (:func:`~lm_eval_evidential.audits.explain.real_option_sentence`).
    k_effect: list[str]
    ood: dict[str, OODSection]
    controls: list[ControlRow]
    ksweep: dict[str, KSweepEntry]
    implementation_a: list[ForcedKRow]
    calibration: list[AuditRow]
    selective: list[AuditRow]
    atc: list[AuditRow]
    orders: list[AuditRow]
    #: The order audit's AUROC per order of each permuted pair (:func:`~lm_eval_evidential.audits.permutations.
    #: permutation_ood_rows`); only where the records are permuted.
    answer_order: NotRequired[list[AuditRow]]
    #: The audits the field reports beside OOD detection (:mod:`lm_eval_evidential.report.field`); absent where
    #: skipped (``skipped`` says why) and in reports written before them.
    conformal: NotRequired[ConformalSection]
    temperature: NotRequired[TemperatureSection]
    #: Only where OOD groups are named (``report --near/--far``).
    ood_groups: NotRequired[OODGroupsSection]
    #: Only where other methods' runs are compared (``report --compare``).
    compare: NotRequired[CompareSection]
    figures: dict[str, list[str]]
    skipped: list[Skipped]
