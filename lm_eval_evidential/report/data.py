"""The report's data: every audit of an ID task against OOD tasks, as one :class:`~.types.Report`.

:func:`report_data` runs the sections in order (OOD tables per policy, K-matched controls,
K sweep, calibration, selective prediction, ATC, score orders), draws their figures into a
folder, and ends with the summary. A section that cannot be computed on these records is
listed under ``skipped`` with the reason; the others are still computed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from lm_eval_evidential import plots
from lm_eval_evidential.audits.compare import method_kind
from lm_eval_evidential.audits.ood import (
    POLICIES,
    CardinalityMismatchError,
    k_check,
    ksweep_delong,
    ksweep_rows,
    ood_rows,
    subset_records,
)
from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.metrics.cardinality import k_histogram
from lm_eval_evidential.records import RECORDS_FILE_RE, Records
from lm_eval_evidential.records.orders import ORDER_AVERAGED
from lm_eval_evidential.records.provenance import is_illustrative
from lm_eval_evidential.report.comparison import compare_section
from lm_eval_evidential.report.controls import control_rows, refusal
from lm_eval_evidential.report.field import field_sections
from lm_eval_evidential.report.format import file_slug
from lm_eval_evidential.report.summary import summarize
from lm_eval_evidential.report.types import ForcedKRow, KSweepEntry, OODSection, Report, Skipped

MISMATCH_STATEMENT = (
    "Vacuity u = λK/S depends on the class count K itself (McNamara (2026) arXiv:2605.06382, Proposition 1): "
    "appending an answer option that receives no evidence raises u unless that option gets the mean concentration "
    "S/K. So when the in-distribution (ID) questions have K options and the OOD questions have a different number, "
    "ID and OOD separate partly *because of K*, not because the model is less certain, and AUROC/AUPR are inflated "
    "(McNamara (2026), Table 1: OBQA → ARC-C reciprocal-vacuity AUROC 0.570 becomes 0.842 when one zero-evidence "
    "option is appended to the OOD side only). Max probability and entropy-based scores have K-dependent ranges too. "
    "A valid comparison needs K_ID = K_OOD: use a K-matched control task — a distractor-removal control "
    "(csqa_k4_edl, arc_c_k4_edl, arc_e_k4_edl: wrong options removed down to the ID task's K, every question with "
    "enough options kept) or csqa4_edl (CSQA without option E and without the questions answered E) — or "
    "k_policy=restrict (only OOD questions with the ID task's K); the section on K-matched controls below shows "
    "what each costs. k_policy=report computes the comparison anyway to reproduce the artefact, and marks those "
    "rows matched: false."
)

_META_FIELDS = ("pretrained", "model", "peft", "method", "prior_weight", "sigma_mult", "num_noises", "seed", "dtype")


def check_policies(k_policy) -> list[str]:
    """The K policies asked for, in order and without duplicates (ValueError for an unknown one or none)."""
    pols = [k_policy] if isinstance(k_policy, str) else list(k_policy)
    pols = list(dict.fromkeys(p.strip() for p in pols if p and p.strip()))
    bad = [p for p in pols if p not in POLICIES]
    if not pols or bad:
        raise InvalidValueError(f"k_policy must be one or more of {', '.join(POLICIES)}, got {k_policy!r}")
    return pols


def ksweep_figure(id_task: str, ood_task: str) -> str:
    """The name (without suffix) of the K-sweep figure of a pair."""
    return f"ksweep_{file_slug(id_task)}_vs_{file_slug(ood_task)}"


def risk_coverage_figure(id_task: str) -> str:
    """The name (without suffix) of the risk-coverage figure of the ID task."""
    return f"risk_coverage_{file_slug(id_task)}"


def _model_meta(records: Sequence[Records]) -> tuple[dict, list[str]]:
    """The model settings of the ID task's records, and a warning per setting the tasks disagree on."""
    first = records[0].meta
    meta = {k: first.get(k) for k in _META_FIELDS if first.get(k) is not None}
    meta.setdefault("method", records[0].method)
    meta.setdefault("prior_weight", records[0].prior_weight)
    warnings = []
    for key in _META_FIELDS:
        values = {r.task: r.meta.get(key) for r in records}
        if len({repr(v) for v in values.values()}) > 1:
            warnings.append(f"tasks disagree on {key}: " + ", ".join(f"{t}={v!r}" for t, v in values.items()))
    return meta, warnings


def _date_id_of(records: Records) -> str | None:
    m = RECORDS_FILE_RE.match(records.path.name) if records.path is not None else None
    return m["date_id"] if m else None


