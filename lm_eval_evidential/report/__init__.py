"""One folder with every audit of an ID task against OOD tasks: ``report.md``, ``report.json``, figures.

:func:`build_report` runs, on loaded :class:`~lm_eval_evidential.records.Records`:

1. the K check and OOD-detection table of each OOD task under each requested ``k_policy``
   (:func:`lm_eval_evidential.audits.ood.ood_rows`); a pair refused under a policy is listed with
   the reason and the remedy that fits it, never compared;
2. the K sweep of each accepted pair (McNamara (2026) arXiv:2605.06382, Table 1 / Figure 1)
   with its DeLong test;
3. calibration, selective prediction (PRR, AURC), ATC accuracy estimates and score-order
   equivalence (:mod:`lm_eval_evidential.audits.quality`);
4. a summary of all of it (:func:`summarize`), which ``report.md`` opens with: the valid
   (K-matched) comparisons with their headline AUROC / AUPR-In and CIs, what was refused and
   why, the size of the artefact the K sweep shows, and whether the numbers are illustrative
   only (records of the bundled tiny model).

Sections 2 and 3 use the *first* policy given. A section that cannot be computed on these
records (e.g. the K sweep of softmax records, which have no alpha) is reported as skipped with
the reason; everything else is still written. ``report.md`` shows the few scores that matter
(:data:`~lm_eval_evidential.metrics.scores.OOD_DEFAULT_SCORES`) and every score is in
``appendix.md`` beside it. All files are written atomically, and the folder too (built beside, swapped in).

The package, one module per step: :mod:`.data` builds the report's data (the sections, with
their figures), :mod:`.controls` the K-matched controls side by side, :mod:`.summary` the
summary, :mod:`.markdown` renders ``report.md`` from the data alone, :mod:`.folder` checks the
inputs and writes the folder; :mod:`.types` names every row the report makes.
"""

from lm_eval_evidential.report.controls import RESTRICT_CONTROL, control_rows
from lm_eval_evidential.report.data import MISMATCH_STATEMENT
from lm_eval_evidential.report.folder import build_report, is_report_folder
from lm_eval_evidential.report.markdown import APPENDIX_FILE, ILLUSTRATIVE_NOTE, render_appendix, render_markdown
from lm_eval_evidential.report.summary import summarize
from lm_eval_evidential.report.types import Report

__all__ = [
    "APPENDIX_FILE",
    "MISMATCH_STATEMENT",
    "ILLUSTRATIVE_NOTE",
    "RESTRICT_CONTROL",
    "Report",
    "build_report",
    "control_rows",
    "is_report_folder",
    "summarize",
    "render_markdown",
    "render_appendix",
]
