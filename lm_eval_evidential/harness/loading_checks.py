"""What ``--model evidential`` checks before and while its weights load, apart from scoring.

Every ``--model_args`` value is checked here before any weights load (a path that cannot exist,
a head setting of the wrong type, an IB-EDL setting that disagrees with the adapter's own run
config, a context longer than the model's, an adapter for another base model), with one line
naming the value and the fix (:class:`~lm_eval_evidential.errors.EvidentialInputError`);
:mod:`lm_eval_evidential.harness.scoring` keeps the scoring.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import typing
from pathlib import Path

from lm_eval_evidential.errors import EvidentialInputError, InvalidValueError
from lm_eval_evidential.modeling.config import MAX_MEMBERS, HeadConfig
from lm_eval_evidential.modeling.encoding import PHANTOM_COUNT
from lm_eval_evidential.modeling.laplace import WEIGHT_SAMPLE_RANGE
from lm_eval_evidential.params import Integral, Interval, Param, declared_params

logger = logging.getLogger(__name__)


def local_folder(name_or_path, revision) -> Path | None:
    """The local folder a model or adapter was loaded from: the path itself, or its hub cache snapshot."""
    if not isinstance(name_or_path, (str, Path)) or not str(name_or_path):
        return None
    if Path(name_or_path).is_dir():
        return Path(name_or_path)
    from huggingface_hub import snapshot_download

    try:  # already downloaded by the load that just happened: never touches the network
        return Path(snapshot_download(repo_id=str(name_or_path), revision=revision, local_files_only=True))
    except (OSError, ValueError):
        return None


def _looks_local(value: str) -> bool:
    """Whether ``value`` can only mean a local path: not a valid hub id, or a path under an existing folder."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(value)
    except HFValidationError:
        return True
    parent = Path(value).expanduser().parent
    return parent != Path(".") and parent.is_dir()  # "ckpt/adapter" with ckpt/ here: a local path


#: ``--model_args max_length=`` (HFLM's): the longest prompt in tokens, never more than the model's context.
MAX_LENGTH = Param(None, Interval(Integral, 1), must="a positive whole number of tokens", example="max_length=2048")


def said(name: str, value, *, cli: bool = False) -> str:
    """A setting as the user typed it, for a refusal: ``pretrained=X`` in --model_args, ``--pretrained X`` as a
    command's option (``cli``: ``lm-eval-evidential laplace``)."""
    return f"--{name.replace('_', '-')} {value}" if cli else f"{name}={value}"


def check_load_args(pretrained, kwargs: dict, *, cli: bool = False) -> None:
    """Model_args that would fail only after the weights load, or obscurely: checked first, with the fix.

    A local ``pretrained``/``peft`` path that does not exist (the hub client would say ``Repo id
    must be in the form …``), a file as ``pretrained`` without ``gguf_file``, a ``gguf_file`` not
    inside ``pretrained``, a ``peft`` folder without ``adapter_config.json``, a ``dtype`` torch
    does not have, a ``max_length`` that is not a positive whole number. (A ``max_length`` above
    the model's context is refused as soon as its config is read: :func:`check_context`.)
    ``cli``: the settings are a command's options (:func:`said`), which take no ``gguf_file``.
    """
    import torch

    gguf_file, peft = kwargs.get("gguf_file"), kwargs.get("peft")
    for name, value in (("pretrained", pretrained), ("peft", peft)):
        if isinstance(value, str) and value and not Path(value).expanduser().exists() and _looks_local(value):
            raise EvidentialInputError(
                f"{said(name, value, cli=cli)}: no such file or folder (the path does not exist, and it is not a hub "
                "id 'namespace/name' either); pass an existing local folder or a hub id"
            )
    if isinstance(pretrained, str) and Path(pretrained).is_file() and not gguf_file:
        raise EvidentialInputError(
            f"{said('pretrained', pretrained, cli=cli)} is a file; pass the model's folder (config.json, weights, "
            "tokenizer)"
            + ("" if cli else ", or, for a GGUF file, its folder as pretrained= and the file name as gguf_file=")
        )
    if gguf_file and isinstance(pretrained, str) and Path(pretrained).is_dir():
        if not (Path(pretrained) / str(gguf_file)).is_file():
            raise EvidentialInputError(
                f"gguf_file={gguf_file} not found: transformers reads it from inside pretrained={pretrained} "
                f"(looked for {Path(pretrained) / str(gguf_file)}); pass the folder holding the file as pretrained= "
                "and the file name as gguf_file="
            )
    if peft and Path(str(peft)).exists():
        from lm_eval_evidential.modeling.members import ensemble_members

        members = ensemble_members(peft)  # a folder of member adapters (refused here when it cannot be one)
        if members:
            for member in members:
                check_adapter_files(member)
        elif not (Path(str(peft)) / "adapter_config.json").is_file():
            last = last_checkpoint(peft)
            hint = (
                "it holds a full model: pass it as pretrained= instead"
                if (Path(str(peft)) / "config.json").is_file()
                else f"a training run that did not finish: its last checkpoint loads as peft={last}, and "
                f"`lm-eval-evidential train … --output-dir {peft} --resume-from-checkpoint latest` finishes the run"
                if last is not None
                else "empty, or a training run that did not finish? Pass a folder written by PEFT's save_pretrained "
                "(adapter_config.json + adapter_model.safetensors) or by `lm-eval-evidential train`"
            )
            raise EvidentialInputError(f"peft={peft} is not a PEFT adapter folder (no adapter_config.json); {hint}")
        else:
            check_adapter_files(peft)
    dtype = kwargs.get("dtype")
    if isinstance(dtype, str) and dtype != "auto" and not isinstance(getattr(torch, dtype, None), torch.dtype):
        raise EvidentialInputError(f"dtype={dtype} is not a torch dtype; use float32, bfloat16, float16 or auto")
    if not MAX_LENGTH.allows(kwargs.get("max_length")):
        raise EvidentialInputError(MAX_LENGTH.message("max_length", kwargs["max_length"]))


