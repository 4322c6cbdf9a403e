"""The plugin's hooks into lm_eval: register the model, add the task folder, write records.

Each function is idempotent and safe to call on a module that is already patched.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

MODEL_NAME = "evidential"
TASKS_DIR = Path(__file__).resolve().parent / "tasks"
MODEL_TARGET = "lm_eval_evidential.harness.model:EvidentialLM"

logger = logging.getLogger(__name__)


def on_models_imported(module) -> None:
    """Register ``--model evidential`` lazily (a string target: torch loads only when used).

    Done after lm_eval.models registered its own models, so the harness's lazy
    "import lm_eval.models when the registry is empty" still happens.
    """
    from lm_eval.api.registry import model_registry

    if MODEL_NAME not in model_registry:
        model_registry.register(MODEL_NAME, target=MODEL_TARGET)


def on_task_manager_imported(module) -> None:
    """Every TaskManager also indexes this package's task folder (after lm_eval's own)."""
    cls = module.TaskManager
    if getattr(cls.__init__, "_evidential_patched", False):
        return
    original = cls.__init__

    @functools.wraps(original)
    def __init__(self, *args, include_path=None, **kwargs):
        ours = str(TASKS_DIR)
        paths = [] if include_path is None else list(include_path) if isinstance(include_path, (list, tuple)) else [include_path]
        if ours not in {str(p) for p in paths}:
            paths = [ours, *paths]  # user paths last: they may override ours
        original(self, *args, include_path=paths, **kwargs)

    __init__._evidential_patched = True
    cls.__init__ = __init__


def on_evaluation_tracker_imported(module) -> None:
    """After the harness saves results_<date_id>.json, write each task's records beside it."""
    cls = module.EvaluationTracker
    if getattr(cls.save_results_aggregated, "_evidential_patched", False):
        return
    original = cls.save_results_aggregated

    @functools.wraps(original)
    def save_results_aggregated(self, results=None, samples=None, *args, **kwargs):
        out = original(self, results, samples, *args, **kwargs)
        write_run_records(self, results)
        return out

    save_results_aggregated._evidential_patched = True
    cls.save_results_aggregated = save_results_aggregated


def tasks_dir() -> Path:
    """The folder of this package's task YAMLs (also the ``lm_eval.tasks`` entry point)."""
    return TASKS_DIR


def results_folder(tracker) -> Path | None:
    """The folder the harness wrote results_<date_id>.json to (None without --output_path)."""
    if not tracker.output_path:
        return None
    path = Path(tracker.output_path)
    if path.suffix == ".json":
        return path.parent
    return path / str(tracker.general_config_tracker.model_name_sanitized)


def write_run_records(tracker, results) -> list[Path]:
    """Write the records collected in this run for the tasks in ``results``; returns the paths."""
    from dataclasses import replace

    from lm_eval_evidential import __version__
    from lm_eval_evidential.harness.evidential_task import pop_collected
    from lm_eval_evidential.records import records_path, write_records

    task_names = list((results or {}).get("results", {}))
    collected = pop_collected(task_names)
    folder = results_folder(tracker)
    date_id = getattr(tracker, "date_id", None)
    if folder is None or date_id is None or not collected:
        return []
    written = []
    for task, records in collected.items():
        meta = {**records.meta, "date_id": date_id, "package_version": __version__}
        path = write_records(records_path(folder, task, date_id), replace(records, meta=meta))
        logger.info("wrote %d %s records to %s", len(records), task, path)
        written.append(path)
    return written
