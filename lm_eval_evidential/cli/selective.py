"""``lm-eval-evidential selective``: does a confidence score rank right answers above wrong ones?

    lm-eval-evidential selective OUT --task obqa_edl [--scores max_prob,reciprocal_vacuity] [--plot risk_coverage.png] [--json selective.json] [--run DATE_ID]

One row per task and score: PRR at rejection caps 0.5 and 0.75 (higher is better, 1 = oracle,
0 = random), AURC (lower is better) and Spearman correlation of score and correctness. See
:func:`lm_eval_evidential.audits.quality.selective_rows`. Score names: ``core/scores.py``.
"""

from __future__ import annotations

import sys

from lm_eval_evidential.records.io import write_json

from ._options import (
    add_json,
    add_output_path,
    add_scores,
    format_table,
    parse_scores,
)


def add_parser(sub) -> None:

    p = sub.add_parser(
        "selective",
        help="selective prediction of saved records: PRR@0.5/0.75, AURC, Spearman per score (+ risk-coverage plot)",
        description=(__doc__ or "").split("\n\n")[0].split(": ", 1)[-1],
    )
    add_output_path(p)
    p.add_argument("--task", required=True, metavar="T[,T…]", help="task name(s), comma-separated")
    add_scores(p)
    p.add_argument("--plot", metavar="FILE", default=None,
                   help="also write risk-coverage curves to FILE.png and FILE.svg (FILE-<task>.* for several tasks)")
    add_json(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from lm_eval_evidential import plots
    from lm_eval_evidential.audits import quality

    try:
        scores = parse_scores(args.scores)
        records = quality.load_records_by_task(args.output_path, quality.parse_names(args.task), run=args.run)
        rows = quality.selective_rows(records, scores=scores)
        written = []
        if args.plot:
            base = plots.figure_base(args.plot)
            for task, r in records.items():
                path = base if len(records) == 1 else base.with_name(f"{base.name}-{task}")
                written += plots.save_risk_coverage_figure(r, path, scores=scores)
        if args.json_path:
            written.append(write_json(args.json_path, rows))
    except (OSError, ValueError) as exc:
        print(f"lm-eval-evidential selective: error: {exc}", file=sys.stderr)
        return 2
    print(format_table(rows, quality.SELECTIVE_KEYS))
    for line in quality.reason_lines(rows, ("task", "score")):
        print(f"note: {line}")
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0
