"""Laplace-LoRA posteriors saved with an adapter, and the weight samples drawn from them at evaluation.

Laplace-LoRA (Yang et al., ICLR 2024) puts a Gaussian posterior N(θ_MAP, P⁻¹) over the LoRA
weights of a trained (MAP) adapter, P the curvature of the training loss (a Kronecker-factored
or diagonal GGN) plus a prior precision. ``lm-eval-evidential laplace`` fits it with
laplace-torch (:mod:`lm_eval_evidential.training.laplace`) and saves it here, next to the
adapter's own files, so that ``--model_args peft=FOLDER`` alone scores it: two files,

- ``laplace_config.json``: the structure (``diag`` or ``kron``), the LoRA parameters in the
  library's order (names and shapes), the prior precision, the number of samples and their
  seed, and what fitted it;
- ``laplace_posterior.safetensors``: ``mean`` (θ_MAP, flattened in that order) and what
  P^(-1/2) needs — for ``diag`` the posterior scale (P^(-1/2) elementwise), for ``kron`` each
  parameter block's eigenvectors and the matrix (λ₁λ₂ᵀ + δ)^(-1/2) of its eigenvalues.

:func:`sample_deltas` draws the M members' weight offsets exactly as laplace-torch's own
``sample`` does (``torch.randn(M, n_params)`` from a generator seeded once, then P^(-1/2)
applied), so member m of a scored run is the library's m-th sample for the same seed: the
library's own ``predictive_samples`` is the test oracle. The samples are weights, shared by every
question (as the library's sampling predictive uses them): the records do not depend on how the
questions are batched, ordered or split between processes.

Nothing here imports laplace-torch: evaluation needs torch and safetensors only.

References
----------
.. [1] Yang, A. X., Robeyns, M., Wang, X. and Aitchison, L. (2024). Bayesian low-rank adaptation
       for large language models. *ICLR*.
.. [2] Daxberger, E., Kristiadi, A., Immer, A., Eschenhagen, R., Bauer, M. and Hennig, P. (2021).
       Laplace redux — effortless Bayesian deep learning. *NeurIPS* (laplace-torch).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lm_eval_evidential.errors import EvidentialInputError

if TYPE_CHECKING:  # torch is imported where it is used: every command's parser reads STRUCTURES
    import torch

LAPLACE_CONFIG = "laplace_config.json"
LAPLACE_POSTERIOR = "laplace_posterior.safetensors"
LAPLACE_FORMAT = 1
STRUCTURES = ("kron", "diag")


def has_posterior(folder) -> bool:
    """Whether the adapter folder ``folder`` holds a saved Laplace posterior."""
    return folder is not None and (Path(str(folder)) / LAPLACE_CONFIG).is_file()


@dataclass(frozen=True)
class LaplacePosterior:
    """A saved posterior: ``names``/``shapes`` of the LoRA parameters in order, ``mean`` (θ_MAP flattened),
    ``structure`` and its factors (``scale``: diag; ``blocks``: kron, one ``(Q₁, Q₂, scale)`` or
    ``(Q, scale)`` per parameter), and ``config`` (the JSON as saved)."""

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    mean: torch.Tensor
    structure: str
    scale: torch.Tensor | None
    blocks: tuple[tuple[torch.Tensor, ...], ...]
    config: dict

    @property
    def n_params(self) -> int:
        return int(self.mean.numel())

    @property
    def samples(self) -> int:
        return int(self.config["samples"])

    @property
    def seed(self) -> int:
        return int(self.config["seed"])

    def apply_scale(self, z: torch.Tensor) -> torch.Tensor:
        """P^(-1/2) z for ``z`` of shape (M, n_params): laplace-torch's ``DiagLaplace.sample`` /
        ``KronDecomposed.bmm(exponent=-0.5)``, block by block in the parameters' order."""
        import torch

        if self.structure == "diag":
            return z * self.scale.reshape(1, -1)
        out, start = [], 0
        for block in self.blocks:
            if len(block) == 2:  # one factor (a bias vector): Q diag(s) Qᵀ z
                q, s = block
                p = q.shape[0]
                w = z[:, start : start + p].T
                out.append((q @ (s.reshape(-1, 1) * (q.T @ w))).T)
            else:  # two factors: (Q₁ ⊗ Q₂) diag(s) (Q₁ ⊗ Q₂)ᵀ z, z as (p_in, p_out) matrices
                q1, q2, s = block
                p = q1.shape[0] * q2.shape[0]
                w = z[:, start : start + p].reshape(z.shape[0], q1.shape[0], q2.shape[0])
                w = q1 @ ((q1.T @ w @ q2) * s.unsqueeze(0)) @ q2.T
                out.append(w.reshape(z.shape[0], p))
            start += p
        return torch.cat(out, dim=1)


