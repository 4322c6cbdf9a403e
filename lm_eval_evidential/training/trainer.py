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
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import shutil
import sys
import time
from pathlib import Path

from lm_eval_evidential.errors import (
    CheckpointError,
    InputNotFoundError,
    InvalidValueError,
    OutputExistsError,
    OutputPathError,
)
from lm_eval_evidential.modeling.config import METADATA_FILE, METADATA_FORMAT, write_metadata
from lm_eval_evidential.modeling.encoding import answer_token_ids, last_position_logits, left_pad
from lm_eval_evidential.training.config import PAPER_TARGET_MODULES, TrainConfig
from lm_eval_evidential.training.interrupt import TrainingInterrupted, epoch_seeded, make_save_on_signal

logger = logging.getLogger(__name__)

# Mean evidence per answer below which training has collapsed (vacuity >= ~0.95 at K = 4:
# the flat all-zero-evidence state of the loss), and above which it is exploding.
COLLAPSED_EVIDENCE = 0.05
EXPLODING_EVIDENCE = 1e3
# Steps timed (after the first, which pays one-off costs) before the run says its speed and the KL schedule's.
CLOCK_STEPS = 3


# --------------------------------------------------------------------------- data
def _load_task(task_name: str):
    from lm_eval.tasks import TaskManager

    from lm_eval_evidential.harness.plugin import tasks_dir

    meta = {"load_all_splits": True}
    # Our own folder alone indexes in milliseconds; the full harness index takes seconds.
    manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata=meta)
    if task_name not in manager.all_tasks:
        manager = TaskManager(metadata=meta)
    if not manager.match_tasks([task_name]):  # lm-eval's own lookup (lettered views included)
        import difflib

        close = difflib.get_close_matches(task_name, list(manager.all_tasks), n=3, cutoff=0.7)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise InputNotFoundError(
            f"--task {task_name!r}: no such task; {hint}`lm_eval ls tasks` lists them, --include_path is not "
            "read by train (name a task of lm-eval or of this package)"
        )
    loaded = manager.load([task_name])["tasks"]
    if task_name not in loaded:
        raise InvalidValueError(f"task {task_name!r} is not a single task (a group?); pass one task such as obqa_edl")
    return loaded[task_name]


def _task_name(task) -> str:
    return str(getattr(getattr(task, "config", None), "task", None) or getattr(task, "task_name", "task"))


def training_docs(task, split: str | None = None) -> list[dict]:
    """The docs of ``split`` (default: the task's training split), loading it if needed."""
    name = _task_name(task)
    split = split or task.config.training_split
    if not split:
        raise InvalidValueError(f"task {name!r} declares no training_split; pass --train-split")
    if split == task.config.training_split and task.has_training_docs():
        return list(task.training_docs())  # with the task's own process_docs, where it has one
    if split == task.config.validation_split and task.has_validation_docs():
        return list(task.validation_docs())
    dataset = getattr(task, "dataset", None) or {}
    if split not in dataset:
        raise InvalidValueError(
            f"task {name!r}: split {split!r} is not loaded (loaded: {sorted(dataset)}); load the task with "
            "TaskManager(metadata={'load_all_splits': True}) or pass the task name to train()"
        )
    return list(dataset[split])