def report_data(
    id_records: Records,
    ood_records: Sequence[Records],
    figures_dir: Path,
    policies: list[str],
    *,
    scores,
    n_boot: int,
    seed: int,
    level: float,
    max_extra: int,
    n_bins: int,
    phantom: str = "zero",
    groups=None,
    alpha: float = 0.1,
    calibration_fraction: float = 0.5,
    fpr95: str = "openood",
    percent: bool = False,
    permuted: Sequence[Records] | None = None,
    compare: Mapping[str, Sequence[Records]] | None = None,
) -> Report:
    """Every section of the report on checked inputs, its figures drawn into ``figures_dir``, the summary last
    (``groups`` and the options after it: :func:`~lm_eval_evidential.report.field.field_sections`).

    ``permuted``: the ID and OOD records of a permuted run, order by order, when the others are their
    order-averaged records (``--average-orders``): the "Answer order" section reads them. ``compare``: every
    method's records (ID task first), this run's first, for "Methods side by side" (:mod:`.comparison`)."""
    all_records = [id_records, *ood_records]
    report = _empty_report(all_records, policies, phantom)
    opts = {"scores": scores, "n_boot": n_boot, "seed": seed, "level": level}
    progress = _progress(len(policies) + 5 + bool(compare), sum(len(r) for r in all_records))
    for policy in policies:
        progress(f"OOD detection, k_policy {policy}")
        report["ood"][policy] = _ood_section(id_records, ood_records, policy, **opts)
    progress("K-matched controls")
    try:  # the K-matched controls side by side: what each keeps and what it measures
        report["controls"] = control_rows(id_records, ood_records, scores=scores, level=level)
    except ValueError as exc:
        _skip(report, "controls", exc)
    report["k_effect"] = _k_effect(id_records, ood_records, report["controls"])
    progress("K sweep")
    accepted = _ksweep_section(
        report,
        id_records,
        ood_records,
        figures_dir,
        policies[0],
        scores=scores,
        max_extra=max_extra,
        phantom=phantom,
    )
    report["implementation_a"] = _implementation_a(report, id_records, accepted)
    if permuted is not None:  # a permuted run: the order audit beside the K audit
        report["meta"]["order_averaged"] = id_records.meta.get(ORDER_AVERAGED)
        report["answer_order"] = _answer_order_section(report, permuted[0], permuted[1:], policies[0], scores)
    progress("calibration, selective prediction, ATC, score orders")
    _quality_sections(report, id_records, ood_records, accepted, figures_dir, scores=scores, n_bins=n_bins)
    progress("conformal sets, temperature scaling" + (", OpenOOD groups" if groups else ""))
    field_sections(
        report,
        id_records,
        ood_records,
        figures_dir,
        policy=policies[0],
        groups=groups,
        scores=scores,
        alpha=alpha,
        calibration_fraction=calibration_fraction,
        seed=seed,
        n_boot=n_boot,
        level=level,
        fpr95=fpr95,
        percent=percent,
        skip=lambda section, reason: _skip(report, section, reason),
    )
    _methods_section(report, compare, progress, policies, n_bins=n_bins, **opts)
    progress("summary")
    report["summary"] = summarize(report)
    progress(None)
    return report


def _methods_section(report: Report, compare, progress, policies, **opts) -> None:
    """ "Methods side by side" of ``compare`` (``{method: [ID records, *OOD records]}``, None: no section)."""
    if not compare:
        return
    progress(f"methods side by side ({len(compare)} runs)")
    try:
        runs = {method: {r.task: r for r in records} for method, records in compare.items()}
        report["compare"] = compare_section(runs, report["id_task"], report["ood_tasks"], policies=policies, **opts)
    except ValueError as exc:  # scores named that some method's records cannot give
        _skip(report, "methods side by side", exc)


def _empty_report(all_records: Sequence[Records], policies: list[str], phantom: str) -> Report:
    """The report before its sections: what the records say (model, runs, K, limits) and every section empty;
    ``all_records`` is the ID task's records, then the OOD tasks'."""
    meta, meta_warnings = _model_meta(all_records)
    return Report(
        id_task=all_records[0].task,
        ood_tasks=[r.task for r in all_records[1:]],
        summary={},  # type: ignore[typeddict-item]  # filled last, from the sections
        meta=meta,
        meta_warnings=meta_warnings,
        illustrative=any(is_illustrative(r.meta) for r in all_records),
        limits={r.task: r.meta.get("limit") for r in all_records},
        runs={r.task: r.meta.get("date_id") or _date_id_of(r) for r in all_records},
        k_histograms={r.task: k_histogram(r.k) for r in all_records},
        policies=policies,
        phantom=phantom,
        mismatch_statement=MISMATCH_STATEMENT,
        k_effect=[],
        ood={},
        controls=[],
        ksweep={},
        implementation_a=[],
        calibration=[],
        selective=[],
        atc=[],
        orders=[],
        figures={},
        skipped=[],
    )


