"""Finding records files and loading a run: the one loader every audit uses."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from lm_eval_evidential.records.io import RECORDS_FILE_RE, read_records_file
from lm_eval_evidential.records.schema import Records

logger = logging.getLogger(__name__)


def find_record_files(output_path: str | os.PathLike, task: str | None = None) -> dict[str, dict[str, Path]]:
    """``{date_id: {task: path}}`` for every records file under ``output_path`` (recursive)."""
    root = Path(output_path)
    if root.suffix == ".json":
        root = root.parent
    if not root.exists():
        raise FileNotFoundError(f"output path {root} does not exist; pass the folder given to --output_path")
    runs: dict[str, dict[str, Path]] = {}
    for p in root.rglob("records_*.parquet"):
        m = RECORDS_FILE_RE.match(p.name)
        if m and (task is None or m["task"] == task):
            runs.setdefault(m["date_id"], {})[m["task"]] = p
    return runs


def load_records(output_path: str | os.PathLike, task: str, *, run: str | None = None) -> Records:
    """Load the records of ``task`` from the folder passed as ``--output_path``.

    Takes the newest run there that has ``task`` unless ``run`` (a date_id such as
    ``2026-11-21T20-15-03.123456``) names one; logs which file it read. The result is a
    sequence of mappings with exactly the fields of ``RECORD_FIELDS`` plus columnar arrays.
    """
    runs = find_record_files(output_path, task)
    if not runs:
        raise FileNotFoundError(
            f"no records for task {task!r} under {output_path}; run "
            f"`lm_eval --model evidential --tasks {task} --output_path {output_path}` first"
        )
    if run is None:
        run = max(runs)
        if len(runs) > 1:
            logger.info("%s: %d runs found, using the newest (%s)", task, len(runs), run)
    elif run not in runs:
        raise FileNotFoundError(f"no run {run!r} for task {task!r} under {output_path}; runs: {sorted(runs)}")
    path = runs[run][task]
    logger.info("loading %s records from %s", task, path)
    return read_records_file(path)


def check_producers(records, *, allow: bool = False) -> None:
    """Refuse (FingerprintMismatchError, a ValueError) records from different producers unless allowed."""
    import sys

    from lm_eval_evidential.records.provenance import check_same_producer

    for line in check_same_producer(records, allow=allow):
        print(f"warning: fingerprint differs: {line}", file=sys.stderr)


def load_run(output_path: str, tasks, run: str | None = None) -> list:
    """Records of several tasks from ONE run: the newest run that has them all, or ``run``.

    Records of two runs are never mixed silently; says on stderr which run was read.
    """
    import sys

    
    requested = list(tasks)
    tasks = list(dict.fromkeys(requested))
    runs = find_record_files(output_path)
    for task in tasks:
        if not any(task in files for files in runs.values()):
            raise FileNotFoundError(
                f"no records for task {task!r} under {output_path}; run "
                f"`lm_eval --model evidential --tasks {task} --output_path {output_path}` first"
            )
    complete = sorted(d for d, files in runs.items() if all(t in files for t in tasks))
    if run is not None:
        if run not in runs:
            raise FileNotFoundError(f"no run {run!r} under {output_path}; runs: {sorted(runs)}")
        missing = [t for t in tasks if t not in runs[run]]
        if missing:
            raise FileNotFoundError(f"run {run} has no records for {missing}; it has {sorted(runs[run])}")
        chosen = run
    elif complete:
        chosen = complete[-1]
    else:
        have = {d: sorted(files) for d, files in sorted(runs.items())}
        raise FileNotFoundError(
            f"no single run under {output_path} has records for all of {tasks} (runs: {have}); evaluate them "
            f"together: lm_eval --model evidential --tasks {','.join(tasks)} --output_path {output_path}"
        )
    if len(runs) > 1:
        how = "as asked (--run)" if run else f"the newest of {len(runs)} runs that has all of them; pick another with --run"
        print(f"using run {chosen} for {', '.join(tasks)} ({how})", file=sys.stderr)
    loaded = {t: read_records_file(runs[chosen][t]) for t in tasks}
    return [loaded[t] for t in requested]
