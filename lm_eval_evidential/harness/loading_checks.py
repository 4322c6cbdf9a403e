"""What ``--model evidential`` checks before and while its weights load, apart from scoring.

The paths and loading options of ``--model_args`` are checked here before any weights load (a path
that cannot exist, a file where a folder is meant, a ``dtype`` torch does not have, a context longer
than the model's), with one line naming the value and the fix
(:class:`~lm_eval_evidential.errors.EvidentialInputError`). The head's and the scoring's options are checked
in :mod:`~lm_eval_evidential.harness.model_args`, an adapter folder in
:mod:`~lm_eval_evidential.harness.adapter_checks`; :mod:`lm_eval_evidential.harness.scoring` keeps the scoring.
"""

from __future__ import annotations

from pathlib import Path

from lm_eval_evidential.errors import EvidentialInputError
from lm_eval_evidential.harness.adapter_checks import check_adapter_files, last_checkpoint
from lm_eval_evidential.harness.model_args import said
from lm_eval_evidential.params import Integral, Interval, Param


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
