"""``lm-eval-evidential selective``: does a confidence score rank right answers above wrong ones?

    lm-eval-evidential selective OUT --task obqa_edl [--scores max_prob,reciprocal_vacuity]
        [--coverage 0.8] [--plot risk_coverage.png] [--json selective.json] [--run DATE_ID]

One row per task and score: PRR at rejection caps 0.5 and 0.75 and lm-polygraph's
prr_normalized (higher is better, 1 = oracle, 0 = random), AURC, E-AURC, AUGRC and the risk at
--coverage (lower is better) and Spearman correlation of score and correctness. See
:func:`lm_eval_evidential.audits.quality.selective_rows`. Score names: ``core/scores.py``.
"""

from __future__ import annotations

from lm_eval_evidential.files import write_json

from .arguments import add_audit_parser, add_param
from .loading import load
from .printing import print_rows


def add_parser(sub) -> None:
    from lm_eval_evidential.audits.quality import RISK_COVERAGE
    from lm_eval_evidential.metrics.scores import OOD_DEFAULT_SCORES

    p = add_audit_parser(
        sub,
        "selective",
        __doc__,
        run,
        tasks=True,
        json=True,
        scores="every score the records can give; the --plot figure: " + ", ".join(OOD_DEFAULT_SCORES),
        help="selective prediction of saved records: PRR, AURC, E-AURC, AUGRC, risk@coverage, Spearman per score "
        "(+ risk-coverage plot)",
    )
    from lm_eval_evidential.metrics.selective import COVERAGE

    add_param(
        p,
        "--coverage",
        COVERAGE,
        default=RISK_COVERAGE,
        metavar="C",
        help="the share of most confident examples kept for the risk_at_C column",
    )
    p.add_argument(
        "--plot",
        metavar="FILE",
        default=None,
        help="also write risk-coverage curves to FILE.png and FILE.svg (FILE-<task>.* for several tasks)",
    )


def run(args) -> int:
    from lm_eval_evidential import plots
    from lm_eval_evidential.audits import quality

    records = dict(zip(args.tasks, load(args, args.tasks)))
    rows = quality.selective_rows(records, scores=args.scores, coverage=args.coverage)
    written = []
    if args.plot:
        base = plots.figure_base(args.plot)
        for task, r in records.items():
            path = base if len(records) == 1 else base.with_name(f"{base.name}-{task}")
            written += plots.save_risk_coverage_figure(r, path, scores=args.scores)
    if args.json_path:
        written.append(write_json(args.json_path, rows))
    columns = quality.SelectiveRow.columns(*quality.selective_keys(args.coverage))
    return print_rows(rows, columns, ("task", "score"), written)
