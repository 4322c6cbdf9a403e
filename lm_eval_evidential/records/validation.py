"""The checks of every value a records file holds: each derived field follows from the logits or alpha,
values are those a model can give, orders, members and phantom logits are consistent (the loader
calls them all from :meth:`~lm_eval_evidential.records.container.Records.from_table`). Each names the
row and the value, and says the file was edited or comes from a broken run."""

from __future__ import annotations

import math
import re

import numpy as np

from lm_eval_evidential.errors import RecordsError
from lm_eval_evidential.records.make import predictive_probs


def validate_orders(
    path, doc_id: np.ndarray, k: np.ndarray, gold: np.ndarray, order: np.ndarray, meta: dict | None = None
) -> None:
    """A permuted run's records: each order a permutation of range(K), each (question, order) once, the
    orders of one question agree on its K and on which option is gold (``order[gold]``), and, where the run's
    setting is in ``meta``, every question has the orders the run shows it in (:func:`validate_order_set`)."""
    n = len(doc_id)
    if n == 0:
        return
    real = np.arange(order.shape[1])[None, :] < k[:, None]
    ranked = np.sort(np.where(real, order, np.iinfo(np.int64).max), axis=1)
    bad = (real & (ranked != np.arange(order.shape[1])[None, :])).any(axis=1)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise RecordsError(
            f"{path}: row {row}: order {order[row, : k[row]].tolist()} is not a permutation of the question's "
            f"{int(k[row])} options; the file was edited — re-run the evaluation"
        )
    keys, first = np.unique(np.column_stack([doc_id, order]), axis=0, return_index=True)
    if len(keys) != n:
        dup = np.setdiff1d(np.arange(n), first)[0]
        raise RecordsError(
            f"{path}: doc_id {int(doc_id[dup])} in order {order[dup, : k[dup]].tolist()} appears more than once; "
            "records of two runs were mixed"
        )
    original_gold = order[np.arange(n), gold]
    questions, inverse = np.unique(doc_id, return_inverse=True)
    for name, values in (("K", k), ("gold option (order[gold])", original_gold)):
        low = np.full(len(questions), np.iinfo(np.int64).max)
        high = np.full(len(questions), np.iinfo(np.int64).min)
        np.minimum.at(low, inverse, values)
        np.maximum.at(high, inverse, values)
        if (low != high).any():
            question = int(questions[np.flatnonzero(low != high)[0]])
            raise RecordsError(
                f"{path}: doc_id {question}: its orders disagree on the {name}; the gold must follow its option — "
                "the file was edited or records of two runs were mixed; re-run the evaluation"
            )
    setting = (meta or {}).get("permutations")
    if isinstance(setting, dict) and setting.get("spec") is not None:
        validate_order_set(path, doc_id, k, order, setting["spec"])


#: ``metadata.permutations`` as records store it (``tasks.permutations.canonical_spec``).
_SPEC = re.compile(r"(cyclic|all)|random:(\d+)")


def order_count(kind: str, n: int | None, k: int) -> int:
    """How many orders a question of ``k`` options is shown in under ``kind`` (``cyclic``, ``all``, ``random``
    with ``n`` orders): the one count of the evaluation (tasks.permutations) and of the records' check.

    >>> order_count("cyclic", None, 4), order_count("all", None, 4), order_count("random", 5, 2)
    (4, 24, 2)
    """
    return {"cyclic": k, "all": math.factorial(k), "random": min(n or 0, math.factorial(k))}[kind]


