"""Finding records files and loading a run: the one loader every audit uses.

:func:`load_run` reads the records of several tasks from ONE run under an ``--output_path``
folder and refuses records of different producers; :func:`load_records` is the same loader
for one task. Every audit command and :func:`lm_eval_evidential.report.build_report`'s CLI go
through it, so no table ever mixes two runs or two models silently.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lm_eval_evidential.errors import InputNotFoundError, InvalidValueError, NotAFolderError, RecordsError
from lm_eval_evidential.files import RECORDS_FILE_RE
from lm_eval_evidential.records.container import Records
from lm_eval_evidential.records.parquet import file_safe_task, read_records_file
from lm_eval_evidential.records.provenance import checked_together

logger = logging.getLogger(__name__)

__all__ = ["Run", "check_one_kind_of_run", "find_record_files", "load_run", "load_records"]


def find_record_files(output_path: str | os.PathLike, task: str | None = None) -> dict[str, dict[str, Path]]:
    """``{date_id: {task: path}}`` for every records file under ``output_path`` (recursive)."""
    root = Path(output_path)
    if root.suffix == ".json":
        root = root.parent
    if not root.exists():
        raise InputNotFoundError(f"output path {root} does not exist; pass the folder given to --output_path")
    if not root.is_dir():
        what = "a records file" if RECORDS_FILE_RE.match(root.name) else "a file"
        raise NotAFolderError(
            f"{root} is {what}, not a folder: pass the folder given to lm_eval --output_path (the one that holds "
            f"the run's results_*.json and records_*.parquet; this file's folder, {root.parent}, works)"
        )
    runs: dict[str, dict[str, Path]] = {}
    for p in sorted(root.rglob("records_*.parquet")):
        m = RECORDS_FILE_RE.match(p.name)
        if m and (task is None or m["task"] == file_safe_task(task)):
            name = m["task"] if task is None else task
            other = runs.setdefault(m["date_id"], {}).setdefault(name, p)
            if other != p:  # one run writes one file per task: two are copies, or two runs' files under one name
                raise InvalidValueError(
                    f"two records files of task {name!r} for run {m['date_id']} under {root}: {other} and {p}; pass "
                    "the folder of the one to read as the output path (or move the other away)"
                )
    for date_id, files in runs.items():
        folders = sorted({str(p.parent) for p in files.values()})
        if len(folders) > 1:  # one run writes its records into one folder
            raise InvalidValueError(
                f"the records of run {date_id} under {root} lie in {len(folders)} folders ({', '.join(folders)}): "
                "files of different runs or models with one date_id; pass the folder of the run to read"
            )
    return runs


@dataclass(frozen=True)
class Run:
    """The records of several tasks read from ONE run of ONE producer (made by :func:`load_run`).

    ``records`` maps each requested task (in the order asked, duplicates dropped) to its
    :class:`Records`; ``date_id`` is the run that was read; ``runs`` every run found under
    ``output_path``; ``asked`` whether ``date_id`` was requested; ``fingerprint_warnings`` the
    producer differences that ``allow_fingerprint_mismatch`` let through; ``complete`` the runs
    that have records of every requested task.
    """

    output_path: Path
    date_id: str
    records: dict[str, Records]
    runs: tuple[str, ...]
    asked: bool
    fingerprint_warnings: tuple[str, ...] = ()
    complete: tuple[str, ...] = ()

    def __getitem__(self, task: str) -> Records:
        return self.records[task]

    def describe(self) -> str:
        """One line saying which run was read and why (the CLI prints it on stderr)."""
        if self.asked:
            why = "as asked with --run"
        elif len(self.runs) == 1:
            why = "the only run there"
        elif len(self.complete) == 1:
            why = f"the only one of the {len(self.runs)} runs here with records for all of them"
        else:
            why = (
                f"the newest of the {len(self.complete)} runs here with records for all of them; "
                "pick another with --run"
            )
        return f"using run {self.date_id} for {', '.join(self.records)} ({why})"


def _missing_task(output_path, runs: dict[str, dict[str, Path]], task: str, tasks: list[str]) -> FileNotFoundError:
    """The error for a task without records: a typo gets the nearest recorded names; a task not evaluated
    yet gets the tasks that do have records and the one ``lm_eval`` command that puts them all in one run."""
    import difflib

    misnamed = _misnamed(output_path, task)
    if misnamed is not None:
        return misnamed
    recorded = sorted({t for files in runs.values() for t in files})
    if not recorded and _is_report_folder(output_path):
        return InputNotFoundError(
            f"{output_path} is a report folder (written by lm-eval-evidential report), not an lm_eval output folder: "
            "pass the folder given to lm_eval --output_path, whose records the report was made from"
        )
    if not recorded:
        return InputNotFoundError(
            f"no records files (records_<task>_<date_id>.parquet) under {output_path}: pass the folder given to "
            f"lm_eval --output_path, or evaluate first: lm_eval --model evidential --tasks {','.join(tasks)} "
            f"--output_path {output_path}"
        )
    have = f"the tasks with records there: {', '.join(recorded)}"
    # obqa -> obqa_edl: a shortened name is a prefix of the recorded one, too short for a close match
    close = [t for t in recorded if t.startswith(task) and len(task) >= 3][:3]
    close = close or difflib.get_close_matches(task, recorded, n=3, cutoff=0.7)
    if close:
        return InputNotFoundError(
            f"no records for task {task!r} under {output_path}: did you mean {' or '.join(map(repr, close))}? ({have})"
        )
    return InputNotFoundError(
        f"no records for task {task!r} under {output_path} ({have}); if {task!r} is a task (`lm-eval-evidential "
        f"tasks '{task}*'` lists the tasks by name), evaluate it in one run with the others: lm_eval --model "
        f"evidential --tasks {','.join(tasks)} --output_path {output_path}"
    )


def _misnamed(output_path, task: str) -> InputNotFoundError | None:
    """The error for a records file of ``task`` under a name the loader does not read (renamed: no run in its
    name, ``.PARQUET``), naming the file and its own name; None where there is none."""
    import json

    import pyarrow.parquet as pq

    from lm_eval_evidential.records.parquet import records_path
    from lm_eval_evidential.records.schema import META_KEY

    safe = file_safe_task(task)
    for path in sorted(Path(output_path).rglob("*")):
        name = path.name
        if not (name.lower().startswith("records_") and name.lower().endswith(".parquet")):
            continue
        if RECORDS_FILE_RE.match(name) or safe not in name or not path.is_file():
            continue
        try:
            meta = json.loads((pq.read_schema(path).metadata or {}).get(META_KEY, b"{}"))
        except Exception:  # noqa: BLE001 - a file that cannot be read is named all the same
            meta = {}
        date_id = meta.get("date_id") if isinstance(meta, dict) else None
        own = records_path(path.parent, str(meta.get("task") or task), date_id).name if date_id else None
        rename = (
            f"rename it to {own} (its own name, from its metadata)"
            if own
            else ("rename it to records_<task>_<date_id>.parquet with its run's date_id")
        )
        return InputNotFoundError(
            f"no records for task {task!r} under {output_path}, but {path} looks like its records under a name the "
            f"loader does not read (records_<task>_<date_id>.parquet, lower-case .parquet): {rename}"
        )
    return None


def _is_report_folder(folder) -> bool:
    """Whether ``folder`` holds what ``lm-eval-evidential report`` writes (report.md and report.json)."""
    try:
        return (Path(folder) / "report.json").is_file() and (Path(folder) / "report.md").is_file()
    except OSError:
        return False


def _choose_run(output_path, runs: dict[str, dict[str, Path]], tasks: list[str], run: str | None) -> str:
    for task in tasks:
        if not any(task in files for files in runs.values()):
            raise _missing_task(output_path, runs, task, tasks)
    if run is not None:
        if run not in runs:
            raise InputNotFoundError(f"no run {run!r} under {output_path}; runs: {sorted(runs)}")
        missing = [t for t in tasks if t not in runs[run]]
        if missing:
            raise InputNotFoundError(f"run {run} has no records for {missing}; it has {sorted(runs[run])}")
        return run
    complete = sorted(d for d, files in runs.items() if all(t in files for t in tasks))
    if not complete:
        have = {d: sorted(files) for d, files in sorted(runs.items())}
        raise InputNotFoundError(
            f"no single run under {output_path} has records for all of {tasks} (runs: {have}); evaluate them "
            f"together: lm_eval --model evidential --tasks {','.join(tasks)} --output_path {output_path}"
        )
    return complete[-1]


def load_run(
    output_path: str | os.PathLike,
    tasks: str | Sequence[str],
    *,
    run: str | None = None,
    allow_fingerprint_mismatch: bool = False,
) -> Run:
    """Records of ``tasks`` from ONE run under ``output_path``, checked to come from one producer.

    The run is ``run`` (a date_id such as ``2026-11-21T20-15-03.123456``) or else the newest
    run that has every task; records of two runs are never mixed. The records must then share
    a producer fingerprint (:func:`~lm_eval_evidential.records.provenance.check_same_producer`:
    base model and revision, adapter hash, method and its parameters, dtype, prompt template,
    answer-token ids, package version), otherwise
    :class:`~lm_eval_evidential.records.provenance.FingerprintMismatchError` (a ValueError)
    is raised, unless ``allow_fingerprint_mismatch``, which lists the differences in
    ``Run.fingerprint_warnings`` instead. This is the one check: the records come back marked
    as checked together (:func:`~lm_eval_evidential.records.provenance.checked_together`), so
    the audits given them do not check again. Raises FileNotFoundError naming the ``lm_eval``
    command to run when a task has no records or no single run has them all.

    >>> run = load_run("out", ["obqa_edl", "arc_c_edl"])        # doctest: +SKIP
    >>> run.date_id, run["obqa_edl"].vacuity.mean()               # doctest: +SKIP
    """
    names = [tasks] if isinstance(tasks, str) else list(tasks)
    names = list(dict.fromkeys(t.strip() for t in names if t and t.strip()))
    if not names:
        raise InvalidValueError(f"no task names in {tasks!r}; give one or more")
    runs = find_record_files(output_path)
    chosen = _choose_run(output_path, runs, names, run)
    records = {}
    for task in names:
        logger.info("loading %s records from %s", task, runs[chosen][task])
        records[task] = read_records_file(runs[chosen][task])
    checked, warnings = checked_together(list(records.values()), allow=allow_fingerprint_mismatch)
    records = dict(zip(records, checked))  # marked: the audits given them do not check again
    complete = tuple(sorted(d for d, files in runs.items() if all(t in files for t in names)))
    return Run(Path(output_path), chosen, records, tuple(sorted(runs)), run is not None, tuple(warnings), complete)


def load_records(output_path: str | os.PathLike, task: str, *, run: str | None = None) -> Records:
    """Load the records of ``task`` from the folder passed as ``--output_path``.

    :func:`load_run` for one task: the newest run there that has ``task`` unless ``run`` (a
    date_id such as ``2026-11-21T20-15-03.123456``) names one; logs which file it read. The
    result is a sequence of mappings with exactly the fields of ``RECORD_FIELDS`` and
    ``OPTIONAL_FIELDS`` (None where the file has none) plus columnar arrays.
    """
    return load_run(output_path, [task], run=run)[task]


def check_one_kind_of_run(output_path, tasks: Sequence[str], run: str | None = None) -> None:
    """Refuse a folder whose runs of one task mix permuted and unpermuted records, unless ``run`` picks one.

    The loader reads the newest run that has every task; here the newest could silently be the
    unpermuted one (or the other way round), so the user is asked to name the run.
    """
    import json

    import pyarrow.parquet as pq

    from lm_eval_evidential.records.schema import META_KEY

    if run is not None:
        return
    runs = find_record_files(output_path)
    for task in tasks:
        kinds: dict[str, list[str]] = {}
        for date_id, files in sorted(runs.items()):
            if task not in files:
                continue
            try:
                meta = json.loads((pq.read_schema(files[task]).metadata or {}).get(META_KEY, b"{}"))
            except (OSError, ValueError):
                continue  # the loader says what is wrong with the file
            setting = meta.get("permutations") if isinstance(meta, dict) else None
            kind = setting.get("spec") if isinstance(setting, dict) else "unpermuted"
            kinds.setdefault(str(kind), []).append(date_id)
        if len(kinds) > 1:
            listing = "; ".join(f"{kind}: {', '.join(ids)}" for kind, ids in kinds.items())
            raise RecordsError(
                f"{output_path} holds runs of {task!r} evaluated in different answer orders ({listing}); pick the "
                "permuted run with --run DATE_ID"
            )
