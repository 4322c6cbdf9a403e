"""Per-example evidence records: the format (schema, columns, validation of every value).

Writing and naming records files is :mod:`lm_eval_evidential.records.parquet`; finding and loading a run
is :mod:`lm_eval_evidential.records.loading`.

Format (schema version 1). One Apache Parquet file per task and run, written next to the
harness's ``results_<date_id>.json`` as ``records_<task>_<date_id>.parquet``, atomically
(temp file + rename). One row per (task, doc), with the fields of :data:`RECORD_SCHEMA` (the
table below is made from it).

The file's schema metadata key ``lm_eval_evidential`` holds JSON: schema_version, task,
method, prior_weight, the IB-EDL settings, date_id and the producing package version.
Parquet is columnar, typed, readable by pandas/polars/duckdb and never pickles.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lm_eval_evidential.errors import InvalidValueError, RecordsError

if TYPE_CHECKING:
    from lm_eval_evidential.records.provenance import ProducerCheck

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1
META_KEY = b"lm_eval_evidential"


@dataclass(frozen=True)
class RecordField:
    """One field of the records format: its name, Arrow type, what it holds, and how it is checked.

    ``arrow`` is the type the writer uses; a reader accepts any width of the same kind (any
    integer for ``int32``/``int64``, any float for ``float64``). ``per_option`` lists hold one
    value per answer option (length K; other lists may have any length); ``nullable`` lists
    are null for ``method=softmax`` records (no Dirichlet). An ``optional`` field may be absent
    from a file: it is written only when a run gives it and read as None when absent, so files
    written before it was added still load, and files of runs without it stay byte for byte
    what they were. Lists of floats are read NaN right-padded (NaN is never a value in them).
    """

    name: str
    arrow: str
    doc: str
    per_option: bool = False
    nullable: bool = False
    optional: bool = False

    @property
    def is_list(self) -> bool:
        return self.arrow.startswith("list<")

    @property
    def is_matrix(self) -> bool:
        """A list of lists (one list per member): read as an (n, M, K_max) array."""
        return self.arrow.startswith("list<list<")

    @property
    def item(self) -> str:
        """The type of one value: the list's (or list of lists') item type, or the field's own type."""
        return self.arrow.removeprefix("list<").removeprefix("list<").removesuffix(">").removesuffix(">")


#: The records format, one row per field in file order. Everything else is made from it: the
#: module table, ``RECORD_FIELDS``, the row mappings (``records[i]``, :func:`make_records`), the
#: type and null checks of a file, the columns read, the Arrow schema and the writer. A field
#: that older files lack is one more row with ``optional=True`` (and its ``Records`` attribute).
RECORD_SCHEMA = (
    RecordField("task", "string", "harness task name"),
    RecordField("doc_id", "int64", "the harness's doc_id (position in the task's evaluated docs)"),
    RecordField("k", "int32", "number of options of *this* question"),
    RecordField("labels", "list<string>", 'the answer labels shown, e.g. ["A","B","C"]', per_option=True),
    RecordField("gold", "int32", "index of the correct label"),
    RecordField(
        "logits",
        "list<float64>",
        "last-position logits at the answer tokens (for models that only expose log-likelihoods, e.g. "
        "``--model hf``: those); with M > 1 members: log p̄, the log of their predictive distribution "
        "(so softmax(logits) = p̄)",
        per_option=True,
    ),
    RecordField(
        "evidence",
        "list<float64>",
        "e (null for method=softmax, where it is undefined); with M > 1 EDL members: α - λ of the summary α",
        per_option=True,
        nullable=True,
    ),
    RecordField(
        "alpha",
        "list<float64>",
        "Dirichlet α = e + λ (null for method=softmax); with M > 1 EDL members the summary α = p̄ / mean_m(1/S_m) "
        "(mean p̄, vacuity the members' mean vacuity)",
        per_option=True,
        nullable=True,
    ),
    RecordField("strength", "float64", "S = Σα (NaN for softmax); with M > 1 EDL members 1 / mean_m(1/S_m)"),
    RecordField("vacuity", "float64", "λK/S (NaN for softmax); with M > 1 EDL members the mean of theirs"),
    RecordField("max_prob", "float64", "max E[p] (α/S, or the softmax of the logits for softmax; p̄ for M > 1)"),
    RecordField("pred", "int32", "argmax E[p] (first index on ties)"),
    RecordField("correct", "bool", "pred == gold"),
    RecordField(
        "phantom_logits",
        "list<float64>",
        'logits of the labels after the question\'s last one (" E".." H" after " A".." D": the '
        "``phantom_count`` model_arg, default 4, of them that are single tokens), from the same forward pass; "
        "absent for ``--model hf`` and in files written before they were kept",
        optional=True,
    ),
    RecordField(
        "member_logits",
        "list<list<float64>>",
        "M × K: the answer logits of each of the M members that scored the question (ensemble members in "
        "the sorted order of their folder names, MC-dropout passes in draw order); p̄ is the mean of their "
        "softmax (softmax members, Lakshminarayanan et al. 2017) or of their Dirichlet means α_m/S_m (EDL "
        "members; metrics.members); absent for runs of one prediction per question",
        optional=True,
    ),
    RecordField(
        "order",
        "list<int32>",
        "permuted evaluation (``metadata.permutations``): the option indices of the unpermuted question in the "
        "order shown (``order[j]`` is the option at letter j; ``gold`` and everything else are as shown); one "
        "record per (question, order), ``doc_id`` the question's; absent for an unpermuted run",
        per_option=True,
        optional=True,
    ),
)
#: The fields every records file has, in file order.
RECORD_FIELDS = tuple(f.name for f in RECORD_SCHEMA if not f.optional)
#: The fields a file may lack (read as None).
OPTIONAL_FIELDS = tuple(f.name for f in RECORD_SCHEMA if f.optional)
_FIELD = {f.name: f for f in RECORD_SCHEMA}


