"""The audit sections of ``report.md`` and ``appendix.md`` (K counts, OOD detection, K-matched controls, the
K sweep, calibration, selective prediction, ATC/DoC, answer order, score-order equivalence), each from the
report's data alone, and the appendix's every-score tables; :mod:`lm_eval_evidential.report.markdown` puts
them in order around the header and the summary. The public names below are that boundary; the tables and
helpers they are built of stay private here."""

from __future__ import annotations

from collections.abc import Sequence

from lm_eval_evidential.audits.ood import DeLongTest, KSweepRow, OODRow, phantom_evidence_line, sensitivity_lines
from lm_eval_evidential.audits.permutations import PermutationOODRow
from lm_eval_evidential.audits.quality import (
    ORDER_KEYS,
    PRR_CAPS,
    ATCRow,
    CalibrationRow,
    OrderRow,
    SelectiveRow,
    equivalence_groups,
)
from lm_eval_evidential.audits.table import NOT_APPLICABLE, Column, rows_markdown
from lm_eval_evidential.metrics.cardinality import phantom_options
from lm_eval_evidential.metrics.scores import OOD_DEFAULT_SCORES
from lm_eval_evidential.report.data import ksweep_figure, risk_coverage_figure
from lm_eval_evidential.report.field import md_conformal, md_groups, md_temperature
from lm_eval_evidential.report.format import (
    APPENDIX_FILE,
    figure_lines,
    headline_rows,
    undefined_lines,
)
from lm_eval_evidential.report.types import AuditRow, ControlRow, ForcedKRow, Report

__all__ = [
    "delong_text",
    "md_k_counts",
    "md_ood",
    "md_controls",
    "md_ksweep",
    "md_implementation_a",
    "md_calibration",
    "md_selective",
    "md_atc",
    "md_answer_order",
    "md_orders",
    "md_appendix",
]


def delong_text(auroc_base, auroc_expanded, diff, p_value) -> str:
    """The one way the report writes a K-sweep DeLong result (the summary quotes the K-sweep section's): each
    number as :class:`~lm_eval_evidential.audits.ood.DeLongTest` declares it (the p-value to two significant
    digits, :func:`~lm_eval_evidential.audits.table.format_p`)."""
    num = DeLongTest.written
    return (
        f"{num('auroc_base', auroc_base)} → {num('auroc_expanded', auroc_expanded)} "
        f"(Δ = {num('diff', diff)}, p = {num('p_value', p_value)})"
    )


def _details(summary: str, lines: list[str]) -> list[str]:
    """An appendix section: a heading and its lines (nothing when there are none)."""
    return [f"## {summary}", "", *lines] if lines else []


def _figure(report: Report, name: str, caption: str) -> list[str]:
    return figure_lines(report["figures"], name, caption)


#: The class-count table: each task's K histogram, and whether it is the ID task's one K (— on the ID task).
_K_COUNT_COLUMNS = (
    Column("task", "task"),
    Column("role", "role"),
    Column("n", "n"),
    Column("k", "K histogram {K: n}", "k"),
    Column("same_k", "same K as ID", "optional"),
)


def md_k_counts(report: Report) -> list[str]:
    idt = report["id_task"]
    id_hist = report["k_histograms"][idt]
    lines = ["## Class counts (K)", ""]
    rows = [
        {"task": t, "role": "ID" if t == idt else "OOD", "n": sum(h.values()), "k": h,
         "same_k": None if t == idt else set(h) == set(id_hist) and len(h) == 1}
        for t, h in report["k_histograms"].items()
    ]  # fmt: skip
    lines += rows_markdown(rows, _K_COUNT_COLUMNS)
    return lines + ["**What a K mismatch means.** " + report["mismatch_statement"], ""]


#: The report's OOD table: every column of :class:`~lm_eval_evidential.audits.ood.OODRow` but the pair's ID
#: task (the report's) and the forced K (Implementation A's section).
_OOD_COLUMNS = OODRow.columns(
    "ood_task",
    "score",
    "k_id",
    "k_ood",
    "n_id",
    "n_ood",
    "n_dropped",
    "matched",
    "auroc",
    "auroc_ci",
    "aupr_in",
    "aupr_in_ci",
    "aupr_out",
    "fpr95",
    "aupr_baseline",
)


