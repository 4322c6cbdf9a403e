"""Files: the one atomic writer, JSON output, the records file-name pattern, records read/write.

Every file this package writes goes through :func:`atomic_write_bytes` (temp file in the same
folder, fsync, rename): a reader never sees a partial file, an interrupted write leaves the
old file intact.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from pathlib import Path

from lm_eval_evidential.records.schema import (
    Records,
    RecordsError,
    _ColumnsOnDemand,
    _parse_meta,
)

RECORDS_FILE_RE = re.compile(r"^records_(?P<task>.+)_(?P<date_id>\d{4}-\d{2}-\d{2}T[\d\-.]+)\.parquet$")


def atomic_write_bytes(path: Path, write) -> None:
    """Call ``write(tmp_path)`` then rename onto ``path``: readers never see a partial file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; results are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_records(path: str | os.PathLike, records: Records) -> Path:
    """Write ``records`` to ``path`` (Parquet, atomically). Returns the path."""
    import pyarrow.parquet as pq

    table = records.to_table()
    path = Path(path)
    atomic_write_bytes(path, lambda tmp: pq.write_table(table, tmp))
    return path


def read_records_file(path: str | os.PathLike) -> Records:
    """Read one records file, validating its schema version and shape."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    try:
        parquet = pq.ParquetFile(path, pre_buffer=False)
    except (pa.ArrowInvalid, OSError) as exc:
        raise RecordsError(f"{path}: cannot read records file ({exc}); it is truncated or corrupted — re-run the evaluation") from exc
    with parquet:
        table = _ColumnsOnDemand(parquet, path)
        meta = _parse_meta(table.schema.metadata, path)
        records = Records._from_table(table, task=str(meta.get("task", path.stem)), path=path)
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


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically. Returns the path."""
    path = Path(path)
    atomic_write_bytes(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return path


def _jsonable(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return _jsonable(value.item())
    return value


def write_json(path: str | os.PathLike, rows) -> Path:
    """Write ``rows`` as JSON atomically. NaN becomes null (JSON has no NaN); reasons stay."""
    return atomic_write_text(path, json.dumps(_jsonable(rows), indent=2, sort_keys=False) + "\n")