def _schema_table() -> str:
    """The module's field table (Markdown), from :data:`RECORD_SCHEMA`."""
    rows = [("field", "type", "meaning"), *((f.name, f.arrow, f.doc) for f in RECORD_SCHEMA)]
    width = [max(len(r[i]) for r in rows) for i in range(3)]

    def line(row) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(row, width)) + " |"

    return "\n".join([line(rows[0]), "|" + "|".join("-" * (w + 2) for w in width) + "|", *map(line, rows[1:])])


__doc__ = f"{__doc__}\n{_schema_table()}\n"


def arrow_type(field: RecordField):
    """The Arrow type the writer uses for ``field``."""
    import pyarrow as pa

    scalar = {"string": pa.string, "int64": pa.int64, "int32": pa.int32, "bool": pa.bool_, "float64": pa.float64}
    if field.is_matrix:
        return pa.list_(pa.list_(scalar[field.item]()))
    return pa.list_(scalar[field.item]()) if field.is_list else scalar[field.item]()


def arrow_schema(names: Sequence[str] = RECORD_FIELDS):
    """The Arrow schema (no metadata) the writer gives a records file with the fields ``names``."""
    import pyarrow as pa

    return pa.schema([(name, arrow_type(_FIELD[name])) for name in names])


def _type_ok(field: RecordField, ty) -> bool:
    """Whether a file's Arrow type ``ty`` is of ``field``'s kind (any integer or float width; null if nullable)."""
    import pyarrow.types as t

    kind = {"string": t.is_string, "int64": t.is_integer, "int32": t.is_integer, "bool": t.is_boolean}
    kind["float64"] = t.is_floating
    if field.is_matrix:
        return t.is_list(ty) and t.is_list(ty.value_type) and kind[field.item](ty.value_type.value_type)
    if field.is_list:
        return (t.is_list(ty) and kind[field.item](ty.value_type)) or (field.nullable and t.is_null(ty))
    return kind[field.item](ty)


#: The methods records can come from (``modeling.config.METHODS``; this layer cannot import it).
RECORD_METHODS = ("edl", "ib_edl", "softmax")


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
            z, a = _summary_of(member_z, members_method, prior_weight)
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


def _summary_of(members: np.ndarray, method: str, prior_weight: float):
    from lm_eval_evidential.metrics.members import member_summary

    return member_summary(members, method, prior_weight)


