"""Checks of a LoRA adapter folder before its weights load, each naming the file and the fix.

A damaged ``adapter_config.json`` or a safetensors file cut short (:func:`check_adapter_files`), an
adapter for another base model (:func:`check_adapter_fits`), a training run's last checkpoint
(:func:`last_checkpoint`), and what PEFT does with a base whose tied embedding it wrapped.
"""

from __future__ import annotations

import os
from pathlib import Path

from lm_eval_evidential.errors import EvidentialInputError
from lm_eval_evidential.harness.model_args import said

_DAMAGED_ADAPTER_FIX = (
    "the adapter is damaged (a copy cut short or an edited file?): copy it again, or save it again with PEFT's "
    "save_pretrained or `lm-eval-evidential train`"
)


def safetensors_damage(path) -> str | None:
    """What is wrong with a safetensors file's layout, or None when it is whole.

    The format is an 8-byte little-endian header length, that many bytes of JSON naming each
    tensor's byte range, then the data: a file cut short misses bytes its header promises.
    Only the header is read (:func:`~lm_eval_evidential.files.open_regular_file`).
    """
    import json
    import struct

    from lm_eval_evidential.files import open_regular_file

    with open_regular_file(path, what="adapter weights file") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size < 8:
            return f"it is {size} bytes, shorter than a safetensors header"
        (length,) = struct.unpack("<Q", fh.read(8))
        if 8 + length > size:
            return f"its header says {length:,} bytes of header follow, the file has {size - 8:,}"
        try:
            header = json.loads(fh.read(length))
        except (ValueError, RecursionError):
            return "its header is not valid JSON"
    try:
        end = max((int(t["data_offsets"][1]) for n, t in header.items() if n != "__metadata__"), default=0)
    except (AttributeError, KeyError, TypeError, ValueError, IndexError):
        return "its header does not give each tensor's byte range"
    if 8 + length + end > size:
        return f"its tensors need {8 + length + end:,} bytes, the file has {size:,}"
    return None


def last_checkpoint(folder) -> Path | None:
    """The ``checkpoint-N`` with the largest N inside ``folder`` that holds an adapter (a Trainer run's
    checkpoint, loadable as ``peft=``), None if none."""
    found = []
    for child in Path(str(folder)).glob("checkpoint-*"):
        step = child.name.removeprefix("checkpoint-")
        if step.isdigit() and (child / "adapter_config.json").is_file():
            found.append((int(step), child))
    return max(found)[1] if found else None


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


#: The LoRA settings of an adapter_config.json that PEFT uses as numbers: (key, check, what it must be).
_LORA_NUMBERS = (
    ("r", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "a whole number >= 1"),
    ("lora_alpha", lambda v: _number(v), "a number"),
    ("lora_dropout", lambda v: _number(v) and 0 <= v <= 1, "a number from 0 to 1"),
)


