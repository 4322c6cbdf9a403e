"""Evidence heads: the torch layer that turns answer-token logits into Dirichlet parameters.

Each head maps the last-position logits at the K answer tokens (and, for IB-EDL, the
per-class noise scale) to ``alpha`` of shape (K,) in float64. Heads work on one question
at a time in evaluation so that a question's result never depends on its batch neighbours
(IB-EDL noise is drawn from a generator keyed by the question itself, not the batch).

| method   | evidence e                                   | alpha                              | vacuity   |
|----------|----------------------------------------------|------------------------------------|-----------|
| edl      | softplus(z)                                  | e + λ                              | λK/S      |
| ib_edl   | mean_d softplus(z + σ·ε_d), σ = softplus(t)  | max(e + λ − sigma_mult·σ, λ)       | λK/S      |
| softmax  | undefined (MAP baseline, p = softmax(z))     | undefined                          | undefined |

z: answer-token logits; t: the last K vocabulary logits (IB-EDL's σ head); ε_d ~ N(0, 1),
d = 1..num_noises; λ: prior weight (1 for standard EDL; R-EDL uses other values).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from lm_eval_evidential.modeling.config import METHODS, HeadConfig  # noqa: F401  (re-exported)


@dataclass(frozen=True)
class HeadOutput:
    """Per-question head output (float64). ``evidence``/``alpha`` are None for softmax."""

    logits: torch.Tensor
    evidence: torch.Tensor | None
    alpha: torch.Tensor | None
    probs: torch.Tensor


def question_seed(seed: int, key: str) -> int:
    """A 63-bit seed from the run seed and a question key (its prompt and answer ids).

    Keyed by content, not position, so IB-EDL noise is identical for a question whatever
    its batch, rank or task (identical prompts in two tasks get identical records).
    """
    digest = hashlib.blake2b(f"{seed}\x00{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


def edl_alpha(logits: torch.Tensor, prior_weight: float = 1.0) -> torch.Tensor:
    """alpha = softplus(z) + λ (standard EDL, Sensoy et al. 2018)."""
    return F.softplus(logits) + prior_weight


def ib_edl_alpha(
    logits: torch.Tensor,
    sigma: torch.Tensor,
    *,
    prior_weight: float = 1.0,
    num_noises: int = 20,
    sigma_mult: float = 0.0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """IB-EDL inference (Li et al. 2025): alpha = max(mean_d softplus(z + σ ε_d) + λ − sigma_mult·σ, λ).

    ``logits`` and ``sigma`` have the same shape (..., K); ε_d ~ N(0, 1), d = 1..num_noises,
    drawn from ``generator``. The floor is λ (= 1 at the default prior) so evidence stays ≥ 0.
    """
    noise = torch.randn(
        (num_noises, *logits.shape), generator=generator, dtype=logits.dtype, device=logits.device
    )
    alpha = (F.softplus(logits + sigma * noise) + prior_weight).mean(dim=0)
    return torch.clamp(alpha - sigma_mult * sigma, min=prior_weight)


def apply_head(
    config: HeadConfig,
    logits: torch.Tensor,
    *,
    sigma_logits: torch.Tensor | None = None,
    key: str = "",
) -> HeadOutput:
    """Apply ``config`` to one question's answer logits (shape (K,)); float64 throughout.

    ``sigma_logits`` are the IB-EDL pre-activations of σ (σ = softplus(sigma_logits)); ``key``
    identifies the question for the IB-EDL noise generator (see :func:`question_seed`).
    """
    z = logits.detach().to(torch.float64).cpu()
    if config.method == "softmax":
        return HeadOutput(logits=z, evidence=None, alpha=None, probs=torch.softmax(z, dim=-1))
    if config.method == "edl":
        alpha = edl_alpha(z, config.prior_weight)
    else:
        if sigma_logits is None:
            raise ValueError("method=ib_edl needs sigma_logits (the last K vocabulary logits)")
        sigma = F.softplus(sigma_logits.detach().to(torch.float64).cpu())
        generator = torch.Generator().manual_seed(question_seed(config.seed, key))
        alpha = ib_edl_alpha(
            z,
            sigma,
            prior_weight=config.prior_weight,
            num_noises=int(config.num_noises),
            sigma_mult=config.sigma_mult,
            generator=generator,
        )
    return HeadOutput(logits=z, evidence=alpha - config.prior_weight, alpha=alpha, probs=alpha / alpha.sum())
