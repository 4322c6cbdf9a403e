"""``lm-eval-evidential atc``: label-free accuracy estimates (ATC, DoC) checked against the true accuracy.

    lm-eval-evidential atc OUT --id obqa_edl --target csqa4_edl[,arc_c_edl] [--scores max_prob,neg_entropy]
        [--json atc.json] [--run DATE_ID]

ATC learns a confidence threshold on the labelled ID task and estimates each target task's
accuracy as the share of its examples above it; DoC (``max_prob`` only) subtracts the drop in
mean confidence from the ID accuracy. The targets' own labels give ``true_acc`` and
``abs_error``. See :func:`lm_eval_evidential.audits.quality.atc_rows`.
"""

from __future__ import annotations

from lm_eval_evidential.audits.quality import ATCRow
from lm_eval_evidential.files import write_json

from .arguments import add_audit_parser, comma_list, task_name
from .loading import load
from .printing import print_rows
from .refusals import refuse_same_questions, refuse_self_comparison

COLUMNS = ATCRow.columns("id_task", "target_task", "score", "method", "estimate", "true_acc", "abs_error")


def add_parser(sub) -> None:
    p = add_audit_parser(
        sub,
        "atc",
        __doc__,
        run,
        scores=True,
        json=True,
        help="estimate target-task accuracy without labels (ATC, DoC) from an ID task, vs the true accuracy",
    )
    p.add_argument(
        "--id",
        dest="id_task",
        required=True,
        type=task_name,
        metavar="T",
        help="the labelled in-distribution task",
    )
    p.add_argument(
        "--target", required=True, type=comma_list("task"), metavar="T[,T…]", help="target task(s), comma-separated"
    )


def _k_note(id_records, targets) -> list[str]:
    import numpy as np

    id_k = sorted(set(np.unique(id_records.k).tolist()))
    notes = []
    for t in targets:
        t_k = sorted(set(np.unique(t.k).tolist()))
        if t_k != id_k:
            notes.append(
                f"{id_records.task} has K in {id_k}, {t.task} has K in {t_k}: every score's range moves with K "
                "(lm_eval_evidential/metrics/scores.py), so this estimate mixes the accuracy shift with the "
                "class-count shift"
            )
    return notes


def run(args) -> int:
    from lm_eval_evidential.audits import quality

    refuse_self_comparison(args.id_task, args.target, "--target")
    id_records, *targets = load(args, [args.id_task, *args.target])
    refuse_same_questions(id_records, targets, "--target")
    rows = quality.atc_rows(id_records, targets, scores=args.scores)
    written = [write_json(args.json_path, rows)] if args.json_path else []
    return print_rows(rows, COLUMNS, ("target_task", "score", "method"), written, _k_note(id_records, targets))
