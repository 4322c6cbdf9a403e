"""Records from a question's answer logits: :func:`make_records` computes every derived field (E[p], pred,
strength, vacuity, the members' summary) and :func:`predictive_probs`, the one E[p] of records."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.records.schema import (
    OPTIONAL_FIELDS,
    RECORD_SCHEMA,
)


def predictive_probs(logits: np.ndarray, alpha: np.ndarray | None) -> np.ndarray:
    """The predictive distribution of NaN-padded record rows: ``E[p] = α/S`` for evidential records
    (:func:`lm_eval_evidential.metrics.dirichlet.expected_probs`), the softmax of the logits when
    there is no alpha (``method=softmax``). Not the Dirichlet's ``expected_probs``, which needs alpha."""
    from lm_eval_evidential.metrics.dirichlet import expected_probs as dirichlet_probs
    from lm_eval_evidential.metrics.dirichlet import softmax

    return softmax(logits) if alpha is None else dirichlet_probs(alpha)


def record_probs(record: Mapping) -> np.ndarray:
    """E[p] of one record (a mapping with the fields of ``RECORD_FIELDS``)."""
    alpha = record["alpha"]
    return predictive_probs(
        np.asarray([record["logits"]], dtype=np.float64),
        None if alpha is None else np.asarray([alpha], dtype=np.float64),
    )[0]


