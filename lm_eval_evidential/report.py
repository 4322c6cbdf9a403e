"""One folder with every audit of an ID task against OOD tasks: ``report.md``, ``report.json``, figures.

:func:`build_report` runs, on loaded :class:`~lm_eval_evidential.records.Records`:

1. the K check and OOD-detection table of each OOD task under each requested ``k_policy``
   (:func:`lm_eval_evidential.audits.ood.ood_rows`); a pair refused under a policy is listed with
   the reason and the remedy that fits it, never compared;
2. the K sweep of each accepted pair (McNamara (2026) arXiv:2605.06382, Table 1 / Figure 1)
   with its DeLong test;
3. calibration, selective prediction (PRR, AURC), ATC accuracy estimates and score-order
   equivalence (:mod:`lm_eval_evidential.audits.quality`);
4. a summary of all of it (:func:`summarize`), which ``report.md`` opens with: the valid
   (K-matched) comparisons with their headline AUROC / AUPR-In and CIs, what was refused and
   why, the size of the artefact the K sweep shows, and whether the numbers are illustrative
   only (records of the bundled tiny model).

Sections 2 and 3 use the *first* policy given. A section that cannot be computed on these
records (e.g. the K sweep of softmax records, which have no alpha) is reported as skipped with
the reason; everything else is still written. ``report.md`` shows the few scores that matter
(:data:`~lm_eval_evidential.metrics.scores.OOD_DEFAULT_SCORES`) in its body and every score in
an appendix. All files are written atomically, and the folder too (built beside, swapped in).
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
from lm_eval_evidential.metrics.calibration import check_n_bins
from lm_eval_evidential.metrics.cardinality import check_max_extra, k_histogram
from lm_eval_evidential.metrics.detection import check_n_boot
from lm_eval_evidential.metrics.scores import OOD_DEFAULT_SCORES
from lm_eval_evidential.records import (
    RECORDS_FILE_RE,
    OutputPathError,
    Records,
    atomic_folder,
    atomic_write_text,
    check_same_producer,
)
from lm_eval_evidential.records.provenance import is_illustrative

__all__ = [
    "MISMATCH_STATEMENT",
    "ILLUSTRATIVE_NOTE",
    "build_report",
    "control_rows",
    "is_report_folder",
    "summarize",
    "render_markdown",
]

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

ILLUSTRATIVE_NOTE = (
    "These records come from the bundled tiny model (random weights, a few fine-tuning steps) on sample questions "
    "written for this project: every number here is **illustrative only** and says nothing about real models or "
    "datasets. It shows how the audit works, not what a real model does."
)

_META_FIELDS = ("pretrained", "model", "peft", "method", "prior_weight", "sigma_mult", "num_noises", "seed", "dtype")
#: The score of the summary's headline, in order of preference: the paper's 1/u, then max prob.
_HEADLINE_SCORES = ("reciprocal_vacuity", "max_prob")


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


def _refusal(policy: str, id_task: str, task: str, exc: CardinalityMismatchError) -> dict:
    controls = [c["task"] for c in _shipped_controls().get(task, [])]
    return {
        "policy": policy,
        "id_task": id_task,
        "ood_task": task,
        "error": str(exc),
        "reason": exc.summary,
        "suggestion": exc.remedy(controls),
    }


@functools.cache
def _shipped_controls() -> dict[str, list[dict]]:
    """``{OOD task: [{"task", "control"}]}``: the K-matched control tasks that ship (from their YAMLs)."""
    from lm_eval_evidential.harness.datasets import control_tasks
    from lm_eval_evidential.harness.plugin import tasks_dir

    return control_tasks(tasks_dir())


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
                _control_row(
                    id_records, by_task.get(name), source, name, described.get(name, ""), src, scores, level, allow
                )
            )
    return rows


def _control_row(id_records, records, source, control, description, source_records, scores, level, allow) -> dict:
    summary = (records.meta.get("control") or {}) if records is not None else {}
    n_source = summary.get("n_questions", len(source_records) if source_records is not None else None)
    row = {
        "source": source,
        "control": control,
        "description": description or summary.get("rule", ""),
        "evaluated": records is not None,
        "n_source": n_source,
        "n_kept": None,
        "n_excluded": None,
        "excluded": summary.get("excluded", {}),
        "matched": None,
        "error": None,
        "auroc": {},
    }
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


# ---- building ----


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
    score names (default: every score the records can give; the K sweep and the risk-coverage
    figure default to ``OOD_DEFAULT_SCORES``). The dict has the sections ``summary, meta,
    k_histograms, policies, ood, controls, ksweep, calibration, selective, atc, orders, figures,
    skipped``, all rows JSON-ready. An OOD task equal to the ID task is refused (ValueError).
    Records of different producers raise ``FingerprintMismatchError`` before anything is
    written, unless ``allow_fingerprint_mismatch`` (then the differences are in ``meta_warnings``).

    The folder is written whole or not at all (:func:`~lm_eval_evidential.records.io.atomic_folder`):
    built beside ``out_dir`` and swapped in, so a killed or failed run never leaves files of two
    runs side by side. An existing ``out_dir`` is replaced only if it is a previous report (or
    empty); a file, another folder, or a folder holding the records read are refused
    (:class:`~lm_eval_evidential.records.OutputPathError`), like bad options, before any work.
    """
    policies = _policies(k_policy)
    check_n_boot(n_boot)  # size options refused before any work (a section would otherwise only be skipped)
    check_max_extra(max_extra)
    check_n_bins(n_bins)
    ood_records = list(ood_records)
    if not ood_records:
        raise ValueError("build_report needs at least one OOD task")
    same = [r.task for r in ood_records if r.task == id_records.task]
    if same:
        raise ValueError(
            f"{same[0]!r} is both the ID task and an OOD task: comparing a task with itself gives AUROC 0.5 by "
            "construction; leave it out of the OOD tasks"
        )
    all_records = [id_records, *ood_records]
    check_same_producer(all_records, allow=allow_fingerprint_mismatch)
    out = Path(out_dir)
    for r in all_records:
        if r.path is not None and out.resolve() in Path(r.path).resolve().parents:
            raise OutputPathError(
                f"report folder {out} holds {r.path}, a records file this report reads; name a folder outside the "
                "records"
            )
    with atomic_folder(out, replaceable=is_report_folder) as staging:
        return _write_report(
            id_records,
            ood_records,
            staging,
            policies,
            scores=scores,
            n_boot=n_boot,
            seed=seed,
            level=level,
            max_extra=max_extra,
            n_bins=n_bins,
            allow_fingerprint_mismatch=allow_fingerprint_mismatch,
        )


