"""Which scores a real extra answer option moved, and why, in one sentence for the model at hand.

Whether vacuity or the maximum probability reacts to K depends on the model (McNamara (2026)
arXiv:2605.06382, Proposition 1): vacuity u = λK/S is unchanged by an extra option only when
that option receives the mean concentration S/K. A model that gives every letter about the same
evidence e keeps u = λK/(K(e + λ)) = λ/(e + λ) whatever K is, while its maximum probability
≈ 1/K falls from 1/4 to 1/5; a model whose extra option receives little evidence raises u
instead. :func:`real_option_sentence` says which happened, from the records and the AUROC rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lm_eval_evidential.records import Records
from lm_eval_evidential.records.orders import refuses_permuted

__all__ = ["real_option_sentence", "extra_option_share"]


@refuses_permuted
def extra_option_share(records: Records, k: int) -> float:
    """Mean over the questions with more than ``k`` options of: the mean evidence of the options after
    the first ``k``, over the mean evidence of the first ``k`` (1 = the extra options get their share).

    Evidence is α − λ (``prior_weight``); NaN for records without α or without such questions.

    Examples
    --------
    >>> from lm_eval_evidential.records import make_record
    >>> rows = [make_record(task="t", doc_id=0, labels=list("ABCDE"), gold=0, logits=[0.0] * 5,
    ...                     alpha=[3.0, 3.0, 3.0, 3.0, 2.0])]
    >>> round(extra_option_share(Records.from_rows(rows, task="t", meta={"prior_weight": 1.0}), 4), 3)
    0.5
    """
    if not records.has_alpha:
        return float("nan")
    wide = records.k > k
    if not wide.any():
        return float("nan")
    evidence = records.alpha[wide] - float(records.meta.get("prior_weight", 1.0))
    first = np.nanmean(evidence[:, :k], axis=1)
    extra = np.nanmean(evidence[:, k:], axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.nanmean(extra / first))


def _auroc(rows: Sequence[dict], score: str) -> float | None:
    return next((r["auroc"] for r in rows if r["score"] == score), None)


@refuses_permuted
def real_option_sentence(
    id_records: Records,
    ood_records: Records,
    control_records: Records,
    mismatched_rows: Sequence[dict],
    matched_rows: Sequence[dict],
) -> str | None:
    """One sentence: how a real extra option (``ood_records``, more options than the ID task) moved each score's
    AUROC against its K-matched control (``control_records``: the same questions at the ID task's K), and why,
    for this model. ``mismatched_rows``/``matched_rows`` are :func:`~lm_eval_evidential.audits.ood.ood_rows` rows
    of the two comparisons (``k_policy="report"`` for the first). None when it does not apply: several K on a
    side, an OOD task without more options than the ID task, records without α, or no max_prob and
    reciprocal_vacuity rows.
    """
    k_id, k_ood, k_control = (set(np.unique(r.k).tolist()) for r in (id_records, ood_records, control_records))
    if len(k_id) != 1 or len(k_ood) != 1 or k_control != k_id or not ood_records.has_alpha:
        return None
    (k,), (k_more,) = k_id, k_ood
    if k_more <= k:
        return None
    moved = {}
    for score in dict.fromkeys(r["score"] for r in mismatched_rows):
        before, after = _auroc(matched_rows, score), _auroc(mismatched_rows, score)
        if before is not None and after is not None:
            moved[score] = (before, after)
    if "max_prob" not in moved or "reciprocal_vacuity" not in moved:
        return None
    order = sorted(moved, key=lambda s: -abs(moved[s][1] - moved[s][0]))
    moves = ", ".join(f"{s} {moved[s][0]:.3f} → {moved[s][1]:.3f}" for s in order)
    share = extra_option_share(ood_records, k)
    extra = "option" if k_more - k == 1 else f"{k_more - k} options"
    gets = f"the extra {extra} get{'s' if k_more - k == 1 else ''} {share:.0%} of the others' mean evidence"
    vacuity = id_records.vacuity
    spread = f"{np.nanmin(vacuity):.3f}–{np.nanmax(vacuity):.3f}"
    d_prob = abs(moved["max_prob"][1] - moved["max_prob"][0])
    d_vac = abs(moved["reciprocal_vacuity"][1] - moved["reciprocal_vacuity"][0])
    if d_prob >= d_vac:
        why = (
            f"this model gives every letter about the same evidence ({gets}), so its max-prob, about 1/K, falls from "
            f"1/{k} to 1/{k_more} on every question, while vacuity λK/S ≈ λ/(e + λ) does not depend on K and moves "
            f"only as far as the extra evidence falls short of the others' (vacuity spans {spread} on "
            f"{id_records.task})"
        )
    else:
        why = (
            f"{gets}, so vacuity u = λK/S counts one more option while S gains less than its share "
            f"(McNamara 2026, Proposition 1), and max-prob, spread over more letters, moves less"
        )
    return (
        f"For this model, a real extra {extra} ({ood_records.task}, K = {k_more}, against "
        f"{control_records.task}, the same source at K = {k}) moved AUROC {moves}: {why}."
    )
