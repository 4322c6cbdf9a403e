"""Training losses checked against hand computations, scipy's Dirichlet and plain-Python loops."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import dirichlet

from lm_eval_evidential.modeling import losses

T = torch.float64


def t(x):
    return torch.tensor(np.asarray(x, dtype=np.float64), dtype=T)


def inv_softplus(e: float) -> float:
    return math.log(math.expm1(e))


def softplus(x: float) -> float:
    return math.log1p(math.exp(x))


def mse_loop(alpha: list[float], gold: int) -> float:
    """Bayes-risk MSE by a loop over classes: squared bias of E[p_i] plus Var[p_i]."""
    s = sum(alpha)
    total = 0.0
    for i, a in enumerate(alpha):
        mean = a / s
        var = mean * (1 - mean) / (s + 1)
        total += ((1.0 if i == gold else 0.0) - mean) ** 2 + var
    return total


# ------------------------------------------------------------------ edl_mse_loss
def test_mse_by_hand():
    # alpha (2, 1, 1), gold 0: S = 4, p = (1/2, 1/4, 1/4)
    # error 1/4 + 1/16 + 1/16 = 3/8; variance (2·2 + 1·3 + 1·3)/(16·5) = 10/80 = 1/8
    got = losses.edl_mse_loss(t([[2.0, 1.0, 1.0]]), t([[1.0, 0.0, 0.0]]))
    assert got.item() == pytest.approx(0.5, abs=1e-12)


def test_mse_is_sensoy_not_the_papers_typo():
    # The printed (alpha_i + 1) denominator would give 3/8 + 4/48 + 2·3/32 = 0.6458…, not 0.5.
    typo = 3 / 8 + 4 / 48 + 2 * 3 / 32
    got = losses.edl_mse_loss(t([[2.0, 1.0, 1.0]]), t([[1.0, 0.0, 0.0]])).item()
    assert abs(got - typo) > 0.1


def test_mse_matches_scipy_dirichlet_moments():
    rng = np.random.default_rng(0)
    alpha = rng.uniform(0.5, 9.0, size=(6, 5))
    gold = rng.integers(0, 5, size=6)
    y = np.eye(5)[gold]
    expected = [float(((y[b] - dirichlet.mean(alpha[b])) ** 2 + dirichlet.var(alpha[b])).sum()) for b in range(6)]
    got = losses.edl_mse_loss(t(alpha), t(y), reduction="none")
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12)
    assert losses.edl_mse_loss(t(alpha), t(y)).item() == pytest.approx(np.mean(expected), rel=1e-12)
    assert losses.edl_mse_loss(t(alpha), t(y), reduction="sum").item() == pytest.approx(np.sum(expected), rel=1e-12)


# ------------------------------------------------------------------ KL
def test_kl_by_hand_two_classes():
    # Dir(2, 1) is Beta(2, 1), density 2p: KL to uniform = ∫ 2p ln(2p) dp = ln 2 − 1/2.
    got = losses.kl_to_uniform_dirichlet(t([[2.0, 1.0]]))
    assert got.item() == pytest.approx(math.log(2) - 0.5, abs=1e-12)


def test_kl_of_uniform_is_zero():
    assert losses.kl_to_uniform_dirichlet(t([[1.0, 1.0, 1.0, 1.0]])).item() == pytest.approx(0.0, abs=1e-12)


def test_kl_matches_scipy_entropy():
    # KL(Dir(a) || Dir(1)) = −H(Dir(a)) − ln Γ(K): the uniform Dirichlet's density is Γ(K).
    rng = np.random.default_rng(1)
    alpha = rng.uniform(0.3, 12.0, size=(5, 4))
    expected = [-dirichlet.entropy(a) - math.lgamma(4) for a in alpha]
    got = losses.kl_to_uniform_dirichlet(t(alpha), reduction="none")
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-10, atol=1e-12)


def test_misleading_alpha_removes_true_evidence():
    got = losses.misleading_alpha(t([[3.0, 2.0, 5.0]]), t([[0.0, 1.0, 0.0]]))
    assert got.tolist() == [[3.0, 1.0, 5.0]]


@given(st.lists(st.floats(0.05, 50.0), min_size=2, max_size=6), st.data())
@settings(max_examples=60, deadline=None)
def test_properties(alpha, data):
    gold = data.draw(st.integers(0, len(alpha) - 1))
    a = t([alpha])
    y = F.one_hot(torch.tensor([gold]), len(alpha)).to(T)
    mse = losses.edl_mse_loss(a, y).item()
    assert mse == pytest.approx(mse_loop(alpha, gold), rel=1e-9, abs=1e-12)
    assert 0.0 <= mse <= 2.0  # E‖y − p‖² over the simplex is at most 2
    assert losses.kl_to_uniform_dirichlet(a).item() >= -1e-9


# ------------------------------------------------------------------ annealing and edl_loss
def test_kl_anneal_weight():
    assert [losses.kl_anneal_weight(s, 10) for s in (0, 5, 10, 25)] == [0.0, 0.5, 1.0, 1.0]
    assert losses.kl_anneal_weight(3, 0) == 1.0


def test_edl_loss_by_hand():
    # evidence (2, 1, 1) → alpha (3, 2, 2), S = 7, gold 0; alpha~ = (1, 2, 2).
    z = t([[inv_softplus(2.0), inv_softplus(1.0), inv_softplus(1.0)]])
    mse = (1 - 3 / 7) ** 2 + 2 * (2 / 7) ** 2 + (3 * 4 + 2 * 5 * 2) / (49 * 8)
    kl = -dirichlet.entropy([1.0, 2.0, 2.0]) - math.lgamma(3)
    target = torch.tensor([0])
    at = lambda step: losses.edl_loss(z, target, step=step, anneal_steps=10).item()  # noqa: E731
    assert at(0) == pytest.approx(mse, abs=1e-12)
    assert at(5) == pytest.approx(mse + 0.5 * kl, abs=1e-12)
    assert at(99) == pytest.approx(mse + kl, abs=1e-12)
    half = losses.edl_loss(z, target, step=99, anneal_steps=10, kl_weight=0.5).item()
    assert half == pytest.approx(mse + 0.5 * kl, abs=1e-12)


def test_edl_loss_prior_weight():
    # λ = 0.5: alpha = (2.5, 1.5, 1.5), no KL at step 0.
    z = t([[inv_softplus(2.0), inv_softplus(1.0), inv_softplus(1.0)]])
    got = losses.edl_loss(z, torch.tensor([1]), step=0, anneal_steps=5, prior_weight=0.5).item()
    assert got == pytest.approx(mse_loop([2.5, 1.5, 1.5], 1), abs=1e-12)


# ------------------------------------------------------------------ IB-EDL
def ib_loop(mu, s_logit, noise, gold, beta, prior=1.0):
    """Plain-Python IB-EDL loss of one example: mean over draws of the MSE, plus β·KL(N(μ,σ²)‖N(0,1))."""
    k, draws = len(mu), len(noise)
    sigma = [softplus(x) for x in s_logit]
    mse = 0.0
    for eps in noise:
        alpha = [softplus(mu[i] + sigma[i] * eps[i]) + prior for i in range(k)]
        mse += mse_loop(alpha, gold) / draws
    info = 0.5 * sum(mu[i] ** 2 + sigma[i] ** 2 - 2 * math.log(sigma[i]) - 1 for i in range(k))
    return mse + beta * info


def test_ib_edl_loss_matches_loop():
    rng = np.random.default_rng(2)
    mu = rng.normal(size=(3, 4))
    s_logit = rng.normal(size=(3, 4))
    noise = rng.normal(size=(3, 5, 4))
    gold = [0, 3, 2]
    got = losses.ib_edl_loss(t(mu), t(s_logit), torch.tensor(gold), beta=0.3, noise=t(noise), reduction="none")
    expected = [ib_loop(list(mu[b]), list(s_logit[b]), noise[b].tolist(), gold[b], 0.3) for b in range(3)]
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12)


def test_ib_edl_without_noise_is_edl_mse_plus_information():
    # σ = softplus(0) = ln 2 for every class; ε = 0 → alpha = softplus(μ) + 1.
    mu = [inv_softplus(2.0), inv_softplus(1.0)]
    sigma = math.log(2)
    info = 0.5 * (sum(m * m for m in mu) + 2 * (sigma**2 - 2 * math.log(sigma) - 1))
    got = losses.ib_edl_loss(t([mu]), t([[0.0, 0.0]]), torch.tensor([0]), beta=2.0, noise=torch.zeros(1, 3, 2, dtype=T))
    assert got.item() == pytest.approx(mse_loop([3.0, 2.0], 0) + 2.0 * info, abs=1e-12)


def test_ib_edl_draws_from_generator():
    mu, s = torch.randn(2, 4, dtype=T), torch.randn(2, 4, dtype=T, requires_grad=True)
    run = lambda seed: losses.ib_edl_loss(  # noqa: E731
        mu, s, torch.tensor([1, 2]), beta=1e-5, num_noises=7, generator=torch.Generator().manual_seed(seed)
    )
    assert run(0).item() == run(0).item() != run(1).item()
    run(0).backward()
    assert s.grad.abs().sum() > 0  # σ is learned through the reparameterised draws


def test_ib_edl_info_is_finite_for_tiny_sigma():
    # softplus(−200) underflows to 0 in float64; log σ must still be −200, not −inf.
    got = losses.ib_edl_loss(t([[0.0, 0.0]]), t([[-200.0, 0.0]]), torch.tensor([0]), beta=1.0, num_noises=2)
    assert math.isfinite(got.item()) and got.item() > 199


# ------------------------------------------------------------------ softmax
def test_softmax_ce_by_hand():
    assert losses.softmax_ce_loss(t([[0.0, 0.0, 0.0, 0.0]]), torch.tensor([2])).item() == pytest.approx(math.log(4))
    # logits (ln 3, 0): p = (3/4, 1/4)
    got = losses.softmax_ce_loss(t([[math.log(3), 0.0]]), torch.tensor([1])).item()
    assert got == pytest.approx(math.log(4), abs=1e-12)


# ------------------------------------------------------------------ ragged K
def _all_losses(z, s, target, mask, noise):
    if mask is None:
        alpha = F.softplus(z) + 1
    else:
        # The alpha-level losses get the junk itself as padded alpha (the logits-level ones mask it).
        alpha = torch.where(mask, F.softplus(torch.where(mask, z, 0.0)) + 1, z.detach())
    return {
        "mse": losses.edl_mse_loss(alpha, F.one_hot(target, z.shape[1]).to(T), mask=mask, reduction="none"),
        "kl": losses.kl_to_uniform_dirichlet(alpha, mask=mask, reduction="none"),
        "edl": losses.edl_loss(z, target, step=3, anneal_steps=4, mask=mask, reduction="none"),
        "ib": losses.ib_edl_loss(z, s, target, beta=0.1, noise=noise, mask=mask, reduction="none"),
        "ce": losses.softmax_ce_loss(z, target, mask=mask, reduction="none"),
    }


@pytest.mark.parametrize("pad_value", [0.0, 1e4, float("inf"), float("nan")])
def test_padding_is_not_a_class(pad_value):
    rng = np.random.default_rng(3)
    z4, s4, n4 = rng.normal(size=4), rng.normal(size=4), rng.normal(size=(3, 4))
    z5, s5, n5 = rng.normal(size=5), rng.normal(size=5), rng.normal(size=(3, 5))
    alone = _all_losses(t([z4]), t([s4]), torch.tensor([3]), None, t([n4]))
    # Row 0 (K = 4) padded to 5 with junk, next to a K = 5 row.
    z = t([[*z4, pad_value], z5]).requires_grad_(True)
    s = t([[*s4, pad_value], s5]).requires_grad_(True)
    noise = t(np.stack([np.c_[n4, np.full(3, pad_value)], n5]))
    mask = losses.class_mask(torch.tensor([4, 5]))
    mixed = _all_losses(z, s, torch.tensor([3, 4]), mask, noise)
    for name, value in mixed.items():
        assert value[0].item() == pytest.approx(alone[name][0].item(), rel=1e-12, abs=1e-12), name
        value[0].backward(retain_graph=True)
        assert torch.isfinite(z.grad).all() and z.grad[0, 4] == 0, name
        assert s.grad is None or (torch.isfinite(s.grad).all() and s.grad[0, 4] == 0), name
        z.grad = None
        s.grad = None


def test_class_mask():
    assert losses.class_mask(torch.tensor([2, 3]), 4).tolist() == [
        [True, True, False, False],
        [True, True, True, False],
    ]


# ------------------------------------------------------------------ validation
def test_target_outside_its_row_is_rejected():
    mask = losses.class_mask(torch.tensor([4, 5]))
    with pytest.raises(ValueError, match=r"target\[0\] = 4 .*K = 4"):
        losses.edl_loss(torch.zeros(2, 5), torch.tensor([4, 4]), step=0, anneal_steps=1, mask=mask)


def test_bad_inputs_are_rejected():
    with pytest.raises(ValueError, match="mask must be a bool tensor"):
        losses.softmax_ce_loss(torch.zeros(2, 4), torch.tensor([0, 1]), mask=torch.ones(2, 4))
    with pytest.raises(
        ValueError, match="unknown reduction 'avg'; choose one of mean, sum, none; e.g. reduction='none'"
    ):
        losses.softmax_ce_loss(torch.zeros(2, 4), torch.tensor([0, 1]), reduction="avg")
    for loss in (losses.ib_edl_loss, losses.ib_edl_loss_terms):  # the head's declaration: training refuses alike
        kwargs = {"beta": 0.1} if loss is losses.ib_edl_loss else {}
        with pytest.raises(ValueError, match=r"num_noises=0 must be an integer >= 1 \(IB-EDL's noise draws"):
            loss(torch.zeros(2, 4), torch.zeros(2, 4), torch.tensor([0, 1]), num_noises=0, **kwargs)
    with pytest.raises(ValueError, match="integer class indices"):
        losses.softmax_ce_loss(torch.zeros(2, 4), torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="sigma_logits must have"):
        losses.ib_edl_loss(torch.zeros(2, 4), torch.zeros(2, 3), torch.tensor([0, 1]), beta=1.0)
