"""A run's output: its records written beside the harness's ``results_<date_id>.json`` (one date_id for
the run, stale temp files of an interrupted write removed), and what a run without ``--output_path``
says (refused, warned about or allowed: :attr:`~lm_eval_evidential.integration.policy.RunPolicy.no_output_path`)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from lm_eval_evidential.integration.policy import RUN_POLICY

logger = logging.getLogger(__name__)


# A temp file left by an interrupted records write is removed by the next run once it is this old.
STALE_TEMP_SECONDS = 600


#: ``lm-eval-evidential eval``'s one flag of its own: a run that keeps nothing, asked for.
NO_OUTPUT_PATH_FLAG = "--no_output_path"


def _task_names(tasks) -> str:
    names = [t.get("task", "?") if isinstance(t, dict) else str(getattr(t, "task_name", t)) for t in tasks or []]
    return ", ".join(names) or "the tasks"


def no_output_path(tasks) -> None:
    """A ``--model evidential`` run without ``--output_path``, before any weights load: refused, warned about
    or allowed (the run policy's ``no_output_path``); :func:`records_not_kept` says it again at the end."""
    what = (
        f"no --output_path: the evidential records of {_task_names(tasks)} (records_<task>_<date_id>.parquet, "
        "the files every audit reads: ood, ksweep, report, calibration …) will not be written"
    )
    if RUN_POLICY.no_output_path == "refuse":
        from lm_eval_evidential.errors import OutputPathError

        raise OutputPathError(
            f"{what}; add --output_path DIR to keep them, or {NO_OUTPUT_PATH_FLAG} to run without keeping anything"
        )
    if RUN_POLICY.no_output_path == "warn":
        logging.getLogger("lm_eval.evidential").warning("%s; add --output_path DIR to keep them", what)


def records_not_kept(tasks) -> str:
    """The run's last line when it kept nothing (:func:`no_output_path` said it at the start too)."""
    return (
        f"WARNING: the evidential records of {_task_names(tasks)} were NOT written (no --output_path): only the "
        "table above is left, and no audit can read it. Re-run with --output_path DIR to keep them."
    )


def results_folder(tracker) -> Path | None:
    """The folder the harness writes results_<date_id>.json to (None without --output_path)."""
    if not tracker.output_path:
        return None
    path = Path(tracker.output_path)
    if path.suffix == ".json":
        return path.parent
    return path / str(tracker.general_config_tracker.model_name_sanitized)


def remove_stale_temp_files(folder: Path, *, older_than: float = STALE_TEMP_SECONDS) -> list[Path]:
    """Remove the hidden temp files (``.records_*.tmp``) an interrupted records write left in ``folder``.

    Only files untouched for ``older_than`` seconds: a younger one may belong to a run still writing.
    """
    removed = []
    now = time.time()
    for path in folder.glob(".records_*.tmp") if folder.is_dir() else []:
        try:
            if now - path.stat().st_mtime >= older_than:
                path.unlink()
                removed.append(path)
        except FileNotFoundError:
            continue
    if removed:
        logger.info("removed %d stale temporary records file(s) in %s", len(removed), folder)
    return removed


def write_run_records(folder: Path, records: dict) -> dict:
    """Write each task's records into ``folder`` (atomically, one date_id for the run); ``{task: path}``."""
    from dataclasses import replace
    from datetime import datetime

    from lm_eval_evidential import __version__
    from lm_eval_evidential.files import write_error
    from lm_eval_evidential.records import records_path, write_records

    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(exc, folder) from exc
    remove_stale_temp_files(folder)
    date_id = datetime.now().isoformat().replace(":", "-")  # the harness's own date_id format
    written = {}
    for task, task_records in records.items():
        meta = {**task_records.meta, "date_id": date_id, "package_version": __version__}
        path = write_records(records_path(folder, task, date_id), replace(task_records, meta=meta))
        logger.info("wrote %d %s records to %s", len(task_records), task, path)
        written[task] = path
    return written
