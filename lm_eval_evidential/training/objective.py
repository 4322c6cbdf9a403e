"""The training objective: one batch's loss (EDL, IB-EDL or softmax) from its last-position logits, the
loss terms apart for the log, and the warning when mean evidence collapses or explodes."""

from __future__ import annotations

import math

from lm_eval_evidential.modeling.encoding import last_position_logits
from lm_eval_evidential.training.config import TrainConfig

# Mean evidence per answer below which training has collapsed (vacuity >= ~0.95 at K = 4:
# the flat all-zero-evidence state of the loss), and above which it is exploding.
COLLAPSED_EVIDENCE = 0.05
EXPLODING_EVIDENCE = 1e3


def last_logits(model, batch: dict):
    """Last-position logits (B, V) in float32, as evaluation computes them."""
    return last_position_logits(model, batch["input_ids"], batch["attention_mask"], batch["position_ids"]).float()


def batch_loss(logits, batch: dict, config: TrainConfig, *, kl_weight: float = 0.0, generator=None):
    """``(loss, terms)`` of one batch from its last-position logits (B, V).

    ``terms``: detached means over the batch for the log: ``mse`` and ``kl`` (edl, with the
    ``kl_weight`` applied), ``info`` (ib_edl, before β), ``ce`` (softmax), and the mean
    ``evidence`` per answer and ``vacuity`` λK/S of the deterministic alpha = softplus(z) + λ.
    """
    import torch
    import torch.nn.functional as F

    from lm_eval_evidential.modeling import losses
    from lm_eval_evidential.modeling.heads import sigma_logits

    answer_ids, k = batch["answer_ids"], batch["k"]
    mask = losses.class_mask(k, answer_ids.shape[1])
    z = logits.gather(1, answer_ids)
    target = batch["target"]
    if config.method == "softmax":
        loss = losses.softmax_ce_loss(z, target, mask=mask)
        return loss, {"ce": loss.detach()}
    if config.method == "edl":
        mse, kl = losses.edl_loss_terms(z, target, prior_weight=config.prior_weight, mask=mask)
        loss = (mse + kl_weight * kl).mean()
        terms = {"mse": mse.mean(), "kl": kl.mean(), "kl_weight": torch.tensor(kl_weight)}
    else:
        mse, info = losses.ib_edl_loss_terms(
            z,
            sigma_logits(logits, k, mask),  # the last K vocabulary logits, as at evaluation
            target,
            num_noises=config.num_noises,
            prior_weight=config.prior_weight,
            mask=mask,
            generator=generator,
        )
        loss = (mse + config.beta * info).mean()
        terms = {"mse": mse.mean(), "info": info.mean()}
    with torch.no_grad():
        evidence = torch.where(mask, F.softplus(z.float()), torch.zeros_like(z, dtype=torch.float32))
        strength = evidence.sum(-1) + config.prior_weight * k
        terms["evidence"] = evidence.sum() / mask.sum()
        terms["vacuity"] = (config.prior_weight * k / strength).mean()
    return loss, {name: value.detach().float() for name, value in terms.items()}


def evidence_warning(mean_evidence: float, step: int, config: TrainConfig, kl_weight: float) -> str | None:
    """The warning for a collapsed or exploding mean evidence per answer, naming the likely cause; else None."""
    if config.method == "softmax" or not math.isfinite(mean_evidence):
        return None
    if mean_evidence < COLLAPSED_EVIDENCE:
        cause = (
            f"the KL regulariser (weight now {kl_weight:.3g}) pushes every answer's evidence down faster than the "
            "fit term rewards the right one: it reached full weight too early (--kl-anneal-epochs, --kl-anneal-steps) "
            "or is too strong (--kl-weight)"
            if config.method == "edl"
            else f"the information loss (beta={config.beta:g}) outweighs the fit term (--beta)"
        )
        return (
            f"step {step}: mean evidence per answer {mean_evidence:.3g} — training has collapsed to near-zero "
            f"evidence for every answer (vacuity ≈ 1, the loss's flat all-zero-evidence state). Likely cause: {cause}, "
            f"or a learning rate too high for this model (--lr {config.learning_rate:g})"
        )
    if mean_evidence > EXPLODING_EVIDENCE:
        return (
            f"step {step}: mean evidence per answer {mean_evidence:.3g} — evidence is exploding. Likely cause: a "
            f"learning rate too high (--lr {config.learning_rate:g}) or gradient clipping too loose "
            f"(--max-grad-norm {config.max_grad_norm:g}), or no regulariser (--kl-weight / --beta 0)"
        )
    return None
