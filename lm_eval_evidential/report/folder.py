"""The report folder: checks the inputs, builds the data, writes ``report.json``, ``report.md`` and figures."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from lm_eval_evidential.errors import InvalidValueError, OutputPathError
from lm_eval_evidential.files import atomic_folder, atomic_write_text, read_regular_file, write_json
from lm_eval_evidential.metrics.calibration import check_n_bins
from lm_eval_evidential.metrics.cardinality import check_max_extra, check_phantom_mode
from lm_eval_evidential.metrics.detection import check_n_boot
from lm_eval_evidential.records import Records, checked_together
from lm_eval_evidential.report.data import check_policies, report_data
from lm_eval_evidential.report.markdown import APPENDIX_FILE, render_appendix, render_markdown
from lm_eval_evidential.report.types import Report


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

    The folder is written whole or not at all (:func:`~lm_eval_evidential.files.atomic_folder`):
    built beside ``out_dir`` and swapped in, so a killed or failed run never leaves files of two
    runs side by side. An existing ``out_dir`` is replaced only if it is a previous report (or
    empty); a file, another folder, or a folder holding the records read are refused
    (:class:`~lm_eval_evidential.errors.OutputPathError`), like bad options, before any work.
    """
    policies = check_policies(k_policy)
    check_n_boot(n_boot)  # size options refused before any work (a section would otherwise only be skipped)
    check_max_extra(max_extra)
    check_phantom_mode(phantom)
    check_n_bins(n_bins)
    ood_records = list(ood_records)
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
    out = Path(out_dir)
    for r in all_records:
        if r.path is not None and out.resolve() in Path(r.path).resolve().parents:
            raise OutputPathError(
                f"report folder {out} holds {r.path}, a records file this report reads; name a folder outside the "
                "records"
            )
    with atomic_folder(out, replaceable=is_report_folder) as staging:
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
        )
        write_json(staging / "report.json", report)
        atomic_write_text(staging / "report.md", render_markdown(report))
        atomic_write_text(staging / APPENDIX_FILE, render_appendix(report))
        return report


def is_report_folder(path) -> bool:
    """Whether ``path`` holds a report written by :func:`build_report` (its report.json)."""
    try:
        report = json.loads(read_regular_file(Path(path) / "report.json", what="report", max_bytes=1 << 30))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(report, dict) and "id_task" in report and "mismatch_statement" in report
