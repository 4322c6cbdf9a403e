"""How ``--model evidential-vllm`` runs a PEFT adapter: served as LoRA by vLLM, or merged once and cached.

vLLM applies LoRA to the linear layers inside the decoder blocks. An adapter it cannot serve
exactly as PEFT computes it — LoRA on ``lm_head`` or the embeddings (the paper's adapters,
McNamara 2026 Table 7), ``bias="lora_only"``/``"all"``, ``modules_to_save``, DoRA, resized
embeddings, a rank above vLLM's largest — is merged into the base weights instead
(``PeftModel.merge_and_unload``), once, and the merged checkpoint is cached under the base's
and the adapter's content hashes and the dtype, so a second run (or a second node with the same
files) reuses it. The records say which happened (``adapter_mode``: ``lora`` or ``merged``).

Nothing here imports vLLM: the decision reads the adapter's files, and the merge is
transformers + PEFT, so both are tested without vLLM installed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from lm_eval_evidential.errors import InvalidValueError

#: vLLM's ``max_lora_rank`` choices (vllm/config/lora.py ``MaxLoRARanks``, vLLM 0.32).
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
# Module-name parts of the decoder blocks' linear layers, where vLLM applies LoRA.
_BLOCK_PARTS = (".layers.", ".h.", ".blocks.", ".decoder.layers.")


def cache_root() -> Path:
    """Where merged checkpoints live: ``$LM_EVAL_EVIDENTIAL_CACHE/merged``, else under ``$XDG_CACHE_HOME``
    or ``~/.cache`` (``lm-eval-evidential/merged``); never inside the repository."""
    explicit = os.environ.get("LM_EVAL_EVIDENTIAL_CACHE")
    if explicit:
        return Path(explicit).expanduser() / "merged"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "lm-eval-evidential" / "merged"


def local_adapter(peft, revision: str | None = None) -> Path:
    """The local folder of ``peft`` (a path, or a hub id already in the hub cache); refused otherwise.

    vLLM's LoRA loader and the merge both read the adapter's files, so it must be on disk.
    """
    from lm_eval_evidential.errors import EvidentialInputError
    from lm_eval_evidential.harness.loading_checks import local_folder

    folder = local_folder(peft, revision or "main")
    if folder is None or not (folder / "adapter_config.json").is_file():
        raise EvidentialInputError(
            f"peft={peft}: --model evidential-vllm needs the adapter's files on disk (vLLM's LoRA loader and the "
            f"merge read them); download it first (huggingface-cli download {peft} --local-dir <folder>) and "
            "pass the folder as peft="
        )
    return folder


def _lora_modules(adapter: Path) -> set[str]:
    """The module names an adapter's saved LoRA matrices belong to (``…q_proj``), and any other saved tensor."""
    from safetensors import safe_open

    names = set()
    for file in sorted(adapter.glob("adapter_model*.safetensors")):
        with safe_open(str(file), "pt") as fh:
            for key in fh.keys():
                name = key.removeprefix("base_model.model.")
                for marker in (".lora_A.", ".lora_B.", ".lora_embedding_A", ".lora_embedding_B", ".lora_magnitude"):
                    name = name.split(marker)[0]
                names.add(name)
    return names


def why_merged(adapter) -> str | None:
    """Why vLLM cannot serve ``adapter`` (a local PEFT folder) as LoRA exactly as PEFT computes it; None if it can.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 8, "bias": "lora_only"}))
    >>> why_merged(folder)
    'bias="lora_only" (vLLM serves LoRA without bias terms)'
    """
    folder = Path(str(adapter))
    config = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
    if str(config.get("peft_type", "LORA")).upper() != "LORA":
        return f"peft_type={config.get('peft_type')} (vLLM serves LoRA adapters only)"
    if config.get("bias", "none") != "none":
        return f'bias="{config["bias"]}" (vLLM serves LoRA without bias terms)'
    if config.get("lora_bias"):
        return "lora_bias=true (vLLM serves LoRA without bias terms)"
    if config.get("modules_to_save"):
        return f"modules_to_save={config['modules_to_save']} (vLLM serves LoRA matrices only)"
    for flag in ("use_dora", "use_qalora", "layer_replication", "alora_invocation_tokens"):
        if config.get(flag):
            return f"{flag}={config[flag]!r} (not implemented by vLLM's LoRA)"
    init = config.get("init_lora_weights", True)
    if isinstance(init, str) and init.lower() not in ("gaussian", "eva", "orthogonal", "mica", "lora_ga"):
        return f"init_lora_weights={init!r} (it changes the base weights)"
    rank = max([int(config.get("r", 8)), *map(int, (config.get("rank_pattern") or {}).values())])
    if rank > VLLM_LORA_RANKS[-1]:
        return f"rank {rank} (vLLM's largest max_lora_rank is {VLLM_LORA_RANKS[-1]})"
    outside = sorted(m for m in _lora_modules(folder) if not any(part in f".{m}" for part in _BLOCK_PARTS))
    if outside:
        return f"LoRA on {', '.join(outside)} (vLLM applies LoRA inside the decoder blocks only)"
    return None


