"""``train … --ensemble N``: N LoRA members of one base model, one command, resumable member by member.

The folder is what ``--model_args peft=DIR`` scores as an ensemble: ``DIR/member_0`` ..
``DIR/member_{N-1}``, each an ordinary adapter folder from :func:`~lm_eval_evidential.training.trainer.train`
(its ``evidential_config.json`` written last, so a folder that has it is complete), and no adapter
of its own. Member ``i`` differs from the others only by its seed, ``seed + i``: LoRA
initialisation, data order and dropout noise (the deep-ensemble recipe of Lakshminarayanan et
al. 2017: random initialisation and shuffling, nothing else). A rerun of the same command
skips the complete members, resumes an unfinished one from its last ``checkpoint-N`` and
trains the rest; members trained with other settings are refused rather than mixed.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from lm_eval_evidential.errors import InvalidValueError, OutputExistsError
from lm_eval_evidential.modeling.config import METADATA_FILE, read_metadata
from lm_eval_evidential.training.config import TrainConfig

MEMBER_DIR = "member_{}"
_MEMBER_RE = re.compile(r"member_(\d+)")
#: The training settings that must agree between a complete member and this run (the seed is checked apart).
_SAME = ("method", "base_model", "task")


def member_seed(config: TrainConfig, index: int) -> int:
    """The seed of member ``index``: the run's seed plus the index (each member its own draw)."""
    return config.seed + index


def _check_folder(output_dir: Path, n: int) -> None:
    """The ensemble folder may hold only member folders of this ensemble (no adapter of its own)."""
    if not output_dir.exists():
        return
    if not output_dir.is_dir():
        raise OutputExistsError(f"--output-dir {output_dir} is a file; pass a folder for the ensemble's members")
    for item in sorted(output_dir.iterdir()):
        match = _MEMBER_RE.fullmatch(item.name)
        if match is None or not item.is_dir():
            raise OutputExistsError(
                f"{output_dir} holds {item.name!r}, which is not a member folder (member_0 .. member_{n - 1}); an "
                "ensemble folder holds its members and no adapter of its own — pass a new --output-dir"
            )
        if int(match[1]) >= n:
            raise OutputExistsError(
                f"{output_dir} holds {item.name}, beyond --ensemble {n} (member_0 .. member_{n - 1}); "
                f"peft={output_dir} would score it too — pass --ensemble {int(match[1]) + 1} or move it away"
            )


def _complete(member_dir: Path, config: TrainConfig, pretrained, task_name: str, seed: int) -> bool:
    """Whether ``member_dir`` is a complete member of this ensemble; refused when it is another run's."""
    meta = read_metadata(member_dir) if (member_dir / METADATA_FILE).is_file() else None
    if meta is None:
        return False
    want = {"method": config.method, "base_model": str(pretrained), "task": task_name}
    differ = [f"{key} {meta.get(key)!r} (this run: {want[key]!r})" for key in _SAME if meta.get(key) != want[key]]
    trained_seed = (meta.get("train_config") or {}).get("seed")
    if trained_seed != seed:
        differ.append(f"seed {trained_seed!r} (this run gives it {seed})")
    if differ:
        raise OutputExistsError(
            f"{member_dir} is a complete member trained with other settings: {'; '.join(differ)}; rerun with the "
            "settings it was trained with, or pass a new --output-dir"
        )
    return True


def _member_config(config: TrainConfig, member_dir: Path, seed: int) -> TrainConfig:
    """Member ``member_dir``'s settings: the run's, with its own seed and folder, resumed where it stopped."""
    started = member_dir.is_dir() and any(member_dir.iterdir())
    has_checkpoint = started and any(p.name.startswith("checkpoint-") for p in member_dir.iterdir())
    return dataclasses.replace(
        config,
        output_dir=str(member_dir),
        seed=seed,
        ensemble=None,
        resume_from_checkpoint="latest" if has_checkpoint else None,
        overwrite_output_dir=started,  # a member that stopped before its first checkpoint starts again
    )


def train_ensemble(pretrained, task, config: TrainConfig) -> Path:
    """Train ``config.ensemble`` members into ``config.output_dir/member_i``; returns the ensemble folder.

    Members already complete (with settings equal to this run's) are skipped; an unfinished
    one resumes from its last checkpoint. Everything that can be refused is refused before
    the first member trains.
    """
    from lm_eval_evidential.training.data import task_name_of
    from lm_eval_evidential.training.trainer import train

    n = config.ensemble
    if n is None or n < 2:
        raise InvalidValueError(f"train_ensemble needs config.ensemble >= 2, got {n!r}")
    if config.resume_from_checkpoint not in (None, "", False, "latest", True, "true", "True"):
        raise InvalidValueError(
            f"--resume-from-checkpoint {config.resume_from_checkpoint!r} names one checkpoint, but --ensemble resumes "
            "each member from its own last checkpoint; rerun the same command without a checkpoint folder"
        )
    output_dir = Path(config.output_dir)
    _check_folder(output_dir, n)
    task_name = task if isinstance(task, str) else task_name_of(task)
    plan = []
    for i in range(n):
        member_dir = output_dir / MEMBER_DIR.format(i)
        seed = member_seed(config, i)
        plan.append((member_dir, seed, _complete(member_dir, config, pretrained, task_name, seed)))
    for member_dir, seed, complete in plan:
        if not complete:
            train(pretrained, task, _member_config(config, member_dir, seed))
    return output_dir.resolve()
