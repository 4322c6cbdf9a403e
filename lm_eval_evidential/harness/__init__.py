"""Harness layer: the `evidential` backends (transformers, vLLM), their shared scoring, and the records hook.

The tasks they score live in :mod:`lm_eval_evidential.tasks`.
"""
