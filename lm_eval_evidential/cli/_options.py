"""What the audit subcommands share: their arguments, the one comma-list parser, loading, tables."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence

from lm_eval_evidential.errors import InvalidValueError


class HelpFormatter(argparse.HelpFormatter):
    """Every subcommand's help: an option's real default, said once.

    ``(default: X)`` is appended unless the help text already speaks of its default, the option
    is required or positional, or it has no default (None, False, empty).
    """

    def _get_help_string(self, action) -> str:
        text = action.help or ""
        if "default" in text.lower() or action.required or not action.option_strings:
            return text
        if action.default in (None, False, "", argparse.SUPPRESS):
            return text
        return text + " (default: %(default)s)"


def describe(doc: str | None) -> str:
    """A subcommand's description from its module docstring: the first paragraph after ``name``: , as
    plain text (no reST markup, first letter capitalised)."""
    text = " ".join((doc or "").split("\n\n")[0].split(": ", 1)[-1].replace("``", "").split())
    return text[:1].upper() + text[1:]


def _no_control_characters(name: str, text: str, what: str) -> str:
    import unicodedata

    if any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in name):
        raise argparse.ArgumentTypeError(
            f"{what} name {text!r} contains a control character (a newline, tab or NUL); no {what} name has one — "
            "retype it"
        )
    return name


def comma_list(what: str):
    """An argparse ``type`` for comma-separated names: ``"a, b,a"`` -> ``["a", "b"]`` (duplicates
    dropped, order kept, spaces around each name removed). The one parser of comma lists in the CLI;
    an empty list, or a name with a control character (newline, tab, NUL), is a usage error."""

    def parse(text: str) -> list[str]:
        names = list(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
        if not names:
            raise argparse.ArgumentTypeError(f"no {what} names in {text!r}; give one or more, separated by commas")
        return [_no_control_characters(name, text, what) for name in names]

    parse.__name__ = f"{what} list"  # argparse names the type in its messages
    return parse


def one_task(list_hint: str = "lists go to --ood, --target or --task"):
    """An argparse ``type`` for an option that takes ONE task: the name without surrounding spaces.

    The one parser of single task names (``--id``, ``ksweep --ood``), with :func:`comma_list` for
    lists: an empty name, a control character and a comma list (``a,b``) are usage errors; the
    comma list's message ends with ``list_hint``, what to do instead for this option.
    """

    def parse(text: str) -> str:
        name = text.strip()
        if not name:
            raise argparse.ArgumentTypeError(f"no task name in {text!r}; give one task, e.g. obqa_edl")
        _no_control_characters(name, text, "task")
        if "," in name:
            raise argparse.ArgumentTypeError(f"{text!r} is a list, this option takes one task; {list_hint}")
        return name

    parse.__name__ = "task name"  # argparse names the type in its messages
    return parse


#: ``--id`` of every audit command: one task.
task_name = one_task("give one task (lists go to --ood, --target or --task)")


def score_list(text: str) -> list[str]:
    """``--scores``: a comma list validated by the one score-name validator."""
    from lm_eval_evidential.metrics.scores import check_score_names

    try:
        return check_score_names(comma_list("score")(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _int_at_least(minimum: int, what: str):
    """An argparse ``type``: an integer >= ``minimum``, else a usage error naming the value."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return value

    parse.__name__ = what
    return parse


