"""``lm-eval-evidential temperature``: post-hoc temperature scaling fitted on ID validation records.

    lm-eval-evidential temperature OUT --id obqa_edl [--ood csqa4_edl,mmlu_math_edl]
        [--calibration-task T | --calibration-fraction 0.5 --seed S] [--json FILE]

T is fitted by NLL (Guo et al. 2017) on a seeded share of the ID records (default half) or on a
separate task, printed, and applied to the answer logits of the ID test part and each OOD task:
ECE, NLL, Brier and accuracy, and the OOD detection of max-prob (AUROC, AUPR-In, FPR@95), with
the records' own probabilities, the softmax at T = 1 and at the fitted T, in one table. See
:mod:`lm_eval_evidential.audits.temperature`.
"""

from __future__ import annotations

from lm_eval_evidential.files import write_json

from .arguments import add_audit_parser
from .loading import load
from .printing import print_rows
from .refusals import print_refusals, refuse_same_questions, refuse_self_comparison

#: The printed columns (every key of a row is in --json).
TABLE_KEYS = tuple("set role probs temperature k n acc ece nll brier auroc aupr_in fpr95".split())


def add_parser(sub) -> None:
    from .conformal import add_calibration_options

    p = add_audit_parser(
        sub,
        "temperature",
        __doc__,
        run,
        id_help="in-distribution task: T is fitted on (a part of) it",
        k_policy=True,
        json=True,
        help="post-hoc temperature scaling (Guo et al. 2017) fitted on ID records: calibration and OOD before/after",
    )
    add_calibration_options(p, what="fit T on")


def run(args) -> int:
    from lm_eval_evidential.audits.temperature import K_MISMATCH_REASON, TemperatureRow, fit, temperature_rows
    from lm_eval_evidential.cli.exit_codes import EXIT_OK, EXIT_REFUSED

    from .conformal import calibration_split

    refuse_self_comparison(args.id_task, args.ood_tasks)
    cal, test, rest, description = calibration_split(args, load, refuse_same_questions)
    fitted = fit(cal, description)
    rows, refused = temperature_rows(fitted, test, rest, k_policy=args.k_policy)
    print(fitted.line())
    written = [write_json(args.json_path, rows)] if args.json_path and rows else []
    if rows:
        unmatched = sorted({r["set"] for r in rows if not r["matched"]})
        notes = (
            [f"WARNING: K not matched (--k-policy report) for {', '.join(unmatched)}: {K_MISMATCH_REASON}"]
            if unmatched
            else []
        )
        print_rows(rows, TemperatureRow.columns(*TABLE_KEYS), ("set", "probs"), written, notes)
    if refused:
        # every row refused: T and the ID test part differ in K (else: only OOD tasks, ood's reason)
        print_refusals(refused, why=None if rows else K_MISMATCH_REASON)
        return EXIT_REFUSED
    return EXIT_OK
