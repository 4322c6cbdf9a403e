"""Records files: the one file-name pattern (``records_<task>_<date_id>.parquet``), the writer, and the
reader that checks a file's identity (its name against its metadata) before its columns.

Files are written through :func:`lm_eval_evidential.files.atomic_write_bytes` and read only when they
are regular files (:func:`lm_eval_evidential.files.open_regular_file`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from lm_eval_evidential.errors import RecordsError
from lm_eval_evidential.files import RECORDS_FILE_RE, atomic_write_bytes, open_regular_file
from lm_eval_evidential.records.arrow import parse_meta
from lm_eval_evidential.records.container import Records


class _ColumnsOnDemand:
    """What ``Records.from_table`` uses of a pyarrow Table, read one column at a time (row group
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


def write_records(path: str | os.PathLike, records: Records) -> Path:
    """Write ``records`` to ``path`` (Parquet, atomically). Returns the path."""
    import pyarrow.parquet as pq

    table = records.to_table()
    path = Path(path)
    atomic_write_bytes(path, lambda tmp: pq.write_table(table, tmp), replaces_records=True)
    return path


def check_records_identity(path: Path, meta: dict) -> None:
    """Every identity the file states agrees: the task and the run's date_id in its name
    (``records_<task>_<date_id>.parquet``) with those in its metadata, and a method is named.

    A file copied under another task's name or another run's date is refused naming both values
    (the task column is checked against the metadata's task by the schema).
    """
    method = meta.get("method")
    if method is None:
        raise RecordsError(
            f"{path}: the records metadata names no method (edl, ib_edl or softmax); it was not written by "
            "lm-eval-evidential or was edited — re-run the evaluation"
        )
    task = meta.get("task")
    if not isinstance(task, str) or not task:
        raise RecordsError(f"{path}: the records metadata names no task (got {task!r}); re-run the evaluation")
    named = RECORDS_FILE_RE.match(path.name)
    if named is None:
        return
    if named["task"] != file_safe_task(task):
        raise RecordsError(
            f"{path}: the file name says task {named['task']!r}, its metadata says {task!r}; the file was copied "
            "or renamed — read it under its own name "
            f"({records_path(path.parent, task, named['date_id']).name}) or re-run the evaluation"
        )
    date_id = meta.get("date_id")
    if date_id is not None and date_id != named["date_id"]:
        raise RecordsError(
            f"{path}: the file name says run {named['date_id']!r}, its metadata says run {date_id!r}; a file of "
            "another run was renamed into this one — records of two runs are never mixed; move it back "
            f"({records_path(path.parent, task, str(date_id)).name}) or re-run the evaluation"
        )


def read_records_file(path: str | os.PathLike) -> Records:
    """Read one records file, validating its schema version, shape and identity.

    Only a regular file is read (:func:`open_regular_file`: a FIFO or folder is refused, an
    unreadable path names its errno and fix); its name, metadata and columns must agree
    (:func:`check_records_identity`).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    open_regular_file(path, what="records file").close()
    try:
        parquet = pq.ParquetFile(path, pre_buffer=False)
    except (pa.ArrowInvalid, OSError) as exc:
        raise RecordsError(
            f"{path}: cannot read records file ({exc}); it is truncated or corrupted — re-run the evaluation"
        ) from exc
    with parquet:
        table = _ColumnsOnDemand(parquet, path)
        meta = parse_meta(table.schema.metadata, path)
        check_records_identity(path, meta)
        records = Records.from_table(table, task=meta["task"], path=path)
    # Arrow's allocator keeps freed decode buffers; return them now that only numpy arrays remain.
    pa.default_memory_pool().release_unused()
    return records


_UNSAFE_IN_FILE_NAMES = re.compile(r"[^A-Za-z0-9._+=@-]")


def file_safe_task(task: str) -> str:
    """``task`` as it appears in a file name: unchanged when it is already safe, else a safe form.

    Separators, NUL, leading dots and other characters outside ``[A-Za-z0-9._+=@-]`` become
    ``_`` and a hash of the real name is appended (two names never share a file); very long
    names are cut. The real task name is kept inside the file (its metadata and ``task`` column).
    """
    import hashlib

    safe = _UNSAFE_IN_FILE_NAMES.sub("_", task).lstrip(".")
    if safe == task and 0 < len(safe.encode()) <= 150:
        return task
    return f"{safe[:100] or 'task'}-{hashlib.sha256(task.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def records_path(folder: str | os.PathLike, task: str, date_id: str) -> Path:
    """The one records file-name pattern: ``records_<task>_<date_id>.parquet`` inside ``folder``."""
    return Path(folder) / f"records_{file_safe_task(task)}_{date_id}.parquet"
