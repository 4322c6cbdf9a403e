"""What every audit subcommand shares: the output-path argument, loading records, JSON and tables."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path


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


def _jsonable(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return _jsonable(value.item())
    return value


def write_json(path: str | Path, rows) -> Path:
    """Write ``rows`` as JSON atomically. NaN becomes null (JSON has no NaN); reasons stay."""
    from lm_eval_evidential.records import atomic_write_bytes

    text = json.dumps(_jsonable(rows), indent=2, sort_keys=False)
    path = Path(path)

    def write(tmp):
        Path(tmp).write_text(text + "\n", encoding="utf-8")

    atomic_write_bytes(path, write)
    return path


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


def check_producers(records, args) -> None:
    """Refuse (FingerprintMismatchError, a ValueError) records from different producers unless allowed."""
    import sys

    from lm_eval_evidential.fingerprint import check_same_producer

    for line in check_same_producer(records, allow=getattr(args, "allow_fingerprint_mismatch", False)):
        print(f"warning: fingerprint differs: {line}", file=sys.stderr)


def load_many(output_path: str, tasks, run: str | None = None) -> list:
    """Records of several tasks from ONE run: the newest run that has them all, or ``run``.

    Records of two runs are never mixed silently; says on stderr which run was read.
    """
    import sys

    from lm_eval_evidential.records import find_record_files, read_records_file

    requested = list(tasks)
    tasks = list(dict.fromkeys(requested))
    runs = find_record_files(output_path)
    for task in tasks:
        if not any(task in files for files in runs.values()):
            raise FileNotFoundError(
                f"no records for task {task!r} under {output_path}; run "
                f"`lm_eval --model evidential --tasks {task} --output_path {output_path}` first"
            )
    complete = sorted(d for d, files in runs.items() if all(t in files for t in tasks))
    if run is not None:
        if run not in runs:
            raise FileNotFoundError(f"no run {run!r} under {output_path}; runs: {sorted(runs)}")
        missing = [t for t in tasks if t not in runs[run]]
        if missing:
            raise FileNotFoundError(f"run {run} has no records for {missing}; it has {sorted(runs[run])}")
        chosen = run
    elif complete:
        chosen = complete[-1]
    else:
        have = {d: sorted(files) for d, files in sorted(runs.items())}
        raise FileNotFoundError(
            f"no single run under {output_path} has records for all of {tasks} (runs: {have}); evaluate them "
            f"together: lm_eval --model evidential --tasks {','.join(tasks)} --output_path {output_path}"
        )
    if len(runs) > 1:
        how = "as asked (--run)" if run else f"the newest of {len(runs)} runs that has all of them; pick another with --run"
        print(f"using run {chosen} for {', '.join(tasks)} ({how})", file=sys.stderr)
    loaded = {t: read_records_file(runs[chosen][t]) for t in tasks}
    return [loaded[t] for t in requested]


def add_scores(parser) -> None:
    from lm_eval_evidential.core.scores import SCORES

    parser.add_argument(
        "--scores", default=None, metavar="A,B",
        help=f"comma-separated score names (default: every score the records can give): {', '.join(SCORES)}",
    )  # fmt: skip


def parse_scores(value: str | None) -> list[str] | None:
    """``--scores`` as a list validated against the registry (None: every available score)."""
    from lm_eval_evidential.quality import parse_scores as parse

    return parse(value)
