"""What every audit shares: per-record scores, score-name checks, the producer rule, NaN reasons."""

from __future__ import annotations

import logging
import math
import warnings
import weakref
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.metrics._validation import UndefinedMetricWarning
from lm_eval_evidential.metrics.scores import (  # noqa: F401 (no_alpha_reason: the audits' wording too)
    SCORES,
    available_scores,
    check_score_names,
    compute_score,
    no_alpha_reason,
)
from lm_eval_evidential.records import Records, check_same_producer
from lm_eval_evidential.records.orders import is_order_averaged

logger = logging.getLogger(__name__)

#: Scores undefined where a question has one option (neg_norm_entropy divides by log K).
K1_UNDEFINED = ("neg_norm_entropy",)


def without_k1_undefined(names: Sequence[str], *records: Records) -> list[str]:
    """A default score list without the scores undefined at K = 1 where some question of ``records`` has one
    option, said once in one wording (every audit's default); a score asked for by name is computed, and
    refused on such questions (:mod:`lm_eval_evidential.metrics.scores`)."""
    names = list(names)
    single = {r.task: int((r.k < 2).sum()) for r in records if r.k.size and int(r.k.min()) < 2}
    dropped = [n for n in names if n in K1_UNDEFINED]
    if single and dropped:
        where = ", ".join(f"{task}: {n}" for task, n in single.items())
        logger.warning(
            "%s left out: some questions have K = 1 (%s), where it is undefined (it divides by log K); "
            "name the scores with --scores, or drop single-option questions, to choose",
            ", ".join(dropped),
            where,
        )
        names = [n for n in names if n not in K1_UNDEFINED]
    return names


def check_scores(scores: Iterable[str] | None) -> list[str] | None:
    """Score names through the one validator (:func:`~lm_eval_evidential.metrics.scores.check_score_names`);
    None stays None (= every score the records can give)."""
    return None if scores is None else check_score_names(scores)


def score_inputs(records: Records, keep=None) -> dict:
    """``probs``/``k``/``alpha``/``prior_weight`` of (the ``keep`` rows of) ``records`` for
    :func:`~lm_eval_evidential.metrics.scores.compute_score` and the metrics built on it.

    Evidential records pass alpha and ``probs=None`` (derived from the validated alpha, once);
    softmax records pass their softmax probabilities and no alpha; records of several members
    pass their members' logits too.
    """
    if keep is not None and np.all(keep):
        keep = None  # no copy of the (n, K_max) arrays when nothing is dropped
    pick = (lambda a: a) if keep is None else (lambda a: a[keep])  # noqa: E731
    if records.has_alpha:
        inputs = {
            "probs": None,
            "k": pick(records.k),
            "alpha": pick(records.alpha),
            "prior_weight": records.prior_weight,
        }
    else:
        inputs = {
            "probs": pick(records.probs),
            "k": pick(records.k),
            "alpha": None,
            "prior_weight": records.prior_weight,
        }
    if records.has_members:  # ensembles, MC dropout: the member scores read every member's logits
        inputs["member_logits"] = pick(records.member_logits)
    return inputs


def record_scores(records: Records, names: Sequence[str], keep=None) -> dict[str, np.ndarray]:
    """``{score: values}`` for the examples of ``records`` selected by ``keep`` (default all):
    the one way every audit and figure computes a record's scores.

    A score of all the examples is computed once per :class:`Records` object and kept, read-only, while the
    object lives: ``report`` reads each score in several sections (about eight times over, 2M records each)."""
    if keep is not None and np.all(keep):
        keep = None
    if keep is not None:
        return _computed_scores(records, names, keep)
    kept = _kept(records)["scores"]
    missing = [name for name in names if name not in kept]
    if missing:
        for name, values in _computed_scores(records, missing, None).items():
            values.setflags(write=False)
            kept[name] = values
    return {name: kept[name] for name in names}


