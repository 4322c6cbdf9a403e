"""The output folder and checkpoints: refused before the model loads when a run could not write, or not resume
from, them; an earlier run's ``checkpoint-N`` folders cleared under ``--overwrite-output-dir``."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

from lm_eval_evidential.errors import (
    CheckpointError,
    InputNotFoundError,
    OutputExistsError,
    OutputPathError,
)
from lm_eval_evidential.modeling.config import METADATA_FILE
from lm_eval_evidential.training.config import TrainConfig


def check_output_dir(config: TrainConfig, output_dir: Path) -> None:
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


def resolve_resume(config: TrainConfig, output_dir: Path) -> str | None:
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
    from lm_eval_evidential.harness.adapter_checks import check_adapter_files

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

    from lm_eval_evidential.harness.adapter_checks import ADAPTER_FIT_HINT, adapter_misfit

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
    misfit = adapter_misfit(folder, model_config)
    if misfit:
        raise CheckpointError(
            f"checkpoint {folder} was trained on another base model than --pretrained {pretrained}: {misfit}; "
            f"{ADAPTER_FIT_HINT}, or train into a new --output-dir"
        )


def clear_old_checkpoints(output_dir: Path) -> list[Path]:
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