def make_record(
    *,
    task: str,
    doc_id: int,
    labels: Sequence[str],
    gold: int,
    logits: Sequence[float],
    alpha: Sequence[float] | None,
    prior_weight: float = 1.0,
    optional: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One record from a question's answer logits and (for evidential methods) its alpha.

    Derived fields follow the module table: E[p] = α/S (or softmax(logits) when alpha is
    None), pred = argmax E[p] with the first index on ties, vacuity = λK/S. ``optional``:
    the question's values of optional fields, by name.
    """
    return make_records(
        task=task,
        doc_ids=[doc_id],
        labels=[labels],
        gold=[gold],
        logits=[logits],
        alpha=None if alpha is None else [alpha],
        prior_weight=prior_weight,
        optional={name: [value] for name, value in (optional or {}).items()},
    )[0]


def make_records(
    *,
    task: str,
    doc_ids: Sequence[int],
    labels: Sequence[Sequence[str]],
    gold: Sequence[int],
    logits: Sequence[Sequence[float]] | None,
    alpha: Sequence[Sequence[float]] | None,
    prior_weight: float = 1.0,
    optional: Mapping[str, Sequence] | None = None,
    members_method: str | None = None,
) -> list[dict[str, Any]]:
    """:func:`make_record` of many questions at once, in their order (``alpha`` None for softmax).

    The derived fields are computed per group of questions with the same K, on an (n, K) array
    without padding, so each row's numbers are those of the question alone. ``optional`` gives
    the values of optional fields (:data:`OPTIONAL_FIELDS`) by name, one per question; an
    optional field not given is None in every row. Questions scored by several members give
    ``optional["member_logits"]`` (one M × K list per question) and ``members_method``
    (``"softmax"`` or ``"edl"``) instead of ``logits`` and ``alpha``, which follow from them
    (:func:`lm_eval_evidential.metrics.members.member_summary`).
    """
    optional = dict(optional or {})
    unknown = sorted(set(optional) - set(OPTIONAL_FIELDS))
    if unknown:
        raise InvalidValueError(f"{unknown} are not optional records fields; those are {list(OPTIONAL_FIELDS)}")
    member_rows = _member_rows(task, optional.get("member_logits"), logits, alpha, members_method)
    by_k: dict[int, list[int]] = {}
    for i, row_labels in enumerate(labels):
        by_k.setdefault(len(row_labels), []).append(i)
    out: list[dict[str, Any]] = [{} for _ in labels]
    for k, members in by_k.items():
        if member_rows is not None:
            member_z = _member_group(task, [doc_ids[i] for i in members], [member_rows[i] for i in members], k)
            z, a = _member_summary(member_z, members_method, prior_weight)
        else:
            for i in members:
                if len(logits[i]) != k:
                    raise InvalidValueError(
                        f"{task} doc {doc_ids[i]}: {len(logits[i])} logits for {k} labels {list(labels[i])}"
                    )
            z = np.asarray([logits[i] for i in members], dtype=np.float64).reshape(len(members), k)
            a = (
                None
                if alpha is None
                else np.asarray([alpha[i] for i in members], dtype=np.float64).reshape(len(members), k)
            )
        probs = predictive_probs(z, a)
        pred = np.argmax(probs, axis=1)
        max_prob = probs[np.arange(len(members)), pred].tolist()
        if a is None:
            evidence = alpha_rows = [None] * len(members)
            strength = vacuity = [float("nan")] * len(members)
        else:
            strength_array = a.sum(axis=1)
            strength, vacuity = strength_array.tolist(), (prior_weight * k / strength_array).tolist()
            evidence, alpha_rows = (a - prior_weight).tolist(), a.tolist()
        pred = pred.tolist()
        columns = {
            "task": [task] * len(members),
            "doc_id": [int(doc_ids[i]) for i in members],
            "k": [k] * len(members),
            "labels": [[str(x) for x in labels[i]] for i in members],
            "gold": [int(gold[i]) for i in members],
            "logits": z.tolist(),
            "evidence": evidence,
            "alpha": alpha_rows,
            "strength": strength,
            "vacuity": vacuity,
            "max_prob": max_prob,
            "pred": pred,
            "correct": [p == int(gold[i]) for p, i in zip(pred, members)],
        }
        for name in OPTIONAL_FIELDS:
            columns[name] = [None if name not in optional else optional[name][i] for i in members]
        if member_rows is not None:
            columns["member_logits"] = member_z.tolist()
        for j, i in enumerate(members):
            out[i] = {f.name: columns[f.name][j] for f in RECORD_SCHEMA}
    return out


def _member_rows(task: str, rows, logits, alpha, method: str | None):
    """The questions' member logits when given (then ``logits``/``alpha`` must not be), else None."""
    from lm_eval_evidential.metrics.members import MEMBER_METHODS

    if rows is None or all(r is None for r in rows):
        if logits is None:
            raise InvalidValueError(f"{task}: no logits and no member_logits; pass one of them")
        return None
    if any(r is None for r in rows):
        i = next(i for i, r in enumerate(rows) if r is None)
        raise InvalidValueError(f"{task}: question {i} has no member_logits but others do; every question needs them")
    if logits is not None or alpha is not None:
        raise InvalidValueError(
            f"{task}: member_logits given with logits/alpha; pass logits=None and alpha=None, they follow from the "
            "members (log p̄ and the summary alpha)"
        )
    counts = [len(r) for r in rows]
    if len(set(counts)) != 1:
        i = next(i for i, c in enumerate(counts) if c != counts[0])
        raise InvalidValueError(
            f"{task}: question {i} has {counts[i]} members, question 0 has {counts[0]}; every question of a run is "
            "scored by the same members (the same M)"
        )
    if method not in MEMBER_METHODS:
        raise InvalidValueError(
            f"{task}: members_method must be one of {', '.join(MEMBER_METHODS)} with member_logits, got {method!r}"
        )
    return rows


def _member_group(task: str, doc_ids, rows, k: int) -> np.ndarray:
    """The (n, M, k) member logits of questions with K = k (every question the same M)."""
    counts = {len(r) for r in rows}
    widths = {len(member) for r in rows for member in r}
    if len(counts) != 1 or widths != {k}:
        i = next(j for j, r in enumerate(rows) if len(r) != len(rows[0]) or any(len(m) != k for m in r))
        raise InvalidValueError(
            f"{task} doc {doc_ids[i]}: member_logits must be M lists of {k} logits (one per option), got "
            f"{[len(m) for m in rows[i]]}"
        )
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), counts.pop(), k)


def _member_summary(members: np.ndarray, method: str, prior_weight: float):
    # imported here: importing records does not load the metrics modules
    from lm_eval_evidential.metrics.members import member_summary

    return member_summary(members, method, prior_weight)
