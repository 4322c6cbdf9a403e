"""``lm-eval-evidential eval …``: the stock lm_eval CLI with this package's hook installed.

The ``.pth`` hook already makes plain ``lm_eval`` work; this entry exists for environments
that skip ``.pth`` files (``python -S``, some launchers) and for ``accelerate launch -m
lm_eval_evidential eval …``.
"""

from __future__ import annotations


def add_parser(sub) -> None:
    p = sub.add_parser(
        "eval",
        help="run the stock lm_eval CLI (all its arguments), e.g. eval --model evidential --tasks obqa_edl",
        description=(
            "The stock lm_eval CLI with this package's plugin installed; every argument after `eval` is lm_eval's "
            "(see `lm-eval-evidential eval --help`). Plain `lm_eval` works the same once the package is installed."
        ),
    )
    p.set_defaults(func=lambda args: run_lm_eval([]))


def run_lm_eval(argv: list[str]) -> int:
    """Run the stock CLI. An expected failure (bad model_args, a dataset, task or path problem: a
    ValueError or OSError) is one ``error:`` line and exit status 1, a K or fingerprint refusal one
    ``refused:`` line and 2 (:mod:`lm_eval_evidential.cli.main`'s map), never a traceback
    (``LM_EVAL_EVIDENTIAL_TRACEBACK=1`` shows it, as for plain ``lm_eval``)."""
    import os
    import sys

    import lm_eval_evidential._import_hook as hook
    from lm_eval_evidential.cli.main import EXIT_ERROR, EXIT_OK, EXIT_REFUSED, error_text, refusal_errors

    hook.install()
    from lm_eval.__main__ import cli_evaluate

    sys.argv = ["lm_eval", *argv]
    try:
        _check_output_path(argv)
        cli_evaluate()
    except (OSError, ValueError) as exc:  # EvidentialInputError, DatasetError, RecordsError, PermissionError, …
        if os.environ.get("LM_EVAL_EVIDENTIAL_TRACEBACK"):
            raise
        refused = isinstance(exc, refusal_errors())
        print(f"lm-eval-evidential eval: {'refused' if refused else 'error'}: {error_text(exc)}", file=sys.stderr)
        return EXIT_REFUSED if refused else EXIT_ERROR
    return EXIT_OK


def _check_output_path(argv: list[str]) -> None:
    """An --output_path nobody can write to is refused before the model loads, not after the evaluation."""
    from lm_eval_evidential.records.io import check_writable_folder

    given = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("--output_path", "-o")), None)
    given = next((a.split("=", 1)[1] for a in argv if a.startswith("--output_path=")), given)
    if given:
        check_writable_folder(given)
