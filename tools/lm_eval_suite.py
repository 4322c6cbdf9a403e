"""lm-eval's own offline tests, with and without this package's hook: the outcomes must be identical.

    python tools/lm_eval_suite.py [--tests tests/test_task_manager.py tests/test_registry.py …] [--cache DIR]

Downloads the source distribution of the installed lm-eval release from PyPI (``pip download
--no-binary``; the sdist carries the release's ``tests/``), unpacks its ``tests/`` once into
``--cache``, runs the chosen test files twice with the same interpreter, once as installed and once
with ``LM_EVAL_EVIDENTIAL_DISABLE_HOOK=1``, and compares every test's outcome. Exit 0 when they
agree, 1 with the differing tests listed, 2 when the tests cannot be fetched. The sdist lacks some
of the repository's data folders, so some tests fail in both runs; only differences count.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

# lm-eval's tests of what this package hooks: the task manager's construction and include paths,
# the model registry, the evaluator's result assembly (offline; about 1.5 min per run on 2 busy cores).
DEFAULT_TESTS = (
    "tests/test_task_manager.py::TestTaskManagerIntegration",
    "tests/test_registry.py",
    "tests/test_evaluator_utils.py",
)
OUTCOME = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)")


def fetch_tests(cache: Path) -> Path:
    """The ``tests/`` folder of the installed lm-eval release, from its PyPI sdist (cached)."""
    from importlib.metadata import version

    release = version("lm_eval")
    root = cache / f"lm_eval-{release}"
    if (root / "tests").is_dir():
        return root
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"lm_eval=={release}",
            "-d",
            str(cache),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    [sdist] = cache.glob(f"lm_eval-{release}.tar.gz")
    with tarfile.open(sdist) as archive:
        members = [m for m in archive.getmembers() if m.name.startswith(f"lm_eval-{release}/tests/")]
        archive.extractall(cache, members=members, filter="data")
    return root


def outcomes(root: Path, tests, *, hook: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "LM_EVAL_EVIDENTIAL_DISABLE_HOOK"}
    env.update({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"})
    if not hook:
        env["LM_EVAL_EVIDENTIAL_DISABLE_HOOK"] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", *tests],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
    )
    found = {}
    for line in proc.stdout.splitlines():
        m = OUTCOME.match(line)
        if m:
            found[m[2]] = m[1]
    if not found:
        raise RuntimeError(f"no test outcomes in lm-eval's test run:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return found


def compare(root: Path, tests) -> list[str]:
    """``'<test>: <with hook> vs <without>'`` for every test whose outcome differs."""
    with_hook, without = outcomes(root, tests, hook=True), outcomes(root, tests, hook=False)
    return [
        f"{name}: {with_hook.get(name, 'absent')} with the hook vs {without.get(name, 'absent')} without"
        for name in sorted(set(with_hook) | set(without))
        if with_hook.get(name) != without.get(name)
    ]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", nargs="+", default=list(DEFAULT_TESTS))
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "lm-eval-evidential" / "lm-eval-tests")
    args = parser.parse_args(argv)
    try:
        root = fetch_tests(args.cache)
    except (subprocess.CalledProcessError, ValueError, OSError) as exc:
        print(f"lm_eval_suite: cannot fetch lm-eval's tests: {exc}", file=sys.stderr)
        return 2
    differences = compare(root, args.tests)
    for line in differences:
        print(line)
    print(
        f"lm-eval's {', '.join(args.tests)}: {'identical' if not differences else f'{len(differences)} differ'} "
        "with and without the hook"
    )
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
