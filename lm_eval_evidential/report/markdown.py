"""``report.md`` and ``appendix.md`` from the report's data alone: ``report.md`` is what a reader acts on (the
summary first, one section per audit with the few scores that matter); ``appendix.md`` has every score (tables
ready to paste into a paper). A number said in two places is formatted by one function, so it reads the same."""

from __future__ import annotations

from lm_eval_evidential.audits.ood import KSweepRow, OODRow
from lm_eval_evidential.audits.permutations import PermutationOODRow
from lm_eval_evidential.audits.table import Column, rows_markdown
from lm_eval_evidential.metrics.cardinality import phantom_options
from lm_eval_evidential.report.comparison import md_compare
from lm_eval_evidential.report.field import md_conformal, md_groups, md_temperature
from lm_eval_evidential.report.format import APPENDIX_FILE, format_k
from lm_eval_evidential.report.sections import (
    delong_text,
    md_answer_order,
    md_appendix,
    md_atc,
    md_calibration,
    md_controls,
    md_implementation_a,
    md_k_counts,
    md_ksweep,
    md_ood,
    md_orders,
    md_selective,
)
from lm_eval_evidential.report.summary import chance_counts
from lm_eval_evidential.report.types import Report, ValidComparison

ILLUSTRATIVE_NOTE = (
    "These records come from the bundled tiny model (random weights, a few fine-tuning steps) on sample questions "
    "written for this project: every number here is **illustrative only** and says nothing about real models or "
    "datasets. It shows how the audit works, not what a real model does."
)


def render_markdown(report: Report) -> str:
    """``report.md`` from the dict :func:`build_report` returns (tables ready to paste into a paper).

    The summary first, then one section per audit with the few scores that matter; every score
    is in :func:`render_appendix`'s file (:data:`APPENDIX_FILE`), which the summary links.
    """
    parts = [
        _md_header,
        _md_summary,
        md_k_counts,
        md_ood,
        md_groups,
        md_compare,
        md_controls,
        md_ksweep,
        md_answer_order,
        md_implementation_a,
        md_calibration,
        md_temperature,
        md_selective,
        md_conformal,
        md_atc,
        md_orders,
        _md_not_computed,
    ]
    return "\n".join(line for part in parts for line in part(report)).rstrip() + "\n"


def render_appendix(report: Report) -> str:
    """``appendix.md``: every score's OOD, K-sweep, selective, ATC and score-order tables, and each refusal's
    full text; :func:`render_markdown`'s report links it."""
    lines = [
        f"# Appendix: every score — {report['id_task']} (ID) vs {', '.join(report['ood_tasks'])}",
        "",
        "The tables of [report.md](report.md) with every score the records can give. ID = positive; every score is "
        "oriented higher = more in-distribution.",
        "",
        *md_appendix(report),
    ]
    return "\n".join(lines).rstrip() + "\n"


def _md_header(report: Report) -> list[str]:
    meta, policies = report["meta"], report["policies"]
    model = meta.get("pretrained") or meta.get("model") or "unknown"
    lines = [f"# OOD audit: {report['id_task']} (ID) vs {', '.join(report['ood_tasks'])}", ""]
    if report.get("illustrative"):
        lines += [f"> **Illustrative only.** {ILLUSTRATIVE_NOTE}", ""]
    lines += [
        f"- **Model**: {model}" + (f" + adapter {meta['peft']}" if meta.get("peft") else ""),
        f"- **Method**: {meta.get('method')}, prior weight λ = {meta.get('prior_weight')}"
        + (
            f", sigma_mult = {meta.get('sigma_mult')}, num_noises = {meta.get('num_noises')}"
            if meta.get("method") == "ib_edl"
            else ""
        ),
        _runs_line(report["runs"]),
        f"- **K policy**: {', '.join(policies)}"
        + (f" (K sweep, ATC and later sections use {policies[0]})" if len(policies) > 1 else ""),
        "- **Convention**: ID = positive (label 1); every score is oriented higher = more in-distribution.",
        *_averaged_line(meta.get("order_averaged")),
        "",
    ]
    for w in report["meta_warnings"]:
        lines += [f"> **Warning**: the records come from different model settings — {w}.", ""]
    return lines