def is_report_folder(path) -> bool:
    """Whether ``path`` holds a report written by :func:`build_report` (its report.json)."""
    import json

    try:
        report = json.loads((Path(path) / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(report, dict) and "id_task" in report and "mismatch_statement" in report


def _write_report(
    id_records,
    ood_records,
    out: Path,
    policies,
    *,
    scores,
    n_boot,
    seed,
    level,
    max_extra,
    n_bins,
    allow_fingerprint_mismatch,
) -> dict:
    from lm_eval_evidential.records.io import write_json

    all_records = [id_records, *ood_records]
    meta, meta_warnings = _model_meta(all_records)
    report: dict = {
        "id_task": id_records.task,
        "ood_tasks": [r.task for r in ood_records],
        "summary": {},
        "meta": meta,
        "meta_warnings": meta_warnings,
        "illustrative": any(is_illustrative(r.meta) for r in all_records),
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
    allow = {"allow_fingerprint_mismatch": allow_fingerprint_mismatch}
    opts = {"scores": scores, "n_boot": n_boot, "seed": seed, "level": level, **allow}
    for policy in policies:
        report["ood"][policy] = _ood_section(id_records, ood_records, policy, **opts)
    try:  # the K-matched controls side by side: what each keeps and what it measures
        report["controls"] = control_rows(id_records, ood_records, scores=scores, level=level, **allow)
    except ValueError as exc:
        _skip(report, "controls", exc)
    accepted = _ksweep_section(
        report, id_records, ood_records, out, policies[0], scores=scores, max_extra=max_extra, **allow
    )
    _quality_sections(report, id_records, ood_records, accepted, out, scores=scores, n_bins=n_bins, **allow)
    report["summary"] = summarize(report)

    write_json(out / "report.json", report)
    atomic_write_text(out / "report.md", render_markdown(report))
    return report


def _ood_section(id_records: Records, ood_records: Sequence[Records], policy: str, **opts) -> dict:
    """The OOD-detection rows of every OOD task under ``policy``, and the refused pairs."""
    rows, refused = [], []
    for r in ood_records:
        try:
            rows += ood_rows(id_records, r, k_policy=policy, **opts)
        except CardinalityMismatchError as exc:
            refused.append(_refusal(policy, id_records.task, r.task, exc))
    return {"rows": rows, "refused": refused}


def _skip(report: dict, section: str, reason) -> None:
    report["skipped"].append({"section": section, "reason": str(reason)})


def _ksweep_section(
    report: dict,
    id_records,
    ood_records,
    out: Path,
    policy: str,
    *,
    scores,
    max_extra,
    allow_fingerprint_mismatch: bool,
) -> list[Records]:
    """The K sweep (table, DeLong test, figure) of each pair ``policy`` accepts; returns those OOD records
    as ``policy`` evaluates them (restricted or whole)."""
    accepted: list[Records] = []
    for r in ood_records:
        try:
            check = k_check(id_records, r, policy)
        except CardinalityMismatchError as exc:
            report["ksweep"][r.task] = {"refused": _refusal(policy, id_records.task, r.task, exc)}
            continue
        accepted.append(subset_records(r, check.keep_ood))
        entry: dict = {}
        try:
            allow = {"allow_fingerprint_mismatch": allow_fingerprint_mismatch}
            entry["rows"] = ksweep_rows(id_records, r, max_extra=max_extra, scores=scores, k_policy=policy, **allow)
            entry["delong_test"] = ksweep_delong(id_records, r, k_policy=policy, **allow) if max_extra >= 1 else None
            name = f"ksweep_{_slug(id_records.task)}_vs_{_slug(r.task)}"
            paths = plots.plot_ksweep(
                entry["rows"], out / name, title=f"{id_records.task} → {r.task} (k_policy={policy})"
            )
            report["figures"][name] = [p.name for p in paths]
            entry["figure"] = paths[0].name
        except ValueError as exc:
            entry = {"skipped": str(exc)}
            _skip(report, f"ksweep {r.task}", exc)
        report["ksweep"][r.task] = entry
    return accepted


def _quality_sections(
    report: dict, id_records, ood_records, accepted, out: Path, *, scores, n_bins, allow_fingerprint_mismatch: bool
) -> None:
    """Per-task calibration, selective prediction and score orders (K plays no cross-set role there),
    then ATC from the ID task to the OOD tasks the first policy accepts."""
    from lm_eval_evidential.audits import quality

    by_task = {r.task: r for r in [id_records, *ood_records]}
    allow = {"allow_fingerprint_mismatch": allow_fingerprint_mismatch}
    try:
        report["calibration"] = quality.calibration_rows(by_task, n_bins=n_bins, **allow)
        paths = plots.save_reliability_figure(by_task, out / "reliability", n_bins=n_bins)
        report["figures"]["reliability"] = [p.name for p in paths]
    except ValueError as exc:
        _skip(report, "calibration", exc)
    try:
        report["selective"] = quality.selective_rows(by_task, scores=scores, **allow)
        name = f"risk_coverage_{_slug(id_records.task)}"
        paths = plots.save_risk_coverage_figure(id_records, out / name, scores=scores)
        report["figures"][name] = [p.name for p in paths]
    except ValueError as exc:
        _skip(report, "selective", exc)
    try:
        if accepted:
            report["atc"] = quality.atc_rows(id_records, accepted, scores=scores, **allow)
        else:
            _skip(report, "atc", f"no OOD task is accepted under k_policy={report['policies'][0]}")
    except ValueError as exc:
        _skip(report, "atc", exc)
    try:
        report["orders"] = quality.order_rows(by_task, scores=scores, **allow)
    except ValueError as exc:
        _skip(report, "orders", exc)


# ---- the summary ----


def _headline_score(rows: Sequence[dict]) -> str | None:
    present = list(dict.fromkeys(r["score"] for r in rows))
    return next((s for s in _HEADLINE_SCORES if s in present), present[0] if present else None)


def summarize(report: dict) -> dict:
    """What a reader acts on: valid comparisons with headline numbers, refusals, the K-sweep artefact.

    - ``valid``: one entry per OOD task compared K-matched under some policy (the first such
      policy given): ``ood_task, policy, k, n_id, n_ood, n_dropped_ood, score, auroc, auroc_ci,
      aupr_in, aupr_in_ci`` for the headline score (reciprocal vacuity, else max prob);
    - ``mismatched``: OOD tasks compared across different K (``k_policy=report``), not valid;
    - ``refused``: OOD tasks with no valid comparison: ``ood_task, policies, reason, suggestion``;
    - ``artefact``: per swept pair, the headline score's AUROC at x = 0 and with one zero-evidence
      option appended to the OOD side only (x = 1), the matched-expansion change, DeLong's p, and
      the largest OOD-only AUROC move over every swept score and x.
    """
    all_rows = [r for sec in report["ood"].values() for r in sec["rows"]]
    score = _headline_score(all_rows)
    valid, mismatched = {}, {}
    for policy, sec in report["ood"].items():
        for r in sec["rows"]:
            if r["score"] != score:
                continue
            if r["matched"] and r["ood_task"] not in valid:
                valid[r["ood_task"]] = {
                    "ood_task": r["ood_task"],
                    "policy": policy,
                    "k": r["k_id"],
                    "n_id": r["n_id"],
                    "n_ood": r["n_ood"],
                    "n_dropped_ood": r["n_dropped"]["ood"],
                    "score": score,
                    **{key: r[key] for key in ("auroc", "auroc_ci", "aupr_in", "aupr_in_ci")},
                }
            elif not r["matched"]:
                mismatched.setdefault(
                    r["ood_task"],
                    {
                        "ood_task": r["ood_task"],
                        "policy": policy,
                        "score": score,
                        "auroc": r["auroc"],
                        "k_id": r["k_id"],
                        "k_ood": r["k_ood"],
                    },
                )
    refused: dict[str, dict] = {}
    for policy, sec in report["ood"].items():
        for ref in sec["refused"]:
            if ref["ood_task"] in valid:
                continue
            entry = refused.setdefault(
                ref["ood_task"],
                {"ood_task": ref["ood_task"], "policies": [], "reason": ref["reason"], "suggestion": ref["suggestion"]},
            )
            entry["policies"].append(policy)
    return {
        "illustrative": report["illustrative"],
        "headline_score": score,
        "valid": list(valid.values()),
        "mismatched": [m for t, m in mismatched.items() if t not in valid],
        "refused": list(refused.values()),
        "artefact": [a for task, entry in report["ksweep"].items() if (a := _artefact(task, entry))],
    }


def _artefact(task: str, entry: dict) -> dict | None:
    rows = entry.get("rows")
    if not rows:
        return None
    score = _headline_score(rows)
    at = {(r["condition"], r["extra"]): r for r in rows if r["score"] == score}
    if ("ood_only", 1) not in at:
        return None
    ood_only = [r for r in rows if r["condition"] == "ood_only"]
    worst = max(ood_only, key=lambda r: abs(r["delta_auroc"]))
    test = entry.get("delong_test") or {}
    return {
        "ood_task": task,
        "score": score,
        "auroc_base": at[("ood_only", 0)]["auroc"],
        "auroc_one_extra": at[("ood_only", 1)]["auroc"],
        "delta_auroc": at[("ood_only", 1)]["delta_auroc"],
        "matched_delta_auroc": at[("matched", 1)]["delta_auroc"] if ("matched", 1) in at else None,
        "p_value": test.get("p_value") if test.get("score") == score else None,
        "largest": {"score": worst["score"], "extra": worst["extra"], "delta_auroc": worst["delta_auroc"]},
    }


# ---- Markdown ----


def _num(v, digits: int = 3, signed: bool = False) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        v = v if round(v, digits) else 0.0  # no "-0.000" for a tiny negative
        return f"{v:+.{digits}f}" if signed else f"{v:.{digits}f}"
    return str(v)


def _ci(v) -> str:
    return f"[{_num(v[0])}, {_num(v[1])}]" if v and not all(x is None or x != x for x in v) else "n/a"


def _k(v) -> str:
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {n}" for k, n in v.items()) + "}"
    return "mixed" if v is None else str(v)


def _p(p) -> str:
    return "n/a" if p is None or p != p else f"{p:.2g}"


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(headers: Sequence[str], body: Sequence[Sequence]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in body]
    return lines + [""]


def _details(summary: str, lines: list[str]) -> list[str]:
    """A collapsed block (GitHub and most Markdown viewers fold ``<details>``)."""
    return ["<details>", f"<summary>{summary}</summary>", "", *lines, "</details>", ""] if lines else []


def _figure(report: dict, name: str, caption: str) -> list[str]:
    files = report["figures"].get(name)
    if not files:
        return []
    png = next((f for f in files if f.endswith(".png")), files[0])
    others = ", ".join(f"[{f}]({f})" for f in files if f != png)
    return [f"![{caption}]({png})", "", f"*{caption}* ({others})" if others else f"*{caption}*", ""]


def _reasons(rows: Sequence[dict]) -> list[str]:
    out = [
        f"- {r.get('task') or r.get('target_task') or ''} {r.get('score', '')}: {r['reason']}"
        for r in rows
        if r.get("reason")
    ]
    return ["Undefined values (n/a):", *out, ""] if out else []


def _headline_rows(rows: Sequence[dict], key: str = "score") -> list[dict]:
    """The rows of the few scores that matter (OOD_DEFAULT_SCORES), or all rows if none is among them."""
    few = [r for r in rows if r.get(key) in OOD_DEFAULT_SCORES]
    return few or list(rows)


def render_markdown(report: dict) -> str:
    """``report.md`` from the dict :func:`build_report` returns (tables ready to paste into a paper).

    The summary first, then one section per audit with the few scores that matter, then an
    appendix with every score.
    """
    parts = [
        _md_header,
        _md_summary,
        _md_k_counts,
        _md_ood,
        _md_controls,
        _md_ksweep,
        _md_calibration,
        _md_selective,
        _md_atc,
        _md_orders,
        _md_not_computed,
        _md_appendix,
    ]
    return "\n".join(line for part in parts for line in part(report)).rstrip() + "\n"


def _md_header(report: dict) -> list[str]:
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
        "- **Runs**: " + ", ".join(f"{t} {d or '(no date_id)'}" for t, d in report["runs"].items()),
        f"- **K policy**: {', '.join(policies)}"
        + (f" (K sweep, ATC and later sections use {policies[0]})" if len(policies) > 1 else ""),
        "- **Convention**: ID = positive (label 1); every score is oriented higher = more in-distribution.",
        "",
    ]
    for w in report["meta_warnings"]:
        lines += [f"> **Warning**: the records come from different model settings — {w}.", ""]
    return lines


def _md_summary(report: dict) -> list[str]:
    s, idt = report["summary"], report["id_task"]
    lines = ["## Summary", ""]
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
                    _k(v["k"]),
                    v["policy"],
                    f"{v['n_id']} / {v['n_ood']}" + (f" ({v['n_dropped_ood']} dropped)" if v["n_dropped_ood"] else ""),
                    f"{_num(v['auroc'])} {_ci(v['auroc_ci'])}",
                    f"{_num(v['aupr_in'])} {_ci(v['aupr_in_ci'])}",
                ]
                for v in s["valid"]
            ],
        )
    else:
        lines += ["**No valid comparison**: no OOD task has the ID task's K under the policies given.", ""]
    for m in s.get("mismatched", []):
        lines += [
            f"- **Not valid**: {idt} → {m['ood_task']} was compared across K {_k(m['k_id'])} vs {_k(m['k_ood'])} "
            f"(k_policy={m['policy']}; {m['score']} AUROC {_num(m['auroc'])}): that number partly measures K."
        ]
    for ref in s.get("refused", []):
        lines += [
            f"- **Refused**: {idt} → {ref['ood_task']} (k_policy {', '.join(ref['policies'])}): {ref['reason']}. "
            f"{ref['suggestion']}"
        ]
    for a in s.get("artefact", []):
        m = a["matched_delta_auroc"]
        matched = (
            ""
            if m is None
            else (
                "; appended to both sides it leaves it unchanged"
                if m == 0
                else f"; appended to both sides it moves by {_num(m, signed=True)}"
            )
        )
        big = a["largest"]
        lines += [
            f"- **K artefact** ({idt} → {a['ood_task']}): one zero-evidence option appended to the OOD side only "
            f"moves {a['score']} AUROC {_num(a['auroc_base'])} → {_num(a['auroc_one_extra'])} "
            f"({_num(a['delta_auroc'], signed=True)}, DeLong p = {_p(a['p_value'])}){matched}; the largest "
            f"OOD-only move is {big['score']} {_num(big['delta_auroc'], signed=True)} at x = {big['extra']}."
        ]
    lines += ["", "Details below; tables with every score are in the appendix.", ""]
    return lines


