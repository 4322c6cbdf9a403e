"""Training losses for evidential fine-tuning of an LLM on K-class multiple-choice QA (torch).

Notation: z (B, K) answer-token logits at the last position, y one-hot targets,
evidence e = softplus(z), Dirichlet alpha = e + λ (λ: prior weight, 1 for standard EDL),
strength S = Σ_i alpha_i, expected probability p_i = alpha_i / S.

Ragged K: every function takes an optional boolean ``mask`` of shape (B, K_max), True for a
row's real classes (its first K entries) and False for right padding. Padded entries are
never classes: they contribute nothing to S, to any sum, or to the gradient, whatever
values the padding holds (so a batch may mix K=4 and K=5 questions). ``mask=None`` means
every column is a class.

``reduction``: "mean" (over the batch, the default; what the trainer uses), "sum", or
"none" (one value per example, shape (B,)).

| function                  | formula (per example)                                              |
|---------------------------|--------------------------------------------------------------------|
| edl_mse_loss              | Σ_i (y_i − p_i)² + alpha_i (S − alpha_i) / (S² (S + 1))            |
| kl_to_uniform_dirichlet   | KL(Dir(alpha~) ‖ Dir(1))                                           |
| edl_loss                  | MSE(alpha) + kl_weight · min(1, t / T) · KL(Dir(alpha~) ‖ Dir(1)) |
| ib_edl_loss               | mean_d MSE(softplus(μ + σ ε_d) + λ) + β · ½ Σ_i (μ_i² + σ_i² − 2 log σ_i − 1) |
| softmax_ce_loss           | −log softmax(z)_gold                                               |
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.modeling.config import HeadConfig
from lm_eval_evidential.params import Options, Param, declared_params, validate_params

__all__ = [
    "edl_mse_loss",
    "kl_to_uniform_dirichlet",
    "misleading_alpha",
    "kl_anneal_weight",
    "edl_loss",
    "edl_loss_terms",
    "ib_edl_loss",
    "ib_edl_loss_terms",
    "softmax_ce_loss",
    "class_mask",
]

#: ``reduction`` of every loss, torch's three: the batch mean, the sum, or the per-example values.
REDUCTION = Param(Options(("mean", "sum", "none")), noun="reduction", example="reduction='none'")
#: IB-EDL's noise draws per question: the head's own declaration, so training and evaluation refuse alike.
NUM_NOISES = declared_params(HeadConfig)["num_noises"]


def class_mask(k: torch.Tensor, k_max: int | None = None) -> torch.Tensor:
    """Boolean (B, K_max) mask, True in the first ``k[b]`` columns of row b."""
    k = torch.as_tensor(k)
    k_max = int(k.max()) if k_max is None else int(k_max)
    return torch.arange(k_max, device=k.device)[None, :] < k[:, None]


def _reduce(per_example: torch.Tensor, reduction: str) -> torch.Tensor:
    """``reduction`` (checked against :data:`REDUCTION` where the loss is called) of the per-example values."""
    if reduction == "mean":
        return per_example.mean()
    if reduction == "sum":
        return per_example.sum()
    return per_example


def _check_mask(x: torch.Tensor, mask: torch.Tensor | None, name: str) -> torch.Tensor:
    if x.dim() != 2:
        raise InvalidValueError(f"{name} must have shape (batch, K), got {tuple(x.shape)}")
    if mask is None:
        return torch.ones_like(x, dtype=torch.bool)
    if mask.shape != x.shape or mask.dtype != torch.bool:
        raise InvalidValueError(
            f"mask must be a bool tensor of {name}'s shape {tuple(x.shape)}, got {mask.dtype} {tuple(mask.shape)}; "
            "build it with class_mask(k, K_max)"
        )
    if not bool(mask[:, 0].all()):
        raise InvalidValueError("mask has a row without classes (K = 0); every question needs K >= 1 options")
    return mask


def _masked(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    # Padding zeroed before any elementwise op, so junk there (inf, NaN) cannot reach the
    # gradient as 0 · NaN through the op's derivative.
    return torch.where(mask, x, torch.zeros_like(x))


def _one_hot(target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    target = torch.as_tensor(target, device=mask.device)
    if (
        target.dim() != 1
        or target.shape[0] != mask.shape[0]
        or target.is_floating_point()
        or target.dtype == torch.bool
    ):
        raise InvalidValueError(
            f"target must be integer class indices of shape ({mask.shape[0]},), got {target.dtype} "
            f"{tuple(target.shape)}"
        )
    k = mask.sum(-1)
    bad = (target < 0) | (target >= k)
    if bool(bad.any()):
        row = int(bad.nonzero()[0, 0])
        raise InvalidValueError(f"target[{row}] = {int(target[row])} is not a class of that row (K = {int(k[row])})")
    return F.one_hot(target.long(), mask.shape[1])


@validate_params({"reduction": REDUCTION})
def edl_mse_loss(
    alpha: torch.Tensor, target_onehot: torch.Tensor, *, mask: torch.Tensor | None = None, reduction: str = "mean"
) -> torch.Tensor:
    """Bayes risk of the squared error under Dir(alpha) (Sensoy et al. 2018, eq. 5).

        L = Σ_i (y_i − alpha_i/S)² + alpha_i (S − alpha_i) / (S² (S + 1)),   S = Σ_i alpha_i

    The second term is Var[p_i] of the Dirichlet. The vacuity paper (§2.1) prints it as
    alpha_i(alpha_0 − alpha_i)/(alpha_0²(alpha_i + 1)); that denominator is a typo: the
    Dirichlet variance has (S + 1), as in Sensoy et al. and the IB-EDL reference code
    (``p(1 − p)/(S + 1)``, the same quantity). Sums run over the real classes of each row.
    """
    mask = _check_mask(alpha, mask, "alpha")
    y = target_onehot.to(alpha.dtype)
    a = torch.where(mask, alpha, torch.zeros_like(alpha))
    s = a.sum(-1, keepdim=True)
    p = a / s
    err = torch.where(mask, (y - p) ** 2, torch.zeros_like(p))
    var = a * (s - a) / (s * s * (s + 1.0))
    return _reduce((err + var).sum(-1), reduction)


def misleading_alpha(alpha: torch.Tensor, target_onehot: torch.Tensor) -> torch.Tensor:
    """alpha~ = y + (1 − y) · alpha: the true class's evidence removed (its alpha set to 1)."""
    y = target_onehot.to(alpha.dtype)
    return y + (1.0 - y) * alpha


