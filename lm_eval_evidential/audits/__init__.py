"""Audit rows from :class:`~lm_eval_evidential.records.Records`: one module per audit, no torch, no lm_eval."""
