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
    import sys

    import lm_eval_evidential._import_hook as hook

    hook.install()
    from lm_eval.__main__ import cli_evaluate

    sys.argv = ["lm_eval", *argv]
    cli_evaluate()
    return 0
