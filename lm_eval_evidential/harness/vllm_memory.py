"""How much memory ``--model evidential-vllm`` asks vLLM for: sized from what the model needs and what is free.

vLLM takes a share of the whole device, ``gpu_memory_utilization`` (0.92 by default in vLLM 0.32),
whatever the model needs. On the CPU build the share is of the NUMA node's RAM, and the worker
refuses to start when it is more than the node has available (vllm/v1/worker/cpu_worker.py:
"Available memory on node 0 … on startup is less than desired CPU memory utilization"); the KV
cache is then the share minus the process's resident memory. On a GPU the free memory at start-up
must cover the share (vllm/v1/worker/utils.py ``request_memory``). So a neighbour holding 2 GiB of
a 15 GiB node stopped the engine with an 80-line traceback, and an idle machine lent 92 % of its
RAM to one small model.

Scoring asks for one output token per prompt, so the KV cache only holds what the scheduler has in
flight: the prompts of one step (``max_num_batched_tokens``) and the next, and never less than one
``max_model_len`` sequence, vLLM's own minimum. :func:`plan_engine_memory` sizes the engine from
that, when the user sets none of ``kv_cache_memory_bytes``, ``gpu_memory_utilization`` and
``VLLM_CPU_KVCACHE_SPACE``:

- CPU: ``kv_cache_memory_bytes`` = that many tokens' keys and values (:func:`cache_tokens`), less
  where less is free after the weights and a working room (:data:`WORKING_ROOM`);
- GPU: vLLM's default share where the device has it free; otherwise ``gpu_memory_utilization`` is
  lowered to the share that is free.

A setting the machine cannot give, a ``max_model_len`` whose cache cannot fit, or one longer than the
model's context (:func:`check_max_model_len`), is refused before the engine starts, in one line naming
the value, what is free or the model's context, and the model_arg that fixes it.
"""

from __future__ import annotations

import json
import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from lm_eval_evidential.errors import EvidentialInputError

__all__ = [
    "DeviceMemory",
    "Footprint",
    "VLLM_DEFAULT_UTILIZATION",
    "WORKING_ROOM",
    "cache_tokens",
    "check_max_model_len",
    "model_context",
    "plan_engine_memory",
    "footprint",
    "device_memory",
    "size_engine_memory",
]

GiB = 1 << 30
#: vLLM's ``CacheConfig.gpu_memory_utilization`` default (vllm/config/cache.py, 0.32).
VLLM_DEFAULT_UTILIZATION = 0.92
#: What an engine holds besides the weights and the KV cache (the torch and vLLM runtime, activations of
#: one step): a whole process scoring 64 prompts of 300 tokens with SmolLM2-135M in float32 on the CPU
#: build (0.50 GiB of weights, a 0.37 GiB cache) peaked at 2.48 GiB resident, 1.6 GiB of it neither.
WORKING_ROOM = 2 * GiB
#: vLLM's CPU default ``max_num_batched_tokens`` for the ``LLM`` class, per worker (vllm/engine/arg_utils.py).
CPU_STEP_TOKENS = 4096
_CACHE_SETTINGS = ("kv_cache_memory_bytes", "gpu_memory_utilization")
_DTYPE_BYTES = {"float32": 4, "float": 4, "float64": 8, "float16": 2, "half": 2, "bfloat16": 2}


@dataclass(frozen=True)
class DeviceMemory:
    """The memory an engine draws from: where (``"CPU node 0"``, ``"cuda:0"``), total and available bytes."""

    where: str
    total: int
    free: int
    cpu: bool


@dataclass(frozen=True)
class Footprint:
    """What one engine needs: KV bytes per token (all layers, keys and values), weight bytes, the longest
    sequence (``max_model_len``) and the tokens of one scheduler step, each for the whole model."""

    kv_per_token: int
    weights: int
    max_model_len: int
    step_tokens: int


def _gib(n: float) -> str:
    return f"{n / GiB:.2f} GiB"


def cache_tokens(fp: Footprint) -> int:
    """Tokens the KV cache is sized for: two scheduler steps in flight, at least one ``max_model_len``
    sequence, rounded up to whole blocks of 512 and one block more (vLLM counts whole blocks)."""
    want = max(fp.max_model_len, 2 * fp.step_tokens)
    return 512 * (math.ceil(want / 512) + 1)


