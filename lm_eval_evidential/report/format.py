"""How the report writes numbers, intervals, K and p-values (in tables and in labels alike), its Markdown tables and
figure links."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

from lm_eval_evidential.metrics.cardinality import format_k  # noqa: F401 (the one rendering of K, re-exported)
from lm_eval_evidential.metrics.scores import OOD_DEFAULT_SCORES

#: The file beside ``report.md`` with every score's tables.
APPENDIX_FILE = "appendix.md"


def format_number(v, digits: int = 3, signed: bool = False) -> str:
    """``v`` with ``digits`` decimals (``signed``: always a sign); ``n/a`` for None or NaN, yes/no for a bool.

    >>> format_number(-1e-17, signed=True), format_number(0.12345), format_number(float("nan")), format_number(True)
    ('+0.000', '0.123', 'n/a', 'yes')
    """
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        v = v if round(v, digits) else 0.0  # no "-0.000" for a tiny negative
        return f"{v:+.{digits}f}" if signed else f"{v:.{digits}f}"
    return str(v)


def format_ci(v) -> str:
    """An interval ``[lo, hi]``, or ``n/a`` when it is missing or undefined."""
    return f"[{format_number(v[0])}, {format_number(v[1])}]" if v and not all(x is None or x != x for x in v) else "n/a"


def format_p(p) -> str:
    """A p-value with two significant digits (``n/a`` when undefined)."""
    return "n/a" if p is None or p != p else f"{p:.2g}"


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown_table(headers: Sequence[str], body: Sequence[Sequence]) -> list[str]:
    """The lines of a Markdown table (a ``|`` in a cell escaped, a newline made a space), and a blank line.

    >>> markdown_table(["a", "b"], [[1, "x|y"]])
    ['| a | b |', '|---|---|', '| 1 | x\\|y |', '']
    """
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in body]
    return lines + [""]


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