def check_adapter_files(peft) -> None:
    """A local adapter's ``adapter_config.json`` is a JSON object and each ``adapter_model*.safetensors``
    holds every byte its header promises: checked before any weights load, naming the damaged file
    (PEFT would fail later with a bare ``JSONDecodeError`` or ``SafetensorError``)."""
    import json

    from lm_eval_evidential.errors import InputFileError
    from lm_eval_evidential.files import read_regular_file

    folder = Path(str(peft))
    config = folder / "adapter_config.json"
    try:
        data = json.loads(read_regular_file(config, what="adapter config", max_bytes=16 << 20))
    except InputFileError as exc:
        raise EvidentialInputError(f"peft={peft}: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise EvidentialInputError(f"{config} is not valid JSON ({exc}); {_DAMAGED_ADAPTER_FIX}") from None
    if not isinstance(data, dict):
        raise EvidentialInputError(f"{config} is not a JSON object; {_DAMAGED_ADAPTER_FIX}")
    for key, ok, must in _LORA_NUMBERS:  # PEFT compares them as numbers deep in its layers (a bare TypeError)
        if key in data and not ok(data[key]):
            raise EvidentialInputError(f"{config}: {key}={data[key]!r} is not {must}; {_DAMAGED_ADAPTER_FIX}")
    if not any(folder.glob("adapter_model*.safetensors")) and not (folder / "adapter_model.bin").is_file():
        raise EvidentialInputError(
            f"peft={peft} holds adapter_config.json but no weights (adapter_model.safetensors or adapter_model.bin); "
            f"{_DAMAGED_ADAPTER_FIX}"
        )
    for weights in sorted(folder.glob("adapter_model*.safetensors")):
        try:
            problem = safetensors_damage(weights)
        except InputFileError as exc:
            raise EvidentialInputError(f"peft={peft}: {exc}") from None
        if problem:
            raise EvidentialInputError(f"{weights} is not a whole safetensors file: {problem}; {_DAMAGED_ADAPTER_FIX}")


ADAPTER_FIT_HINT = (
    "pass the base model the adapter was trained on (see base_model_name_or_path in its adapter_config.json)"
)


def check_adapter_fits(peft, config, pretrained, *, cli: bool = False) -> None:
    """Refuse, before the weights load, an adapter that does not fit the base model (:func:`adapter_misfit`)."""
    misfit = adapter_misfit(peft, config)
    if misfit:
        raise EvidentialInputError(
            f"the adapter {said('peft', peft, cli=cli)} does not fit the base model "
            f"{said('pretrained', pretrained, cli=cli)}: {misfit}; {ADAPTER_FIT_HINT}"
        )


def adapter_misfit(peft, config) -> str | None:
    """How the LoRA adapter folder ``peft`` does not fit the base model of ``config``, or None.

    The base is built on the meta device from ``config`` (no memory, no weights) and each saved
    ``lora_A`` is compared with its layer's input features (never the output side: an adapter that
    added tokens resizes the output layer before it loads). Only a definite mismatch is reported;
    anything this check cannot read is left to PEFT's own load.
    """
    files = sorted(Path(str(peft)).glob("adapter_model*.safetensors")) if peft and Path(str(peft)).is_dir() else []
    if not files:
        return None
    try:
        import torch
        from safetensors import safe_open
        from transformers import AutoModelForCausalLM

        with torch.device("meta"):
            modules = dict(AutoModelForCausalLM.from_config(config).named_modules())
        shapes = {}
        for file in files:
            with safe_open(str(file), "pt") as fh:
                shapes.update({key: fh.get_slice(key).get_shape() for key in fh.keys()})
    except Exception:  # noqa: BLE001 - a check that cannot run must never block a load PEFT may accept
        return None
    for key, shape in shapes.items():
        name = key.split(".lora_A.")[0].removeprefix("base_model.model.") if ".lora_A." in key else None
        want = getattr(modules.get(name), "in_features", None)
        if isinstance(want, int) and len(shape) == 2 and shape[1] != want:
            return f"its {name} has in_features={shape[1]}, the model's has {want}"
    return None


def saved_embedding_rows(adapter) -> int | None:
    """Rows of the full embedding / output layer an adapter saved (a LoRA that added tokens), else None."""
    from safetensors import safe_open

    if not adapter or not Path(str(adapter)).is_dir():
        return None
    for file in sorted(Path(str(adapter)).glob("adapter_model*.safetensors")):
        with safe_open(str(file), "pt") as fh:
            for key in fh.keys():
                name = key.removesuffix(".weight").removesuffix(".base_layer")
                if name.endswith(("embed_tokens", "lm_head")) and "lora_" not in key:
                    return int(fh.get_slice(key).get_shape()[0])
    return None


def wraps_tied_layer(model) -> bool:
    base = model.get_base_model()
    tied = getattr(base, "all_tied_weights_keys", None) or getattr(base, "_tied_weights_keys", None)
    if not tied or not getattr(base.config.get_text_config(), "tie_word_embeddings", False):
        return False
    from peft.tuners.tuners_utils import BaseTunerLayer
    from peft.utils import ModulesToSaveWrapper

    wrapped = (BaseTunerLayer, ModulesToSaveWrapper)
    return any(isinstance(m, wrapped) for m in (base.get_input_embeddings(), base.get_output_embeddings()))


def already_tied(*args, **kwargs) -> None:
    """PeftModel.tie_weights for a base whose tied layer PEFT wrapped (see EvidentialLM._create_model)."""
