"""A permuted run's records before an audit: refused, or each question's orders averaged on request.

A permuted evaluation (``metadata.permutations``) keeps one record per (question, order). The
``permutations`` audit reads them order by order; every other audit counts records as examples,
so on a permuted run each question would count once per order (K times under ``cyclic``), its
orders mixed as if they were other questions, and a bootstrap or a calibration split would treat
them as independent. :func:`records_for_audit` is the one rule every such audit goes through
(``cli/loading.load`` and ``build_report``), and :func:`refuses_permuted` applies it to every public
audit function called from Python: permuted records are refused
(:class:`~lm_eval_evidential.errors.PermutedRecordsError`, exit status 2) with the remedies,
unless the user asks for :func:`average_orders` (``--average-orders``), which turns each
question's orders into one record and marks the records as such. Where each (question, order) is
meant as an example (the harness's own table, whose docs are those pairs), :func:`pool_orders`
says so and marks the records.

The average is the mixture of the orders' predictions, each option in its own place: the
orders are a question's members, as the members of an ensemble
(:mod:`lm_eval_evidential.metrics.members`). ``p̄`` is the mean of the orders' predictive
distributions, the permutation-based debiasing Zheng et al. (ICLR 2024, Sec. 4) compare PriDe
with; evidential records keep the summary Dirichlet ``α = p̄ / mean_m(1/S_m)``, whose vacuity is
the orders' mean vacuity; ``logits`` is ``log p̄``, as in records of several members. The logit
scores (``neg_energy``, ``max_logit``) read one forward pass's logits and are refused on
averaged records; phantom logits are dropped (each order's are its own forward pass's), so
``ksweep --phantom model`` is refused on them, the other phantom modes are not.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Mapping, Sequence

import numpy as np

from lm_eval_evidential.errors import OrderMismatchError, PermutedRecordsError, UnsupportedRequestError
from lm_eval_evidential.records.container import Records
from lm_eval_evidential.records.make import predictive_probs

__all__ = [
    "ORDER_AVERAGED",
    "ORDERS_POOLED",
    "average_orders",
    "is_order_averaged",
    "pool_orders",
    "records_for_audit",
    "refuses_permuted",
]

#: The metadata key of records made by :func:`average_orders` (``permutations``: the run's setting,
#: ``orders_per_question``: the fewest and most orders a question had, ``records``: the rows averaged).
ORDER_AVERAGED = "order_averaged"
#: The metadata key of records made by :func:`pool_orders` (the run's permutation setting).
ORDERS_POOLED = "orders_pooled"


def _spec(records: Records) -> str | None:
    setting = records.meta.get("permutations")
    return setting.get("spec") if isinstance(setting, dict) else None


def is_order_averaged(records: Records) -> bool:
    """Whether ``records`` were made by :func:`average_orders` (one record per question of a permuted run)."""
    return isinstance(records.meta.get(ORDER_AVERAGED), dict)


def _grouped(doc_id: np.ndarray):
    """``(questions, first, counts, by_question, starts)``: each question's first row and row count, and the
    rows grouped by question (question q's are ``by_question[starts[q] : starts[q] + counts[q]]``)."""
    questions, first, inverse, counts = np.unique(doc_id, return_index=True, return_inverse=True, return_counts=True)
    by_question = np.argsort(inverse, kind="stable")
    starts = np.r_[0, np.cumsum(counts)[:-1]] if len(counts) else np.zeros(0, np.int64)
    return questions, first, counts, by_question, starts


def average_orders(records: Records) -> Records:
    """One record per question of a permuted run: the mixture of its orders (module docstring).

    Options are in the unpermuted question's order and ``gold`` is the unpermuted gold; ``order``
    is None (the records are no longer permuted) and ``meta[ORDER_AVERAGED]`` says what was
    averaged. Records without orders come back unchanged.

    >>> from lm_eval_evidential.records import Records, make_records
    >>> rows = make_records(task="t", doc_ids=[0, 0], labels=[["A", "B"]] * 2, gold=[1, 0],
    ...     logits=[[0.0, 1.0], [3.0, 0.0]], alpha=None, optional={"order": [[0, 1], [1, 0]]})
    >>> avg = average_orders(Records.from_rows(rows, task="t", meta={"method": "softmax"}))
    >>> avg.gold.tolist(), avg.probs.round(3).tolist(), avg.meta["order_averaged"]["orders_per_question"]
    ([1], [[0.158, 0.842]], [2, 2])
    """
    if records.order is None:
        return records
    if records.has_members:
        raise UnsupportedRequestError(
            f"--average-orders on {records.task!r}: its records were scored by several members (ensemble or MC "
            "dropout) in several answer orders, and averaging orders and members together has no rule here; audit "
            f"the orders with `lm-eval-evidential permutations OUT --task {records.task}`"
        )
    from lm_eval_evidential.metrics.members import dirichlet_member_summary, member_summary
    from lm_eval_evidential.metrics.order_effects import as_original

    questions, first, counts, by_question, starts = _grouped(records.doc_id)
    n, width = len(questions), records.logits.shape[1]
    values = as_original(records.alpha if records.has_alpha else records.logits, records.order)
    log_mean = np.full((n, width), np.nan)
    alpha = np.full((n, width), np.nan)
    for m in np.unique(counts):  # the mixture needs one member count per batch: questions by their order count
        group = np.flatnonzero(counts == m)
        rows = by_question[starts[group][:, None] + np.arange(m)[None, :]]
        if records.has_alpha:  # EDL and IB-EDL alike: from each order's own alpha
            log_mean[group], alpha[group] = dirichlet_member_summary(values[rows])
        else:
            log_mean[group] = member_summary(values[rows], "softmax")[0]
    k = records.k[first]
    gold = records.order[first, records.gold[first]]
    probs = predictive_probs(log_mean, alpha if records.has_alpha else None)
    pred = np.where(np.isnan(probs), -np.inf, probs).argmax(axis=1) if n else np.zeros(0, np.int64)
    lam = records.prior_weight
    strength = np.nansum(alpha, axis=1) if records.has_alpha else np.full(n, np.nan)
    meta = dict(records.meta)
    meta[ORDER_AVERAGED] = {
        "permutations": _spec(records),
        "orders_per_question": [int(counts.min()), int(counts.max())] if n else [0, 0],
        "records": len(records),
    }
    return Records(
        task=records.task,
        meta=meta,
        doc_id=questions.astype(np.int64),
        k=k,
        labels=[records.labels[int(i)] for i in first],
        gold=gold.astype(np.int64),
        pred=pred.astype(np.int64),
        correct=pred == gold,
        logits=log_mean,
        evidence=alpha - lam if records.has_alpha else alpha,
        alpha=alpha,
        strength=strength,
        vacuity=lam * k / strength,
        max_prob=probs[np.arange(n), pred] if n else np.zeros(0),
        path=records.path,
    )


def _refusal(records: Records, command: str, *, python: bool = False, run_flag: bool = True) -> PermutedRecordsError:
    _, _, counts, _, _ = _grouped(records.doc_id)
    per = f"{counts.min()}" if counts.min() == counts.max() else f"{counts.min()}-{counts.max()}"
    if python:  # a library call: the remedies are functions, not flags
        remedies = (
            "pass them through lm_eval_evidential.records.orders.average_orders first (each question's orders "
            "averaged into one record, marked), audit the orders with "
            "lm_eval_evidential.audits.permutations.permutation_summary, or load an unpermuted run"
        )
    else:
        remedies = (
            "pass --average-orders (each question's orders averaged into one record, marked), audit the orders with "
            f"`lm-eval-evidential permutations OUT --task {records.task}`, or read an unpermuted run"
            + (" with --run DATE_ID" if run_flag else " (its output folder)")
        )
    return PermutedRecordsError(
        f"{records.task} holds a permuted run ({_spec(records) or 'several orders'}: {len(records)} records of "
        f"{len(counts)} questions, {per} orders each) and `{command}` counts each record as an example, so every "
        f"question would count once per order; {remedies}"
    )


def pool_orders(records: Records) -> Records:
    """``records`` with each (question, order) kept as an example on purpose, marked (``meta[ORDERS_POOLED]``).

    For callers whose examples *are* the (question, order) pairs: the harness's own table, where
    lm-eval counts every order of a question as a doc. ``order`` becomes None, so the audit
    functions accept the records; the mark says what they were. Unpermuted records come back
    unchanged.

    >>> from lm_eval_evidential.records import Records, make_records
    >>> rows = make_records(task="t", doc_ids=[0, 0], labels=[["A", "B"]] * 2, gold=[1, 0],
    ...     logits=[[0.0, 1.0], [3.0, 0.0]], alpha=None, optional={"order": [[0, 1], [1, 0]]})
    >>> meta = {"method": "softmax", "permutations": {"spec": "cyclic"}}
    >>> pooled = pool_orders(Records.from_rows(rows, task="t", meta=meta))
    >>> len(pooled), pooled.order, pooled.meta["orders_pooled"]
    (2, None, 'cyclic')
    """
    if records.order is None:
        return records
    return dataclasses.replace(records, order=None, meta={**records.meta, ORDERS_POOLED: _spec(records)})


def _check_alike(records: Sequence[Records]) -> None:
    """Compared tasks must all be order-averaged with one permutation setting, or none of them."""
    kinds = {r.task: (r.meta[ORDER_AVERAGED]["permutations"] if is_order_averaged(r) else None) for r in records}
    if len(set(kinds.values())) <= 1:
        return
    (a, ka), *_ = kinds.items()
    b, kb = next((t, s) for t, s in kinds.items() if s != ka)
    said = {t: f"{s} orders averaged" if s else "shown in one order" for t, s in ((a, ka), (b, kb))}
    raise OrderMismatchError(
        f"{a} is {said[a]} and {b} is {said[b]}: averaging a question's orders removes the noise of reordering "
        f"from its scores, so the two sides would differ by that alone; evaluate both with the same --metadata "
        "permutations setting"
    )


def records_for_audit(
    records: Sequence[Records],
    *,
    command: str,
    average: bool,
    compared: bool,
    python: bool = False,
    run_flag: bool = True,
) -> list[Records]:
    """The one rule for a permuted run read by an audit that counts records as examples.

    Without ``average`` (the user's ``--average-orders``) the first permuted task is refused
    (:class:`~lm_eval_evidential.errors.PermutedRecordsError`, naming ``command`` and the remedies);
    with it, each permuted task's orders are averaged (:func:`average_orders`). Tasks that are
    ``compared`` (an ID task against others) must then all be averaged with one permutation
    setting, or none (:class:`~lm_eval_evidential.errors.OrderMismatchError`). Unpermuted records
    pass unchanged either way. ``run_flag``: whether ``command`` takes ``--run`` (the remedy names it).
    """
    records = list(records)
    if not average:
        for r in records:
            if r.order is not None:
                raise _refusal(r, command, python=python, run_flag=run_flag)
        return records
    out = [average_orders(r) for r in records]
    if compared:
        _check_alike(out)
    return out


def _records_in(value, depth: int = 2):
    """The Records in an argument: itself, or inside a mapping or sequence (``records_by_task``, OOD lists)."""
    if isinstance(value, Records):
        yield value
    elif depth and isinstance(value, Mapping):
        for v in value.values():
            yield from _records_in(v, depth - 1)
    elif depth and isinstance(value, (list, tuple)):
        for v in value:
            yield from _records_in(v, depth - 1)


def refuses_permuted(fn):
    """Decorate a public audit function that counts records as examples: it refuses permuted records.

    Every Records among the call's arguments (also inside a mapping or a list) goes through
    :func:`records_for_audit` without averaging before ``fn`` runs, so a library call gets the
    commands' refusal (:class:`~lm_eval_evidential.errors.PermutedRecordsError`) with the
    remedies as functions: :func:`average_orders`, :func:`pool_orders` where each (question,
    order) is meant as an example, or the order audit. ``fn.refuses_permuted`` is True (the guard
    test of ``audits/`` reads it).
    """
    signature = inspect.signature(fn)
    name = f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}"

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        bound = signature.bind_partial(*args, **kwargs).arguments.values()
        found = [r for value in bound for r in _records_in(value)]
        records_for_audit(found, command=name, average=False, compared=False, python=True)
        return fn(*args, **kwargs)

    checked.refuses_permuted = True
    return checked
