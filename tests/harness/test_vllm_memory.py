"""harness.vllm_memory: what ``--model evidential-vllm`` asks vLLM for, without vLLM (numbers in, decisions out).

The footprint is checked against transformers itself (the bytes its KV cache holds per token, the bytes
of the loaded parameters); each decision of :func:`plan_engine_memory` against the arithmetic written out
here. The engine under a memory-holding neighbour is tests/vllm/test_vllm_memory.py (``-m vllm``).
"""

from __future__ import annotations

import math

import pytest
import torch

from lm_eval_evidential.errors import EvidentialInputError
from lm_eval_evidential.harness.vllm_memory import (
    WORKING_ROOM,
    DeviceMemory,
    Footprint,
    cache_tokens,
    check_max_model_len,
    footprint,
    model_context,
    plan_engine_memory,
)

GiB = 1 << 30
FP = Footprint(kv_per_token=46080, weights=538 << 20, max_model_len=1024, step_tokens=4096)  # SmolLM2, float32


def node(free_gib: float, total_gib: float = 15.0) -> DeviceMemory:
    return DeviceMemory("CPU node 0", int(total_gib * GiB), int(free_gib * GiB), cpu=True)


def gpu(free_gib: float, total_gib: float = 80.0) -> DeviceMemory:
    return DeviceMemory("cuda:0", int(total_gib * GiB), int(free_gib * GiB), cpu=False)


@pytest.mark.parametrize("family", ["llama", "gemma2"])  # GQA; a head_dim that is not hidden / heads
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_footprint_is_what_transformers_holds(tiny_family, family, dtype):
    from transformers import AutoConfig, AutoModelForCausalLM

    folder = tiny_family(family)
    config = AutoConfig.from_pretrained(folder)
    fp = footprint(config, folder, {}, dtype)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, dtype)).eval()
    n = 7
    with torch.no_grad():
        out = model(torch.arange(1, n + 1)[None], use_cache=True)
    cache = getattr(out, "cache", None) or out.past_key_values
    held = sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers)  # the oracle: bytes per n tokens
    assert fp.kv_per_token * n == held
    assert fp.weights == sum(p.numel() * p.element_size() for p in model.state_dict().values())
    assert fp.max_model_len == config.max_position_embeddings and fp.step_tokens == 4096
    assert footprint(config, folder, {"max_model_len": "512", "kv_cache_dtype": "fp8"}, dtype).max_model_len == 512
    one_byte = footprint(config, folder, {"kv_cache_dtype": "fp8"}, dtype).kv_per_token
    assert one_byte * (4 if dtype == "float32" else 2) == fp.kv_per_token