def sample_deltas(posterior: LaplacePosterior, samples: int, seed: int) -> torch.Tensor:
    """The (samples, n_params) weight offsets θ_m − θ_MAP of the members, drawn as laplace-torch's ``sample``
    draws them: one CPU generator seeded with ``seed``, ``torch.randn(samples, n_params)`` in float32."""
    import torch

    generator = torch.Generator().manual_seed(int(seed))
    z = torch.randn(samples, posterior.n_params, generator=generator, dtype=torch.float32)
    return posterior.apply_scale(z)


def save_posterior(folder: Path, config: dict, tensors: dict[str, torch.Tensor]) -> None:
    """Write the two files into ``folder`` (a folder being built; :func:`load_posterior` reads them back)."""
    import torch
    from safetensors.torch import save_file

    save_file(
        {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in tensors.items()}, folder / LAPLACE_POSTERIOR
    )
    (folder / LAPLACE_CONFIG).write_text(json.dumps({"format": LAPLACE_FORMAT, **config}, indent=1) + "\n", "utf-8")


def load_posterior(folder) -> LaplacePosterior:
    """The posterior saved in adapter folder ``folder``; a file that is missing or does not fit is one line."""
    import torch
    from safetensors.torch import load_file

    folder = Path(str(folder))
    try:
        config = json.loads((folder / LAPLACE_CONFIG).read_text(encoding="utf-8"))
        tensors = load_file(str(folder / LAPLACE_POSTERIOR))
    except (OSError, ValueError) as exc:
        raise EvidentialInputError(
            f"{folder}: its Laplace posterior cannot be read ({exc}); fit it again (lm-eval-evidential laplace)"
        ) from None
    if not isinstance(config, dict) or config.get("structure") not in STRUCTURES:
        raise EvidentialInputError(f"{folder / LAPLACE_CONFIG}: no structure of {STRUCTURES}; fit it again")
    names = tuple(p["name"] for p in config["parameters"])
    shapes = tuple(tuple(p["shape"]) for p in config["parameters"])
    mean = tensors["mean"]
    sizes = [int(torch.Size(s).numel()) for s in shapes]
    if sum(sizes) != mean.numel():
        raise EvidentialInputError(
            f"{folder / LAPLACE_POSTERIOR}: mean has {mean.numel()} values but its parameters hold "
            f"{sum(sizes)}; fit it again"
        )
    blocks = []
    if config["structure"] == "kron":
        for i in range(len(names)):
            parts = [f"block{i}.q0", f"block{i}.q1", f"block{i}.scale"]
            blocks.append(tuple(tensors[k] for k in parts if k in tensors))
    return LaplacePosterior(
        names=names,
        shapes=shapes,
        mean=mean,
        structure=config["structure"],
        scale=tensors.get("scale"),
        blocks=tuple(blocks),
        config=config,
    )


def member_weights(posterior: LaplacePosterior, deltas: torch.Tensor, index: int) -> dict[str, torch.Tensor]:
    """``{parameter name: θ_MAP + δ_index}`` of member ``index``, shaped as the parameters."""
    import torch

    flat = posterior.mean + deltas[index]
    out, start = {}, 0
    for name, shape in zip(posterior.names, posterior.shapes):
        n = int(torch.Size(shape).numel())
        out[name] = flat[start : start + n].reshape(shape)
        start += n
    return out


def check_mean_fits(posterior: LaplacePosterior, model, folder) -> dict[str, torch.nn.Parameter]:
    """The model's parameters the posterior covers, by name, refused unless each exists with its shape and
    holds the posterior's mean (a posterior saved beside other weights than it was fitted at)."""
    import torch

    params = dict(model.named_parameters())
    flat, start = posterior.mean, 0
    found = {}
    for name, shape in zip(posterior.names, posterior.shapes):
        n = int(torch.Size(shape).numel())
        param = params.get(name)
        if param is None or tuple(param.shape) != tuple(shape):
            raise EvidentialInputError(
                f"peft={folder}: its Laplace posterior covers {name} {list(shape)}, which this adapter "
                f"{'lacks' if param is None else f'holds as {list(param.shape)}'}; fit the posterior on this adapter "
                "(lm-eval-evidential laplace)"
            )
        mean = flat[start : start + n].reshape(shape)
        if not torch.allclose(param.detach().float().cpu(), mean, rtol=1e-5, atol=1e-6):
            raise EvidentialInputError(
                f"peft={folder}: {name} differs from the Laplace posterior's mean, so the posterior was fitted at "
                "other weights; fit it again on this adapter (lm-eval-evidential laplace)"
            )
        found[name] = param
        start += n
    return found