@validate_params({"reduction": REDUCTION})
def kl_to_uniform_dirichlet(
    alpha_tilde: torch.Tensor, *, mask: torch.Tensor | None = None, reduction: str = "mean"
) -> torch.Tensor:
    """KL(Dir(alpha~) ‖ Dir(1, …, 1)) in closed form (Sensoy et al. 2018, eq. 7).

        KL = ln Γ(S~) − ln Γ(K) − Σ_i ln Γ(alpha~_i) + Σ_i (alpha~_i − 1)(ψ(alpha~_i) − ψ(S~))

    with S~ = Σ_i alpha~_i over the row's K real classes (ln Γ(K) is ln of the uniform
    Dirichlet's density). Pass ``misleading_alpha(alpha, y)`` to get the EDL regulariser.
    """
    mask = _check_mask(alpha_tilde, mask, "alpha_tilde")
    # Padding set to 1: ln Γ(1) = 0 and (1 − 1)(…) = 0, so padded columns add nothing.
    a = torch.where(mask, alpha_tilde, torch.ones_like(alpha_tilde))
    s = torch.where(mask, a, torch.zeros_like(a)).sum(-1)
    k = mask.sum(-1).to(a.dtype)
    per = (
        torch.lgamma(s)
        - torch.lgamma(k)
        - torch.lgamma(a).sum(-1)
        + ((a - 1.0) * (torch.digamma(a) - torch.digamma(s)[:, None])).sum(-1)
    )
    return _reduce(per, reduction)


def kl_anneal_weight(step: int, anneal_steps: int) -> float:
    """λ_t = min(1, step / anneal_steps); 1 from the start when ``anneal_steps`` <= 0.

    ``step`` is the number of optimiser steps already taken (the trainer's ``global_step``).
    A per-step version of the IB-EDL reference's per-epoch ramp min(1, epoch / epochs).
    """
    if anneal_steps <= 0:
        return 1.0
    return min(1.0, max(0, step) / float(anneal_steps))


@validate_params({"reduction": REDUCTION})
def edl_loss(
    logits: torch.Tensor,
    target: torch.Tensor,
    *,
    step: int,
    anneal_steps: int,
    prior_weight: float = 1.0,
    kl_weight: float = 1.0,
    mask: torch.Tensor | None = None,
    reduction: str = "mean",
) -> torch.Tensor:
    """Standard EDL loss (Sensoy et al. 2018) on answer logits.

        alpha = softplus(z) + λ
        L = edl_mse_loss(alpha, y) + kl_weight · min(1, step / anneal_steps) · KL(Dir(alpha~) ‖ Dir(1))

    alpha~ = y + (1 − y) alpha. ``target``: integer class indices (B,). ``kl_weight`` is the
    final weight of the regulariser (1 in the IB-EDL reference's standard-EDL runs).
    """
    mse, kl = edl_loss_terms(logits, target, prior_weight=prior_weight, mask=mask)
    return _reduce(mse + kl_weight * kl_anneal_weight(step, anneal_steps) * kl, reduction)


