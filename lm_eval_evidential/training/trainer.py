"""LoRA fine-tuning of a causal LM as a K-class evidential classifier (EDL, IB-EDL or softmax).

The training data are the task's own docs rendered by the task's own definitions, so a
model is trained on exactly what ``--model evidential`` later scores: the prompt is
``task.doc_to_text(doc)``, the K answers are ``target_delimiter + choice`` (" A".." E"),
and the answer ids, left padding and last-position logits come from
:mod:`lm_eval_evidential.modeling.encoding`, the functions evaluation uses. K may vary per
question: batches are padded to the batch's largest K and the padded classes masked.

The loop is ``transformers.Trainer`` (tqdm progress, checkpoints, ``resume_from_checkpoint``,
and multi-GPU through ``accelerate launch -m lm_eval_evidential train …``). The result is
an ordinary PEFT adapter folder plus ``evidential_config.json``; with it,
``--model evidential --model_args pretrained=BASE,peft=OUT`` uses the trained method
(explicit model_args still win). Every ``checkpoint-N`` folder gets the same file.

Training cannot collapse silently: the EDL KL weight follows a schedule fixed in epochs, not
by the run's length, and is printed before the first step; every log line carries the loss
terms apart (``mse``, ``kl`` and its weight, or ``info`` for IB-EDL) with the mean evidence
and vacuity; a warning names the likely cause when mean evidence collapses towards zero or
explodes. Settings: :class:`lm_eval_evidential.training.config.TrainConfig`.

This module is the run; its parts live beside it: :mod:`.data` (docs → examples → batches),
:mod:`.schedule` (steps, the KL schedule, the run in wall-clock time), :mod:`.objective` (the
loss and the evidence warning), :mod:`.lora_targets`, :mod:`.checkpoints` (output folder and
resume checks), :mod:`.evidential_trainer` (the ``transformers.Trainer`` subclass, its
callbacks and arguments).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.modeling.config import METADATA_FILE, METADATA_FORMAT, write_metadata
from lm_eval_evidential.training.checkpoints import (
    check_output_dir,
    check_resume_fits,
    clear_old_checkpoints,
    resolve_resume,
)
from lm_eval_evidential.training.config import DTYPE, TrainConfig
from lm_eval_evidential.training.data import LeftPadCollator, encode_examples, load_task, task_name_of, training_docs
from lm_eval_evidential.training.interrupt import TrainingInterrupted, make_save_on_signal
from lm_eval_evidential.training.lora_targets import lora_config, resolve_target_modules
from lm_eval_evidential.training.schedule import describe_kl_schedule, describe_run, steps_per_epoch


def trainer_classes():
    """(the Trainer subclass, its metadata callback, its schedule clock): transformers is imported when a run
    starts, not when this module is."""
    from lm_eval_evidential.training import evidential_trainer

    return evidential_trainer.EvidentialTrainer, evidential_trainer.MetadataCallback, evidential_trainer.ScheduleClock


def _load_base(pretrained: str, config: TrainConfig):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    # checked again here: a TrainConfig is a mutable dataclass, so its dtype may have been set after construction
    dtype = DTYPE.check("dtype", config.dtype)
    # `dtype` replaced `torch_dtype` in transformers 4.56.
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    key = "dtype" if (major, minor) >= (4, 56) else "torch_dtype"
    return AutoModelForCausalLM.from_pretrained(
        pretrained, **{key: dtype if dtype == "auto" else getattr(torch, dtype)}
    )


def _metadata(
    pretrained, task_name: str, task_obj, config: TrainConfig, examples, answer_map, targets, epoch_steps
) -> dict:
    from lm_eval_evidential import __version__ as package_version

    train_config = {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(config).items()}
    return {
        "format": METADATA_FORMAT,
        "method": config.method,
        "prior_weight": config.prior_weight,
        "num_noises": config.num_noises,
        "sigma_mult": config.sigma_mult,
        "beta": config.beta if config.method == "ib_edl" else None,
        "kl_weight": config.kl_weight if config.method == "edl" else None,
        "kl_anneal_epochs": config.kl_anneal_epochs
        if config.method == "edl" and config.kl_anneal_steps is None
        else None,
        "kl_anneal_steps": config.kl_anneal_steps if config.method == "edl" else None,
        "steps_per_epoch": epoch_steps,
        "target_modules": list(targets),
        "base_model": str(pretrained),
        "task": task_name,
        "train_split": config.train_split or task_obj.config.training_split,
        "num_train_docs": len(examples),
        "answer_tokens": answer_map,
        "k_values": sorted({e["k"] for e in examples}),
        "max_steps": config.max_steps,
        "train_config": {**train_config, "target_modules": list(targets)},
        "package_version": package_version,
    }


def save_final_adapter(trainer, output_dir: Path, metadata: dict) -> None:
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


#: A training step's cost in forward passes: the forward and a backward of about twice its cost
#: (recomputing the forward once more under gradient checkpointing).
FORWARDS_PER_STEP = 3
FORWARDS_PER_STEP_CHECKPOINTED = 4


def _announce(trainer, config: TrainConfig, examples, pad, epoch_steps: int, resume) -> str:
    """Before the first step: the CPU thread count a small model runs fastest on (measured and set, see
    :mod:`~lm_eval_evidential.modeling.threads`), the step count and a time estimate from a timed forward
    pass of one batch on the Trainer's device."""
    from lm_eval_evidential.modeling import encoding
    from lm_eval_evidential.modeling.threads import pick_threads_for, time_forward
    from lm_eval_evidential.training.evidential_trainer import say_on_main

    model, device = trainer.model, trainer.args.device
    rows = [r["input_ids"] for r in examples[: config.per_device_train_batch_size]]
    batch = {k: v.to(device) for k, v in encoding.left_pad(rows, 0 if pad is None else pad).items()}

    def forward():  # the step's forward, outside the Trainer: no step, no batch of the run
        return encoding.last_position_logits(model, batch["input_ids"], batch["attention_mask"], batch["position_ids"])

    threads = pick_threads_for(model, forward)
    if threads:
        say_on_main(trainer.args, threads)
    per_forward = time_forward(model, forward)
    forwards = FORWARDS_PER_STEP_CHECKPOINTED if config.gradient_checkpointing else FORWARDS_PER_STEP
    seconds = per_forward * forwards * config.gradient_accumulation_steps
    line = describe_run(config, len(examples), epoch_steps, seconds)
    return f"{config.method}, resuming from {resume}: {line}" if resume else f"{config.method}: {line}"


