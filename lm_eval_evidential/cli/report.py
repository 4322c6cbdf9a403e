"""``lm-eval-evidential report``: a folder with report.md, appendix.md, report.json and figures (PNG + SVG).

Under ``--k-policy assert`` a K-mismatched OOD task is not compared: the report lists it as
refused with the error text and the remedies, and everything else is still written. Exit
status (:mod:`lm_eval_evidential.cli.main`): 0 when the report is written with every pair
compared; 2 when it is written but some pair was refused (also printed on stderr), or the
records come from different producers (nothing written); 1 on errors.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ._ood_groups import add_group_options, named_groups, refuse_self_in_groups, uses_groups
from .arguments import add_audit_parser, add_bootstrap, add_ood_tasks, add_param, add_phantom, comma_list
from .loading import load, say_reading
from .refusals import refuse_same_questions, refuse_self_comparison


def add_parser(sub) -> None:
    from lm_eval_evidential.metrics.cardinality import POLICIES
    from lm_eval_evidential.metrics.scores import OOD_DEFAULT_SCORES

    p = add_audit_parser(
        sub,
        "report",
        None,
        run,
        id_help="in-distribution task",
        scores="every score the records can give in the tables; the K sweep, the risk-coverage figure and the "
        "report's body: " + ", ".join(OOD_DEFAULT_SCORES),
        help="write a Markdown + JSON report (OOD tables per K policy, K sweep, calibration, selective, ATC, orders)",
        description="Every audit of an ID task against OOD tasks, as paper-ready Markdown tables, JSON and figures.",
    )
    add_ood_tasks(p, "OOD task(s), comma-separated (or named groups: --near/--far)", required=False)
    add_group_options(p)
    p.add_argument("--out", dest="out_dir", required=True, metavar="DIR", help="folder to write the report into")
    p.add_argument(
        "--k-policy",
        dest="k_policy",
        default=["assert"],
        type=comma_list("k_policy"),
        metavar="|".join(POLICIES),
        help="K policy, or several comma-separated (one OOD table each; later sections use the first); default: assert",
    )
    from lm_eval_evidential.audits.conformal import CALIBRATION_FRACTION
    from lm_eval_evidential.metrics.conformal import ALPHA
    from lm_eval_evidential.metrics.ksweep import MAX_EXTRA

    add_bootstrap(p, n_boot_help="bootstrap replicates for the AUPR-In CI (0: none)")
    add_param(p, "--max-extra", MAX_EXTRA, default=4, help="largest K-sweep expansion")
    add_phantom(p)
    add_param(p, "--alpha", ALPHA, default=0.1, help="conformal sets' target miscoverage (sets aim at 1 - alpha)")
    add_param(
        p,
        "--calibration-fraction",
        CALIBRATION_FRACTION,
        default=0.5,
        metavar="F",
        help="the seeded share (--seed) of the ID records the conformal sets and the temperature are calibrated on "
        "(default 0.5); their sections evaluate on the rest",
    )
    p.add_argument(
        "--compare",
        dest="compare_runs",
        nargs="+",
        action="extend",
        default=[],
        metavar="OUTPUT_PATH",
        help="other methods' lm_eval --output_path folders (an ensemble, MC dropout, Laplace-LoRA, another head), "
        "each with every task of the report: adds 'Methods side by side', the table of lm-eval-evidential compare "
        "(K-MISMATCHED pairs computed, marked, only with --k-policy …,report; refused otherwise, exit 2)",
    )
    p.add_argument(
        "--compare-names",
        dest="compare_names",
        type=comma_list("name"),
        default=None,
        metavar="A,B",
        help="the methods' names in that table: this run's, then one per --compare folder (default: the folders' "
        "names)",
    )


def run(args) -> int:
    from lm_eval_evidential.cli.exit_codes import EXIT_OK, EXIT_REFUSED

    groups = None
    if uses_groups(args):
        groups = named_groups(args)
        refuse_self_in_groups(args, groups)
        args.ood_tasks = [t for tasks in groups.values() for t in tasks]
    refuse_self_comparison(args.id_task, args.ood_tasks)
    name, compare_folders = _compare_names(args)
    say_reading("report", [args.id_task, *args.ood_tasks])
    from lm_eval_evidential.report import build_report  # after the first line: it imports scipy and matplotlib

    id_records, *ood = load(args, [args.id_task, *args.ood_tasks], orders=False)  # build_report applies the rule
    refuse_same_questions(id_records, ood)
    compare = _load_compared(args, compare_folders)
    report = build_report(
        id_records,
        ood,
        args.out_dir,
        k_policy=args.k_policy,
        scores=args.scores,
        n_boot=args.n_boot,
        seed=args.seed,
        max_extra=args.max_extra,
        phantom=args.phantom,
        groups=groups,
        alpha=args.alpha,
        calibration_fraction=args.calibration_fraction,
        fpr95=args.fpr95,
        percent=args.percent,
        average_orders=args.average_orders,
        compare=compare,
        name=name,
    )
    # One line per refused pair, its policies together; the remedies are in report.md.
    refused: dict[str, list] = {}
    for policy, sec in report["ood"].items():
        for ref in sec["refused"]:
            refused.setdefault(ref["ood_task"], []).append((policy, ref["reason"]))
    valid = {v["ood_task"]: v["policy"] for v in report["summary"]["valid"]}
    for task, refusals in refused.items():
        also = f"; compared K-matched under k_policy {valid[task]}" if task in valid else ""
        policies = ", ".join(policy for policy, _ in refusals)
        print(f"refused {args.id_task} vs {task} (k_policy {policies}): {refusals[0][1]}{also}", file=sys.stderr)
    for ref in report.get("compare", {}).get("refused", []):
        print(
            f"refused in the comparison: {ref['method']}: {args.id_task} vs {ref['ood_task']}: {ref['reason']}",
            file=sys.stderr,
        )
    for s in report["skipped"]:
        print(f"not computed: {s['section']}: {s['reason']}", file=sys.stderr)
    n_figures = sum(len(v) for v in report["figures"].values())
    print(
        f"wrote {Path(args.out_dir) / 'report.md'}, appendix.md (every score), report.json and {n_figures} figure files"
    )
    return EXIT_REFUSED if refused or report.get("compare", {}).get("refused") else EXIT_OK


def _compare_names(args) -> tuple[str | None, dict[str, str]]:
    """This run's name and ``{name: folder}`` of the ``--compare`` folders (no name: no comparison), checked
    before any records are read: one name per method, none twice."""
    from lm_eval_evidential.errors import InvalidValueError

    if not args.compare_runs:
        if args.compare_names:
            raise InvalidValueError("--compare-names names the methods of --compare; give the folders with --compare")
        return None, {}
    folders = [args.output_path, *args.compare_runs]
    names = args.compare_names or [Path(f).resolve().name for f in folders]
    if len(names) != len(folders):
        raise InvalidValueError(
            f"--compare-names gives {len(names)} name(s) for {len(folders)} methods (this run and "
            f"{len(args.compare_runs)} --compare folder(s)); give one each, this run's first"
        )
    if len(set(names)) != len(names):  # folders of one name (--compare-names refuses its own repeats)
        raise InvalidValueError(
            f"the folders' names repeat ({', '.join(names)}); give each method one with --compare-names"
        )
    return names[0], dict(zip(names[1:], args.compare_runs))


def _load_compared(args, folders: dict[str, str]) -> dict:
    """Each compared method's records of the report's tasks, from the newest run of its folder with them all."""
    from lm_eval_evidential.records.loading import load_run

    tasks = [args.id_task, *args.ood_tasks]
    out = {}
    for name, folder in folders.items():
        run = load_run(folder, tasks, allow_fingerprint_mismatch=args.allow_fingerprint_mismatch)
        print(f"{name}: {run.describe()}", file=sys.stderr)
        for line in run.fingerprint_warnings:
            print(f"warning: {name}: fingerprint differs: {line}", file=sys.stderr)
        out[name] = [run[t] for t in tasks]
    return out
