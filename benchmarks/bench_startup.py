"""What the ``.pth`` import hook costs every Python process: ``python -c pass`` with and without it.

    python benchmarks/bench_startup.py [--runs 20]

The package installs ``lm_eval_evidential.pth``, which Python's ``site`` runs at every interpreter
start (see ``lm_eval_evidential/_import_hook.py``). This script starts ``python -c pass`` ``--runs``
times in each of two environments, interleaved so that machine load hits both alike:

- ``with hook``: the environment as installed;
- ``without``: the same interpreter with ``LM_EVAL_EVIDENTIAL_DISABLE_HOOK=1``, under which the
  ``.pth`` line stops after one ``os.environ`` lookup (``os`` is already imported by ``site``):
  an environment without the package, up to reading one one-line file.

It prints the median of each, their difference and ratio, and the hook's own import time from
``python -X importtime`` (the two modules it imports, self time, median over the runs).
Goal: the median difference within 2 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time


def _start(env: dict) -> float:
    begin = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
    return time.perf_counter() - begin


def _hook_import_us(env: dict) -> float:
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", "pass"], env=env, capture_output=True, text=True)
    total = 0
    for line in out.stderr.splitlines():
        if "lm_eval_evidential" in line:
            total += int(line.split("|")[0].split(":")[1])  # self time, microseconds
    return total


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args(argv)
    with_hook = {k: v for k, v in os.environ.items() if k != "LM_EVAL_EVIDENTIAL_DISABLE_HOOK"}
    without = {**with_hook, "LM_EVAL_EVIDENTIAL_DISABLE_HOOK": "1"}
    times = {"with hook": [], "without": []}
    imports = []
    _start(with_hook), _start(without)  # warm the file-system cache
    for _ in range(args.runs):
        times["with hook"].append(_start(with_hook))
        times["without"].append(_start(without))
        imports.append(_hook_import_us(with_hook))
    a, b = (statistics.median(times[k]) * 1e3 for k in ("with hook", "without"))
    print(f"python -c pass, median of {args.runs} runs (ms)")
    print(f"  with hook   {a:8.2f}")
    print(f"  without     {b:8.2f}")
    print(f"  difference  {a - b:8.2f}   ratio {a / b:.3f}")
    print(f"  hook modules' own import time (python -X importtime, median): {statistics.median(imports) / 1e3:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
