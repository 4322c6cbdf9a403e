"""What the audit subcommands refuse, with the remedy: K-mismatched pairs (said on stderr), a task compared
with itself (by name or by content), and output options that would destroy data."""

from __future__ import annotations

import sys

from lm_eval_evidential.errors import InvalidValueError


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

    By name here (names are parsed by :func:`~.arguments.task_name`/:func:`~.arguments.comma_list`, so
    ``' a'`` is ``a``); by content after loading (:func:`refuse_same_questions`).
    """
    if id_task in others:
        gives = _SELF.get(option, _SELF["--ood"])  # --near, --far: OOD tasks too
        raise InvalidValueError(
            f"--id and {option} both name {id_task!r}: comparing a task with itself gives {gives}; pass a "
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
        check_output_folder(args.out_dir, replaceable=_is_report_folder, option="--out")


def _is_report_folder(path) -> bool:
    # Imported only when --out has files: the report package imports scipy and matplotlib, seconds on a loaded
    # machine before report's first line.
    from lm_eval_evidential.report import is_report_folder

    return is_report_folder(path)
