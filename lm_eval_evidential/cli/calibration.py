"""``lm-eval-evidential calibration``: ECE, adaptive ECE, NLL, Brier and accuracy per task.

    lm-eval-evidential calibration OUT --task obqa_edl[,csqa4_edl] [--bins 15] [--plot reliability.png]
        [--json calibration.json] [--run DATE_ID]

Reads the records that ``lm_eval --model evidential … --output_path OUT`` saved. Metrics:
:func:`lm_eval_evidential.audits.quality.calibration_rows`; lower is better for all but ``acc``.
"""

from __future__ import annotations

from lm_eval_evidential.files import write_json

from .arguments import add_audit_parser, add_param
from .loading import load
from .printing import print_rows


def add_parser(sub) -> None:
    p = add_audit_parser(
        sub,
        "calibration",
        __doc__,
        run,
        tasks=True,
        json=True,
        help="calibration of saved records: ECE, adaptive ECE, NLL, Brier, accuracy (+ reliability diagrams)",
    )
    from lm_eval_evidential.metrics.calibration import N_BINS

    add_param(p, "--bins", N_BINS, name="n_bins", default=15, help="number of confidence bins")
    p.add_argument(
        "--plot", metavar="FILE", default=None, help="also write reliability diagrams to FILE.png and FILE.svg"
    )


def run(args) -> int:
    from lm_eval_evidential import plots
    from lm_eval_evidential.audits import quality

    records = dict(zip(args.tasks, load(args, args.tasks)))
    rows = quality.calibration_rows(records, n_bins=args.bins)
    written = plots.save_reliability_figure(records, args.plot, n_bins=args.bins) if args.plot else []
    if args.json_path:
        written.append(write_json(args.json_path, rows))
    return print_rows(rows, quality.CalibrationRow.columns(*quality.CALIBRATION_KEYS), ("task",), written)
