"""``lm-eval-evidential laplace``: fit a Laplace-LoRA posterior on a trained softmax adapter (laplace-torch).

    lm-eval-evidential laplace --pretrained BASE --peft runs/softmax --task obqa_edl --output-dir runs/laplace
    lm_eval --model evidential --model_args pretrained=BASE,peft=runs/laplace --tasks obqa_edl …

The output folder holds the adapter's files and the posterior; ``peft=`` of it alone scores the
posterior's weight samples as members (``laplace_samples=N`` overrides the number saved).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys


def add_parser(sub) -> None:
    from lm_eval_evidential.cli.arguments import add_param, task_name
    from lm_eval_evidential.training.laplace import LaplaceSettings

    p = sub.add_parser(
        "laplace",
        help="fit a Laplace-LoRA posterior on a trained --method softmax adapter (needs laplace-torch)",
        description=(
            "Laplace-LoRA (Yang et al., ICLR 2024): a Gaussian posterior over the LoRA weights of a trained (MAP) "
            "--method softmax adapter, its precision the GGN of the answer logits' categorical likelihood on the "
            "task's training questions (Kronecker-factored or diagonal, fitted by laplace-torch) plus a prior "
            "precision (the marginal likelihood's, or --prior-precision). Writes OUTPUT_DIR: the adapter's files "
            "and the posterior; --model_args peft=OUTPUT_DIR then scores its weight samples as members. "
            "Install laplace-torch as docs/training.md says (three packages with --no-deps, then the [laplace] extra)."
        ),
    )
    p.add_argument("--pretrained", required=True, help="base model the adapter was trained on: hub id or local folder")
    p.add_argument("--peft", required=True, help="the trained (MAP) adapter folder, from train --method softmax")
    p.add_argument("--task", required=True, type=task_name, help="the task whose training questions fit the posterior")
    p.add_argument("--output-dir", required=True, help="new folder for the adapter and its posterior")
    for f in dataclasses.fields(LaplaceSettings):  # one option per setting, its help and constraint the field's
        flag, param = "--" + f.name.replace("_", "-"), f.metadata.get("param")
        if param is None:
            p.add_argument(flag, default=f.default, help=f.metadata["help"])
        else:
            add_param(p, flag, param, default=f.default, help=f.metadata["help"], name=f.name)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from lm_eval_evidential.training.interrupt import FitInterrupted
    from lm_eval_evidential.training.laplace import LaplaceSettings, fit_laplace

    settings = LaplaceSettings(**{f.name: getattr(args, f.name) for f in dataclasses.fields(LaplaceSettings)})
    try:
        out = fit_laplace(args.pretrained, args.peft, args.task, args.output_dir, settings)
    except FitInterrupted as stopped:  # SIGTERM/SIGINT: say what the output folder holds, exit as signalled
        print(f"lm-eval-evidential laplace: {stopped}", file=sys.stderr, flush=True)
        return stopped.exit_status
    print(f"laplace ({settings.structure}): adapter and posterior in {out}")
    return 0
