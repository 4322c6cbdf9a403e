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
from lm_eval_evidential.modeling.config import MAX_MEMBERS
from lm_eval_evidential.params import Integral, Interval, Param

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
    ``(Q, scale)`` per parameter), ``config`` (the JSON as saved) and the ``folder`` it was read from."""

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    mean: torch.Tensor
    structure: str
    scale: torch.Tensor | None
    blocks: tuple[tuple[torch.Tensor, ...], ...]
    config: dict
    folder: Path | None = None

    @property
    def n_params(self) -> int:
        return int(self.mean.numel())

    @property
    def samples(self) -> int:
        """The number of weight samples saved with the posterior (:data:`WEIGHT_SAMPLE_RANGE`), checked where it
        is read: ``laplace_samples=N`` stands in for a bad one without reading it."""
        samples = self.config.get("samples")
        if not WEIGHT_SAMPLE_RANGE.accepts(samples):
            where = LAPLACE_CONFIG if self.folder is None else self.folder / LAPLACE_CONFIG
            raise _damaged(where, f"samples={samples!r} is not {WEIGHT_SAMPLE_RANGE} (or pass laplace_samples=N)")
        return samples

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

    generator = torch.Generator().manual_seed(check_seed(int(seed), "the Laplace weight samples"))
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


#: The seeds ``torch.Generator.manual_seed`` takes (what :func:`sample_deltas` draws with).
SEED_RANGE = (-(2**63), 2**64 - 1)
#: ``seed`` of the weight samples, declared once (the fit's setting, :class:`~.training.laplace.LaplaceSettings`).
TORCH_SEED = Param(Interval(Integral, *SEED_RANGE), why="torch's seeds", example="seed=0")
#: How many weight samples a posterior is scored with, declared once: the fit's ``samples`` (saved with the
#: posterior, :class:`~.training.laplace.LaplaceSettings`) and ``laplace_samples`` in --model_args.
WEIGHT_SAMPLE_RANGE = Interval(Integral, 2, MAX_MEMBERS)


def check_seed(seed, where: str) -> int:
    """``seed`` if it is a whole number ``torch.Generator.manual_seed`` takes (:data:`TORCH_SEED`), else one line
    naming ``where`` (a saved posterior's file, or the samples' caller)."""
    if not TORCH_SEED.allows(seed):
        raise EvidentialInputError(
            f"{where}: seed={seed!r} is not a whole number from {SEED_RANGE[0]} to {SEED_RANGE[1]} (torch's seeds)"
        )
    return seed


def _damaged(path: Path, what: str) -> EvidentialInputError:
    return EvidentialInputError(f"{path}: {what}; fit the posterior again (lm-eval-evidential laplace)")


def _read_config(folder: Path) -> dict:
    """``laplace_config.json``, each key the samples need checked (a damaged or foreign file is one line)."""
    path = folder / LAPLACE_CONFIG
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _damaged(path, f"cannot be read ({exc})") from None
    if not isinstance(config, dict):
        raise _damaged(path, f"holds a JSON {type(config).__name__}, not the posterior's settings")
    if config.get("format") != LAPLACE_FORMAT:
        raise _damaged(
            path, f"format {config.get('format')!r}, but this package reads format {LAPLACE_FORMAT} (its own files)"
        )
    if config.get("structure") not in STRUCTURES:
        raise _damaged(path, f"structure {config.get('structure')!r} is none of {', '.join(STRUCTURES)}")
    params = config.get("parameters")
    if not isinstance(params, list) or not params or not all(_is_parameter(p) for p in params):
        raise _damaged(path, "'parameters' is not a list of {name, shape} (the LoRA weights it covers)")
    check_seed(config.get("seed"), str(path))
    prior = config.get("prior_precision")
    if isinstance(prior, bool) or not isinstance(prior, (int, float)) or not 0 < prior < float("inf"):
        raise _damaged(path, f"prior_precision={prior!r} is not a finite number > 0")
    return config


def _is_parameter(p) -> bool:
    shape = p.get("shape") if isinstance(p, dict) else None
    return (
        isinstance(p.get("name") if isinstance(p, dict) else None, str)
        and isinstance(shape, list)
        and bool(shape)
        and all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in shape)
    )


def _check_tensor(path: Path, tensors: dict, key: str, shape: tuple, *, positive: bool = False):
    """``tensors[key]``, refused unless of ``shape``, finite (and > 0 where ``positive``)."""
    import torch

    value = tensors.get(key)
    if value is None:
        raise _damaged(path, f"it holds no tensor {key!r}")
    if tuple(value.shape) != tuple(shape):
        raise _damaged(path, f"{key} has shape {list(value.shape)}, but its parameters need {list(shape)}")
    if not torch.isfinite(value).all():
        raise _damaged(path, f"{key} holds {int((~torch.isfinite(value)).sum())} non-finite values (NaN or inf)")
    if positive and not (value > 0).all():
        raise _damaged(path, f"{key} holds {int((value <= 0).sum())} values <= 0 (a scale P^(-1/2) is positive)")
    return value


def load_posterior(folder) -> LaplacePosterior:
    """The posterior saved in adapter folder ``folder``, every part checked before a weight loads: a file that
    is missing, damaged (truncated, a NaN, a key or shape that does not fit its parameters) or of another format
    is one line naming it."""
    import torch
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    folder = Path(str(folder))
    config = _read_config(folder)
    path = folder / LAPLACE_POSTERIOR
    try:
        tensors = load_file(str(path))
    except (OSError, ValueError, SafetensorError) as exc:
        raise _damaged(path, f"cannot be read ({exc})") from None
    names = tuple(p["name"] for p in config["parameters"])
    shapes = tuple(tuple(p["shape"]) for p in config["parameters"])
    sizes = [int(torch.Size(s).numel()) for s in shapes]
    mean = tensors.get("mean")
    if mean is not None and mean.dim() == 1 and mean.numel() != sum(sizes):
        raise _damaged(path, f"mean has {mean.numel()} values but its parameters hold {sum(sizes)}")
    mean = _check_tensor(path, tensors, "mean", (sum(sizes),))
    scale, blocks = None, []
    if config["structure"] == "diag":
        scale = _check_tensor(path, tensors, "scale", (sum(sizes),), positive=True)
    else:
        for i, size in enumerate(sizes):
            blocks.append(_kron_block(path, tensors, i, size))
    return LaplacePosterior(
        names=names,
        shapes=shapes,
        mean=mean,
        structure=config["structure"],
        scale=scale,
        blocks=tuple(blocks),
        config=config,
        folder=folder,
    )


def _kron_block(path: Path, tensors: dict, i: int, size: int) -> tuple:
    """Parameter ``i``'s Kronecker block ``(Q, scale)`` or ``(Q1, Q2, scale)``, checked against its ``size``."""
    q0 = tensors.get(f"block{i}.q0")
    if q0 is None or q0.dim() != 2:
        raise _damaged(path, f"it holds no square eigenvector matrix block{i}.q0 for parameter {i}")
    if f"block{i}.q1" not in tensors:
        q = _check_tensor(path, tensors, f"block{i}.q0", (size, size))
        return q, _check_tensor(path, tensors, f"block{i}.scale", (size,), positive=True)
    q1 = tensors[f"block{i}.q1"]
    n0, n1 = q0.shape[0], q1.shape[0] if q1.dim() == 2 else -1
    if n0 * n1 != size:
        raise _damaged(path, f"block{i}'s factors are {n0} x {n1}, but its parameter holds {size} values")
    return (
        _check_tensor(path, tensors, f"block{i}.q0", (n0, n0)),
        _check_tensor(path, tensors, f"block{i}.q1", (n1, n1)),
        _check_tensor(path, tensors, f"block{i}.scale", (n0, n1), positive=True),
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