def encode_examples(
    task, docs: list[dict], tokenizer, max_length: int | None = None
) -> tuple[list[dict], dict[str, int]]:
    """Tokenise ``docs`` the way the evaluator does: (examples, {answer string: token id}).

    Each example: ``input_ids`` (prompt tokens, the tokenizer's default special tokens, as
    lm-eval's ``tok_encode``), ``answer_ids`` (K ids), ``target`` (gold index), ``k``.
    """
    from tqdm import tqdm

    from lm_eval_evidential.modeling.quiet import progress_options

    name = _task_name(task)
    delimiter = task.config.target_delimiter
    prompts, choices, golds = [], [], []
    for doc in docs:
        prompts.append(task.doc_to_text(doc))
        choices.append([delimiter + str(c) for c in task.doc_to_choice(doc)])
        golds.append(int(task.doc_to_target(doc)))
    prompt_ids = tokenizer(prompts)["input_ids"]
    whole_ids = iter(tokenizer([p + c for p, cs in zip(prompts, choices) for c in cs])["input_ids"])

    answer_map: dict[str, int] = {}
    examples = []
    bar = tqdm(docs, desc=f"{name}: encoding", unit="doc", **{"mininterval": 1.0, **progress_options()})
    for i, doc in enumerate(bar):
        where = f"task {name!r} doc {doc.get('doc_id', i)}"
        ids = list(prompt_ids[i])
        if max_length is not None and len(ids) > max_length:
            raise InvalidValueError(
                f"{where}: prompt is {len(ids)} tokens, longer than max_length={max_length}; raise --max-length "
                "(training never truncates a question)"
            )
        answers = answer_token_ids(ids, [next(whole_ids) for _ in choices[i]], choices[i], where)
        for cont, tid in zip(choices[i], answers):
            if answer_map.setdefault(cont, tid) != tid:
                raise InvalidValueError(
                    f"{where}: answer {cont!r} encodes as token {tid} here but {answer_map[cont]} elsewhere"
                )
        if not 0 <= golds[i] < len(answers):
            raise InvalidValueError(f"{where}: gold index {golds[i]} is not one of its {len(answers)} options")
        examples.append({"input_ids": ids, "answer_ids": answers, "target": golds[i], "k": len(answers)})
    return examples, answer_map


class LeftPadCollator:
    """Batches of examples → left-padded tensors (:func:`modeling.encoding.left_pad`) and answer ids."""

    def __init__(self, pad_token_id: int):
        self.pad_token_id = int(pad_token_id)

    def __call__(self, rows: list[dict]) -> dict:
        import torch

        k_max = max(r["k"] for r in rows)
        # Padded classes reuse a real id: a valid index whose value the class mask discards.
        answer_ids = [r["answer_ids"] + r["answer_ids"][:1] * (k_max - r["k"]) for r in rows]
        return {
            **left_pad([r["input_ids"] for r in rows], self.pad_token_id),
            "answer_ids": torch.tensor(answer_ids, dtype=torch.long),
            "k": torch.tensor([r["k"] for r in rows], dtype=torch.long),
            "target": torch.tensor([r["target"] for r in rows], dtype=torch.long),
        }


# --------------------------------------------------------------------------- loss
def last_logits(model, batch: dict):
    """Last-position logits (B, V) in float32, as evaluation computes them."""
    return last_position_logits(model, batch["input_ids"], batch["attention_mask"], batch["position_ids"]).float()


def steps_per_epoch(num_examples: int, config: TrainConfig, world_size: int = 1) -> int:
    """Optimiser steps in one pass over the training docs."""
    batches = math.ceil(num_examples / (config.per_device_train_batch_size * world_size))
    return max(1, math.ceil(batches / config.gradient_accumulation_steps))


