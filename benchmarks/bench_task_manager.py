"""What the package costs every ``TaskManager()``: construction with and without it, and the lettered views' part.

    python benchmarks/bench_task_manager.py [--runs 3]

Starts a fresh interpreter per run, alternately with the package's hook on and off
(``LM_EVAL_EVIDENTIAL_DISABLE_HOOK=1``), and times ``TaskManager()`` there (lm_eval's own
imports done before the clock starts). The difference is the package's whole cost: the index
of its own task folder plus the lettered views' wrapping (``tasks/stock.py``). The views'
part alone is timed in-process: ``stock.install`` on an already built manager (a copy of
its index into a :class:`~lm_eval_evidential.tasks.stock.LetteredIndex`), median of 200.
Prints the medians, the index sizes, and the first lookup of a view (``hellaswag_edl``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from measure import command_line, write_result

CHILD = r"""
import json, time
import lm_eval.tasks
from lm_eval.tasks import TaskManager
t = time.perf_counter(); tm = TaskManager(); elapsed = time.perf_counter() - t
out = {"seconds": elapsed, "indexed": len(tm.task_index)}
if EXTRA:
    from lm_eval_evidential.tasks.stock import LetteredIndex, install
    stock = dict(tm._index)
    times = []
    for _ in range(200):
        tm._index = stock
        t = time.perf_counter(); install(tm); times.append(time.perf_counter() - t)
    times.sort(); out["install_ms"] = 1000 * times[len(times) // 2]
    t = time.perf_counter(); found = tm.match_tasks(["hellaswag_edl"])
    out["first_view_lookup_ms"] = 1000 * (time.perf_counter() - t)
    out["view_found"] = found == ["hellaswag_edl"]
print(json.dumps(out))
"""


def run_once(hook: bool) -> dict:
    env = dict(os.environ)
    env.pop("LM_EVAL_EVIDENTIAL_DISABLE_HOOK", None)
    if not hook:
        env["LM_EVAL_EVIDENTIAL_DISABLE_HOOK"] = "1"
    code = CHILD.replace("EXTRA", "True" if hook else "False")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None, help="the run's record (default: in benchmarks/results/)")
    args = parser.parse_args()
    with_package, without = [], []
    for _ in range(args.runs):
        with_package.append(run_once(True))
        without.append(run_once(False))
    med = lambda rows, key: statistics.median(r[key] for r in rows)  # noqa: E731
    a, b = med(with_package, "seconds"), med(without, "seconds")
    print(f"TaskManager() without the package: {b:.2f} s median of {args.runs} ({without[0]['indexed']} names)")
    print(
        f"TaskManager() with the package:    {a:.2f} s ({with_package[0]['indexed']} names); difference {a - b:+.2f} s"
    )
    print(f"lettered views' part (install, in-process): {med(with_package, 'install_ms'):.2f} ms median")
    print(
        f"first lookup of hellaswag_edl: {med(with_package, 'first_view_lookup_ms'):.2f} ms "
        f"(found: {all(r['view_found'] for r in with_package)})"
    )
    figures = [
        {"what": "TaskManager() without the package", "value": round(b, 2), "unit": "s"},
        {"what": "TaskManager() with the package", "value": round(a, 2), "unit": "s", "note": f"{a - b:+.2f} s"},
        {"what": "the lettered views' install", "value": round(med(with_package, "install_ms"), 2), "unit": "ms"},
        {
            "what": "first lookup of hellaswag_edl",
            "value": round(med(with_package, "first_view_lookup_ms")),
            "unit": "ms",
        },
    ]
    shape = (
        f"TaskManager() over {without[0]['indexed']:,} stock names ({with_package[0]['indexed']:,} with the package)"
    )
    written = write_result("bench_task_manager", command=command_line(), shape=shape, figures=figures, path=args.json)
    print(f"written: {written}")


if __name__ == "__main__":
    main()