def _longest_that_fits(kv_bytes: float, fp: Footprint) -> int:
    """The longest ``max_model_len`` (a multiple of 256, one block spare) a cache of ``kv_bytes`` holds."""
    return max(0, 256 * (int(kv_bytes // fp.kv_per_token) // 256 - 1))


def _smaller_len(kv_bytes: float, fp: Footprint) -> str:
    """The fix for a cache of ``kv_bytes`` too small for ``max_model_len``: the length that fits, if any."""
    n = _longest_that_fits(kv_bytes, fp)
    return f"set max_model_len={n} or less in --model_args" if n >= 256 else "use a smaller model"


@dataclass(frozen=True)
class _Budget:
    """One worker's share of the device, and the words a refusal uses for it."""

    per_worker: int  # tensor-parallel ranks: each holds 1/per_worker of the weights and of the cache
    workers: int  # vLLM workers drawing from this memory
    weights: float
    free: float
    room: float  # what one worker's cache may take
    need: float  # one max_model_len sequence, per worker
    on: str
    length: str


def _budget(fp: Footprint, memory: DeviceMemory, tensor_parallel: int, replicas: int) -> _Budget:
    workers = tensor_parallel * replicas if memory.cpu else 1
    weights, free = fp.weights / tensor_parallel, memory.free / workers
    on = f"{memory.where} has {_gib(memory.free)} of its {_gib(memory.total)} available"
    if workers > 1:
        on += f", shared by {workers} vLLM workers"
    need = fp.kv_per_token / tensor_parallel * fp.max_model_len
    return _Budget(
        tensor_parallel,
        workers,
        weights,
        free,
        free - weights - WORKING_ROOM,
        need,
        on,
        f"max_model_len={fp.max_model_len}",
    )


_LEAVE_OUT = "leave it out (the cache is then sized to what the model needs)"


def plan_engine_memory(
    args: dict,
    fp: Footprint,
    memory: DeviceMemory,
    *,
    tensor_parallel: int = 1,
    replicas: int = 1,
    env_kv_gib: str | None = None,
) -> tuple[dict, str | None]:
    """The engine arguments to add to ``args`` and a line saying what was sized, or a one-line refusal.

    ``args`` are the model_args the engine is given (``kv_cache_memory_bytes``, ``gpu_memory_utilization``,
    ``max_model_len`` as the user set them); ``fp`` the model's footprint; ``memory`` what the device has.
    On the CPU build the ``tensor_parallel`` workers and ``replicas`` engines share one node; each worker's
    ``kv_cache_memory_bytes`` is its own (its share of the heads). ``env_kv_gib``: ``VLLM_CPU_KVCACHE_SPACE``.

    Examples
    --------
    >>> fp = Footprint(kv_per_token=46080, weights=538 << 20, max_model_len=1024, step_tokens=4096)
    >>> node = DeviceMemory("CPU node 0", total=15 * GiB, free=13 * GiB, cpu=True)
    >>> plan_engine_memory({}, fp, node)[0]
    {'kv_cache_memory_bytes': 401080320}
    >>> plan_engine_memory({"gpu_memory_utilization": 0.92}, fp, node)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lm_eval_evidential.errors.EvidentialInputError: gpu_memory_utilization=0.92 asks vLLM for 13.80 GiB ...
    """
    b = _budget(fp, memory, tensor_parallel, replicas)
    if memory.cpu and env_kv_gib not in (None, ""):
        _check_env_cache(env_kv_gib, fp, b)
        return {}, None
    if args.get("kv_cache_memory_bytes") is not None:
        _check_cache_bytes(int(args["kv_cache_memory_bytes"]), fp, b)
        if memory.cpu or args.get("gpu_memory_utilization") is not None:
            return {}, None
    if args.get("gpu_memory_utilization") is not None:
        _check_utilization(args, fp, memory, b)
        return {}, None
    if b.room < b.need:
        raise EvidentialInputError(
            f"vLLM cannot start: the weights ({_gib(fp.weights)}) and a KV cache for one {b.length} sequence "
            f"({_gib(b.need * b.per_worker)}) need more memory than is available ({b.on}; other processes hold the "
            f"rest); {_smaller_len(max(b.room, 0) * b.per_worker, fp)}, or free memory"
        )
    if not memory.cpu:  # a GPU: vLLM's own share where it is free, else the share that is
        if memory.free >= VLLM_DEFAULT_UTILIZATION * memory.total:
            return {}, None
        fits = math.floor(100 * (memory.free - 0.01 * memory.total) / memory.total) / 100
        return {"gpu_memory_utilization": fits}, (
            f"vLLM: {b.on}, less than its default share ({VLLM_DEFAULT_UTILIZATION}); gpu_memory_utilization={fits} "
            "(set gpu_memory_utilization= or kv_cache_memory_bytes= in --model_args to choose)"
        )
    tokens = cache_tokens(fp)
    kv = int(min(fp.kv_per_token / b.per_worker * tokens, b.room))
    return {"kv_cache_memory_bytes": kv}, (
        f"vLLM's KV cache: {_gib(kv * b.per_worker)} ({int(kv // (fp.kv_per_token / b.per_worker))} tokens: two "
        f"scheduler steps of {fp.step_tokens}, at least one {b.length} sequence; {b.on}); set "
        "kv_cache_memory_bytes= or gpu_memory_utilization= in --model_args to choose"
    )


def _check_env_cache(env_kv_gib: str, fp: Footprint, b: _Budget) -> None:
    """``VLLM_CPU_KVCACHE_SPACE`` (GiB) and the weights must fit in what is free."""
    if float(env_kv_gib) * GiB + b.weights > b.free:
        fits = max(0, int((b.free - b.weights) / GiB))
        raise EvidentialInputError(
            f"VLLM_CPU_KVCACHE_SPACE={env_kv_gib} (GiB) and the weights ({_gib(fp.weights)}) need more memory "
            f"than is available ({b.on}); set VLLM_CPU_KVCACHE_SPACE={fits} or less, or unset it (the cache is then "
            "sized to what the model needs)"
        )


def _check_cache_bytes(kv: int, fp: Footprint, b: _Budget) -> None:
    """``kv_cache_memory_bytes`` must fit beside the weights and hold one ``max_model_len`` sequence."""
    if kv + b.weights > b.free:
        raise EvidentialInputError(
            f"kv_cache_memory_bytes={kv} ({_gib(kv)}) and the weights ({_gib(fp.weights)}) need more memory "
            f"than is available ({b.on}); set kv_cache_memory_bytes={max(0, int(b.room))} or less, or {_LEAVE_OUT}"
        )
    if kv < b.need:
        raise EvidentialInputError(
            f"kv_cache_memory_bytes={kv} ({_gib(kv)}) holds fewer tokens than one {b.length} sequence needs "
            f"({_gib(b.need)}); set kv_cache_memory_bytes={math.ceil(b.need * 1.05)} or more, or "
            f"{_smaller_len(kv * b.per_worker, fp).removeprefix('set ')}"
        )


def _check_utilization(args: dict, fp: Footprint, memory: DeviceMemory, b: _Budget) -> None:
    """``gpu_memory_utilization``'s share must be free, and leave a cache for one sequence after the weights."""
    utilization = args["gpu_memory_utilization"]
    share = math.ceil(memory.total * float(utilization))
    fits = math.floor(100 * memory.free / b.workers / memory.total) / 100
    if share > b.free:
        raise EvidentialInputError(
            f"gpu_memory_utilization={utilization} asks vLLM for {_gib(share)} of {memory.where}"
            f"{' (on the CPU build, the share of its RAM that vLLM reserves)' if memory.cpu else ''}, more than is "
            f"available ({b.on}); set gpu_memory_utilization={fits} or less, or {_LEAVE_OUT}"
        )
    cache = share - b.weights - WORKING_ROOM
    if args.get("kv_cache_memory_bytes") is None and cache < b.need:
        raise EvidentialInputError(
            f"gpu_memory_utilization={utilization} ({_gib(share)}) leaves {_gib(max(cache, 0))} for vLLM's KV "
            f"cache after the weights ({_gib(fp.weights)}), less than one {b.length} sequence needs "
            f"({_gib(b.need)}); raise gpu_memory_utilization, "
            f"{_smaller_len(max(cache, 0) * b.per_worker, fp).removesuffix(' in --model_args')}, or {_LEAVE_OUT}"
        )


def _safetensors_bytes(path: Path, dtype_bytes: int) -> int:
    """Bytes of a safetensors file's tensors once loaded: floating ones at ``dtype_bytes`` each, others as stored."""
    with open(path, "rb") as fh:
        (size,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(size))
    total = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        numel = math.prod(info["shape"])
        stored = info["data_offsets"][1] - info["data_offsets"][0]
        total += numel * dtype_bytes if info["dtype"].startswith(("F", "BF")) else stored
    return total


def _weight_bytes(folder: Path, dtype_bytes: int) -> int:
    """The model's weights once loaded, from a local checkpoint folder (0 where there is none to read)."""
    if not folder.is_dir():
        return 0
    tensors = sorted(folder.glob("*.safetensors"))
    if tensors:
        return sum(_safetensors_bytes(p, dtype_bytes) for p in tensors)
    return sum(p.stat().st_size for p in folder.iterdir() if p.suffix in (".bin", ".pt", ".pth"))


def _dtype_bytes(dtype: str, text_config) -> int:
    if str(dtype) == "auto":
        dtype = getattr(text_config, "dtype", None) or getattr(text_config, "torch_dtype", None) or "float32"
    return _DTYPE_BYTES.get(str(dtype).removeprefix("torch."), 4)


def _max_model_len(args: dict, text_config) -> int | None:
    for given in (args.get("max_model_len"), args.get("max_length")):
        if given:
            return int(given)
    for name in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(text_config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


#: The config keys vLLM reads the model's context from, the smallest one found counting
#: (vllm/transformers_utils/model_arch_config_convertor.py ``derive_max_model_len_and_key``, 0.32).
_CONTEXT_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)


def model_context(text_config) -> tuple[int, str] | None:
    """The model's context and the config key that says it, as vLLM derives it; None where vLLM would derive it
    otherwise (``model_max_length``, a RoPE scaling factor, no key), so that vLLM alone decides there."""
    rope = getattr(text_config, "rope_scaling", None) or getattr(text_config, "rope_parameters", None) or {}
    if getattr(text_config, "model_max_length", None) or not isinstance(rope, dict) or rope.get("factor"):
        return None
    best = None
    for key in _CONTEXT_KEYS:  # the first key holding the smallest value names it, as in vLLM
        value = getattr(text_config, key, None)
        if isinstance(value, int) and (best is None or value < best[0]):
            best = (value, key)
    return best


def check_max_model_len(args: dict, text_config, folder) -> None:
    """Refuse, in one line before the engine starts, a ``max_model_len`` (or ``max_length``) longer than the
    model's context: vLLM raises it from deep in its engine set-up unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1``,
    which lets positions past the context run (NaN logits under RoPE)."""
    name = next((k for k in ("max_model_len", "max_length") if args.get(k)), None)
    context = model_context(text_config)
    if name is None or context is None or os.environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "0") not in ("", "0"):
        return
    given, (limit, key) = int(args[name]), context
    if given > limit:
        raise EvidentialInputError(
            f"{name}={given} is longer than the model's context ({key}={limit} in {folder}/config.json): positions "
            f"past it were never trained; set {name}={limit} or less in --model_args, or leave it out (the "
            "model's context is used)"
        )


def footprint(config, folder: Path, args: dict, dtype: str, tensor_parallel: int = 1) -> Footprint | None:
    """The :class:`Footprint` of the model in ``folder`` (its transformers ``config``), engine args ``args``;
    None where the config does not say its attention shape or context length (vLLM's own sizing then)."""
    text = config.get_text_config()
    heads = getattr(text, "num_attention_heads", None)
    layers = getattr(text, "num_hidden_layers", None)
    max_len = _max_model_len(args, text)
    if not heads or not layers or not max_len:
        return None
    kv_heads = getattr(text, "num_key_value_heads", None) or heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
    size = _dtype_bytes(dtype, text)
    kv_size = 1 if str(args.get("kv_cache_dtype", "auto")).startswith("fp8") else size
    step = int(args.get("max_num_batched_tokens") or CPU_STEP_TOKENS * tensor_parallel)
    return Footprint(2 * layers * kv_heads * head_dim * kv_size, _weight_bytes(folder, size), max_len, step)


def device_memory(cpu: bool, tensor_parallel: int = 1) -> DeviceMemory:
    """What the engine will find: on the CPU build vLLM's own reading of the first allowed CPU's NUMA node
    (``available`` = free + file cache + reclaimable, within the cgroup's limit); on a GPU the least free of
    the first ``tensor_parallel`` devices."""
    if cpu:
        from vllm.utils.cpu_resource_utils import get_allowed_cpu_list, get_memory_node_info

        node = max(get_allowed_cpu_list()[0].numa_node, 0)
        info = get_memory_node_info(node)
        return DeviceMemory(f"CPU node {node}", int(info.total_memory), int(info.available_memory), True)
    import torch

    free, total = min(torch.cuda.mem_get_info(i) for i in range(tensor_parallel))
    return DeviceMemory("cuda:0" if tensor_parallel == 1 else f"cuda:0..{tensor_parallel - 1}", total, free, False)


def size_engine_memory(engine_model: str, dtype: str, revision: str | None, args: dict) -> dict:
    """The engine args to add for the engine of ``engine_model`` (see the module docstring); logs what it sized."""
    import logging

    from transformers import AutoConfig
    from vllm.platforms import current_platform

    folder = Path(str(engine_model)).expanduser()
    if not folder.is_dir():  # a hub id: nothing local to read the weights from; vLLM's own sizing
        return {}
    config = AutoConfig.from_pretrained(str(folder), revision=revision, trust_remote_code=args.get("trust_remote_code"))
    check_max_model_len(args, config.get_text_config(), folder)
    tp = int(args.get("tensor_parallel_size") or 1)
    fp = footprint(config, folder, args, dtype, tp)
    if fp is None:
        return {}
    cpu = current_platform.is_cpu()
    added, said = plan_engine_memory(
        args,
        fp,
        device_memory(cpu, tp),
        tensor_parallel=tp,
        replicas=int(args.get("data_parallel_size") or 1),
        env_kv_gib=os.environ.get("VLLM_CPU_KVCACHE_SPACE"),
    )
    if said:
        logging.getLogger("lm_eval.evidential").info(said)
    return added
