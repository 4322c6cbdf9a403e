"""Which members score each question: a LoRA ensemble (``peft=DIR`` of member folders), MC dropout
(``mc_samples=N``) or the weight samples of a Laplace-LoRA posterior saved with the adapter
(``peft=DIR`` holding ``laplace_config.json``; ``laplace_samples=N`` overrides the number saved),
checked from the model_args before any weights load.

The scoring (:mod:`lm_eval_evidential.harness.scoring`) forwards the questions' distinct prompts once
per member and files every member's answer logits (``member_logits`` in the records, in the order
here: ensemble members in the sorted order of their folder names, dropout passes 0..N-1, Laplace
samples 0..N-1 in the order laplace-torch draws them).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from lm_eval_evidential.errors import EvidentialInputError
from lm_eval_evidential.harness.model_args import scoring_option
from lm_eval_evidential.modeling.config import METADATA_FILE, read_metadata
from lm_eval_evidential.modeling.laplace import LAPLACE_CONFIG, LAPLACE_POSTERIOR, LaplacePosterior, has_posterior
from lm_eval_evidential.modeling.members import ADAPTER_CONFIG, ensemble_members


@dataclass(frozen=True)
class Members:
    """The members of a run: ``source`` "ensemble" (``paths``), "mc_dropout" (``samples`` passes) or "laplace"
    (``samples`` weight samples of the posterior in ``paths[0]``, drawn with ``seed``)."""

    source: str
    paths: tuple[Path, ...] = ()
    samples: int = 0
    seed: int = 0
    posterior: LaplacePosterior | None = field(default=None, compare=False, repr=False)  # "laplace": read, checked

    @property
    def count(self) -> int:
        return len(self.paths) if self.source == "ensemble" else self.samples

    @property
    def names(self) -> list[str]:
        """The adapter names the members are loaded under (their folder names)."""
        return [p.name for p in self.paths]

    def describe(self, index: int) -> str:
        """Member ``index`` in words, for a message."""
        if self.source == "ensemble":
            return f"ensemble member {self.paths[index].name}"
        if self.source == "laplace":
            return f"Laplace weight sample {index} of {self.samples} (seed {self.seed}, {self.paths[0]})"
        return f"MC-dropout pass {index} of {self.samples}"

    def meta(self, seed: int) -> dict:
        """What the records' metadata says of the members (a producer key: runs of other members never mix)."""
        if self.source == "ensemble":
            return {"source": "ensemble", "names": self.names}
        if self.source == "laplace":
            config = self.posterior.config
            digest = hashlib.sha256((self.paths[0] / LAPLACE_POSTERIOR).read_bytes()).hexdigest()[:16]
            return {
                "source": "laplace",
                "samples": self.samples,
                "seed": self.seed,
                "structure": config["structure"],
                "prior_precision": config["prior_precision"],
                "posterior_sha256": digest,
            }
        return {"source": "mc_dropout", "samples": self.samples, "seed": seed}


