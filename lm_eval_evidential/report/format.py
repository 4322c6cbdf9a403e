"""How the report writes numbers, intervals, K and p-values (in tables and in labels alike)."""

from __future__ import annotations

import math

from lm_eval_evidential.metrics.cardinality import format_k  # noqa: F401 (the one rendering of K, re-exported)


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
