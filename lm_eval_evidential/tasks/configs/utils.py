"""Functions the task YAMLs name with ``!function``; the code lives in the package."""

from lm_eval_evidential.tasks.controls import KMatchedControlTask  # noqa: F401
from lm_eval_evidential.tasks.datasets import (  # noqa: F401
    process_arc,
    process_csqa,
    process_csqa4,
    process_mmlu,
    process_obqa,
)
from lm_eval_evidential.tasks.evidential_task import EvidentialMCQATask  # noqa: F401
from lm_eval_evidential.tasks.pairs import OODPairTask  # noqa: F401
