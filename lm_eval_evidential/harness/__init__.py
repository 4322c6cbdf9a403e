"""Harness layer: the `evidential` model, the EDL task class, the records hook."""

from pathlib import Path

#: The folder of this package's task YAMLs (here, in the package's first module, so that the plugin's
#: hooks name it without importing anything else).
TASKS_DIR = Path(__file__).resolve().parent / "tasks"


def tasks_dir() -> Path:
    """The folder of this package's task YAMLs (for ``--include_path`` and the ``lm_eval.tasks`` entry point)."""
    return TASKS_DIR
