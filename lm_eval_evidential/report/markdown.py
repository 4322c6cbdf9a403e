"""``report.md`` and ``appendix.md`` from the report's data alone: ``report.md`` is what a reader acts on (the
summary first, one section per audit with the few scores that matter); ``appendix.md`` has every score (tables
ready to paste into a paper). A number said in two places is formatted by one function, so it reads the same."""

from __future__ import annotations

from collections.abc import Sequence

from lm_eval_evidential.audits.ood import phantom_evidence_line, sensitivity_lines
from lm_eval_evidential.metrics.cardinality import phantom_options
from lm_eval_evidential.metrics.scores import OOD_DEFAULT_SCORES
from lm_eval_evidential.report.data import ksweep_figure, risk_coverage_figure
from lm_eval_evidential.report.field import md_conformal, md_groups, md_temperature
from lm_eval_evidential.report.format import (  # noqa: F401 (APPENDIX_FILE: re-exported)
    APPENDIX_FILE,
    figure_lines,
    format_ci,
    format_k,
    format_number,
    format_p,
    headline_rows,
    markdown_table,
    undefined_lines,
)
from lm_eval_evidential.report.types import AuditRow, Report

ILLUSTRATIVE_NOTE = (
    "These records come from the bundled tiny model (random weights, a few fine-tuning steps) on sample questions "
    "written for this project: every number here is **illustrative only** and says nothing about real models or "
    "datasets. It shows how the audit works, not what a real model does."
)


_table = markdown_table


def _details(summary: str, lines: list[str]) -> list[str]:
    """An appendix section: a heading and its lines (nothing when there are none)."""
    return [f"## {summary}", "", *lines] if lines else []


def _figure(report: Report, name: str, caption: str) -> list[str]:
    return figure_lines(report["figures"], name, caption)


_reasons = undefined_lines
_headline_rows = headline_rows


