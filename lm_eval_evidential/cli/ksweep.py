"""``lm-eval-evidential ksweep``: McNamara (2026), Table 1 / Figure 1 on saved records.

Appends phantom options to the OOD side only and to both sides, with the model outputs fixed,
and reports how each score's AUROC/AUPR-In moves: a K-sensitive score changes although nothing
about the model did. ``--phantom`` says which options: ``zero`` (zero evidence, the paper's
idealisation), ``model`` (the model's own " E".. from the records' phantom logits) or
``count`` (vacuity's K alone). Each row gives the mean phantom evidence beside Proposition 1's
invariance value S_K/K - lambda. Exit status as for ``ood`` (2: refused for a K mismatch under
``--k-policy assert``; 1: other errors).
"""

from __future__ import annotations

from collections.abc import Mapping

from lm_eval_evidential.audits.ood import DeLongTest, KSweepRow
from lm_eval_evidential.audits.table import TEXT
from lm_eval_evidential.files import write_json

from .arguments import add_audit_parser, add_param, add_phantom, one_task
from .loading import load
from .printing import format_table
from .refusals import print_refusals, refuse_same_questions, refuse_self_comparison

TABLE_COLUMNS = KSweepRow.columns(
    "condition",
    "extra",
    "k_id",
    "k_ood",
    "score",
    "auroc",
    "delta_auroc",
    "aupr_in",
    "delta_aupr",
    "phantom_evidence_ood",
    "invariant_evidence_ood",
)


def add_parser(sub) -> None:
    from lm_eval_evidential.metrics.scores import OOD_DEFAULT_SCORES

    p = add_audit_parser(
        sub,
        "ksweep",
        None,
        run,
        id_help="in-distribution task",
        k_policy=True,
        json=True,
        scores=", ".join(OOD_DEFAULT_SCORES),
        help="K sweep (McNamara 2026, Table 1): how far each score's AUROC moves when only the class count K changes",
        description=(
            "For x = 0..MAX_EXTRA options appended to the OOD side only (ood_only) and to both sides (matched) "
            "— zero-evidence options by default, the model's own or vacuity's count alone with --phantom — "
            "recompute AUROC and AUPR-In on the same fixed model outputs. ID = positive."
        ),
    )
    one_ood_task = one_task(
        "ksweep sweeps one OOD task: run it once per task (`ood --ood A,B` compares several in one table)"
    )
    p.add_argument("--ood", dest="ood_task", required=True, type=one_ood_task, metavar="TASK", help="one OOD task")
    from lm_eval_evidential.metrics.ksweep import MAX_EXTRA

    add_param(
        p,
        "--max-extra",
        MAX_EXTRA,
        default=4,
        help="largest number of appended classes (default 4; --phantom model: as many as the records keep)",
    )
    add_phantom(p)
    p.add_argument("--plot", default=None, metavar="FILE", help="write the Figure 1 plot as FILE.png and FILE.svg")


def delong_line(test: Mapping) -> str:
    """The DeLong test (:class:`~lm_eval_evidential.audits.ood.DeLongTest`) as one sentence: each number as its
    column declares it, in the text table's style (as the table above it: 4 decimals, p to 3 significant digits)."""

    def num(key: str) -> str:  # as DeLongTest declares it, in the text table's style
        return DeLongTest.written(key, test[key], TEXT)

    return (
        f"DeLong test, {test['score']} OOD-only x={test['extra']} vs x=0 (same examples): AUROC "
        f"{num('auroc_base')} -> {num('auroc_expanded')} (diff {num('diff')}, "
        f"z {num('z')}, p {num('p_value')})"
    )


def run(args) -> int:
    from lm_eval_evidential.audits.ood import (
        ksweep_delong,
        ksweep_rows,
        phantom_evidence_line,
        sensitivity_lines,
    )
    from lm_eval_evidential.cli.exit_codes import EXIT_REFUSED
    from lm_eval_evidential.metrics.cardinality import CardinalityMismatchError
    from lm_eval_evidential.plots import plot_ksweep

    refuse_self_comparison(args.id_task, [args.ood_task])
    id_records, ood_records = load(args, [args.id_task, args.ood_task])
    refuse_same_questions(id_records, [ood_records])
    try:
        rows = ksweep_rows(
            id_records,
            ood_records,
            max_extra=args.max_extra,
            scores=args.scores,
            k_policy=args.k_policy,
            phantom=args.phantom,
        )
    except CardinalityMismatchError as exc:
        print_refusals([(args.id_task, args.ood_task, exc)])
        return EXIT_REFUSED
    test = None
    if args.max_extra >= 1:
        test = ksweep_delong(id_records, ood_records, k_policy=args.k_policy, phantom=args.phantom)
    print(format_table(rows, TABLE_COLUMNS))
    print()
    for line in sensitivity_lines(rows):
        print(line)
    line = phantom_evidence_line(rows)
    if line:
        print(line)
    if test is not None:
        print(delong_line(test))
    if args.json_path:
        write_json(
            args.json_path,
            {
                "id_task": args.id_task,
                "ood_task": args.ood_task,
                "k_policy": args.k_policy,
                "phantom": args.phantom,
                "rows": rows,
                "delong_test": test,
            },
        )
    if args.plot:
        for path in plot_ksweep(rows, args.plot, title=f"{args.id_task} \u2192 {args.ood_task}"):
            print(f"wrote {path}")
    return 0
