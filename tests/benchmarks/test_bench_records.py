"""bench_permutations and bench_prefix_cache write their records through measure.write_result: the figures a
record holds are the run's medians (checked against a hand computation), and a smoke run of each script on the
tiny model writes a record the README's table reads (slow: each loads lm_eval and a model, ~30 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.benchmarks.test_results_table import BENCH, ROOT, _module


def test_the_permutations_figures_are_the_medians_ratios_to_one_uncached_order():
    figures = _module("bench_permutations").figures
    names = ("one order", "K orders, one call", "K orders, K calls")
    medians = {(True, n): s for n, s in zip(names, (0.5, 1.2, 1.6))} | {(False, n): s for n, s in zip(names, (2, 4, 8))}
    found = {f["what"]: (f["value"], f["unit"], f.get("limit")) for f in figures(medians, [True, False])}
    assert found == {
        "one order, prefix cache off": (2, "s", None),
        "one order / one order, cache on": (0.25, "x", None),
        "K orders, one call / one order, cache on": (0.6, "x", None),
        "K orders, K calls / one order, cache on": (0.8, "x", None),
        "K orders, one call / one order, cache off": (2.0, "x", None),
        "K orders, K calls / one order, cache off": (4.0, "x", None),
        "K calls without the cache / K orders in one call with it": (round(8 / 1.2, 2), "x", ">= 2 (issue 35)"),
    }
    only_on = figures({k: v for k, v in medians.items() if k[0]}, [True])
    assert [f["what"] for f in only_on][:1] == ["one order, prefix cache on"] and len(only_on) == 3


def test_the_permutations_figures_weigh_k_orders_in_one_call_against_each_cached_way():
    figures = _module("bench_permutations").figures
    names = ("one order", "K orders, one call", "K orders, K calls")
    medians = {(True, n): s for n, s in zip(names, (0.5, 1.2, 1.6))} | {(False, n): s for n, s in zip(names, (2, 4, 8))}
    positions = {n: {True: on, False: off} for n, on, off in zip(names, (100, 250, 330), (140, 560, 560))}
    found = {f["what"]: f["value"] for f in figures(medians, [True, False], 4, positions)}
    assert found["K single orders with the cache / K orders in one call with it"] == round(4 * 0.5 / 1.2, 2)
    assert found["K calls with the cache / K orders in one call with it"] == round(1.6 / 1.2, 2)
    assert found["K calls without the cache / K orders in one call with it"] == round(8 / 1.2, 2)  # listed once
    assert found["K single orders with the cache / K orders in one call with it: positions forwarded"] == 1.6
    assert found["K calls with the cache / K orders in one call with it: positions forwarded"] == 1.32
    assert found["K calls without the cache / K orders in one call with it: positions forwarded"] == 2.24
    assert len(found) == len(figures(medians, [True, False], 4, positions)) == 7 + 5


@pytest.mark.slow
@pytest.mark.parametrize(
    "script, args, name",
    [
        ("bench_permutations.py", ["--model", "tiny", "--n", "2"], "bench_permutations"),
        (
            "bench_prefix_cache.py",
            ["--model", "tiny", "--task", "obqa_edl", "--shots", "1", "--questions", "2", "--batch-size", "2"],
            "bench_prefix_cache --task obqa_edl",
        ),
    ],
)
def test_a_tiny_run_writes_a_record_the_table_reads(script, args, name, tmp_path):
    path = tmp_path / "record.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), *args, "--repeats", "1", "--json", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads(path.read_text())
    assert record["benchmark"] == name and record["source"] == "written by the benchmark"
    assert record["command"].startswith(f"python benchmarks/{script} --model tiny")
    assert all(isinstance(f["value"], int | float) and f["value"] >= 0 for f in record["figures"])
    table = _module("results_table")
    assert f"`{name}`" in table.render(table.load_records(tmp_path))
