import io
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import brier_score_loss, log_loss

from lm_eval_evidential.metrics._validation import UndefinedMetricWarning
from lm_eval_evidential.metrics.calibration import (
    NLL_FLOOR,
    _equal_count_bins,
    adaptive_ece,
    brier,
    ece,
    nll,
    reliability_diagram,
)
from lm_eval_evidential.plots import plot_reliability_diagram

FAST = settings(max_examples=60, deadline=None)


# ---------------------------------------------------------------- brute-force oracles


def _bin_of(c, n_bins):
    """Bin index by explicit interval tests: [b/n, (b+1)/n), last bin closed at 1."""
    for b in range(n_bins):
        lo, hi = b / n_bins, (b + 1) / n_bins
        if lo <= c < hi or (b == n_bins - 1 and c == 1.0):
            return b
    raise AssertionError(f"confidence {c} in no bin")


def _ece_loop(conf, corr, n_bins):
    bins = {}
    for c, y in zip(conf, corr):
        bins.setdefault(_bin_of(float(c), n_bins), []).append((float(c), float(y)))
    total = 0.0
    for members in bins.values():
        mc = sum(c for c, _ in members) / len(members)
        acc = sum(y for _, y in members) / len(members)
        total += len(members) / len(conf) * abs(acc - mc)
    return total


def _adaptive_loop(conf, corr, n_bins):
    ordered = sorted(float(c) for c in conf)
    chunks = np.array_split(np.arange(len(ordered)), n_bins)
    bin_of_value = {}
    for b, chunk in enumerate(chunks):
        for pos in chunk:
            bin_of_value.setdefault(ordered[pos], b)  # first (lowest) bin a value appears in
    bins = {}
    for c, y in zip(conf, corr):
        bins.setdefault(bin_of_value[float(c)], []).append((float(c), float(y)))
    return sum(
        len(m) / len(conf) * abs(sum(y for _, y in m) / len(m) - sum(c for c, _ in m) / len(m)) for m in bins.values()
    )


confidences = st.lists(
    st.one_of(
        st.floats(0.0, 1.0, allow_nan=False),
        st.sampled_from([0.0, 1.0, 1 / 15, 2 / 15, 14 / 15, 0.5, 1 / 3]),  # edges and ties
    ),
    min_size=1,
    max_size=60,
)


@FAST
@given(data=st.data(), conf=confidences, n_bins=st.integers(1, 20))
def test_ece_matches_brute_force_loop(data, conf, n_bins):
    corr = data.draw(st.lists(st.booleans(), min_size=len(conf), max_size=len(conf)))
    assert ece(conf, corr, n_bins) == pytest.approx(_ece_loop(conf, corr, n_bins), abs=1e-12)


@FAST
@given(data=st.data(), conf=confidences, n_bins=st.integers(1, 20))
def test_adaptive_ece_matches_brute_force_loop(data, conf, n_bins):
    corr = data.draw(st.lists(st.booleans(), min_size=len(conf), max_size=len(conf)))
    assert adaptive_ece(conf, corr, n_bins) == pytest.approx(_adaptive_loop(conf, corr, n_bins), abs=1e-12)


@FAST
@given(data=st.data(), conf=confidences)
def test_ece_is_permutation_invariant_and_in_unit_interval(data, conf):
    corr = data.draw(st.lists(st.booleans(), min_size=len(conf), max_size=len(conf)))
    perm = data.draw(st.permutations(range(len(conf))))
    c, y = np.array(conf), np.array(corr)
    for f in (ece, adaptive_ece):
        v = f(c, y)
        assert 0.0 <= v <= 1.0
        assert f(c[perm], y[perm]) == pytest.approx(v, abs=1e-12)


def test_bin_boundaries_zero_one_fifteenth_and_one_exactly():
    d = reliability_diagram([0.0, 1 / 15, 1.0, np.nextafter(1 / 15, 0), 14 / 15], [1, 1, 1, 1, 1])
    expected = np.zeros(15, dtype=int)
    expected[0] = 2  # 0.0 and the float just below 1/15
    expected[1] = 1  # 1/15 opens bin 1 ([lo, hi) bins)
    expected[14] = 2  # 14/15 opens the last bin, which is closed at 1.0
    np.testing.assert_array_equal(d["counts"], expected)
    np.testing.assert_array_equal(d["edges"], np.arange(16) / 15)


