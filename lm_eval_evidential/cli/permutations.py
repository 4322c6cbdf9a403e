"""``lm-eval-evidential permutations``: the answer-order audit of a permuted run.

    lm-eval-evidential permutations OUT --task T [--json FILE] [--id I --ood O1,O2] [--scores A,B]

Reads the records of a run evaluated with ``--metadata '{"permutations": "cyclic"}'`` (or
``"random:N"``, ``"all"``): accuracy per order, CircularEval accuracy, the share of questions
whose prediction follows a letter rather than an option, the letter prior (pick rate and mean
evidence per letter against the gold's rate, chi-square test of uniform picks), PriDe's prior
and debiased accuracy (Zheng et al., ICLR 2024), and per score the spread across orders and the
rank correlation between orders. With ``--id``/``--ood``: each score's OOD AUROC/AUPR-In per order
(min, median, max) beside the order-averaged score's, K-checked as in ``ood``; a permuted side
against an unpermuted one is refused (exit status 2). See
:mod:`lm_eval_evidential.audits.permutations`.
"""

from __future__ import annotations

import sys

from lm_eval_evidential.audits.table import TEXT, format_p
from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.files import write_json

from .arguments import add_audit_parser, add_k_policy, add_param, add_seed, comma_list, task_name
from .loading import load
from .printing import format_table
from .refusals import print_refusals, refuse_self_comparison

#: The printed columns (every key is in --json): a score's spread over orders, and its AUROC per order.
SCORE_KEYS = ("mean_range", "max_range", "mean_std", "spearman_min", "kendall_min")
OOD_KEYS = (
    "ood_task",
    "score",
    "n_orders",
    "auroc_identity",
    "auroc_min",
    "auroc_median",
    "auroc_max",
    "auroc_order_averaged",
    "aupr_in_min",
    "aupr_in_max",
)


def add_parser(sub) -> None:
    p = add_audit_parser(
        sub,
        "permutations",
        __doc__,
        run,
        scores=True,
        json=True,
        help="answer-order audit of a permuted run: CircularEval, letter prior, PriDe, score spread across orders",
    )
    p.add_argument("--task", dest="task", required=True, type=task_name, metavar="TASK", help="the permuted task")
    p.add_argument("--id", dest="id_task", default=None, type=task_name, metavar="TASK", help="ID task of --ood")
    p.add_argument(
        "--ood", dest="ood_tasks", default=None, type=comma_list("task"), metavar="T1,T2", help="OOD task(s)"
    )
    add_k_policy(p)
    from lm_eval_evidential.audits.permutations import PRIDE_FRACTION

    add_param(
        p,
        "--pride-fraction",
        PRIDE_FRACTION,
        default=0.05,
        help="share of the questions PriDe estimates its prior on (Zheng et al. 2024 use 5%%)",
    )
    add_seed(p, "seed of PriDe's estimation subset")


def _summary_lines(s: dict) -> list[str]:
    pct = lambda v: f"{100 * v:.1f}%"  # noqa: E731
    per_order = ", ".join(f"{v:.4f}" for v in s["accuracy_per_order"])
    follows = s["prediction_follows"]
    uniform = s["letter_uniformity"]
    pride = s["pride"]
    spec = (s["permutations"] or {}).get("spec")
    lines = [
        f"{s['task']}: {s['n_questions']} questions, {s['n_records']} records (orders: {spec})",
        f"accuracy (identity order) {s['accuracy']:.4f}; per order [{per_order}]",
        f"CircularEval accuracy {s['circular_accuracy']:.4f} (right under every order)",
        f"prediction follows the option in {pct(follows['option'])} of questions, a letter in "
        f"{pct(follows['letter'])}, neither in {pct(follows['neither'])}",
        "letter pick rate  " + "  ".join(f"{a} {v:.3f}" for a, v in s["letter_pick_rate"].items()),
        "letter gold rate  " + "  ".join(f"{a} {v:.3f}" for a, v in s["letter_gold_rate"].items()),
        f"uniform picks: chi2 = {uniform['chi2']:.3f}, dof {uniform['dof']}, p = {format_p(uniform['p_value'], TEXT)}",
        f"PriDe (Zheng et al. 2024): accuracy {pride['accuracy']:.4f} -> debiased {pride['debiased_accuracy']:.4f} "
        f"on the questions outside its estimation subset",
    ]
    if s["letter_mean_evidence"] is not None:
        lines.insert(6, "mean evidence     " + "  ".join(f"{a} {v:.3f}" for a, v in s["letter_mean_evidence"].items()))
    if pride.get("reason"):
        lines.append(f"note: PriDe: {pride['reason']}")
    return lines


def run(args) -> int:
    from lm_eval_evidential.audits import permutations
    from lm_eval_evidential.cli.exit_codes import EXIT_OK, EXIT_REFUSED
    from lm_eval_evidential.metrics.cardinality import CardinalityMismatchError
    from lm_eval_evidential.records.loading import check_one_kind_of_run

    if (args.id_task is None) != (args.ood_tasks is None):
        raise InvalidValueError("--id and --ood go together: give both for the AUROC per order, or neither")
    tasks = [args.task]
    if args.id_task is not None:
        refuse_self_comparison(args.id_task, args.ood_tasks)
        tasks += [t for t in (args.id_task, *args.ood_tasks) if t not in tasks]
    check_one_kind_of_run(args.output_path, tasks, args.run)
    loaded = dict(zip(tasks, load(args, tasks)))
    summary = permutations.permutation_summary(
        loaded[args.task], scores=args.scores, pride_fraction=args.pride_fraction, seed=args.seed
    )
    print("\n".join(_summary_lines(summary)))
    score_rows = [{"score": name, **row} for name, row in summary["scores"].items()]
    print()
    print(format_table(score_rows, ["score", *permutations.ScoreSpreadRow.columns(*SCORE_KEYS)]))
    out, refused = dict(summary), []
    if args.id_task is not None:
        rows = []
        for task in args.ood_tasks:
            try:
                rows += permutations.permutation_ood_rows(
                    loaded[args.id_task], loaded[task], scores=args.scores, k_policy=args.k_policy
                )
            except CardinalityMismatchError as exc:
                refused.append((args.id_task, task, exc))
        if rows:
            print()
            print(format_table(rows, permutations.PermutationOODRow.columns(*OOD_KEYS)))
        out["ood"] = rows
    if args.json_path:
        print(f"wrote {write_json(args.json_path, out)}", file=sys.stderr)
    if refused:
        print_refusals(refused)
        return EXIT_REFUSED
    return EXIT_OK
