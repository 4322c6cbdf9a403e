"""``lm-eval-evidential orders``: which confidence scores order the examples the same way?

    lm-eval-evidential orders OUT --task obqa_edl [--scores max_prob,neg_entropy,l2_norm] [--json orders.json] [--run DATE_ID]

For each pair of scores: the share of example pairs they order oppositely, and whether they
are order-equivalent on the task (paper 003, Definition 1) — then every rank-based metric
(AUROC, AUPR, PRR, AURC, ATC) is identical for both, so they are one choice, not two. See
:func:`lm_eval_evidential.audits.quality.order_rows`.
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
        "orders",
        help="pairwise order agreement of confidence scores on saved records (discordant pairs, order equivalence)",
        description=(__doc__ or "").split("\n\n")[0].split(": ", 1)[-1],
    )
    add_output_path(p)
    p.add_argument("--task", required=True, metavar="T[,T…]", help="task name(s), comma-separated")
    add_scores(p)
    add_json(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from lm_eval_evidential.audits import quality

    try:
        scores = parse_scores(args.scores)
        if scores is not None and len(scores) < 2:
            raise ValueError(f"--scores needs at least two scores to compare, got {scores}")
        records = quality.load_records_by_task(args.output_path, quality.parse_names(args.task), run=args.run)
        rows = quality.order_rows(records, scores=scores)
        written = [write_json(args.json_path, rows)] if args.json_path else []
    except (OSError, ValueError) as exc:
        print(f"lm-eval-evidential orders: error: {exc}", file=sys.stderr)
        return 2
    print(format_table(rows, quality.ORDER_KEYS))
    for line in quality.reason_lines(rows, ("task", "score_a", "score_b")):
        print(f"note: {line}")
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0