def model_context(config) -> int:
    """The context the model's config declares, read the way lm_eval reads it (0: none declared)."""
    from lm_eval_evidential.lm_eval_compat import resolve_max_length

    return resolve_max_length(config, None, default=0)


def check_context(max_length, config) -> None:
    """Refuse a ``max_length`` above the context the model's config declares, read the way lm_eval
    reads it (``resolve_max_length``): transformers would only warn, then run positions past
    those the model was trained on."""
    context = model_context(config)
    if max_length is None or not context or max_length <= context:
        return
    raise EvidentialInputError(
        f"max_length={max_length} is above the model's context of {context} tokens (max_position_embeddings, "
        f"n_positions or n_ctx in its config.json); pass max_length={context} or less: a longer prompt runs past "
        "the positions the model was trained on"
    )


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


#: The words for each type a head setting may have, as a refusal of a --model_args string says them.
_TYPE_WORDS = {int: "an integer", float: "a number", str: "a name"}


def _head_arg_types() -> dict[str, type]:
    """Each field of :class:`HeadConfig` with the type its --model_args string is parsed as (its annotation)."""
    hints = typing.get_type_hints(HeadConfig)
    types = {f.name: hints[f.name] for f in dataclasses.fields(HeadConfig)}
    odd = {name: kind for name, kind in types.items() if kind not in _TYPE_WORDS}
    if odd:  # a new head field of another type needs its parsing here first
        raise TypeError(f"HeadConfig fields of a type --model_args cannot parse: {odd}")
    return types


#: --model_args of the head: the fields of :class:`HeadConfig`, each with the type it is parsed as.
HEAD_ARGS = _head_arg_types()


#: The scoring's --model_args besides the head's, every backend's: name -> (default, its declared Param).
#: ``EvidentialScoring.init_scoring`` sets each as an attribute of the model; a new one is one line here.
SCORING_OPTIONS = {
    "phantom_count": (
        PHANTOM_COUNT,
        Param(
            Interval(Integral, 0, 26),
            must="a whole number from 0 to 26",
            why=f"the labels after a question's last one whose logits the records keep; default {PHANTOM_COUNT}",
            example="phantom_count=4",
        ),
    ),
    "mc_samples": (  # MC dropout passes (harness/members.py)
        None,
        Param(
            None,
            Interval(Integral, 2, MAX_MEMBERS),
            must=f"an integer number of passes from 2 to {MAX_MEMBERS}",
            why="MC dropout, one forward pass of every question each; drop mc_samples for one deterministic pass",
            example="mc_samples=10",
        ),
    ),
    "laplace_samples": (  # Laplace-LoRA weight samples (harness/members.py)
        None,
        Param(
            None,
            WEIGHT_SAMPLE_RANGE,
            must=f"an integer number of weight samples from {WEIGHT_SAMPLE_RANGE.low} to {WEIGHT_SAMPLE_RANGE.high}",
            why="a Laplace posterior, one forward pass of every question each; drop laplace_samples for the number "
            "saved with it",
            example="laplace_samples=10",
        ),
    ),
}


def scoring_option(name: str, value):
    """The scoring's option ``name`` from --model_args, checked against its declared Param: a whole number
    given as text or a float (lm_eval's parser gives ``4``, ``2.5`` or ``'two'``) is taken as an int."""
    if not isinstance(value, (bool, type(None))):
        try:
            number = float(value)
            value = int(number) if number.is_integer() else value
        except (TypeError, ValueError):
            pass  # not a number: the Param names it
    param = SCORING_OPTIONS[name][1]
    if not param.allows(value):
        raise EvidentialInputError(param.message(name, value))
    return value


#: The --model_args every backend takes for the scoring (harness/scoring.EvidentialScoring.init_scoring).
SCORING_ARGS = (*HEAD_ARGS, *SCORING_OPTIONS)