def _padded(list_array, n: int, k: np.ndarray, name: str = "values") -> np.ndarray:
    """A NaN right-padded (n, K_max) float64 matrix from an Arrow list column (vectorised).

    Row i's values fill its first k[i] slots: a boolean mask over the grid, read row-major, has
    the flattened values' order, so no per-value index arrays (4 x int64 per value) are built,
    and chunks are converted one by one instead of being concatenated first. Null rows
    (evidence/alpha of softmax records) stay NaN.
    """
    k_max = int(k.max()) if n else 0
    out = np.full((n, k_max), np.nan)
    if n == 0:
        return out
    import pyarrow as pa
    import pyarrow.compute as pc

    chunks = list_array.chunks if isinstance(list_array, pa.ChunkedArray) else [list_array]
    row = 0
    for chunk in chunks:
        m = len(chunk)
        slots = np.arange(k_max) < k[row : row + m, None]
        if chunk.null_count:
            slots &= ~np.asarray(chunk.is_null().to_numpy(zero_copy_only=False), dtype=bool)[:, None]
        values = chunk.flatten().to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        if values.size != np.count_nonzero(slots):
            lengths = np.asarray(pc.list_value_length(chunk).fill_null(0).to_numpy(zero_copy_only=False))
            bad = int(np.flatnonzero((lengths != k[row : row + m]) & slots.any(axis=1))[0])
            raise RecordsError(f"row {row + bad} has k={k[row + bad]} but {lengths[bad]} {name}")
        out[row : row + m][slots] = values
        row += m
    return out


class _ColumnsOnDemand:
    """What ``Records._from_table`` uses of a pyarrow Table, read one column at a time (row group
    by row group) from a Parquet file: a large file is never decoded whole, so the peak is the
    arrays plus one column, not the arrays plus the whole decoded table."""

    def __init__(self, parquet_file, path: Path):
        self._file = parquet_file
        self._path = path
        self.schema = parquet_file.schema_arrow
        self.column_names = self.schema.names
        self.num_rows = parquet_file.metadata.num_rows

    def column(self, name: str):
        import pyarrow as pa

        try:
            parts = [self._file.read_row_group(i, columns=[name]).column(0) for i in range(self._file.num_row_groups)]
        except (pa.ArrowInvalid, OSError) as exc:
            raise RecordsError(
                f"{self._path}: cannot read column {name!r} ({exc}); the file is truncated or corrupted — re-run "
                "the evaluation"
            ) from exc
        return pa.chunked_array([c for part in parts for c in part.chunks], type=self.schema.field(name).type)


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
        """Phantom logits per row (0 where the records keep none)."""
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
            return [self[j] for j in range(*i.indices(len(self)))]
        k = int(self.k[i])
        return {f.name: self._value(f, i, k) for f in RECORD_SCHEMA}

    def _value(self, f: RecordField, i: int, k: int):
        """Field ``f`` of example ``i`` as the records format gives it (Python values, lists of length K)."""
        if f.name == "task":
            return self.task
        column = getattr(self, f.name)
        if column is None or (f.nullable and not self.has_alpha):
            return None  # an optional field these records lack; alpha and evidence of softmax records
        if f.item == "string":
            return list(column[i])
        if f.is_matrix:
            return column[i, :, :k].tolist()
        if f.is_list:
            row = column[i, :k] if f.per_option else column[i]
            return row.tolist() if f.per_option else row[~np.isnan(row)].tolist()
        return _PYTHON[f.item](column[i])

    @classmethod
    def from_rows(cls, rows: Sequence[Mapping], *, task: str, meta: Mapping | None = None) -> Records:
        """Records from per-example mappings (as produced by :func:`make_record`), sorted by doc_id."""
        return cls._from_table(_rows_to_table(rows, task=task, meta=meta or {}), task=task)

    def to_table(self):
        return _rows_to_table(list(self), task=self.task, meta=self.meta)

    @classmethod
    def _from_table(cls, table, *, task: str, path: Path | None = None) -> Records:
        meta = _parse_meta(table.schema.metadata, path)
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
        _check_types(table.schema, path)
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
            columns[f.name] = _read_column(f, column, n, columns.get("k"), path)
            if f.name == "phantom_logits":  # each row's own count (NaN pads beyond it): checked below
                import pyarrow.compute as pc

                counts = pc.list_value_length(column).fill_null(0).to_numpy(zero_copy_only=False)
                phantom_lengths = np.asarray(counts, dtype=np.int64)
            del column
        k, logits, evidence, alpha = columns["k"], columns["logits"], columns["evidence"], columns["alpha"]
        col = columns.__getitem__
        _validate_values(path, meta, k, logits, alpha, columns["gold"])
        doc_id = columns["doc_id"]
        if columns["order"] is not None:
            _validate_orders(path, doc_id, k, columns["gold"], columns["order"])
        elif len(np.unique(doc_id)) != n:
            values, counts = np.unique(doc_id, return_counts=True)
            raise RecordsError(
                f"{path}: doc_id {int(values[counts > 1][0])} appears more than once; records of two runs were mixed"
            )
        _validate_evidence(path, meta, k, evidence, alpha, col)
        if columns.get("member_logits") is None:
            _validate_edl_alpha(path, meta, k, logits, alpha)  # one member: alpha follows from its logits
        _validate_members(path, meta, k, logits, alpha, columns.get("member_logits"))
        _validate_derived(path, meta, k, logits, alpha, col)
        _validate_task_column(path, table.column("task"), task)
        if columns.get("phantom_logits") is not None:
            _validate_phantoms(path, columns["phantom_logits"], phantom_lengths, meta, k)
        _validate_limit(path, meta, len(np.unique(doc_id)))  # questions: a permuted run has a row per order
        return cls(task=task, meta=meta, path=path, **columns)


