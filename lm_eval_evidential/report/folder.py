"""The report folder: checks the inputs, builds the data, writes ``report.json``, ``report.md`` and figures."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from lm_eval_evidential.audits.compare import method_kind
from lm_eval_evidential.audits.conformal import CALIBRATION_FRACTION
from lm_eval_evidential.audits.ood_groups import FPR95
from lm_eval_evidential.errors import InvalidValueError, OutputPathError
from lm_eval_evidential.files import atomic_folder, atomic_write_text, read_regular_file, write_json
from lm_eval_evidential.metrics.calibration import N_BINS
from lm_eval_evidential.metrics.conformal import ALPHA
from lm_eval_evidential.metrics.intervals import N_BOOT
from lm_eval_evidential.metrics.ksweep import MAX_EXTRA, PHANTOM
from lm_eval_evidential.params import validate_params
from lm_eval_evidential.records import Records, checked_together
from lm_eval_evidential.records.orders import records_for_audit
from lm_eval_evidential.report.data import check_policies, report_data
from lm_eval_evidential.report.markdown import APPENDIX_FILE, render_appendix, render_markdown
from lm_eval_evidential.report.types import Report


# Size options refused before any work (a section would otherwise only be skipped), by the metrics' own words.
@validate_params(
    {
        "n_boot": N_BOOT,
        "n_bins": N_BINS,
        "max_extra": MAX_EXTRA,
        "phantom": PHANTOM,
        "alpha": ALPHA,
        "fpr95": FPR95,
        "calibration_fraction": CALIBRATION_FRACTION,
    }
)
def build_report(
    id_records: Records,
    ood_records: Sequence[Records],
    out_dir,
    *,
    k_policy: str | Sequence[str] = "assert",
    scores: Sequence[str] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    max_extra: int = 4,
    n_bins: int = 15,
    allow_fingerprint_mismatch: bool = False,
    phantom: str = "zero",
    groups: Mapping[str, Sequence[str]] | None = None,
    alpha: float = 0.1,
    calibration_fraction: float = 0.5,
    fpr95: str = "openood",
    percent: bool = False,
    average_orders: bool = False,
    compare: Mapping[str, Sequence[Records]] | None = None,
    name: str | None = None,
) -> Report:
    """Write ``report.md``, ``appendix.md`` (every score), ``report.json`` and the figures (PNG + SVG) into
    ``out_dir``; return the report dict.

    ``k_policy`` is one policy or several (one OOD table each); the K sweep, ATC and the
    other per-pair sections use the first. ``scores`` restricts every section to those
    score names (default: every score the records can give; the K sweep and the risk-coverage
    figure default to ``OOD_DEFAULT_SCORES``). ``phantom`` is the K sweep's mode (``zero``, ``model``
    or ``count``: :func:`~lm_eval_evidential.audits.ood.ksweep_rows`). The dict has the sections ``summary,
    meta, k_histograms, policies, k_effect, ood, controls, ksweep, calibration, selective, atc, orders, figures,
    skipped``, all rows JSON-ready (:class:`~lm_eval_evidential.report.types.Report`). An OOD
    task equal to the ID task is refused (ValueError). Records of different producers raise
    ``FingerprintMismatchError`` before anything is written, unless ``allow_fingerprint_mismatch``
    (then the differences are in ``meta_warnings``) or they were checked together before
    (:func:`~lm_eval_evidential.records.loading.load_run`): the one producer check of the report.
    Records of a permuted run are refused (``PermutedRecordsError``) unless ``average_orders``: then
    every section reads each question's orders averaged into one record
    (:func:`~lm_eval_evidential.records.orders.records_for_audit`), and the "Answer order" section
    the orders themselves.

    The sections on conformal sets and temperature scaling calibrate on a seeded ``calibration_fraction``
    of the ID records (``seed``) and evaluate on the rest (conformal sets at miscoverage ``alpha``);
    ``groups`` (``{"near": [task, ...], "far": [...]}``, tasks among ``ood_records``) adds OpenOOD's
    table, its FPR@95 in the ``fpr95`` direction, times 100 with ``percent``
    (:mod:`lm_eval_evidential.report.field`); ``compare``, ``name``: "Methods side by side" (:func:`_checked_inputs`).

    The folder is written whole or not at all (:func:`~lm_eval_evidential.files.atomic_folder`):
    built beside ``out_dir`` and swapped in, so a killed or failed run never leaves files of two
    runs side by side. An existing ``out_dir`` is replaced only if it is a previous report (or
    empty); a file, another folder, or a folder holding the records read are refused
    (:class:`~lm_eval_evidential.errors.OutputPathError`), like bad options, before any work.
    """
    policies = check_policies(k_policy)
    inputs = id_records, ood_records, groups, out_dir, allow_fingerprint_mismatch, average_orders
    id_records, ood_records, groups, permuted, runs = _checked_inputs(*inputs, compare=compare, name=name)
    with atomic_folder(Path(out_dir), replaceable=is_report_folder) as staging:
        report = report_data(
            id_records,
            ood_records,
            staging,
            policies,
            scores=scores,
            n_boot=n_boot,
            seed=seed,
            level=level,
            max_extra=max_extra,
            n_bins=n_bins,
            phantom=phantom,
            groups=groups,
            alpha=alpha,
            calibration_fraction=calibration_fraction,
            fpr95=fpr95,
            percent=percent,
            permuted=permuted,
            compare=runs,
        )
        _write(staging, report)
        return report


def _write(folder: Path, report: Report) -> None:
    """The report's files: its data (``report.json``), ``report.md`` and the appendix."""
    write_json(folder / "report.json", report)
    atomic_write_text(folder / "report.md", render_markdown(report))
    atomic_write_text(folder / APPENDIX_FILE, render_appendix(report))