def head_config(settings: dict) -> HeadConfig:
    """The head from ``settings`` (strings or numbers from --model_args or an adapter's metadata),
    each bad value named with an example; HeadConfig's own range checks as EvidentialInputError."""
    params = declared_params(HeadConfig)
    typed = {}
    for name, value in settings.items():
        cast = HEAD_ARGS[name]
        try:
            number = float(value) if cast is int and not isinstance(value, bool) else None
            if number is not None and not number.is_integer():
                raise ValueError(value)
            typed[name] = cast(number if number is not None else value)
        except (TypeError, ValueError, OverflowError):
            raise EvidentialInputError(
                f"{name}={value!r} in --model_args is not {_TYPE_WORDS[cast]}; e.g. {params[name].example}"
            ) from None
    try:
        return HeadConfig(**typed)
    except ValueError as exc:
        raise EvidentialInputError(f"--model_args: {exc}") from None


def unknown_arg_error(exc: TypeError) -> Exception:
    """A model_arg that nothing on the way to the model's constructor knows, named with the nearest known one."""
    import difflib
    import inspect
    import re

    from lm_eval.models.huggingface import HFLM

    found = re.search(r"unexpected keyword argument '([^']+)'", str(exc))
    if not found:
        return exc
    known = (set(inspect.signature(HFLM.__init__).parameters) | set(SCORING_ARGS) | {"prefix_cache", "threads"}) - {
        "self",
        "kwargs",
    }
    near = difflib.get_close_matches(found[1], sorted(known), n=1)
    hint = f"did you mean {near[0]}=? Check" if near else "check"
    return EvidentialInputError(
        f"--model_args: unknown argument {found[1]!r} (passed on to the model's from_pretrained, which does not "
        "take it); "
        f"{hint} its spelling against the arguments of --model evidential and --model hf"
    )


#: The largest YAML file beside an adapter read as a possible IB-EDL run config (theirs are a few KiB).
REFERENCE_CONFIG_MAX_BYTES = 1 << 20


def reference_head_settings(adapter_dir) -> dict | None:
    """Head settings of a checkpoint written by the IB-EDL reference code (Li et al. 2025), else None.

    Its ``tools/evidential_ft.py`` (``baseline_ft.py`` for the softmax baseline) trains with
    transformers' Trainer in a work dir: the adapters are ordinary PEFT folders
    ``<work_dir>/checkpoint-N``, and the run's config is dumped beside them as
    ``<config name>_<timestamp>.yaml``. That config names the method: a ``vib`` section is
    IB-EDL (``num_noises``, ``sigma_mult``), ``edl_loss_cfg`` without it standard EDL, neither
    the softmax (MAP) baseline. Several dumped configs that disagree are an error.
    """
    import yaml

    if adapter_dir is None or not (Path(str(adapter_dir)) / "adapter_config.json").is_file():
        return None
    found: dict[str, dict] = {}
    from lm_eval_evidential.errors import InputFileError
    from lm_eval_evidential.files import read_regular_file

    for path in sorted(Path(str(adapter_dir)).resolve().parent.glob("*.yaml")):
        try:  # only regular files, and no more than a run config can be: a FIFO or a huge file never blocks
            cfg = yaml.safe_load(read_regular_file(path, what="YAML file", max_bytes=REFERENCE_CONFIG_MAX_BYTES))
        except InputFileError as exc:
            logger.warning("skipped %s while looking for the IB-EDL run config beside the adapter: %s", path.name, exc)
            continue
        except (OSError, UnicodeDecodeError, RecursionError, yaml.YAMLError):
            continue
        if not (isinstance(cfg, dict) and isinstance(cfg.get("model"), dict) and "train_cfg" in cfg):
            continue  # not a reference run config
        vib = cfg.get("vib")
        if isinstance(vib, dict):  # a setting the run config leaves out: the head's own default
            settings = {
                "method": "ib_edl",
                "num_noises": int(vib.get("num_noises", HeadConfig.num_noises)),
                "sigma_mult": float(vib.get("sigma_mult", HeadConfig.sigma_mult) or 0.0),
            }
        else:
            settings = {"method": "edl" if "edl_loss_cfg" in cfg else "softmax"}
        found[path.name] = settings
    if not found:
        return None
    if len({tuple(sorted(v.items())) for v in found.values()}) > 1:
        raise InvalidValueError(
            f"peft={adapter_dir}: the IB-EDL run configs beside it disagree ({found}); pass method= (and "
            "num_noises=, sigma_mult=) in --model_args"
        )
    return next(iter(found.values()))


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


def gguf_error(gguf_file: str, exc: Exception) -> Exception:
    if "mistral" not in str(exc):
        return exc
    return EvidentialInputError(
        f"gguf_file={gguf_file}: transformers reads a llama-architecture GGUF whose general.name mentions Mistral "
        f"as model_type 'mistral' and then cannot map its tensors ({exc.__class__.__name__}: "
        f"{str(exc).splitlines()[0][:80]}…). "
        "Mistral's layers are Llama's: rename the file's model with the gguf package's tool, "
        f"`gguf-new-metadata --general-name Llama {gguf_file} llama-named.gguf`, and pass gguf_file=llama-named.gguf"
    )
