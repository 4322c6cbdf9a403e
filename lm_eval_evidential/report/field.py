"""The report's sections on the audits the field reports beside OOD detection: conformal prediction sets,
post-hoc temperature scaling, and (where OOD groups are named) OpenOOD's near/far table.

Each section is the data of the audit the matching command writes (``conformal``, ``temperature``,
``ood --near/--far``), computed by that audit's own functions, under the report's first K policy:

- **Conformal sets** (:mod:`lm_eval_evidential.audits.conformal`): calibrated on a seeded share of the
  ID records (``calibration_fraction``, the report's seed), evaluated on the rest of them and on each
  OOD task whose K the calibration K admits; one calibration per method (LAC, APS), each threshold
  said. A refused OOD task is named with the remedy.
- **Temperature** (:mod:`lm_eval_evidential.audits.temperature`): T fitted by NLL on the same
  calibration share, said in the section and kept on every row; calibration and max-prob OOD
  detection with the records' probabilities and at the fitted T, ID test part vs each OOD task.
- **OpenOOD table** (:mod:`lm_eval_evidential.audits.ood_groups`): per-set rows and a mean row per
  group over the K-matched sets only; a group with a refused set says so; FPR@95's positive class is
  named. Only when groups are given (``report --near/--far``).

The other sections compare all ID records with each OOD task; these two compare the ID test part
(the records left after the calibration share), so their numbers are of fewer ID records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from lm_eval_evidential import plots
from lm_eval_evidential.audits.conformal import ConformalRow, calibrate, conformal_row, split_calibration
from lm_eval_evidential.audits.ood import CardinalityMismatchError
from lm_eval_evidential.audits.ood_groups import METRIC_KEYS, GroupRow
from lm_eval_evidential.audits.table import rows_markdown
from lm_eval_evidential.audits.temperature import TemperatureRow
from lm_eval_evidential.metrics.conformal import METHODS
from lm_eval_evidential.records import Records
from lm_eval_evidential.report.controls import refusal
from lm_eval_evidential.report.format import (
    APPENDIX_FILE,
    figure_lines,
    file_slug,
    headline_rows,
    undefined_lines,
)
from lm_eval_evidential.report.types import ConformalSection, OODGroupsSection, Report, TemperatureSection

__all__ = ["conformal_figure", "field_sections", "groups_figure", "md_conformal", "md_groups", "md_temperature"]


def conformal_figure(id_task: str) -> str:
    """The name (without suffix) of the coverage-vs-set-size figure of the ID task."""
    return f"conformal_{file_slug(id_task)}"


def groups_figure(id_task: str) -> str:
    """The name (without suffix) of the per-group OpenOOD figure of the ID task."""
    return f"ood_groups_{file_slug(id_task)}"


def field_sections(
    report: Report,
    id_records: Records,
    ood_records: Sequence[Records],
    figures_dir: Path,
    *,
    policy: str,
    groups: Mapping[str, Sequence[str]] | None,
    scores,
    alpha: float,
    calibration_fraction: float,
    seed: int,
    n_boot: int,
    level: float,
    fpr95: str,
    percent: bool,
    skip,
) -> None:
    """Fill ``report["conformal"]``, ``report["temperature"]`` and (with ``groups``) ``report["ood_groups"]``,
    drawing their figures into ``figures_dir``; a section these records cannot give goes to ``skip(section,
    reason)``."""
    try:
        cal, test = split_calibration(id_records, calibration_fraction, seed)
    except ValueError as exc:
        skip("conformal sets", exc)
        skip("temperature scaling", exc)
    else:
        description = f"{id_records.task} ({calibration_fraction:g} of {len(id_records)}, seed {seed})"
        try:
            report["conformal"] = _conformal(
                id_records.task, cal, test, ood_records, description, policy, alpha, seed, n_boot, level
            )
            name = conformal_figure(id_records.task)
            lac = [r for r in report["conformal"]["rows"] if r["method"] == METHODS[0]]
            if lac:
                paths = plots.save_figure(plots.conformal_figure(lac), figures_dir / name)
                report["figures"][name] = [p.name for p in paths]
        except ValueError as exc:
            skip("conformal sets", exc)
        try:
            report["temperature"] = _temperature(id_records.task, cal, test, ood_records, description, policy)
        except ValueError as exc:
            skip("temperature scaling", exc)
    if groups:
        try:
            report["ood_groups"] = _groups(
                id_records, ood_records, groups, policy=policy, scores=scores, fpr95=fpr95, percent=percent
            )
            name = groups_figure(id_records.task)
            rows = headline_rows(report["ood_groups"]["rows"])
            refused = [(r["group"], r["ood_task"]) for r in report["ood_groups"]["refused"]]
            paths = plots.save_figure(plots.ood_groups_figure(rows, refused), figures_dir / name)
            report["figures"][name] = [p.name for p in paths]
        except ValueError as exc:
            skip("OpenOOD table (near/far groups)", exc)


def _conformal(id_task, cal, test, ood_records, description, policy, alpha, seed, n_boot, level) -> ConformalSection:
    section = ConformalSection(alpha=alpha, level=level, calibration=description, thresholds=[], rows=[], refused=[])
    for method in METHODS:
        calibration = calibrate(cal, alpha=alpha, method=method, description=description)
        section["thresholds"].append(
            {
                "method": method,
                "qhat": calibration.qhat,
                "rank": calibration.rank,
                "n": calibration.n,
                "line": calibration.line(),
            }
        )
        for role, records in (("id", test), *(("ood", r) for r in ood_records)):
            common = {"k_policy": policy, "n_boot": n_boot, "level": level, "seed": seed}
            try:
                section["rows"].append(conformal_row(calibration, records, role=role, **common))
            except CardinalityMismatchError as exc:
                if method == METHODS[0]:  # one refusal per task: the K check does not depend on the method
                    section["refused"].append(refusal(policy, id_task, records.task, exc))
    return section


def _temperature(id_task, cal, test, ood_records, description, policy) -> TemperatureSection:
    from lm_eval_evidential.audits.temperature import fit, temperature_rows

    fitted = fit(cal, description)
    rows, refusals = temperature_rows(fitted, test, list(ood_records), k_policy=policy)
    return TemperatureSection(
        temperature=fitted.temperature,
        line=fitted.line(),
        validation=description,
        rows=rows,
        refused=[refusal(policy, id_task, task, exc) for _, task, exc in refusals],
    )


def _groups(id_records, ood_records, groups, *, policy, scores, fpr95, percent) -> OODGroupsSection:
    from lm_eval_evidential.audits.ood_groups import FPR95_DIRECTIONS, group_rows

    by_task = {r.task: r for r in ood_records}
    rows, refusals = group_rows(
        id_records,
        {g: [by_task[t] for t in tasks] for g, tasks in groups.items()},
        scores=scores,
        k_policy=policy,
        fpr95=fpr95,
        percent=percent,
    )
    group_of = {t: g for g, tasks in groups.items() for t in tasks}
    return OODGroupsSection(
        groups={g: list(tasks) for g, tasks in groups.items()},
        fpr95_positive=fpr95,
        fpr95_direction=FPR95_DIRECTIONS[fpr95],
        scale=100.0 if percent else 1.0,
        rows=rows,
        refused=[{**refusal(policy, id_task, task, exc), "group": group_of[task]} for id_task, task, exc in refusals],
    )


# -- report.md -----------------------------------------------------------------------------------------------


#: The report's OpenOOD table: a group's mean row named in bold, the numbers at 1 decimal when in percent.
_GROUP_COLUMNS = GroupRow.columns(
    GroupRow.combined("set", "mean", "set", "group", "n_sets"),
    "score",
    GroupRow.columns("k_ood")[0]._replace(header="K"),
    "n_ood",
    "matched",
    *METRIC_KEYS,
)


def md_groups(report: Report, rows=None) -> list[str]:
    """The OpenOOD table (headline scores; ``rows`` to give others, e.g. every score in the appendix)."""
    sec = report.get("ood_groups")
    if not sec:
        return []
    shown = headline_rows(sec["rows"]) if rows is None else rows
    scale = " (x100)" if sec["scale"] != 1 else ""
    lines = [
        "## OOD detection by group (OpenOOD layout)",
        "",
        "Groups: "
        + "; ".join(f"{g} = {', '.join(tasks)}" for g, tasks in sec["groups"].items())
        + f". One row per OOD set, then the group's mean row over its K-matched sets only; ID = "
        f"{report['id_task']} (positive for AUROC and AUPR-In), ID accuracy on all its records{scale}. "
        f"FPR@95 ({sec['fpr95_positive']}): {sec['fpr95_direction']}.",
        "",
    ]
    columns = [c._replace(digits=1) if sec["scale"] != 1 and c.key in METRIC_KEYS else c for c in _GROUP_COLUMNS]
    lines += rows_markdown(shown, columns)
    notes = dict.fromkeys(f"- {r['set']}: {r['reason']}" for r in shown if r["set"] == r["group"] and r.get("reason"))
    lines += [*notes, ""] if notes else []  # one line per group: what its mean leaves out is the same for each score
    if sec["refused"]:
        named = "; ".join(f"{r['ood_task']} ({r['group']})" for r in sec["refused"])
        lines += [f"Refused by the K check, left out of their group's mean (reasons and remedies above): {named}.", ""]
    if rows is None:
        lines += figure_lines(
            report["figures"], groups_figure(report["id_task"]), "AUROC and FPR@95 per OOD set and group mean"
        )
    return lines


def _not_evaluated(refused) -> str:
    """The refused sets named in one sentence (each one's reason and remedy are in the OOD section and the
    appendix), or nothing."""
    if not refused:
        return ""
    names = ", ".join(r["ood_task"] for r in refused)
    return f" Not evaluated, refused by the K check (reasons and remedies above): {names}."


#: The report's conformal table: each estimate beside its bootstrap interval.
_CONFORMAL_COLUMNS = ConformalRow.columns(
    "set",
    "role",
    "method",
    "k",
    "n",
    ConformalRow.combined("coverage [CI]", "estimate", "coverage", "coverage_ci"),
    ConformalRow.combined("mean set size [CI]", "estimate", "mean_set_size", "mean_set_size_ci"),
    ConformalRow.combined("UAcc [CI]", "estimate", "uacc", "uacc_ci"),
    "share_empty",
    "share_full",
)


def md_conformal(report: Report, every: bool = False) -> list[str]:
    """Conformal sets: the first method's rows (``every``: every method's, for the appendix)."""
    sec = report.get("conformal")
    if not sec:
        return []
    first = sec["thresholds"][0]["method"] if sec["thresholds"] else None
    rows = sec["rows"] if every else [r for r in sec["rows"] if r["method"] == first]
    others = ", ".join(t["method"] for t in sec["thresholds"][1:])
    lines = [
        f"## Conformal prediction sets (alpha = {sec['alpha']:g})",
        "",
        f"Calibrated on {sec['calibration']}; evaluated on the rest of {report['id_task']} (role id) and on each "
        "OOD task whose K is the calibration K (`lm-eval-evidential conformal`). Coverage is the share of "
        f"questions whose set holds the gold option (target {1 - sec['alpha']:g}; guaranteed only where the "
        "questions are exchangeable with the calibration ones, i.e. not on OOD sets); set sizes compare only at "
        f"equal K; UAcc = accuracy / mean set size x sqrt(K) (Ye et al. 2024). {sec['level']:.0%} bootstrap "
        "intervals, the threshold held fixed. Thresholds: "
        + "; ".join(
            f"{t['method']} qhat = {t['qhat']:.4g} (order statistic {t['rank']} of {t['n']} scores)"
            for t in sec["thresholds"]
            if every or t["method"] == first
        )
        + "."
        + (f" The other methods ({others}): {APPENDIX_FILE}." if others and not every else "")
        + _not_evaluated(sec["refused"]),
        "",
    ]
    lines += rows_markdown(rows, _CONFORMAL_COLUMNS)
    if not all(r["matched"] for r in rows):
        lines += ["> Rows of another K than the calibration K carry no coverage guarantee.", ""]
    lines += undefined_lines(rows)
    if every:
        return lines
    return lines + figure_lines(
        report["figures"], conformal_figure(report["id_task"]), f"Coverage against mean set size ({first})"
    )


#: The temperature tables' numbers: calibration of each set, and max-prob OOD detection on the OOD sets.
_TEMPERATURE_KEYS = ("acc", "ece", "nll", "brier", "auroc", "aupr_in", "fpr95")
#: The appendix's temperature table: one row per set and probability vector.
_TEMPERATURE_COLUMNS = TemperatureRow.columns("set", "role", "probs", "temperature", *_TEMPERATURE_KEYS)
#: The report's: one row per set, each number with the records' own probabilities → at the fitted T (the
#: second part's key is the number's, suffixed ``_at_t``, in the rows :func:`_before_after` pairs).
_CHANGE_COLUMNS = TemperatureRow.columns(
    "set",
    "role",
    *(
        TemperatureRow.combined(c.header, "arrow", c, c._replace(key=f"{c.key}_at_t"))
        for c in TemperatureRow.columns(*_TEMPERATURE_KEYS)
    ),
)


def _before_after(rows) -> list[dict]:
    """One row per set: its numbers with the records' own probabilities, and (``KEY_at_t``) those at the fitted
    T where the set has them."""
    paired = []
    for task in dict.fromkeys(r["set"] for r in rows):
        mine = {r["probs"]: r for r in rows if r["set"] == task}
        before, after = mine["records"], mine.get("softmax(z/T)")
        paired.append({**before, **({f"{k}_at_t": after[k] for k in _TEMPERATURE_KEYS} if after else {})})
    return paired


def md_temperature(report: Report, every: bool = False) -> list[str]:
    """Temperature scaling: per set, the records' own probabilities → those at the fitted T (``every``: one row
    per probability vector, the softmax at T = 1 too)."""
    sec = report.get("temperature")
    if not sec:
        return []
    lines = [
        "## Post-hoc temperature scaling (Guo et al. 2017)",
        "",
        f"{sec['line']}. Calibration of each set and max-prob OOD detection (ID test part of {report['id_task']} = "
        "positive) of each OOD task, with the records' own probabilities (what every other section uses) → the "
        "softmax of the answer logits at the fitted T (`lm-eval-evidential temperature`)."
        + _not_evaluated(sec["refused"]),
        "",
    ]
    lines += (
        rows_markdown(sec["rows"], _TEMPERATURE_COLUMNS)
        if every
        else rows_markdown(_before_after(sec["rows"]), _CHANGE_COLUMNS)
    )
    return lines + undefined_lines(sec["rows"])
