"""``lm-eval-evidential tasks``: the census of lm-eval's multiple-choice tasks for ``--model evidential``.

    lm-eval-evidential tasks [PATTERN ...] [--include_path DIR] [--json [PATH]]

One row per multiple-choice task the TaskManager indexes (lm-eval's own, this package's and
``--include_path``'s; glob PATTERNs restrict them): its K (fixed, or per question), what its
choices are, whether ``--model evidential`` scores it as it is, its lettered view
(``<task>_edl``, docs/tasks.md) and why not. Read from the task configs alone: nothing is
downloaded. A last line counts the rows by kind.
"""

from __future__ import annotations

import fnmatch
import json
import sys

from lm_eval_evidential.errors import InvalidValueError

from .arguments import describe
from .printing import print_rows


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "tasks",
        help="census of lm-eval's multiple-choice tasks: K, runs as is, lettered view (<task>_edl)",
        description=describe(__doc__),
    )
    parser.add_argument("patterns", nargs="*", metavar="PATTERN", help="glob patterns of task names (default: all)")
    parser.add_argument("--include_path", default=None, help="a folder of your own task YAMLs, as for lm_eval")
    parser.add_argument(
        "--json",
        dest="json_out",
        nargs="?",
        const="-",
        default=None,
        metavar="PATH",
        help="the rows as JSON, to PATH or (without PATH) to stdout instead of the table",
    )
    parser.set_defaults(func=run)


def summary(rows: list[dict]) -> str:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["choices"]] = counts.get(row["choices"], 0) + 1
    views = sum(1 for row in rows if row["view"])
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return f"{len(rows)} multiple-choice tasks: {kinds}; {views} have a lettered view"


def run(args) -> int:
    from lm_eval.tasks import TaskManager

    from lm_eval_evidential.files import write_json
    from lm_eval_evidential.tasks.census import CENSUS_KEYS, census

    rows = census(TaskManager(include_path=args.include_path), args.patterns or None)
    unmatched = [p for p in args.patterns or () if not any(fnmatch.fnmatchcase(r["task"], p) for r in rows)]
    wider = ", ".join(f"'*{p.strip('*')}*'" for p in unmatched)
    if args.patterns and not rows:
        raise InvalidValueError(
            f"no multiple-choice task matches {' '.join(args.patterns)}; patterns are globs over whole task names: "
            f"try {wider}"
        )
    for pattern in unmatched:  # said, not dropped
        print(f"note: {pattern!r} matches no multiple-choice task; try '*{pattern.strip('*')}*'", file=sys.stderr)
    if args.json_out == "-":
        json.dump(rows, sys.stdout, indent=1)
        print()
        return 0
    written = [write_json(args.json_out, rows)] if args.json_out else []
    return print_rows(rows, CENSUS_KEYS, ("task",), written, notes=[summary(rows)])
