"""What every audit subcommand shares: the output-path argument, loading records, JSON and tables."""

from __future__ import annotations

import math
from collections.abc import Sequence


def add_output_path(parser) -> None:
    parser.add_argument("output_path", help="the folder given to lm_eval --output_path")
    parser.add_argument("--run", default=None, help="a run's date_id (default: the newest run that has the task)")


def add_json(parser) -> None:
    parser.add_argument("--json", dest="json_path", default=None, metavar="FILE", help="also write the rows as a JSON list")


def split_tasks(value: str) -> list[str]:
    tasks = [t.strip() for t in value.split(",") if t.strip()]
    if not tasks:
        raise SystemExit(f"no task names in {value!r}")
    return tasks


def format_table(rows: Sequence[dict], columns: Sequence[str]) -> str:
    """A plain-text table (floats to 4 decimals, NaN shown as 'nan')."""

    def cell(v):
        if isinstance(v, float):
            return "nan" if math.isnan(v) else f"{v:.4f}"
        if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, float) for x in v):
            return f"[{cell(v[0])}, {cell(v[1])}]"
        return "" if v is None else str(v)

    body = [[cell(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(b[i]) for b in body)) if body else len(c) for i, c in enumerate(columns)]
    line = lambda cells: "  ".join(x.rjust(w) if i else x.ljust(w) for i, (x, w) in enumerate(zip(cells, widths)))  # noqa: E731
    return "\n".join([line(columns), line(["-" * w for w in widths]), *(line(b) for b in body)])


def add_fingerprint_flag(parser) -> None:
    parser.add_argument(
        "--allow-fingerprint-mismatch", action="store_true",
        help="compare records even if they were produced by different models/settings (listed as warnings)",
    )  # fmt: skip


def add_scores(parser) -> None:
    from lm_eval_evidential.metrics.scores import SCORES

    parser.add_argument(
        "--scores", default=None, metavar="A,B",
        help=f"comma-separated score names (default: every score the records can give): {', '.join(SCORES)}",
    )  # fmt: skip


def parse_scores(value: str | None) -> list[str] | None:
    """``--scores`` as a list validated against the registry (None: every available score)."""
    from lm_eval_evidential.audits.quality import parse_scores as parse

    return parse(value)
