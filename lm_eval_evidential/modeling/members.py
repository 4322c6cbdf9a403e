"""Several predictions per question from one base model: LoRA ensemble members and MC-dropout passes.

**Ensembles.** ``peft=DIR`` where ``DIR`` holds one PEFT adapter folder per member and no adapter
of its own (what ``lm-eval-evidential train --ensemble N`` writes): :func:`ensemble_members`
finds them in the sorted order of their folder names and refuses, before any weights load, a
one-member "ensemble" and members of different base models or methods. The base loads once;
each member is a named adapter of one ``PeftModel`` (``load_adapter``/``set_adapter``).

**MC dropout** (Gal & Ghahramani 2016). ``mc_samples=N`` runs N passes with the adapter's LoRA
dropout active. Its noise must not depend on how questions are batched, padded or ordered, nor
on the process that scores them: :func:`seeded_dropout` swaps every LoRA dropout module for
:class:`SeededDropout`, whose mask for row ``r`` of a batch comes from a generator seeded by
that row's own key (the prompt's content, the pass index and the layer's name,
:func:`~lm_eval_evidential.modeling.heads.question_seed`), drawn over the row's real tokens
only and right-aligned under its left padding. So a question's masks are the same whatever
else is in its batch; they are drawn on the model's device (CPU and CUDA generators give
different streams), like the forward itself.

References
----------
.. [1] Gal, Y. and Ghahramani, Z. (2016). Dropout as a Bayesian approximation: representing model
       uncertainty in deep learning. *ICML*.
.. [2] Lakshminarayanan, B., Pritzel, A. and Blundell, C. (2017). Simple and scalable predictive
       uncertainty estimation using deep ensembles. *NeurIPS*.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch
from torch import nn

from lm_eval_evidential.errors import EvidentialInputError
from lm_eval_evidential.modeling.config import read_metadata
from lm_eval_evidential.modeling.heads import question_seed
from lm_eval_evidential.modeling.laplace import LAPLACE_CONFIG
from lm_eval_evidential.records.provenance import adapter_weights_hash

ADAPTER_CONFIG = "adapter_config.json"
#: adapter_config.json fields that may differ between members of one ensemble (not the LoRA layers' shape).
_CHECKPOINT = re.compile(r"checkpoint-\d+")
_MEMBER = re.compile(r"member_\d+")  # train --ensemble's member folders (training/ensemble.py)
_NOT_LORA = frozenset({"base_model_name_or_path", "revision", "inference_mode", "lora_dropout"})


def _adapter_config(folder: Path) -> dict:
    try:
        data = json.loads((folder / ADAPTER_CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EvidentialInputError(f"{folder / ADAPTER_CONFIG} cannot be read ({exc}); re-save the member") from None
    if not isinstance(data, dict):
        raise EvidentialInputError(f"{folder / ADAPTER_CONFIG} is not a JSON object; re-save the member")
    return data


def ensemble_members(peft) -> list[Path] | None:
    """The member folders of ensemble folder ``peft`` in sorted name order, or None if it is no ensemble.

    An ensemble folder has no ``adapter_config.json`` of its own and two or more sub-folders that
    do. Refused with the reason: one member, members trained on different base models
    (``base_model_name_or_path``) or with different methods (``evidential_config.json``), and a
    member holding a Laplace posterior (``laplace_config.json``): an ensemble scores each member's
    adapter weights once, so the posterior would be silently ignored.
    """
    if peft is None:
        return None
    folder = Path(str(peft))
    if not folder.is_dir() or (folder / ADAPTER_CONFIG).exists():
        return None
    # A training run's checkpoint-N folders hold adapters too, but they are one run's steps, not members: an
    # interrupted run's folder is named as such by the adapter checks, never scored as an ensemble.
    members = sorted(
        (
            p
            for p in folder.iterdir()
            if p.is_dir() and (p / ADAPTER_CONFIG).is_file() and not _CHECKPOINT.fullmatch(p.name)
        ),
        key=lambda p: p.name,
    )
    if not members:
        return None
    unfinished = [p for p in sorted(folder.iterdir(), key=lambda p: p.name) if _unfinished_member(p)]
    if unfinished:
        raise EvidentialInputError(
            f"peft={peft}: {unfinished[0].name} holds no adapter (no {ADAPTER_CONFIG}), so the ensemble would be "
            "scored without it — a member that `lm-eval-evidential train --ensemble` has not finished; rerun that "
            f"command to finish it, or move {unfinished[0].name} out of the folder to score the {len(members)} others"
        )
    if len(members) == 1:
        raise EvidentialInputError(
            f"peft={peft} holds one adapter folder ({members[0].name}): an ensemble needs at least 2 members; pass "
            f"peft={members[0]} to score it alone"
        )
    posteriors = [m.name for m in members if (m / LAPLACE_CONFIG).is_file()]
    if posteriors:
        raise EvidentialInputError(
            f"peft={peft}: {posteriors[0]} holds a Laplace posterior ({LAPLACE_CONFIG}), which an ensemble would "
            "ignore (each member is scored at its adapter's weights, not its posterior's samples); pass "
            f"peft={folder / posteriors[0]} to score its weight samples, or put the adapter it was fitted on in the "
            "ensemble instead"
        )
    configs = {m.name: _adapter_config(m) for m in members}
    bases = {name: config.get("base_model_name_or_path") for name, config in configs.items()}
    methods = {m.name: (read_metadata(m) or {}).get("method", "edl (no evidential_config.json)") for m in members}
    lora = _lora_differences(configs)
    for what, values in (("base models", bases), ("methods", methods), ("LoRA configurations", lora)):
        if len(set(values.values())) > 1:
            listed = ", ".join(f"{name}: {value}" for name, value in values.items())
            raise EvidentialInputError(
                f"peft={peft}: its members were trained with different {what} ({listed}); an ensemble's members "
                "share one base model and one method — put members of one run in their own folder"
            )
    _check_distinct(peft, members)
    return members


def _check_distinct(peft, members: list[Path]) -> None:
    """Refuse two members with the same weights (a member folder copied under another name): the copies agree
    on every question, so the ensemble's disagreement (mutual information, variance) would be understated
    and its mixture weighted towards the copied member."""
    seen: dict[str, str] = {}
    for member in members:
        weights = adapter_weights_hash(member)
        if weights is None:
            continue  # no weights: refused by the adapter checks that follow, naming the member
        digest = weights.hexdigest()
        if digest in seen:
            raise EvidentialInputError(
                f"peft={peft}: {seen[digest]} and {member.name} hold the same weights (adapter_model files "
                f"sha256 {digest[:16]}), a copy of one member: the ensemble would understate its members' "
                "disagreement (mutual information, variance) and weigh that member twice; train each member with "
                "its own seed (lm-eval-evidential train --ensemble N) or remove the copy"
            )
        seen[digest] = member.name


def _lora_differences(configs: dict[str, dict]) -> dict[str, str]:
    """``{member: its values of the LoRA settings the members disagree on}`` (all the same string when they agree):
    a refusal names what differs, not two whole configurations."""
    keys = sorted({k for config in configs.values() for k in config} - _NOT_LORA)
    differ = [k for k in keys if len({json.dumps(c.get(k), sort_keys=True) for c in configs.values()}) > 1]
    return {name: ", ".join(f"{k}={config.get(k)!r}" for k in differ) for name, config in configs.items()}


def _unfinished_member(path: Path) -> bool:
    """Whether ``path`` is a member folder of ``train --ensemble`` (``member_N``, or a folder of its checkpoints)
    that holds no adapter yet."""
    if not path.is_dir() or (path / ADAPTER_CONFIG).is_file():
        return False
    return bool(_MEMBER.fullmatch(path.name)) or any(_CHECKPOINT.fullmatch(c.name) for c in path.iterdir())


def lora_dropout_rates(model) -> dict[str, float]:
    """``{module name: p}`` of the LoRA dropout modules of ``model``'s active adapter (p = 0 left out)."""
    rates = {}
    for name, module in model.named_modules():
        dropout = getattr(module, "lora_dropout", None)
        if not isinstance(dropout, nn.ModuleDict):
            continue
        for adapter, layer in dropout.items():
            if isinstance(layer, (nn.Dropout, SeededDropout)) and layer.p > 0:
                rates[f"{name}.lora_dropout.{adapter}"] = float(layer.p)
    return rates


