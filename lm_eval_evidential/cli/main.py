"""``lm-eval-evidential`` (also ``python -m lm_eval_evidential`` and ``accelerate launch -m lm_eval_evidential``).

Each subcommand lives in ``lm_eval_evidential/cli/<name>.py`` with ``add_parser(subparsers)``
and ``run(args) -> int``; they import their heavy dependencies only when run.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

COMMANDS = ("eval", "ood", "ksweep", "report", "calibration", "selective", "atc", "orders", "train", "demo")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lm-eval-evidential",
        description="Evidential uncertainty for lm-evaluation-harness: evaluate, then audit saved records.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"lm_eval_evidential.cli.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "eval":
        # Everything after `eval` is the stock lm_eval CLI's, untouched.
        from lm_eval_evidential.cli.eval import run_lm_eval

        return run_lm_eval(argv[1:])
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    return int(args.func(args) or 0)