def _checked_inputs(
    id_records, ood_records, groups, out_dir, allow_fingerprint_mismatch, average_orders, *, compare, name
):
    """``(id_records, ood_records, groups, permuted, runs)`` as the report reads them (:func:`check_groups`,
    :func:`_checked_records`), before any work. ``runs`` (None without ``compare``): every method's records, the
    ID task's first, for "Methods side by side" (:mod:`~lm_eval_evidential.report.comparison`): this run, named
    ``name`` (default: its method in words, ``method_kind``), then each of ``compare`` (``{method: its run's
    records of every task}``, :func:`_checked_compare`)."""
    ood_records = list(ood_records)
    groups = check_groups(groups, [r.task for r in ood_records])
    own = name or method_kind(id_records)
    others = _checked_compare(compare, own, [id_records.task, *(r.task for r in ood_records)], average_orders)
    compared = [r for records in others.values() for r in records]
    checked = _checked_records(id_records, ood_records, out_dir, allow_fingerprint_mismatch, average_orders, compared)
    id_records, ood_records, permuted = checked
    runs = {own: [id_records, *ood_records], **others} if others else None
    if runs:  # before any work: a run given twice would tie every row of "Methods side by side"
        from lm_eval_evidential.audits.compare import refuse_one_run_twice, refuse_other_questions

        by_method = {m: {r.task: r for r in records} for m, records in runs.items()}
        refuse_one_run_twice(by_method, id_records.task)
        refuse_other_questions(by_method, [id_records.task, *(r.task for r in ood_records)])
    return id_records, ood_records, groups, permuted, runs


def _checked_compare(compare, name: str, tasks: list[str], average_orders: bool) -> dict[str, list[Records]]:
    """The other methods' records, each ordered as ``tasks`` (the ID task, then the OOD tasks) and read by the one
    rule for permuted runs: every method named once (``name``, this run's, among them) and holding every task,
    else ValueError before any work."""
    out: dict[str, list[Records]] = {}
    for method, records in (compare or {}).items():
        method = str(method)
        if method == name or method in out:
            raise InvalidValueError(
                f"method name {method!r} is given twice (this report's run is {name!r}); give each method its own name"
            )
        by_task = {r.task: r for r in records}
        missing = [t for t in tasks if t not in by_task]
        if missing:
            raise InvalidValueError(
                f"compared method {method!r} has no records of {', '.join(missing)}; evaluate every task of the "
                f"report ({', '.join(tasks)}) in its run"
            )
        out[method] = [by_task[t] for t in tasks]
    return {
        method: records_for_audit(records, command="report", average=average_orders, compared=True)
        for method, records in out.items()
    }


def _checked_records(
    id_records: Records,
    ood_records: list[Records],
    out_dir,
    allow_fingerprint_mismatch: bool,
    average_orders: bool,
    compared: Sequence[Records] = (),
):
    """``(id_records, ood_records, permuted)`` as the report reads them: at least one OOD task, none the ID task,
    one producer (the report's one check, marked for the audits), a permuted run averaged per question with its
    orders kept for the "Answer order" section (``permuted``; None otherwise), and no records file inside the
    report folder (nor one of the ``compared`` methods')."""
    if not ood_records:
        raise InvalidValueError("build_report needs at least one OOD task")
    same = [r.task for r in ood_records if r.task == id_records.task]
    if same:
        raise InvalidValueError(
            f"{same[0]!r} is both the ID task and an OOD task: comparing a task with itself gives AUROC 0.5 by "
            "construction; leave it out of the OOD tasks"
        )
    all_records, _ = checked_together([id_records, *ood_records], allow=allow_fingerprint_mismatch)
    id_records, *ood_records = all_records  # marked: the audits below do not check again
    averaged = records_for_audit(all_records, command="report", average=average_orders, compared=True)
    permuted = None
    if any(a is not b for a, b in zip(averaged, all_records)):  # a permuted run: its orders for one section
        permuted = all_records
        id_records, *ood_records = checked_together(averaged, allow=allow_fingerprint_mismatch)[0]
    out = Path(out_dir)
    for r in [*all_records, *compared]:
        if r.path is not None and out.resolve() in Path(r.path).resolve().parents:
            raise OutputPathError(
                f"report folder {out} holds {r.path}, a records file this report reads; name a folder outside the "
                "records"
            )
    return id_records, ood_records, permuted


def check_groups(groups, ood_tasks: Sequence[str]) -> dict[str, list[str]] | None:
    """Named OOD groups as ``{group: [task, ...]}`` (None: none), each task one of ``ood_tasks`` and in one group
    only (ValueError otherwise, before any work)."""
    named = {str(g): list(tasks) for g, tasks in (groups or {}).items() if tasks}
    if not named:
        return None
    tasks = [t for ts in named.values() for t in ts]
    twice = sorted({t for t in tasks if tasks.count(t) > 1})
    if twice:
        raise InvalidValueError(f"{', '.join(twice)} named in more than one group; a task belongs to one group")
    unknown = [t for t in tasks if t not in ood_tasks]
    if unknown:
        raise InvalidValueError(
            f"group task(s) {', '.join(unknown)} are not among the OOD tasks ({', '.join(ood_tasks)}); name each "
            "grouped task as an OOD task too"
        )
    return named


def is_report_folder(path) -> bool:
    """Whether ``path`` holds a report written by :func:`build_report` (its report.json)."""
    try:
        report = json.loads(read_regular_file(Path(path) / "report.json", what="report", max_bytes=1 << 30))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(report, dict) and "id_task" in report and "mismatch_statement" in report
