"""OpenOOD groups declared in the task YAMLs: each ID/OOD pair task names its OOD task's group.

A pair task (:class:`~lm_eval_evidential.tasks.pairs.OODPairTask`) may declare
``metadata.ood_group: near`` or ``far``: how far its OOD task lies from its ID task (OpenOOD's
near-OOD / far-OOD; McNamara 2026, §5: ARC and CSQA, MCQA science and commonsense questions like
OBQA's, are near; MMLU math, another domain, is far). :func:`declared_groups` reads the groups of a
pair task, or of every pair a group task lists, from the YAML files themselves (nothing loaded, no
TaskManager), so ``ood --groups-from obqa_edl_ood`` and ``report --groups-from …`` table exactly
the groups that ship.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from lm_eval_evidential.errors import InvalidValueError

__all__ = ["GROUP_NAMES", "declared_groups", "task_configs"]

#: The groups a pair may declare (OpenOOD's two; the mean rows are labelled with them).
GROUP_NAMES = ("near", "far")


def task_configs(folders: Sequence[str | os.PathLike]) -> Iterator[tuple[Path, dict]]:
    """``(path, config)`` of every ``*.yaml`` in ``folders`` (sorted per folder), ``!function`` tags read as None."""
    import yaml

    class _Loader(yaml.SafeLoader):
        pass

    _Loader.add_multi_constructor("!", lambda loader, suffix, node: None)  # !function: not needed here
    for folder in folders:
        for path in sorted(Path(folder).glob("*.yaml")):
            with open(path, encoding="utf-8") as fh:
                config = yaml.load(fh, Loader=_Loader) or {}
            if isinstance(config, dict):
                yield path, config


def _meta(config: dict) -> dict:
    meta = config.get("metadata")
    return meta if isinstance(meta, dict) else {}


def declared_groups(name: str, id_task: str, folders: Sequence[str | os.PathLike]) -> tuple[dict, list[str]]:
    """``({"near": [ood task, ...], "far": [...]}, notes)`` declared by pair or group task ``name``.

    ``name`` is a pair task (its own OOD task) or a group task (every pair it lists; entries that are
    not pairs, such as the ID task itself, are passed over). Each pair's ``id_task`` must be
    ``id_task``; a pair that declares no ``ood_group`` is left out with a note. ValueError (one line,
    with the fix) for an unknown name, a pair of another ID task, a group other than near/far, or no
    grouped pair at all.
    """
    configs = {}
    for _, config in task_configs(folders):
        for key in ("task", "group"):
            if isinstance(config.get(key), str):
                configs.setdefault(config[key], config)
    config = configs.get(name)
    if config is None:
        raise InvalidValueError(
            f"--groups-from {name!r}: no task or group of that name in {', '.join(str(f) for f in folders)}; "
            "name a pair task (metadata.id_task, ood_task, ood_group) or a group of them, e.g. obqa_edl_ood"
        )
    members = [name] if "task" in config and not isinstance(config["task"], list) else config.get("task") or []
    groups: dict[str, list[str]] = {}
    notes = []
    for member in members:
        meta = _meta(configs.get(member, {})) if isinstance(member, str) else {}
        if not meta.get("ood_task"):
            continue  # the ID task itself, or another kind of task in the group
        if meta.get("id_task") != id_task:
            raise InvalidValueError(
                f"--groups-from {name!r}: pair {member} compares {meta.get('id_task')} with {meta['ood_task']}, not "
                f"--id {id_task}; name a group of {id_task}'s pairs, or --id {meta.get('id_task')}"
            )
        group = meta.get("ood_group")
        if group is None:
            notes.append(f"{member}: no metadata.ood_group, so {meta['ood_task']} is in no group")
            continue
        if group not in GROUP_NAMES:
            raise InvalidValueError(
                f"pair {member} declares ood_group {group!r}; an OOD group is one of {', '.join(GROUP_NAMES)}"
            )
        groups.setdefault(group, []).append(meta["ood_task"])
    if not groups:
        raise InvalidValueError(
            f"--groups-from {name!r} declares no OOD group: none of its pairs has metadata.ood_group "
            f"({'; '.join(notes) or 'it lists no pair task'}); give the groups as --near T1,T2 --far T3"
        )
    return {g: groups[g] for g in GROUP_NAMES if g in groups}, notes
