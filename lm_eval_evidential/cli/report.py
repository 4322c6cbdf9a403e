"""``lm-eval-evidential report``: a folder with report.md, report.json and figures (PNG + SVG).

Under ``--k-policy assert`` a K-mismatched OOD task is not compared: the report lists it as
refused with the error text and the remedies, and everything else is still written. Exit
status 0 when the report is written (refusals are also printed on stderr); 1 on errors.
"""

from __future__ import annotations

import sys

from lm_eval_evidential.records.loading import check_producers, load_run

from ._options import (
    add_fingerprint_flag,
    add_output_path,
    add_scores,
    parse_scores,
    split_tasks,
)


def add_parser(sub) -> None:
    from lm_eval_evidential.metrics.cardinality import POLICIES

    p = sub.add_parser(
        "report",
        help="write a Markdown + JSON report (OOD tables per K policy, K sweep, calibration, selective, ATC, orders)",
        description="Every audit of an ID task against OOD tasks, as paper-ready Markdown tables, JSON and figures.",
    )
    add_output_path(p)
    p.add_argument("--id", dest="id_task", required=True, metavar="TASK", help="in-distribution task")
    p.add_argument("--ood", dest="ood_tasks", required=True, metavar="T1,T2", help="OOD task(s), comma-separated")
    p.add_argument("--out", dest="out_dir", required=True, metavar="DIR", help="folder to write the report into")
    p.add_argument(
        "--k-policy", dest="k_policy", default="assert", metavar="|".join(POLICIES),
        help="K policy, or several comma-separated (one OOD table each; later sections use the first). Default assert",
    )  # fmt: skip
    add_scores(p)
    p.add_argument("--n-boot", dest="n_boot", type=int, default=1000, help="bootstrap replicates for the AUPR-In CI (0: none)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument("--max-extra", dest="max_extra", type=int, default=4, help="largest K-sweep expansion (default 4)")
    add_fingerprint_flag(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from lm_eval_evidential.records import RecordsError
    from lm_eval_evidential.report import build_report

    try:
        scores = parse_scores(args.scores)
        policies = [p.strip() for p in args.k_policy.split(",") if p.strip()]
        id_records, *ood = load_run(args.output_path, [args.id_task, *split_tasks(args.ood_tasks)], args.run)
        check_producers([id_records, *ood], allow=args.allow_fingerprint_mismatch)
        report = build_report(
            id_records, ood, args.out_dir, k_policy=policies, scores=scores,
            n_boot=args.n_boot, seed=args.seed, max_extra=args.max_extra,
        )  # fmt: skip
    except (FileNotFoundError, RecordsError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for policy, sec in report["ood"].items():
        for ref in sec["refused"]:
            print(f"refused {ref['id_task']} vs {ref['ood_task']} (k_policy={policy}): {ref['error']}", file=sys.stderr)
    for s in report["skipped"]:
        print(f"not computed: {s['section']}: {s['reason']}", file=sys.stderr)
    print(f"wrote {args.out_dir}/report.md, report.json and {sum(len(v) for v in report['figures'].values())} figure files")
    return 0