def edl_loss_terms(
    logits: torch.Tensor, target: torch.Tensor, *, prior_weight: float = 1.0, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The two terms of :func:`edl_loss` per example, (B,) each: edl_mse_loss(alpha, y) and
    KL(Dir(alpha~) ‖ Dir(1)), with alpha = softplus(z) + λ. Training weights and logs them apart."""
    mask = _check_mask(logits, mask, "logits")
    y = _one_hot(target, mask)
    alpha = F.softplus(_masked(logits, mask)) + prior_weight
    mse = edl_mse_loss(alpha, y, mask=mask, reduction="none")
    return mse, kl_to_uniform_dirichlet(misleading_alpha(alpha, y), mask=mask, reduction="none")


def _log_softplus(x: torch.Tensor) -> torch.Tensor:
    # log(softplus(x)) → x as x → −∞, where softplus underflows and the plain log gives −inf.
    return torch.where(x < -20.0, x, torch.log(F.softplus(x)))


@validate_params({"num_noises": NUM_NOISES, "reduction": REDUCTION})
def ib_edl_loss(
    logits: torch.Tensor,
    sigma_logits: torch.Tensor,
    target: torch.Tensor,
    *,
    beta: float,
    num_noises: int = 20,
    prior_weight: float = 1.0,
    mask: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    noise: torch.Tensor | None = None,
    reduction: str = "mean",
) -> torch.Tensor:
    """IB-EDL loss (Li et al. 2025, "Calibrating LLMs with Information-Theoretic Evidential
    Deep Learning", ICLR 2025), as in its reference code (sandylaker/ib-edl,
    ``EvidentialTrainer.apply_ib`` + ``SSBayesRiskLoss``):

        μ = z (answer logits),  σ = softplus(sigma_logits)  (the last K vocabulary logits)
        z_d = μ + σ ⊙ ε_d,  ε_d ~ N(0, I),  d = 1..D (``num_noises``)
        alpha_d = softplus(z_d) + λ
        L = (1/D) Σ_d edl_mse_loss(alpha_d, y) + β · ½ Σ_i (μ_i² + σ_i² − 2 log σ_i − 1)

    The second term is KL(N(μ, diag σ²) ‖ N(0, I)), the information loss (the paper's
    ½(‖μ‖² + ‖σ‖² − 2 Σ log σ) up to the constant −K/2, which the reference keeps). As in the
    reference's IB configs there is no KL-to-uniform-Dirichlet term (its weight is 0).
    ``noise`` (B, D, K) replaces the draws (for tests); otherwise ε comes from ``generator``.
    """
    mse, info = ib_edl_loss_terms(
        logits,
        sigma_logits,
        target,
        num_noises=num_noises,
        prior_weight=prior_weight,
        mask=mask,
        generator=generator,
        noise=noise,
    )
    return _reduce(mse + beta * info, reduction)


@validate_params({"num_noises": NUM_NOISES})
def ib_edl_loss_terms(
    logits: torch.Tensor,
    sigma_logits: torch.Tensor,
    target: torch.Tensor,
    *,
    num_noises: int = 20,
    prior_weight: float = 1.0,
    mask: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    noise: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The two terms of :func:`ib_edl_loss` per example, (B,) each: the noisy MSE averaged over
    the D draws, and the information loss ½ Σ_i (μ_i² + σ_i² − 2 log σ_i − 1) (before β)."""
    mask = _check_mask(logits, mask, "logits")
    if sigma_logits.shape != logits.shape:
        raise InvalidValueError(
            f"sigma_logits must have logits' shape {tuple(logits.shape)}, got {tuple(sigma_logits.shape)}"
        )
    y = _one_hot(target, mask)
    logits, sigma_logits = _masked(logits, mask), _masked(sigma_logits, mask)
    sigma = F.softplus(sigma_logits)
    b, k = logits.shape
    if noise is None:
        noise = torch.randn((b, int(num_noises), k), generator=generator, dtype=logits.dtype, device=logits.device)
    elif noise.dim() != 3 or noise.shape[0] != b or noise.shape[2] != k:
        raise InvalidValueError(f"noise must have shape ({b}, num_noises, {k}), got {tuple(noise.shape)}")
    noise = torch.where(mask[:, None, :], noise, torch.zeros_like(noise))
    d = noise.shape[1]
    alpha = F.softplus(logits[:, None, :] + sigma[:, None, :] * noise) + prior_weight  # (B, D, K)
    mse = (
        edl_mse_loss(
            alpha.reshape(b * d, k),
            y[:, None, :].expand(b, d, k).reshape(b * d, k),
            mask=mask[:, None, :].expand(b, d, k).reshape(b * d, k),
            reduction="none",
        )
        .reshape(b, d)
        .mean(-1)
    )
    kl = 0.5 * (logits**2 + sigma**2 - 2.0 * _log_softplus(sigma_logits) - 1.0)
    return mse, torch.where(mask, kl, torch.zeros_like(kl)).sum(-1)


@validate_params({"reduction": REDUCTION})
def softmax_ce_loss(
    logits: torch.Tensor, target: torch.Tensor, *, mask: torch.Tensor | None = None, reduction: str = "mean"
) -> torch.Tensor:
    """Cross-entropy of softmax over the row's K answer logits: −log softmax(z)_gold (MAP baseline)."""
    mask = _check_mask(logits, mask, "logits")
    y = _one_hot(target, mask)
    z = torch.where(mask, logits, torch.full_like(logits, float("-inf")))
    logp = torch.log_softmax(z, dim=-1)
    per = -torch.where(y.bool(), logp, torch.zeros_like(logp)).sum(-1)
    return _reduce(per, reduction)
