"""``lm-eval-evidential train``: LoRA fine-tuning with an EDL, IB-EDL or softmax objective.

    lm-eval-evidential train --pretrained meta-llama/Meta-Llama-3-8B --task obqa_edl \\
        --method ib_edl --output-dir runs/ib_edl_obqa [--max-steps N] [--lr 5e-5] …

Every field of :class:`lm_eval_evidential.training.config.TrainConfig` is an option (``--field-name``),
with the paper's defaults. Multi-GPU: ``accelerate launch -m lm_eval_evidential train …``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from lm_eval_evidential.errors import InvalidValueError


def _field_type(annotation) -> type:
    # The dataclass annotations are strings (postponed evaluation); map them to argparse types.
    text = str(annotation)
    for name, kind in (("bool", bool), ("int", int), ("float", float), ("tuple", str), ("str", str)):
        if text.startswith(name):
            return kind
    return str


def add_parser(sub) -> None:
    from lm_eval_evidential.cli.arguments import add_param
    from lm_eval_evidential.training.config import TrainConfig

    p = sub.add_parser(
        "train",
        help="LoRA-fine-tune a causal LM on a task's training split with an EDL / IB-EDL / softmax objective",
        description=(
            "LoRA fine-tuning of a causal LM on a task's training split with an EDL, IB-EDL or softmax objective. "
            "Every option below is a field of TrainConfig, with the defaults of McNamara (2026) arXiv:2605.06382, "
            "Table 7. Multi-GPU: accelerate launch -m lm_eval_evidential train …"
        ),
    )
    p.add_argument("--pretrained", required=True, help="base model: hub id or local folder")
    from lm_eval_evidential.cli.arguments import task_name

    p.add_argument(
        "--task",
        required=True,
        type=task_name,
        help="an lm-eval task whose docs have single-token answers, e.g. obqa_edl",
    )
    for f in dataclasses.fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        flags = (flag, *f.metadata.get("flags", ()))
        kind = _field_type(f.type)
        default = f.default
        if isinstance(default, tuple):
            default = ",".join(default)
        if kind is bool:
            p.add_argument(
                *flags, dest=f.name, action=argparse.BooleanOptionalAction, default=default, help=f.metadata["help"]
            )
            continue
        extra = {k: f.metadata[k] for k in ("nargs", "const") if k in f.metadata}
        if f.metadata.get("param") is not None:  # refused by argparse in the field's declared words
            add_param(
                p,
                flag,
                f.metadata["param"],
                aliases=flags[1:],
                dest=f.name,
                default=default,
                name=f.name,
                **extra,
                help=f.metadata["help"],
            )
            continue
        if f.name == "output_dir":  # the one field train() cannot do without
            extra["required"] = True
        p.add_argument(*flags, dest=f.name, type=kind, default=default, help=f.metadata["help"], **extra)
    p.set_defaults(func=run)


def config_from_args(args: argparse.Namespace):
    from lm_eval_evidential.training.config import TrainConfig

    return TrainConfig(**{f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig)})


def run(args: argparse.Namespace) -> int:
    from lm_eval_evidential.training.ensemble import train_ensemble
    from lm_eval_evidential.training.interrupt import TrainingInterrupted
    from lm_eval_evidential.training.trainer import train

    config = config_from_args(args)  # a ValueError is an error (exit status 1), said by cli.main
    if config.output_dir is None:
        raise InvalidValueError("--output-dir is required")
    try:
        out = (train if config.ensemble is None else train_ensemble)(args.pretrained, args.task, config)
    except TrainingInterrupted as stopped:  # SIGTERM/SIGINT: the checkpoint is saved; say where, exit as signalled
        if os.environ.get("RANK", "0") == "0":
            print(f"lm-eval-evidential train: {stopped}", file=sys.stderr, flush=True)
        return stopped.exit_status
    if os.environ.get("RANK", "0") == "0":  # one line per run, not per process under accelerate/torchrun
        what = "adapter" if config.ensemble is None else f"ensemble of {config.ensemble} members (member_0 ..)"
        print(f"{config.method}: {what} in {out}")
    return 0
