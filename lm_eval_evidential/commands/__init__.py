"""One module per ``lm-eval-evidential`` subcommand: ``add_parser(subparsers)`` and ``run(args)``."""