def unit_fraction(option: str, *, closed_low: bool = False):
    """An argparse ``type``: a number in (0, 1] (``[0, 1]`` with ``closed_low``), else a usage error naming it."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        low_ok = value >= 0.0 if closed_low else value > 0.0
        if not (low_ok and value <= 1.0):
            interval = "[0, 1]" if closed_low else "(0, 1]"
            raise argparse.ArgumentTypeError(f"{option} must be a number in {interval}, got {text!r}")
        return value

    parse.__name__ = "fraction"
    return parse


positive_int = _int_at_least(1, "a positive integer")
non_negative_int = _int_at_least(0, "a non-negative integer")


def add_audit_parser(
    sub,
    name: str,
    doc: str | None,
    run,
    *,
    help: str,
    description: str | None = None,
    tasks: bool = False,
    id_help: str | None = None,
    k_policy: bool = False,
    scores: bool | str = False,
    json: bool = False,
):
    """The subparser of an audit command: its help and description (default: the module
    docstring's first paragraph), the output path with ``--run``/``--allow-fingerprint-mismatch``,
    and on request ``--task T[,T…]``, ``--id TASK`` (with help ``id_help``), ``--k-policy``,
    ``--scores`` (``scores`` a string: what the command uses without it) and ``--json``."""
    if description is None:
        description = describe(doc)
    p = sub.add_parser(name, help=help, description=description)
    add_output_path(p)
    if name != "permutations":  # the one audit that reads a permuted run order by order
        add_average_orders(p)
    if tasks:
        p.add_argument(
            "--task",
            dest="tasks",
            required=True,
            type=comma_list("task"),
            metavar="T[,T…]",
            help="task name(s), comma-separated, all from one run",
        )
    if id_help:
        p.add_argument("--id", dest="id_task", required=True, type=task_name, metavar="TASK", help=id_help)
    if k_policy:
        add_k_policy(p)
    if scores:
        add_scores(p, **({"default": scores} if isinstance(scores, str) else {}))
    if json:
        add_json(p)
    p.set_defaults(func=run)
    return p


def add_k_policy(parser) -> None:
    from lm_eval_evidential.metrics.cardinality import POLICIES

    parser.add_argument(
        "--k-policy",
        dest="k_policy",
        choices=POLICIES,
        default="assert",
        help="assert (default): refuse a comparison across different K; restrict: keep only examples with the ID "
        "task's K; report: compare anyway and mark the rows matched: false",
    )


def open_fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (0.0 < value < 1.0):
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), got {text!r}")
    return value


open_fraction.__name__ = "fraction"


def add_ood_tasks(parser, help: str = "OOD task(s), comma-separated", required: bool = True) -> None:
    parser.add_argument(
        "--ood", dest="ood_tasks", required=required, type=comma_list("task"), metavar="T1,T2", help=help
    )


def add_phantom(parser) -> None:
    from lm_eval_evidential.metrics.ksweep import PHANTOM_MODES

    parser.add_argument(
        "--phantom",
        choices=PHANTOM_MODES,
        default="zero",
        help="how the K sweep appends options: zero (default; zero evidence, McNamara 2026 Table 1), model (the "
        "model's own next labels ' E'.. from the records' phantom logits; EDL and softmax records), count (only "
        "vacuity's K grows: u = (K+x)/S, every other score unchanged)",
    )


def add_output_path(parser) -> None:
    parser.add_argument("output_path", help="the folder given to lm_eval --output_path")
    parser.add_argument("--run", default=None, help="a run's date_id (default: the newest run that has every task)")
    parser.add_argument(
        "--allow-fingerprint-mismatch",
        action="store_true",
        help="compare records even if they were produced by different models/settings (listed as warnings)",
    )


def add_average_orders(parser) -> None:
    parser.add_argument(
        "--average-orders",
        dest="average_orders",
        action="store_true",
        help="read a permuted run (--metadata permutations) as one record per question: the mixture of its orders' "
        "predictions, options in their unpermuted places (marked; without it such a run is refused, exit 2)",
    )


def add_json(parser) -> None:
    parser.add_argument(
        "--json", dest="json_path", default=None, metavar="FILE", help="also write the rows as a JSON list"
    )


def add_scores(parser, default: str = "every score the records can give") -> None:
    """``--scores``; ``default`` says what the command uses without it."""
    from lm_eval_evidential.metrics.scores import SCORES

    parser.add_argument(
        "--scores",
        default=None,
        type=score_list,
        metavar="A,B",
        help=f"comma-separated score names (default: {default}); one of: {', '.join(SCORES)}",
    )


def load(args, tasks: Sequence[str], *, orders: bool = True) -> list:
    """The records of ``tasks`` (in that order, repeats allowed) from one run, via the one loader.

    Says on stderr which run was read and any producer difference ``--allow-fingerprint-mismatch``
    let through; a refused mismatch raises FingerprintMismatchError (exit status 2). A permuted
    run goes through the one rule of :func:`~lm_eval_evidential.records.orders.records_for_audit`
    (every audit but ``permutations``; ``orders=False`` leaves it to the caller, as ``report`` does):
    refused (exit status 2) unless ``--average-orders``, which averages each question's orders
    into one record and says so on stderr.
    """
    from lm_eval_evidential.records.loading import load_run

    run = load_run(
        args.output_path, list(tasks), run=args.run, allow_fingerprint_mismatch=args.allow_fingerprint_mismatch
    )
    print(run.describe(), file=sys.stderr)
    for line in run.fingerprint_warnings:
        print(f"warning: fingerprint differs: {line}", file=sys.stderr)
    records = [run[t] for t in tasks]
    if orders and args.command != "permutations":
        records = audit_orders(args, records)
    return records


def audit_orders(args, records: list) -> list:
    """``records`` through the one rule for permuted runs (``--average-orders``), re-marked as checked
    together and each averaged task said on stderr (the mark of order-averaged numbers)."""
    from lm_eval_evidential.records.orders import ORDER_AVERAGED, records_for_audit
    from lm_eval_evidential.records.provenance import checked_together

    out = records_for_audit(
        records,
        command=args.command,
        average=getattr(args, "average_orders", False),
        compared=getattr(args, "id_task", None) is not None,
    )
    if all(a is b for a, b in zip(out, records)):
        return records
    for r in {r.task: r for r in out if ORDER_AVERAGED in r.meta}.values():
        said = r.meta[ORDER_AVERAGED]
        low, high = said["orders_per_question"]
        print(
            f"note: {r.task}: each question's {low if low == high else f'{low}-{high}'} answer orders "
            f"({said['permutations']}) averaged into one record ({said['records']} records -> {len(r)} questions; "
            "--average-orders): the numbers below are of the order-averaged predictions",
            file=sys.stderr,
        )
    return checked_together(out, allow=args.allow_fingerprint_mismatch)[0]


def format_table(rows: Sequence[dict], columns: Sequence[str]) -> str:
    """A plain-text table (floats to 4 decimals, NaN shown as 'nan')."""

    def cell(v):
        if isinstance(v, float):  # a tiny negative prints as 0.0000, never -0.0000
            return "nan" if math.isnan(v) else f"{v if round(v, 4) else 0.0:.4f}"
        if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, float) for x in v):
            return f"[{cell(v[0])}, {cell(v[1])}]"
        return "" if v is None else str(v)

    body = [[cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(b[i]) for b in body)) if body else len(c) for i, c in enumerate(columns)]
    line = lambda cells: "  ".join(x.rjust(w) if i else x.ljust(w) for i, (x, w) in enumerate(zip(cells, widths)))  # noqa: E731
    return "\n".join([line(columns), line(["-" * w for w in widths]), *(line(b) for b in body)])


def print_rows(rows: Sequence[dict], columns: Sequence[str], label_keys: Sequence[str], written=(), notes=()) -> int:
    """Print the table, a ``note:`` per row reason and per extra note, and the files written; exit 0."""
    print(format_table(rows, columns))
    for row in rows:
        if row.get("reason"):
            print(f"note: {' / '.join(str(row[k]) for k in label_keys)}: {row['reason']}")
    for line in notes:
        print(f"note: {line}")
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0


def print_refusals(refusals, why: str | None = None) -> None:
    """One stderr line per refused pair (``(id_task, ood_task, CardinalityMismatchError)``), then why, once
    (``why``: the command's own reason; default the OOD-detection one).

    The remedies name the OOD task's shipped K-matched controls and are worded for this CLI
    (``--k-policy restrict``, not the API's ``k_policy=restrict``).
    """
    from lm_eval_evidential.metrics.cardinality import MISMATCH_REASON
    from lm_eval_evidential.tasks import tasks_dir
    from lm_eval_evidential.tasks.distractors import control_tasks

    shipped = control_tasks(tasks_dir()) if refusals else {}
    for id_task, task, exc in refusals:
        remedy = exc.remedy([c["task"] for c in shipped.get(task, [])]).replace("k_policy=", "--k-policy ")
        print(f"refused {id_task} vs {task}: {exc.summary}. {remedy}", file=sys.stderr)
    if refusals:
        print(f"why: {why or MISMATCH_REASON}", file=sys.stderr)


#: What comparing a task with itself gives, per option naming the other side.
_SELF = {
    "--ood": "AUROC 0.5 by construction",
    "--target": "a perfect accuracy estimate by construction",
}


def refuse_self_comparison(id_task: str, others, option: str = "--ood") -> None:
    """The one rule for every command that compares two tasks: never a task with itself.

    By name here (names are parsed by :func:`task_name`/:func:`comma_list`, so ``' a'`` is ``a``);
    by content after loading (:func:`refuse_same_questions`).
    """
    if id_task in others:
        raise InvalidValueError(
            f"--id and {option} both name {id_task!r}: comparing a task with itself gives {_SELF[option]}; pass a "
            f"different {option} task"
        )


def refuse_same_questions(id_records, others, option: str = "--ood") -> None:
    """Two differently named tasks whose records say they were evaluated on the same questions are one task
    compared with itself: a records file copied under another name (the same ``data_source``), or the same
    rows in two forms, e.g. ``arc_c_edl`` and the lettered view ``arc_challenge_edl``
    (:func:`~lm_eval_evidential.records.provenance.same_questions`)."""
    from lm_eval_evidential.records.provenance import same_questions

    mine = id_records.meta.get("data_source")
    for other in others:
        theirs = other.meta.get("data_source")
        if other.task == id_records.task or not same_questions(mine, theirs):
            continue
        if mine == theirs:
            raise InvalidValueError(
                f"--id {id_records.task} and {option} {other.task} were evaluated on the same questions (data_source "
                f"{mine.get('dataset')} {mine.get('configs')}, content hash {mine.get('sha256')}): one is a copy of "
                f"the other, comparing them gives {_SELF[option]}; re-run the evaluation of {other.task} "
                f"({other.path or 'records'})"
            )
        raise InvalidValueError(
            f"--id {id_records.task} and {option} {other.task} ask the same questions in two forms (the same rows of "
            f"{mine.get('dataset')} {mine.get('configs')}, rows hash {mine.get('rows_sha256')}): comparing them "
            f"measures the change of prompt, not of questions; pass a {option} task on other questions"
        )


def check_outputs(args) -> None:
    """Refuse, before any work, an output option that would destroy data: ``--json``/``--plot`` onto a
    folder, a records or results file (:func:`~lm_eval_evidential.files.check_output_file`), and
    ``report --out`` onto a file or a folder that is not a previous report."""
    from lm_eval_evidential.files import check_output_file, check_output_folder

    if getattr(args, "json_path", None):
        check_output_file(args.json_path, option="--json")
    if getattr(args, "plot", None):
        from lm_eval_evidential.plots import figure_base

        base = figure_base(args.plot)
        for suffix in (".png", ".svg"):
            check_output_file(base.with_name(base.name + suffix), option=f"--plot {args.plot} would write")
    if getattr(args, "command", None) == "report":
        from lm_eval_evidential.report import is_report_folder

        check_output_folder(args.out_dir, replaceable=is_report_folder, option="--out")
