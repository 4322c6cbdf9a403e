"""``lm-eval-evidential conformal``: conformal prediction sets (LAC, APS) calibrated on ID records, K-checked.

    lm-eval-evidential conformal OUT --id obqa_edl [--ood csqa4_edl,mmlu_math_edl] --alpha 0.1
        [--method lac|aps] [--calibration-task T | --calibration-fraction 0.5 --seed S] [--json FILE]

The threshold is calibrated on a held-out part of the ID records (a seeded split, default half)
or on a separate calibration task, then applied to the ID test part and each OOD task: one row per
evaluated set with coverage, mean set size and UAcc (bootstrap CIs), the shares of empty and full
sets, coverage per set size and per K. A set whose K differs from the calibration records' is
refused (exit status 2, with the remedy) unless ``--k-policy restrict`` or ``report``. See
:mod:`lm_eval_evidential.audits.conformal`.
"""

from __future__ import annotations

from lm_eval_evidential.files import write_json

from .arguments import add_audit_parser, add_bootstrap, add_param, add_seed, comma_list, task_name
from .loading import load
from .printing import print_rows
from .refusals import print_refusals, refuse_same_questions, refuse_self_comparison


def table_columns():
    """The printed columns (every key of a row is in --json); imported when run, so the parser stays light."""
    from lm_eval_evidential.audits.conformal import ConformalRow

    return ConformalRow.columns(
        *"set role k n matched coverage coverage_ci mean_set_size mean_set_size_ci uacc uacc_ci share_empty "
        "share_full coverage_by_size".split()
    )


def add_parser(sub) -> None:
    from lm_eval_evidential.metrics.conformal import ALPHA, K_REG, LAM, METHOD, RAPS_K_REG, RAPS_LAMBDA

    p = add_audit_parser(
        sub,
        "conformal",
        __doc__,
        run,
        id_help="in-distribution task: calibrated on (a part of) it, evaluated on the rest",
        k_policy=True,
        json=True,
        help="conformal prediction sets (LAC, APS): coverage, set size, UAcc on ID and OOD records, K-checked",
    )
    add_calibration_options(p, what="calibrate on")
    add_param(p, "--alpha", ALPHA, default=0.1, help="target miscoverage: sets aim at 1 - alpha")
    add_param(
        p,
        "--method",
        METHOD,
        default="lac",
        help="nonconformity score: lac (1 - p_y), aps (mass of the options at least as probable) or raps (aps + "
        "a penalty per option beyond the k_reg most probable; Angelopoulos et al. 2021)",
    )
    add_param(
        p,
        "--raps-lambda",
        LAM,
        name="lam",
        dest="raps_lambda",
        default=RAPS_LAMBDA,
        metavar="L",
        help=f"with --method raps: the penalty per option beyond the k_reg most probable (default {RAPS_LAMBDA:g})",
    )
    add_param(
        p,
        "--raps-k-reg",
        K_REG,
        name="k_reg",
        dest="raps_k_reg",
        default=RAPS_K_REG,
        metavar="K",
        help=f"with --method raps: how many of the most probable options go unpenalised (default {RAPS_K_REG})",
    )
    p.add_argument(
        "--plot",
        metavar="FILE",
        default=None,
        help="also write coverage against mean set size (one point per set, with CIs) to FILE.png and FILE.svg",
    )
    add_bootstrap(
        p,
        n_boot_help="bootstrap replicates (0: no intervals)",
        seed_help=None,  # add_calibration_options's --seed seeds the bootstrap too
        level="confidence level of the intervals",
    )