def _ood_table(rows: Sequence[AuditRow]) -> list[str]:
    """The OOD rows under :data:`_OOD_COLUMNS`, the AUPR-In interval's header naming the interval its rows got
    (the bootstrap, or its large-sample limit above 20,000 examples: metrics/intervals.aupr_in_ci)."""
    from lm_eval_evidential.metrics.intervals import aupr_in_interval_label

    label = aupr_in_interval_label(r["n_id"] + r["n_ood"] for r in rows)
    columns = [c._replace(header=f"95% CI ({label})") if c.key == "aupr_in_ci" else c for c in _OOD_COLUMNS]
    return rows_markdown(rows, columns)


def md_ood(report: Report) -> list[str]:
    lines = ["## OOD detection", ""]
    for policy, sec in report["ood"].items():
        lines += [f"### k_policy = {policy}", ""]
        rows = sec["rows"]
        if rows:
            lines += _ood_table(headline_rows(rows))
            if not all(r["matched"] for r in rows):
                lines += [
                    "> Rows with K matched = **NO** compare different class counts: their AUROC/AUPR partly "
                    "measure K, not uncertainty. Do not report them as OOD-detection results.",
                    "",
                ]
        else:
            lines += ["No OOD task was compared under this policy.", ""]
        lines += [
            f"- **Refused: {ref['id_task']} vs {ref['ood_task']}** (not compared): {ref['reason']}. {ref['suggestion']}"
            for ref in sec["refused"]
        ]
        lines += [""] if sec["refused"] else []
    return lines


def md_controls(report: Report) -> list[str]:
    rows = report.get("controls") or []
    if not rows:
        return []
    names = list(dict.fromkeys(score for r in rows for score in r["auroc"])) or list(OOD_DEFAULT_SCORES[:1])
    lines = [
        "## K-matched controls side by side",
        "",
        f"Each row brings an OOD dataset to {report['id_task']}'s K in its own way. *Kept / n* and *excluded* say "
        "what the control costs; AUROC (ID = positive, DeLong 95% CI) what it then measures. `restrict` drops every "
        "question whose K differs; a `*_k4_edl` control removes wrong options only (chosen by a seeded hash of the "
        "question id, gold always kept) and excludes only questions with fewer options; csqa4_edl drops option E "
        "and with it every question answered E, a selection by the gold label.",
        "",
    ]
    return lines + rows_markdown(rows, _control_columns(names))


def _excluded(cells, values, style) -> str:
    """Parts ``(evaluated, excluded, n_excluded)``: each reason's count, else how many; — where not evaluated."""
    evaluated, excluded, _ = values
    if not evaluated:
        return NOT_APPLICABLE
    return "; ".join(f"{n}: {why}" for why, n in excluded.items()) or cells[2]


def _measured(first: bool):
    """The join of a control's AUROC cell, parts ``(evaluated, control, error, auroc, auroc_ci)``: the estimate
    and its interval (n/a where the control has no such score); on a row that measured nothing, why, in the
    ``first`` AUROC cell (the others empty)."""

    def join(cells, values, style) -> str:
        evaluated, control, error = values[:3]
        if not evaluated:
            return f"not in these records: evaluate {control}" if first else ""
        if error:
            return f"refused: {error}" if first else ""
        return " ".join(cells[3:]) or style.none

    return join


def _control_columns(names: Sequence[str]) -> tuple:
    """The controls' table: what each control keeps and costs, then AUROC [95% CI] of each score of ``names``."""
    status = ControlRow.columns("evaluated", "control", "error")
    return ControlRow.columns(
        ControlRow.columns("source")[0]._replace(header="OOD data"),
        "control",
        ControlRow.columns("description")[0]._replace(header="what it does"),
        ControlRow.combined("kept / n", "of", "n_kept", "n_source"),
        ControlRow.combined("excluded", _excluded, "evaluated", "excluded", "n_excluded"),
        *(
            ControlRow.combined(
                f"AUROC {n} [95% CI]",
                _measured(i == 0),
                *status,
                Column(("auroc", n, "auroc"), "AUROC"),
                Column(("auroc", n, "auroc_ci"), "95% CI", "interval"),
            )
            for i, n in enumerate(names)
        ),
    )