#: How one value of each scalar type is read into numpy (a column) and Python (``records[i]``).
_NUMPY = {"int64": np.int64, "int32": np.int64, "bool": bool, "float64": np.float64}
_PYTHON = {"int64": int, "int32": int, "bool": bool, "float64": float}


def _read_column(f: RecordField, column, n: int, k: np.ndarray | None, path) -> Any:
    """Field ``f`` of a file as ``Records`` holds it: a 1-D array, a NaN right-padded (n, width)
    float64 matrix, or label lists. Per-option lists must have K values per row."""
    import pyarrow.compute as pc

    if not f.is_list:
        return column.to_numpy().astype(_NUMPY[f.item])
    if f.per_option and not f.nullable:
        lengths = np.asarray(pc.list_value_length(column).to_numpy(zero_copy_only=False))
        bad = np.flatnonzero(lengths != k)
        if bad.size:
            i = int(bad[0])
            raise RecordsError(f"{path}: row {i} has k={k[i]} but {lengths[i]} {f.name}")
    if f.item == "string":
        return column.to_pylist() if n <= 200_000 else _LazyLabels(column)
    if f.is_matrix:
        return _read_matrix(f, column, n, k, path)
    if not f.per_option:
        k = np.asarray(pc.list_value_length(column).fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    try:
        values = _padded(column, n, k, f.name)
    except RecordsError as exc:
        raise RecordsError(f"{path}: {exc}") from None
    if f.item in ("int32", "int64"):  # integer lists (order): int64, -1 right-padded
        return np.where(np.isnan(values), -1, values).astype(np.int64)
    return values


def _validate_orders(path, doc_id: np.ndarray, k: np.ndarray, gold: np.ndarray, order: np.ndarray) -> None:
    """A permuted run's records: each order a permutation of range(K), each (question, order) once, and the
    orders of one question agree on its K and on which option is gold (``order[gold]``)."""
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


def _read_matrix(f: RecordField, column, n: int, k: np.ndarray, path) -> np.ndarray:
    """A list-of-lists field (M lists of K values per row, the same M in every row) as (n, M, K_max)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if column.null_count:
        row = int(np.flatnonzero(np.asarray(column.is_null().to_numpy(zero_copy_only=False)))[0])
        raise RecordsError(f"{path}: row {row} has no {f.name} but other rows do; re-run the evaluation")
    counts = np.asarray(pc.list_value_length(column).to_numpy(zero_copy_only=False), dtype=np.int64)
    m = int(counts[0]) if n else 1
    if n and ((counts != m).any() or m < 1):
        row = int(np.flatnonzero(counts != m)[0]) if (counts != m).any() else 0
        raise RecordsError(
            f"{path}: row {row} has {int(counts[row])} {f.name} rows, row 0 has {m}; every question of a run is "
            "scored by the same members — the file was edited, re-run the evaluation"
        )
    inner = pa.chunked_array([c.flatten() for c in column.chunks], type=column.type.value_type)
    try:
        flat = _padded(inner, n * m, np.repeat(k, m), f.name)
    except RecordsError as exc:
        raise RecordsError(f"{path}: {exc} (member rows, {m} per question)") from None
    return flat.reshape(n, m, flat.shape[1])


def _validate_members(path, meta: dict, k: np.ndarray, logits: np.ndarray, alpha: np.ndarray, members) -> None:
    """Records of M members: ``logits`` is log p̄ of the member logits and, for EDL members, ``alpha`` the
    summary Dirichlet (:func:`lm_eval_evidential.metrics.members.member_summary`); members are finite."""
    if members is None or len(k) == 0:
        return
    from lm_eval_evidential.metrics.members import MEMBER_METHODS

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
        log_mean, summary = _summary_of(members[block], method, lam)
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


def _validate_phantoms(path, phantom: np.ndarray, lengths: np.ndarray, meta: dict, k: np.ndarray) -> None:
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


def _validate_limit(path, meta: dict, n: int) -> None:
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


def _parse_meta(schema_metadata, path) -> dict:
    raw = (schema_metadata or {}).get(META_KEY)
    if raw is None:
        raise RecordsError(f"{path or 'table'}: not an lm-eval-evidential records file (no metadata)")
    try:
        meta = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RecordsError(f"{path}: records metadata is not valid JSON ({exc}); the file is corrupted") from exc
    except RecursionError:
        raise RecordsError(
            f"{path}: records metadata is JSON nested too deeply to read; this package never writes such metadata "
            "— the file was edited, re-run the evaluation"
        ) from None
    if not isinstance(meta, dict):
        raise RecordsError(f"{path}: records metadata must be a JSON object, got {type(meta).__name__}")
    return meta


def _check_types(schema, path) -> None:
    """Each field in the file must have its documented Arrow type (any integer width for integer fields)."""
    for f in RECORD_SCHEMA:
        if f.name in schema.names and not _type_ok(f, schema.field(f.name).type):
            raise RecordsError(
                f"{path}: field {f.name!r} has type {schema.field(f.name).type}, not the records schema's; the file "
                "is of another format"
            )


def _validate_derived(path, meta: dict, k: np.ndarray, logits: np.ndarray, alpha: np.ndarray, col) -> None:
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


def _validate_evidence(path, meta: dict, k: np.ndarray, evidence: np.ndarray, alpha: np.ndarray, col) -> None:
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


def _validate_edl_alpha(path, meta: dict, k: np.ndarray, logits: np.ndarray, alpha: np.ndarray) -> None:
    """For ``method=edl`` the stored alpha is the record's logits through the head: softplus(z) + λ
    (:func:`lm_eval_evidential.modeling.heads.edl_alpha`; IB-EDL's alpha depends on noise draws and
    σ not stored here, so only its floor λ is checked, by :func:`_validate_values`)."""
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


def _validate_task_column(path, column, task: str) -> None:
    """Every row's ``task`` is the file's task (records of two tasks are never mixed in one file)."""
    import pyarrow.compute as pc

    others = [t for t in pc.unique(column).to_pylist() if t != task]
    if others:
        raise RecordsError(
            f"{path}: rows of task {others[0]!r} in the records of {task!r}; records of two tasks were mixed — "
            "re-run the evaluation"
        )


def _validate_values(path, meta: dict, k: np.ndarray, logits: np.ndarray, alpha: np.ndarray, gold: np.ndarray) -> None:
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


class _LazyLabels(Sequence):
    """Label lists materialised per row, so loading millions of records makes no Python lists."""

    def __init__(self, column):
        self._column = column

    def __len__(self):
        return len(self._column)

    def __getitem__(self, i):
        return self._column[i].as_py()


def _rows_to_table(rows: Sequence[Mapping], *, task: str, meta: Mapping):
    import pyarrow as pa

    # A permuted run has one record per (question, order): the identity order first within a question.
    rows = sorted(rows, key=lambda r: (r["doc_id"], tuple(r.get("order") or ())))
    ids = [(r["doc_id"], tuple(r.get("order") or ())) for r in rows]
    if len(set(ids)) != len(ids):
        dup, order = next(i for i in ids if ids.count(i) > 1)
        shown = f" in order {list(order)}" if order else ""
        raise InvalidValueError(f"{task}: doc_id {dup}{shown} appears more than once in the records")
    names = [f.name for f in RECORD_SCHEMA if not f.optional or any(r.get(f.name) is not None for r in rows)]
    columns = {name: [r[name] for r in rows] for name in names}
    columns["task"] = [task] * len(rows)
    full_meta = {"schema_version": SCHEMA_VERSION, **dict(meta), "task": task}  # the rows' task is the file's
    schema = arrow_schema(names).with_metadata({META_KEY: json.dumps(full_meta, sort_keys=True).encode()})
    return pa.table(columns, schema=schema)
