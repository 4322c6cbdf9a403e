"""``lm-eval-evidential compare``: methods side by side, one run folder per method.

    lm-eval-evidential compare out-edl out-ens out-mc out-laplace --id obqa_edl --ood arc_c_edl,mmlu_math_edl
        [--names EDL,Ensemble,MC-dropout,Laplace] [--scores max_prob,neg_mutual_information] [--k-mismatched]
        [--n-boot 1000] [--json compare.json]

For each method: the ID task's accuracy, ECE, NLL and Brier with 95% bootstrap intervals; for each
OOD task and score, AUROC (DeLong interval) and AUPR-In (bootstrap interval) on K-matched sets. The
K-mismatched protocol of the papers is computed only with ``--k-mismatched``, and marked; without it such a
pair is refused: a ``note:`` line with the remedy, every other row still printed, exit status 2
(:mod:`lm_eval_evidential.cli.exit_codes`). ``report --compare`` puts the same table in a report.
"""

from __future__ import annotations

import sys
from pathlib import Path

from lm_eval_evidential.errors import InvalidValueError

from .arguments import add_average_orders, add_bootstrap, add_json, add_ood_tasks, add_scores, comma_list, task_name
from .loading import audit_orders
from .printing import format_table
from .refusals import refuse_same_questions, refuse_self_comparison


def add_parser(sub) -> None:
    p = sub.add_parser(
        "compare",
        help="methods side by side (one run folder each): accuracy, ECE, NLL, Brier, OOD AUROC/AUPR with intervals",
        description=(
            "Methods side by side, one lm_eval --output_path folder per method (EDL, IB-EDL, softmax, ensembles, "
            "MC dropout, Laplace-LoRA): the ID task's accuracy, ECE, NLL and Brier with bootstrap intervals, and for "
            "each OOD task and score AUROC (DeLong interval) and AUPR-In (bootstrap interval) on K-matched sets; the "
            "papers' K-mismatched protocol only with --k-mismatched, marked K-MISMATCHED."
        ),
    )
    p.add_argument("runs", nargs="+", metavar="OUTPUT_PATH", help="one lm_eval --output_path folder per method")
    p.add_argument("--id", dest="id_task", required=True, type=task_name, metavar="TASK", help="in-distribution task")
    add_ood_tasks(p)
    p.add_argument(
        "--names",
        type=comma_list("name"),
        default=None,
        metavar="A,B",
        help="the methods' names in the table, one per folder (default: the folder names)",
    )
    add_scores(
        p, default="max_prob, neg_entropy, neg_mutual_information, reciprocal_vacuity where the records give them"
    )
    p.add_argument(
        "--k-mismatched",
        action="store_true",
        help="also compute OOD pairs of different K (the papers' protocol), marked K-MISMATCHED",
    )
    add_bootstrap(p, n_boot_help="bootstrap replicates of the intervals (0: none)", seed_help="seed of the bootstrap")
    p.add_argument(
        "--allow-fingerprint-mismatch",
        action="store_true",
        help="read a folder whose tasks were produced by different models/settings (listed as warnings)",
    )
    add_average_orders(p)
    add_json(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from lm_eval_evidential.audits.compare import CALIBRATION_COLUMNS, OOD_COLUMNS, compare_methods
    from lm_eval_evidential.cli.exit_codes import EXIT_OK, EXIT_REFUSED
    from lm_eval_evidential.files import write_json
    from lm_eval_evidential.metrics.intervals import aupr_in_interval_label
    from lm_eval_evidential.records.loading import load_run

    names = args.names or [Path(r).resolve().name for r in args.runs]  # "." names its folder
    if len(names) != len(args.runs):
        raise InvalidValueError(
            f"--names gives {len(names)} distinct name(s) for {len(args.runs)} run folders; give one each"
        )
    if len(set(names)) != len(names):  # folders of one name (--names dedups its own list)
        raise InvalidValueError(f"the folders' names repeat ({', '.join(names)}); give each method one with --names")
    refuse_self_comparison(args.id_task, args.ood_tasks)
    tasks = [args.id_task, *args.ood_tasks]
    runs = {}
    for name, folder in zip(names, args.runs):
        loaded = load_run(folder, tasks, allow_fingerprint_mismatch=args.allow_fingerprint_mismatch)
        print(f"{name}: {loaded.describe()}", file=sys.stderr)
        records = audit_orders(args, [loaded[t] for t in tasks])  # a permuted run: --average-orders, or refused
        refuse_same_questions(records[0], records[1:])
        runs[name] = dict(zip(tasks, records))
    out = compare_methods(
        runs,
        args.id_task,
        args.ood_tasks,
        scores=args.scores,
        k_mismatched=args.k_mismatched,
        n_boot=args.n_boot,
        seed=args.seed,
    )
    print(f"## {args.id_task}: accuracy and calibration (95% bootstrap intervals, {args.n_boot} replicates)")
    print(format_table(out["calibration"], CALIBRATION_COLUMNS))
    print()
    intervals = aupr_in_interval_label(r["n_id"] + r["n_ood"] for r in out["ood"])
    print(f"## OOD detection against {args.id_task} (ID positive; AUROC: DeLong interval, AUPR-In: {intervals})")
    print(format_table(out["ood"], OOD_COLUMNS))
    for method, task, reason in out["refused"]:
        print(f"note: {method} / {task}: {reason}")
    if args.json_path:
        written = write_json(
            args.json_path, [{"table": key, **row} for key in ("calibration", "ood") for row in out[key]]
        )
        print(f"wrote {written}", file=sys.stderr)
    return EXIT_REFUSED if out["refused"] else EXIT_OK
