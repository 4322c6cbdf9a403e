"""``lm-eval-evidential tables``: McNamara (2026)'s Tables 1 and 3-6 from one evaluation run, as Markdown.

Table 1: the K sweep of the first 4-option OOD task (``--phantom``: zero, the paper's; model; count).
Tables 3-4 (Implementation A): each 4-option OOD task at K = 5 with the model's real " E" against
K = 4; Tables 5-6 (Implementation B): the same with vacuity's K alone grown (max-prob unchanged).
CSQA as-is (K = 5) against ``csqa4_edl`` (option E removed). The published Llama-3-8B values are
shown beside ours where the ID task is ``obqa_edl`` and the method is the table's.
"""

from __future__ import annotations

from lm_eval_evidential.audits.table import Column, Style, rows_markdown
from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.files import write_json

from .arguments import add_audit_parser, add_ood_tasks, add_phantom
from .loading import load
from .refusals import refuse_same_questions, refuse_self_comparison

IMPLEMENTATION = {
    "A": 'Implementation A (Tables 3-4): the OOD task scored at K = 5 with the model\'s real " E" (--phantom model)',
    "B": "Implementation B (Tables 5-6): only vacuity's K grown to 5 (--phantom count), max-prob unchanged",
}
_METHOD = {"edl": "standard EDL", "ib_edl": "IB-EDL", "softmax": "the softmax baseline"}


def add_parser(sub) -> None:
    p = add_audit_parser(
        sub,
        "tables",
        __doc__,
        run,
        id_help="in-distribution task, e.g. obqa_edl",
        json=True,
        help="McNamara (2026) Tables 1 and 3-6 from one run, with the published values where the setting matches",
    )
    add_ood_tasks(p, "OOD tasks of the run, e.g. arc_c_edl,arc_e_edl,csqa_edl,csqa4_edl,mmlu_math_edl")
    add_phantom(p)


#: How the tables write an undefined value (the published tables' dash).
UNDEFINED = "–"
#: The tables' medium: Markdown, 3 decimals, an undefined or missing value as the published tables' dash.
PAPER = Style(digits=3, nan=UNDEFINED, none=UNDEFINED, markdown=True, p_digits=2)


def table1_columns(published: bool) -> tuple[Column, ...]:
    """Table 1's columns: the sweep's step and its AUROC/AUPR-In moves (``published``: the paper's beside)."""
    from lm_eval_evidential.audits.paper_tables import Table1Row

    def delta(key: str) -> Column:
        return Table1Row.columns(key)[0]._replace(header="Δ")

    paper = (Column(("published", 0), "paper AUROC"), Column(("published", 1), "paper AUPR")) if published else ()
    return Table1Row.columns(
        Table1Row.columns("condition")[0]._replace(format="value"),  # the JSON's name of the side, as in --json
        "k_id",
        "k_ood",
        "auroc",
        delta("delta_auroc"),
        "aupr_in",
        delta("delta_aupr"),
        "phantom_evidence_ood",
        "invariant_evidence_ood",
        *paper,
    )


def implementation_columns() -> tuple[Column, ...]:
    """Tables 3-6's columns: each number with the paper's in brackets where the setting matches, then its Δ."""
    from lm_eval_evidential.audits.paper_tables import METRICS, ImplementationRow

    def ours(metric: str) -> Column:
        return ImplementationRow.combined(
            ImplementationRow.columns(metric)[0].header, "published", metric, Column(("published", metric), "paper")
        )

    moves = ((ours(m), f"delta_{m}") for m in METRICS[1:])
    return ImplementationRow.columns(
        "dataset", "k_label", "n_ood", ours(METRICS[0]), *(c for pair in moves for c in pair)
    )


def table1_markdown(id_task: str, task: str, entry: dict) -> list[str]:
    if not entry["rows"]:
        return [f"Table 1, {id_task} → {task}: not computed ({entry['reason']})", ""]
    phantom = entry["rows"][0]["phantom"]
    published = any(r["published"] for r in entry["rows"])
    head = f"### Table 1: {id_task} → {task}, reciprocal vacuity, --phantom {phantom}"
    note = (
        "Paper: McNamara (2026) Table 1, Llama-3-8B fine-tuned on OBQA, standard EDL, OBQA → ARC-C."
        if published
        else "No published values for this setting (Table 1 is standard EDL, obqa_edl → arc_c_edl, zero evidence)."
    )
    return [head, "", note, "", *rows_markdown(entry["rows"], table1_columns(published), PAPER)]


def implementation_markdown(data: dict, implementation: str, pretrained: str) -> list[str]:
    rows = data[implementation]
    table = data["published_tables"][implementation]
    lines = [f"### {IMPLEMENTATION[implementation]}", ""]
    if table:
        lines.append(
            f"Cells: ours (paper). Paper: McNamara (2026) Table {table}, Llama-3-8B fine-tuned on OBQA with "
            f"{_METHOD[data['method']]}; ours: {pretrained}, {_METHOD.get(data['method'], data['method'])}, "
            f"ID {data['id_task']}. Same tasks and method, another model: compare the deltas, not the values."
        )
    else:
        lines.append(f"No published table matches (ID task {data['id_task']}, method {data['method']}): ours only.")
    lines.append("")
    reasons = [f"- {r['dataset']} {r['k_label']}: not computed: {r['reason']}" for r in rows if r.get("reason")]
    return lines + rows_markdown(rows, implementation_columns(), PAPER) + reasons + ([""] if reasons else [])


def run(args) -> int:
    from lm_eval_evidential.audits.paper_tables import DATASETS, paper_tables

    refuse_self_comparison(args.id_task, args.ood_tasks)
    id_records, *ood = load(args, [args.id_task, *args.ood_tasks])
    refuse_same_questions(id_records, ood)
    paper = [t for t in args.ood_tasks if t in DATASETS]
    if not paper:
        raise InvalidValueError(
            f"--ood {','.join(args.ood_tasks)}: tables computes McNamara (2026)'s Tables 1 and 3-6, whose OOD tasks "
            f"are {', '.join(DATASETS)} (csqa4_edl: CSQA's removed-E row, beside csqa_edl); name at least one of "
            "them, or audit other tasks with `lm-eval-evidential ood` / `ksweep`"
        )
    data = paper_tables(
        id_records,
        dict(zip(args.ood_tasks, ood)),
        phantom=args.phantom,
    )
    pretrained = str(id_records.meta.get("peft") or id_records.meta.get("pretrained") or "the records' model")
    lines = [f"## McNamara (2026) tables: {args.id_task} (ID) against {', '.join(args.ood_tasks)}", ""]
    if data["ignored"]:
        lines += [f"Not in the paper's tables (audit them with `ood`): {', '.join(data['ignored'])}.", ""]
    lines += [f"{note}: its columns are –." for note in data["notes"]] + ([""] if data["notes"] else [])
    for task, entry in data["table1"].items():
        lines += table1_markdown(args.id_task, task, entry)
    for implementation in ("A", "B"):
        if data[implementation]:
            lines += implementation_markdown(data, implementation, pretrained)
    print("\n".join(lines))
    if args.json_path:
        write_json(args.json_path, data)
    return 0
