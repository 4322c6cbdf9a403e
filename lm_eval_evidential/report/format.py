"""How the report writes reasons and figure links; numbers, p-values, intervals and K in its prose are written as
the audits' one renderer writes them (:mod:`lm_eval_evidential.audits.table`, re-exported here), and every table
by that renderer (``rows_markdown``)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from lm_eval_evidential.audits.table import (  # noqa: F401 (the one writing of numbers, re-exported)
    format_ci,
    format_number,
    format_p,
)
from lm_eval_evidential.metrics.cardinality import format_k  # noqa: F401 (the one rendering of K, re-exported)
from lm_eval_evidential.metrics.scores import OOD_DEFAULT_SCORES

#: The file beside ``report.md`` with every score's tables.
APPENDIX_FILE = "appendix.md"


def figure_lines(figures: Mapping[str, Sequence[str]], name: str, caption: str) -> list[str]:
    """A figure of the report (its PNG shown, the other files linked) with its caption; nothing if not drawn."""
    files = figures.get(name)
    if not files:
        return []
    png = next((f for f in files if f.endswith(".png")), files[0])
    others = ", ".join(f"[{f}]({f})" for f in files if f != png)
    return [f"![{caption}]({png})", "", f"*{caption}* ({others})" if others else f"*{caption}*", ""]


def undefined_lines(rows: Sequence[Mapping]) -> list[str]:
    """``Undefined values (n/a):`` and one line per row with a ``reason`` (its task and score); nothing if none."""
    out = [
        f"- {r.get('task') or r.get('target_task') or r.get('set') or ''} {r.get('score', '')}: {r['reason']}"
        for r in rows
        if r.get("reason")
    ]
    return ["Undefined values (n/a):", *out, ""] if out else []


def headline_rows(rows: Sequence[Mapping], key: str = "score") -> list:
    """The rows of the few scores that matter (OOD_DEFAULT_SCORES), or all rows if none is among them."""
    few = [r for r in rows if r.get(key) in OOD_DEFAULT_SCORES]
    return few or list(rows)


def file_slug(name: str) -> str:
    """``name`` as a file name: every run of characters other than letters, digits, ``_.-`` made one ``_``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