def validate_order_set(path, doc_id: np.ndarray, k: np.ndarray, order: np.ndarray, spec: str) -> None:
    """Every question of a permuted run holds the orders its setting shows it in: the identity (the audit's
    "accuracy (identity order)" is read from it), as many orders as ``spec`` gives its K, and under ``cyclic``
    only cyclic shifts. A question missing an order would be counted right under every order by CircularEval
    and would put other orders in one slot of the per-order accuracy."""
    match = _SPEC.fullmatch(spec) if isinstance(spec, str) else None
    if match is None:
        return
    kind, n = (match.group(1), None) if match.group(1) else ("random", int(match.group(2)))
    redo = "an order is missing or records of two runs were mixed — re-run the evaluation"
    width = order.shape[1]
    real = np.arange(width)[None, :] < k[:, None]
    identity = ~(real & (order != np.arange(width)[None, :])).any(axis=1)
    questions, first, inverse, counts = np.unique(doc_id, return_index=True, return_inverse=True, return_counts=True)
    has_identity = np.zeros(len(questions), dtype=bool)
    np.logical_or.at(has_identity, inverse, identity)
    want = np.array([order_count(kind, n, int(x)) for x in k[first]], dtype=np.int64)
    for bad, what in (
        (counts != want, lambda q: f"{counts[q]} orders, but permutations {spec!r} shows a question of K = "
                                   f"{int(k[first[q]])} options in {want[q]}"),
        (~has_identity, lambda q: f"no identity order {list(range(int(k[first[q]])))}, which permutations "
                                  f"{spec!r} shows every question in (the order audit's accuracy is read from it)"),
    ):  # fmt: skip
        if bad.any():
            q = int(np.flatnonzero(bad)[0])
            raise RecordsError(f"{path}: doc_id {int(questions[q])}: {what(q)}; {redo}")
    if kind == "cyclic":
        shifted = (np.arange(width)[None, :] + order[:, :1]) % np.maximum(k, 1)[:, None]
        off = (real & (order != shifted)).any(axis=1)
        if off.any():
            row = int(np.flatnonzero(off)[0])
            raise RecordsError(
                f"{path}: doc_id {int(doc_id[row])}: order {order[row, : k[row]].tolist()} is not a cyclic shift, "
                f"but the run's permutations are 'cyclic'; {redo}"
            )


def validate_members(path, meta: dict, k: np.ndarray, logits: np.ndarray, alpha: np.ndarray, members) -> None:
    """Records of M members: as many as the metadata names (:func:`validate_member_count`), finite, ``logits``
    log p̄ of the member logits and, for EDL members, ``alpha`` the summary Dirichlet
    (:func:`lm_eval_evidential.metrics.members.member_summary`)."""
    validate_member_count(path, meta, members)
    if members is None or len(k) == 0:
        return
    from lm_eval_evidential.metrics.members import MEMBER_METHODS, member_summary

    method = meta.get("method", "edl")
    if method not in MEMBER_METHODS:
        raise RecordsError(
            f"{path}: method={method} records with member_logits; members of that method have no predictive rule "
            f"here ({', '.join(MEMBER_METHODS)} do) — the file was edited or written by another program"
        )
    real = np.arange(members.shape[2])[None, None, :] < k[:, None, None]
    bad = (real & ~np.isfinite(members)).any(axis=(1, 2))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise RecordsError(f"{path}: row {row}: a non-finite member logit; the file was edited — re-run the evaluation")
    lam = float(meta.get("prior_weight", 1.0))
    for start in range(0, len(k), _CHECK_BLOCK):
        block = slice(start, start + _CHECK_BLOCK)
        log_mean, summary = member_summary(members[block], method, lam)
        width = log_mean.shape[1]
        for name, stored, want in (("logits", logits, log_mean), ("alpha", alpha, summary)):
            if want is None:
                continue
            found = _first_mismatch(stored[block, :width], want, np.arange(width)[None, :] < k[block, None])
            if found:
                row, j = start + found[0], found[1]
                raise RecordsError(
                    f"{path}: row {row}: stored {name} {float(stored[row, j])!r} (class {j}) does not follow from the "
                    f"record's member_logits (expected {float(want[found[0], j])!r}: "
                    f"{'log p̄' if name == 'logits' else 'the summary alpha'}); the file was edited — re-run the "
                    "evaluation"
                )


def validate_member_count(path, meta: dict, members) -> None:
    """The members a file's metadata names (``members``: an ensemble's folder names, or the number of MC-dropout
    passes or Laplace weight samples) are the members its ``member_logits`` hold, one per question: a file of
    another ensemble's rows under this metadata would be compared as this run's (the producer check reads the
    metadata)."""
    told = meta.get("members")
    redo = "the file was edited or its rows come from another run — re-run the evaluation"
    if told is None:
        return
    if not isinstance(told, dict) or told.get("source") not in ("ensemble", "mc_dropout", "laplace"):
        raise RecordsError(f"{path}: metadata members={told!r} names no ensemble, MC dropout or Laplace run; {redo}")
    count = len(told["names"]) if isinstance(told.get("names"), list) else told.get("samples")
    if members is None:
        raise RecordsError(
            f"{path}: the metadata names {told['source']} members ({count}) but the file has no member_logits; {redo}"
        )
    if count != members.shape[1]:
        raise RecordsError(
            f"{path}: member_logits holds {members.shape[1]} members per question, but the metadata's "
            f"{told['source']} members are {count} ({_members_said(told)}); {redo}"
        )