def md_ksweep(report: Report) -> list[str]:
    idt, primary = report["id_task"], report["policies"][0]
    mode = report.get("phantom", "zero")  # reports written before the mode was kept: the only mode then
    how = {
        "zero": "α = λ",
        "model": "the model's own next labels, \" E\".., from the records' phantom logits",
        "count": "u = λ(K+x)/S, every other score unchanged",
    }[mode]
    appended = f"{phantom_options(mode, 2)[:1].upper()}{phantom_options(mode, 2)[1:]} ({how})"
    lines = [
        "## K sweep (McNamara (2026), Table 1 / Figure 1)",
        "",
        f"{appended} appended to the OOD side only (OOD-only) or to both sides (matched), model "
        f"outputs fixed; Δ against x = 0. k_policy = {primary}. Full tables in {APPENDIX_FILE}.",
        "",
    ]
    refused = [task for task, entry in report["ksweep"].items() if "refused" in entry]
    if refused:
        lines += [f"Not swept, refused under k_policy={primary} (K mismatch, see above): {', '.join(refused)}.", ""]
    for task, entry in report["ksweep"].items():
        if "refused" in entry:
            continue
        lines += [f"### {idt} → {task}", ""]
        if "skipped" in entry:
            lines += [f"Not computed: {entry['skipped']}", ""]
            continue
        lines += [f"- {line}" for line in sensitivity_lines(entry["rows"], digits=3)]
        prop1 = phantom_evidence_line(entry["rows"])
        lines += ([f"- {prop1}"] if prop1 else []) + [""]
        t = entry.get("delong_test")
        if t:
            lines += [
                f"DeLong test ({t['score']}, OOD-only x = {t['extra']} vs x = 0, same examples): AUROC "
                f"{delong_text(t['auroc_base'], t['auroc_expanded'], t['diff'], t['p_value'])}, "
                f"z = {DeLongTest.written('z', t['z'])}.",
                "",
            ]
        lines += _figure(report, ksweep_figure(idt, task), f"AUROC and AUPR-In of {idt} → {task} as K grows")
    return lines


#: The report's Implementation A table (the AUROC's header names the matched K).
_FORCED_COLUMNS = ForcedKRow.columns(
    "ood_task", "score", "auroc", "aupr_in", "forced_k", "auroc_forced", "aupr_in_forced"
)


def md_implementation_a(report: Report) -> list[str]:
    rows = report.get("implementation_a") or []
    if not rows:
        return []
    lines = [
        "## Implementation A (McNamara (2026), §4.3, Tables 3–4)",
        "",
        "The published bug reproduced, never a default: each OOD task scored at K + 1 with the model's own next "
        'option (" E" after " A".." D", from the records\' phantom logits), beside the K-matched number. '
        "The forced rows compare different K and are not a valid OOD result.",
        "",
    ]
    columns = [c._replace(header=f"AUROC (K = {rows[0]['k']})") if c.key == "auroc" else c for c in _FORCED_COLUMNS]
    return lines + rows_markdown(rows, columns)


#: The report's K-sweep table (the appendix's): the sweep's step and its AUROC/AUPR-In moves.
_KSWEEP_COLUMNS = KSweepRow.columns(
    "condition", "extra", "k_id", "k_ood", "score", "auroc", "delta_auroc", "aupr_in", "delta_aupr"
)


def _ksweep_table(rows: Sequence[AuditRow]) -> list[str]:
    return rows_markdown(rows, _KSWEEP_COLUMNS)


def md_calibration(report: Report) -> list[str]:
    lines = ["## Calibration", ""]
    if report["calibration"]:
        lines += rows_markdown(
            report["calibration"], CalibrationRow.columns("task", "acc", "ece", "adaptive_ece", "nll", "brier")
        )
        lines += undefined_lines(report["calibration"])
    return lines + _figure(report, "reliability", "Reliability diagrams (confidence = max E[p]; n = examples per bin)")


#: The report's selective-prediction table (the risk column, named for a coverage, is left to the CLI).
_SELECTIVE_COLUMNS = SelectiveRow.columns(
    "task", "score", *(f"prr_{c}" for c in PRR_CAPS), "prr_normalized", "aurc", "eaurc", "augrc", "spearman"
)


def _selective_table(rows: Sequence[AuditRow]) -> list[str]:
    return rows_markdown(rows, _SELECTIVE_COLUMNS)


def md_selective(report: Report) -> list[str]:
    idt = report["id_task"]
    lines = [
        "## Selective prediction",
        "",
        "PRR: 1 = oracle, 0 = random (higher is better; PRR (polygraph) is lm-polygraph's `prr_normalized`, the "
        "whole rejection range); AURC, its excess over a perfect ranking (E-AURC) and the generalized-risk area "
        "AUGRC (Traub et al. 2024): lower is better.",
        "",
    ]
    if report["selective"]:
        lines += _selective_table(headline_rows(report["selective"])) + undefined_lines(report["selective"])
    return lines + _figure(report, risk_coverage_figure(idt), f"Risk-coverage curves on {idt}")


