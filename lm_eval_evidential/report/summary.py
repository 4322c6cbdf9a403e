"""The report's summary: the valid comparisons with their headline numbers, refusals, the K artefact."""

from __future__ import annotations

import math
from collections.abc import Sequence

from lm_eval_evidential.audits.compare import COMPARE_SCORES, MethodCalibrationRow, MethodOODRow
from lm_eval_evidential.report.types import (
    Artefact,
    AuditRow,
    CompareSection,
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
    if report.get("compare"):
        summary["compare"] = compare_takeaway(report["compare"], report["id_task"])
    return summary


def _defined(value) -> bool:
    return isinstance(value, (int, float)) and not math.isnan(value)


def _best(rows: Sequence[AuditRow], key: str, lowest: bool) -> AuditRow | None:
    """The row with the best defined ``key`` (the first of a tie), None when no row has one."""
    rows = [r for r in rows if _defined(r.get(key))]
    if not rows:
        return None
    return (min if lowest else max)(rows, key=lambda r: r[key])


def compare_takeaway(section: CompareSection, id_task: str) -> str:
    """The "Methods side by side" section in one sentence: the best method on ``id_task`` by accuracy, NLL and
    ECE; per OOD task compared K-matched, which method's AUROC leads on the first score every compared method
    gives (in :data:`~lm_eval_evidential.audits.compare.COMPARE_SCORES` order: max-prob first) and whether its
    interval clears the others'; and how many pairs were refused across K, or computed and marked.

    >>> cal = [{"method": "A", "acc": 0.7, "nll": 0.9, "ece": 0.1}, {"method": "B", "acc": 0.6, "nll": 0.8, "ece": 0.2}]
    >>> ood = [{"method": m, "ood_task": "arc", "protocol": "K-matched", "score": "max_prob", "auroc": a,
    ...         "auroc_ci": ci} for m, a, ci in (("A", 0.7, [0.65, 0.75]), ("B", 0.6, [0.55, 0.66]))]
    >>> import textwrap
    >>> print(textwrap.fill(compare_takeaway({"calibration": cal, "ood": ood, "refused": []}, "obqa"), 110))
    Of 2 methods on obqa, the highest accuracy is A's (0.700), the lowest NLL is B's (0.800) and the lowest ECE is
    A's (0.100); K-matched, arc (max_prob AUROC): A leads with 0.700 [0.650, 0.750], not separated from B (the
    intervals overlap).
    >>> _best_clause(cal + [{"method": "C", "acc": 0.7}], "acc", "highest accuracy", False)
    "the highest accuracy is A's and C's (0.700)"
    """
    cal = section["calibration"]
    parts = [_best_clause(cal, key, what, lowest) for key, what, lowest in _CALIBRATION_BEST]
    parts = [p for p in parts if p]
    text = ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + (parts[-1] if parts else "")
    many = f"Of {len(cal)} methods on {id_task}, " if len(cal) > 1 else f"On {id_task}, "
    text = many + (text or "no method has a defined accuracy, NLL or ECE")
    clauses = [_ood_clause(section["ood"], task) for task in dict.fromkeys(r["ood_task"] for r in section["ood"])]
    clauses = [c for c in clauses if c]
    text += "; K-matched, " + "; ".join(clauses) if clauses else "; no OOD task was compared K-matched"
    refused = section["refused"]
    if refused:
        text += f"; {len(refused)} method/OOD pair{'s' if len(refused) > 1 else ''} across K refused"
    if any(r["protocol"].startswith("K-MISMATCHED") for r in section["ood"]):
        text += "; the K-MISMATCHED rows (the papers' protocol) move with K and are no result"
    return text + "."


#: The calibration columns the takeaway names a best method for: key, words, whether lower is better.
_CALIBRATION_BEST = (("acc", "highest accuracy", False), ("nll", "lowest NLL", True), ("ece", "lowest ECE", True))


def _best_clause(rows: Sequence[AuditRow], key: str, what: str, lowest: bool) -> str:
    """``the highest accuracy is A's (0.700)``; every method tied at the best value as written is named."""
    best = _best(rows, key, lowest)
    if best is None:
        return ""
    value = MethodCalibrationRow.written(key, best[key])  # as the section's table writes it
    tied = [r["method"] for r in rows if _defined(r.get(key)) and MethodCalibrationRow.written(key, r[key]) == value]
    if len(tied) == len(rows) > 1:
        return f"every method has the same {what.split(' ', 1)[1]} ({value})"
    return f"the {what} is " + " and ".join(f"{m}'s" for m in tied) + f" ({value})"


def _ood_clause(rows: Sequence[AuditRow], task: str) -> str:
    """``task``'s K-matched rows in a clause: the leading method on the first score all its methods give."""
    rows = [r for r in rows if r["ood_task"] == task and r["protocol"].startswith("K-matched")]
    methods = list(dict.fromkeys(r["method"] for r in rows))
    given = {m: {r["score"] for r in rows if r["method"] == m} for m in methods}
    ordered = [*COMPARE_SCORES, *dict.fromkeys(r["score"] for r in rows)]
    score = next((s for s in ordered if methods and all(s in g for g in given.values())), None)
    if score is None:
        return ""
    scored = [r for r in rows if r["score"] == score]
    lead = _best(scored, "auroc", False)
    if lead is None:
        return f"{task} ({score} AUROC): undefined"
    text = f"{task} ({score} AUROC): {lead['method']} "
    auroc = f"{MethodOODRow.written('auroc', lead['auroc'])} {MethodOODRow.written('auroc_ci', lead['auroc_ci'])}"
    if len(methods) == 1:
        return text + f"alone, {auroc}"
    text += f"leads with {auroc}"
    low = (lead.get("auroc_ci") or [float("nan")])[0]
    if not _defined(low):
        return text + ", without an interval to separate it"
    highs = {r["method"]: (r.get("auroc_ci") or [float("nan")] * 2)[1] for r in scored if r is not lead}
    close = [m for m, high in highs.items() if not (_defined(high) and high < low)]
    if close:
        return text + f", not separated from {', '.join(close)} (the intervals overlap)"
    return text + ", its interval clear of every other method's"


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
