"""How --model evidential-vllm runs an adapter (harness/adapters.py), checked without vLLM.

The merged checkpoint is vLLM's input when an adapter cannot be served as LoRA; its logits are
checked against PEFT's own (the adapter applied unmerged, as --model evidential does), on a
tied-embedding base too, where merging LoRA on lm_head into the shared matrix would also change
the input embeddings.
"""

from __future__ import annotations

import json

import pytest
import torch

from lm_eval_evidential.errors import EvidentialInputError
from lm_eval_evidential.harness.adapters import local_adapter, lora_rank, merged_checkpoint, why_merged
from lm_eval_evidential.testing.tiny import build_lora_adapter

PROMPTS = ["Question: which one?\nA) a\nB) b\nAnswer:", "A longer question about the sea and the sky.\nAnswer:"]


def _peft_logits(base, adapter, prompts):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base)
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32), adapter).eval()
    with torch.no_grad():
        return [model(torch.tensor([tok(p)["input_ids"]])).logits[0, -1] for p in prompts]


def _plain_logits(folder, prompts):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.no_grad():
        return [model(torch.tensor([tok(p)["input_ids"]])).logits[0, -1] for p in prompts], model


def test_which_adapters_vllm_serves(tiny_model, tiny_adapter, tmp_path):
    assert "lora_only" in why_merged(tiny_adapter)  # the paper's adapter (q, v, lm_head; bias lora_only)
    head = build_lora_adapter(tiny_model, tmp_path / "head", bias="none")
    assert "LoRA on lm_head" in why_merged(head)
    served = build_lora_adapter(tiny_model, tmp_path / "qv", target_modules=("q_proj", "v_proj"), bias="none")
    assert why_merged(served) is None
    assert lora_rank(served) == 8
    config = json.loads((served / "adapter_config.json").read_text())
    for change, needle in (
        ({"bias": "all"}, 'bias="all"'),
        ({"use_dora": True}, "use_dora"),
        ({"modules_to_save": ["score_head"]}, "modules_to_save"),
        ({"r": 1024}, "rank 1024"),
        ({"init_lora_weights": "pissa"}, "pissa"),
    ):
        (served / "adapter_config.json").write_text(json.dumps({**config, **change}))
        assert needle in why_merged(served), change


@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
def test_merged_checkpoint_computes_what_peft_computes(tiny_family, tmp_path, tied):
    base = tiny_family("llama", tied=tied)
    adapter = build_lora_adapter(base, tmp_path / "adapter", seed=3, init_std=0.2)
    cache = tmp_path / "cache"
    merged = merged_checkpoint(base, adapter, dtype="float32", cache=cache)
    want = _peft_logits(base, adapter, PROMPTS)
    got, model = _plain_logits(merged, PROMPTS)
    for w, g in zip(want, got):
        torch.testing.assert_close(g, w, atol=2e-5, rtol=0)
    # the adapter really changes the outputs (else the comparison above proves nothing)
    plain, base_model = _plain_logits(base, PROMPTS)
    assert max((p - w).abs().max().item() for p, w in zip(plain, want)) > 1e-2
    # LoRA on lm_head changed the output layer only: the input embeddings are the base's
    torch.testing.assert_close(model.get_input_embeddings().weight, base_model.get_input_embeddings().weight)
    # cached by content: a second call returns the same folder without merging again
    stamp = (merged / "model.safetensors").stat().st_mtime_ns
    assert merged_checkpoint(base, adapter, dtype="float32", cache=cache) == merged
    assert (merged / "model.safetensors").stat().st_mtime_ns == stamp
    assert merged.name.endswith("-float32") and len(list(cache.iterdir())) == 1


def test_an_adapter_not_on_disk_is_refused_with_the_download(tiny_adapter, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    assert local_adapter(tiny_adapter) == tiny_adapter
    with pytest.raises(EvidentialInputError, match="huggingface-cli download someone/adapter"):
        local_adapter("someone/adapter")