def test_confidence_one_goes_to_last_bin_not_an_extra_bin():
    # torchmetrics 1.9 puts exactly 1.0 in a hidden 16th bin (issue #3510) and would give
    # 0.5 * 0.05 + 0.5 * 1.0 = 0.525; the textbook last bin [14/15, 1] gives |0.5 - 0.975|.
    assert ece([0.95, 1.0], [1, 0]) == pytest.approx(0.475, abs=1e-15)


def test_ece_closed_forms():
    assert ece([1.0, 1.0], [1, 1]) == 0.0
    assert ece([0.5, 0.5, 0.5, 0.5], [1, 0, 1, 0]) == 0.0
    assert ece([0.9] * 10, [1] * 6 + [0] * 4) == pytest.approx(0.3, abs=1e-15)
    assert ece([0.0], [1]) == 1.0
    # one bin: ECE reduces to |accuracy - mean confidence|
    assert ece([0.2, 0.9, 0.7], [1, 1, 0], n_bins=1) == pytest.approx(abs(2 / 3 - 0.6), abs=1e-15)


def test_adaptive_ece_equal_count_and_ties():
    conf = np.arange(1, 31) / 31.0
    assert np.bincount(_equal_count_bins(conf[::-1], 3)).tolist() == [10, 10, 10]
    assert np.bincount(_equal_count_bins(conf[:29], 3)).tolist() == [10, 10, 9]  # array_split sizes
    # A tie group straddling the cut goes wholly to the lower bin: [0.1, 0.5, 0.5, 0.9] with
    # 2 bins -> bins {0.1, 0.5, 0.5} and {0.9}.
    got = adaptive_ece([0.1, 0.5, 0.5, 0.9], [0, 1, 0, 1], n_bins=2)
    first = abs(1 / 3 - (0.1 + 0.5 + 0.5) / 3) * 3 / 4
    last = abs(1 - 0.9) / 4
    assert got == pytest.approx(first + last, abs=1e-15)


def test_against_torchmetrics_when_installed():
    torch = pytest.importorskip("torch")
    tm = pytest.importorskip("torchmetrics.functional.classification")
    rng = np.random.default_rng(0)
    n, k = 3000, 4
    logits = rng.normal(size=(n, k)) * rng.uniform(0.1, 4.0, size=(n, 1))
    probs = torch.softmax(torch.tensor(logits, dtype=torch.float32), dim=1)
    target = torch.tensor(rng.integers(0, k, n))
    conf32, pred = probs.max(dim=1)
    conf = conf32.double().numpy()  # exact: float32 -> float64
    # Stay away from float32-vs-float64 edge rounding and from the 1.0 extra-bin quirk.
    edges = np.arange(16) / 15
    keep = (np.abs(conf[:, None] - edges[None, :]).min(axis=1) > 1e-6) & (conf < 1.0)
    expected = tm.multiclass_calibration_error(probs[keep], target[keep], num_classes=k, n_bins=15, norm="l1")
    got = ece(conf[keep], (pred == target).numpy()[keep], n_bins=15)
    assert keep.sum() > 2900
    assert got == pytest.approx(float(expected), abs=2e-6)


def test_reliability_diagram_values_and_empty_bins():
    d = reliability_diagram([0.05, 0.15, 0.15, 0.95], [0, 1, 0, 1], n_bins=10)
    assert d["counts"].tolist() == [1, 2, 0, 0, 0, 0, 0, 0, 0, 1]
    np.testing.assert_allclose(d["mean_confidence"][[0, 1, 9]], [0.05, 0.15, 0.95])
    np.testing.assert_allclose(d["accuracy"][[0, 1, 9]], [0.0, 0.5, 1.0])
    assert np.isnan(d["accuracy"][2:9]).all() and np.isnan(d["mean_confidence"][2:9]).all()
    assert d["ece"] == pytest.approx(ece([0.05, 0.15, 0.15, 0.95], [0, 1, 0, 1], n_bins=10))


def test_plot_reliability_diagram_returns_renderable_figure():
    from matplotlib.figure import Figure

    rng = np.random.default_rng(1)
    c = rng.random(200)
    fig = plot_reliability_diagram(reliability_diagram(c, rng.random(200) < c))
    assert isinstance(fig, Figure)
    assert fig.axes[0].get_title().startswith("ECE = ")
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    assert buf.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"
    fig2 = Figure()
    ax = fig2.add_subplot()
    assert plot_reliability_diagram(reliability_diagram(c, c > 0.5), ax=ax, title="t") is fig2
    assert ax.get_title() == "t"
    with pytest.raises(ValueError, match="missing"):
        plot_reliability_diagram({"edges": [0, 1]})


