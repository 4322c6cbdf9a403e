"""``lm-eval-evidential laplace``: a Laplace-LoRA posterior fitted on a trained (MAP) adapter with laplace-torch.

Laplace-LoRA (Yang et al., ICLR 2024) is a post-hoc Laplace approximation over the LoRA weights
only: the base model stays fixed, the adapter's weights θ_MAP are the mean, and the posterior
precision is the generalised Gauss-Newton of the categorical likelihood of the K answer logits
on the training questions — Kronecker-factored (``kron``, the paper's) or diagonal — plus an
isotropic prior precision chosen by the marginal likelihood (laplace-torch's
``optimize_prior_precision(method="marglik")``) or given.

Why laplace-torch (Daxberger et al. 2021) and not ``bayesian-lora`` (the Laplace-LoRA authors'
package, 0.0.6): laplace-torch is kept up, tested and documented, takes a model whose input is
a dict of tensors (Hugging Face batches), computes its KFAC/diagonal GGN through curvlinops and
has its own sampling predictive, which the tests use as the oracle of the scored members.
bayesian-lora 0.0.6 keeps the activations of the last position only (its K-FAC misses every
other token's contribution to a LoRA weight's gradient), measures the prior term with the norm
instead of the squared norm of the weights, and its ``default_output_callback`` reads globals it
never defines.

The likelihood is the softmax over the answer logits, so only ``--method softmax`` adapters (the
Laplace-LoRA paper's cross-entropy fine-tuning) are fitted; an EDL adapter's loss is not that
likelihood and is refused with the reason. laplace-torch is an optional dependency (:data:`INSTALL`,
docs/training.md); without it this command refuses in one line.

References
----------
.. [1] Yang, A. X., Robeyns, M., Wang, X. and Aitchison, L. (2024). Bayesian low-rank adaptation
       for large language models. *ICLR*.
.. [2] Daxberger, E. et al. (2021). Laplace redux — effortless Bayesian deep learning. *NeurIPS*.
"""

from __future__ import annotations

import functools
import shutil
from dataclasses import dataclass
from pathlib import Path

from lm_eval_evidential.errors import EvidentialInputError
from lm_eval_evidential.modeling.config import read_metadata
from lm_eval_evidential.modeling.laplace import (
    STRUCTURES,
    TORCH_SEED,
    WEIGHT_SAMPLE_RANGE,
    has_posterior,
    save_posterior,
)
from lm_eval_evidential.params import Interval, Options, Param, Real, check_fields, param_field
from lm_eval_evidential.training.config import AT_LEAST_ONE_OR_NONE, POSITIVE_INT
from lm_eval_evidential.training.interrupt import FitInterrupted, stop_on_signal

#: What ``pip`` needs for the fit (docs/training.md): laplace-torch and the two curvature backends without their
#: torchvision (never imported; pip would fetch one built for another torch), then the rest of their dependencies.
INSTALL = (
    'pip install --no-deps "laplace-torch>=0.3,<0.4" "backpack-for-pytorch>=1.6,<2" "curvlinops-for-pytorch>=3.0.1,<4"'
    ' && pip install -e ".[laplace]"'
)


#: The fit's settings' constraints, declared once: the CLI's options and a Python caller are checked by them.
STRUCTURE = Param(Options(STRUCTURES), noun="GGN structure")
PRIOR_PRECISION = Param(
    None,
    Interval(Real, 0, None, closed="neither"),
    must="a finite number > 0",
    why="an isotropic prior precision; drop it for the marginal likelihood's",
    example="prior_precision=1",
)
WEIGHT_SAMPLES = Param(
    WEIGHT_SAMPLE_RANGE,
    why="the posterior is scored by sampling, one forward pass of every question per weight sample",
    example="samples=10",
)


@dataclass(frozen=True)
class LaplaceSettings:
    """How the posterior is fitted (CLI: ``lm-eval-evidential laplace --field-name``; each field's help and
    constraint in its metadata, checked on construction)."""

    structure: str = param_field(
        "kron", help="the GGN's structure: kron (Kronecker-factored, the paper's) or diag", param=STRUCTURE
    )
    prior_precision: float | None = param_field(
        None,
        help="an isotropic prior precision to use (default: the one maximising the marginal likelihood)",
        param=PRIOR_PRECISION,
    )
    samples: int = param_field(10, help="weight samples scored per question", param=WEIGHT_SAMPLES)
    seed: int = param_field(0, help="seed of the weight samples", param=TORCH_SEED)
    # One question per batch: curvlinops' KFAC counts every position of a Linear layer's input, left padding
    # included (the attention mask hides pads from the logits, not from the activation factor), and laplace-torch
    # sums per-batch Kronecker factors; with one question per batch the posterior depends on neither.
    batch_size: int = param_field(
        1,
        help="questions per curvature batch (1: no left padding enters KFAC's activation factors)",
        param=POSITIVE_INT,
    )
    max_train_docs: int | None = param_field(
        None, help="fit on the first N training docs only", param=AT_LEAST_ONE_OR_NONE
    )
    train_split: str | None = param_field(None, help="split to fit on (default: the task's training_split)")
    marglik_steps: int = param_field(
        100, help="gradient steps of the marginal-likelihood prior precision search", param=POSITIVE_INT
    )

    def __post_init__(self) -> None:
        check_fields(self)


