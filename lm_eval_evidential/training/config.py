"""``TrainConfig``: every setting of ``lm-eval-evidential train`` (one CLI option per field).

Defaults are the vacuity paper's Table 7, which follows the IB-EDL reference (Li et al. 2025,
sandylaker/ib-edl, configs/obqa_llama3_8b): LoRA r=8, alpha=16, dropout 0.1 on q_proj, v_proj
and lm_head, bias "lora_only"; AdamW lr 5e-5, cosine schedule, 20 warm-up steps, weight decay
0.001, max grad norm 20, batch 4, seed 42, 10080 steps; IB-EDL 20 noise draws, β = 1e-5. The
paper does not state the KL annealing; the default is the reference code's (see
``kl_anneal_epochs``), which does not depend on the run's length.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.modeling.config import HeadConfig
from lm_eval_evidential.params import Integral, Interval, Options, Param, Real, check_fields, declared_params

# The paper's LoRA targets (Table 7); training fits them to the architecture (trainer.resolve_target_modules).
PAPER_TARGET_MODULES = ("q_proj", "v_proj", "lm_head")


#: The constraints of the settings below; the head's settings are the head's own (HeadConfig), so training
#: and --model evidential refuse a bad value in the same words.
POSITIVE_INT = Param(Interval(Integral, 1))
POSITIVE = Param(Interval(Real, 0, None, closed="neither"))
NON_NEGATIVE = Param(Interval(Real, 0))
NON_NEGATIVE_INT = Param(Interval(Integral, 0))
# An option given as a number or left out (None): a refusal says what a number must be.
AT_LEAST_ONE_OR_NONE = Param(None, Interval(Integral, 1), must="an integer >= 1")
NON_NEGATIVE_INT_OR_NONE = Param(None, Interval(Integral, 0), must="an integer >= 0")
DTYPE = Param(Options(("auto", "float32", "bfloat16", "float16")), noun="dtype")
ENSEMBLE = Param(
    None,
    Interval(Integral, 2),
    must="an integer number of members >= 2",
    example="--ensemble 3, or drop --ensemble to train one adapter",
)
HEAD = declared_params(HeadConfig)


def _opt(default, help: str, **extra):
    return field(default=default, metadata={"help": help, **extra})


@dataclass
class TrainConfig:
    """Everything :func:`train` needs besides the base model and the task (CLI: ``--field-name``)."""

    method: str = _opt(
        "edl",
        "training objective: edl (Sensoy MSE + annealed KL), ib_edl, softmax (cross-entropy)",
        param=HEAD["method"],
    )
    output_dir: str | None = _opt(None, "folder for checkpoints and the final adapter (required)")
    max_steps: int = _opt(10080, "optimiser steps (paper: 10080)", param=POSITIVE_INT)
    learning_rate: float = _opt(5e-5, "peak learning rate", flags=("--lr",), param=POSITIVE)
    lr_scheduler_type: str = _opt("cosine", "transformers scheduler name")
    warmup_steps: int = _opt(20, "linear warm-up steps", param=NON_NEGATIVE_INT)
    weight_decay: float = _opt(0.001, "AdamW weight decay", param=NON_NEGATIVE)
    max_grad_norm: float = _opt(20.0, "gradient clipping norm", param=NON_NEGATIVE)
    per_device_train_batch_size: int = _opt(
        4, "questions per device per step", flags=("--batch-size",), param=POSITIVE_INT
    )
    gradient_accumulation_steps: int = _opt(1, "micro-batches per optimiser step", param=POSITIVE_INT)
    seed: int = _opt(42, "seed for LoRA initialisation, data order, dropout and IB-EDL noise")
    ensemble: int | None = _opt(
        None,
        "train an ensemble of N >= 2 members into OUTPUT_DIR/member_0 .. member_{N-1}, member i with seed SEED + i "
        "(peft=OUTPUT_DIR then scores them as one ensemble); a rerun skips the members already complete and resumes "
        "an unfinished one from its last checkpoint",
        param=ENSEMBLE,
    )
    # LoRA (Table 7)
    lora_r: int = _opt(8, "LoRA rank", param=POSITIVE_INT)
    lora_alpha: int = _opt(16, "LoRA alpha")
    lora_dropout: float = _opt(
        0.1,
        "LoRA dropout, kept in the adapter's adapter_config.json; > 0 lets --model_args mc_samples=N score the adapter "
        "by MC dropout",
        param=NON_NEGATIVE,
    )
    target_modules: tuple[str, ...] | None = _opt(
        None,
        "LoRA target modules (comma-separated). Default: the paper's q_proj,v_proj,lm_head, fitted to the "
        "architecture (Phi-3's fused qkv_proj for q_proj,v_proj; no lm_head when it is tied to the input embeddings)",
    )
    lora_bias: str = _opt("lora_only", "PEFT LoRA bias setting")
    # Objective
    prior_weight: float = _opt(1.0, "Dirichlet prior weight λ: alpha = softplus(z) + λ", param=HEAD["prior_weight"])
    kl_weight: float = _opt(1.0, "edl: final weight of KL(Dir(alpha~) || Dir(1))", param=NON_NEGATIVE)
    kl_anneal_epochs: float = _opt(
        3.0,
        "edl: KL weight = kl_weight * min(1, e / this), e = completed passes over the training docs (the IB-EDL "
        "reference's schedule, whose Trainer kept num_train_epochs=3; Sensoy et al. 2018 used 10); 0 = full weight "
        "at once",
        param=NON_NEGATIVE,
    )
    kl_anneal_steps: int | None = _opt(
        None,
        "edl: instead ramp linearly per optimiser step, min(1, step / this); 0 = full weight at once",
        param=NON_NEGATIVE_INT_OR_NONE,
    )
    num_noises: int = _opt(
        20,
        "ib_edl: noise draws per question, in training and (saved with the adapter) at evaluation",
        param=HEAD["num_noises"],
    )
    beta: float = _opt(
        1e-5, "ib_edl: weight of the information loss (reference OBQA/Llama-3 config: 1e-5)", param=NON_NEGATIVE
    )
    sigma_mult: float = _opt(
        0.0,
        "ib_edl: post-hoc alpha -= sigma_mult*sigma at evaluation (saved with the adapter)",
        param=HEAD["sigma_mult"],
    )
    # Data and model
    train_split: str | None = _opt(None, "split to train on (default: the task's training_split)")
    max_train_docs: int | None = _opt(
        None, "use only the first N training docs (smoke runs)", param=AT_LEAST_ONE_OR_NONE
    )
    max_length: int | None = _opt(
        None, "longest prompt allowed in tokens (default: the model's max positions); never truncates"
    )
    dtype: str = _opt("auto", "dtype to load the base model in", param=DTYPE)
    bf16: bool = _opt(False, "bfloat16 mixed precision (the reference trains with it on A100)")
    gradient_checkpointing: bool = _opt(False, "trade compute for activation memory (off: a step recomputes nothing)")
    group_by_length: bool = _opt(
        True,
        "batch questions of similar length together (transformers' LengthGroupedSampler: random groups of 50 "
        "batches, sorted within), so left padding stays small; --no-group-by-length for uniformly random batches",
    )
    # Checkpoints and logging
    logging_steps: int = _opt(20, "log the loss every N steps", param=POSITIVE_INT)
    save_steps: int = _opt(500, "save a checkpoint every N steps", param=POSITIVE_INT)
    save_total_limit: int | None = _opt(2, "keep at most N checkpoints")
    resume_from_checkpoint: str | None = _opt(
        None, "a checkpoint folder, or 'latest' for the newest checkpoint-N in output_dir", nargs="?", const="latest"
    )
    overwrite_output_dir: bool = _opt(False, "allow training into a folder that is not empty")
    report_to: str = _opt("none", "transformers report_to (none, tensorboard, wandb, …)")

    def __post_init__(self) -> None:
        if isinstance(self.target_modules, str):
            self.target_modules = tuple(m.strip() for m in self.target_modules.split(",") if m.strip())
        elif self.target_modules is not None:
            self.target_modules = tuple(self.target_modules)
        check_fields(self)
        if self.target_modules is not None and not self.target_modules:
            raise InvalidValueError("target_modules is empty; name at least one module, e.g. q_proj,v_proj,lm_head")
