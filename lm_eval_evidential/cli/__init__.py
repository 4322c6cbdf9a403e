"""The ``lm-eval-evidential`` command line: one module per subcommand, :mod:`.main` on top."""

from lm_eval_evidential.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
