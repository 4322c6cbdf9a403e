"""Evidence heads: the torch layer that turns answer-token logits into Dirichlet parameters.

Each head maps the last-position logits at the K answer tokens (and, for IB-EDL, the
per-class noise scale) to ``alpha`` in float64. Evaluation applies the head to a whole batch
of questions at once (:func:`apply_head_batch`), and each question's result is bit-identical
to the head applied to that question alone: never dependent on its batch neighbours (IB-EDL
noise is drawn from a generator keyed by the question itself, not the batch).

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
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.modeling.config import METHODS, HeadConfig  # noqa: F401  (re-exported)


@dataclass(frozen=True)
class HeadOutput:
    """Head output (float64), one row per question: shape (B, K) from :func:`apply_head_batch`,
    (K,) from :func:`apply_head`. ``evidence``/``alpha`` are None for softmax."""

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


def sigma_logits(last_logits: torch.Tensor, k, mask: torch.Tensor | None = None) -> torch.Tensor:
    """IB-EDL's σ pre-activations t of K-class questions: the **last K vocabulary logits**, class j ↦
    logit V − K + j (as in Li et al. 2025's reference), the one rule of training and evaluation.

    ``last_logits`` (B, W) are the last W ≥ K logits of the vocabulary (all V of them, or a kept
    tail). ``k`` is one K for every row (then (B, K) columns W − K … W − 1), or a (B,) tensor of
    per-row K with ``mask`` (B, K_max) marking each row's classes (then (B, K_max); a padded
    column holds the last logit, masked out downstream).

    Examples
    --------
    >>> sigma_logits(torch.arange(10.0).reshape(2, 5), 2)
    tensor([[3., 4.],
            [8., 9.]])
    >>> k = torch.tensor([2, 1]); sigma_logits(torch.arange(10.0).reshape(2, 5), k, torch.tensor([[1, 1], [1, 0]]) > 0)
    tensor([[3., 4.],
            [9., 9.]])
    """
    width = last_logits.shape[-1]
    if mask is None:
        return last_logits[:, width - int(k) :]
    cols = torch.arange(mask.shape[1], device=last_logits.device)[None, :]
    index = torch.where(mask, width - k[:, None].to(last_logits.device) + cols, torch.full_like(cols, width - 1))
    return last_logits.gather(1, index)


# at::internal::GRAIN_SIZE: elementwise kernels split larger tensors across threads at
# arbitrary element offsets, which would move the SIMD/scalar boundary inside a question.
_GRAIN = 32768


def per_question(fn, x: torch.Tensor) -> torch.Tensor:
    """``fn`` (elementwise) applied to each question's block ``x[i]`` exactly as if it were alone.

    torch computes elementwise functions in SIMD blocks (SLEEF exp/log1p) and the elements
    after the last full block with the scalar libm functions; the two differ in the last bit,
    so in one flat batch an element's result would depend on where the question sits, i.e.
    on its batch neighbours. Rows laid out one element apart cannot be merged into one flat
    loop: each question's block runs through the kernel's inner loop on its own, with the
    same SIMD/scalar split as a lone question, and the result is bit-identical to it.
    """
    if x.ndim < 2 or x.shape[0] == 0:  # one question, or none
        return fn(x)
    flat = x.reshape(x.shape[0], -1)
    n = flat.shape[1]
    spaced = torch.empty((flat.shape[0], n + 1), dtype=x.dtype, device=x.device)
    spaced[:, :n] = flat
    step = max(1, _GRAIN // (n + 1))
    out = torch.cat([fn(spaced[i : i + step, :n]) for i in range(0, flat.shape[0], step)])
    return out.reshape(x.shape)


def edl_alpha(logits: torch.Tensor, prior_weight: float = 1.0) -> torch.Tensor:
    """alpha = softplus(z) + λ (standard EDL, Sensoy et al. 2018)."""
    return per_question(F.softplus, logits) + prior_weight


def ib_edl_alpha(
    logits: torch.Tensor,
    sigma: torch.Tensor,
    noise: torch.Tensor,
    *,
    prior_weight: float = 1.0,
    sigma_mult: float = 0.0,
) -> torch.Tensor:
    """IB-EDL inference (Li et al. 2025): alpha = max(mean_d softplus(z + σ ε_d) + λ − sigma_mult·σ, λ).

    ``logits`` and ``sigma`` have shape (..., K); ``noise`` holds the draws ε_d ~ N(0, 1),
    d = 1..D, with shape (..., D, K) (see :func:`question_noise`). The floor is λ (= 1 at the
    default prior) so evidence stays ≥ 0.
    """
    alpha = (per_question(F.softplus, logits.unsqueeze(-2) + sigma.unsqueeze(-2) * noise) + prior_weight).mean(dim=-2)
    return torch.clamp(alpha - sigma_mult * sigma, min=prior_weight)


def question_noise(seed: int, keys: Sequence[str], num_noises: int, k: int) -> torch.Tensor:
    """IB-EDL's standard-normal draws for each question, shape (len(keys), num_noises, k), float64.

    Question i's draws come from its own generator seeded by :func:`question_seed` of ``keys[i]``,
    so they are the same whichever batch, rank or task the question is scored in.
    """
    draws = [
        torch.randn(
            (num_noises, k), generator=torch.Generator().manual_seed(question_seed(seed, key)), dtype=torch.float64
        )
        for key in keys
    ]
    return torch.stack(draws) if draws else torch.empty((0, num_noises, k), dtype=torch.float64)


def apply_head_batch(
    config: HeadConfig,
    logits: torch.Tensor,
    *,
    sigma_logits: torch.Tensor | None = None,
    keys: Sequence[str] | None = None,
) -> HeadOutput:
    """Apply ``config`` to a batch of questions with the same K: ``logits`` of shape (B, K); float64.

    Row i's result is bit-identical to applying the head to row i alone: every operation is
    elementwise or reduces within a row, and IB-EDL's noise for row i comes from its own
    generator seeded by ``keys[i]`` (see :func:`question_seed`), never from a batch-wide stream.
    ``sigma_logits`` (B, K) are the IB-EDL pre-activations of σ (σ = softplus(sigma_logits)).
    The result lives on the CPU whatever device ``logits`` came from (one copy per batch).
    """
    z = logits.detach().to(device="cpu", dtype=torch.float64)
    if z.ndim != 2:
        raise InvalidValueError(f"logits must have shape (B, K), got {tuple(z.shape)}")
    if config.method == "softmax":
        return HeadOutput(logits=z, evidence=None, alpha=None, probs=torch.softmax(z, dim=-1))
    if config.method == "edl":
        alpha = edl_alpha(z, config.prior_weight)
    else:
        if sigma_logits is None:
            raise InvalidValueError("method=ib_edl needs sigma_logits (the last K vocabulary logits)")
        if keys is None or len(keys) != z.shape[0]:
            raise InvalidValueError(f"method=ib_edl needs one key per question: {z.shape[0]} rows, keys={keys!r}")
        sigma = per_question(F.softplus, sigma_logits.detach().to(device="cpu", dtype=torch.float64))
        noise = question_noise(config.seed, keys, int(config.num_noises), z.shape[1])
        alpha = ib_edl_alpha(z, sigma, noise, prior_weight=config.prior_weight, sigma_mult=config.sigma_mult)
    return HeadOutput(
        logits=z, evidence=alpha - config.prior_weight, alpha=alpha, probs=alpha / alpha.sum(dim=-1, keepdim=True)
    )


def apply_head(
    config: HeadConfig,
    logits: torch.Tensor,
    *,
    sigma_logits: torch.Tensor | None = None,
    key: str = "",
) -> HeadOutput:
    """Apply ``config`` to one question's answer logits (shape (K,)): :func:`apply_head_batch` on one row."""
    out = apply_head_batch(
        config,
        logits.reshape(1, -1),
        sigma_logits=None if sigma_logits is None else sigma_logits.reshape(1, -1),
        keys=[key],
    )
    return HeadOutput(*(None if t is None else t[0] for t in (out.logits, out.evidence, out.alpha, out.probs)))