# ---------------------------------------------------------------- NLL and Brier


def _ragged(rng, ks):
    kmax = max(ks)
    probs = np.full((len(ks), kmax), np.nan)
    for i, k in enumerate(ks):
        probs[i, :k] = rng.dirichlet(np.ones(k))
    return probs


@FAST
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(2, 6), n=st.integers(1, 40))
def test_nll_and_brier_match_sklearn_for_fixed_k(seed, k, n):
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.ones(k) * 0.7, size=n)
    probs = probs / probs.sum(axis=1, keepdims=True)
    gold = rng.integers(0, k, n)
    labels = list(range(k))
    assert nll(probs, gold) == pytest.approx(log_loss(gold, probs, labels=labels), rel=1e-12, abs=1e-12)
    if k == 2:  # sklearn scores binary input on the positive class only: half the 2-class sum
        want = 2 * brier_score_loss(gold, probs[:, 1], labels=labels)
    else:
        want = brier_score_loss(gold, probs, labels=labels)
    assert brier(probs, gold) == pytest.approx(want, rel=1e-12, abs=1e-15)


@FAST
@given(seed=st.integers(0, 2**32 - 1), ks=st.lists(st.integers(1, 5), min_size=1, max_size=30))
def test_nll_and_brier_on_ragged_rows_match_row_loop(seed, ks):
    rng = np.random.default_rng(seed)
    probs = _ragged(rng, ks)
    gold = np.array([rng.integers(0, k) for k in ks])
    want_nll = sum(-math.log(max(probs[i, g], NLL_FLOOR)) for i, g in enumerate(gold)) / len(ks)
    want_brier = sum(
        sum((probs[i, j] - (1.0 if j == g else 0.0)) ** 2 for j in range(ks[i])) for i, g in enumerate(gold)
    ) / len(ks)
    assert nll(probs, gold) == pytest.approx(want_nll, rel=1e-12)
    assert brier(probs, gold) == pytest.approx(want_brier, rel=1e-12, abs=1e-15)
    # Extra all-padding columns change nothing.
    wider = np.pad(probs, ((0, 0), (0, 2)), constant_values=np.nan)
    assert nll(wider, gold) == nll(probs, gold)
    assert brier(wider, gold) == brier(probs, gold)


def test_nll_floor_and_brier_extremes():
    probs = np.array([[1.0, 0.0, np.nan], [0.0, 0.0, 1.0]])
    assert nll(probs, [1, 2]) == pytest.approx((-math.log(NLL_FLOOR) + 0.0) / 2)
    assert -math.log(NLL_FLOOR) == pytest.approx(36.04365338911715)
    assert brier(probs, [0, 2]) == 0.0
    assert brier(probs, [1, 0]) == pytest.approx((2.0 + 2.0) / 2)


def test_row_metric_validation():
    probs = np.array([[0.5, 0.5, np.nan], [0.2, 0.3, 0.5]])
    with pytest.raises(ValueError, match="padding"):
        nll(probs, [2, 0])  # row 0 has K = 2
    with pytest.raises(ValueError, match="integer"):
        brier(probs, [0.0, 1.0])
    with pytest.raises(ValueError, match="one class index per row"):
        nll(probs, [0])
    with pytest.raises(ValueError, match="not a probability vector"):
        brier(np.array([[2.0, 3.0]]), [0])
    with pytest.raises(ValueError, match="NaN"):
        nll(np.array([[np.nan, 1.0]]), [1])


def test_confidence_validation_and_empty_input():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ece([0.5, 1.5], [1, 0])
    with pytest.raises(ValueError, match="n_bins"):
        ece([0.5], [1], n_bins=0)
    with pytest.raises(ValueError, match="n_bins"):
        adaptive_ece([0.5], [1], n_bins=True)
    with pytest.raises(ValueError, match="same length"):
        ece([0.5, 0.6], [1])
    for f in (ece, adaptive_ece):
        with pytest.warns(UndefinedMetricWarning, match="0 examples"):
            assert np.isnan(f([], []))
    with pytest.warns(UndefinedMetricWarning):
        assert np.isnan(nll(np.zeros((0, 3)), np.zeros(0, dtype=int)))
    with pytest.warns(UndefinedMetricWarning):
        assert np.isnan(brier(np.zeros((0, 3)), np.zeros(0, dtype=int)))