def _encode(task_obj, docs: list[dict], tokenizer, model_config, config: TrainConfig):
    """:func:`~lm_eval_evidential.training.data.encode_examples` up to the model's context, as
    ``--model evidential`` reads it (one computation); a ``--max-length`` above it is refused."""
    from lm_eval_evidential.harness.loading_checks import check_context
    from lm_eval_evidential.lm_eval_compat import resolve_max_length

    check_context(config.max_length, model_config)
    max_length = config.max_length or resolve_max_length(model_config, None, default=0) or None
    return encode_examples(task_obj, docs, tokenizer, max_length)


def _with_lora(model, config: TrainConfig, targets: tuple[str, ...]):
    """``model`` wrapped by PEFT with LoRA on ``targets`` (:func:`~.lora_targets.lora_config`)."""
    from peft import get_peft_model

    from lm_eval_evidential.modeling.quiet import peft_wrapping

    lora = lora_config(config, targets)
    with peft_wrapping():  # transformers' is_gradient_checkpointing FutureWarning, read by peft
        model = get_peft_model(model, lora)
    if config.gradient_checkpointing:
        model.enable_input_require_grads()
    return model


def _finish(trainer, on_signal, output_dir: Path, metadata: dict) -> None:
    """After ``trainer.train``: stop with :class:`TrainingInterrupted` where a signal cut the run short, else save
    the final adapter (:func:`save_final_adapter`), rescuing the checkpoint where the output folder refuses it."""
    from lm_eval_evidential.training.evidential_trainer import rescue_checkpoint

    step = trainer.state.global_step
    if on_signal.received is not None and step < trainer.state.max_steps:
        raise TrainingInterrupted(on_signal.received, output_dir / f"checkpoint-{step}", step)
    try:
        save_final_adapter(trainer, output_dir, metadata)
    except OSError as exc:  # the folder refused the adapter (made read-only, a full disk): keep the run's work
        from lm_eval_evidential.files import write_error

        failed = write_error(exc, output_dir)
        if failed is exc:
            raise
        raise rescue_checkpoint(trainer, failed) from exc