def add_calibration_options(p, what: str) -> None:
    """``--ood``, ``--calibration-task`` | ``--calibration-fraction`` and ``--seed``: the held-out ID
    records of ``conformal`` and ``temperature``."""
    from lm_eval_evidential.audits.conformal import CALIBRATION_FRACTION

    p.add_argument(
        "--ood",
        dest="ood_tasks",
        default=[],
        type=comma_list("task"),
        metavar="T1,T2",
        help="OOD task(s) to evaluate on, comma-separated",
    )
    cal = p.add_mutually_exclusive_group()
    cal.add_argument(
        "--calibration-task",
        dest="calibration_task",
        type=task_name,
        default=None,
        metavar="T",
        help=f"{what} all of task T's records (from the same run) and evaluate on all of --id",
    )
    add_param(
        cal,
        "--calibration-fraction",
        CALIBRATION_FRACTION,
        default=None,
        metavar="F",
        help=f"{what} a seeded random share F of --id's records, evaluate on the rest (default: 0.5)",
    )
    add_seed(p, "seed of the calibration split (and bootstrap)")


def calibration_split(args, load, refuse_same_questions):
    """``(calibration, ID test, OOD records, description)`` from the options of :func:`add_calibration_options`."""
    from lm_eval_evidential.audits.conformal import split_calibration
    from lm_eval_evidential.errors import InvalidValueError

    if args.calibration_task == args.id_task:
        raise InvalidValueError(
            f"--calibration-task and --id both name {args.calibration_task!r}: calibrating on the examples it is "
            "tested on overstates how well it works; use --calibration-fraction to split it instead"
        )
    extra = [args.calibration_task] if args.calibration_task else []
    id_records, *rest = load(args, [args.id_task, *extra, *args.ood_tasks])
    cal_records = rest.pop(0) if extra else None
    refuse_same_questions(id_records, [*([cal_records] if cal_records else []), *rest])
    if cal_records is None:
        fraction = args.calibration_fraction or 0.5
        cal_records, test_records = split_calibration(id_records, fraction, args.seed)
        return cal_records, test_records, rest, f"{args.id_task} ({fraction:g} of {len(id_records)}, seed {args.seed})"
    return cal_records, id_records, rest, args.calibration_task


def run(args) -> int:
    from lm_eval_evidential.audits.conformal import K_MISMATCH_REASON, calibrate, conformal_row
    from lm_eval_evidential.cli.exit_codes import EXIT_OK, EXIT_REFUSED
    from lm_eval_evidential.errors import InvalidValueError
    from lm_eval_evidential.metrics.cardinality import CardinalityMismatchError
    from lm_eval_evidential.metrics.conformal import RAPS_K_REG, RAPS_LAMBDA

    if args.method != "raps" and (args.raps_lambda != RAPS_LAMBDA or args.raps_k_reg != RAPS_K_REG):
        raise InvalidValueError(f"--raps-lambda and --raps-k-reg apply to --method raps only, not {args.method}")
    refuse_self_comparison(args.id_task, args.ood_tasks)
    cal_records, test_records, rest, description = calibration_split(args, load, refuse_same_questions)
    calibration = calibrate(
        cal_records,
        alpha=args.alpha,
        method=args.method,
        description=description,
        lam=args.raps_lambda,
        k_reg=args.raps_k_reg,
    )
    rows, refused = [], []
    for role, records in (("id", test_records), *(("ood", r) for r in rest)):
        try:
            rows.append(
                conformal_row(
                    calibration,
                    records,
                    role=role,
                    k_policy=args.k_policy,
                    n_boot=args.n_boot,
                    level=args.level,
                    seed=args.seed,
                )
            )
        except CardinalityMismatchError as exc:
            refused.append((f"calibration {description}", records.task, exc))
    print(calibration.line())
    warning = (
        "rows with matched = NO hold sets over a K other than the calibration K; their coverage carries no guarantee "
        "and their set sizes are not comparable (coverage per K is in --json)"
    )
    written = [write_json(args.json_path, rows)] if args.json_path and rows else []
    if args.plot and rows:
        from lm_eval_evidential import plots

        written += plots.save_figure(plots.conformal_figure(rows), plots.figure_base(args.plot))
    if rows:
        notes = [] if all(r["matched"] for r in rows) else [f"WARNING: {warning}"]
        print_rows(rows, table_columns(), ("set",), written, notes)
    if refused:
        print_refusals(refused, why=K_MISMATCH_REASON)
        return EXIT_REFUSED
    return EXIT_OK
