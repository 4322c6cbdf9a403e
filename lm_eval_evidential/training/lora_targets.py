"""LoRA's target modules: the paper's, fitted to the architecture, or the user's, checked; and the LoraConfig."""

from __future__ import annotations

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.training.config import PAPER_TARGET_MODULES, TrainConfig


def _ties_output_to_input(model) -> bool:
    out, inp = model.get_output_embeddings(), model.get_input_embeddings()
    return out is not None and inp is not None and out.weight is inp.weight


def resolve_target_modules(
    model, requested: tuple[str, ...] | None, pretrained: str = "the model"
) -> tuple[tuple[str, ...], list[str]]:
    """``(LoRA target modules, notes)`` for ``model``: ``requested`` checked, or the paper's fitted.

    Default (``requested`` None): q_proj, v_proj, lm_head; Phi-3's fused ``qkv_proj`` stands in
    for q_proj and v_proj, and lm_head is left out when it is tied to the input embeddings.
    Given names must each match a module (PEFT's rule: the name or a dotted suffix), and
    lm_head is refused on a tied model, with the reason and the fix, before any training.
    """
    names = [n for n, _ in model.named_modules() if n]
    present = lambda target: any(n == target or n.endswith("." + target) for n in names)  # noqa: E731
    tied = _ties_output_to_input(model)
    if requested is None:
        targets, notes = list(PAPER_TARGET_MODULES), []
        if not present("q_proj") and present("qkv_proj"):
            targets = ["qkv_proj", *[t for t in targets if t not in ("q_proj", "v_proj")]]
            notes.append(
                "this architecture fuses q, k and v into qkv_proj (Phi-3): targeting qkv_proj for q_proj, v_proj"
            )
        if tied:
            targets.remove("lm_head")
            notes.append(
                "lm_head is tied to the input embeddings: not targeted, so the adapter loads in --model hf too "
                "(docs/training.md: tied embeddings)"
            )
        return tuple(targets), notes
    missing = [t for t in requested if not present(t)]
    if missing:
        leaves = sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if type(m).__name__ == "Linear"})
        raise InvalidValueError(
            f"target module(s) {', '.join(missing)} not found in {pretrained} ({model.config.model_type}); its linear "
            f"layers are {', '.join(leaves)} — pass --target-modules from those, or leave it unset for the paper's, "
            "fitted to the architecture"
        )
    if tied and ("lm_head" in requested or "embed_tokens" in requested):
        raise InvalidValueError(
            f"{pretrained} ties its output layer to its input embeddings (tie_word_embeddings=True), and "
            "--target-modules "
            "names lm_head/embed_tokens. Such an adapter cannot be loaded by lm-eval's --model hf (transformers' "
            "tie_weights() fails on the PEFT-wrapped tied layer: KeyError \"attribute 'weight' already exists\"), and "
            "merging it would change the input embeddings too. Fix: leave lm_head out (--target-modules q_proj,v_proj, "
            "the default for tied models), or train on an untied copy of the base (tie_word_embeddings=False, with its "
            "own lm_head) and evaluate with that copy"
        )
    return tuple(requested), []


def lora_config(config: TrainConfig, targets: tuple[str, ...]):
    """The ``peft.LoraConfig`` of ``config`` on ``targets`` (:func:`resolve_target_modules`)."""
    from peft import LoraConfig

    return LoraConfig(
        r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
        target_modules=list(targets),
        bias=config.lora_bias,
        task_type="CAUSAL_LM",
    )