def _computed_scores(records: Records, names: Sequence[str], keep) -> dict[str, np.ndarray]:
    inputs = score_inputs(records, keep)
    logits = answer_logits(records, names)
    if logits is not None:
        inputs["logits"] = logits if keep is None else logits[keep]
    return {name: compute_score(name, **inputs) for name in names}


def keep_dense_ranks(records: Records, name: str, ranking) -> None:
    """Keep the dense ranks of ``records``' score ``name`` from ``ranking``, the
    :class:`~lm_eval_evidential.metrics.rejection.Ranking` of :func:`record_scores`' values, for one later
    :func:`taken_dense_ranks` (the order audit's ranks without sorting the score again). A score with NaN is not
    kept: a Ranking puts each NaN in a group of its own, ``np.unique`` all of them in one."""
    values = _kept(records)["scores"].get(name)
    if values is not None and ranking.order.size == values.size and not np.isnan(values).any():
        _kept(records)["dense_ranks"][name] = ranking.dense_ranks()


def taken_dense_ranks(records: Records) -> dict[str, np.ndarray]:
    """The dense ranks kept by :func:`keep_dense_ranks`, handed over once (no longer kept: they are 8 bytes
    a record per score)."""
    kept = _kept(records)
    taken, kept["dense_ranks"] = kept["dense_ranks"], {}
    return taken


#: ``id(records) -> {"scores": {score: values}, "dense_ranks": {score: ranks}}`` of the live Records objects
#: (Records is a frozen dataclass of arrays, so neither hashable nor to be written on); each entry leaves with
#: its object.
_KEPT: dict[int, dict[str, dict[str, np.ndarray]]] = {}


def _kept(records: Records) -> dict[str, dict[str, np.ndarray]]:
    key = id(records)
    if key not in _KEPT:
        _KEPT[key] = {"scores": {}, "dense_ranks": {}}
        weakref.finalize(records, _KEPT.pop, key, None)
    return _KEPT[key]


def answer_logits(records: Records, names: Sequence[str]):
    """The answer logits that the logit scores among ``names`` (neg_energy, max_logit) read, None where none
    does; refused on order-averaged records, whose logits column is log p̄, not one forward pass's."""
    needing = [n for n in names if SCORES[n].needs_logits]
    if not needing:
        return None
    if is_order_averaged(records):
        raise InvalidValueError(
            f"{', '.join(needing)} read one forward pass's answer logits, but "
            f"the records of {records.task!r} average each question's orders (--average-orders; their logits "
            "column is log p̄); use max_prob, neg_entropy or an evidence score"
        )
    return records.logits


def check_task_mapping(records_by_task) -> None:
    """``records_by_task`` must map task name -> Records (ValueError naming the loader otherwise)."""
    if not isinstance(records_by_task, Mapping):
        raise InvalidValueError(
            f"records_by_task must map task name -> Records, got {type(records_by_task).__name__}; "
            "load them with lm_eval_evidential.records.load_run(...).records"
        )


def check_records_by_task(records_by_task) -> None:
    """A ``{task: Records}`` mapping from one producer (FingerprintMismatchError unless checked together before)."""
    check_task_mapping(records_by_task)
    check_same_producer(list(records_by_task.values()))


def collect(reasons: list[str], fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, appending any UndefinedMetricWarning message to ``reasons``.

    The message goes into the row's ``reason`` instead of stderr; other warnings are re-issued.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = fn(*args, **kwargs)
    for w in caught:
        if issubclass(w.category, UndefinedMetricWarning):
            reasons.append(str(w.message))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return value


def finish_row(row: dict, reasons: Iterable[str]) -> dict:
    """Add ``reason`` (unique messages, in order) when any number in the row is NaN."""
    if any(isinstance(v, float) and math.isnan(v) for v in row.values()):
        unique = list(dict.fromkeys(r for r in reasons if r))
        row["reason"] = "; ".join(unique) if unique else "undefined on these records"
    return row
