"""What installing this package costs every Python process: ``python -c pass`` with and without it.

    python benchmarks/bench_startup.py [--runs 20]

The package installs ``lm_eval_evidential.pth``, which Python's ``site`` runs at every interpreter
start (see ``lm_eval_evidential/_import_hook.py``). To measure that cost and nothing else, this
script builds two throw-away virtual environments of the running interpreter (``venv
--without-pip``, so neither has any other ``.pth`` file or package):

- ``without``: the bare environment — what a user has before installing this package;
- ``with``: the same, plus what ``pip install`` adds: the package copied into ``site-packages``
  and byte-compiled (pip compiles ``.pyc`` files at install time), and its ``.pth``.

It then starts ``python -c pass`` ``--runs`` times in each, interleaved so that machine load hits
both alike, and prints the median of each, their difference and ratio, and the hook's own import
time from ``python -X importtime`` (median). A third row, ``with, hook off``, is the ``with``
environment under ``LM_EVAL_EVIDENTIAL_DISABLE_HOOK=1``, where the ``.pth`` line stops after one
``os.environ`` lookup. Goal: the median difference ``with`` − ``without`` within 2 ms.
"""

from __future__ import annotations

import argparse
import compileall
import os
import platform
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
import venv
from pathlib import Path

from measure import command_line, write_result

PACKAGE = Path(__file__).resolve().parent.parent / "lm_eval_evidential"
PTH = PACKAGE.parent / "lm_eval_evidential.pth"


def _make_env(root: Path, with_package: bool) -> str:
    venv.EnvBuilder(with_pip=False, symlinks=os.name != "nt").create(root)
    python = root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if with_package:
        shutil.copytree(PACKAGE, Path(site) / PACKAGE.name, ignore=shutil.ignore_patterns("__pycache__"))
        compileall.compile_dir(Path(site) / PACKAGE.name, quiet=1)
        shutil.copyfile(PTH, Path(site) / PTH.name)
    return str(python)


def _start(python: str, env: dict) -> float:
    begin = time.perf_counter()
    subprocess.run([python, "-c", "pass"], env=env, check=True)
    return time.perf_counter() - begin


def _hook_import_us(python: str, env: dict) -> int:
    out = subprocess.run(
        [python, "-X", "importtime", "-c", "pass"], env=env, capture_output=True, text=True, check=True
    )
    return sum(
        int(line.split("|")[0].split(":")[1])  # self time, microseconds
        for line in out.stderr.splitlines()
        if "lm_eval_evidential" in line
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--json", type=Path, default=None, help="the run's record (default: in benchmarks/results/)")
    args = parser.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if k not in ("LM_EVAL_EVIDENTIAL_DISABLE_HOOK", "PYTHONPATH")}
    with tempfile.TemporaryDirectory(prefix="bench_startup_") as tmp:
        pythons = {
            "without": _make_env(Path(tmp) / "without", with_package=False),
            "with": _make_env(Path(tmp) / "with", with_package=True),
        }
        ways = {
            "without": (pythons["without"], env),
            "with": (pythons["with"], env),
            "with, hook off": (pythons["with"], {**env, "LM_EVAL_EVIDENTIAL_DISABLE_HOOK": "1"}),
        }
        check = subprocess.run(
            [pythons["with"], "-c", "import sys; print('lm_eval_evidential._import_hook' in sys.modules)"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        if check != "True":
            print("error: the hook did not load in the 'with' environment", file=sys.stderr)
            return 1
        times = {name: [] for name in ways}
        imports = []
        for python, way_env in ways.values():  # warm the file-system cache
            _start(python, way_env)
        for _ in range(args.runs):
            for name, (python, way_env) in ways.items():
                times[name].append(_start(python, way_env))
            imports.append(_hook_import_us(pythons["with"], env))
    medians = {name: statistics.median(t) * 1e3 for name, t in times.items()}
    base = medians["without"]
    print(
        f"# {sys.implementation.name} {sysconfig.get_python_version()}, {os.cpu_count()} CPUs, "
        f"1-min load average {os.getloadavg()[0]:.1f}"
    )
    print(f"python -c pass in a fresh venv, median of {args.runs} runs (ms)")
    for name, value in medians.items():
        print(f"  {name:15s} {value:8.2f}   difference {value - base:+6.2f}   ratio {value / base:.3f}")
    hook_ms = statistics.median(imports) / 1e3
    print(f"  hook modules' own import time (python -X importtime, median): {hook_ms:.2f} ms")
    labels = {"without": "start-up without the package", "with": "start-up with the package (the .pth hook)"}
    figures = [
        {"what": labels.get(name, f"start-up {name}"), "value": round(value, 2), "unit": "ms"}
        for name, value in medians.items()
    ]
    figures[1].update(note=f"{medians['with'] - base:+.2f} ms, ratio {medians['with'] / base:.2f}")
    figures[1].update(limit="within 2 ms of without")
    figures.append({"what": "the hook's own import time", "value": round(hook_ms, 2), "unit": "ms"})
    shape = f"{sys.implementation.name} {platform.python_version()}, `python -c pass`, {args.runs} runs each way"
    written = write_result("bench_startup", command=command_line(), shape=shape, figures=figures, path=args.json)
    print(f"written: {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
