"""The task classes' import path before they moved to :mod:`lm_eval_evidential.tasks` (issue 31's tasks package).

Users' YAML files name a task class by its dotted path (``class: !function
lm_eval_evidential.harness.evidential_task.EvidentialMCQATask``, as docs/tasks.md said until then); this module
keeps those files building. New YAMLs name ``lm_eval_evidential.tasks.evidential_task.EvidentialMCQATask`` and
``lm_eval_evidential.tasks.pairs.OODPairTask``.
"""

from lm_eval_evidential.tasks.evidential_task import EvidentialMCQATask
from lm_eval_evidential.tasks.pairs import OODPairTask

__all__ = ["EvidentialMCQATask", "OODPairTask"]
