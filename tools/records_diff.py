"""Are two runs' records the same? Each task's records file of one ``--output_path`` folder against the other's.

    python tools/records_diff.py BEFORE AFTER [--ignore date_id,data_origin,adapter_sha256] [--paths A,B]

For a change that must not move any number (issue 31: "records byte-identical on the demo before and after"):
every column is compared bit for bit (Arrow equality, NaNs in the same places counting as equal); a numeric
column that differs is reported with its largest absolute difference (lists of options flattened, their lengths
checked equal) and whether its NaNs sit alike. The records' metadata (the ``lm_eval_evidential`` JSON) is
compared key by key, less the keys named by ``--ignore`` (by default what names the run, where the data came
from and the adapter's hash, which 72e15ff redefined); ``--paths A,B`` reads the folder ``A`` in BEFORE's
metadata as ``B`` (two checkouts or demo folders). Prints one line per difference and exits 1 if there is any,
0 if the runs' records are the same.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

DEFAULT_IGNORED = ("date_id", "data_origin", "adapter_sha256")


def records_files(folder: Path) -> dict[str, Path]:
    """``{task: newest records file}`` under a run's output folder (``<model>/records_<task>_<date>.parquet``)."""
    found: dict[str, Path] = {}
    for path in sorted(folder.glob("*/records_*.parquet")):
        task = path.name[len("records_") :].rsplit("_", 1)[0]
        found[task] = path
    return found


def metadata(path: Path, replace: tuple[str, str] | None) -> dict:
    text = (pq.read_schema(path).metadata or {}).get(b"lm_eval_evidential", b"{}").decode()
    if replace:
        text = text.replace(*replace)
    return json.loads(text)


def metadata_differences(before, after, ignored, where: str = "") -> list[str]:
    if isinstance(before, dict) and isinstance(after, dict):
        keys = sorted((set(before) | set(after)) - set(ignored))
        return [d for k in keys for d in metadata_differences(before.get(k), after.get(k), ignored, f"{where}.{k}")]
    return [] if before == after else [f"metadata {where}: {before!r} != {after!r}"]


def column_difference(name: str, before, after) -> str | None:
    """What differs in a column Arrow does not call equal: the largest difference of a numeric one; None where the
    only unequal values are NaNs in the same places (NaN is not equal to itself)."""
    a, b = before.to_pylist(), after.to_pylist()
    if a and isinstance(a[0], list):
        if [len(x) for x in a] != [len(x) for x in b]:
            return f"column {name}: list lengths differ"
        a, b = [v for x in a for v in x], [v for x in b for v in x]
    try:
        x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    except (TypeError, ValueError):
        return f"column {name}: values differ"
    if x.shape != y.shape:
        return f"column {name}: {x.size} values against {y.size}"
    nans = np.isnan(x) == np.isnan(y)
    both = ~np.isnan(x) & ~np.isnan(y)
    if nans.all() and np.array_equal(x[both], y[both]):
        return None
    largest = float(np.max(np.abs(x[both] - y[both]), initial=0.0))
    return f"column {name}: max |difference| {largest:.3g}" + ("" if nans.all() else ", NaNs in different places")


def differences(before: Path, after: Path, ignored=DEFAULT_IGNORED, paths: tuple[str, str] | None = None) -> list:
    """One line per difference between the records of the two folders (none: the same records)."""
    a_files, b_files = records_files(before), records_files(after)
    found = [f"{task}: only in {before if task in a_files else after}" for task in sorted(set(a_files) ^ set(b_files))]
    for task in sorted(set(a_files) & set(b_files)):
        a, b = pq.read_table(a_files[task]), pq.read_table(b_files[task])
        if a.schema.remove_metadata() != b.schema.remove_metadata():
            found.append(f"{task}: columns differ: {a.column_names} != {b.column_names}")
            continue
        unequal = [column_difference(name, a[name], b[name]) for name in a.column_names if not a[name].equals(b[name])]
        found += [f"{task}: {line}" for line in unequal if line]
        meta = metadata_differences(metadata(a_files[task], paths), metadata(b_files[task], None), ignored)
        found += [f"{task}: {line}" for line in meta]
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path, help="an lm_eval --output_path folder")
    ap.add_argument("after", type=Path, help="the same run's folder after the change")
    ap.add_argument("--ignore", default=",".join(DEFAULT_IGNORED), help="metadata keys not compared (comma list)")
    ap.add_argument("--paths", default=None, metavar="A,B", help="read folder A in BEFORE's metadata as B")
    args = ap.parse_args(argv)
    paths = tuple(args.paths.split(",", 1)) if args.paths else None
    found = differences(args.before, args.after, tuple(filter(None, args.ignore.split(","))), paths)
    tasks = len(records_files(args.before))
    print("\n".join(found) if found else f"the same records: {tasks} tasks, every column bit for bit")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
