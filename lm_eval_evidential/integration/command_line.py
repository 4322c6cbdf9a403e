"""The stock command line as the plugin reads it: which ``--model`` it names."""

from __future__ import annotations

from lm_eval_evidential.integration import MODEL_NAMES


def model_name(argv: list[str]) -> str | None:
    """The ``--model`` an lm_eval command line names (None when it names none)."""
    for i, arg in enumerate(argv):
        if arg == "--model" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--model="):
            return arg.split("=", 1)[1]
    return None


def names_our_model(argv: list[str]) -> bool:
    """Whether the command line ``argv`` names ``--model evidential`` or ``--model evidential-vllm``."""
    return model_name(argv) in MODEL_NAMES
