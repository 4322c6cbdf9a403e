"""How an audit subcommand prints its rows: a plain-text table, a note per row reason, the files written."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence


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
