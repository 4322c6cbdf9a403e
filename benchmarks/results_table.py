"""The table of ``benchmarks/README.md``, made from the latest record of each benchmark (``benchmarks/results/*.json``).

    python benchmarks/results_table.py           # print the table
    python benchmarks/results_table.py --write   # put it into benchmarks/README.md between its markers
    python benchmarks/results_table.py --check   # exit 1 when the README's table is not this one

A benchmark writes its record with ``measure.write_result`` (``--json PATH`` elsewhere); records converted
from the dated notes of ``benchmarks/HISTORY.md`` say so in their ``source``. ``tests/benchmarks`` checks that
the README's table is what this script makes of the committed records.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
README = HERE / "README.md"
BEGIN = "<!-- results-table: made by python benchmarks/results_table.py --write; not edited by hand -->"
END = "<!-- /results-table -->"
REQUIRED = ("benchmark", "command", "shape", "measured", "machine", "source", "figures")


def load_records(folder: Path = RESULTS) -> list[dict]:
    """Every record in ``folder``, by benchmark name; a record without a required key is refused by name."""
    records = []
    for path in sorted(folder.glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        missing = [key for key in REQUIRED if key not in record]
        if missing:
            raise ValueError(f"{path.name}: no {', '.join(missing)}")
        for figure in record["figures"]:
            if not {"what", "value", "unit"} <= set(figure):
                raise ValueError(f"{path.name}: a figure without what/value/unit: {figure}")
        records.append(record)
    return sorted(records, key=lambda r: r["benchmark"])


def _machine(record: dict) -> str:
    machine = record["machine"]
    if isinstance(machine, str):
        return machine
    parts = [f"{machine['cpus']} CPUs", f"{machine['memory_gib']} GiB", machine.get("gpu", "no GPU")]
    return ", ".join(parts)


def _load(record: dict) -> str:
    if record.get("load"):
        return str(record["load"])
    machine = record["machine"]
    return ", ".join(f"{x:g}" for x in machine["load_average"]) if isinstance(machine, dict) else "not recorded"


def _value(figure: dict) -> str:
    value = figure["value"]
    shown = f"{value:,}" if isinstance(value, int) else f"{value:,.6g}"
    return f"{shown} {figure['unit']}".rstrip()


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(records: list[dict]) -> str:
    """The Markdown: one table of runs (command, shape, machine, load, when, source), then each run's figures."""
    lines = [
        "| benchmark | command | shape | machine | load (1 min) | measured (commit) | source |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in records:
        when = r["measured"] + (f" ({r['commit']})" if r.get("commit") else "")
        source = r["source"] + (f"; {r['notes']}" if r.get("notes") else "")
        cells = (f"`{r['benchmark']}`", f"`{r['command']}`", r["shape"], _machine(r), _load(r), when, source)
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    lines += ["", "| benchmark | figure | value | held against | note |", "|---|---|---:|---|---|"]
    for r in records:
        for figure in r["figures"]:
            cells = (
                f"`{r['benchmark']}`",
                figure["what"],
                _value(figure),
                figure.get("limit", ""),
                figure.get("note", ""),
            )
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def readme_table(text: str) -> str:
    """What stands between the README's markers."""
    start, end = text.index(BEGIN) + len(BEGIN) + 1, text.index(END)
    return text[start:end]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="write the table into benchmarks/README.md")
    mode.add_argument("--check", action="store_true", help="exit 1 when the README's table differs")
    args = ap.parse_args(argv)
    table = render(load_records())
    if not (args.write or args.check):
        sys.stdout.write(table)
        return 0
    text = README.read_text(encoding="utf-8")
    if args.check:
        if readme_table(text) != table:
            print("benchmarks/README.md: the table is not the records'; run python benchmarks/results_table.py --write")
            return 1
        return 0
    start, end = text.index(BEGIN) + len(BEGIN) + 1, text.index(END)
    README.write_text(text[:start] + table + text[end:], encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