def _progress(steps: int, n_records: int):
    """``say(step)``: one stderr line as each of the report's ``steps`` sections starts (None: done), with the
    time so far, so that a report on millions of records never looks hung (one line each, in a terminal
    and in a log alike)."""
    import sys
    import time

    start = time.perf_counter()
    done = [0]

    def say(step: str | None) -> None:
        elapsed = time.perf_counter() - start
        if step is None:
            print(f"report: sections done in {elapsed:.0f} s", file=sys.stderr, flush=True)
            return
        done[0] += 1
        print(
            f"report [{done[0]}/{steps}, {elapsed:.0f} s]: {step} ({n_records:,} records)", file=sys.stderr, flush=True
        )

    return say


def _k_effect(id_records: Records, ood_records: Sequence[Records], controls) -> list[str]:
    """For each OOD task with more options than the ID task and a K-matched control among the OOD tasks, the
    sentence on which scores its real extra option moved and why; the K-mismatched AUROC is computed for that
    sentence only (``k_policy="report"``), never reported as a result."""
    from lm_eval_evidential.audits.explain import real_option_sentence
    from lm_eval_evidential.metrics.scores import OOD_DEFAULT_SCORES

    by_task = {r.task: r for r in ood_records}
    sentences: list[str] = []
    done: set[str] = set()
    for row in controls:
        source, control = by_task.get(row["source"]), by_task.get(row["control"])
        if source is None or control is None or row["source"] in done or not row["evaluated"] or row["error"]:
            continue
        if not source.has_alpha or not (source.k.min() == source.k.max() > id_records.k.max()):
            continue
        try:
            mismatched = ood_rows(id_records, source, scores=OOD_DEFAULT_SCORES, k_policy="report", n_boot=0)
            matched = ood_rows(id_records, control, scores=OOD_DEFAULT_SCORES, n_boot=0)
        except ValueError:  # a K refusal of the control, or scores these records cannot give: nothing to say
            continue
        sentence = real_option_sentence(id_records, source, control, mismatched, matched)
        if sentence:
            sentences.append(sentence)
            done.add(row["source"])
    return sentences


#: How the report names McNamara (2026)'s Implementation A where it is not computed: with what it is.
IMPLEMENTATION_A = 'Implementation A (the published bug: OOD scored at K + 1 with the model\'s own " E")'
IB_EDL_NO_PHANTOM = 'IB-EDL records keep no sigma or noise draws for " E"; method=edl records of the checkpoint give it'


def _implementation_a(report: Report, id_records: Records, accepted) -> list:
    """McNamara (2026)'s Implementation A beside the K-matched number: each accepted OOD task whose questions
    all have the ID task's K, scored as it is and at K + 1 with the model's own next option (" E" after
    " A".." D"), for max-prob and reciprocal vacuity; a task the records cannot do it for is skipped with why."""
    rows = []
    k_id = k_histogram(id_records.k)
    if id_records.method == "ib_edl" and accepted:  # one reason for the run, not one screen-wide line per task
        _skip(report, IMPLEMENTATION_A, IB_EDL_NO_PHANTOM)
        return rows
    for r in accepted:
        if len(k_id) != 1 or not len(r) or k_histogram(r.k) != {next(iter(k_id)): len(r)} or not r.has_phantoms:
            continue  # mixed K, or records from before phantom logits were kept: nothing to reproduce
        k = next(iter(k_id))
        common = {
            "scores": ["max_prob", "reciprocal_vacuity"] if r.has_alpha else ["max_prob"],
            "n_boot": 0,
        }
        try:
            matched = ood_rows(id_records, r, **common)
            forced = ood_rows(id_records, r, k_policy="report", force_k=k + 1, phantom="model", **common)
        except ValueError as exc:
            _skip(report, f"{IMPLEMENTATION_A}, {r.task}", exc)
            continue
        for a, b in zip(matched, forced):
            rows.append(
                ForcedKRow(
                    ood_task=r.task,
                    score=a["score"],
                    k=k,
                    auroc=a["auroc"],
                    aupr_in=a["aupr_in"],
                    forced_k=k + 1,
                    auroc_forced=b["auroc"],
                    aupr_in_forced=b["aupr_in"],
                )
            )
    return rows


