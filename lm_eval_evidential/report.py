"""One folder with every audit of an ID task against OOD tasks: ``report.md``, ``report.json``, figures.

:func:`build_report` runs, on loaded :class:`~lm_eval_evidential.records.Records`:

1. the K check and OOD-detection table of each OOD task under each requested ``k_policy``
   (:func:`lm_eval_evidential.audits.ood.ood_rows`); a pair refused under ``assert`` is listed with
   the error text and the remedies, never compared;
2. the K sweep of each accepted pair (McNamara 2026, Table 1 / Figure 1) with its DeLong test;
3. calibration, selective prediction (PRR, AURC), ATC accuracy estimates and score-order
   equivalence (:mod:`lm_eval_evidential.audits.quality`).

Sections 2 and 3 use the *first* policy given. A section that cannot be computed on these
records (e.g. the K sweep of softmax records, which have no alpha) is reported as skipped with
the reason; everything else is still written. All files are written atomically.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from pathlib import Path

from lm_eval_evidential import plots
from lm_eval_evidential.audits.ood import (
    POLICIES,
    CardinalityMismatchError,
    k_check,
    ksweep_delong,
    ksweep_rows,
    ood_rows,
    resolve_scores,
    sensitivity_lines,
    subset_records,
)
from lm_eval_evidential.metrics.cardinality import k_histogram
from lm_eval_evidential.metrics.scores import OOD_DEFAULT_SCORES
from lm_eval_evidential.records import (
    RECORDS_FILE_RE,
    Records,
    atomic_write_text,
    check_same_producer,
)

__all__ = ["MISMATCH_STATEMENT", "build_report", "render_markdown"]

MISMATCH_STATEMENT = (
    "Vacuity u = λK/S depends on the class count K itself (McNamara 2026, Proposition 1): appending an answer "
    "option that receives no evidence raises u unless that option gets the mean concentration S/K. So when the "
    "in-distribution (ID) questions have K options and the OOD questions have a different number, ID and OOD "
    "separate partly *because of K*, not because the model is less certain, and AUROC/AUPR are inflated "
    "(McNamara 2026, Table 1: OBQA → ARC-C reciprocal-vacuity AUROC 0.570 becomes 0.842 when one zero-evidence option "
    "is appended to the OOD side only). Max probability and entropy-based scores have K-dependent ranges too. "
    "A valid comparison needs K_ID = K_OOD: use a K-matched control task — a distractor-removal control "
    "(csqa_k4_edl, arc_c_k4_edl, arc_e_k4_edl: wrong options removed down to the ID task's K, every question with "
    "enough options kept) or csqa4_edl (CSQA without option E and without the questions answered E) — or "
    "k_policy=restrict (only OOD questions with the ID task's K); the section on K-matched controls below shows "
    "what each costs. k_policy=report computes the comparison "
    "anyway to reproduce the artefact, and marks those rows matched: false."
)

_META_FIELDS = ("pretrained", "model", "peft", "method", "prior_weight", "sigma_mult", "num_noises", "seed", "dtype")


def _policies(k_policy) -> list[str]:
    pols = [k_policy] if isinstance(k_policy, str) else list(k_policy)
    pols = list(dict.fromkeys(p.strip() for p in pols if p and p.strip()))
    bad = [p for p in pols if p not in POLICIES]
    if not pols or bad:
        raise ValueError(f"k_policy must be one or more of {', '.join(POLICIES)}, got {k_policy!r}")
    return pols


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)


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


def _refusal(policy: str, id_task: str, task: str, exc: Exception) -> dict:
    return {
        "policy": policy,
        "id_task": id_task,
        "ood_task": task,
        "error": str(exc),
        "suggestion": (
            f"compare {id_task} with {_controls_phrase(task)} instead, or rerun with "
            f"--k-policy restrict to keep only the {task} questions whose K equals {id_task}'s"
        ),
    }


@functools.cache
def _shipped_controls() -> dict[str, list[dict]]:
    """``{OOD task: [{"task", "control"}]}``: the K-matched control tasks that ship (from their YAMLs)."""
    from lm_eval_evidential.harness.datasets import control_tasks
    from lm_eval_evidential.harness.plugin import tasks_dir

    return control_tasks(tasks_dir())


def _controls_phrase(task: str) -> str:
    names = [c["task"] for c in _shipped_controls().get(task, [])]
    if names:
        return "its K-matched control task" + ("s " if len(names) > 1 else " ") + " or ".join(names)
    return "a K-matched control task (e.g. a distractor-removal control such as csqa_k4_edl or arc_c_k4_edl)"


RESTRICT_CONTROL = "k_policy=restrict: only the questions whose K equals the ID task's K; the others dropped"


def control_rows(
    id_records: Records,
    ood_records: Sequence[Records],
    *,
    scores: Sequence[str] | None = None,
    level: float = 0.95,
    allow_fingerprint_mismatch: bool = False,
) -> list[dict]:
    """What each K-matched control keeps and what it measures, side by side, per OOD dataset.

    For every OOD task that has shipped controls (or whose control is among ``ood_records``):
    one row for ``k_policy=restrict`` on that task's own records and one per control task
    (records whose metadata names it in ``control.of``, or a shipped control of it). Row keys:
    ``source, control, description, evaluated, n_source, n_kept, n_excluded, excluded,
    matched, error, auroc`` (``{score: {"auroc", "auroc_ci"}}``, DeLong CI at ``level``).
    A control absent from the records is listed with ``evaluated: false`` (evaluate it to compare).
    Records of different producers are refused unless ``allow_fingerprint_mismatch``.
    """
    allow = allow_fingerprint_mismatch
    shipped = _shipped_controls()
    by_task = {r.task: r for r in ood_records}
    of = {r.task: (r.meta.get("control") or {}).get("of") for r in ood_records}
    for source, controls in shipped.items():
        for c in controls:
            of[c["task"]] = of.get(c["task"]) or source
    sources = list(dict.fromkeys([*(t for t in by_task if t in shipped), *(of[t] for t in by_task if of.get(t))]))
    rows = []
    for source in sources:
        described = {c["task"]: c["control"] for c in shipped.get(source, [])}
        controls = list(dict.fromkeys([*described, *(t for t in by_task if of.get(t) == source)]))
        src = by_task.get(source)
        rows.append(_control_row(id_records, src, source, "restrict", RESTRICT_CONTROL, src, scores, level, allow))
        for name in controls:
            rows.append(
                _control_row(id_records, by_task.get(name), source, name, described.get(name, ""), src, scores, level, allow)
            )
    return rows


def _control_row(id_records, records, source, control, description, source_records, scores, level, allow) -> dict:
    summary = (records.meta.get("control") or {}) if records is not None else {}
    n_source = summary.get("n_questions", len(source_records) if source_records is not None else None)
    row = {
        "source": source, "control": control, "description": description or summary.get("rule", ""),
        "evaluated": records is not None, "n_source": n_source, "n_kept": None, "n_excluded": None,
        "excluded": summary.get("excluded", {}), "matched": None, "error": None, "auroc": {},
    }  # fmt: skip
    if records is None:
        return row
    try:
        policy = "restrict" if control == "restrict" else "assert"
        names = resolve_scores(scores, id_records, records, default=OOD_DEFAULT_SCORES[:2])
        found = ood_rows(
            id_records, records, scores=names, k_policy=policy, n_boot=0, level=level, allow_fingerprint_mismatch=allow
        )
    except CardinalityMismatchError as exc:
        row["error"] = str(exc).split(". ")[0]
        if control == "restrict":
            row.update(n_kept=0, n_excluded=n_source)
            hist = k_histogram(id_records.k)
            row["excluded"] = {f"K ≠ {_k(next(iter(hist)) if len(hist) == 1 else hist)}": n_source}
        return row
    first = found[0]
    row["n_kept"], row["matched"] = first["n_ood"], first["matched"]
    if n_source is not None:
        row["n_excluded"] = n_source - first["n_ood"]
    if control == "restrict" and row["n_excluded"]:
        row["excluded"] = {f"K ≠ {_k(first['k_id'])}": row["n_excluded"]}
    row["auroc"] = {r["score"]: {"auroc": r["auroc"], "auroc_ci": r["auroc_ci"]} for r in found}
    return row


def build_report(
    id_records: Records,
    ood_records: Sequence[Records],
    out_dir,
    *,
    k_policy: str | Sequence[str] = "assert",
    scores: Sequence[str] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    max_extra: int = 4,
    n_bins: int = 15,
    allow_fingerprint_mismatch: bool = False,
) -> dict:
    """Write ``report.md``, ``report.json`` and the figures (PNG + SVG) into ``out_dir``; return the report dict.

    ``k_policy`` is one policy or several (one OOD table each); the K sweep, ATC and the
    other per-pair sections use the first. ``scores`` restricts every section to those
    score names (default: every score the records can give; the K sweep defaults to
    ``OOD_DEFAULT_SCORES``). The dict has the sections ``meta, k_histograms, policies, ood,
    controls, ksweep, calibration, selective, atc, orders, figures, skipped``, all rows JSON-ready.
    Records of different producers raise ``FingerprintMismatchError`` before anything is
    written, unless ``allow_fingerprint_mismatch`` (then the differences are in ``meta_warnings``).
    """
    from lm_eval_evidential.audits import quality
    from lm_eval_evidential.records.io import write_json

    policies = _policies(k_policy)
    primary = policies[0]
    ood_records = list(ood_records)
    if not ood_records:
        raise ValueError("build_report needs at least one OOD task")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    all_records = [id_records, *ood_records]
    check_same_producer(all_records, allow=allow_fingerprint_mismatch)
    allow = {"allow_fingerprint_mismatch": allow_fingerprint_mismatch}
    by_task = {r.task: r for r in all_records}
    meta, meta_warnings = _model_meta(all_records)
    report: dict = {
        "id_task": id_records.task,
        "ood_tasks": [r.task for r in ood_records],
        "meta": meta,
        "meta_warnings": meta_warnings,
        "runs": {r.task: r.meta.get("date_id") or _date_id_of(r) for r in all_records},
        "k_histograms": {r.task: k_histogram(r.k) for r in all_records},
        "policies": policies,
        "mismatch_statement": MISMATCH_STATEMENT,
        "ood": {},
        "controls": [],
        "ksweep": {},
        "calibration": [],
        "selective": [],
        "atc": [],
        "orders": [],
        "figures": {},
        "skipped": [],
    }

    def skip(section: str, reason) -> None:
        report["skipped"].append({"section": section, "reason": str(reason)})

    def fig_paths(paths) -> list[str]:
        return [p.name for p in paths]

    # 1. OOD detection, one table per policy.
    for policy in policies:
        rows, refused = [], []
        for r in ood_records:
            try:
                rows += ood_rows(id_records, r, scores=scores, k_policy=policy, n_boot=n_boot, seed=seed, level=level, **allow)
            except CardinalityMismatchError as exc:
                refused.append(_refusal(policy, id_records.task, r.task, exc))
        report["ood"][policy] = {"rows": rows, "refused": refused}

    # 1b. The K-matched controls side by side: what each keeps and what it measures.
    try:
        report["controls"] = control_rows(id_records, ood_records, scores=scores, level=level, **allow)
    except ValueError as exc:
        report["controls"] = []
        skip("controls", exc)

    # 2. K sweep of each pair the primary policy accepts.
    accepted: list[Records] = []  # OOD records as the primary policy evaluates them (restricted or whole)
    for r in ood_records:
        entry: dict = {}
        try:
            check = k_check(id_records, r, primary)
        except CardinalityMismatchError as exc:
            report["ksweep"][r.task] = {"refused": _refusal(primary, id_records.task, r.task, exc)}
            continue
        accepted.append(subset_records(r, check.keep_ood))
        try:
            entry["rows"] = ksweep_rows(id_records, r, max_extra=max_extra, scores=scores, k_policy=primary, **allow)
            entry["delong_test"] = ksweep_delong(id_records, r, k_policy=primary, **allow) if max_extra >= 1 else None
            name = f"ksweep_{_slug(id_records.task)}_vs_{_slug(r.task)}"
            paths = plots.plot_ksweep(entry["rows"], out / name, title=f"{id_records.task} → {r.task} (k_policy={primary})")
            report["figures"][name] = fig_paths(paths)
            entry["figure"] = paths[0].name
        except ValueError as exc:
            entry = {"skipped": str(exc)}
            skip(f"ksweep {r.task}", exc)
        report["ksweep"][r.task] = entry

    # 3. Per-task quality audits (K plays no cross-set role there), then ATC on accepted targets.
    try:
        report["calibration"] = quality.calibration_rows(by_task, n_bins=n_bins, **allow)
        report["figures"]["reliability"] = fig_paths(plots.save_reliability_figure(by_task, out / "reliability", n_bins=n_bins))
    except ValueError as exc:
        skip("calibration", exc)
    try:
        report["selective"] = quality.selective_rows(by_task, scores=scores, **allow)
        name = f"risk_coverage_{_slug(id_records.task)}"
        report["figures"][name] = fig_paths(plots.save_risk_coverage_figure(id_records, out / name, scores=scores))
    except ValueError as exc:
        skip("selective", exc)
    try:
        if accepted:
            report["atc"] = quality.atc_rows(id_records, accepted, scores=scores, **allow)
        else:
            skip("atc", f"no OOD task is accepted under k_policy={primary}")
    except ValueError as exc:
        skip("atc", exc)
    try:
        report["orders"] = quality.order_rows(by_task, scores=scores, **allow)
    except ValueError as exc:
        skip("orders", exc)

    write_json(out / "report.json", report)
    text = render_markdown(report)
    atomic_write_text(out / "report.md", text)
    return report


# ---- Markdown ----


def _num(v, digits: int = 3, signed: bool = False) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:+.{digits}f}" if signed else f"{v:.{digits}f}"
    return str(v)


def _ci(v) -> str:
    return f"[{_num(v[0])}, {_num(v[1])}]" if v and not all(x is None or x != x for x in v) else "n/a"


def _k(v) -> str:
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {n}" for k, n in v.items()) + "}"
    return "mixed" if v is None else str(v)


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(headers: Sequence[str], body: Sequence[Sequence]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in body]
    return lines + [""]


def _figure(report: dict, name: str, caption: str) -> list[str]:
    files = report["figures"].get(name)
    if not files:
        return []
    png = next((f for f in files if f.endswith(".png")), files[0])
    others = ", ".join(f"[{f}]({f})" for f in files if f != png)
    return [f"![{caption}]({png})", "", f"*{caption}* ({others})" if others else f"*{caption}*", ""]


def _reasons(rows: Sequence[dict]) -> list[str]:
    out = [f"- {r.get('task') or r.get('target_task') or ''} {r.get('score', '')}: {r['reason']}" for r in rows if r.get("reason")]
    return ["Undefined values (n/a):", *out, ""] if out else []


def _controls_markdown(report: dict) -> list[str]:
    rows = report.get("controls") or []
    if not rows:
        return []
    names = list(dict.fromkeys(score for r in rows for score in r["auroc"])) or list(OOD_DEFAULT_SCORES[:1])
    L = ["## K-matched controls side by side", "",
         f"Each row brings an OOD dataset to {report['id_task']}'s K in its own way. *Kept / n* and *excluded* say "
         "what the control costs; AUROC (ID = positive, DeLong 95% CI) what it then measures. `restrict` drops every "
         "question whose K differs; a `*_k4_edl` control removes wrong options only (chosen by a seeded hash of the "
         "question id, gold always kept) and excludes only questions with fewer options; csqa4_edl drops option E "
         "and with it every question answered E, a selection by the gold label.", ""]  # fmt: skip
    body = []
    for r in rows:
        kept = "—" if r["n_kept"] is None else f"{r['n_kept']} / {_num(r['n_source'])}"
        excluded = "; ".join(f"{n}: {why}" for why, n in r["excluded"].items()) or _num(r["n_excluded"])
        if not r["evaluated"]:
            cells = [f"not in these records: evaluate {r['control']}"] + [""] * max(len(names) - 1, 0)
            kept, excluded = "—", "—"
        elif r["error"]:
            cells = [f"refused: {r['error']}"] + [""] * max(len(names) - 1, 0)
        else:
            cells = [f"{_num(r['auroc'][n]['auroc'])} {_ci(r['auroc'][n]['auroc_ci'])}" if n in r["auroc"] else "n/a"
                     for n in names]  # fmt: skip
        body.append([r["source"], r["control"], r["description"], kept, excluded, *cells])
    L += _table(["OOD data", "control", "what it does", "kept / n", "excluded", *(f"AUROC {n} [95% CI]" for n in names)], body)
    return L


def render_markdown(report: dict) -> str:
    """``report.md`` from the dict :func:`build_report` returns (tables ready to paste into a paper)."""
    idt = report["id_task"]
    meta = report["meta"]
    primary = report["policies"][0]
    L = [f"# OOD audit: {idt} (ID) vs {', '.join(report['ood_tasks'])}", ""]
    model = meta.get("pretrained") or meta.get("model") or "unknown"
    L += [
        f"- **Model**: {model}" + (f" + adapter {meta['peft']}" if meta.get("peft") else ""),
        f"- **Method**: {meta.get('method')}, prior weight λ = {meta.get('prior_weight')}"
        + (f", sigma_mult = {meta.get('sigma_mult')}, num_noises = {meta.get('num_noises')}" if meta.get("method") == "ib_edl" else ""),
        "- **Runs**: " + ", ".join(f"{t} {d or '(no date_id)'}" for t, d in report["runs"].items()),
        f"- **K policy**: {', '.join(report['policies'])}"
        + (f" (K sweep, ATC and later sections use {primary})" if len(report["policies"]) > 1 else ""),
        "- **Convention**: ID = positive (label 1); every score is oriented higher = more in-distribution.",
        "",
    ]
    for w in report["meta_warnings"]:
        L += [f"> **Warning**: the records come from different model settings — {w}.", ""]
    L += ["## Class counts (K)", ""]
    id_hist = report["k_histograms"][idt]
    L += _table(
        ["task", "role", "n", "K histogram {K: n}", "same K as ID"],
        [
            [t, "ID" if t == idt else "OOD", sum(h.values()), _k(h), "—" if t == idt else _num(set(h) == set(id_hist) and len(h) == 1)]
            for t, h in report["k_histograms"].items()
        ],
    )
    L += ["**What a K mismatch means.** " + report["mismatch_statement"], ""]

    L += ["## OOD detection", ""]
    for policy, sec in report["ood"].items():
        L += [f"### k_policy = {policy}", ""]
        rows = sec["rows"]
        if rows:
            L += _table(
                ["OOD task", "score", "K_ID", "K_OOD", "n_ID", "n_OOD", "dropped ID/OOD", "K matched",
                 "AUROC", "95% CI (DeLong)", "AUPR-In", "95% CI (bootstrap)", "AUPR-Out", "FPR95", "AUPR base"],
                [
                    [r["ood_task"], r["score"], _k(r["k_id"]), _k(r["k_ood"]), r["n_id"], r["n_ood"],
                     f"{r['n_dropped']['id']}/{r['n_dropped']['ood']}", "yes" if r["matched"] else "**NO**",
                     _num(r["auroc"]), _ci(r["auroc_ci"]), _num(r["aupr_in"]), _ci(r["aupr_in_ci"]),
                     _num(r["aupr_out"]), _num(r["fpr95"]), _num(r["aupr_baseline"])]
                    for r in rows
                ],
            )  # fmt: skip
            if not all(r["matched"] for r in rows):
                L += ["> Rows with K matched = **NO** compare different class counts: their AUROC/AUPR partly measure "
                      "K, not uncertainty. Do not report them as OOD-detection results.", ""]  # fmt: skip
        else:
            L += ["No OOD task was compared under this policy.", ""]
        for ref in sec["refused"]:
            L += [f"**Refused: {ref['id_task']} vs {ref['ood_task']}** (k_policy={ref['policy']}, not compared).", "",
                  "```", ref["error"], "```", "", f"Suggestion: {ref['suggestion']}.", ""]  # fmt: skip

    L += _controls_markdown(report)

    L += ["## K sweep (McNamara 2026, Table 1 / Figure 1)", "",
          f"Zero-evidence options (α = λ) appended to the OOD side only (OOD-only) or to both sides (matched), model "
          f"outputs fixed; Δ against x = 0. k_policy = {primary}.", ""]  # fmt: skip
    for task, entry in report["ksweep"].items():
        L += [f"### {idt} → {task}", ""]
        if "refused" in entry:
            L += [f"Refused under k_policy={primary} (K mismatch, see above); not swept.", ""]
            continue
        if "skipped" in entry:
            L += [f"Not computed: {entry['skipped']}", ""]
            continue
        rows = entry["rows"]
        L += _table(
            ["condition", "x", "K_ID", "K_OOD", "score", "AUROC", "ΔAUROC", "AUPR-In", "ΔAUPR"],
            [
                ["OOD-only" if r["condition"] == "ood_only" else "matched", r["extra"], _k(r["k_id"]), _k(r["k_ood"]),
                 r["score"], _num(r["auroc"]), _num(r["delta_auroc"], signed=True), _num(r["aupr_in"]),
                 _num(r["delta_aupr"], signed=True)]
                for r in rows
            ],
        )  # fmt: skip
        L += [f"- {line}" for line in sensitivity_lines(rows)] + [""]
        t = entry.get("delong_test")
        if t:
            p = t["p_value"]
            L += [f"DeLong test ({t['score']}, OOD-only x = {t['extra']} vs x = 0, same examples): AUROC "
                  f"{_num(t['auroc_base'])} → {_num(t['auroc_expanded'])}, Δ = {_num(t['diff'], signed=True)}, "
                  f"z = {_num(t['z'], 2)}, p = {'n/a' if p is None or p != p else f'{p:.3g}'}.", ""]  # fmt: skip
        L += _figure(report, f"ksweep_{_slug(idt)}_vs_{_slug(task)}", f"AUROC and AUPR-In of {idt} → {task} as K grows")

    L += ["## Calibration", ""]
    if report["calibration"]:
        L += _table(
            ["task", "accuracy", "ECE (15 bins)", "adaptive ECE", "NLL", "Brier"],
            [[r["task"], _num(r["acc"]), _num(r["ece"]), _num(r["adaptive_ece"]), _num(r["nll"]), _num(r["brier"])]
             for r in report["calibration"]],
        )  # fmt: skip
        L += _reasons(report["calibration"])
    L += _figure(report, "reliability", "Reliability diagrams (confidence = max E[p])")

    L += ["## Selective prediction", "", "PRR: 1 = oracle, 0 = random (higher is better); AURC: lower is better.", ""]
    if report["selective"]:
        L += _table(
            ["task", "score", "PRR@0.5", "PRR@0.75", "AURC", "Spearman"],
            [[r["task"], r["score"], _num(r["prr_0.5"]), _num(r["prr_0.75"]), _num(r["aurc"]), _num(r["spearman"])]
             for r in report["selective"]],
        )  # fmt: skip
        L += _reasons(report["selective"])
    L += _figure(report, f"risk_coverage_{_slug(idt)}", f"Risk-coverage curves on {idt}")

    L += ["## Accuracy estimation without labels (ATC / DoC)", "",
          f"Threshold learned on {idt}; targets are the OOD tasks accepted under k_policy={primary}.", ""]  # fmt: skip
    if report["atc"]:
        L += _table(
            ["target", "score", "method", "estimate", "true accuracy", "|error|"],
            [[r["target_task"], r["score"], r["method"], _num(r["estimate"]), _num(r["true_acc"]), _num(r["abs_error"])]
             for r in report["atc"]],
        )  # fmt: skip
        L += _reasons(report["atc"])

    L += ["## Score-order equivalence", "",
          "Order-equivalent scores give identical AUROC, AUPR, PRR, AURC and ATC (Maaz et al. 2023).", ""]  # fmt: skip
    if report["orders"]:
        L += _table(
            ["task", "score A", "score B", "discordant pairs", "order-equivalent"],
            [[r["task"], r["score_a"], r["score_b"], _num(r["discordant_fraction"], 4), _num(bool(r["order_equivalent"]))]
             for r in report["orders"]],
        )  # fmt: skip

    if report["skipped"]:
        L += ["## Not computed", ""] + [f"- {s['section']}: {s['reason']}" for s in report["skipped"]] + [""]
    return "\n".join(L).rstrip() + "\n"
