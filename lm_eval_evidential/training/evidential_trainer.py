"""The ``transformers.Trainer`` of a run: the subclass that computes the evidential loss and logs its terms apart,
its callbacks (the schedule told in wall-clock time, ``evidential_config.json`` in each checkpoint, the step bar
for logs), its ``TrainingArguments``, and a checkpoint rescued when the output folder refuses it.

transformers is imported at the top: this module is imported when a run starts, never by the CLI's start-up.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import sys
import time
from pathlib import Path

import torch
from transformers import Trainer, TrainerCallback

from lm_eval_evidential.modeling.config import METADATA_FILE, write_metadata
from lm_eval_evidential.training.config import TrainConfig
from lm_eval_evidential.training.interrupt import epoch_seeded
from lm_eval_evidential.training.objective import COLLAPSED_EVIDENCE, batch_loss, evidence_warning, last_logits
from lm_eval_evidential.training.schedule import CLOCK_STEPS, describe_kl_clock, kl_weight_at

logger = logging.getLogger(__name__)


def host_to_device(accelerator: bool) -> dict:
    """TrainingArguments that move each batch to the device: pinned host memory and asynchronous copies
    on a CUDA device (the copy overlaps the previous step's kernels), neither on the CPU.

    Examples
    --------
    >>> host_to_device(True)
    {'dataloader_pin_memory': True, 'accelerator_config': {'non_blocking': True}}
    """
    return {"dataloader_pin_memory": accelerator, "accelerator_config": {"non_blocking": accelerator}}


def training_arguments(config: TrainConfig, output_dir: Path, accelerator: bool | None = None):
    import torch
    from transformers import TrainingArguments

    if accelerator is None:
        accelerator = torch.cuda.is_available()  # where the Trainer will put the model

    names = {f.name for f in dataclasses.fields(TrainingArguments)}
    extra = {}
    if config.gradient_checkpointing:
        # transformers 5 renamed the argument (the old name still works there, with a warning).
        extra["activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"] = True
    if config.group_by_length:
        # transformers' LengthGroupedSampler (5.x's name; 4.x's boolean), made resumable by interrupt.epoch_seeded.
        if "train_sampling_strategy" in names:
            extra["train_sampling_strategy"] = "group_by_length"
        else:
            extra["group_by_length"] = True
    if config.bf16 and not accelerator and not torch.backends.mps.is_available():
        # transformers refuses bf16 without a GPU unless told that the CPU is meant (CPU autocast, same path).
        extra["use_cpu"] = True
    return TrainingArguments(
        **extra,
        **host_to_device(accelerator),
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
        # The filter reads every step's loss on the host (a device sync per step) to replace a NaN/inf
        # loss in the log by the running mean; a non-finite loss is shown as it is instead.
        logging_nan_inf_filter=False,
        save_strategy="steps",
        save_steps=config.save_steps,
        save_total_limit=config.save_total_limit,
        report_to=config.report_to,
        remove_unused_columns=False,
        dataloader_num_workers=0,
    )


class EvidentialTrainer(Trainer):
    # compute_loss returns a per-micro-batch mean; let the Trainer divide by accumulation steps.
    loss_is_scaled_for_ga = False

    def __init__(self, *args, evidential_config: TrainConfig, epoch_steps: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.evidential_config = evidential_config
        self.epoch_steps = epoch_steps
        # transformers 4.x's form of the same setting: our loss never sees num_items_in_batch.
        self.model_accepts_loss_kwargs = False
        self._term_sums: dict[str, torch.Tensor] = {}
        self._term_count = 0
        self._warned: set[str] = set()
        self._params_for_flops: int | None = None
        self._trainable: list | None = None

    def _clip_grad_norm(self, model):
        # The trainable (LoRA) parameters alone, listed once: the frozen ones have no gradient, so the norm
        # is the same, without a walk over every tensor of the model per step. Sharded set-ups (FSDP,
        # DeepSpeed, XLA) keep transformers' own. (transformers 4.x clips inline and never calls this.)
        from accelerate.utils import DistributedType

        plain = (DistributedType.NO, DistributedType.MULTI_GPU, DistributedType.MULTI_CPU)
        if self.accelerator.distributed_type not in plain or self.is_fsdp_enabled or self.is_deepspeed_enabled:
            return super()._clip_grad_norm(model)
        if self._trainable is None:
            self._trainable = [p for p in model.parameters() if p.requires_grad]
        self.accelerator.unscale_gradients()
        return torch.nn.utils.clip_grad_norm_(self._trainable, self.args.max_grad_norm)

    def floating_point_ops(self, inputs) -> int:
        # The Trainer's own estimate (6 · input tokens · non-embedding parameters) with the parameter
        # count, a walk over every tensor of the model, taken once rather than at every step.
        if self._params_for_flops is None:
            self._params_for_flops = super().floating_point_ops({"input_ids": torch.ones(1)}) // 6
        return 6 * inputs["input_ids"].numel() * self._params_for_flops

    def _get_train_sampler(self, *args, **kwargs):
        seed = self.args.data_seed if self.args.data_seed is not None else self.args.seed
        return epoch_seeded(super()._get_train_sampler(*args, **kwargs), seed)  # resumable mid-epoch

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        logits = last_logits(model, inputs)
        weight = kl_weight_at(self.state.global_step, self.evidential_config, self.epoch_steps)
        loss, terms = batch_loss(logits, inputs, self.evidential_config, kl_weight=weight)
        if model.training:
            for name, value in terms.items():
                self._term_sums[name] = self._term_sums.get(name, 0.0) + value
            self._term_count += 1
        return (loss, {"logits": logits}) if return_outputs else loss

    def log(self, logs: dict, *args, **kwargs) -> None:
        # The loss terms apart, averaged over the micro-batches since the last log line.
        if "loss" in logs and self._term_count:
            for name, total in self._term_sums.items():
                logs[name] = round(float(total) / self._term_count, 6)
            self._term_sums, self._term_count = {}, 0
            self._check_evidence(logs)
        super().log(logs, *args, **kwargs)

    def _check_evidence(self, logs: dict) -> None:
        kind = "collapse" if logs.get("evidence", 1.0) < COLLAPSED_EVIDENCE else "explode"
        message = evidence_warning(
            logs.get("evidence", float("nan")),
            self.state.global_step,
            self.evidential_config,
            logs.get("kl_weight", 0.0),
        )
        if message and kind not in self._warned and self.is_world_process_zero():
            self._warned.add(kind)
            logger.warning(message)

    def _save_checkpoint(self, model, trial):
        # A folder that cannot be written any more (made read-only, a full disk) mid-run: the checkpoint
        # goes to a rescue folder instead, and the run stops saying where (one line), losing no step.
        try:
            return super()._save_checkpoint(model, trial)
        except OSError as exc:
            from lm_eval_evidential.files import write_error

            failed = write_error(exc, Path(self.args.output_dir) / f"checkpoint-{self.state.global_step}")
            if failed is exc:
                raise  # not a condition the user can fix: a bug keeps its traceback
            raise rescue_checkpoint(self, failed) from exc

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


class ScheduleClock(TrainerCallback):
    """Times the steps after the first and, after ``CLOCK_STEPS`` of them, says the run's and the KL
    schedule's wall-clock time at that speed (:func:`describe_kl_clock`)."""

    def __init__(self, config: TrainConfig, epoch_steps: int):
        self.config, self.epoch_steps = config, epoch_steps
        self.first = self.start = None

    def on_step_begin(self, args, state, control, **kwargs):
        if self.first is None:
            self.first = state.global_step  # 0, or the step a resumed run starts from
        elif self.start is None:
            self.start = time.perf_counter()
        return control

    def on_step_end(self, args, state, control, **kwargs):
        if self.start is not None and state.global_step - self.first - 1 == CLOCK_STEPS:
            seconds = (time.perf_counter() - self.start) / CLOCK_STEPS
            say_on_main(args, describe_kl_clock(self.config, self.epoch_steps, state.global_step, seconds))
        return control


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


def rescue_checkpoint(trainer, failed: OSError) -> OSError:
    """Save ``trainer``'s checkpoint into a new folder under the temporary directory after ``failed`` (the
    output folder refused it); the error to raise names both folders and how to resume."""
    import tempfile

    from lm_eval_evidential.errors import OutputWriteError

    output_dir, step = trainer.args.output_dir, trainer.state.global_step
    rescue = tempfile.mkdtemp(prefix="lm-eval-evidential-rescue-")
    trainer.args.output_dir = rescue
    try:
        super(type(trainer), trainer)._save_checkpoint(trainer.model, None)
        for callback in trainer.callback_handler.callbacks:  # the checkpoint's evidential_config.json
            if hasattr(callback, "metadata") and hasattr(callback, "on_save"):
                callback.on_save(trainer.args, trainer.state, trainer.control)
        saved = f"step {step} was saved in {rescue}/checkpoint-{step} instead"
    except OSError as again:
        saved = (
            f"saving it under {rescue} failed too ({again.strerror or again}); the steps since the last save are lost"
        )
    finally:
        trainer.args.output_dir = output_dir
    return OutputWriteError(
        failed.errno,
        f"{failed}; {saved} — once {output_dir} is writable, move it there (in place of any partial "
        f"checkpoint-{step}) and continue with --resume-from-checkpoint latest",
        failed.filename,
    )


def progress_for_logs(trainer) -> None:
    """The Trainer's step bar with this package's progress options (:func:`modeling.quiet.progress_options`):
    on a terminal as it was; written to a log, one update every 30 s, not a line per step."""
    from tqdm.auto import tqdm
    from transformers.trainer_callback import ProgressCallback

    from lm_eval_evidential.modeling.quiet import progress_options

    options = progress_options()
    if not options or not any(isinstance(c, ProgressCallback) for c in trainer.callback_handler.callbacks):
        return

    class LogProgress(ProgressCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                self.training_bar = tqdm(total=state.max_steps, dynamic_ncols=True, **options)
            self.current_step = 0

    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(LogProgress)


def say_on_main(args, message: str) -> None:
    if args.process_index == 0:  # above a progress bar, not inside its line
        from tqdm import tqdm

        tqdm.write(f"lm-eval-evidential train: {message}", file=sys.stderr)
        sys.stderr.flush()