def _md_k_counts(report: dict) -> list[str]:
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
                _k(h),
                "—" if t == idt else _num(set(h) == set(id_hist) and len(h) == 1),
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


def _ood_table(rows: Sequence[dict]) -> list[str]:
    return _table(
        _OOD_HEADERS,
        [
            [
                r["ood_task"],
                r["score"],
                _k(r["k_id"]),
                _k(r["k_ood"]),
                r["n_id"],
                r["n_ood"],
                f"{r['n_dropped']['id']}/{r['n_dropped']['ood']}",
                "yes" if r["matched"] else "**NO**",
                _num(r["auroc"]),
                _ci(r["auroc_ci"]),
                _num(r["aupr_in"]),
                _ci(r["aupr_in_ci"]),
                _num(r["aupr_out"]),
                _num(r["fpr95"]),
                _num(r["aupr_baseline"]),
            ]
            for r in rows
        ],
    )


def _md_ood(report: dict) -> list[str]:
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


def _md_controls(report: dict) -> list[str]:
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
        kept = "—" if r["n_kept"] is None else f"{r['n_kept']} / {_num(r['n_source'])}"
        excluded = "; ".join(f"{n}: {why}" for why, n in r["excluded"].items()) or _num(r["n_excluded"])
        if not r["evaluated"]:
            cells = [f"not in these records: evaluate {r['control']}"] + [""] * max(len(names) - 1, 0)
            kept, excluded = "—", "—"
        elif r["error"]:
            cells = [f"refused: {r['error']}"] + [""] * max(len(names) - 1, 0)
        else:
            cells = [
                f"{_num(r['auroc'][n]['auroc'])} {_ci(r['auroc'][n]['auroc_ci'])}" if n in r["auroc"] else "n/a"
                for n in names
            ]
        body.append([r["source"], r["control"], r["description"], kept, excluded, *cells])
    lines += _table(
        ["OOD data", "control", "what it does", "kept / n", "excluded", *(f"AUROC {n} [95% CI]" for n in names)], body
    )
    return lines