def _members_said(told: dict) -> str:
    if isinstance(told.get("names"), list):
        return ", ".join(map(str, told["names"]))
    return f"samples={told.get('samples')!r}"


def validate_phantoms(path, phantom: np.ndarray, lengths: np.ndarray, meta: dict, k: np.ndarray) -> None:
    """Phantom logits, where a file has them, are finite numbers (NaN is only the right padding beyond each
    row's own list), at most the run's ``phantom_count`` per row, and name letters that exist: K plus the
    phantoms at most the 26 letters A..Z."""
    redo = "the file was edited or produced by a broken run — re-run the evaluation"
    if np.isinf(phantom).any():
        row = int(np.flatnonzero(np.isinf(phantom).any(axis=1))[0])
        raise RecordsError(
            f"{path}: row {row}: non-finite phantom logit {float(phantom[row][np.isinf(phantom[row])][0])!r}; {redo}"
        )
    held = (~np.isnan(phantom)).sum(axis=1) if phantom.size else np.zeros(len(lengths), dtype=np.int64)
    bad = np.flatnonzero(held != lengths)
    if bad.size:
        row = int(bad[0])
        raise RecordsError(
            f"{path}: row {row}: {int(lengths[row] - held[row])} of its {int(lengths[row])} phantom logits are NaN or "
            f"null (a phantom logit is the logit of a label after the question's last one, always a number); {redo}"
        )
    limit = meta.get("phantom_count")  # the model_arg of the run that wrote the file
    if isinstance(limit, int) and not isinstance(limit, bool):
        over = np.flatnonzero(lengths > limit)
        if over.size:
            row = int(over[0])
            raise RecordsError(
                f"{path}: row {row} has {int(lengths[row])} phantom logits, but the run kept at most phantom_count="
                f"{limit} (its metadata); {redo}"
            )
    beyond = np.flatnonzero(k + lengths > 26)
    if beyond.size:
        row = int(beyond[0])
        raise RecordsError(
            f"{path}: row {row} has K={int(k[row])} and {int(lengths[row])} phantom logits, but only "
            f"{max(0, 26 - int(k[row]))} letters follow its last label (A..Z); {redo}"
        )


def validate_member_phantoms(path, phantom: np.ndarray, members, meta: dict, k: np.ndarray) -> None:
    """Each member's phantom logits: only beside ``member_logits`` and for as many members, every member of a row
    the same number of them (one prompt, one set of labels after its last one), each member's list checked as
    :func:`validate_phantoms` checks one model's."""
    redo = "the file was edited or produced by a broken run — re-run the evaluation"
    if members is None:
        raise RecordsError(f"{path}: member_phantom_logits without member_logits; {redo}")
    n, m = phantom.shape[:2]
    if m != members.shape[1]:
        raise RecordsError(
            f"{path}: member_phantom_logits has {m} members per question, member_logits {members.shape[1]}; {redo}"
        )
    held = (~np.isnan(phantom)).sum(axis=2) if phantom.size else np.zeros((n, m), dtype=np.int64)
    uneven = np.flatnonzero((held != held[:, :1]).any(axis=1))
    if uneven.size:
        row = int(uneven[0])
        raise RecordsError(
            f"{path}: row {row}: its members have {held[row].tolist()} phantom logits; every member scores the same "
            f"labels after the question's last one; {redo}"
        )
    for member in range(m):
        validate_phantoms(path, phantom[:, member, :], held[:, member], meta, k)


def validate_limit(path, meta: dict, n: int) -> None:
    """A run with ``--limit N`` (N >= 1) scored at most N questions per task: more rows mean the metadata or the
    rows come from elsewhere (a report would say the numbers cover N questions)."""
    limit = meta.get("limit")
    if path is None or isinstance(limit, bool) or not isinstance(limit, (int, float)) or not limit >= 1:
        return  # records built in memory: an ID/OOD pair task's rows are --limit per side (it writes no file)
    if n > int(limit):
        raise RecordsError(
            f"{path}: the metadata says the run was evaluated with --limit {limit:g} (at most {int(limit)} questions "
            f"per task), but the file has {n} questions; the file was edited or mixes runs — re-run the evaluation"
        )


