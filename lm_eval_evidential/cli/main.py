"""``lm-eval-evidential`` (also ``python -m lm_eval_evidential`` and ``accelerate launch -m lm_eval_evidential``).

Each subcommand lives in ``lm_eval_evidential/cli/<name>.py`` with ``add_parser(subparsers)``
and ``run(args) -> int``; they import their heavy dependencies only when run.

Exit status: one map for every subcommand (:data:`EXIT_CODES`). ``eval`` is the stock
``lm_eval`` CLI and keeps that CLI's own status, except that an expected failure (bad
model_args, a dataset or path problem) is one ``error:`` line and 1, a K refusal 2.

====  ======================================================================================
0     success: the table, files or report were produced
1     error: bad input or usage (an unknown option or score, a missing argument or task,
      missing, truncated or corrupted records, an unwritable output path). The message says
      what and how to fix it; no traceback (``-v`` adds one)
2     refused: a comparison the audit will not make. A class-count (K) mismatch
      (``CardinalityMismatchError`` under ``--k-policy assert``, or ``restrict`` leaving a side
      empty) or records of different producers (``FingerprintMismatchError``, unless
      ``--allow-fingerprint-mismatch``). Commands that compare several pairs (``ood``,
      ``report``) still write every accepted pair and exit 2 if any pair was refused
====  ======================================================================================

argparse's own status for a usage error is 2; here a usage error is an error (1), so that 2
always means a refusal a script can act on.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

COMMANDS = (
    "eval",
    "ood",
    "ksweep",
    "tables",
    "report",
    "calibration",
    "selective",
    "atc",
    "orders",
    "tasks",
    "train",
    "demo",
)

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_REFUSED = 2
#: The exit-code map of every subcommand (see the module docstring).
EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_ERROR: "error: bad input or usage",
    EXIT_REFUSED: "refused by a K (class count) or fingerprint (producer) check",
}
EPILOG = "exit status: " + "; ".join(f"{code} {meaning}" for code, meaning in EXIT_CODES.items())

logger = logging.getLogger(__name__)


class ArgumentParser(argparse.ArgumentParser):
    """argparse with a usage error exiting :data:`EXIT_ERROR` (argparse's default, 2, means refused here),
    and help texts that give each option's real default once (:class:`~lm_eval_evidential.cli._options.HelpFormatter`).
    """

    def __init__(self, *args, **kwargs):
        from lm_eval_evidential.cli._options import HelpFormatter

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


def refusal_errors() -> tuple[type[Exception], ...]:
    """The exceptions that mean "refused" (:data:`EXIT_REFUSED`) rather than "error"."""
    from lm_eval_evidential.metrics.cardinality import CardinalityMismatchError
    from lm_eval_evidential.records.provenance import FingerprintMismatchError

    return CardinalityMismatchError, FingerprintMismatchError


def error_text(exc: Exception) -> str:
    """The one line of an expected failure: an OSError of a path (e.g. a read-only output folder, the
    harness's own results writer) with the fix (:func:`~lm_eval_evidential.records.io.write_error`)."""
    if isinstance(exc, OSError) and exc.filename is not None:
        from lm_eval_evidential.records.io import write_error

        return str(write_error(exc, exc.filename))
    return str(exc)


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
    from lm_eval_evidential.cli._options import check_outputs

    try:
        check_outputs(args)  # an output that would destroy data is refused before any work
        return int(args.func(args) or EXIT_OK)
    except refusal_errors() as exc:
        logger.debug("refused", exc_info=True)
        print(f"lm-eval-evidential {args.command}: refused: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except (OSError, ValueError) as exc:  # RecordsError is a ValueError, FileNotFoundError an OSError
        logger.info("error", exc_info=True)
        print(f"lm-eval-evidential {args.command}: error: {error_text(exc)}", file=sys.stderr)
        return EXIT_ERROR
