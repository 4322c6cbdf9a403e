"""``lm-eval-evidential laplace``: fit a Laplace-LoRA posterior on a trained softmax adapter (laplace-torch).

    lm-eval-evidential laplace --pretrained BASE --peft runs/softmax --task obqa_edl --output-dir runs/laplace
    lm_eval --model evidential --model_args pretrained=BASE,peft=runs/laplace --tasks obqa_edl …

The output folder holds the adapter's files and the posterior; ``peft=`` of it alone scores the
posterior's weight samples as members (``laplace_samples=N`` overrides the number saved).
"""

from __future__ import annotations

import argparse
import dataclasses


def add_parser(sub) -> None:
    from lm_eval_evidential.cli.arguments import task_name
    from lm_eval_evidential.modeling.laplace import STRUCTURES
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
    defaults = LaplaceSettings()
    p.add_argument("--pretrained", required=True, help="base model the adapter was trained on: hub id or local folder")
    p.add_argument("--peft", required=True, help="the trained (MAP) adapter folder, from train --method softmax")
    p.add_argument("--task", required=True, type=task_name, help="the task whose training questions fit the posterior")
    p.add_argument("--output-dir", required=True, help="new folder for the adapter and its posterior")
    p.add_argument(
        "--structure",
        choices=STRUCTURES,
        default=defaults.structure,
        help="the GGN's structure: kron (Kronecker-factored, the paper's) or diag",
    )
    p.add_argument(
        "--prior-precision",
        type=float,
        default=None,
        help="an isotropic prior precision to use (default: the one maximising the marginal likelihood)",
    )
    p.add_argument("--samples", type=int, default=defaults.samples, help="weight samples scored per question")
    p.add_argument("--seed", type=int, default=defaults.seed, help="seed of the weight samples")
    p.add_argument(
        "--batch-size",
        type=int,
        default=defaults.batch_size,
        help="questions per curvature batch (1: no left padding enters KFAC's activation factors)",
    )
    p.add_argument("--max-train-docs", type=int, default=None, help="fit on the first N training docs only")
    p.add_argument("--train-split", default=None, help="split to fit on (default: the task's training_split)")
    p.add_argument(
        "--marglik-steps",
        type=int,
        default=defaults.marglik_steps,
        help="gradient steps of the marginal-likelihood prior precision search",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from lm_eval_evidential.training.laplace import LaplaceSettings, fit_laplace

    settings = LaplaceSettings(**{f.name: getattr(args, f.name) for f in dataclasses.fields(LaplaceSettings)})
    out = fit_laplace(args.pretrained, args.peft, args.task, args.output_dir, settings)
    print(f"laplace ({settings.structure}): adapter and posterior in {out}")
    return 0