def lora_rank(adapter) -> int:
    """The smallest vLLM ``max_lora_rank`` that holds ``adapter``'s rank (``r`` and its ``rank_pattern``).

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "adapter_config.json").write_text(json.dumps({"r": 12}))
    >>> lora_rank(folder)
    16
    """
    config = json.loads((Path(str(adapter)) / "adapter_config.json").read_text(encoding="utf-8"))
    rank = max([int(config.get("r", 8)), *map(int, (config.get("rank_pattern") or {}).values())])
    return next(r for r in VLLM_LORA_RANKS if r >= rank)


def merged_checkpoint(pretrained, adapter, *, dtype: str = "auto", revision: str | None = None, cache=None) -> Path:
    """A checkpoint folder of ``pretrained`` with ``adapter`` merged into its weights, built once and cached.

    The merge is PEFT's ``merge_and_unload`` in float32, then the weights are cast once to
    ``dtype`` (``auto``: the base's own). LoRA on a tied output layer changes the output layer
    only — as in PEFT, where the input embeddings stay the base's — so the merged checkpoint
    unties them (``tie_word_embeddings=false``, both matrices saved). An adapter that saved
    resized embeddings (added tokens) resizes the base first, as ``--model evidential`` does.
    The folder is ``<cache>/<model sha256>-<adapter sha256>-<dtype>`` (content hashes of
    :mod:`lm_eval_evidential.records.provenance`), written atomically: a merged folder is
    either complete or absent.
    """
    import torch
    from peft import PeftModel
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from lm_eval_evidential.files import atomic_folder
    from lm_eval_evidential.harness.adapter_checks import saved_embedding_rows
    from lm_eval_evidential.harness.loading_checks import local_folder
    from lm_eval_evidential.modeling.quiet import peft_wrapping
    from lm_eval_evidential.records.provenance import adapter_sha256, model_sha256

    base_hash = model_sha256(local_folder(pretrained, revision or "main"))
    adapter_hash = adapter_sha256(Path(str(adapter)))
    if dtype in (None, "auto"):
        declared = getattr(AutoConfig.from_pretrained(pretrained, revision=revision), "dtype", None)
        dtype = str(declared or "float32").removeprefix("torch.")
    if base_hash is None or adapter_hash is None:
        raise InvalidValueError(f"merging needs a local base and adapter (pretrained={pretrained}, peft={adapter})")
    target = Path(cache or cache_root()) / f"{base_hash[:16]}-{adapter_hash[:16]}-{dtype}"
    if (target / "config.json").is_file():
        return target
    model = AutoModelForCausalLM.from_pretrained(pretrained, revision=revision, dtype=torch.float32)
    rows = saved_embedding_rows(adapter)
    if rows is not None and rows != model.get_input_embeddings().weight.shape[0]:
        model.resize_token_embeddings(rows)
    output, embeddings = model.get_output_embeddings(), model.get_input_embeddings()
    if output is not None and output.weight is embeddings.weight:
        output.weight = torch.nn.Parameter(output.weight.detach().clone())
        model.config.tie_word_embeddings = False
        model.config.get_text_config().tie_word_embeddings = False
    with peft_wrapping():
        model = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    model = model.to(getattr(torch, dtype))
    tokenizer = AutoTokenizer.from_pretrained(pretrained, revision=revision)
    with atomic_folder(target, replaceable=lambda path: False) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        (tmp / "lm_eval_evidential_merged.json").write_text(
            json.dumps({"pretrained": str(pretrained), "peft": str(adapter), "dtype": dtype}, indent=1) + "\n",
            encoding="utf-8",
        )
    return target