class _Rows:
    """The batch being forwarded: each row's seed and real length (shared by every SeededDropout)."""

    seeds: Sequence[int] | None = None
    lengths: Sequence[int] | None = None


class SeededDropout(nn.Module):
    """Inverted dropout whose mask for each row comes from that row's own seed (see the module docstring).

    Identity unless a batch's rows are set (:func:`dropout_rows`); ``p`` is the adapter's rate.
    """

    def __init__(self, p: float, name: str, rows: _Rows):
        super().__init__()
        self.p = float(p)
        self.name = name
        self._rows = rows

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = self._rows
        if rows.seeds is None:
            return x
        if x.ndim != 3 or x.shape[0] != len(rows.seeds):
            raise RuntimeError(
                f"SeededDropout at {self.name}: input of shape {tuple(x.shape)} is not (rows, tokens, features)"
            )
        keep = torch.ones_like(x, dtype=torch.bool)
        t = x.shape[1]
        for r, (seed, length) in enumerate(zip(rows.seeds, rows.lengths)):
            n = min(t, length)  # the row's real tokens among the last t positions (the output layer sees 1)
            gen = torch.Generator(device=x.device).manual_seed(question_seed(seed, self.name))
            draw = torch.rand((length, x.shape[2]), generator=gen, device=x.device, dtype=torch.float32)
            keep[r, t - n :] = draw[length - n :] >= self.p
        return x * keep.to(x.dtype) / (1.0 - self.p)


