"""The GPU check: a Llama-3-8B-shaped model with random weights, scored four ways in one run.

Prepared for the day an accelerator is at hand; nothing is downloaded (the model is built from
its config on the device, the tokenizer trained on the bundled sample questions, the questions
are the bundled OpenBookQA-format sample), and it carries nothing but this repository::

    python benchmarks/gpu_check.py                         # on the GPU: Llama-3-8B shape, bfloat16, cuda
    python benchmarks/gpu_check.py --shape small --device cpu --dtype float32 --questions 8   # the test's

Ways, each timed as the harness's ``lm.loglikelihood(requests)`` (best of ``--repeats``, after one
warm-up call), on the same questions zero-shot and behind one fixed ``--shots``-question prefix:

- ``bare``: the model's forward on each question's prompt, tokenised and batched before the clock
  (left-padded, position ids, longest first, ``logits_to_keep=1``), answer logits gathered on the
  device and copied to the host once: the device's limit.
- ``evidential``: ``--model evidential`` (:class:`~lm_eval_evidential.harness.model.EvidentialLM`) with
  ``prefix_cache=False``, and (``evidential cached``, few-shot) with the prefix cache.
- ``hf``: lm-eval's own ``--model hf`` (``HFLM``), few-shot only.

Both models are given the same model object (``pretrained=<model>``; the harness's path for an
already-built model), so no weights are written or read. Prints one JSON line per measurement
(questions per second and, on CUDA, peak device memory), then the ratios, the device's name and
the machine's load. The Llama-3-8B shape is 32 layers, hidden 4,096, 32 query and 8 key/value
heads, MLP 14,336, vocabulary 128,256 (16 GB of weights in bfloat16; an 80 GB card holds it and
``--model hf``'s full-vocabulary logits at the default batch size).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_vllm's request builder, when imported as a module

from bench_vllm import build_requests  # noqa: E402 (after the path above)

SHAPES = {
    # Meta-Llama-3-8B's config.json, weights aside.
    "llama3-8b": {
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "rope_theta": 500000.0,
        "max_position_embeddings": 8192,
        "rms_norm_eps": 1e-5,
    },
    # The same layout at a size the CPU runs in seconds (the test suite's).
    "small": {
        "hidden_size": 64,
        "intermediate_size": 176,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 4096,
        "rope_theta": 500000.0,
        "max_position_embeddings": 8192,
        "rms_norm_eps": 1e-5,
    },
}


def build_model(shape: str, device: str, dtype: str, work: Path, seed: int):
    """(model on ``device`` with random weights in ``dtype``, tokenizer): nothing read from disk but the tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig

    from lm_eval_evidential.testing.tiny import build_tiny_model

    # A tokenizer trained on the bundled sample questions (" A".." E" single tokens, <s> prepended).
    tok = AutoTokenizer.from_pretrained(build_tiny_model(work / "tokenizer", hidden_size=8, num_layers=1, num_heads=1))
    config = LlamaConfig(
        **SHAPES[shape],
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    with torch.device(device):  # initialised where it runs: no 16 GB host copy
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    return model.eval(), tok


def _sync(device: str) -> None:
    import torch

    if not device.startswith("cpu"):
        torch.accelerator.synchronize()


def _peak_reset(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()


def _peak_mb(device: str) -> float | None:
    import torch

    return torch.cuda.max_memory_allocated() / 2**20 if device.startswith("cuda") else None


def bare_forward(model, tok, requests, batch_size: int):
    """A callable that runs the bare forward on the requests' distinct prompts (tokenised and batched now)."""
    import torch

    from lm_eval_evidential.modeling.encoding import last_position_logits, left_pad

    prompts = list(dict.fromkeys(r.args[0] for r in requests))
    letters = [tok.encode(f" {x}", add_special_tokens=False)[0] for x in "ABCD"]
    encoded = sorted((tok.encode(p) for p in prompts), key=len, reverse=True)
    device = model.device
    batches = [
        {k: v.to(device) for k, v in left_pad(encoded[i : i + batch_size], tok.pad_token_id).items()}
        for i in range(0, len(encoded), batch_size)
    ]
    answers = torch.tensor(letters, device=device)

    def run(_requests=None, disable_tqdm=True):
        with torch.inference_mode():
            kept = [last_position_logits(model, **b)[:, answers] for b in batches]
            return torch.cat(kept).float().cpu()

    return run


def measure(name: str, score, requests, n: int, device: str, repeats: int, **extra) -> dict:
    """Best-of-``repeats`` questions per second of ``score(requests)``, after one warm-up call."""
    score(requests[: 4 * min(2, n)], disable_tqdm=True)
    _sync(device)
    _peak_reset(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        score(requests, disable_tqdm=True)
        _sync(device)
        times.append(time.perf_counter() - start)
    row = {"way": name, **extra, "questions": n, "seconds": min(times), "q_per_s": n / min(times)}
    row.update(peak_mb=_peak_mb(device), load=os.getloadavg()[0])
    print(json.dumps(row), flush=True)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), default="llama3-8b")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--questions", type=int, default=120, help="OBQA-format sample questions (at most 120)")
    ap.add_argument("--shots", type=int, default=5, help="questions in the fixed few-shot prefix")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ways", default="bare,evidential,hf")
    args = ap.parse_args(argv)

    import torch

    import lm_eval_evidential  # noqa: F401 (--model evidential registered)
    from lm_eval_evidential.harness.model import EvidentialLM

    ways = args.ways.split(",")
    if args.device.startswith("cuda"):
        card = torch.cuda.get_device_name(torch.device(args.device))
    else:
        card = args.device
    print(f"# device {card}, shape {args.shape}, dtype {args.dtype}, batch size {args.batch_size}")
    print(f"# load before: {os.getloadavg()}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="gpu_check.") as tmp:
        start = time.perf_counter()
        model, tok = build_model(args.shape, args.device, args.dtype, Path(tmp), args.seed)
        print(f"# model built on {model.device} in {time.perf_counter() - start:.1f} s", flush=True)
        runs = {s: build_requests(args.questions, s) for s in (0, args.shots)}
        if "bare" in ways:
            for s, (requests, n) in runs.items():
                bare = bare_forward(model, tok, requests, args.batch_size)
                rows.append(measure("bare", bare, requests, n, args.device, args.repeats, shots=s))
        if "evidential" in ways:
            for cache in (False, True):
                lm = EvidentialLM(pretrained=model, tokenizer=tok, batch_size=args.batch_size, prefix_cache=cache)
                for s, (requests, n) in runs.items():
                    if s or not cache:  # zero-shot prompts share nothing worth caching
                        name = "evidential cached" if cache else "evidential"
                        rows.append(measure(name, lm.loglikelihood, requests, n, args.device, args.repeats, shots=s))
                    lm.evidence.take()
                del lm
        if "hf" in ways:
            from lm_eval.models.huggingface import HFLM

            lm = HFLM(pretrained=model, tokenizer=tok, batch_size=args.batch_size)
            requests, n = runs[args.shots]
            rows.append(measure("hf", lm.loglikelihood, requests, n, args.device, args.repeats, shots=args.shots))
            del lm
    qps = {(r["way"], r["shots"]): r["q_per_s"] for r in rows}

    def ratio(label: str, a, b) -> None:
        if a in qps and b in qps:
            print(f"{label}: {qps[a] / qps[b]:.2f}")

    s = args.shots
    ratio("evidential / bare, zero-shot", ("evidential", 0), ("bare", 0))
    ratio(f"evidential / bare, {s}-shot", ("evidential", s), ("bare", s))
    ratio(f"evidential {s}-shot / zero-shot", ("evidential", s), ("evidential", 0))
    ratio(f"evidential {s}-shot, prefix cache on / off", ("evidential cached", s), ("evidential", s))
    ratio(f"evidential {s}-shot cached / zero-shot", ("evidential cached", s), ("evidential", 0))
    ratio(f"evidential / hf, {s}-shot", ("evidential", s), ("hf", s))
    print(f"# load after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