def _averaged_line(averaged) -> list[str]:
    """The mark of a report of a permuted run read with ``--average-orders`` (none otherwise)."""
    if not averaged:
        return []
    low, high = averaged["orders_per_question"]
    return [
        f"- **Answer orders**: each question was shown in {low if low == high else f'{low}-{high}'} orders "
        f'({averaged["permutations"]}); every section but "Answer order" reads them averaged into one record per '
        "question (`--average-orders`: the mixture of the orders' predictions)"
    ]


def _runs_line(runs: dict) -> str:
    """``Run: <date_id> (all 9 tasks)`` for one run; else each run once, with its tasks."""
    by_run: dict = {}
    for task, date_id in runs.items():
        by_run.setdefault(date_id or "(no date_id)", []).append(task)
    if len(by_run) == 1:
        ((date_id, tasks),) = by_run.items()
        return f"- **Run**: {date_id} (all {len(tasks)} tasks)" if len(tasks) > 1 else f"- **Run**: {date_id}"
    return "- **Runs**: " + "; ".join(f"{d}: {', '.join(tasks)}" for d, tasks in by_run.items())


def _epistemic_move(arts) -> str:
    """For records of several members, how far the same appended option moves the baseline's own epistemic score
    (its mutual information's AUROC): the number an ensemble/MC-dropout/Laplace column of a paper reports."""
    moves = [a["epistemic_delta_auroc"] for a in arts if "epistemic_delta_auroc" in a]
    if not moves:
        return ""
    return f" and this {arts[0]['members']} baseline's mutual information AUROC by {_moves(moves)}"


def _moves(moves) -> str:
    """AUROC moves of the K sweep as its table writes them (ΔAUROC): the one, or the smallest to the largest."""
    low, high = (KSweepRow.written("delta_auroc", m) for m in (min(moves), max(moves)))
    return low if high == low else f"{low} to {high}"


def _takeaway(report: Report) -> str:
    """The one sentence the summary opens with: where the K-matched comparisons stand against chance
    (:func:`~lm_eval_evidential.report.summary.chance_counts`), and how far changing K alone moves the headline
    score."""
    s = report["summary"]
    valid = s.get("valid") or []
    if valid:
        n = chance_counts(valid)
        counts = [
            (n["at"], "at chance (95% CI contains 0.5)"),
            (n["above"], "above chance"),
            (n["below"], "below chance"),
        ]
        many = f"Of the {len(valid)} K-matched comparisons" if len(valid) > 1 else "The one K-matched comparison"
        text = f"{many} ({s['headline_score']} AUROC): " + ", ".join(f"{n} {what}" for n, what in counts if n)
    else:
        text = "No comparison was K-matched, so none of them measures OOD detection"
    arts = s.get("artefact") or []
    if arts:
        text += (
            f"; one {phantom_options(arts[0]['phantom'])} appended to the OOD side alone, a change of K and not of the "
            "model, moves "
            f"{arts[0]['score']}'s AUROC by {_moves([a['delta_auroc'] for a in arts])}"
            + _epistemic_move(arts)
            + ": a comparison across K reports a difference that is not there"
        )
    return text + "."


def _sizes(cells, values, style) -> str:
    """Parts ``(n_id, n_ood, n_dropped_ood)``: ``n ID / n OOD``, and how many OOD questions were dropped, if any."""
    return f"{cells[0]} / {cells[1]}" + (f" ({cells[2]} dropped)" if values[2] else "")


#: The summary's table of valid comparisons (rows with the report's ID task beside each).
_VALID_COLUMNS = ValidComparison.columns(
    ValidComparison.combined("ID → OOD", "arrow", Column("id_task", "ID task"), "ood_task"),
    "k",
    "policy",
    ValidComparison.combined("n ID / OOD", _sizes, "n_id", "n_ood", "n_dropped_ood"),
    ValidComparison.combined("AUROC [95% CI]", "estimate", "auroc", "auroc_ci"),
    ValidComparison.combined("AUPR-In [95% CI]", "estimate", "aupr_in", "aupr_in_ci"),
)