def members_from_args(mc_samples, peft, method: str, laplace_samples=None) -> Members | None:
    """The run's members from ``mc_samples``, ``laplace_samples`` and ``peft`` (None: one prediction per
    question), or a refusal."""
    samples = scoring_option("mc_samples", mc_samples)
    draws = scoring_option("laplace_samples", laplace_samples)
    if has_posterior(peft):
        return _laplace_members(peft, method, samples, draws)
    if draws is not None:
        raise EvidentialInputError(
            f"laplace_samples={draws}: peft={peft} holds no Laplace posterior (laplace_config.json); fit one on this "
            "adapter with lm-eval-evidential laplace and pass its --output-dir as peft, or drop laplace_samples"
        )
    paths = ensemble_members(peft)
    if samples is not None and paths is not None:
        raise EvidentialInputError(
            f"mc_samples={samples} with the ensemble peft={peft}: score either an ensemble or MC dropout of one "
            "adapter (peft=DIR/member_0,mc_samples=N)"
        )
    if samples is not None and not peft:
        raise EvidentialInputError(
            f"mc_samples={samples} needs a PEFT adapter whose LoRA dropout is > 0 (peft=...); the base model alone "
            "has no LoRA dropout to sample"
        )
    if samples is not None and Path(str(peft)).is_dir():
        rate = _dropout_rate(Path(str(peft)))
        if rate is not None and not 0 < rate < 1:
            raise EvidentialInputError(
                f"mc_samples={samples} needs LoRA dropout between 0 and 1, but peft={peft} has lora_dropout={rate}, "
                + ("so every pass would be the same" if rate <= 0 else "which drops every input (each pass is NaN)")
                + "; train with --lora-dropout 0.1 (lm-eval-evidential train) or drop mc_samples"
            )
    found = f"mc_samples={samples}" if samples else None if paths is None else f"the ensemble peft={peft}"
    if found and method == "ib_edl":
        raise EvidentialInputError(
            f"{found} with method=ib_edl: IB-EDL's alpha depends on its own noise draws and sigma, which the records "
            "of several members do not keep, so members of IB-EDL adapters have no predictive rule here; score them "
            "one by one (peft=DIR/member_0) or use edl / softmax members"
        )
    if paths is not None:
        return Members("ensemble", paths=tuple(paths))
    return None if samples is None else Members("mc_dropout", samples=samples)


def _laplace_members(peft, method: str, mc_samples: int | None, draws: int | None) -> Members:
    """The weight samples of the Laplace posterior saved in ``peft`` (read and checked here, before the model's
    weights load), or a refusal."""
    from lm_eval_evidential.modeling.laplace import load_posterior

    folder = Path(str(peft))
    if mc_samples is not None:
        raise EvidentialInputError(
            f"mc_samples={mc_samples} with peft={peft}, which holds a Laplace posterior: score either its weight "
            "samples (peft alone) or MC dropout of the MAP adapter it was fitted on"
        )
    if method != "softmax":
        told = (read_metadata(folder) or {}).get("method")
        raise EvidentialInputError(
            f"peft={peft} holds a Laplace posterior of the softmax likelihood (Yang et al. 2024), but method={method}; "
            + (
                "drop method= (the adapter's is softmax) — its weight samples are scored with the softmax head"
                if told == "softmax"
                else f"its folder does not say method=softmax ({'no ' + METADATA_FILE if told is None else told}), "
                "so pass method=softmax, or fit the posterior again (lm-eval-evidential laplace copies the adapter's "
                f"{METADATA_FILE})"
            )
        )
    posterior = load_posterior(folder)
    samples = draws or posterior.samples
    _check_sample_memory(samples, posterior.n_params, "laplace_samples" if draws else f"{LAPLACE_CONFIG}'s samples")
    return Members("laplace", paths=(folder,), samples=samples, seed=posterior.seed, posterior=posterior)


def _check_sample_memory(samples: int, n_params: int, name: str) -> None:
    """Refuse weight samples (drawn at once, float32, as laplace-torch draws them) that do not fit in the memory
    available now."""
    import psutil

    need, free = 4 * samples * n_params, psutil.virtual_memory().available
    if need > free:
        raise EvidentialInputError(
            f"{name}={samples}: the weight samples take {need / 2**30:.1f} GiB ({samples} x {n_params} LoRA weights, "
            f"float32), more than the {free / 2**30:.1f} GiB available; pass a smaller laplace_samples=N"
        )


def _dropout_rate(folder: Path) -> float | None:
    """The ``lora_dropout`` of an adapter's config (None where it does not say)."""
    try:
        rate = json.loads((folder / ADAPTER_CONFIG).read_text(encoding="utf-8")).get("lora_dropout")
    except (OSError, ValueError, AttributeError):
        return None
    return float(rate) if isinstance(rate, (int, float)) and not isinstance(rate, bool) else None


def ensemble_sha256(paths, adapter_sha256) -> str | None:
    """One content hash of an ensemble: each member's name and its adapter's hash, in order."""
    digest = hashlib.sha256()
    for path in paths:
        member = adapter_sha256(path)
        if member is None:
            return None
        digest.update(f"{path.name}\0{member}\0".encode())
    return digest.hexdigest()[:16]