def _ood_section(id_records: Records, ood_records: Sequence[Records], policy: str, **opts) -> OODSection:
    """The OOD-detection rows of every OOD task under ``policy``, and the refused pairs."""
    section = OODSection(rows=[], refused=[])
    for r in ood_records:
        try:
            section["rows"] += ood_rows(id_records, r, k_policy=policy, **opts)
        except CardinalityMismatchError as exc:
            section["refused"].append(refusal(policy, id_records.task, r.task, exc))
    return section


def _answer_order_section(report: Report, id_records, ood_records, policy: str, scores) -> list:
    """AUROC per answer order of each OOD task (the order audit's rows), or why a pair has none."""
    from lm_eval_evidential.audits.permutations import permutation_ood_rows
    from lm_eval_evidential.errors import OrderMismatchError, RecordsError

    rows = []
    for r in ood_records:
        try:
            rows += permutation_ood_rows(id_records, r, scores=scores, k_policy=policy)
        except (CardinalityMismatchError, OrderMismatchError, RecordsError) as exc:
            _skip(report, f"answer order ({id_records.task} vs {r.task})", exc)
    return rows


def _skip(report: Report, section: str, reason) -> None:
    report["skipped"].append(Skipped(section=section, reason=str(reason)))


def _ksweep_section(
    report: Report,
    id_records,
    ood_records,
    out: Path,
    policy: str,
    *,
    scores,
    max_extra,
    phantom: str = "zero",
) -> list[Records]:
    """The K sweep (table, DeLong test, figure) of each pair ``policy`` accepts; returns those OOD records
    as ``policy`` evaluates them (restricted or whole)."""
    accepted: list[Records] = []
    for r in ood_records:
        try:
            check = k_check(id_records, r, policy)
        except CardinalityMismatchError as exc:
            report["ksweep"][r.task] = KSweepEntry(refused=refusal(policy, id_records.task, r.task, exc))
            continue
        accepted.append(subset_records(r, check.keep_ood))
        entry = KSweepEntry(**({"members": method_kind(id_records)} if id_records.has_members else {}))
        try:
            entry["rows"] = ksweep_rows(
                id_records, r, max_extra=max_extra, scores=scores, k_policy=policy, phantom=phantom
            )
            entry["delong_test"] = (
                ksweep_delong(id_records, r, k_policy=policy, phantom=phantom)
                if max_extra >= 1 and any(row["extra"] >= 1 for row in entry["rows"])
                else None
            )
            name = ksweep_figure(id_records.task, r.task)
            paths = plots.plot_ksweep(
                entry["rows"], out / name, title=f"{id_records.task} → {r.task} (k_policy={policy})"
            )
            report["figures"][name] = [p.name for p in paths]
            entry["figure"] = paths[0].name
        except ValueError as exc:
            entry = KSweepEntry(skipped=str(exc))
            _skip(report, f"ksweep {r.task}", exc)
        report["ksweep"][r.task] = entry
    return accepted


def _quality_sections(report: Report, id_records, ood_records, accepted, out: Path, *, scores, n_bins) -> None:
    """Per-task calibration, selective prediction and score orders (K plays no cross-set role there),
    then ATC from the ID task to the OOD tasks the first policy accepts."""
    from lm_eval_evidential.audits import quality

    by_task = {r.task: r for r in [id_records, *ood_records]}
    try:
        report["calibration"] = quality.calibration_rows(by_task, n_bins=n_bins)
        paths = plots.save_reliability_figure(by_task, out / "reliability", n_bins=n_bins)
        report["figures"]["reliability"] = [p.name for p in paths]
    except ValueError as exc:
        _skip(report, "calibration", exc)
    try:
        report["selective"] = quality.selective_rows(by_task, scores=scores)
        name = risk_coverage_figure(id_records.task)
        paths = plots.save_risk_coverage_figure(id_records, out / name, scores=scores)
        report["figures"][name] = [p.name for p in paths]
    except ValueError as exc:
        _skip(report, "selective", exc)
    try:
        if accepted:
            report["atc"] = quality.atc_rows(id_records, accepted, scores=scores)
        else:
            _skip(report, "atc", f"no OOD task is accepted under k_policy={report['policies'][0]}")
    except ValueError as exc:
        _skip(report, "atc", exc)
    try:
        report["orders"] = quality.order_rows(by_task, scores=scores)
    except ValueError as exc:
        _skip(report, "orders", exc)
