"""The tasks: what ``--model evidential`` scores, and where their questions come from.

:mod:`.evidential_task` is the task class of every ``*_edl`` task (one doc schema, the answer
letters, the records' fingerprint), with OOD pairs and K-matched controls beside it;
:mod:`.lettered` gives every stock multiple-choice task a lettered view; :mod:`.permutations`
shows a task's options in several orders; :mod:`.datasets` reads the hub or the offline mirror
and converts each dataset to the doc schema. ``configs/`` is the YAML folder lm-eval indexes
(``--include_path``, the ``lm_eval.tasks`` entry point); the bundled sample mirror is
:data:`lm_eval_evidential.tasks.datasets.BUNDLED_SAMPLES`.
"""

from pathlib import Path

#: The folder of this package's task YAMLs (here, in the package's first module, so that the plugin's
#: hooks name it without importing anything else).
TASKS_DIR = Path(__file__).resolve().parent / "configs"


def tasks_dir() -> Path:
    """The folder of this package's task YAMLs (for ``--include_path`` and the ``lm_eval.tasks`` entry point)."""
    return TASKS_DIR