def render_markdown(report: Report) -> str:
    """``report.md`` from the dict :func:`build_report` returns (tables ready to paste into a paper).

    The summary first, then one section per audit with the few scores that matter; every score
    is in :func:`render_appendix`'s file (:data:`APPENDIX_FILE`), which the summary links.
    """
    parts = [
        _md_header,
        _md_summary,
        _md_k_counts,
        _md_ood,
        md_groups,
        _md_controls,
        _md_ksweep,
        _md_answer_order,
        _md_implementation_a,
        _md_calibration,
        md_temperature,
        _md_selective,
        md_conformal,
        _md_atc,
        _md_orders,
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
        *_md_appendix(report),
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


def _delong_text(auroc_base, auroc_expanded, diff, p_value) -> str:
    """The one way the report writes a K-sweep DeLong result (the summary quotes the K-sweep section's)."""
    return (
        f"{format_number(auroc_base)} → {format_number(auroc_expanded)} (Δ = {format_number(diff, signed=True)}, "
        f"p = {format_p(p_value)})"
    )


def _takeaway(report: Report) -> str:
    """The one sentence the summary opens with: where the K-matched comparisons stand against chance, and
    how far changing K alone moves the headline score."""
    s = report["summary"]
    valid = s.get("valid") or []
    if valid:
        at = above = below = 0
        for v in valid:
            lo, hi = v["auroc_ci"] or (None, None)
            if lo is None or hi is None or lo != lo or hi != hi or lo <= 0.5 <= hi:
                at += 1  # no interval (undefined) counts as not shown to differ from chance
            elif lo > 0.5:
                above += 1
            else:
                below += 1
        counts = [(at, "at chance (95% CI contains 0.5)"), (above, "above chance"), (below, "below chance")]
        many = f"Of the {len(valid)} K-matched comparisons" if len(valid) > 1 else "The one K-matched comparison"
        text = f"{many} ({s['headline_score']} AUROC): " + ", ".join(f"{n} {what}" for n, what in counts if n)
    else:
        text = "No comparison was K-matched, so none of them measures OOD detection"
    arts = s.get("artefact") or []
    if arts:
        lo, hi = min(a["delta_auroc"] for a in arts), max(a["delta_auroc"] for a in arts)
        size = format_number(lo, signed=True)
        if format_number(hi, signed=True) != size:
            size += f" to {format_number(hi, signed=True)}"
        text += (
            f"; one {phantom_options(arts[0]['phantom'])} appended to the OOD side alone, a change of K and not of the "
            "model, moves "
            f"{arts[0]['score']}'s AUROC by {size}: a comparison across K reports a difference that is not there"
        )
    return text + "."


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
        lines += _table(
            ["ID → OOD", "K", "k_policy", "n ID / OOD", "AUROC [95% CI]", "AUPR-In [95% CI]"],
            [
                [
                    f"{idt} → {v['ood_task']}",
                    format_k(v["k"]),
                    v["policy"],
                    f"{v['n_id']} / {v['n_ood']}" + (f" ({v['n_dropped_ood']} dropped)" if v["n_dropped_ood"] else ""),
                    f"{format_number(v['auroc'])} {format_ci(v['auroc_ci'])}",
                    f"{format_number(v['aupr_in'])} {format_ci(v['aupr_in_ci'])}",
                ]
                for v in s["valid"]
            ],
        )
    else:
        lines += ["**No valid comparison**: no OOD task has the ID task's K under the policies given.", ""]
    for m in s.get("mismatched", []):
        lines += [
            f"- **Not valid**: {idt} → {m['ood_task']} was compared across K {format_k(m['k_id'])} "
            f"vs {format_k(m['k_ood'])} "
            f"(k_policy={m['policy']}; {m['score']} AUROC {format_number(m['auroc'])}): that number partly measures K."
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
                f"{a['ood_task']} {format_number(a['matched_delta_auroc'], signed=True)}" for a in arts
            )
        lines += [
            f"- **K artefact** ({arts[0]['score']} AUROC, one {phantom_options(arts[0]['phantom'])} appended to the "
            "OOD side only; "
            "DeLong test on the same examples, as in the K-sweep section): "
            + "; ".join(
                f"{a['ood_task']} {_delong_text(a['auroc_base'], a['auroc_one_extra'], a['delta_auroc'], a['p_value'])}"
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
    per_task = "; ".join(
        f"{o['ood_task']} {format_number(o['auroc_min'])} to {format_number(o['auroc_max'])} "
        f"(range {format_number(o['auroc_range'])}, order-averaged {format_number(o['auroc_order_averaged'])})"
        for o in spreads
    )
    arts = [a for a in s.get("artefact") or [] if a["score"] == first["score"]]
    against = (
        "against a K artefact of "
        + ", ".join(format_number(a["delta_auroc"], signed=True) for a in arts)
        + " from one zero-evidence option"
        if arts
        else "(no K sweep to set it against)"
    )
    return (
        f"- **Answer order** ({first['score']} AUROC over the {first['n_orders']} orders of each question, the "
        f"same model and questions): {per_task} — reordering the options alone moves it by up to "
        f"{format_number(max(o['auroc_range'] for o in spreads))}, {against}."
    )


def _md_k_counts(report: Report) -> list[str]:
    idt = report["id_task"]
    id_hist = report["k_histograms"][idt]
    lines = ["## Class counts (K)", ""]
    lines += _table(
        ["task", "role", "n", "K histogram {K: n}", "same K as ID"],
        [
            [
                t,
                "ID" if t == idt else "OOD",
                sum(h.values()),
                format_k(h),
                "—" if t == idt else format_number(set(h) == set(id_hist) and len(h) == 1),
            ]
            for t, h in report["k_histograms"].items()
        ],
    )
    return lines + ["**What a K mismatch means.** " + report["mismatch_statement"], ""]


_OOD_HEADERS = [
    "OOD task",
    "score",
    "K_ID",
    "K_OOD",
    "n_ID",
    "n_OOD",
    "dropped ID/OOD",
    "K matched",
    "AUROC",
    "95% CI (DeLong)",
    "AUPR-In",
    "95% CI (bootstrap)",
    "AUPR-Out",
    "FPR95",
    "AUPR base",
]


def _ood_table(rows: Sequence[AuditRow]) -> list[str]:
    return _table(
        _OOD_HEADERS,
        [
            [
                r["ood_task"],
                r["score"],
                format_k(r["k_id"]),
                format_k(r["k_ood"]),
                r["n_id"],
                r["n_ood"],
                f"{r['n_dropped']['id']}/{r['n_dropped']['ood']}",
                "yes" if r["matched"] else "**NO**",
                format_number(r["auroc"]),
                format_ci(r["auroc_ci"]),
                format_number(r["aupr_in"]),
                format_ci(r["aupr_in_ci"]),
                format_number(r["aupr_out"]),
                format_number(r["fpr95"]),
                format_number(r["aupr_baseline"]),
            ]
            for r in rows
        ],
    )


def _md_ood(report: Report) -> list[str]:
    lines = ["## OOD detection", ""]
    for policy, sec in report["ood"].items():
        lines += [f"### k_policy = {policy}", ""]
        rows = sec["rows"]
        if rows:
            lines += _ood_table(_headline_rows(rows))
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


def _md_controls(report: Report) -> list[str]:
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
    body = []
    for r in rows:
        kept = "—" if r["n_kept"] is None else f"{r['n_kept']} / {format_number(r['n_source'])}"
        excluded = "; ".join(f"{n}: {why}" for why, n in r["excluded"].items()) or format_number(r["n_excluded"])
        if not r["evaluated"]:
            cells = [f"not in these records: evaluate {r['control']}"] + [""] * max(len(names) - 1, 0)
            kept, excluded = "—", "—"
        elif r["error"]:
            cells = [f"refused: {r['error']}"] + [""] * max(len(names) - 1, 0)
        else:
            cells = [
                f"{format_number(r['auroc'][n]['auroc'])} {format_ci(r['auroc'][n]['auroc_ci'])}"
                if n in r["auroc"]
                else "n/a"
                for n in names
            ]
        body.append([r["source"], r["control"], r["description"], kept, excluded, *cells])
    lines += _table(
        ["OOD data", "control", "what it does", "kept / n", "excluded", *(f"AUROC {n} [95% CI]" for n in names)], body
    )
    return lines


def _md_ksweep(report: Report) -> list[str]:
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
                f"{_delong_text(t['auroc_base'], t['auroc_expanded'], t['diff'], t['p_value'])}, "
                f"z = {format_number(t['z'], 2)}.",
                "",
            ]
        lines += _figure(report, ksweep_figure(idt, task), f"AUROC and AUPR-In of {idt} → {task} as K grows")
    return lines


def _md_implementation_a(report: Report) -> list[str]:
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
    body = [
        [
            r["ood_task"],
            r["score"],
            format_number(r["auroc"]),
            format_number(r["aupr_in"]),
            r["forced_k"],
            format_number(r["auroc_forced"]),
            format_number(r["aupr_in_forced"]),
        ]
        for r in rows
    ]
    k = rows[0]["k"]
    headers = ["OOD task", "score", f"AUROC (K = {k})", "AUPR-In", "forced K", "AUROC (forced)", "AUPR-In (forced)"]
    return lines + _table(headers, body)


def _ksweep_table(rows: Sequence[AuditRow]) -> list[str]:
    return _table(
        ["condition", "x", "K_ID", "K_OOD", "score", "AUROC", "ΔAUROC", "AUPR-In", "ΔAUPR"],
        [
            [
                "OOD-only" if r["condition"] == "ood_only" else "matched",
                r["extra"],
                format_k(r["k_id"]),
                format_k(r["k_ood"]),
                r["score"],
                format_number(r["auroc"]),
                format_number(r["delta_auroc"], signed=True),
                format_number(r["aupr_in"]),
                format_number(r["delta_aupr"], signed=True),
            ]
            for r in rows
        ],
    )


def _md_calibration(report: Report) -> list[str]:
    lines = ["## Calibration", ""]
    if report["calibration"]:
        lines += _table(
            ["task", "accuracy", "ECE (15 bins)", "adaptive ECE", "NLL", "Brier"],
            [
                [
                    r["task"],
                    format_number(r["acc"]),
                    format_number(r["ece"]),
                    format_number(r["adaptive_ece"]),
                    format_number(r["nll"]),
                    format_number(r["brier"]),
                ]
                for r in report["calibration"]
            ],
        )
        lines += _reasons(report["calibration"])
    return lines + _figure(report, "reliability", "Reliability diagrams (confidence = max E[p]; n = examples per bin)")


def _selective_table(rows: Sequence[AuditRow]) -> list[str]:
    return _table(
        ["task", "score", "PRR@0.5", "PRR@0.75", "PRR (polygraph)", "AURC", "E-AURC", "AUGRC", "Spearman"],
        [
            [
                r["task"],
                r["score"],
                format_number(r["prr_0.5"]),
                format_number(r["prr_0.75"]),
                format_number(r.get("prr_normalized")),
                format_number(r["aurc"]),
                format_number(r.get("eaurc")),
                format_number(r.get("augrc")),
                format_number(r["spearman"]),
            ]
            for r in rows
        ],
    )


def _md_selective(report: Report) -> list[str]:
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
        lines += _selective_table(_headline_rows(report["selective"])) + _reasons(report["selective"])
    return lines + _figure(report, risk_coverage_figure(idt), f"Risk-coverage curves on {idt}")


def _atc_table(rows: Sequence[AuditRow]) -> list[str]:
    return _table(
        ["target", "score", "method", "estimate", "true accuracy", "|error|"],
        [
            [
                r["target_task"],
                r["score"],
                r["method"],
                format_number(r["estimate"]),
                format_number(r["true_acc"]),
                format_number(r["abs_error"]),
            ]
            for r in rows
        ],
    )


def _md_atc(report: Report) -> list[str]:
    lines = [
        "## Accuracy estimation without labels (ATC / DoC)",
        "",
        f"Threshold learned on {report['id_task']}; targets are the OOD tasks accepted under "
        f"k_policy={report['policies'][0]}.",
        "",
    ]
    if report["atc"]:
        lines += _atc_table(_headline_rows(report["atc"])) + _reasons(report["atc"])
    return lines


def _equivalence_groups(rows: Sequence[AuditRow]) -> dict[str, list[list[str]]]:
    """``{task: [[score, score, ...], ...]}``: the groups of order-equivalent scores (two or more)."""
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


def _md_answer_order(report: Report) -> list[str]:
    """The order audit's AUROC per answer order (only for permuted records; `lm-eval-evidential permutations`)."""
    rows = _headline_rows(report.get("answer_order") or [])
    if not rows:
        return []
    lines = [
        "## Answer order (`lm-eval-evidential permutations`)",
        "",
        "Each question was shown in several orders of its options; order s of the ID task is compared with order s "
        "of the OOD task. The spread is what reordering the same options alone does to the AUROC.",
        "",
    ]
    lines += _table(
        ["ID → OOD", "score", "orders", "AUROC identity", "AUROC min / median / max", "order-averaged"],
        [
            [
                f"{r['id_task']} → {r['ood_task']}",
                r["score"],
                r["n_orders"],
                format_number(r["auroc_identity"]),
                " / ".join(format_number(r[k]) for k in ("auroc_min", "auroc_median", "auroc_max")),
                format_number(r["auroc_order_averaged"]),
            ]
            for r in rows
        ],
    )
    return lines + _reasons(rows) + [""]


def _md_orders(report: Report) -> list[str]:
    lines = [
        "## Score-order equivalence",
        "",
        "Order-equivalent scores give identical AUROC, AUPR, PRR, AURC and ATC (Maaz et al. 2023), so each group "
        f"below is one choice, not several. Every pair is in {APPENDIX_FILE}.",
        "",
    ]
    for task, groups in _equivalence_groups(report["orders"]).items():
        text = "; ".join(" = ".join(g) for g in groups) if groups else "no two scores order the examples alike"
        lines += [f"- {task}: {text}"]
    return lines + [""]


def _md_not_computed(report: Report) -> list[str]:
    if not report["skipped"]:
        return []
    return ["## Not computed", ""] + [f"- {s['section']}: {s['reason']}" for s in report["skipped"]] + [""]


def _md_appendix(report: Report) -> list[str]:
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
        body = _table(
            ["task", "score A", "score B", "discordant pairs", "order-equivalent"],
            [
                [
                    r["task"],
                    r["score_a"],
                    r["score_b"],
                    format_number(r["discordant_fraction"], 4),
                    format_number(bool(r["order_equivalent"])),
                ]
                for r in report["orders"]
            ],
        )
        lines += _details(f"Score-order equivalence, every pair ({len(report['orders'])} rows)", body)
    return lines