def _md_ksweep(report: dict) -> list[str]:
    idt, primary = report["id_task"], report["policies"][0]
    lines = [
        "## K sweep (McNamara (2026), Table 1 / Figure 1)",
        "",
        f"Zero-evidence options (α = λ) appended to the OOD side only (OOD-only) or to both sides (matched), model "
        f"outputs fixed; Δ against x = 0. k_policy = {primary}. Full tables in the appendix.",
        "",
    ]
    for task, entry in report["ksweep"].items():
        lines += [f"### {idt} → {task}", ""]
        if "refused" in entry:
            lines += [f"Refused under k_policy={primary} (K mismatch, see above); not swept.", ""]
            continue
        if "skipped" in entry:
            lines += [f"Not computed: {entry['skipped']}", ""]
            continue
        lines += [f"- {line}" for line in sensitivity_lines(entry["rows"])] + [""]
        t = entry.get("delong_test")
        if t:
            lines += [
                f"DeLong test ({t['score']}, OOD-only x = {t['extra']} vs x = 0, same examples): AUROC "
                f"{_num(t['auroc_base'])} → {_num(t['auroc_expanded'])}, Δ = {_num(t['diff'], signed=True)}, "
                f"z = {_num(t['z'], 2)}, p = {_p(t['p_value'])}.",
                "",
            ]
        lines += _figure(
            report, f"ksweep_{_slug(idt)}_vs_{_slug(task)}", f"AUROC and AUPR-In of {idt} → {task} as K grows"
        )
    return lines


