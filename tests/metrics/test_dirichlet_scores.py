"""Dirichlet quantities and the score registry against per-row brute-force oracles."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate
from scipy.spatial.distance import jensenshannon
from scipy.special import digamma
from scipy.special import softmax as scipy_softmax
from scipy.stats import beta as beta_dist

from lm_eval_evidential.metrics import dirichlet as D
from lm_eval_evidential.metrics import scores as S

SETTINGS = settings(max_examples=60, deadline=None)


def pad(rows):
    width = max(len(r) for r in rows)
    out = np.full((len(rows), width), np.nan)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


ragged_logits = st.lists(st.lists(st.floats(-30, 30, allow_nan=False), min_size=2, max_size=6), min_size=1, max_size=8)
lambdas = st.sampled_from([0.5, 1.0, 2.0, 0.1])


# ---------------------------------------------------------------- brute-force oracles (per row, plain Python)


def softplus(x):
    return x + math.log1p(math.exp(-x)) if x > 0 else math.log1p(math.exp(x))


def py_entropy(p):
    return -sum(v * math.log(v) for v in p if v > 0)


def oracle_scores(alpha_row, lam):
    """Every registered score for one EDL row, written from the formulas in plain Python."""
    k = len(alpha_row)
    s = sum(alpha_row)
    p = [a / s for a in alpha_row]
    h = py_entropy(p)
    eh = float(digamma(s + 1)) - sum(a / s * float(digamma(a + 1)) for a in alpha_row)
    u = 1.0 / k
    m = [(v + u) / 2 for v in p]
    return {
        "reciprocal_vacuity": s / (lam * k),
        "max_prob": max(p),
        "neg_entropy": -h,
        "neg_norm_entropy": -h / math.log(k),
        "strength": s,
        "neg_expected_entropy": -eh,
        "neg_mutual_information": -(h - eh),
        "l2_norm": math.sqrt(sum(v * v for v in p)),
        "l1_to_uniform": sum(abs(v - u) for v in p),
        "l2_to_uniform": math.sqrt(sum((v - u) ** 2 for v in p)),
        "js_to_uniform": py_entropy(m) - 0.5 * h - 0.5 * math.log(k),
    }


# ---------------------------------------------------------------- dirichlet.py


@SETTINGS
@given(ragged_logits, lambdas)
def test_dirichlet_quantities_match_per_row_loops(rows, lam):
    logits = pad(rows)
    alpha = D.edl_alpha(logits, lam)
    k = D.class_counts(alpha)
    assert k.tolist() == [len(r) for r in rows]
    assert np.array_equal(np.isnan(alpha), np.isnan(logits))
    s, p, u = D.strength(alpha), D.expected_probs(alpha), D.vacuity(alpha, lam)
    for i, r in enumerate(rows):
        a_row = [softplus(x) + lam for x in r]
        np.testing.assert_allclose(alpha[i, : len(r)], a_row, rtol=1e-12)
        np.testing.assert_allclose(s[i], sum(a_row), rtol=1e-12)
        np.testing.assert_allclose(p[i, : len(r)], [a / sum(a_row) for a in a_row], rtol=1e-12)
        np.testing.assert_allclose(u[i], lam * len(r) / sum(a_row), rtol=1e-12)
        assert 0 < u[i] <= 1 + 1e-15


def test_edl_alpha_is_stable_for_extreme_logits():
    alpha = D.edl_alpha(np.array([[-1000.0, 0.0, 1000.0, 40.0]]))
    np.testing.assert_allclose(alpha[0], [1.0, 1.0 + math.log(2.0), 1001.0, 41.0], rtol=1e-15)


@SETTINGS
@given(ragged_logits)
def test_softmax_entropy_match_scipy_per_row(rows):
    logits = pad(rows)
    sm = D.softmax(logits)
    h = D.entropy(sm)
    for i, r in enumerate(rows):
        ref = scipy_softmax(np.array(r))
        np.testing.assert_allclose(sm[i, : len(r)], ref, rtol=1e-10, atol=1e-300)
        assert np.isnan(sm[i, len(r) :]).all()
        np.testing.assert_allclose(h[i], py_entropy(ref), rtol=1e-9, atol=1e-12)


def test_entropy_zero_log_zero_and_ragged_padding_ignored():
    p = pad([[1.0, 0.0, 0.0], [0.5, 0.5], [0.25] * 4])
    np.testing.assert_allclose(D.entropy(p), [0.0, math.log(2), math.log(4)], rtol=1e-15)


@pytest.mark.parametrize("a", [(0.7, 2.5), (1.0, 1.0), (3.0, 40.0)])
def test_expected_entropy_beta_by_quadrature(a):
    # K = 2: E[H] = integral of H(x, 1-x) under Beta(a1, a2), an oracle independent of digamma.
    h = lambda x: -(x * math.log(x) + (1 - x) * math.log(1 - x)) if 0 < x < 1 else 0.0
    ref, _ = integrate.quad(lambda x: h(x) * beta_dist.pdf(x, *a), 0, 1, limit=200)
    np.testing.assert_allclose(D.expected_entropy(np.array([a])), [ref], rtol=1e-7)


def test_expected_entropy_and_mi_monte_carlo_ragged():
    rng = np.random.default_rng(1)
    alpha = pad([[2.0, 1.0, 5.0], [1.0, 1.0, 1.0, 1.0, 1.0], [30.0, 1.5, 1.5, 2.0]])
    eh, mi = D.expected_entropy(alpha), D.mutual_information(alpha)
    for i, k in enumerate(D.class_counts(alpha)):
        draws = rng.dirichlet(alpha[i, :k], size=200_000)
        hs = -(draws * np.log(draws)).sum(axis=1)
        se = hs.std() / math.sqrt(hs.size)
        assert abs(eh[i] - hs.mean()) < 5 * se
        p_bar = alpha[i, :k] / alpha[i, :k].sum()
        np.testing.assert_allclose(mi[i], py_entropy(p_bar) - eh[i], rtol=1e-12)
        assert mi[i] > 0


@SETTINGS
@given(ragged_logits, lambdas)
def test_proposition_1_invariant_extra_alpha(rows, lam):
    alpha = D.edl_alpha(pad(rows), lam)
    k = D.class_counts(alpha)
    star = D.invariant_extra_alpha(alpha)
    np.testing.assert_allclose(star, D.strength(alpha) / k, rtol=1e-15)
    grown, new_k = D.expand_classes(alpha, 1, lam)
    grown[np.arange(len(rows)), k] = star  # the new class gets S_K / K instead of lambda
    np.testing.assert_allclose(D.vacuity(grown, lam), D.vacuity(alpha, lam), rtol=1e-12)
    # Any other concentration moves vacuity: strictly up below S/K, strictly down above.
    for factor, sign in ((0.5, 1), (2.0, -1)):
        other = grown.copy()
        other[np.arange(len(rows)), k] = star * factor
        assert (np.sign(D.vacuity(other, lam) - D.vacuity(alpha, lam)) == sign).all()


def test_zero_evidence_class_keeps_vacuity_only_without_evidence():
    alpha = np.array([[1.0, 1.0, 1.0, 1.0], [3.0, 1.0, 1.0, 1.0]])
    grown, k = D.expand_classes(alpha, 1)
    u0, u1 = D.vacuity(alpha), D.vacuity(grown)
    assert k.tolist() == [5, 5]
    assert u1[0] == u0[0] == 1.0
    assert u1[1] > u0[1]


def test_expand_classes_ragged_and_row_subset():
    alpha = pad([[2.0, 3.0], [1.5, 1.5, 4.0, 2.0], [5.0, 1.0, 1.0]])
    out, k = D.expand_classes(alpha, 2, prior_weight=0.5, rows=np.array([True, False, True]))
    assert k.tolist() == [4, 4, 5]
    assert out.shape == (3, 5)
    np.testing.assert_array_equal(out[0, :4], [2.0, 3.0, 0.5, 0.5])
    np.testing.assert_array_equal(out[1, :4], [1.5, 1.5, 4.0, 2.0])
    np.testing.assert_array_equal(out[2], [5.0, 1.0, 1.0, 0.5, 0.5])
    assert np.isnan(out[0, 4]) and np.isnan(out[1, 4])
    same, k0 = D.expand_classes(alpha, 0)
    np.testing.assert_array_equal(same, alpha)
    with pytest.raises(ValueError, match=r"extra=-1 must be an integer >= 0"):
        D.expand_classes(alpha, -1)
    with pytest.raises(ValueError, match="boolean mask"):
        D.expand_classes(alpha, 1, rows=np.array([1, 0, 1]))


def test_padding_validation_errors():
    with pytest.raises(ValueError, match="NaN before its last class"):
        D.strength(np.array([[1.0, np.nan, 2.0]]))
    with pytest.raises(ValueError, match="all NaN"):
        D.strength(np.array([[1.0, 2.0], [np.nan, np.nan]]))
    with pytest.raises(ValueError, match="2-D"):
        D.strength(np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="infinite"):
        D.edl_alpha(np.array([[1.0, np.inf]]))
    with pytest.raises(ValueError, match="> 0"):
        D.vacuity(np.array([[1.0, 0.0]]))
    with pytest.raises(ValueError, match="prior_weight"):
        D.edl_alpha(np.array([[1.0, 2.0]]), prior_weight=0.0)


# ---------------------------------------------------------------- scores.py

# The scores of p and alpha (the logit scores, neg_energy and max_logit, are tested in test_phantom_sweep.py;
# the member scores in test_members.py).
PROB_SCORES = [name for name, spec in S.SCORES.items() if not spec.needs_logits and not spec.needs_members]


@SETTINGS
@given(ragged_logits, lambdas)
def test_every_score_matches_brute_force_loop(rows, lam):
    alpha = D.edl_alpha(pad(rows), lam)
    probs, k = D.expected_probs(alpha), D.class_counts(alpha)
    got = {name: S.compute_score(name, probs=probs, k=k, alpha=alpha, prior_weight=lam) for name in PROB_SCORES}
    for i in range(len(rows)):
        ref = oracle_scores(alpha[i, : k[i]].tolist(), lam)
        assert set(ref) == set(PROB_SCORES)
        for name, value in ref.items():
            np.testing.assert_allclose(got[name][i], value, rtol=1e-9, atol=1e-12, err_msg=name)


@SETTINGS
@given(ragged_logits)
def test_js_to_uniform_matches_scipy_distance_squared(rows):
    probs = D.softmax(pad(rows))
    k = D.class_counts(probs)
    js = S.compute_score("js_to_uniform", probs=probs, k=k)
    for i in range(len(rows)):
        # scipy returns NaN (sqrt of a rounding-negative divergence) for p ~= uniform: that is 0
        ref = np.nan_to_num(jensenshannon(probs[i, : k[i]], np.full(k[i], 1.0 / k[i])) ** 2)
        np.testing.assert_allclose(js[i], ref, rtol=1e-6, atol=1e-12)


def test_orientation_confident_beats_flat_for_every_score():
    alpha = np.array([[50.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    probs, k = D.expected_probs(alpha), D.class_counts(alpha)
    for name in PROB_SCORES:
        v = S.compute_score(name, probs=probs, k=k, alpha=alpha)
        assert v[0] > v[1], name


def test_probs_can_be_derived_from_alpha():
    alpha = pad([[3.0, 1.0, 2.0], [1.0, 4.0]])
    k = D.class_counts(alpha)
    for name in PROB_SCORES:
        np.testing.assert_array_equal(
            S.compute_score(name, probs=None, k=k, alpha=alpha),
            S.compute_score(name, probs=D.expected_probs(alpha), k=k, alpha=alpha),
        )


def test_alpha_and_probs_of_different_width_and_mismatch():
    alpha = pad([[3.0, 1.0, 2.0], [1.0, 4.0]])
    k = D.class_counts(alpha)
    wide = np.hstack([D.expected_probs(alpha), np.full((2, 2), np.nan)])  # extra all-NaN columns
    for name in PROB_SCORES:
        np.testing.assert_array_equal(
            S.compute_score(name, probs=wide, k=k, alpha=alpha), S.compute_score(name, probs=None, k=k, alpha=alpha)
        )
    with pytest.raises(ValueError, match="same examples"):
        S.compute_score("max_prob", probs=pad([[0.5, 0.5], [0.5, 0.5]]), k=np.array([2, 2]), alpha=alpha)


def test_registry_api_and_errors():
    assert S.OOD_DEFAULT_SCORES == ("reciprocal_vacuity", "max_prob", "neg_norm_entropy")
    assert set(S.OOD_DEFAULT_SCORES) <= set(S.SCORES)
    assert S.available_scores(True, has_logits=True) == [n for n, s in S.SCORES.items() if not s.needs_members]
    assert S.available_scores(True) == PROB_SCORES
    no_alpha = S.available_scores(False)
    assert set(no_alpha) == {
        n for n, spec in S.SCORES.items() if not (spec.needs_alpha or spec.needs_logits or spec.needs_members)
    }
    assert {"reciprocal_vacuity", "strength", "neg_mutual_information"}.isdisjoint(no_alpha)
    for name, spec in S.SCORES.items():
        assert spec.name == name and f"``{name}``" in S.__doc__  # documented once, in the table
    probs = pad([[0.7, 0.2, 0.1], [0.5, 0.5]])
    k = np.array([3, 2])
    with pytest.raises(ValueError, match=r"unknown score\(s\) \['vacuity'\].*reciprocal_vacuity.*js_to_uniform"):
        S.compute_score("vacuity", probs=probs, k=k)
    with pytest.raises(ValueError, match="method=softmax"):
        S.compute_score("reciprocal_vacuity", probs=probs, k=k)
    with pytest.raises(ValueError, match="disagrees"):
        S.compute_score("max_prob", probs=probs, k=np.array([3, 3]))
    with pytest.raises(ValueError, match="not a probability vector"):
        S.compute_score("max_prob", probs=pad([[2.0, 1.0]]), k=np.array([2]))
    with pytest.raises(ValueError, match="K >= 2"):
        S.compute_score("neg_norm_entropy", probs=pad([[1.0], [0.5, 0.5]]), k=np.array([1, 2]))


def test_core_imports_neither_torch_nor_lm_eval():
    # Every module of the core package, including ones added later, in a fresh interpreter.
    code = (
        "import sys, pkgutil, importlib, lm_eval_evidential.metrics as c; "
        "names = [m.name for m in pkgutil.iter_modules(c.__path__, c.__name__ + '.')]; "
        "assert {'lm_eval_evidential.metrics.scores', 'lm_eval_evidential.metrics.cardinality'} <= set(names), names; "
        "[importlib.import_module(n) for n in names]; "
        "bad = [m for m in ('torch', 'lm_eval', 'transformers') if m in sys.modules]; "
        "assert not bad, bad"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
