"""``lm-eval-evidential ood``: K-checked OOD-detection table (AUROC with DeLong CI, AUPR, FPR95).

Exit status (:mod:`lm_eval_evidential.cli.main`): 0 on success; 2 when a comparison is refused
(a K mismatch under ``--k-policy assert``: every OOD task is still evaluated and every refusal
reported, the accepted ones are tabulated and written; or records of different producers);
1 for errors (missing records, unknown scores).
"""

from __future__ import annotations

import sys

from lm_eval_evidential.audits.ood import OODRow
from lm_eval_evidential.files import write_json
from lm_eval_evidential.metrics.cardinality import format_k

from ._ood_groups import add_group_options, run_groups, uses_groups
from .arguments import add_audit_parser, add_bootstrap, add_ood_tasks, add_param
from .loading import load, say_reading
from .printing import format_table
from .refusals import print_refusals, refuse_same_questions, refuse_self_comparison

#: The columns of one OOD task's table; what is one value per task (K, n, dropped, matched, the AUPR-In
#: baseline) is said once in the line above it, so the default table stays under ~100 columns.
TABLE_COLUMNS = OODRow.columns("score", "auroc", "auroc_ci", "aupr_in", "aupr_in_ci", "aupr_out", "fpr95")


def task_heading(row: dict) -> str:
    """The line above one OOD task's table: what holds for each of its rows (the first row's)."""
    matched = "K-matched" if row["matched"] else "K NOT matched"
    forced = "" if row.get("forced_k") is None else f", OOD forced to K={row['forced_k']} ({row['phantom']} phantom)"
    return (
        f"{row['ood_task']}: K {format_k(row['k_id'])} vs {format_k(row['k_ood'])} ({matched}{forced}), "
        f"n {row['n_id']} ID / {row['n_ood']} OOD, dropped {row['n_dropped']['id']}/{row['n_dropped']['ood']}, "
        f"AUPR-In baseline {row['aupr_baseline']:.4f}"
    )


def format_tables(rows: list[dict]) -> str:
    """One table per OOD task under its :func:`task_heading` line."""
    blocks = []
    for task in dict.fromkeys(r["ood_task"] for r in rows):
        mine = [r for r in rows if r["ood_task"] == task]
        blocks.append(task_heading(mine[0]) + "\n" + format_table(mine, TABLE_COLUMNS))
    return "\n\n".join(blocks)


def add_parser(sub) -> None:
    p = add_audit_parser(
        sub,
        "ood",
        None,
        run,
        id_help="in-distribution task, e.g. obqa_edl",
        k_policy=True,
        scores=True,
        json=True,
        help="OOD detection (ID = positive) between saved records, refusing K-mismatched comparisons by default",
        description=(
            "AUROC (DeLong CI), AUPR-In (bootstrap CI), AUPR-Out, FPR@95%TPR and the AUPR baseline of each score, "
            "ID task = positive, higher score = more in-distribution. Vacuity = lambda K / S depends on K itself, "
            "so by default a comparison across different class counts K is refused (exit status 2)."
        ),
    )
    add_ood_tasks(p, "OOD task(s), comma-separated (or the OpenOOD layout: --near/--far)", required=False)
    add_group_options(p)
    add_bootstrap(
        p,
        n_boot_help="bootstrap replicates for the AUPR-In CI (0: none); above 20,000 examples the bootstrap's "
        "large-sample limit (infinitesimal jackknife) is used instead, see docs/audits.md",
        level="confidence level of both intervals",
    )
    from lm_eval_evidential.audits.ood_scores import FORCE_K

    add_param(
        p,
        "--force-k",
        FORCE_K,
        default=None,
        metavar="K",
        help="score the OOD task(s) at K options, each question's own plus phantom options: with --phantom model "
        "the reproduction of the published bug (McNamara 2026, Implementation A: 4-option ARC at K = 5 with the "
        "real ' E'); refused by the K check unless --k-policy report asks for it",
    )
    from lm_eval_evidential.metrics.ksweep import PHANTOM

    add_param(
        p,
        "--phantom",
        PHANTOM,
        default="model",
        help="with --force-k: model (default; the model's own next labels from the records' phantom logits), count "
        "(only vacuity's K: Tables 5-6's '5 (mismatch)' rows) or zero (zero-evidence options)",
    )


#: Seconds between two progress lines of ``ood`` (none on a run shorter than that).
PROGRESS_EVERY = 10.0


def _progress():
    """``say(step)``: a stderr line saying ``step`` when :data:`PROGRESS_EVERY` seconds passed since the
    command started or since the last line, so that an audit of millions of records never looks hung and a
    short one prints nothing more."""
    import time

    start = last = time.perf_counter()

    def say(step: str) -> None:
        nonlocal last
        now = time.perf_counter()
        if now - last >= PROGRESS_EVERY:
            print(f"ood [{now - start:.0f} s]: {step}", file=sys.stderr, flush=True)
            last = now

    return say


def run(args) -> int:
    from lm_eval_evidential.audits.ood import ood_rows
    from lm_eval_evidential.cli.exit_codes import EXIT_OK, EXIT_REFUSED
    from lm_eval_evidential.metrics.cardinality import CardinalityMismatchError

    if uses_groups(args):
        return run_groups(args)
    refuse_self_comparison(args.id_task, args.ood_tasks)
    say_reading("ood", [args.id_task, *args.ood_tasks])
    id_records, *all_ood = load(args, [args.id_task, *args.ood_tasks])
    refuse_same_questions(id_records, all_ood)
    rows, refused = [], []
    say = _progress()
    for task, ood_records in zip(args.ood_tasks, all_ood):
        try:
            rows += ood_rows(
                id_records,
                ood_records,
                scores=args.scores,
                k_policy=args.k_policy,
                n_boot=args.n_boot,
                seed=args.seed,
                level=args.level,
                force_k=args.force_k,
                phantom=args.phantom,
                progress=lambda done, total, name, task=task: say(f"{task}: score {done + 1}/{total}, {name}"),
            )
        except CardinalityMismatchError as exc:
            refused.append((args.id_task, task, exc))
    if rows:
        print(format_tables(rows))
        if not all(r["matched"] for r in rows):
            print(
                "\nWARNING: tables marked K NOT matched compare different class counts K; their AUROC/AUPR partly "
                "measure K rather than uncertainty (McNamara (2026) arXiv:2605.06382, Proposition 1)."
            )
    if args.json_path:
        write_json(args.json_path, rows)
    if refused:
        print_refusals(refused)
        if args.force_k is not None:
            print(
                f"--force-k {args.force_k} scores the OOD side at a K the ID side does not have, on purpose (the "
                "reproduction of a published bug): add --k-policy report to compute it",
                file=sys.stderr,
            )
        return EXIT_REFUSED
    return EXIT_OK
