"""Temperature scaling against a brute-force grid, its first-order condition and a hand softmax.

netcal (the calibration library) is not used as the oracle: it pulls torch, pyro-ppl and
tikzplotlib for a one-parameter convex fit; a grid over T and the closed-form optimality
condition check the fit independently.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lm_eval_evidential.metrics._validation import UndefinedMetricWarning
from lm_eval_evidential.metrics.temperature import fit_temperature, scaled_softmax, temperature_nll


def _case(seed, n, sharpness, mixed_k):
    rng = np.random.default_rng(seed)
    k = rng.choice([3, 4, 5], size=n) if mixed_k else np.full(n, 4)
    z = np.full((n, 5), np.nan)
    gold = np.empty(n, dtype=int)
    for i, ki in enumerate(k):
        z[i, :ki] = rng.normal(size=ki) * sharpness
        p = np.exp(z[i, :ki] / sharpness)
        gold[i] = rng.choice(ki, p=p / p.sum())
    return z, gold


def _nll_loop(z, gold, t):
    total = 0.0
    for row, g in zip(z, gold):
        r = row[~np.isnan(row)] / t
        total += -(r[g] - np.log(np.exp(r - r.max()).sum()) - r.max())
    return total / len(gold)


def _nll_grid(z, gold, grid):
    """NLL at every T of ``grid`` with scipy's logsumexp (padding as -inf), one (T, n, K) array."""
    from scipy.special import logsumexp

    x = np.where(np.isnan(z), -np.inf, z)[None] / grid[:, None, None]
    return -(x[:, np.arange(len(gold)), gold] - logsumexp(x, axis=2)).mean(axis=1)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), sharpness=st.sampled_from([0.3, 1.0, 2.5]), mixed_k=st.booleans())
def test_fit_is_the_grid_minimum_and_meets_the_first_order_condition(seed, sharpness, mixed_k):
    z, gold = _case(seed, 300, sharpness, mixed_k)
    t = fit_temperature(z, gold)
    grid = np.exp(np.linspace(-3, 3, 601))
    losses = _nll_grid(z, gold, grid)
    best = grid[int(np.argmin(losses))]
    assert temperature_nll(z, gold, t) <= min(losses) + 1e-9  # no grid point beats the fit
    assert abs(math.log(t) - math.log(best)) <= 0.011  # and the fit sits at the grid's minimum
    # First-order condition: mean over examples of z_gold - E_p[z] is 0 at the optimum.
    p = scaled_softmax(z, t)
    gap = np.mean([z[i, gold[i]] - np.nansum(p[i] * z[i]) for i in range(len(gold))])
    assert abs(gap) < 1e-5
    assert temperature_nll(z, gold, t) == pytest.approx(_nll_loop(z, gold, t), abs=1e-12)


def test_scaled_softmax_keeps_the_prediction_and_each_rows_k():
    z, _ = _case(1, 50, 1.0, True)
    for t in (0.2, 1.0, 7.0):
        p = scaled_softmax(z, t)
        np.testing.assert_array_equal(np.isnan(p), np.isnan(z))
        np.testing.assert_allclose(np.nansum(p, axis=1), 1.0)
        np.testing.assert_array_equal(np.nanargmax(p, axis=1), np.nanargmax(z, axis=1))
        row = z[0][~np.isnan(z[0])] / t
        np.testing.assert_allclose(p[0][~np.isnan(p[0])], np.exp(row) / np.exp(row).sum())


def test_undefined_and_invalid():
    with pytest.warns(UndefinedMetricWarning, match="0 validation"):
        assert math.isnan(fit_temperature(np.zeros((0, 4)), np.zeros(0, dtype=int)))
    with pytest.warns(UndefinedMetricWarning, match="K = 1"):
        assert math.isnan(fit_temperature([[1.0], [2.0]], [0, 0]))
    with pytest.warns(UndefinedMetricWarning, match="every validation answer is right"):  # T -> 0
        assert math.isnan(fit_temperature([[5.0, 0.0], [0.0, 5.0]], [0, 1]))
    with pytest.warns(UndefinedMetricWarning, match="search bound"):  # always the least probable: T -> infinity
        assert fit_temperature([[5.0, 0.0], [0.0, 3.0]], [1, 0]) == pytest.approx(math.exp(5), rel=1e-2)
    for bad in (0, -1, float("inf")):
        with pytest.raises(ValueError, match="temperature"):
            scaled_softmax([[1.0, 0.0]], bad)
    with pytest.raises(ValueError, match="gold"):
        temperature_nll([[1.0, 0.0]], [2], 1.0)
