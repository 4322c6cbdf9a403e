"""Records in Arrow: the type of each field (:data:`~lm_eval_evidential.records.schema.RECORD_SCHEMA`), the
checks of a file's types and metadata, rows to an Arrow table, and Arrow columns to the arrays
:class:`~lm_eval_evidential.records.container.Records` holds (NaN right-padded, read chunk by chunk)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lm_eval_evidential.errors import InvalidValueError, RecordsError
from lm_eval_evidential.records.schema import (
    FIELD_BY_NAME,
    META_KEY,
    RECORD_FIELDS,
    RECORD_SCHEMA,
    SCHEMA_VERSION,
    RecordField,
)


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

    return pa.schema([(name, arrow_type(FIELD_BY_NAME[name])) for name in names])


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


#: How one value of each scalar type is read into numpy (a column) and Python (``records[i]``).
_NUMPY = {"int64": np.int64, "int32": np.int64, "bool": bool, "float64": np.float64}


def read_column(f: RecordField, column, n: int, k: np.ndarray | None, path) -> Any:
    """Field ``f`` of a file as ``Records`` holds it: a 1-D array, a NaN right-padded (n, width)
    float64 matrix, or label lists. Per-option lists must have K values per row."""
    import pyarrow.compute as pc

    if not f.is_list:
        return column.to_numpy().astype(_NUMPY[f.item])
    if f.per_option and not f.nullable and not f.is_matrix:
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


def _read_matrix(f: RecordField, column, n: int, k: np.ndarray, path) -> np.ndarray:
    """A list-of-lists field (M lists per row, the same M in every row) as (n, M, width), NaN right-padded:
    K values per inner list for a ``per_option`` field, else each inner list's own length."""
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
    if f.per_option:
        lengths = np.repeat(k, m)
    else:
        lengths = np.asarray(pc.list_value_length(inner).fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    try:
        flat = _padded(inner, n * m, lengths, f.name)
    except RecordsError as exc:
        raise RecordsError(f"{path}: {exc} (member rows, {m} per question)") from None
    return flat.reshape(n, m, flat.shape[1])


def parse_meta(schema_metadata, path) -> dict:
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


def check_types(schema, path) -> None:
    """Each field in the file must have its documented Arrow type (any integer width for integer fields)."""
    for f in RECORD_SCHEMA:
        if f.name in schema.names and not _type_ok(f, schema.field(f.name).type):
            raise RecordsError(
                f"{path}: field {f.name!r} has type {schema.field(f.name).type}, not the records schema's; the file "
                "is of another format"
            )


class _LazyLabels(Sequence):
    """Label lists materialised per row, so loading millions of records makes no Python lists."""

    def __init__(self, column):
        self._column = column

    def __len__(self):
        return len(self._column)

    def __getitem__(self, i):
        return self._column[i].as_py()


def rows_to_table(rows: Sequence[Mapping], *, task: str, meta: Mapping):
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
