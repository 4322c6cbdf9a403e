"""The evidential head's settings and ``evidential_config.json``: the one source of truth.

:class:`HeadConfig` says how answer-token logits become evidence. ``lm-eval-evidential train``
saves the head settings it trained with next to the PEFT adapter (``evidential_config.json``),
the way peft saves ``adapter_config.json``; ``--model evidential`` reads them back as defaults
(explicit model_args win). Checkpoints of the IB-EDL reference code (Li et al. 2025,
sandylaker/ib-edl) carry no such file; their run config, dumped in the folder above them,
supplies the same settings.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from lm_eval_evidential.errors import InputFileError, InvalidValueError
from lm_eval_evidential.files import atomic_write_text, read_regular_file
from lm_eval_evidential.records.schema import RECORD_METHODS

METADATA_FILE = "evidential_config.json"
METADATA_FORMAT = 1
# Settings of the evidence head that an adapter's metadata supplies to --model evidential as defaults.
HEAD_KEYS = ("method", "prior_weight", "num_noises", "sigma_mult")
METHODS = RECORD_METHODS  # one list: the methods records may name are the methods there are


@dataclass(frozen=True)
class HeadConfig:
    """How logits become evidence. Defaults are the paper's (Table 7; IB-EDL sigma_mult 0)."""

    method: str = "edl"
    prior_weight: float = 1.0
    num_noises: int = 20
    sigma_mult: float = 0.0
    seed: int = 0

    def __post_init__(self):
        if self.method not in METHODS:
            raise InvalidValueError(
                f"unknown method={self.method!r}; choose one of {', '.join(METHODS)} "
                "(e.g. --model_args ...,method=ib_edl)"
            )
        if not (math.isfinite(self.prior_weight) and self.prior_weight > 0):
            raise InvalidValueError(
                f"prior_weight={self.prior_weight!r} must be a finite number > 0 "
                "(the Dirichlet prior λ in alpha = evidence + λ; 1 is standard EDL)"
            )
        if int(self.num_noises) < 1:
            raise InvalidValueError(
                f"num_noises={self.num_noises!r} must be an integer >= 1 (IB-EDL's noise draws per question; the "
                "paper uses 20)"
            )
        if not (math.isfinite(self.sigma_mult) and self.sigma_mult >= 0):
            raise InvalidValueError(
                f"sigma_mult={self.sigma_mult!r} must be a finite number >= 0 (IB-EDL's ς; the paper uses 0)"
            )

    @property
    def needs_sigma(self) -> bool:
        return self.method == "ib_edl"


def write_metadata(path: Path, payload: dict) -> None:
    """Write an ``evidential_config.json`` atomically (sorted keys, trailing newline)."""
    atomic_write_text(path, json.dumps(payload, indent=2, sort_keys=True) + "\n")


def read_metadata(adapter_dir) -> dict | None:
    """The ``evidential_config.json`` of a local adapter folder, or None if it has none."""
    if adapter_dir is None:
        return None
    path = Path(str(adapter_dir)) / METADATA_FILE
    if not path.exists() and not path.is_symlink():
        return None
    try:  # a regular file of a few KiB: a FIFO, a huge or a deeply nested file is refused, never read on
        meta = json.loads(read_regular_file(path, what="adapter metadata", max_bytes=1 << 20))
    except InputFileError:
        raise
    except (OSError, ValueError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise InvalidValueError(f"cannot read {path}: {exc}; delete it or re-run `lm-eval-evidential train`") from exc
    except RecursionError:
        raise InvalidValueError(
            f"cannot read {path}: its JSON is nested too deeply; this package never writes such a file — delete it "
            "or re-run `lm-eval-evidential train`"
        ) from None
    if not isinstance(meta, dict) or meta.get("method") not in METHODS:
        raise InvalidValueError(
            f"{path} has no valid 'method' (one of {', '.join(METHODS)}); was it written by this package?"
        )
    return meta


def head_defaults(adapter_dir) -> dict:
    """Head settings (method, prior_weight, num_noises, sigma_mult) stored with an adapter; {} if none.

    From its ``evidential_config.json`` (for the IB-EDL reference code's checkpoints, see
    ``harness.loading_checks.reference_head_settings``).
    """
    meta = read_metadata(adapter_dir)
    if meta is None:
        return {}
    return {k: meta[k] for k in HEAD_KEYS if meta.get(k) is not None}
