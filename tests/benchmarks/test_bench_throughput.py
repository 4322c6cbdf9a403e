"""benchmarks/bench_throughput.py's statistics: the per-round a/b ratios, the interval of their median and the
verdict it gives (the measurements themselves are the benchmark's run, not a test)."""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCH))  # the script imports its folder's measure.py, as when run
    try:
        import bench_throughput
    finally:
        sys.path.remove(str(BENCH))
    return bench_throughput


def order_statistic_interval(values, confidence):
    """The textbook interval of the median: (x_(k), x_(n+1-k)) for the largest k whose two tails of
    Binomial(n, 1/2) below k hold at most 1 - confidence together; (nan, nan) where no k does."""
    xs, n = sorted(values), len(values)
    best = None
    for k in range(1, n // 2 + 1):
        tail = sum(math.comb(n, i) for i in range(k)) / 2**n
        if 2 * tail <= 1 - confidence:
            best = k
    return (math.nan, math.nan) if best is None else (xs[best - 1], xs[n - best])


@pytest.mark.parametrize("n", [2, 4, 5, 6, 9, 15, 25])
@pytest.mark.parametrize("confidence", [0.8, 0.9, 0.95])
def test_median_interval_is_the_order_statistic_interval(bench, n, confidence):
    values = [random.Random(100 * n + i).uniform(0.7, 1.2) for i in range(n)]
    got = bench.median_interval(values, confidence)
    want = order_statistic_interval(values, confidence)
    assert (math.isnan(got[0]) and math.isnan(want[0])) or got == want


def test_median_interval_covers_the_median_at_its_confidence(bench):
    # coverage over many draws from a known distribution: the true median of U(0.8, 1.1) is 0.95
    rng = random.Random(0)
    hits = 0
    for _ in range(400):
        low, high = bench.median_interval([rng.uniform(0.8, 1.1) for _ in range(15)], 0.9)
        hits += low <= 0.95 <= high
    assert 0.93 <= hits / 400 <= 0.995  # order statistics: at least the confidence, 0.965 at n = 15


def test_reliability_reads_the_interval_against_the_goal(bench):
    assert bench.reliability(0.96, 1.10) == "reliably met"
    assert bench.reliability(0.80, 0.94) == "reliably NOT met"
    assert bench.reliability(0.90, 1.00) == "undecided"
    assert bench.reliability(math.nan, math.nan).startswith("undecided (too few rounds")


def test_round_ratios_are_the_marginal_costs_of_each_round(bench):
    # (a) costs 2 ms a question, (b) 2.5 then 2 ms: the fixed costs (1 s, 3 s) cancel in the marginal
    bare = {
        "runs": [
            {"n": 240, "t_run": 1 + 0.48, "c_run": 0.48, "load1": 1.5},
            {"n": 960, "t_run": 1 + 1.92, "c_run": 1.92, "load1": 1.5},
        ]
        * 2
    }
    evid = {
        "runs": [
            {"n": 240, "t_run": 3 + 0.6, "c_run": 0.6, "load1": 1.0},
            {"n": 960, "t_run": 3 + 2.4, "c_run": 2.4, "load1": 2.0},
            {"n": 240, "t_run": 3 + 0.48, "c_run": 0.48, "load1": 0.5},
            {"n": 960, "t_run": 3 + 1.92, "c_run": 1.92, "load1": 0.5},
        ]
    }
    rounds = bench.round_ratios(bare, evid)
    assert [round(r["wall"], 9) for r in rounds] == [0.8, 1.0]
    assert [round(r["cpu"], 9) for r in rounds] == [0.8, 1.0]
    assert rounds[0]["load"] == 2.0
    row = {"rounds": rounds}
    assert all(math.isnan(x) for interval in bench.ratio_intervals(row).values() for x in interval)  # 2 rounds
