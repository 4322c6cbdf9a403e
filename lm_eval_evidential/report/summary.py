"""The report's summary: the valid comparisons with their headline numbers, refusals, the K artefact."""

from __future__ import annotations

from collections.abc import Sequence

from lm_eval_evidential.report.types import (
    Artefact,
    AuditRow,
    KSweepEntry,
    LargestMove,
    MismatchedComparison,
    OrderSpread,
    RefusedPair,
    Report,
    Summary,
    ValidComparison,
)

#: The score of the summary's headline, in order of preference: the paper's 1/u, then max prob.
HEADLINE_SCORES = ("reciprocal_vacuity", "max_prob")


def headline_score(rows: Sequence[AuditRow]) -> str | None:
    """The first of :data:`HEADLINE_SCORES` among the rows' scores, else their first score (None: no rows)."""
    present = list(dict.fromkeys(r["score"] for r in rows))
    return next((s for s in HEADLINE_SCORES if s in present), present[0] if present else None)


def summarize(report: Report) -> Summary:
    """What a reader acts on: valid comparisons with headline numbers, refusals, the K-sweep artefact.

    - ``valid``: one entry per OOD task compared K-matched under some policy (the first such
      policy given): ``ood_task, policy, k, n_id, n_ood, n_dropped_ood, score, auroc, auroc_ci,
      aupr_in, aupr_in_ci`` for the headline score (reciprocal vacuity, else max prob);
    - ``mismatched``: OOD tasks compared across different K (``k_policy=report``), not valid;
    - ``refused``: OOD tasks with no valid comparison: ``ood_task, policies, reason, suggestion``;
    - ``artefact``: per swept pair, the headline score's AUROC at x = 0 and with one option
      appended to the OOD side only (x = 1; ``phantom``: the sweep's mode, what the option is), the
      matched-expansion change, DeLong's p, and the largest OOD-only AUROC move over every swept score and x.
    """
    all_rows = [r for sec in report["ood"].values() for r in sec["rows"]]
    score = headline_score(all_rows)
    valid: dict[str, ValidComparison] = {}
    mismatched: dict[str, MismatchedComparison] = {}
    for policy, sec in report["ood"].items():
        for r in sec["rows"]:
            if r["score"] != score:
                continue
            if r["matched"] and r["ood_task"] not in valid:
                valid[r["ood_task"]] = ValidComparison(
                    ood_task=r["ood_task"],
                    policy=policy,
                    k=r["k_id"],
                    n_id=r["n_id"],
                    n_ood=r["n_ood"],
                    n_dropped_ood=r["n_dropped"]["ood"],
                    score=score,
                    auroc=r["auroc"],
                    auroc_ci=r["auroc_ci"],
                    aupr_in=r["aupr_in"],
                    aupr_in_ci=r["aupr_in_ci"],
                )
            elif not r["matched"]:
                mismatched.setdefault(
                    r["ood_task"],
                    MismatchedComparison(
                        ood_task=r["ood_task"],
                        policy=policy,
                        score=score,
                        auroc=r["auroc"],
                        k_id=r["k_id"],
                        k_ood=r["k_ood"],
                    ),
                )
    refused: dict[str, RefusedPair] = {}
    for policy, sec in report["ood"].items():
        for ref in sec["refused"]:
            if ref["ood_task"] in valid:
                continue
            entry = refused.setdefault(
                ref["ood_task"],
                RefusedPair(ood_task=ref["ood_task"], policies=[], reason=ref["reason"], suggestion=ref["suggestion"]),
            )
            entry["policies"].append(policy)
    summary = Summary(
        illustrative=report["illustrative"],
        limited={task: limit for task, limit in report["limits"].items() if limit is not None},
        headline_score=score,
        valid=list(valid.values()),
        mismatched=[m for t, m in mismatched.items() if t not in valid],
        refused=list(refused.values()),
        artefact=[a for task, entry in report["ksweep"].items() if (a := _artefact(task, entry))],
    )
    if "answer_order" in report:
        summary["order"] = _order_spread(report["answer_order"])
    return summary


def _order_spread(rows: Sequence[AuditRow]) -> list[OrderSpread]:
    """Per permuted pair, the headline score's AUROC over the answer orders (min, max, range, order-averaged)."""
    score = headline_score(rows)
    keys = ("ood_task", "score", "n_orders", "auroc_min", "auroc_max", "auroc_range", "auroc_order_averaged")
    return [OrderSpread(**{k: r[k] for k in keys}) for r in rows if r["score"] == score]


def _artefact(task: str, entry: KSweepEntry) -> Artefact | None:
    rows = entry.get("rows")
    if not rows:
        return None
    score = headline_score(rows)
    at = {(r["condition"], r["extra"]): r for r in rows if r["score"] == score}
    if ("ood_only", 1) not in at:
        return None
    ood_only = [r for r in rows if r["condition"] == "ood_only"]
    worst = max(ood_only, key=lambda r: abs(r["delta_auroc"]))
    test = entry.get("delong_test") or {}
    mi = next((r for r in ood_only if r["score"] == "neg_mutual_information" and r["extra"] == 1), None)
    members = {"members": entry["members"]} if entry.get("members") else {}
    if members and mi is not None:
        members["epistemic_delta_auroc"] = mi["delta_auroc"]
    return Artefact(
        **members,
        ood_task=task,
        score=score,
        phantom=at[("ood_only", 1)].get("phantom", "zero"),
        auroc_base=at[("ood_only", 0)]["auroc"],
        auroc_one_extra=at[("ood_only", 1)]["auroc"],
        delta_auroc=at[("ood_only", 1)]["delta_auroc"],
        matched_delta_auroc=at[("matched", 1)]["delta_auroc"] if ("matched", 1) in at else None,
        p_value=test.get("p_value") if test.get("score") == score else None,
        largest=LargestMove(score=worst["score"], extra=worst["extra"], delta_auroc=worst["delta_auroc"]),
    )


def chance_counts(valid: Sequence[ValidComparison]) -> dict[str, int]:
    """How many valid comparisons' AUROC intervals are ``at`` chance (the 95% CI contains 0.5, or there is no
    interval: not shown to differ from chance), ``above`` or ``below`` it.

    >>> chance_counts([{"auroc_ci": [0.4, 0.6]}, {"auroc_ci": [0.55, 0.7]}, {"auroc_ci": None}])
    {'at': 2, 'above': 1, 'below': 0}
    """
    counts = {"at": 0, "above": 0, "below": 0}
    for v in valid:
        lo, hi = v["auroc_ci"] or (None, None)
        if lo is None or hi is None or lo != lo or hi != hi or lo <= 0.5 <= hi:
            counts["at"] += 1
        elif lo > 0.5:
            counts["above"] += 1
        else:
            counts["below"] += 1
    return counts
