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
from dataclasses import dataclass, fields
from pathlib import Path

from lm_eval_evidential.errors import InputFileError, InvalidValueError
from lm_eval_evidential.files import atomic_write_text, read_regular_file
from lm_eval_evidential.metrics.dirichlet import PRIOR_WEIGHT
from lm_eval_evidential.params import Integral, Interval, Options, Param, Real, check_fields, param_field
from lm_eval_evidential.records.schema import RECORD_METHODS

METADATA_FILE = "evidential_config.json"
#: The most members (MC-dropout passes, Laplace weight samples) a run scores (``mc_samples``, ``laplace_samples``,
#: ``laplace --samples``): each is a forward pass of every question and the records keep every member's logits
#: (questions x members x K); the papers use 10 to 100.
MAX_MEMBERS = 1000
METADATA_FORMAT = 1
METHODS = RECORD_METHODS  # one list: the methods records may name are the methods there are


def _head_field(default, help: str, param: Param, *, stored: bool = True):
    """A head setting: its help, its constraint (:class:`~lm_eval_evidential.params.Param`), and whether the
    adapter's ``evidential_config.json`` stores it (then ``--model evidential`` reads it back as a default)."""
    return param_field(default, help=help, param=param, stored=stored)


@dataclass(frozen=True)
class HeadConfig:
    """How logits become evidence. Defaults are the paper's (Table 7; IB-EDL sigma_mult 0).

    The one declaration of the head's settings: each field is a ``--model_args`` argument of every
    backend (``harness/model_args.HEAD_ARGS`` reads the fields), its help is what the CLI's
    help says of it, its ``param`` is the constraint checked on construction, and the fields marked
    ``stored`` are saved with a trained adapter (:data:`HEAD_KEYS`).
    """

    method: str = _head_field(
        "edl",
        "edl (evidence softplus(z), alpha = evidence + prior_weight), ib_edl (IB-EDL: Gaussian draws on the "
        "pre-evidence, sigma) or softmax (the MAP baseline, no vacuity)",
        Param(Options(METHODS), example="method=ib_edl"),
    )
    prior_weight: float = _head_field(1.0, "the Dirichlet prior weight λ", PRIOR_WEIGHT)
    num_noises: int = _head_field(
        20,
        "IB-EDL: noise draws per question",
        Param(
            Interval(Integral, 1), why="IB-EDL's noise draws per question; the paper uses 20", example="num_noises=20"
        ),
    )
    sigma_mult: float = _head_field(
        0.0,
        "IB-EDL: alpha = max(alpha - sigma_mult·sigma, λ)",
        Param(Interval(Real, 0), why="IB-EDL's ς; the paper uses 0", example="sigma_mult=0"),
    )
    seed: int = _head_field(
        0,
        "IB-EDL's noise seed (keyed per question: results do not depend on batching)",
        Param(Interval(Integral), example="seed=0"),
        stored=False,
    )

    def __post_init__(self):
        check_fields(self)

    @property
    def needs_sigma(self) -> bool:
        return self.method == "ib_edl"


#: Settings of the evidence head that an adapter's metadata supplies to --model evidential as defaults.
HEAD_KEYS = tuple(f.name for f in fields(HeadConfig) if f.metadata["stored"])


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
    ``harness.model_args.reference_head_settings``).
    """
    meta = read_metadata(adapter_dir)
    if meta is None:
        return {}
    return {k: meta[k] for k in HEAD_KEYS if meta.get(k) is not None}
