"""``ood --near A,B --far C [--percent]``: the OpenOOD layout of the ``ood`` command.

Per score, one row per OOD set and a mean row per group labelled ``near`` / ``far`` (over the
K-matched sets only; a group with a refused set says so), ID accuracy, FPR@95 with its direction
named, AUROC, AUPR-In, AUPR-Out. See :mod:`lm_eval_evidential.audits.ood_groups`.
"""

from __future__ import annotations

import sys

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.files import write_json

from .arguments import add_param, comma_list
from .loading import load, say_reading
from .printing import print_rows
from .refusals import print_refusals, refuse_same_questions, refuse_self_comparison

GROUPS = ("near", "far")
#: The printed columns (every key of a row is in --json).
TABLE_KEYS = (
    "group",
    "set",
    "score",
    "k_ood",
    "n_ood",
    "matched",
    "id_acc",
    "fpr95",
    "auroc",
    "aupr_in",
    "aupr_out",
)


def add_group_options(p) -> None:
    for group in GROUPS:
        p.add_argument(
            f"--{group}",
            dest=f"{group}_tasks",
            default=[],
            type=comma_list("task"),
            metavar="T1,T2",
            help=f"{group}-OOD task(s): OpenOOD's layout, one row per task and a mean row labelled '{group}'",
        )
    p.add_argument(
        "--groups-from",
        dest="groups_from",
        default=None,
        metavar="TASK",
        help="the near/far groups a pair task, or every pair of a group task (e.g. obqa_edl_ood), declares in "
        "metadata.ood_group, instead of --near/--far",
    )
    p.add_argument(
        "--percent", action="store_true", help="with --near/--far: FPR@95, AUROC, AUPR and ID accuracy times 100"
    )
    from lm_eval_evidential.audits.ood_groups import FPR95

    add_param(
        p,
        "--fpr95",
        FPR95,
        default="openood",
        help="with --near/--far, FPR@95's positive class: openood (OOD positive, ID flagged at 95%% OOD recall; "
        "OpenOOD v1.5) or odin (ID positive, OOD accepted at 95%% ID recall, as in the --ood table)",
    )


def uses_groups(args) -> bool:
    """The OpenOOD layout was asked for; refuses mixing it with ``--ood`` or with options it ignores."""
    if args.groups_from and (args.near_tasks or args.far_tasks):
        raise InvalidValueError("--groups-from names the groups itself; give --groups-from or --near/--far")
    grouped = bool(args.near_tasks or args.far_tasks or args.groups_from)
    if grouped and args.ood_tasks:
        raise InvalidValueError(
            "--ood and --near/--far are two layouts of the ood table (--groups-from gives --near/--far); give --ood or "
            "--near/--far"
        )
    if not grouped and not args.ood_tasks:
        raise InvalidValueError("give the OOD task(s): --ood T1,T2, or the OpenOOD layout --near T1,T2 --far T3")
    if grouped and getattr(args, "force_k", None) is not None:
        raise InvalidValueError("--force-k applies to the --ood table only (Implementation A); drop it or use --ood")
    return grouped


def named_groups(args) -> dict[str, list[str]]:
    """``{group: [task, ...]}`` from ``--near``/``--far``, or from the pair metadata of ``--groups-from`` (what
    it leaves out said on stderr); a task named in two groups is refused."""
    if args.groups_from:
        from lm_eval_evidential.tasks import tasks_dir
        from lm_eval_evidential.tasks.declared_groups import declared_groups

        named, notes = declared_groups(args.groups_from, args.id_task, [tasks_dir()])
        for note in notes:
            print(f"--groups-from {args.groups_from}: {note}", file=sys.stderr)
    else:
        named = {g: getattr(args, f"{g}_tasks") for g in GROUPS if getattr(args, f"{g}_tasks")}
    tasks = [t for ts in named.values() for t in ts]
    twice = sorted({t for t in tasks if tasks.count(t) > 1})
    if twice:
        raise InvalidValueError(f"{', '.join(twice)} named in both --near and --far; a task belongs to one group")
    return named


def refuse_self_in_groups(args, named: dict[str, list[str]]) -> None:
    """``--id`` named again in a group is refused naming the option that holds it (``--near``, ``--far``)."""
    for group, tasks in named.items():
        refuse_self_comparison(
            args.id_task, tasks, f"--groups-from {args.groups_from}" if args.groups_from else f"--{group}"
        )


def run_groups(args) -> int:
    from lm_eval_evidential.audits.ood_groups import FPR95_DIRECTIONS, GroupRow, group_rows
    from lm_eval_evidential.cli.exit_codes import EXIT_OK, EXIT_REFUSED

    named = named_groups(args)
    tasks = [t for ts in named.values() for t in ts]
    refuse_self_in_groups(args, named)
    say_reading("ood", [args.id_task, *tasks])
    id_records, *loaded = load(args, [args.id_task, *tasks])
    refuse_same_questions(id_records, loaded)
    by_task = dict(zip(tasks, loaded))
    groups = {g: [by_task[t] for t in ts] for g, ts in named.items()}
    rows, refused = group_rows(
        id_records, groups, scores=args.scores, k_policy=args.k_policy, fpr95=args.fpr95, percent=args.percent
    )
    print(f"FPR@95 ({args.fpr95}): {FPR95_DIRECTIONS[args.fpr95]}")
    print(
        f"ID = {args.id_task} (positive class of AUROC and AUPR-In); id_acc: its accuracy" + (", x100" * args.percent)
    )
    written = [write_json(args.json_path, rows)] if args.json_path else []
    print_rows(rows, GroupRow.columns(*TABLE_KEYS), ("score", "set"), written)
    if refused:
        print_refusals(refused)
        return EXIT_REFUSED
    return EXIT_OK