def _atc_table(rows: Sequence[AuditRow]) -> list[str]:
    return rows_markdown(rows, ATCRow.columns("target_task", "score", "method", "estimate", "true_acc", "abs_error"))


def md_atc(report: Report) -> list[str]:
    lines = [
        "## Accuracy estimation without labels (ATC / DoC)",
        "",
        f"Threshold learned on {report['id_task']}; targets are the OOD tasks accepted under "
        f"k_policy={report['policies'][0]}.",
        "",
    ]
    if report["atc"]:
        lines += _atc_table(headline_rows(report["atc"])) + undefined_lines(report["atc"])
    return lines


#: The report's order-audit table: each ID → OOD pair's AUROC at the identity order and its spread over orders.
_ANSWER_ORDER_COLUMNS = PermutationOODRow.columns(
    PermutationOODRow.combined("ID → OOD", "arrow", "id_task", "ood_task"),
    "score",
    "n_orders",
    "auroc_identity",
    PermutationOODRow.combined("AUROC min / median / max", "range", "auroc_min", "auroc_median", "auroc_max"),
    "auroc_order_averaged",
)


def md_answer_order(report: Report) -> list[str]:
    """The order audit's AUROC per answer order (only for permuted records; `lm-eval-evidential permutations`)."""
    rows = headline_rows(report.get("answer_order") or [])
    if not rows:
        return []
    lines = [
        "## Answer order (`lm-eval-evidential permutations`)",
        "",
        "Each question was shown in several orders of its options; order s of the ID task is compared with order s "
        "of the OOD task. The spread is what reordering the same options alone does to the AUROC.",
        "",
    ]
    lines += rows_markdown(rows, _ANSWER_ORDER_COLUMNS)
    return lines + undefined_lines(rows) + [""]


def md_orders(report: Report) -> list[str]:
    lines = [
        "## Score-order equivalence",
        "",
        "Order-equivalent scores give identical AUROC, AUPR, PRR, AURC and ATC (Maaz et al. 2023), so each group "
        f"below is one choice, not several. Every pair is in {APPENDIX_FILE}.",
        "",
    ]
    for task, groups in equivalence_groups(report["orders"]).items():
        text = "; ".join(" = ".join(g) for g in groups) if groups else "no two scores order the examples alike"
        lines += [f"- {task}: {text}"]
    return lines + [""]


def _orders_table(rows: Sequence[AuditRow]) -> list[str]:
    return rows_markdown(rows, OrderRow.columns(*ORDER_KEYS))


def md_appendix(report: Report) -> list[str]:
    """``appendix.md``'s sections: every score's table of each audit, and each refusal's full text."""
    lines = []
    for policy, sec in report["ood"].items():
        lines += _details(
            f"OOD detection, k_policy = {policy} ({len(sec['rows'])} rows)",
            _ood_table(sec["rows"]) if sec["rows"] else [],
        )
        lines += _details(
            f"Refusals under k_policy = {policy}, full text",
            [line for ref in sec["refused"] for line in ("```", ref["error"], "```", "")],
        )
    for task, entry in report["ksweep"].items():
        if entry.get("rows"):
            lines += _details(
                f"K sweep {report['id_task']} → {task} ({len(entry['rows'])} rows)", _ksweep_table(entry["rows"])
            )
    if report["selective"]:
        lines += _details(
            f"Selective prediction ({len(report['selective'])} rows)", _selective_table(report["selective"])
        )
    groups = report.get("ood_groups")
    if groups:
        every = md_groups(report, rows=groups["rows"])[2:]  # the section without its report.md heading
        lines += _details(f"OOD detection by group, every score ({len(groups['rows'])} rows)", every)
    if report.get("temperature"):
        lines += _details("Temperature scaling, every probability vector", md_temperature(report, every=True)[2:])
    if report.get("conformal"):
        lines += _details("Conformal prediction sets, every method", md_conformal(report, every=True)[2:])
    if report["atc"]:
        lines += _details(f"ATC / DoC ({len(report['atc'])} rows)", _atc_table(report["atc"]))
    if report["orders"]:
        body = _orders_table(report["orders"])
        lines += _details(f"Score-order equivalence, every pair ({len(report['orders'])} rows)", body)
    return lines
