"""``lm-eval-evidential`` (also ``python -m lm_eval_evidential`` and ``accelerate launch -m lm_eval_evidential``).

Each subcommand lives in ``lm_eval_evidential/cli/<name>.py`` with ``add_parser(subparsers)``
and ``run(args) -> int``; they import their heavy dependencies only when run.

Exit status: one map for every subcommand (:mod:`lm_eval_evidential.cli.exit_codes`). ``eval``
is the stock ``lm_eval`` CLI and keeps that CLI's own status, except that an expected failure
(an :class:`~lm_eval_evidential.errors.EvidentialError`: bad model_args, a dataset or path
problem) is one ``error:`` line and 1, a refusal 2. Any other exception is a bug and shows its
traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from lm_eval_evidential.cli.exit_codes import EPILOG, EXIT_CODES, EXIT_ERROR, EXIT_OK, EXIT_REFUSED, fail
from lm_eval_evidential.errors import EvidentialError

COMMANDS = (
    "eval",
    "ood",
    "ksweep",
    "tables",
    "report",
    "calibration",
    "selective",
    "conformal",
    "temperature",
    "atc",
    "orders",
    "permutations",
    "compare",
    "tasks",
    "train",
    "laplace",
    "demo",
)
__all__ = ["COMMANDS", "EXIT_CODES", "EXIT_ERROR", "EXIT_OK", "EXIT_REFUSED", "build_parser", "main"]

logger = logging.getLogger(__name__)


class ArgumentParser(argparse.ArgumentParser):
    """argparse with a usage error exiting :data:`EXIT_ERROR` (argparse's default, 2, means refused here),
    and help texts that give each option's real default once (:class:`~lm_eval_evidential.cli.arguments.HelpFormatter`).
    """

    def __init__(self, *args, **kwargs):
        from lm_eval_evidential.cli.arguments import HelpFormatter

        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.print_usage(sys.stderr)
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="lm-eval-evidential",
        description="Evidential uncertainty for lm-evaluation-harness: evaluate, then audit saved records.",
        epilog=EPILOG,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level (and show tracebacks)")
    # Subparsers inherit the parser class, so every subcommand maps usage errors the same way.
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"lm_eval_evidential.cli.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "eval":
        # Everything after `eval` is the stock lm_eval CLI's, untouched; expected failures exit by this map.
        from lm_eval_evidential.cli.eval import run_lm_eval

        return run_lm_eval(argv[1:])
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (EXIT_ERROR): a status, never an exception
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    from lm_eval_evidential.cli.refusals import check_outputs

    try:
        check_outputs(args)  # an output that would destroy data is refused before any work
        return int(args.func(args) or EXIT_OK)
    except EvidentialError as exc:  # expected: one line; anything else is a bug and keeps its traceback
        logger.info("%s", type(exc).__name__, exc_info=True)
        return fail(args.command, exc)
