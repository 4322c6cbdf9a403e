"""The :class:`Records` container: the columns of one task's records as numpy arrays, a sequence of
per-example mappings, built from rows or from a file's Arrow table (every value checked,
:mod:`~lm_eval_evidential.records.validation`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lm_eval_evidential.errors import RecordsError
from lm_eval_evidential.records.arrow import check_types, parse_meta, read_column, rows_to_table
from lm_eval_evidential.records.make import predictive_probs
from lm_eval_evidential.records.schema import (
    RECORD_FIELDS,
    RECORD_METHODS,
    RECORD_SCHEMA,
    SCHEMA_VERSION,
    RecordField,
)
from lm_eval_evidential.records.validation import (
    validate_derived,
    validate_edl_alpha,
    validate_evidence,
    validate_limit,
    validate_member_phantoms,
    validate_members,
    validate_orders,
    validate_phantoms,
    validate_task_column,
    validate_values,
)

if TYPE_CHECKING:
    from lm_eval_evidential.records.provenance import ProducerCheck

#: The keys of an example's mapping (``records[i]``), every field of the schema in file order.
_ROW_KEYS = tuple(f.name for f in RECORD_SCHEMA)


@dataclass(frozen=True)
class Records(Sequence):
    """Columnar records of one task: a sequence of mappings with the fields of ``RECORD_SCHEMA``.

    Per-example access (``records[i]``, iteration) builds a dict; audits use the columns:
    ``k``, ``gold``, ``pred``, ``correct``, ``strength``, ``vacuity``, ``max_prob`` (1-D) and
    ``logits``, ``evidence``, ``alpha``, ``probs`` (NaN right-padded (n, K_max) float64), and
    ``phantom_logits`` ((n, P_max), NaN right-padded beyond each row's own; None when the file
    has none).
    """

    task: str
    meta: dict
    doc_id: np.ndarray
    k: np.ndarray
    labels: list
    gold: np.ndarray
    pred: np.ndarray
    correct: np.ndarray
    logits: np.ndarray
    evidence: np.ndarray
    alpha: np.ndarray
    strength: np.ndarray
    vacuity: np.ndarray
    max_prob: np.ndarray
    path: Path | None = field(default=None, compare=False)
    #: Set when the records were checked together with others to come from one producer
    #: (:func:`~lm_eval_evidential.records.provenance.checked_together`); audits skip the check then.
    producer_check: ProducerCheck | None = field(default=None, compare=False, repr=False)
    # One attribute per optional field of RECORD_SCHEMA, default None (absent from the file);
    # tests/records/test_schema_table.py checks they match.
    phantom_logits: np.ndarray | None = None
    #: (n, M, K_max), NaN right-padded beyond each row's own K; None for one prediction per question.
    member_logits: np.ndarray | None = None
    #: (n, M, P_max), NaN right-padded beyond each row's own P: each member's phantom logits (None: not kept).
    member_phantom_logits: np.ndarray | None = None
    #: (n, K_max) int64, -1 right-padded: the order each record's options were shown in (None: unpermuted).
    order: np.ndarray | None = None

    def order_of(self, i: int) -> list[int]:
        """Record ``i``'s order as shown (the identity for an unpermuted record)."""
        k = int(self.k[i])
        return list(range(k)) if self.order is None else self.order[i, :k].tolist()

    @property
    def has_members(self) -> bool:
        """Whether these records were scored by several members (ensembles, MC dropout)."""
        return self.member_logits is not None

    @property
    def n_members(self) -> int:
        """M, the members per question (1 for records of one prediction per question)."""
        return 1 if self.member_logits is None else int(self.member_logits.shape[1])

    @property
    def has_phantoms(self) -> bool:
        """Whether these records keep phantom logits (files from before them, ``--model hf``: no)."""
        return self.phantom_logits is not None

    @property
    def n_phantom(self) -> np.ndarray:
        """Phantom logits per row (0 where the records keep none); for records of several members, each
        member's (every member of a row has the same number)."""
        if self.member_phantom_logits is not None:
            return (~np.isnan(self.member_phantom_logits[:, 0, :])).sum(axis=1).astype(np.int64)
        if self.phantom_logits is None:
            return np.zeros(len(self.doc_id), dtype=np.int64)
        return (~np.isnan(self.phantom_logits)).sum(axis=1).astype(np.int64)

    @property
    def method(self) -> str:
        return self.meta.get("method", "edl")

    @property
    def prior_weight(self) -> float:
        return float(self.meta.get("prior_weight", 1.0))

    @property
    def has_alpha(self) -> bool:
        return self.method != "softmax"

    @property
    def probs(self) -> np.ndarray:
        """E[p]: α/S for evidential records, softmax of the logits otherwise (NaN padded)."""
        return predictive_probs(self.logits, self.alpha if self.has_alpha else None)

    def __len__(self) -> int:
        return len(self.doc_id)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return self._rows(range(*i.indices(len(self))))
        return self._rows([i])[0]

    def __iter__(self):
        return iter(self._rows(range(len(self))))

    def _rows(self, index: Sequence[int]) -> list[dict]:
        """Examples ``index`` as the records format gives them (Python values, lists of length K), built a field
        at a time: writing a task's records builds every row, and one conversion of a column to Python values
        costs less than one per value (about 18 µs a row in benchmarks/bench_throughput.py's records otherwise)."""
        index = list(index)
        ks = self.k[index].tolist()
        columns = [self._values(f, index, ks) for f in RECORD_SCHEMA]
        return [dict(zip(_ROW_KEYS, row)) for row in zip(*columns)]

    def _values(self, f: RecordField, index: list[int], ks: list[int]) -> list:
        """Field ``f`` of examples ``index`` (``ks``: their K), as :meth:`_rows` gives them."""
        if f.name == "task":
            return [self.task] * len(index)
        column = getattr(self, f.name)
        if column is None or (f.nullable and not self.has_alpha):
            return [None] * len(index)  # an optional field these records lack; alpha and evidence of softmax records
        if f.item == "string":
            return [list(column[i]) for i in index]
        if f.is_matrix:
            kept = [column[i] if f.per_option else column[i][:, ~np.isnan(column[i]).all(axis=0)] for i in index]
            return [rows[:, :k].tolist() if f.per_option else rows.tolist() for rows, k in zip(kept, ks)]
        values = column[index].tolist()  # Python ints, floats and bools, as the records format gives them
        if not f.is_list:
            return values
        if f.per_option:
            return [row[:k] for row, k in zip(values, ks)]
        return [[v for v in row if v == v] for row in values]  # NaN pads dropped (v != v only for NaN)

    @classmethod
    def from_rows(cls, rows: Sequence[Mapping], *, task: str, meta: Mapping | None = None) -> Records:
        """Records from per-example mappings (as produced by :func:`make_record`), sorted by doc_id."""
        return cls.from_table(rows_to_table(rows, task=task, meta=meta or {}), task=task)

    def to_table(self):
        return rows_to_table(list(self), task=self.task, meta=self.meta)

    @classmethod
    def from_table(cls, table, *, task: str, path: Path | None = None) -> Records:
        """Records from a pyarrow Table in the records schema, its metadata and columns validated (``path``: the file
        it was read from, named in a refusal)."""
        meta = parse_meta(table.schema.metadata, path)
        version = meta.get("schema_version")
        if version != SCHEMA_VERSION and str(version) == str(SCHEMA_VERSION):
            raise RecordsError(
                f"{path}: records metadata has schema_version {version!r}, a {type(version).__name__}, where the "
                f"writer stores the number {SCHEMA_VERSION}; the metadata was edited or written by another program — "
                "re-run the evaluation"
            )
        if version != SCHEMA_VERSION:
            raise RecordsError(
                f"{path}: records schema version {version!r}, this package reads version "
                f"{SCHEMA_VERSION}; re-run the evaluation with this version of lm-eval-evidential"
            )
        method = meta.get("method", "edl")
        if method not in RECORD_METHODS:
            raise RecordsError(
                f"{path}: the records metadata names method {method!r}, not one of {', '.join(RECORD_METHODS)}; "
                "the file was edited or written by another program — re-run the evaluation"
            )
        missing = [f for f in RECORD_FIELDS if f not in table.column_names]
        if missing:
            raise RecordsError(f"{path}: records file lacks the fields {missing}")
        check_types(table.schema, path)
        for f in RECORD_SCHEMA:
            if (
                not f.is_list
                and f.item != "string"
                and f.name in table.column_names
                and table.column(f.name).null_count
            ):
                raise RecordsError(f"{path}: field {f.name!r} has missing (null) values; re-run the evaluation")
        n = table.num_rows
        columns: dict[str, Any] = {}
        # Each column is fetched once and dropped once converted (``table`` may read on demand).
        for f in RECORD_SCHEMA:
            if f.name == "task":  # not stored: every row must name the file's task (checked below)
                continue
            if f.name not in table.column_names:  # an optional field this file lacks
                columns[f.name] = None
                continue
            column = table.column(f.name)
            if f.name == "order" and column.null_count:
                raise RecordsError(
                    f"{path}: field 'order' is missing in some rows; records of a permuted and an unpermuted run "
                    "were mixed — re-run the evaluation"
                )
            columns[f.name] = read_column(f, column, n, columns.get("k"), path)
            if f.name == "phantom_logits":  # each row's own count (NaN pads beyond it): checked below
                import pyarrow.compute as pc

                counts = pc.list_value_length(column).fill_null(0).to_numpy(zero_copy_only=False)
                phantom_lengths = np.asarray(counts, dtype=np.int64)
            del column
        k, logits, evidence, alpha = columns["k"], columns["logits"], columns["evidence"], columns["alpha"]
        col = columns.__getitem__
        validate_values(path, meta, k, logits, alpha, columns["gold"])
        doc_id = columns["doc_id"]
        if columns["order"] is not None:
            validate_orders(path, doc_id, k, columns["gold"], columns["order"], meta)
        elif len(np.unique(doc_id)) != n:
            values, counts = np.unique(doc_id, return_counts=True)
            raise RecordsError(
                f"{path}: doc_id {int(values[counts > 1][0])} appears more than once; records of two runs were mixed"
            )
        validate_evidence(path, meta, k, evidence, alpha, col)
        if columns.get("member_logits") is None:
            validate_edl_alpha(path, meta, k, logits, alpha)  # one member: alpha follows from its logits
        validate_members(path, meta, k, logits, alpha, columns.get("member_logits"))
        validate_derived(path, meta, k, logits, alpha, col)
        validate_task_column(path, table.column("task"), task)
        if columns.get("phantom_logits") is not None:
            validate_phantoms(path, columns["phantom_logits"], phantom_lengths, meta, k)
        if columns.get("member_phantom_logits") is not None:
            validate_member_phantoms(path, columns["member_phantom_logits"], columns.get("member_logits"), meta, k)
        validate_limit(path, meta, len(np.unique(doc_id)))  # questions: a permuted run has a row per order
        return cls(task=task, meta=meta, path=path, **columns)
