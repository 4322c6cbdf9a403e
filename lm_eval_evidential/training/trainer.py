"""LoRA fine-tuning of a causal LM as a K-class evidential classifier (EDL, IB-EDL or softmax).

The training data are the task's own docs rendered by the task's own definitions, so a
model is trained on exactly what ``--model evidential`` later scores: the prompt is
``task.doc_to_text(doc)``, the K answers are ``target_delimiter + choice`` (" A".." E"),
and each answer's token id is read off the tokenizer the way the evaluator does it
(encode(prompt + " A") minus encode(prompt); exactly one token, or an error). K may vary
per question: batches are padded to the batch's largest K and the padded classes masked.

Batches are left-padded with explicit position ids (a row's positions count its real
tokens only) and the model computes logits for the last position only
(``logits_to_keep=1``), as in evaluation.

The loop is ``transformers.Trainer`` (tqdm progress, checkpoints, ``resume_from_checkpoint``,
and multi-GPU through ``accelerate launch -m lm_eval_evidential train …``). The result is
an ordinary PEFT adapter folder plus ``evidential_config.json``; with it,
``--model evidential --model_args pretrained=BASE,peft=OUT`` uses the trained method
(explicit model_args still win). Every ``checkpoint-N`` folder gets the same file.

Defaults are the vacuity paper's Table 7 / the IB-EDL reference (sandylaker/ib-edl,
configs/obqa_llama3_8b): LoRA r=8, alpha=16, dropout 0.1 on q_proj, v_proj and lm_head,
bias "lora_only"; AdamW lr 5e-5, cosine schedule, 20 warm-up steps, weight decay 0.001,
max grad norm 20, batch 4, seed 42, 10080 steps; IB-EDL 20 noise draws, β = 1e-5.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from lm_eval_evidential.modeling.config import (  # noqa: F401
    HEAD_KEYS,
    METADATA_FILE,
    METADATA_FORMAT,
    METHODS,
    head_defaults,
    read_metadata,
    write_metadata,
)

logger = logging.getLogger(__name__)

def _opt(default, help: str, **extra):
    return field(default=default, metadata={"help": help, **extra})


@dataclass
class TrainConfig:
    """Everything :func:`train` needs besides the base model and the task (CLI: ``--field-name``)."""

    method: str = _opt(
        "edl", "training objective: edl (Sensoy MSE + annealed KL), ib_edl, softmax (cross-entropy)", choices=METHODS
    )
    output_dir: str | None = _opt(None, "folder for checkpoints and the final adapter (required)")
    max_steps: int = _opt(10080, "optimiser steps (paper: 10080)")
    learning_rate: float = _opt(5e-5, "peak learning rate", flags=("--lr",))
    lr_scheduler_type: str = _opt("cosine", "transformers scheduler name")
    warmup_steps: int = _opt(20, "linear warm-up steps")
    weight_decay: float = _opt(0.001, "AdamW weight decay")
    max_grad_norm: float = _opt(20.0, "gradient clipping norm")
    per_device_train_batch_size: int = _opt(4, "questions per device per step", flags=("--batch-size",))
    gradient_accumulation_steps: int = _opt(1, "micro-batches per optimiser step")
    seed: int = _opt(42, "seed for LoRA initialisation, data order, dropout and IB-EDL noise")
    # LoRA (Table 7)
    lora_r: int = _opt(8, "LoRA rank")
    lora_alpha: int = _opt(16, "LoRA alpha")
    lora_dropout: float = _opt(0.1, "LoRA dropout")
    target_modules: tuple[str, ...] = _opt(("q_proj", "v_proj", "lm_head"), "LoRA target modules (comma-separated)")
    lora_bias: str = _opt("lora_only", "PEFT LoRA bias setting")
    # Objective
    prior_weight: float = _opt(1.0, "Dirichlet prior weight λ: alpha = softplus(z) + λ")
    kl_weight: float = _opt(1.0, "edl: final weight of KL(Dir(alpha~) || Dir(1))")
    kl_anneal_steps: int | None = _opt(None, "edl: KL weight ramps as min(1, step / this); default max_steps")
    num_noises: int = _opt(20, "ib_edl: noise draws per question (training and evaluation default)")
    beta: float = _opt(1e-5, "ib_edl: weight of the information loss (reference OBQA/Llama-3 config: 1e-5)")
    sigma_mult: float = _opt(0.0, "ib_edl: post-hoc alpha -= sigma_mult*sigma at evaluation (stored as the default)")
    # Data and model
    train_split: str | None = _opt(None, "split to train on (default: the task's training_split)")
    max_train_docs: int | None = _opt(None, "use only the first N training docs (smoke runs)")
    max_length: int | None = _opt(None, "longest prompt allowed in tokens (default: the model's max positions); never truncates")
    dtype: str = _opt("auto", "dtype to load the base model in", choices=("auto", "float32", "bfloat16", "float16"))
    bf16: bool = _opt(False, "bfloat16 mixed precision (the reference trains with it on A100)")
    gradient_checkpointing: bool = _opt(False, "trade compute for activation memory")
    # Checkpoints and logging
    logging_steps: int = _opt(20, "log the loss every N steps")
    save_steps: int = _opt(500, "save a checkpoint every N steps")
    save_total_limit: int | None = _opt(2, "keep at most N checkpoints")
    resume_from_checkpoint: str | None = _opt(
        None, "a checkpoint folder, or 'latest' for the newest checkpoint-N in output_dir", nargs="?", const="latest"
    )
    overwrite_output_dir: bool = _opt(False, "allow training into a folder that already holds a finished adapter")
    report_to: str = _opt("none", "transformers report_to (none, tensorboard, wandb, …)")

    def __post_init__(self) -> None:
        if isinstance(self.target_modules, str):
            self.target_modules = tuple(m.strip() for m in self.target_modules.split(",") if m.strip())
        else:
            self.target_modules = tuple(self.target_modules)
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        for name in ("max_steps", "per_device_train_batch_size", "gradient_accumulation_steps", "lora_r",
                     "logging_steps", "save_steps", "num_noises"):  # fmt: skip
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("learning_rate", "prior_weight"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("weight_decay", "max_grad_norm", "kl_weight", "beta", "sigma_mult", "lora_dropout", "warmup_steps"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if self.max_train_docs is not None and self.max_train_docs < 1:
            raise ValueError(f"max_train_docs must be >= 1 or None, got {self.max_train_docs!r}")
        if not self.target_modules:
            raise ValueError("target_modules is empty; name at least one module, e.g. q_proj,v_proj,lm_head")

    @property
    def anneal_steps(self) -> int:
        return self.max_steps if self.kl_anneal_steps is None else int(self.kl_anneal_steps)


# --------------------------------------------------------------------------- data
def _load_task(task_name: str):
    from lm_eval.tasks import TaskManager

    from lm_eval_evidential.harness.plugin import tasks_dir

    meta = {"load_all_splits": True}
    # Our own folder alone indexes in milliseconds; the full harness index takes seconds.
    manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata=meta)
    if task_name not in manager.all_tasks:
        manager = TaskManager(metadata=meta)
    loaded = manager.load([task_name])["tasks"]
    if task_name not in loaded:
        raise ValueError(f"task {task_name!r} is not a single task (a group?); pass one task such as obqa_edl")
    return loaded[task_name]


def _task_name(task) -> str:
    return str(getattr(getattr(task, "config", None), "task", None) or getattr(task, "task_name", "task"))


def training_docs(task, split: str | None = None) -> list[dict]:
    """The docs of ``split`` (default: the task's training split), loading it if needed."""
    name = _task_name(task)
    split = split or task.config.training_split
    if not split:
        raise ValueError(f"task {name!r} declares no training_split; pass --train-split")
    if split == task.config.training_split and task.has_training_docs():
        return list(task.training_docs())  # with the task's own process_docs, where it has one
    if split == task.config.validation_split and task.has_validation_docs():
        return list(task.validation_docs())
    dataset = getattr(task, "dataset", None) or {}
    if split not in dataset:
        raise ValueError(
            f"task {name!r}: split {split!r} is not loaded (loaded: {sorted(dataset)}); load the task with "
            "TaskManager(metadata={'load_all_splits': True}) or pass the task name to train()"
        )
    return list(dataset[split])


def encode_examples(task, docs: list[dict], tokenizer, max_length: int | None = None) -> tuple[list[dict], dict[str, int]]:
    """Tokenise ``docs`` the way the evaluator does: (examples, {answer string: token id}).

    Each example: ``input_ids`` (prompt tokens, the tokenizer's default special tokens, as
    lm-eval's ``tok_encode``), ``answer_ids`` (K ids), ``target`` (gold index), ``k``.
    """
    from tqdm import tqdm

    name = _task_name(task)
    delimiter = task.config.target_delimiter
    prompts, choices, golds = [], [], []
    for doc in docs:
        prompts.append(task.doc_to_text(doc))
        choices.append([delimiter + str(c) for c in task.doc_to_choice(doc)])
        golds.append(int(task.doc_to_target(doc)))
    prompt_ids = tokenizer(prompts)["input_ids"]
    flat = [p + c for p, cs in zip(prompts, choices) for c in cs]
    whole_ids = tokenizer(flat)["input_ids"]

    answer_map: dict[str, int] = {}
    examples, pos = [], 0
    for i, doc in enumerate(tqdm(docs, desc=f"{name}: encoding", unit="doc", mininterval=1.0)):
        where = f"task {name!r} doc {doc.get('doc_id', i)}"
        ids, answers = prompt_ids[i], []
        if max_length is not None and len(ids) > max_length:
            raise ValueError(
                f"{where}: prompt is {len(ids)} tokens, longer than max_length={max_length}; raise --max-length "
                "(training never truncates a question)"
            )
        for cont in choices[i]:
            whole = whole_ids[pos]
            pos += 1
            if len(whole) != len(ids) + 1 or whole[: len(ids)] != ids:
                raise ValueError(
                    f"{where}: answer {cont!r} is not a single token appended to the prompt by this tokenizer "
                    f"(prompt {len(ids)} tokens, prompt+answer {len(whole)}); use the *_edl tasks (labels ' A'..' E') "
                    "or a tokenizer that encodes them as one token each"
                )
            tid = int(whole[-1])
            if answer_map.setdefault(cont, tid) != tid:
                raise ValueError(f"{where}: answer {cont!r} encodes as token {tid} here but {answer_map[cont]} elsewhere")
            answers.append(tid)
        if len(set(answers)) != len(answers):
            raise ValueError(f"{where}: answers {choices[i]} share token ids {answers}; each must be its own token")
        if not 0 <= golds[i] < len(answers):
            raise ValueError(f"{where}: gold index {golds[i]} is not one of its {len(answers)} options")
        examples.append({"input_ids": list(ids), "answer_ids": answers, "target": golds[i], "k": len(answers)})
    return examples, answer_map


class LeftPadCollator:
    """Batches of examples → left-padded tensors with position ids and a class mask."""

    def __init__(self, pad_token_id: int):
        self.pad_token_id = int(pad_token_id)

    def __call__(self, rows: list[dict]) -> dict:
        import torch

        width = max(len(r["input_ids"]) for r in rows)
        k_max = max(r["k"] for r in rows)
        n = len(rows)
        input_ids = torch.full((n, width), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((n, width), dtype=torch.long)
        answer_ids = torch.zeros((n, k_max), dtype=torch.long)
        for i, r in enumerate(rows):
            ids = r["input_ids"]
            input_ids[i, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            attention_mask[i, width - len(ids) :] = 1
            # Padded classes reuse a real id: a valid index whose value the mask discards.
            answer_ids[i] = torch.tensor(r["answer_ids"] + r["answer_ids"][:1] * (k_max - r["k"]), dtype=torch.long)
        k = torch.tensor([r["k"] for r in rows], dtype=torch.long)
        return {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            # Positions count real tokens only, so a left-padded row sees the positions it has alone.
            "position_ids": (attention_mask.cumsum(-1) - 1).clamp(min=0),
            "answer_ids": answer_ids,
            "k": k,
            "target": torch.tensor([r["target"] for r in rows], dtype=torch.long),
        }


# --------------------------------------------------------------------------- loss
def last_logits(model, batch: dict):
    """Last-position logits (B, V) in float32; only that position goes through the LM head."""
    out = model(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        position_ids=batch["position_ids"],
        logits_to_keep=1,
        use_cache=False,
    )
    return out.logits[:, -1, :].float()


def batch_loss(logits, batch: dict, config: TrainConfig, *, step: int, generator=None):
    """The training loss of one batch from its last-position logits (B, V)."""
    import torch

    from lm_eval_evidential.modeling import losses

    answer_ids, k = batch["answer_ids"], batch["k"]
    mask = losses.class_mask(k, answer_ids.shape[1])
    z = logits.gather(1, answer_ids)
    target = batch["target"]
    if config.method == "softmax":
        return losses.softmax_ce_loss(z, target, mask=mask)
    if config.method == "edl":
        return losses.edl_loss(
            z, target, step=step, anneal_steps=config.anneal_steps, prior_weight=config.prior_weight,
            kl_weight=config.kl_weight, mask=mask,
        )  # fmt: skip
    # σ of class j of a K-class question is vocabulary logit V − K + j (the last K logits),
    # as in the reference and in heads.apply_head at evaluation.
    vocab = logits.shape[-1]
    cols = torch.arange(answer_ids.shape[1], device=logits.device)[None, :]
    sigma_index = torch.where(mask, vocab - k[:, None] + cols, torch.full_like(answer_ids, vocab - 1))
    return losses.ib_edl_loss(
        z, logits.gather(1, sigma_index), target, beta=config.beta, num_noises=config.num_noises,
        prior_weight=config.prior_weight, mask=mask, generator=generator,
    )  # fmt: skip


# --------------------------------------------------------------------------- trainer
def _make_trainer_class():
    import functools

    from transformers import Trainer, TrainerCallback

    class EvidentialTrainer(Trainer):
        # compute_loss returns a per-micro-batch mean; let the Trainer divide by accumulation steps.
        loss_is_scaled_for_ga = False

        def __init__(self, *args, evidential_config: TrainConfig, **kwargs):
            super().__init__(*args, **kwargs)
            self.evidential_config = evidential_config
            # transformers 4.x's form of the same setting: our loss never sees num_items_in_batch.
            self.model_accepts_loss_kwargs = False

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            logits = last_logits(model, inputs)
            loss = batch_loss(logits, inputs, self.evidential_config, step=self.state.global_step)
            return (loss, {"logits": logits}) if return_outputs else loss

        def _save(self, output_dir=None, state_dict=None):
            # PEFT's default ("auto") would copy the unchanged base lm_head/embed_tokens into
            # every checkpoint once lm_head is a LoRA target (~1 GB each for Llama-3-8B).
            model = self.accelerator.unwrap_model(self.model)
            if hasattr(model, "peft_config"):
                model.save_pretrained = functools.partial(type(model).save_pretrained, model, save_embedding_layers=False)
                try:
                    return super()._save(output_dir, state_dict)
                finally:
                    del model.save_pretrained
            return super()._save(output_dir, state_dict)

    class MetadataCallback(TrainerCallback):
        """Writes evidential_config.json into each checkpoint, so checkpoint-N loads like the final adapter."""

        def __init__(self, metadata: dict):
            self.metadata = metadata

        def on_save(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                ckpt = Path(args.output_dir) / f"checkpoint-{state.global_step}"
                if ckpt.is_dir():
                    write_metadata(ckpt / METADATA_FILE, {**self.metadata, "steps": state.global_step})
            return control

    return EvidentialTrainer, MetadataCallback


def _resolve_resume(config: TrainConfig, output_dir: Path) -> str | None:
    resume = config.resume_from_checkpoint
    if resume in (None, "", False):
        return None
    if resume in ("latest", True, "true", "True"):
        from transformers.trainer_utils import get_last_checkpoint

        last = get_last_checkpoint(str(output_dir)) if output_dir.is_dir() else None
        if last is None:
            raise FileNotFoundError(f"resume_from_checkpoint='latest' but {output_dir} holds no checkpoint-N folder")
        return last
    if not Path(resume).is_dir():
        raise FileNotFoundError(f"resume_from_checkpoint={resume!r} is not a folder; pass a checkpoint-N folder or 'latest'")
    return str(resume)


def _load_base(pretrained: str, config: TrainConfig):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    dtypes = {"auto": "auto", "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if config.dtype not in dtypes:
        raise ValueError(f"dtype must be one of {', '.join(dtypes)}, got {config.dtype!r}")
    # `dtype` replaced `torch_dtype` in transformers 4.56.
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    key = "dtype" if (major, minor) >= (4, 56) else "torch_dtype"
    return AutoModelForCausalLM.from_pretrained(pretrained, **{key: dtypes[config.dtype]})


def train(pretrained, task, config: TrainConfig) -> Path:
    """LoRA-fine-tune ``pretrained`` on ``task``'s training docs with ``config``; returns the adapter folder.

    ``task``: a task name (``"obqa_edl"``) or an already loaded lm-eval task whose training
    split is loaded. Writes ``config.output_dir``: checkpoints ``checkpoint-N`` (each with
    ``evidential_config.json``), then the final adapter (``adapter_config.json``,
    ``adapter_model.safetensors``) and, last, ``evidential_config.json``.
    """
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoTokenizer, TrainingArguments, set_seed

    from lm_eval_evidential import __version__ as package_version

    if config.output_dir is None:
        raise ValueError("config.output_dir is required (--output-dir)")
    output_dir = Path(config.output_dir)
    resume = _resolve_resume(config, output_dir)
    if resume is None and (output_dir / METADATA_FILE).is_file() and not config.overwrite_output_dir:
        raise FileExistsError(
            f"{output_dir} already holds a trained adapter ({METADATA_FILE}); pass a new --output-dir, "
            "--resume-from-checkpoint to continue, or --overwrite-output-dir"
        )

    extra = {}
    if config.gradient_checkpointing:
        # transformers 5 renamed the argument (the old name still works there, with a warning).
        names = {f.name for f in dataclasses.fields(TrainingArguments)}
        extra["activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"] = True
    args = TrainingArguments(
        **extra,
        output_dir=str(output_dir),
        max_steps=config.max_steps,
        per_device_train_batch_size=config.per_device_train_batch_size,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        learning_rate=config.learning_rate,
        lr_scheduler_type=config.lr_scheduler_type,
        warmup_steps=config.warmup_steps,
        weight_decay=config.weight_decay,
        max_grad_norm=config.max_grad_norm,
        seed=config.seed,
        bf16=config.bf16,
        logging_steps=config.logging_steps,
        save_strategy="steps",
        save_steps=config.save_steps,
        save_total_limit=config.save_total_limit,
        report_to=config.report_to,
        remove_unused_columns=False,
        dataloader_num_workers=0,
        dataloader_pin_memory=torch.cuda.is_available(),
    )

    task_name = task if isinstance(task, str) else _task_name(task)
    with args.main_process_first(desc="loading the task"):
        task_obj = _load_task(task) if isinstance(task, str) else task
        docs = training_docs(task_obj, config.train_split)
    if config.max_train_docs is not None:
        docs = docs[: config.max_train_docs]

    tokenizer = AutoTokenizer.from_pretrained(pretrained)
    set_seed(config.seed)
    model = _load_base(pretrained, config)
    max_length = config.max_length or getattr(model.config, "max_position_embeddings", None)
    examples, answer_map = encode_examples(task_obj, docs, tokenizer, max_length)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if pad is None:
        pad = 0  # left padding is masked out, so any id will do

    lora = LoraConfig(
        r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
        target_modules=list(config.target_modules), bias=config.lora_bias, task_type="CAUSAL_LM",
    )  # fmt: skip
    model = get_peft_model(model, lora)
    if config.gradient_checkpointing:
        model.enable_input_require_grads()

    metadata = {
        "format": METADATA_FORMAT,
        "method": config.method,
        "prior_weight": config.prior_weight,
        "num_noises": config.num_noises,
        "sigma_mult": config.sigma_mult,
        "beta": config.beta if config.method == "ib_edl" else None,
        "kl_weight": config.kl_weight if config.method == "edl" else None,
        "kl_anneal_steps": config.anneal_steps if config.method == "edl" else None,
        "base_model": str(pretrained),
        "task": task_name,
        "train_split": config.train_split or task_obj.config.training_split,
        "num_train_docs": len(examples),
        "answer_tokens": answer_map,
        "k_values": sorted({e["k"] for e in examples}),
        "max_steps": config.max_steps,
        "train_config": {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(config).items()},
        "package_version": package_version,
    }

    trainer_cls, callback_cls = _make_trainer_class()
    trainer = trainer_cls(
        model=model,
        args=args,
        train_dataset=examples,
        data_collator=LeftPadCollator(pad),
        callbacks=[callback_cls(metadata)],
        evidential_config=config,
    )
    logger.info("training %s on %s (%d docs, K %s) for %d steps", config.method, task_name, len(examples),
                metadata["k_values"], config.max_steps)  # fmt: skip
    trainer.train(resume_from_checkpoint=resume)

    # The adapter is saved beside the final folder and moved in file by file; the metadata
    # goes last, so a folder with evidential_config.json has a complete adapter.
    tmp = output_dir / ".final.tmp"  # one name on every rank: sharded saves write it together
    if trainer.is_world_process_zero() and tmp.exists():
        shutil.rmtree(tmp)  # left by a run that crashed while saving
    trainer.accelerator.wait_for_everyone()
    trainer.save_model(str(tmp))
    if trainer.is_world_process_zero():
        # A stale metadata file must not vouch for a half-replaced adapter.
        (output_dir / METADATA_FILE).unlink(missing_ok=True)
        for item in sorted(tmp.iterdir()):
            if item.name == "training_args.bin":
                continue  # a pickle of TrainingArguments; the metadata JSON records the configuration
            target = output_dir / item.name
            if target.is_dir():
                shutil.rmtree(target)
            os.replace(item, target)
        shutil.rmtree(tmp, ignore_errors=True)
        write_metadata(output_dir / METADATA_FILE, {**metadata, "steps": trainer.state.global_step})
    trainer.accelerator.wait_for_everyone()
    return output_dir.resolve()
