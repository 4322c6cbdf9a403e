"""Write a float32 GGUF file from a tiny transformers checkpoint (for tests: no download).

llama.cpp's ``convert_hf_to_gguf.py`` is the real converter, and it is a script, not a
package. This writes the same layout for the families of :data:`testing.tiny.FAMILIES`
with the ``gguf`` package's writer and the tensor-name map transformers itself reads GGUF
files with, so the file loads back through ``from_pretrained(..., gguf_file=...)`` as the
same model (float32, no quantisation): llama.cpp's rotary row order for Llama q/k, Gemma's
``1 + w`` norms, no ``output.weight`` when the embeddings are tied, ``[PADn]`` tokens for an
output layer padded beyond the tokenizer. Byte-level BPE tokenizers only (the tiny ones).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from lm_eval_evidential.errors import InvalidValueError

# transformers model_type -> GGUF general.architecture (Mistral is llama-architecture in GGUF)
GGUF_ARCHITECTURES = {
    "llama": "llama",
    "mistral": "llama",
    "qwen2": "qwen2",
    "phi3": "phi3",
    "gemma2": "gemma2",
    "gemma3_text": "gemma3",
}


def _permute_rotary(weight, n_head: int):
    # llama.cpp stores Llama q/k rows interleaved for its rotary kernel; transformers undoes
    # exactly this when it reads a llama GGUF (LlamaTensorProcessor._reverse_permute_weights).
    rows = weight.shape[0]
    return weight.reshape(n_head, 2, rows // n_head // 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def _tokenizer_metadata(writer, tokenizer, vocab_size: int) -> None:
    import gguf

    by_id = {i: t for t, i in tokenizer.get_vocab().items()}
    special = set(tokenizer.all_special_ids)
    tokens, types = [], []
    for i in range(vocab_size):
        if i in by_id:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL)
        else:  # an output layer padded beyond the tokenizer, as llama.cpp writes it
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
    model = json.loads(tokenizer.backend_tokenizer.to_str())["model"]
    if model.get("type") != "BPE":
        raise InvalidValueError(f"only byte-level BPE tokenizers are written, got {model.get('type')!r}")
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    for name in ("bos", "eos", "unk", "pad"):
        token_id = getattr(tokenizer, f"{name}_token_id")
        if token_id is not None:
            getattr(writer, f"add_{name}_token_id")(token_id)
    # What the tokenizer does, not its flags (a post-processor may add BOS with the flag unset).
    probe = tokenizer("a")["input_ids"]
    writer.add_add_bos_token(tokenizer.bos_token_id is not None and probe[0] == tokenizer.bos_token_id)
    writer.add_add_eos_token(tokenizer.eos_token_id is not None and probe[-1] == tokenizer.eos_token_id)


def write_gguf(model_dir, gguf_path) -> Path:
    """Write the checkpoint in ``model_dir`` (model + tokenizer) to ``gguf_path``; returns the path.

    Examples
    --------
    >>> write_gguf("tiny-llama", "tiny-llama/model.gguf")  # doctest: +SKIP
    >>> AutoModelForCausalLM.from_pretrained("tiny-llama", gguf_file="model.gguf")  # doctest: +SKIP
    """
    import gguf
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.integrations.ggml import GGUF_CONFIG_MAPPING
    from transformers.modeling_gguf_pytorch_utils import TensorProcessor, get_gguf_hf_weights_map

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    config = model.config
    if config.model_type not in GGUF_ARCHITECTURES:
        raise InvalidValueError(
            f"no GGUF layout for model_type {config.model_type!r}; known: {', '.join(GGUF_ARCHITECTURES)}"
        )
    arch = GGUF_ARCHITECTURES[config.model_type]
    gguf_path = Path(gguf_path)
    gguf_path.parent.mkdir(parents=True, exist_ok=True)
    # Written beside and renamed: a crash never leaves a half file under the real name.
    tmp = gguf_path.with_name(f".{gguf_path.name}.tmp")
    writer = gguf.GGUFWriter(str(tmp), arch)
    writer.add_name(config.model_type)  # transformers reads a llama file named "...mistral..." as Mistral
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    for key, attr in GGUF_CONFIG_MAPPING.get(config.model_type, GGUF_CONFIG_MAPPING[arch]).items():
        value = head_dim if attr == "head_dim" else (getattr(config, attr, None) if attr else None)
        if value is None or isinstance(value, bool):
            continue
        (writer.add_uint32 if isinstance(value, int) else writer.add_float32)(f"{arch}.{key}", value)
    _tokenizer_metadata(writer, tokenizer, config.vocab_size)

    names = get_gguf_hf_weights_map(model, TensorProcessor(), model_type=arch if arch == "llama" else None)
    hf_to_gguf = {hf: gguf_name for gguf_name, hf in names.items()}
    tied = bool(getattr(config, "tie_word_embeddings", False))
    for name, tensor in model.state_dict().items():
        if tied and name == "lm_head.weight":
            continue  # no output.weight: readers tie the output layer to token_embd
        array = tensor.detach().to(torch.float32).numpy()
        gguf_name = hf_to_gguf[name]
        if arch == "llama" and (".attn_q." in gguf_name or ".attn_k." in gguf_name):
            heads = config.num_attention_heads if ".attn_q." in gguf_name else config.num_key_value_heads
            array = _permute_rotary(array, heads)
        if arch.startswith("gemma") and gguf_name.endswith("norm.weight"):
            array = array + 1.0  # Gemma's RMSNorm scales by (1 + w); llama.cpp stores 1 + w
        writer.add_tensor(gguf_name, np.ascontiguousarray(array))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(tmp, gguf_path)
    return gguf_path
