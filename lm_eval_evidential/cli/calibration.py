"""``lm-eval-evidential calibration``: ECE, adaptive ECE, NLL, Brier and accuracy per task.

    lm-eval-evidential calibration OUT --task obqa_edl[,csqa4_edl] [--bins 15] [--plot reliability.png] [--json calibration.json] [--run DATE_ID]

Reads the records that ``lm_eval --model evidential … --output_path OUT`` saved. Metrics:
:func:`lm_eval_evidential.audits.quality.calibration_rows`; lower is better for all but ``acc``.
"""

from __future__ import annotations

import sys

from lm_eval_evidential.records.io import write_json

from ._options import add_json, add_output_path, format_table


def _positive_int(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def add_parser(sub) -> None:
    p = sub.add_parser(
        "calibration",
        help="calibration of saved records: ECE, adaptive ECE, NLL, Brier, accuracy (+ reliability diagrams)",
        description=(__doc__ or "").split("\n\n")[0].split(": ", 1)[-1],
    )
    add_output_path(p)
    p.add_argument("--task", required=True, metavar="T[,T…]", help="task name(s), comma-separated")
    p.add_argument("--bins", type=_positive_int, default=15, help="number of confidence bins (default: 15)")
    p.add_argument("--plot", metavar="FILE", default=None, help="also write reliability diagrams to FILE.png and FILE.svg")
    add_json(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from lm_eval_evidential import plots
    from lm_eval_evidential.audits import quality

    try:
        records = quality.load_records_by_task(args.output_path, quality.parse_names(args.task), run=args.run)
        rows = quality.calibration_rows(records, n_bins=args.bins)
        written = plots.save_reliability_figure(records, args.plot, n_bins=args.bins) if args.plot else []
        if args.json_path:
            written.append(write_json(args.json_path, rows))
    except (OSError, ValueError) as exc:
        print(f"lm-eval-evidential calibration: error: {exc}", file=sys.stderr)
        return 2
    print(format_table(rows, quality.CALIBRATION_KEYS))
    for line in quality.reason_lines(rows, ("task",)):
        print(f"note: {line}")
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0