def _laplace_library():
    try:
        import laplace
    except ImportError:
        raise EvidentialInputError(
            "lm-eval-evidential laplace fits the posterior with laplace-torch, which is not installed; install it "
            f"with {INSTALL} (from this package's clone), or score the MAP adapter alone"
        ) from None
    return laplace


def answer_logits_module(model):
    """The module laplace-torch fits: a batch dict (``input_ids``, ``attention_mask``, ``position_ids``,
    ``answer_ids``) → its (B, K) last-position answer logits in float32, as evaluation computes them."""
    import torch

    from lm_eval_evidential.training.objective import last_logits

    class AnswerLogits(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.model = inner

        def forward(self, batch):
            return last_logits(self.model, batch).gather(1, batch["answer_ids"].to(torch.long))

    return AnswerLogits(model)


def _check_adapter(peft: Path) -> dict:
    if not peft.exists():
        raise EvidentialInputError(f"--peft {peft}: no such folder; pass the folder of a trained adapter")
    if not (peft / "adapter_config.json").is_file():
        raise EvidentialInputError(f"--peft {peft}: no adapter_config.json; pass the folder of a trained adapter")
    if has_posterior(peft):
        raise EvidentialInputError(
            f"--peft {peft} already holds a Laplace posterior; fit on the MAP adapter it was made from"
        )
    meta = read_metadata(peft) or {}
    method = meta.get("method")
    if method != "softmax":
        raise EvidentialInputError(
            f"--peft {peft} was trained with method={method or 'unknown (no evidential_config.json)'}: Laplace-LoRA's "
            "posterior is over the categorical likelihood of the answer logits (Yang et al. 2024), which is the "
            "training loss of --method softmax adapters only; train one with lm-eval-evidential train --method softmax"
        )
    return meta


def _check_base(pretrained, peft: Path) -> None:
    """The base model exists and the adapter fits it, said before the task and the weights load: a missing local
    path would be the hub client's ``HFValidationError``, and an adapter of another base a ``state_dict``
    ``RuntimeError`` after the model loaded."""
    from lm_eval_evidential.harness.adapter_checks import check_adapter_fits
    from lm_eval_evidential.harness.loading_checks import check_load_args

    check_load_args(pretrained, {}, cli=True)
    try:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(pretrained)
    except Exception:  # noqa: BLE001 - the model's own load says what is wrong with pretrained
        return
    check_adapter_fits(peft, config, pretrained, cli=True)


def _posterior_tensors(la, structure: str) -> dict:
    """What :mod:`lm_eval_evidential.modeling.laplace` needs of a fitted ``la`` to draw its samples."""
    import torch

    tensors = {"mean": la.mean.detach()}
    if structure == "diag":
        tensors["scale"] = la.posterior_scale.detach()
        return tensors
    precision = la.posterior_precision  # KronDecomposed: H · (1/T) + prior, eigen-decomposed per block
    for i, (ls, qs, delta) in enumerate(zip(precision.eigenvalues, precision.eigenvectors, precision.deltas)):
        if len(ls) == 1:
            tensors[f"block{i}.q0"] = qs[0]
            tensors[f"block{i}.scale"] = torch.pow(ls[0] + delta, -0.5)
        else:
            l1, l2 = ls
            if precision.damping:
                scale = torch.pow(torch.outer(l1 + torch.sqrt(delta), l2 + torch.sqrt(delta)), -0.5)
            else:
                scale = torch.pow(torch.outer(l1, l2) + delta, -0.5)
            tensors[f"block{i}.q0"], tensors[f"block{i}.q1"], tensors[f"block{i}.scale"] = qs[0], qs[1], scale
    return {k: v.detach() for k, v in tensors.items()}


def fit_laplace(pretrained, peft, task, output_dir, settings: LaplaceSettings | None = None) -> Path:
    """Fit a Laplace-LoRA posterior on the MAP adapter ``peft`` over ``task``'s training questions and write
    ``output_dir``: the adapter's files and the posterior (``peft=output_dir`` then scores it). Returns the folder.
    """
    from lm_eval_evidential.files import check_output_folder, check_writable_folder

    settings = settings or LaplaceSettings()
    peft = Path(str(peft))
    meta = _check_adapter(peft)
    _check_base(pretrained, peft)
    output = check_output_folder(Path(str(output_dir)), replaceable=has_posterior, option="--output-dir")
    check_writable_folder(output)  # before the fit, not after it
    laplace = _laplace_library()
    stopped = functools.partial(FitInterrupted, command="laplace", output=output, kept=has_posterior(output))
    with stop_on_signal(stopped):  # Ctrl-C or SIGTERM: one line; the output is written whole at the end or not
        return _fit_and_save(laplace, pretrained, peft, meta, task, output, settings)


def _fit_and_save(laplace, pretrained, peft: Path, meta: dict, task, output: Path, settings: LaplaceSettings) -> Path:
    """The fit of :func:`fit_laplace` once its inputs are checked, and its output written (atomically)."""
    from lm_eval_evidential.files import atomic_folder
    from lm_eval_evidential.training.data import load_task, task_name_of

    task_obj = load_task(task) if isinstance(task, str) else task
    tokenizer, examples = _one_k_examples(task_obj, pretrained, settings)
    model = _lora_model(pretrained, peft)
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    shapes = [list(p.shape) for n, p in model.named_parameters() if p.requires_grad]
    la = _fitted(laplace, model, tokenizer, examples, settings)
    config = {
        "structure": settings.structure,
        "parameters": [{"name": n, "shape": s} for n, s in zip(names, shapes)],
        "prior_precision": float(la.prior_precision.reshape(-1)[0]),
        "prior_precision_from": "given" if settings.prior_precision is not None else "marglik",
        "log_marginal_likelihood": float(la.log_marginal_likelihood().detach()),
        "n_data": int(la.n_data),
        "batch_size": settings.batch_size,  # KFAC sums per-batch factors, pads included: part of the fit
        "samples": settings.samples,
        "seed": settings.seed,
        "likelihood": "categorical over the K answer logits (softmax)",
        "task": task_name_of(task_obj),
        "fitted_on": str(peft),
        "library": f"laplace-torch {_version('laplace-torch')}",
        "backend": type(la.backend).__name__,
        "method": meta.get("method"),
    }
    tensors = _posterior_tensors(la, settings.structure)
    with atomic_folder(output, replaceable=has_posterior) as tmp:
        for item in sorted(peft.iterdir()):
            if item.is_file():
                shutil.copy2(item, tmp / item.name)
        save_posterior(tmp, config, tensors)
    return output.resolve()


def _one_k_examples(task_obj, pretrained, settings: LaplaceSettings) -> tuple:
    """``(tokenizer, examples)``: the task's training questions (at most ``settings.max_train_docs``) encoded by
    the model's tokenizer, refused unless of one K (the fit's categorical likelihood has K classes)."""
    from transformers import AutoTokenizer

    from lm_eval_evidential.training.data import encode_examples, task_name_of, training_docs

    docs = training_docs(task_obj, settings.train_split)[: settings.max_train_docs]
    tokenizer = AutoTokenizer.from_pretrained(pretrained)
    examples, _ = encode_examples(task_obj, docs, tokenizer)
    ks = sorted({e["k"] for e in examples})
    if len(ks) != 1:
        raise EvidentialInputError(
            f"task {task_name_of(task_obj)}: its training questions have K = {ks}; the Laplace fit's categorical "
            "likelihood needs one K (fit on a K-matched task, e.g. csqa_k4_edl, or a task of one K)"
        )
    return tokenizer, examples


def _lora_model(pretrained, peft: Path):
    """The base model with the MAP adapter, float32, only the LoRA weights trainable (no lora_only bias: not the
    paper's)."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from lm_eval_evidential.modeling.quiet import peft_wrapping

    model = AutoModelForCausalLM.from_pretrained(pretrained, dtype=torch.float32)
    with peft_wrapping():
        model = PeftModel.from_pretrained(model, str(peft), is_trainable=True)
    for name, param in model.named_parameters():
        param.requires_grad_(".lora_" in name)
    return model


def _fitted(laplace, model, tokenizer, examples: list[dict], settings: LaplaceSettings):
    """laplace-torch's ``Laplace`` on the answer logits, fitted on ``examples``, its prior precision given or
    chosen by the marginal likelihood."""
    import torch

    from lm_eval_evidential.training.data import LeftPadCollator

    module = answer_logits_module(model)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    loader = torch.utils.data.DataLoader(
        examples, batch_size=settings.batch_size, shuffle=False, collate_fn=LeftPadCollator(0 if pad is None else pad)
    )
    la = laplace.Laplace(
        module,
        "classification",
        subset_of_weights="all",
        hessian_structure=settings.structure,
        dict_key_x="input_ids",
        dict_key_y="target",
    )
    la.fit(loader)
    if settings.prior_precision is None:
        la.optimize_prior_precision(
            pred_type="glm", method="marglik", prior_structure="scalar", n_steps=settings.marglik_steps
        )
    else:
        la.prior_precision = float(settings.prior_precision)
    return la


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "unknown"