def validate_derived(path, meta: dict, k: np.ndarray, logits: np.ndarray, alpha: np.ndarray, col) -> None:
    """Stored strength/vacuity/max_prob/pred/correct must follow from logits or alpha."""
    if len(k) == 0:
        return
    if meta.get("method", "edl") == "softmax":
        probs = predictive_probs(logits, None)
        strength = vacuity = None
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            strength = np.nansum(alpha, axis=1)
        if not np.isfinite(strength).all():
            row = int(np.flatnonzero(~np.isfinite(strength))[0])
            raise RecordsError(
                f"{path}: row {row}: alpha sums beyond the float64 range; the file was edited — re-run the evaluation"
            )
        probs = predictive_probs(logits, alpha)
        vacuity = float(meta.get("prior_weight", 1.0)) * k / strength
    pred = np.nanargmax(probs, axis=1)
    expected = {
        "strength": strength,
        "vacuity": vacuity,
        "max_prob": probs[np.arange(len(k)), pred],
        "pred": pred,
        "correct": pred == col("gold"),
    }
    for name, want in expected.items():
        if want is None:
            continue
        got = col(name)
        if want.dtype.kind in "fc":
            bad = ~np.isclose(got.astype(np.float64), want, rtol=1e-9, atol=1e-12)
        else:
            bad = got.astype(want.dtype) != want
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise RecordsError(
                f"{path}: row {row}: stored {name} {got[row].item()!r} does not follow from the record's "
                f"{'logits' if strength is None else 'alpha'} (expected {want[row].item()!r}); the file was edited "
                "— re-run the evaluation"
            )


def validate_evidence(path, meta: dict, k: np.ndarray, evidence: np.ndarray, alpha: np.ndarray, col) -> None:
    """The evidence column must be alpha - λ (evidential) or absent (softmax: no evidence, alpha,
    strength or vacuity). A reader of ``records[i]["evidence"]`` must get what the audits use."""
    if len(k) == 0:
        return
    real = np.arange(alpha.shape[1])[None, :] < k[:, None]
    if meta.get("method", "edl") == "softmax":
        for name, values in (("evidence", evidence), ("alpha", alpha)):
            if (real & ~np.isnan(values)).any():
                row = int(np.flatnonzero((real & ~np.isnan(values)).any(axis=1))[0])
                raise RecordsError(
                    f"{path}: row {row}: a method=softmax record has {name} values; softmax records have none "
                    "(null) — the file was edited or its metadata names the wrong method; re-run the evaluation"
                )
        for name in ("strength", "vacuity"):
            stored = col(name).astype(np.float64)
            if (~np.isnan(stored)).any():
                row = int(np.flatnonzero(~np.isnan(stored))[0])
                raise RecordsError(
                    f"{path}: row {row}: a method=softmax record has {name} {float(stored[row])!r}; it is "
                    "undefined (NaN) "
                    "for softmax — the file was edited or its metadata names the wrong method; re-run the evaluation"
                )
        return
    want = alpha - float(meta.get("prior_weight", 1.0))
    found = _first_mismatch(evidence, want, real)
    if found:
        row, j = found
        raise RecordsError(
            f"{path}: row {row}: stored evidence {float(evidence[row, j])!r} (class {j}) does not follow from the "
            f"record's alpha {float(alpha[row, j])!r} (expected alpha - prior_weight = {float(want[row, j])!r}); "
            "the file was edited — re-run the evaluation"
        )


#: Rows checked at once by the loader's element-wise checks (bounds their temporaries' memory).
_CHECK_BLOCK = 1 << 16


def _first_mismatch(stored: np.ndarray, want: np.ndarray, real: np.ndarray) -> tuple[int, int] | None:
    """(row, class) of the first real option whose stored value is not ``want`` (float64 rounding allowed).

    Compared in blocks of :data:`_CHECK_BLOCK` rows, so ``isclose``'s temporaries stay small on large files.
    """
    for start in range(0, len(stored), _CHECK_BLOCK):
        block = slice(start, start + _CHECK_BLOCK)
        with np.errstate(invalid="ignore"):
            bad = real[block] & ~np.isclose(stored[block], want[block], rtol=1e-9, atol=1e-12)
        if bad.any():
            row = int(np.flatnonzero(bad.any(axis=1))[0])
            return start + row, int(np.flatnonzero(bad[row])[0])
    return None


