"""The lm-eval integration: what wires this package into lm_eval's run, below the backends that use it.

:mod:`.hooks` patches lm_eval (the import hook calls it), registers the models named here and holds
:func:`.hooks.check_harness` (which also checks the inventory of lm_eval names,
:mod:`lm_eval_evidential.lm_eval_compat`); :mod:`.evidence` is the ledger a backend files each
question's evidence into, :mod:`.evaluation` turns it into records after ``evaluate()``; :mod:`.policy`
is the one run-policy object the hooks read; :mod:`.run_checks` refuses harness arguments before the
weights load; :mod:`.run_output` writes a run's records beside its results (:mod:`.hub` pushes them);
:mod:`.command_line` reads the stock command line; and :mod:`.error_lines` gives the one-line errors of
a ``--model evidential`` run. Nothing here imports a backend (the model targets below are strings) or
lm_eval at module level: the hooks run while lm_eval is still importing.
"""

#: ``--model evidential``: the transformers backend (a lazy string target: torch loads only when it is used).
MODEL_NAME = "evidential"
MODEL_TARGET = "lm_eval_evidential.harness.model:EvidentialLM"
# --model evidential-vllm: the same scoring on vLLM (harness/vllm_model.py); vLLM is imported only when it is used.
VLLM_MODEL_NAME = "evidential-vllm"
VLLM_MODEL_TARGET = "lm_eval_evidential.harness.vllm_model:EvidentialVLLM"
#: The ``--model`` names of this package.
MODEL_NAMES = (MODEL_NAME, VLLM_MODEL_NAME)