def test_an_idle_or_busy_cpu_node_gets_the_cache_the_model_needs():
    tokens = cache_tokens(FP)
    assert tokens == 512 * (8192 // 512 + 1)  # two steps of 4096 tokens, one block spare
    for free in (13.0, 4.0):  # the busy node (13.01 of 14.96 GiB free) and a busier one: the same cache
        added, said = plan_engine_memory({}, FP, node(free))
        assert added == {"kv_cache_memory_bytes": FP.kv_per_token * tokens}
        assert "kv_cache_memory_bytes=" in said and f"CPU node 0 has {free:.2f} GiB" in said
    # less free than that: what is left after the weights and the working room, still above one sequence
    free = FP.weights + WORKING_ROOM + FP.kv_per_token * 3000
    added, _ = plan_engine_memory({}, FP, DeviceMemory("CPU node 0", 15 * GiB, free, cpu=True))
    assert added == {"kv_cache_memory_bytes": FP.kv_per_token * 3000}


def test_a_node_too_full_for_one_sequence_names_the_max_model_len_that_fits():
    free = FP.weights + WORKING_ROOM + FP.kv_per_token * 700
    long = Footprint(FP.kv_per_token, FP.weights, 1024, 4096)
    with pytest.raises(EvidentialInputError) as err:
        plan_engine_memory({}, long, DeviceMemory("CPU node 0", 15 * GiB, free, cpu=True))
    message = str(err.value)
    assert "\n" not in message and "max_model_len=1024" in message and "set max_model_len=256 or less" in message
    assert "CPU node 0 has 2.56 GiB of its 15.00 GiB available" in message
    with pytest.raises(EvidentialInputError, match="use a smaller model, or free memory$"):
        plan_engine_memory({}, FP, DeviceMemory("CPU node 0", 15 * GiB, FP.weights, cpu=True))


def test_a_share_the_node_cannot_give_is_refused_with_the_share_that_fits():
    with pytest.raises(EvidentialInputError) as err:
        plan_engine_memory({"gpu_memory_utilization": 0.92}, FP, node(13.01, 14.96))
    message = str(err.value)
    assert message.startswith("gpu_memory_utilization=0.92 asks vLLM for 13.76 GiB of CPU node 0")
    assert "CPU node 0 has 13.01 GiB of its 14.96 GiB available" in message
    assert f"gpu_memory_utilization={math.floor(100 * 13.01 / 14.96) / 100} or less" in message
    assert plan_engine_memory({"gpu_memory_utilization": 0.8}, FP, node(13.01, 14.96)) == ({}, None)
    with pytest.raises(EvidentialInputError, match=r"gpu_memory_utilization=0\.1 \(1\.50 GiB\) leaves 0\.00 GiB"):
        plan_engine_memory({"gpu_memory_utilization": 0.1}, FP, node(13.0))


def test_an_explicit_cache_is_checked_against_what_is_free_and_one_sequence():
    assert plan_engine_memory({"kv_cache_memory_bytes": 256 << 20}, FP, node(4.0)) == ({}, None)
    with pytest.raises(EvidentialInputError, match=r"^kv_cache_memory_bytes=\d+ \(6\.00 GiB\) and the weights"):
        plan_engine_memory({"kv_cache_memory_bytes": 6 * GiB}, FP, node(4.0))
    with pytest.raises(EvidentialInputError, match=r"holds fewer tokens than one max_model_len=1024 sequence"):
        plan_engine_memory({"kv_cache_memory_bytes": 1 << 20}, FP, node(4.0))
    with pytest.raises(EvidentialInputError, match=r"^VLLM_CPU_KVCACHE_SPACE=6 \(GiB\) .*VLLM_CPU_KVCACHE_SPACE=3 or"):
        plan_engine_memory({}, FP, node(4.0), env_kv_gib="6")
    assert plan_engine_memory({}, FP, node(4.0), env_kv_gib="1") == ({}, None)


def test_workers_and_replicas_on_one_node_share_it():
    free = 2 * (FP.weights + WORKING_ROOM) + FP.kv_per_token * 8000  # two replicas: 4,000 tokens each
    added, said = plan_engine_memory({}, FP, DeviceMemory("CPU node 0", 15 * GiB, free, cpu=True), replicas=2)
    assert added == {"kv_cache_memory_bytes": FP.kv_per_token * 4000} and "shared by 2 vLLM workers" in said
    # tensor parallel: each worker holds half the heads, so half the bytes per token
    added, _ = plan_engine_memory({}, FP, node(13.0), tensor_parallel=2)
    assert added == {"kv_cache_memory_bytes": FP.kv_per_token // 2 * cache_tokens(FP)}


def test_a_gpu_keeps_vllms_share_when_free_and_lowers_it_when_not():
    big = Footprint(kv_per_token=131072, weights=16 * GiB, max_model_len=8192, step_tokens=16384)  # Llama-3-8B bf16
    assert plan_engine_memory({}, big, gpu(79.0)) == ({}, None)
    added, said = plan_engine_memory({}, big, gpu(60.0))
    assert added == {"gpu_memory_utilization": math.floor(100 * (60 - 0.8) / 80) / 100} and "0.92" in said
    with pytest.raises(EvidentialInputError, match=r"^gpu_memory_utilization=0\.9 asks vLLM for 72\.00 GiB of cuda:0"):
        plan_engine_memory({"gpu_memory_utilization": 0.9}, big, gpu(60.0))
    with pytest.raises(EvidentialInputError, match=r"max_model_len=8192 sequence .* set max_model_len=\d+ or less"):
        plan_engine_memory({}, big, gpu(16 * 1.0 + 2.5))


def test_a_max_model_len_past_the_models_context_is_one_line_naming_the_context(monkeypatch):
    from transformers import GPT2Config, LlamaConfig

    monkeypatch.delenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", raising=False)
    llama = LlamaConfig(max_position_embeddings=256)
    for name in ("max_model_len", "max_length"):  # the second is lm-eval's name for the same engine argument
        with pytest.raises(EvidentialInputError) as err:
            check_max_model_len({name: 257}, llama, "m")
        assert str(err.value).startswith(
            f"{name}=257 is longer than the model's context (max_position_embeddings=256 in m/config.json)"
        )
        assert f"set {name}=256 or less in --model_args" in str(err.value) and "\n" not in str(err.value)
    for args in ({"max_model_len": 256}, {"max_model_len": 1}, {}):
        check_max_model_len(args, llama, "m")  # within the context, or left to the model
    with pytest.raises(EvidentialInputError, match=r"\(max_position_embeddings=64 in"):  # GPT-2's n_positions, aliased
        check_max_model_len({"max_model_len": 65}, GPT2Config(n_positions=64), "m")
    # the smallest of the keys vLLM reads counts, as in vLLM
    both = LlamaConfig(max_position_embeddings=256)
    both.seq_length = 128
    assert model_context(both) == (128, "seq_length")


def test_where_vllm_derives_the_context_otherwise_it_decides_alone(monkeypatch):
    from transformers import LlamaConfig

    scaled = LlamaConfig(max_position_embeddings=256, rope_scaling={"rope_type": "linear", "factor": 4.0})
    assert model_context(scaled) is None  # vLLM multiplies by the factor: not second-guessed
    check_max_model_len({"max_model_len": 1024}, scaled, "m")
    tokenizer_limited = LlamaConfig(max_position_embeddings=256)
    tokenizer_limited.model_max_length = 512  # vLLM's Command-R key overrides the others
    assert model_context(tokenizer_limited) is None
    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")  # vLLM's own way to run past the context, on purpose
    check_max_model_len({"max_model_len": 1024}, LlamaConfig(max_position_embeddings=256), "m")