def validate_edl_alpha(path, meta: dict, k: np.ndarray, logits: np.ndarray, alpha: np.ndarray) -> None:
    """For ``method=edl`` the stored alpha is the record's logits through the head: softplus(z) + λ
    (:func:`lm_eval_evidential.modeling.heads.edl_alpha`; IB-EDL's alpha depends on noise draws and
    σ not stored here, so only its floor λ is checked, by :func:`validate_values`)."""
    if meta.get("method", "edl") != "edl" or len(k) == 0:
        return
    lam = float(meta.get("prior_weight", 1.0))
    classes = np.arange(alpha.shape[1])[None, :]
    # In blocks of rows: the check's temporaries (softplus, isclose) stay a few MB on a file of millions of rows.
    for start in range(0, len(k), _CHECK_BLOCK):
        block = slice(start, start + _CHECK_BLOCK)
        with np.errstate(invalid="ignore", over="ignore"):
            want = np.logaddexp(0.0, logits[block]) + lam
        found = _first_mismatch(alpha[block], want, classes < k[block, None])
        if found:
            i, j = found
            row = start + i
            raise RecordsError(
                f"{path}: row {row}: stored alpha {float(alpha[row, j])!r} (class {j}) does not follow from the "
                f"record's logit {float(logits[row, j])!r} (method=edl: softplus(logit) + prior_weight = "
                f"{float(want[i, j])!r}); the file was edited or its metadata names the wrong method — "
                "re-run the evaluation"
            )


def validate_task_column(path, column, task: str) -> None:
    """Every row's ``task`` is the file's task (records of two tasks are never mixed in one file)."""
    import pyarrow.compute as pc

    others = [t for t in pc.unique(column).to_pylist() if t != task]
    if others:
        raise RecordsError(
            f"{path}: rows of task {others[0]!r} in the records of {task!r}; records of two tasks were mixed — "
            "re-run the evaluation"
        )


def validate_values(path, meta: dict, k: np.ndarray, logits: np.ndarray, alpha: np.ndarray, gold: np.ndarray) -> None:
    """Refuse records whose numbers cannot have come from a model: say which row and value."""

    def fail(row: int, what: str) -> None:
        raise RecordsError(
            f"{path or 'records'}: row {row}: {what}; the file was edited or produced by a broken run — re-run the "
            "evaluation"
        )

    if len(k) and (k.min() < 1):
        fail(int(np.argmin(k)), f"k={int(k.min())}")
    real = np.arange(logits.shape[1])[None, :] < k[:, None] if len(k) else np.zeros((0, 0), bool)
    bad = real & ~np.isfinite(logits)
    if bad.any():
        row = int(np.flatnonzero(bad.any(axis=1))[0])
        fail(row, f"non-finite logit {float(logits[row][bad[row]][0])!r}")
    if len(gold) and ((gold < 0) | (gold >= k)).any():
        row = int(np.flatnonzero((gold < 0) | (gold >= k))[0])
        fail(row, f"gold index {int(gold[row])} outside 0..{int(k[row]) - 1}")
    try:
        lam = float(meta.get("prior_weight", 1.0))
    except (TypeError, ValueError):
        lam = float("nan")
    if not np.isfinite(lam) or lam <= 0:
        raise RecordsError(
            f"{path}: prior_weight {meta.get('prior_weight')!r} in the metadata must be a positive number"
        )
    if meta.get("method", "edl") == "softmax":
        return
    bad = real & ~np.isfinite(alpha)
    if bad.any():
        row = int(np.flatnonzero(bad.any(axis=1))[0])
        fail(row, f"alpha {float(alpha[row][bad[row]][0])!r} is not finite (or missing) for an evidential record")
    # evidence = alpha - λ must be >= 0; allow float rounding of the subtraction
    bad = real & (alpha < lam * (1 - 1e-12))
    if bad.any():
        row = int(np.flatnonzero(bad.any(axis=1))[0])
        fail(row, f"alpha {float(alpha[row][bad[row]][0])!r} is below the prior weight {lam} (negative evidence)")
    # Reciprocal vacuity S/(λK) must stay a finite float64: it overflows once λK/S falls below the
    # smallest normal float (a tiny prior weight with large evidence, or a strength that overflows).
    with np.errstate(over="ignore", divide="ignore"):
        u = lam * k / np.where(real, alpha, 0.0).sum(axis=1)
    bad = ~(u >= np.finfo(np.float64).tiny)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        fail(
            row,
            f"vacuity λK/S = {float(u[row])!r} (prior_weight {lam}) is below the float64 range, so its "
            "reciprocal overflows; the prior weight is too small for this evidence",
        )