def _ksweep_table(rows: Sequence[dict]) -> list[str]:
    return _table(
        ["condition", "x", "K_ID", "K_OOD", "score", "AUROC", "ΔAUROC", "AUPR-In", "ΔAUPR"],
        [
            [
                "OOD-only" if r["condition"] == "ood_only" else "matched",
                r["extra"],
                _k(r["k_id"]),
                _k(r["k_ood"]),
                r["score"],
                _num(r["auroc"]),
                _num(r["delta_auroc"], signed=True),
                _num(r["aupr_in"]),
                _num(r["delta_aupr"], signed=True),
            ]
            for r in rows
        ],
    )


def _md_calibration(report: dict) -> list[str]:
    lines = ["## Calibration", ""]
    if report["calibration"]:
        lines += _table(
            ["task", "accuracy", "ECE (15 bins)", "adaptive ECE", "NLL", "Brier"],
            [
                [r["task"], _num(r["acc"]), _num(r["ece"]), _num(r["adaptive_ece"]), _num(r["nll"]), _num(r["brier"])]
                for r in report["calibration"]
            ],
        )
        lines += _reasons(report["calibration"])
    return lines + _figure(report, "reliability", "Reliability diagrams (confidence = max E[p]; n = examples per bin)")


def _selective_table(rows: Sequence[dict]) -> list[str]:
    return _table(
        ["task", "score", "PRR@0.5", "PRR@0.75", "AURC", "Spearman"],
        [
            [r["task"], r["score"], _num(r["prr_0.5"]), _num(r["prr_0.75"]), _num(r["aurc"]), _num(r["spearman"])]
            for r in rows
        ],
    )