def kl_weight_at(step: int, config: TrainConfig, epoch_steps: int) -> float:
    """EDL's KL weight at optimiser step ``step`` (0-based: steps already taken).

    Default: ``kl_weight · min(1, e / kl_anneal_epochs)``, e = ⌊step / epoch_steps⌋ completed
    epochs, the IB-EDL reference's schedule (its callback sets min(1, epoch / num_train_epochs)
    at each epoch start, and its Trainer kept num_train_epochs at 3). With ``kl_anneal_steps``:
    ``kl_weight · min(1, step / kl_anneal_steps)``. A schedule of 0 means full weight at once.

    Examples
    --------
    >>> config = TrainConfig(kl_anneal_epochs=3)
    >>> [round(kl_weight_at(s, config, epoch_steps=10), 3) for s in (0, 9, 10, 25, 30, 99)]
    [0.0, 0.0, 0.333, 0.667, 1.0, 1.0]
    """
    from lm_eval_evidential.modeling.losses import kl_anneal_weight

    if config.method != "edl":
        return 0.0
    if config.kl_anneal_steps is not None:
        return config.kl_weight * kl_anneal_weight(step, config.kl_anneal_steps)
    if config.kl_anneal_epochs <= 0:
        return config.kl_weight
    return config.kl_weight * min(1.0, (step // epoch_steps) / config.kl_anneal_epochs)


def describe_kl_schedule(config: TrainConfig, epoch_steps: int) -> str:
    """One line saying how the KL weight will move in this run (printed before training)."""
    if config.method != "edl":
        return f"{config.method}: no KL-to-uniform regulariser"
    end = kl_weight_at(config.max_steps - 1, config, epoch_steps)
    if config.kl_anneal_steps is not None:
        rule = f"kl_weight·min(1, step/{config.kl_anneal_steps}) (--kl-anneal-steps)"
    elif config.kl_anneal_epochs <= 0:
        rule = "kl_weight from the first step (--kl-anneal-epochs 0)"
    else:
        full = math.ceil(config.kl_anneal_epochs) * epoch_steps
        rule = (
            f"kl_weight·min(1, epoch/{config.kl_anneal_epochs:g}), one epoch = {epoch_steps} steps, full weight from "
            f"step {full} (IB-EDL reference schedule; --kl-anneal-epochs, --kl-anneal-steps)"
        )
    return (
        f"edl: KL weight = {rule}; kl_weight={config.kl_weight:g}; at the last of {config.max_steps} steps: {end:.3g} "
        f"(in wall-clock time after step {CLOCK_STEPS + 1})"
    )


def kl_full_step(config: TrainConfig, epoch_steps: int) -> int | None:
    """The first optimiser step (0-based) at which EDL's KL weight is at full strength; None without a KL term.

    Examples
    --------
    >>> kl_full_step(TrainConfig(kl_anneal_epochs=3), epoch_steps=1240)
    3720
    >>> kl_full_step(TrainConfig(kl_anneal_steps=500), epoch_steps=1240)
    500
    """
    if config.method != "edl":
        return None
    if config.kl_anneal_steps is not None:
        return config.kl_anneal_steps
    return math.ceil(config.kl_anneal_epochs) * epoch_steps if config.kl_anneal_epochs > 0 else 0


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def describe_kl_clock(config: TrainConfig, epoch_steps: int, step: int, seconds_per_step: float) -> str:
    """The run and the KL schedule in wall-clock terms at ``seconds_per_step``, said after step ``step``.

    Examples
    --------
    >>> describe_kl_clock(TrainConfig(max_steps=40), epoch_steps=60, step=4, seconds_per_step=9.0)
    '9 s a step: the 36 steps left take 5.4 min; the KL weight reaches full strength at step 180, \
after this run ends (40 steps; full strength would need 180 steps, 27.0 min)'
    """
    left = max(0, config.max_steps - step)
    line = f"{seconds_per_step:.3g} s a step: the {left} steps left take {_duration(left * seconds_per_step)}"
    full = kl_full_step(config, epoch_steps)
    if full is None or full <= 0:
        return line
    if full >= config.max_steps:
        return (
            f"{line}; the KL weight reaches full strength at step {full}, after this run ends ({config.max_steps} "
            f"steps; full strength would need {full} steps, {_duration(full * seconds_per_step)})"
        )
    if full <= step:
        return f"{line}; the KL weight is at full strength since step {full}"
    return (
        f"{line}; the KL weight reaches full strength at step {full}, in {_duration((full - step) * seconds_per_step)}"
    )


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


# --------------------------------------------------------------------------- model
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


def _check_output_dir(config: TrainConfig, output_dir: Path) -> None:
    from lm_eval_evidential.files import check_output_folder, check_writable_folder

    if output_dir.is_symlink() and not output_dir.exists():
        raise OutputPathError(
            f"--output-dir {output_dir} is a symbolic link to {os.readlink(output_dir)}, which does not exist; "
            "create that folder, or choose another --output-dir"
        )
    check_output_folder(output_dir, replaceable=lambda _: True, option="--output-dir")  # a file, or under one: never
    check_writable_folder(output_dir)  # before the model loads, not when the first checkpoint is saved
    # transformers' example scripts' rule: never train into a folder with something in it unless told to.
    if config.resume_from_checkpoint or config.overwrite_output_dir:
        return
    if output_dir.exists() and (not output_dir.is_dir() or any(output_dir.iterdir())):
        raise OutputExistsError(
            f"output folder {output_dir} is not empty; pass --overwrite-output-dir to train into it anyway, "
            "--resume-from-checkpoint to continue its last checkpoint, or a new --output-dir"
        )


def _resolve_resume(config: TrainConfig, output_dir: Path) -> str | None:
    resume = config.resume_from_checkpoint
    if resume in (None, "", False):
        return None
    if resume in ("latest", True, "true", "True"):
        from transformers.trainer_utils import get_last_checkpoint

        last = get_last_checkpoint(str(output_dir)) if output_dir.is_dir() else None
        if last is None:
            raise InputNotFoundError(f"resume_from_checkpoint='latest' but {output_dir} holds no checkpoint-N folder")
        check_checkpoint_files(last, latest=True)
        return last
    if not Path(resume).is_dir():
        raise InputNotFoundError(
            f"resume_from_checkpoint={resume!r} is not a folder; pass a checkpoint-N folder or 'latest'"
        )
    check_checkpoint_files(resume)
    return str(resume)


#: What a checkpoint-N folder of this trainer holds (besides the adapter's weights and RNG states).
CHECKPOINT_FILES = ("trainer_state.json", "adapter_config.json", "optimizer.pt", "scheduler.pt")
#: Settings that define the loss and the adapter: resuming under other values would train the rest differently.
RESUME_SETTINGS = ("method", "task", "prior_weight", "lora_r", "lora_alpha", "kl_weight", "beta", "num_noises")
#: The settings above that only one method's loss reads.
METHOD_SETTINGS = {"kl_weight": "edl", "beta": "ib_edl", "num_noises": "ib_edl"}


def check_checkpoint_files(checkpoint, *, latest: bool = False) -> None:
    """Refuse, before the model loads, a checkpoint the Trainer could not resume from: a file missing
    (an empty ``checkpoint-N``, no ``trainer_state.json``), a ``trainer_state.json`` that is not JSON, an
    ``optimizer.pt`` / ``scheduler.pt`` cut short or damaged (their zip archive checked, CRCs included), a
    damaged adapter. ``latest``: the folder was picked as the newest of its output folder."""
    import json
    import zipfile

    from lm_eval_evidential.errors import EvidentialInputError, InputFileError
    from lm_eval_evidential.files import read_regular_file
    from lm_eval_evidential.harness.loading_checks import check_adapter_files

    folder = Path(checkpoint)
    picked = " (picked as the latest)" if latest else ""
    fix = (
        f"resume from an earlier checkpoint-N (--resume-from-checkpoint {folder.parent}/checkpoint-N), remove "
        f"{folder.name} to resume from the one before, or train into a new --output-dir"
    )
    weights = any(folder.glob("adapter_model*.safetensors")) or (folder / "adapter_model.bin").is_file()
    missing = [name for name in CHECKPOINT_FILES if not (folder / name).is_file()]
    missing += [] if weights else ["adapter_model.safetensors"]
    if missing:
        what = "is empty" if not any(folder.iterdir()) else f"lacks {', '.join(missing)}"
        raise CheckpointError(f"checkpoint {folder}{picked} {what}: it cannot be resumed from; {fix}")
    try:
        state = json.loads(read_regular_file(folder / "trainer_state.json", what="trainer state", max_bytes=64 << 20))
        if not isinstance(state, dict) or not isinstance(state.get("global_step"), int):
            raise CheckpointError(
                f"checkpoint {folder}{picked}: trainer_state.json holds no global_step (not the Trainer's state); {fix}"
            )
        for name in ("optimizer.pt", "scheduler.pt"):
            with zipfile.ZipFile(folder / name) as archive:
                bad = archive.testzip()
            if bad is not None:
                raise zipfile.BadZipFile(f"{name}: {bad} fails its CRC check")
        check_adapter_files(folder)
    except CheckpointError:
        raise
    except (InputFileError, EvidentialInputError) as exc:
        raise CheckpointError(f"checkpoint {folder}{picked}: {exc}; {fix}") from exc
    except (ValueError, RecursionError, zipfile.BadZipFile, OSError, EOFError) as exc:
        raise CheckpointError(
            f"checkpoint {folder}{picked} is damaged ({type(exc).__name__}: {exc}); it cannot be resumed from; {fix}"
        ) from exc


def check_resume_fits(checkpoint: str, pretrained, config: TrainConfig, task_name: str) -> None:
    """Refuse, before the model loads, resuming a checkpoint of another base model (its LoRA matrices checked
    against the base built on the meta device) or of other loss or adapter settings (its
    ``evidential_config.json``: method, task, prior weight, …) — the rest would be trained differently."""
    import json

    from lm_eval_evidential.errors import EvidentialError
    from lm_eval_evidential.harness.loading_checks import check_adapter_fits

    folder = Path(checkpoint)
    saved = folder / METADATA_FILE
    if saved.is_file():
        try:
            meta = json.loads(saved.read_text())
        except (ValueError, OSError) as exc:
            raise CheckpointError(
                f"checkpoint {folder}: {METADATA_FILE} is damaged ({exc}); resume from another "
                "checkpoint-N or train into a new --output-dir"
            ) from exc
        before = {**(meta.get("train_config") or {}), "method": meta.get("method"), "task": meta.get("task")}
        now = {**dataclasses.asdict(config), "task": task_name}
        relevant = [n for n in RESUME_SETTINGS if n not in METHOD_SETTINGS or METHOD_SETTINGS[n] == before["method"]]
        names = [n for n in relevant if before.get(n) is not None and n in now and before[n] != now[n]]
        if names:
            said = "; ".join(f"{n}={before[n]!r} (now {now[n]!r})" for n in names)
            flags = " ".join(f"--{n.replace('_', '-')} {before[n]}" for n in names)
            raise CheckpointError(
                f"checkpoint {folder} was trained with {said}: resuming would train the rest with other settings "
                f"and label the adapter with them; resume with the checkpoint's ({flags}), or train into a new "
                "--output-dir"
            )
    try:
        from transformers import AutoConfig

        model_config = AutoConfig.from_pretrained(pretrained)
    except Exception:  # noqa: BLE001 - the model's own load says what is wrong with pretrained
        return
    try:
        check_adapter_fits(folder, model_config, pretrained)
    except EvidentialError as exc:
        raise CheckpointError(
            f"checkpoint {folder} was trained on another base model than --pretrained {pretrained}: {exc}; "
            "or train into a new --output-dir"
        ) from exc


def _load_base(pretrained: str, config: TrainConfig):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    dtypes = {"auto": "auto", "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if config.dtype not in dtypes:
        raise InvalidValueError(f"dtype must be one of {', '.join(dtypes)}, got {config.dtype!r}")
    # `dtype` replaced `torch_dtype` in transformers 4.56.
    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    key = "dtype" if (major, minor) >= (4, 56) else "torch_dtype"
    return AutoModelForCausalLM.from_pretrained(pretrained, **{key: dtypes[config.dtype]})


def host_to_device(accelerator: bool) -> dict:
    """TrainingArguments that move each batch to the device: pinned host memory and asynchronous copies
    on a CUDA device (the copy overlaps the previous step's kernels), neither on the CPU.

    Examples
    --------
    >>> host_to_device(True)
    {'dataloader_pin_memory': True, 'accelerator_config': {'non_blocking': True}}
    """
    return {"dataloader_pin_memory": accelerator, "accelerator_config": {"non_blocking": accelerator}}


def _training_arguments(config: TrainConfig, output_dir: Path, accelerator: bool | None = None):
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


def _make_trainer_class():
    import functools

    import torch
    from transformers import Trainer, TrainerCallback

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
                raise _rescued(self, failed) from exc

        def _save(self, output_dir=None, state_dict=None):
            # PEFT's default ("auto") would copy the unchanged base lm_head/embed_tokens into
            # every checkpoint once lm_head is a LoRA target (~1 GB each for Llama-3-8B).
            model = self.accelerator.unwrap_model(self.model)
            if hasattr(model, "peft_config"):
                model.save_pretrained = functools.partial(
                    type(model).save_pretrained, model, save_embedding_layers=False
                )
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
                _say(args, describe_kl_clock(self.config, self.epoch_steps, state.global_step, seconds))
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

    return EvidentialTrainer, MetadataCallback, ScheduleClock


def _rescued(trainer, failed: OSError) -> OSError:
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


def _save_final(trainer, output_dir: Path, metadata: dict) -> None:
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


def describe_run(config: TrainConfig, n_examples: int, epoch_steps: int, seconds_per_step: float | None) -> str:
    """The run before it starts: its step count, what that is in epochs, and a time estimate.

    Examples
    --------
    >>> describe_run(TrainConfig(max_steps=10080), 240, 60, 0.27)
    '10080 steps (168 epochs of 240 questions, 4 a step); about 0.27 s a step from a timed forward pass, so about \
45.4 min (said again, measured, after 3 steps; --max-steps N for fewer)'
    """
    epochs = config.max_steps / max(1, epoch_steps)
    line = (
        f"{config.max_steps} steps ({epochs:.3g} epochs of {n_examples} questions, "
        f"{config.per_device_train_batch_size * config.gradient_accumulation_steps} a step)"
    )
    if seconds_per_step is None:
        return line
    return (
        f"{line}; about {seconds_per_step:.2g} s a step from a timed forward pass, so about "
        f"{_duration(config.max_steps * seconds_per_step)} (said again, measured, after {CLOCK_STEPS} steps; "
        "--max-steps N for fewer)"
    )


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

    model, device = trainer.model, trainer.args.device
    rows = [r["input_ids"] for r in examples[: config.per_device_train_batch_size]]
    batch = {k: v.to(device) for k, v in encoding.left_pad(rows, 0 if pad is None else pad).items()}

    def forward():  # the step's forward, outside the Trainer: no step, no batch of the run
        return encoding.last_position_logits(model, batch["input_ids"], batch["attention_mask"], batch["position_ids"])

    threads = pick_threads_for(model, forward)
    if threads:
        _say(trainer.args, threads)
    per_forward = time_forward(model, forward)
    forwards = FORWARDS_PER_STEP_CHECKPOINTED if config.gradient_checkpointing else FORWARDS_PER_STEP
    seconds = per_forward * forwards * config.gradient_accumulation_steps
    line = describe_run(config, len(examples), epoch_steps, seconds)
    return f"{config.method}, resuming from {resume}: {line}" if resume else f"{config.method}: {line}"


def _clear_old_checkpoints(output_dir: Path) -> list[Path]:
    """Remove the ``checkpoint-N`` folders an earlier run left in ``output_dir`` (folders the Trainer wrote:
    they hold ``trainer_state.json`` or an adapter), so a new run's checkpoints are not mixed with them and
    ``--resume-from-checkpoint latest`` never picks an old one. Nothing else in the folder is touched."""
    removed = []
    for child in sorted(output_dir.glob("checkpoint-*")) if output_dir.is_dir() else []:
        step = child.name.removeprefix("checkpoint-")
        is_checkpoint = (child / "trainer_state.json").is_file() or (child / "adapter_config.json").is_file()
        if step.isdigit() and child.is_dir() and not child.is_symlink() and is_checkpoint:
            shutil.rmtree(child)
            removed.append(child)
    return removed


def _progress_for_logs(trainer) -> None:
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


def _say(args, message: str) -> None:
    if args.process_index == 0:  # above a progress bar, not inside its line
        from tqdm import tqdm

        tqdm.write(f"lm-eval-evidential train: {message}", file=sys.stderr)
        sys.stderr.flush()


def train(pretrained, task, config: TrainConfig) -> Path:
    """LoRA-fine-tune ``pretrained`` on ``task``'s training docs with ``config``; returns the adapter folder.

    ``task``: a task name (``"obqa_edl"``) or an already loaded lm-eval task whose training
    split is loaded. Writes ``config.output_dir``: checkpoints ``checkpoint-N`` (each with
    ``evidential_config.json``), then the final adapter (``adapter_config.json``,
    ``adapter_model.safetensors``) and, last, ``evidential_config.json``. Everything that
    can be refused (settings, output folder, target modules) is refused before training.
    """
    from peft import get_peft_model
    from transformers import AutoTokenizer, set_seed

    from lm_eval_evidential.modeling.quiet import peft_wrapping

    if config.output_dir is None:
        raise InvalidValueError("config.output_dir is required (--output-dir)")
    if config.ensemble is not None:  # N members, each one run of this function
        raise InvalidValueError(
            "config.ensemble is set: train the members with lm_eval_evidential.training.ensemble.train_ensemble"
        )
    output_dir = Path(config.output_dir)
    _check_output_dir(config, output_dir)
    resume = _resolve_resume(config, output_dir)
    args = _training_arguments(config, output_dir)

    task_name = task if isinstance(task, str) else _task_name(task)
    if resume is not None:
        check_resume_fits(resume, pretrained, config, task_name)
    with args.main_process_first(desc="loading the task"):
        task_obj = _load_task(task) if isinstance(task, str) else task
        docs = training_docs(task_obj, config.train_split)
    if config.max_train_docs is not None:
        docs = docs[: config.max_train_docs]

    tokenizer = AutoTokenizer.from_pretrained(pretrained)
    set_seed(config.seed)
    model = _load_base(pretrained, config)
    targets, notes = resolve_target_modules(model, config.target_modules, str(pretrained))
    # The context as --model evidential reads it (one computation); a --max-length above it is refused.
    from lm_eval_evidential.harness.lm_eval_compat import resolve_max_length
    from lm_eval_evidential.harness.loading_checks import check_context

    check_context(config.max_length, model.config)
    max_length = config.max_length or resolve_max_length(model.config, None, default=0) or None
    examples, answer_map = encode_examples(task_obj, docs, tokenizer, max_length)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    lora = lora_config(config, targets)
    with peft_wrapping():  # transformers' is_gradient_checkpointing FutureWarning, read by peft
        model = get_peft_model(model, lora)
    if config.gradient_checkpointing:
        model.enable_input_require_grads()

    epoch_steps = steps_per_epoch(len(examples), config, args.world_size)
    metadata = _metadata(pretrained, task_name, task_obj, config, examples, answer_map, targets, epoch_steps)
    for note in notes:
        _say(args, note)
    _say(args, f"LoRA on {', '.join(targets)}; {describe_kl_schedule(config, epoch_steps)}")
    trainer_cls, callback_cls, clock_cls = _make_trainer_class()
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
        for removed in _clear_old_checkpoints(output_dir):
            _say(args, f"--overwrite-output-dir: removed the earlier run's {removed.name}")
    _progress_for_logs(trainer)
    _say(args, _announce(trainer, config, examples, pad, epoch_steps, resume))
    with peft_wrapping():  # the Trainer reads the same deprecated property of the PEFT model
        trainer.train(resume_from_checkpoint=resume)
    step = trainer.state.global_step
    if on_signal.received is not None and step < trainer.state.max_steps:
        raise TrainingInterrupted(on_signal.received, output_dir / f"checkpoint-{step}", step)
    try:
        _save_final(trainer, output_dir, metadata)
    except OSError as exc:  # the folder refused the adapter (made read-only, a full disk): keep the run's work
        from lm_eval_evidential.files import write_error

        failed = write_error(exc, output_dir)
        if failed is exc:
            raise
        raise _rescued(trainer, failed) from exc
    return output_dir.resolve()