def _md_summary(report: Report) -> list[str]:
    s, idt = report["summary"], report["id_task"]
    lines = ["## Summary", ""]
    if s.get("limited"):
        subsets = ", ".join(
            f"{task} (--limit {limit:g})" if isinstance(limit, (int, float)) else f"{task} (--limit {limit})"
            for task, limit in s["limited"].items()
        )
        lines += [
            f"> **A subset, evaluated with `--limit`.** {subsets}: every number below describes only the questions "
            "evaluated, not the full tasks; re-run the evaluation without `--limit` for the benchmark's numbers.",
            "",
        ]
    lines += [f"**Takeaway.** {_takeaway(report)}", ""]
    if s.get("valid"):
        lines += [
            f"**Valid comparisons** (ID and OOD have the same number of options K; score: {s['headline_score']}):",
            "",
        ]
        lines += rows_markdown([{"id_task": idt, **v} for v in s["valid"]], _VALID_COLUMNS)
    else:
        lines += ["**No valid comparison**: no OOD task has the ID task's K under the policies given.", ""]
    for m in s.get("mismatched", []):
        lines += [
            f"- **Not valid**: {idt} → {m['ood_task']} was compared across K {format_k(m['k_id'])} "
            f"vs {format_k(m['k_ood'])} "
            f"(k_policy={m['policy']}; {m['score']} AUROC {OODRow.written('auroc', m['auroc'])}): that number partly "
            "measures K."
        ]
    for ref in s.get("refused", []):
        lines += [
            f"- **Refused**: {idt} → {ref['ood_task']} (k_policy {', '.join(ref['policies'])}): {ref['reason']}. "
            f"{ref['suggestion']}"
        ]
    lines += [f"- **What K does to this model**: {sentence}" for sentence in report.get("k_effect", [])]
    arts = s.get("artefact", [])
    if arts:
        matched = [a["matched_delta_auroc"] for a in arts]
        if all(m == 0 for m in matched):
            both = "appended to both sides, it leaves every one exactly unchanged"
        else:
            both = "appended to both sides: " + ", ".join(
                f"{a['ood_task']} {KSweepRow.written('delta_auroc', a['matched_delta_auroc'])}" for a in arts
            )
        lines += [
            f"- **K artefact** ({arts[0]['score']} AUROC, one {phantom_options(arts[0]['phantom'])} appended to the "
            "OOD side only; "
            "DeLong test on the same examples, as in the K-sweep section): "
            + "; ".join(
                f"{a['ood_task']} {delong_text(a['auroc_base'], a['auroc_one_extra'], a['delta_auroc'], a['p_value'])}"
                for a in arts
            )
            + f"; {both}."
        ]
    lines += [_order_line(s)] if s.get("order") else []
    lines += ["", f"Details below; tables with every score are in [{APPENDIX_FILE}]({APPENDIX_FILE}).", ""]
    return lines


def _order_line(s) -> str:
    """The order audit in one sentence: how far reordering alone moves the headline AUROC, against the K artefact."""
    spreads = s["order"]
    first = spreads[0]

    def auroc(o, key: str) -> str:  # as the answer-order table writes it
        return PermutationOODRow.written(key, o[key])

    per_task = "; ".join(
        f"{o['ood_task']} {auroc(o, 'auroc_min')} to {auroc(o, 'auroc_max')} "
        f"(range {auroc(o, 'auroc_range')}, order-averaged {auroc(o, 'auroc_order_averaged')})"
        for o in spreads
    )
    arts = [a for a in s.get("artefact") or [] if a["score"] == first["score"]]
    against = (
        "against a K artefact of "
        + ", ".join(KSweepRow.written("delta_auroc", a["delta_auroc"]) for a in arts)
        + " from one zero-evidence option"
        if arts
        else "(no K sweep to set it against)"
    )
    return (
        f"- **Answer order** ({first['score']} AUROC over the {first['n_orders']} orders of each question, the "
        f"same model and questions): {per_task} — reordering the options alone moves it by up to "
        f"{PermutationOODRow.written('auroc_range', max(o['auroc_range'] for o in spreads))}, {against}."
    )


def _md_not_computed(report: Report) -> list[str]:
    if not report["skipped"]:
        return []
    return ["## Not computed", ""] + [f"- {s['section']}: {s['reason']}" for s in report["skipped"]] + [""]