def train(pretrained, task, config: TrainConfig) -> Path:
    """LoRA-fine-tune ``pretrained`` on ``task``'s training docs with ``config``; returns the adapter folder.

    ``task``: a task name (``"obqa_edl"``) or an already loaded lm-eval task whose training
    split is loaded. Writes ``config.output_dir``: checkpoints ``checkpoint-N`` (each with
    ``evidential_config.json``), then the final adapter (``adapter_config.json``,
    ``adapter_model.safetensors``) and, last, ``evidential_config.json``. Everything that
    can be refused (settings, output folder, target modules) is refused before training.
    """
    from transformers import AutoTokenizer, set_seed

    from lm_eval_evidential.modeling.quiet import peft_wrapping
    from lm_eval_evidential.training.evidential_trainer import (
        progress_for_logs,
        say_on_main,
        training_arguments,
    )

    if config.output_dir is None:
        raise InvalidValueError("config.output_dir is required (--output-dir)")
    if config.ensemble is not None:  # N members, each one run of this function
        raise InvalidValueError(
            "config.ensemble is set: train the members with lm_eval_evidential.training.ensemble.train_ensemble"
        )
    output_dir = Path(config.output_dir)
    check_output_dir(config, output_dir)
    resume = resolve_resume(config, output_dir)
    args = training_arguments(config, output_dir)

    task_name = task if isinstance(task, str) else task_name_of(task)
    if resume is not None:
        check_resume_fits(resume, pretrained, config, task_name)
    with args.main_process_first(desc="loading the task"):
        task_obj = load_task(task) if isinstance(task, str) else task
        docs = training_docs(task_obj, config.train_split)
    if config.max_train_docs is not None:
        docs = docs[: config.max_train_docs]

    tokenizer = AutoTokenizer.from_pretrained(pretrained)
    set_seed(config.seed)
    model = _load_base(pretrained, config)
    targets, notes = resolve_target_modules(model, config.target_modules, str(pretrained))
    examples, answer_map = _encode(task_obj, docs, tokenizer, model.config, config)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    model = _with_lora(model, config, targets)

    epoch_steps = steps_per_epoch(len(examples), config, args.world_size)
    metadata = _metadata(pretrained, task_name, task_obj, config, examples, answer_map, targets, epoch_steps)
    for note in notes:
        say_on_main(args, note)
    say_on_main(args, f"LoRA on {', '.join(targets)}; {describe_kl_schedule(config, epoch_steps)}")
    trainer_cls, callback_cls, clock_cls = trainer_classes()
    on_signal = make_save_on_signal()()
    trainer = trainer_cls(
        model=model,
        args=args,
        train_dataset=examples,
        data_collator=LeftPadCollator(0 if pad is None else pad),
        callbacks=[callback_cls(metadata), clock_cls(config, epoch_steps), on_signal],
        evidential_config=config,
        epoch_steps=epoch_steps,
    )
    if config.overwrite_output_dir and not resume and args.process_index == 0:
        for removed in clear_old_checkpoints(output_dir):
            say_on_main(args, f"--overwrite-output-dir: removed the earlier run's {removed.name}")
    progress_for_logs(trainer)
    say_on_main(args, _announce(trainer, config, examples, pad, epoch_steps, resume))
    with peft_wrapping():  # the Trainer reads the same deprecated property of the PEFT model
        trainer.train(resume_from_checkpoint=resume)
    _finish(trainer, on_signal, output_dir, metadata)
    return output_dir.resolve()
