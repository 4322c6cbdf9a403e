"""The report's "Methods side by side" section: ``compare`` on the report's run and the runs given beside it.

A report of one method's run (``report out-edl …``) can lay other methods' runs beside it (``--compare
out-ens out-mc``): the table an EDL paper puts its method in (Li et al. 2025, Tables 1-3), in the same
folder as the K audits of its own numbers. The numbers are
:func:`~lm_eval_evidential.audits.compare.compare_methods`'s, the ones ``lm-eval-evidential compare
--json`` writes on the same records (one computation), K-checked as that command checks them:

- every OOD row names its protocol: ``K-matched``, ``K-matched subset`` (a mixed-K OOD task's questions with
  the ID task's K) or ``K-MISMATCHED``, the papers' protocol, computed only where the report's K policies
  include ``report`` (as ``compare --k-mismatched``), and marked;
- otherwise a K-mismatched pair is refused: listed with the remedy, and the command exits 2.

The section's one-sentence takeaway is computed with the summary
(:func:`~lm_eval_evidential.report.summary.compare_takeaway`); :func:`md_compare` only renders it and the rows,
through the audits' one renderer (:func:`~lm_eval_evidential.audits.table.rows_markdown`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lm_eval_evidential.audits.compare import CALIBRATION_COLUMNS, OOD_COLUMNS, compare_methods
from lm_eval_evidential.audits.table import rows_markdown
from lm_eval_evidential.metrics.intervals import aupr_in_interval_label
from lm_eval_evidential.records import Records
from lm_eval_evidential.report.types import CompareRefusal, CompareSection, Report

#: The K policy under which the report also computes the papers' K-mismatched protocol (marked).
MISMATCHED_POLICY = "report"

#: The section's columns: the command's (declared once, on the rows), less the ID task the heading names.
_CALIBRATION_MD = tuple(c for c in CALIBRATION_COLUMNS if c.key != "task")


def compare_section(
    runs: Mapping[str, Mapping[str, Records]],
    id_task: str,
    ood_tasks: Sequence[str],
    *,
    policies: Sequence[str],
    scores: Sequence[str] | None,
    n_boot: int,
    seed: int,
    level: float,
    n_bins: int,
) -> CompareSection:
    """The section's data: :func:`~lm_eval_evidential.audits.compare.compare_methods` on ``runs`` (``{method:
    {task: Records}}``, the report's run first), the K-mismatched protocol only under the ``report`` policy."""
    k_mismatched = MISMATCHED_POLICY in policies
    out = compare_methods(
        runs,
        id_task,
        ood_tasks,
        scores=scores,
        k_mismatched=k_mismatched,
        n_bins=n_bins,
        n_boot=n_boot,
        level=level,
        seed=seed,
        remedy=f"adding {MISMATCHED_POLICY} to --k-policy",
    )
    return CompareSection(
        methods=list(runs),
        k_mismatched=k_mismatched,
        n_boot=n_boot,
        level=level,
        calibration=out["calibration"],
        ood=out["ood"],
        refused=[CompareRefusal(method=m, ood_task=t, reason=r) for m, t, r in out["refused"]],
    )


def md_compare(report: Report) -> list[str]:
    """``report.md``'s "Methods side by side": the takeaway (the summary's), the ID task's accuracy and
    calibration, OOD detection per protocol, the refused pairs with their remedy."""
    section = report.get("compare")
    if not section:
        return []
    idt, level = report["id_task"], round(100 * section["level"])
    intervals = aupr_in_interval_label(r["n_id"] + r["n_ood"] for r in section["ood"])
    lines = ["## Methods side by side", ""]
    takeaway = report["summary"].get("compare")
    lines += [f"**Takeaway.** {takeaway}", ""] if takeaway else []
    lines += [
        f"One run folder per method ({', '.join(section['methods'])}), the same numbers as `lm-eval-evidential "
        "compare --json` on these records.",
        "",
        f"### {idt}: accuracy and calibration ({level}% percentile-bootstrap intervals over the questions, "
        f"{section['n_boot']} replicates)",
        "",
        *rows_markdown(section["calibration"], _CALIBRATION_MD),
        f"### OOD detection against {idt} (ID positive; AUROC: DeLong interval, AUPR-In: {intervals})",
        "",
    ]
    if section["ood"]:  # the AUPR-In interval's header names the interval its rows got, as compare's
        columns = [c._replace(header=f"95% CI ({intervals})") if c.key == "aupr_in_ci" else c for c in OOD_COLUMNS]
        lines += rows_markdown(section["ood"], columns)
    else:
        lines += ["No OOD task was compared: every pair differs in K.", ""]
    if any(r["protocol"].startswith("K-MISMATCHED") for r in section["ood"]):
        lines += [
            "> Rows marked K-MISMATCHED reproduce the papers' protocol (k_policy report): their AUROC/AUPR move "
            "with K itself. Do not report them as OOD-detection results.",
            "",
        ]
    lines += [f"- **Refused**: {r['method']} / {r['ood_task']}: {r['reason']}" for r in section["refused"]]
    return lines + ([""] if section["refused"] else [])
