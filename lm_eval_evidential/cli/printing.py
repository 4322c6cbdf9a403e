"""How an audit subcommand prints its rows: a plain-text table, a note per row reason, the files written."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence

from lm_eval_evidential.audits.table import Column, rows_text


def format_table(rows: Sequence[Mapping], columns: Sequence[Column | str]) -> str:
    """A plain-text table of ``rows`` by the audits' one renderer (:func:`~lm_eval_evidential.audits.table.rows_text`:
    floats to 4 decimals, NaN shown as 'nan')."""
    return rows_text(rows, columns)


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
