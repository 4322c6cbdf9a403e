"""``lm-eval-evidential orders``: which confidence scores order the examples the same way?

    lm-eval-evidential orders OUT --task obqa_edl [--scores max_prob,neg_entropy,l2_norm]
        [--json orders.json] [--run DATE_ID]

For each pair of scores: the share of example pairs they order oppositely, and whether they
are order-equivalent on the task (Maaz et al. 2023, Definition 1) — then every rank-based metric
(AUROC, AUPR, PRR, AURC, ATC) is identical for both, so they are one choice, not two. See
:func:`lm_eval_evidential.audits.quality.order_rows`.
"""

from __future__ import annotations

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.files import write_json

from .arguments import add_audit_parser
from .loading import load
from .printing import print_rows


def add_parser(sub) -> None:
    add_audit_parser(
        sub,
        "orders",
        __doc__,
        run,
        tasks=True,
        scores=True,
        json=True,
        help="pairwise order agreement of confidence scores on saved records (discordant pairs, order equivalence)",
    )


def run(args) -> int:
    from lm_eval_evidential.audits import quality

    if args.scores is not None and len(args.scores) < 2:
        raise InvalidValueError(f"--scores needs at least two scores to compare, got {args.scores}")
    records = dict(zip(args.tasks, load(args, args.tasks)))
    rows = quality.order_rows(records, scores=args.scores)
    written = [write_json(args.json_path, rows)] if args.json_path else []
    return print_rows(rows, quality.OrderRow.columns(*quality.ORDER_KEYS), ("task", "score_a", "score_b"), written)