def _md_selective(report: dict) -> list[str]:
    idt = report["id_task"]
    lines = [
        "## Selective prediction",
        "",
        "PRR: 1 = oracle, 0 = random (higher is better); AURC: lower is better.",
        "",
    ]
    if report["selective"]:
        lines += _selective_table(_headline_rows(report["selective"])) + _reasons(report["selective"])
    return lines + _figure(report, f"risk_coverage_{_slug(idt)}", f"Risk-coverage curves on {idt}")


def _atc_table(rows: Sequence[dict]) -> list[str]:
    return _table(
        ["target", "score", "method", "estimate", "true accuracy", "|error|"],
        [
            [r["target_task"], r["score"], r["method"], _num(r["estimate"]), _num(r["true_acc"]), _num(r["abs_error"])]
            for r in rows
        ],
    )


def _md_atc(report: dict) -> list[str]:
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


def _equivalence_groups(rows: Sequence[dict]) -> dict[str, list[list[str]]]:
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


def _md_orders(report: dict) -> list[str]:
    lines = [
        "## Score-order equivalence",
        "",
        "Order-equivalent scores give identical AUROC, AUPR, PRR, AURC and ATC (Maaz et al. 2023), so each group "
        "below is one choice, not several. Every pair is in the appendix.",
        "",
    ]
    for task, groups in _equivalence_groups(report["orders"]).items():
        text = "; ".join(" = ".join(g) for g in groups) if groups else "no two scores order the examples alike"
        lines += [f"- {task}: {text}"]
    return lines + [""]


def _md_not_computed(report: dict) -> list[str]:
    if not report["skipped"]:
        return []
    return ["## Not computed", ""] + [f"- {s['section']}: {s['reason']}" for s in report["skipped"]] + [""]


def _md_appendix(report: dict) -> list[str]:
    lines = ["## Appendix: every score", ""]
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
                    _num(r["discordant_fraction"], 4),
                    _num(bool(r["order_equivalent"])),
                ]
                for r in report["orders"]
            ],
        )
        lines += _details(f"Score-order equivalence, every pair ({len(report['orders'])} rows)", body)
    return lines