@contextlib.contextmanager
def seeded_dropout(model) -> Iterator[_Rows]:
    """Swap ``model``'s LoRA dropout modules (p > 0) for :class:`SeededDropout` sharing one :class:`_Rows`.

    Refuses a model with no LoRA dropout > 0 (its passes would all be equal). The originals are
    put back on exit.
    """
    rows = _Rows()
    swapped = []
    for name, module in model.named_modules():
        dropout = getattr(module, "lora_dropout", None)
        if not isinstance(dropout, nn.ModuleDict):
            continue
        for adapter in list(dropout.keys()):
            layer = dropout[adapter]
            if isinstance(layer, nn.Dropout) and layer.p > 0:
                swapped.append((dropout, adapter, layer))
                dropout[adapter] = SeededDropout(layer.p, f"{name}.{adapter}", rows)
    if not swapped:
        raise EvidentialInputError(
            "mc_samples needs LoRA dropout > 0, but this adapter's lora_dropout is 0 (or it has no LoRA layers), so "
            "every pass would be the same; train with --lora-dropout 0.1 (lm-eval-evidential train) or drop "
            "mc_samples"
        )
    try:
        yield rows
    finally:
        for dropout, adapter, layer in swapped:
            dropout[adapter] = layer


@contextlib.contextmanager
def dropout_rows(rows: _Rows, keys: Sequence[str], lengths: Sequence[int], seed: int, sample: int) -> Iterator[None]:
    """Within the block, the batch's rows are ``keys`` (each prompt's content) with real ``lengths``;
    pass ``sample`` of the run ``seed`` (each row's seed: :func:`pass_seed`)."""
    rows.seeds = [pass_seed(seed, key, sample) for key in keys]
    rows.lengths = list(lengths)
    try:
        yield
    finally:
        rows.seeds = rows.lengths = None


def pass_seed(seed: int, key: str, sample: int) -> int:
    """The seed of pass ``sample`` for the prompt ``key`` (its content): one per (run seed, prompt, pass)."""
    return question_seed(seed, f"{key}\x00mc_sample={sample}")
