"""Training step of ``lm-eval-evidential train`` against the bare step, side by side in one run.

    python benchmarks/bench_train.py [--models tiny,smollm2] [--methods edl,ib_edl] [--steps N]
        [--rounds 2] [--warmup 1] [--batch-size 4] [--threads 1] [--device cpu] [--bf16] [--json out.json]

Two ways of taking the same optimiser steps on the same batches of ``obqa_edl``'s training split
(the bundled sample mirror, 240 questions, unless ``EVIDENTIAL_DATA_DIR`` points at real data):

(a) bare step   a plain loop: left padding (``modeling.encoding.left_pad``), the forward with
                ``logits_to_keep=1``, the loss on the answer logits (``training.objective.batch_loss``:
                EDL's MSE + KL, or IB-EDL's), backward, gradient clipping, ``torch.optim.AdamW`` on a
                q_proj/v_proj LoRA (r=8, alpha=16, dropout 0.1), ``zero_grad``. Nothing else.
(b) train       ``lm_eval_evidential.training.trainer.train`` itself (the code ``lm-eval-evidential train``
                runs), in this process, with the same LoRA, optimiser settings, seed and batch size.

The two are interleaved: ``train`` runs ``warmup + rounds * steps`` steps, and after each of its
timed blocks of ``steps`` steps the bare loop takes ``steps`` steps on the very batches ``train``
just used (its own model copy and optimiser), so both ways see the same load and the same padding.
A step of (b) is the whole cycle from one step's start to the next's (data loading and collation,
forward, backward, clipping, optimiser, scheduler, the Trainer's bookkeeping) without the bare
block run inside it and without checkpoints and log lines, which are timed apart and amortised at
the run's ``--save-steps`` / ``--logging-steps`` defaults (500 / 20).

Printed per model and method: ms per step and per real (non-pad) token, added peak memory (RSS on
the CPU: the kernel's VmHWM, reset before each block; ``torch.cuda.max_memory_allocated`` on a GPU),
the throughput ratio (b)/(a) = t(a)/t(b) (goal >= 0.9), and where (b)'s time goes next to (a)'s:
collation, forward + loss, backward, clipping, optimiser, the rest of the Trainer's step; then
logging and checkpoints amortised, tokenisation (once per run, amortised over one epoch) and
padding (the share of pad tokens in the batches used, and in the random batches the trainer made
before it grouped them by length). With both models, one epoch of OBQA (4,957 questions) on
Llama-3-8B on one H100, estimated from measured parts (see :func:`estimate_h100`).

``--threads 1`` (the default) because the machine this was written on is shared: with more
OpenMP threads than free cores, torch's threads spin-wait on each other and step times scatter by 10x.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TASK = "obqa_edl"
LORA_TARGETS = ("q_proj", "v_proj")
DEFAULT_STEPS = {"tiny": 30, "smollm2": 2}  # timed steps per block and way; smollm2 takes ~2-10 s a step on 2 cores
GOAL = 0.9
USER_LOGGING_STEPS, USER_SAVE_STEPS = 20, 500  # TrainConfig's defaults, for amortising
OBQA_TRAIN_QUESTIONS = 4957  # allenai/openbookqa main train split


# ---------------------------------------------------------------------------- measuring
from measure import PeakMemory, Timer, command_line, write_result  # noqa: E402  (benchmarks/measure.py: the timer and memory probe every benchmark uses)


def parts(cpu: dict, n: int) -> dict:
    """CPU ms per step of each part of a step (the Trainer's training_step holds forward, loss and backward)."""
    out = {k: 1e3 * cpu.get(k, 0.0) / n for k in ("collation", "forward + loss", "backward", "clipping", "optimiser")}
    if "training_step" in cpu:
        out["backward"] = 1e3 * (cpu["training_step"] - cpu.get("forward + loss", 0.0)) / n
    return out


def padding_share(batches: list[list[dict]]) -> tuple[float, int]:
    """(share of pad tokens, real tokens) over left-padded ``batches`` of examples."""
    real = sum(len(r["input_ids"]) for b in batches for r in b)
    computed = sum(len(b) * max(len(r["input_ids"]) for r in b) for b in batches)
    return (1 - real / computed if computed else 0.0), real


def random_batch_padding(examples: list[dict], batch_size: int, seed: int = 0, draws: int = 20) -> float:
    """Mean pad share of batches drawn in random order (the trainer's order before length grouping)."""
    import random

    rng = random.Random(seed)
    shares = []
    for _ in range(draws):
        order = rng.sample(range(len(examples)), len(examples))
        batches = [[examples[i] for i in order[s : s + batch_size]] for s in range(0, len(order), batch_size)]
        shares.append(padding_share(batches)[0])
    return statistics.fmean(shares)


# ---------------------------------------------------------------------------- the two ways
class BareStep:
    """(a): the plain loop, on its own copy of the model."""

    def __init__(self, model_dir, config, device, timer: Timer, pad_id: int):
        import torch
        from peft import get_peft_model
        from transformers import AutoModelForCausalLM, set_seed

        from lm_eval_evidential.training.lora_targets import lora_config

        set_seed(config.seed)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        self.model = get_peft_model(model, lora_config(config, LORA_TARGETS)).to(device).train()
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(self.params, lr=config.learning_rate, weight_decay=config.weight_decay)
        self.config, self.device, self.timer, self.pad_id = config, device, timer, pad_id
        self.generator = torch.Generator(device=device).manual_seed(config.seed)

    def step(self, rows: list[dict]) -> None:
        import torch

        from lm_eval_evidential.modeling.encoding import left_pad
        from lm_eval_evidential.training.objective import batch_loss, last_logits

        t, config = self.timer, self.config
        with t.part("collation"):
            k_max = max(r["k"] for r in rows)
            batch = {
                **left_pad([r["input_ids"] for r in rows], self.pad_id),
                "answer_ids": torch.tensor([r["answer_ids"] + r["answer_ids"][:1] * (k_max - r["k"]) for r in rows]),
                "k": torch.tensor([r["k"] for r in rows]),
                "target": torch.tensor([r["target"] for r in rows]),
            }
            batch = {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}
        autocast = torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=config.bf16)
        with t.part("forward + loss"), autocast:
            kl = config.kl_weight if config.method == "edl" else 0.0
            loss, _ = batch_loss(last_logits(self.model, batch), batch, config, kl_weight=kl, generator=self.generator)
        with t.part("backward"):
            loss.backward()
        with t.part("clipping"):
            torch.nn.utils.clip_grad_norm_(self.params, config.max_grad_norm)
        with t.part("optimiser"):
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)


class Interleaved:
    """What (b), ``train``'s own run, and (a), the bare step run block by block between its blocks, share: the
    batches (b) collated and trained on, each block's wall, CPU and peak memory, and (b)'s timed parts."""

    def __init__(self, bare, bare_timer, sync, memory, steps: int, rounds: int, warmup: int):
        self.bare, self.bare_timer, self.sync, self.memory = bare, bare_timer, sync, memory
        self.steps, self.rounds, self.warmup = steps, rounds, warmup
        # (b)'s parts are timed during its timed blocks only; one-off parts (tokenisation, final save) apart
        self.trainer_timer, self.once = Timer(sync, enabled=False), Timer(sync)
        self.seen: list[list[dict]] = []  # the rows of every batch (b) collated, in order
        self.used: list[int] = []  # which of them each step of (b) trained on (the loader runs ahead of the steps)
        self.cycle: dict = {"b": [], "a": [], "b_cpu": [], "a_cpu": [], "b_mem": [], "a_mem": [], "load": []}
        self.state = {"start": None, "inserted": 0.0, "excluded": 0.0, "cpu_start": 0.0, "cpu_excluded": 0.0}

    def run_bare_block(self) -> None:
        cycle, bare = self.cycle, self.bare
        if not cycle["a"]:  # (a)'s own untimed warm-up, on (b)'s warm-up batches: first-step costs apart
            for i in self.used[: self.warmup]:
                bare.step(self.seen[i])
            self.bare_timer.wall.clear()
            self.bare_timer.cpu.clear()
        batches = [self.seen[i] for i in self.used[-self.steps :]]
        self.memory.reset()
        self.sync()
        start, cpu = time.perf_counter(), time.process_time()
        for rows in batches:
            bare.step(rows)
        self.sync()
        cycle["a"].append(time.perf_counter() - start)
        cycle["a_cpu"].append(time.process_time() - cpu)
        cycle["a_mem"].append(self.memory.read())

    def end_b_block(self, now: float, cpu: float, last: bool = False) -> None:
        """(b)'s timed block ends: its figures, then (a)'s block on the same batches (the last one's time is not
        taken off the whole run's, as before the split)."""
        state, cycle = self.state, self.cycle
        self.trainer_timer.enabled = False
        cycle["b"].append(now - state["start"] - state["excluded"])
        cycle["b_cpu"].append(cpu - state["cpu_start"] - state["cpu_excluded"])
        cycle["b_mem"].append(self.memory.read())
        cycle["load"].append(os.getloadavg()[0])
        before = time.perf_counter()
        self.run_bare_block()
        if not last:
            state["inserted"] += time.perf_counter() - before

    def on_step_begin(self, done: int) -> None:
        steps, warmup, state = self.steps, self.warmup, self.state
        if done >= warmup and (done - warmup) % steps == 0:
            self.sync()
            now, cpu = time.perf_counter(), time.process_time()
            if state["start"] is not None:  # a timed block of (b) just ended: time it, then run (a)'s
                self.end_b_block(now, cpu)
            if done < warmup + self.rounds * steps:
                self.memory.reset()
                self.sync()
                self.trainer_timer.enabled = True
                state["start"], state["excluded"] = time.perf_counter(), 0.0
                state["cpu_start"], state["cpu_excluded"] = time.process_time(), 0.0

    def on_train_end(self) -> None:
        # the last block ends with the last step (its final save is timed apart by train's own code)
        self.sync()
        self.trainer_timer.enabled = False
        if self.state["start"] is not None:
            self.end_b_block(time.perf_counter(), time.process_time(), last=True)
            self.state["start"] = None

    def apart(self, part: str, count: str, call) -> None:
        """``call()`` timed as (b)'s ``part``, outside its block's time, and counted as one of ``count``."""
        start, cpu = time.perf_counter(), time.process_time()
        with self.trainer_timer.part(part):
            call()
        self.state["excluded"] += time.perf_counter() - start
        self.state["cpu_excluded"] += time.process_time() - cpu
        self.trainer_timer.add(count, 1)


def recording_collator(run: Interleaved, base):
    """``train``'s collator, recording each batch's rows (for (a)) and timing the collation."""

    class RecordingCollator(base):
        def __call__(self, rows):
            run.seen.append(list(rows))
            with run.trainer_timer.part("collation"):
                batch = super().__call__(rows)
            batch["bench_batch"] = len(run.seen) - 1  # not a tensor: the Trainer passes it through untouched
            return batch

    return RecordingCollator


def instrumented_trainer(run: Interleaved, make_trainer_class):
    """``train``'s trainer class factory, its class timing each part of a step and running (a) between blocks."""
    from transformers import TrainerCallback

    class Interleave(TrainerCallback):
        def on_step_begin(self, args_, state_, control, **kwargs):
            run.on_step_begin(state_.global_step)

        def on_train_end(self, args_, state_, control, **kwargs):
            run.on_train_end()

    class OptimiserClock(TrainerCallback):
        # clipping runs between training_step and on_pre_optimizer_step; the optimiser between the two hooks
        def on_pre_optimizer_step(self, *a, **k):
            run.sync()
            self.start, self.cpu = time.perf_counter(), time.process_time()
            step_end, step_end_cpu = run.state["step_end"], run.state["step_end_cpu"]
            run.trainer_timer.add("clipping", self.start - step_end, self.cpu - step_end_cpu)

        def on_optimizer_step(self, *a, **k):
            run.sync()
            run.trainer_timer.add("optimiser", time.perf_counter() - self.start, time.process_time() - self.cpu)

    def trainer_class():
        base, *callbacks = make_trainer_class()

        class Instrumented(base):
            def __init__(self, *a, **k):
                super().__init__(*a, **k)
                self.add_callback(Interleave())
                self.add_callback(OptimiserClock())

            def training_step(self, *a, **k):
                with run.trainer_timer.part("training_step"):
                    loss = super().training_step(*a, **k)
                run.state["step_end"], run.state["step_end_cpu"] = time.perf_counter(), time.process_time()
                return loss

            def compute_loss(self, model, inputs, *a, **k):
                run.used.append(inputs["bench_batch"])
                with run.trainer_timer.part("forward + loss"):
                    return super().compute_loss(model, inputs, *a, **k)

            def log(self, *a, **k):
                run.apart("logging", "log lines", lambda: super(Instrumented, self).log(*a, **k))

            def _save_checkpoint(self, *a, **k):
                run.apart("checkpoint", "checkpoints", lambda: super(Instrumented, self)._save_checkpoint(*a, **k))

        return (Instrumented, *callbacks)

    return trainer_class


def measure(model_dir: Path, method: str, args, device, work: Path) -> dict:
    """Run (b) with (a) interleaved; returns the figures of one model and method."""
    import torch
    from transformers import AutoTokenizer

    from lm_eval_evidential.training import trainer as train_module
    from lm_eval_evidential.training.config import TrainConfig

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    steps, rounds, warmup = args.steps, args.rounds, args.warmup
    total_steps = warmup + rounds * steps
    out = work / f"run-{method}"
    shutil.rmtree(out, ignore_errors=True)
    config = TrainConfig(
        method=method,
        output_dir=str(out),
        max_steps=total_steps,
        per_device_train_batch_size=args.batch_size,
        target_modules=LORA_TARGETS,
        bf16=args.bf16,
        logging_steps=max(1, steps),  # one log line per block, timed apart and amortised at every 20 steps
        save_steps=warmup + steps,  # one checkpoint, timed apart and amortised at every 500 steps
        save_total_limit=1,
    )
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    bare_timer = Timer(sync)
    bare = BareStep(model_dir, config, device, bare_timer, pad)
    run = Interleaved(bare, bare_timer, sync, PeakMemory(device), steps, rounds, warmup)
    patches = {
        "trainer_classes": instrumented_trainer(run, train_module.trainer_classes),
        "LeftPadCollator": recording_collator(run, train_module.LeftPadCollator),
        "encode_examples": run.once.wrap("tokenisation", train_module.encode_examples),
        "save_final_adapter": run.once.wrap("final save", train_module.save_final_adapter),
    }
    saved = {name: getattr(train_module, name) for name in patches}
    for name, value in patches.items():
        setattr(train_module, name, value)
    start = time.perf_counter()
    try:
        train_module.train(str(model_dir), TASK, config)
    finally:
        for name, value in saved.items():
            setattr(train_module, name, value)
    whole = time.perf_counter() - start - run.state["inserted"]
    assert len(run.used) == total_steps, (len(run.used), total_steps)
    return figures(run, method, args, whole)


def figures(run: Interleaved, method: str, args, whole: float) -> dict:
    """Per step: the timed blocks only (not the warm-up steps), both ways on the same batches."""
    steps, cycle = run.steps, run.cycle
    timed_batches = [run.seen[i] for i in run.used[run.warmup :]]
    pad_share, real_tokens = padding_share(timed_batches)
    n = run.rounds * steps
    tb, ta = sum(cycle["b"]) / n, sum(cycle["a"]) / n
    parts_b = {**run.trainer_timer.wall, **run.once.wall}
    return {
        "method": method,
        "batch_size": args.batch_size,
        "steps": n,
        "rounds": run.rounds,
        "ms_step": {"a": 1e3 * ta, "b": 1e3 * tb},
        "us_token": {"a": 1e6 * ta * n / real_tokens, "b": 1e6 * tb * n / real_tokens},
        "blocks_ms_step": {"a": [1e3 * x / steps for x in cycle["a"]], "b": [1e3 * x / steps for x in cycle["b"]]},
        "peak_mb": {"a": max(cycle["a_mem"]) / 2**20, "b": max(cycle["b_mem"]) / 2**20},
        "ratio": ta / tb,
        "cpu_ms_step": {"a": 1e3 * sum(cycle["a_cpu"]) / n, "b": 1e3 * sum(cycle["b_cpu"]) / n},
        "cpu_ratio": sum(cycle["a_cpu"]) / sum(cycle["b_cpu"]),
        "load": cycle["load"],
        "parts_cpu_ms_step": {"a": parts(run.bare_timer.cpu, n), "b": parts(run.trainer_timer.cpu, n)},
        "log_ms": 1e3 * parts_b.get("logging", 0) / max(1, parts_b.get("log lines", 0)),
        "checkpoint_ms": 1e3 * parts_b.get("checkpoint", 0) / max(1, parts_b.get("checkpoints", 0)),
        "tokenisation_s": parts_b.get("tokenisation", 0.0),
        "final_save_s": parts_b.get("final save", 0.0),
        "run_s": whole,
        "num_examples": None,
        "pad_share": pad_share,
        "random_pad_share": None,
        "real_tokens_per_step": real_tokens / n,
    }


# ---------------------------------------------------------------------------- the H100 estimate
def llama3_8b_host_walks(repeats: int = 5) -> dict:
    """CPU ms of the per-step walks over every module / parameter that a Trainer step makes on a
    Llama-3-8B with the paper's LoRA (q_proj, v_proj, lm_head), measured on a ``meta``-device
    skeleton (no memory, no compute): ``model.train()`` and ``model.zero_grad()`` (the trainer clips
    the LoRA parameters, listed once, as the bare loop does)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, LlamaConfig

    config = LlamaConfig(
        vocab_size=128256,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        tie_word_embeddings=False,
    )
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    lora = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.1, target_modules=["q_proj", "v_proj", "lm_head"])
    model = get_peft_model(model, lora)
    walks = {"train()": model.train, "zero_grad()": model.zero_grad}
    out = {}
    for name, walk in walks.items():
        walk()
        start = time.process_time()
        for _ in range(repeats):
            walk()
        out[name] = 1e3 * (time.process_time() - start) / repeats
    return out


def host_time_per_layer(work: Path, examples: list[dict], device, steps: int = 8) -> tuple[float, float]:
    """(fixed, per decoder layer) CPU ms of the bare step's host work: the bare step on tiny Llamas of
    2 and 6 layers (hidden 64, where the arithmetic is negligible and the time is Python, the
    dispatcher and the allocator: what an eager step costs the host whatever the device)."""
    from lm_eval_evidential.testing.tiny import build_tiny_model
    from lm_eval_evidential.training.config import TrainConfig

    config = TrainConfig(output_dir="unused")
    batch = examples[:4]
    cpu = {}
    for layers in (2, 6):
        folder = build_tiny_model(work / f"tiny-{layers}", num_layers=layers, seed=0, tokenizer_from=work / "tiny")
        bare = BareStep(folder, config, device, Timer(lambda: None), pad_id=0)
        for _ in range(2):
            bare.step(batch)
        start = time.process_time()
        for _ in range(steps):
            bare.step(batch)
        cpu[layers] = 1e3 * (time.process_time() - start) / steps
    per_layer = (cpu[6] - cpu[2]) / 4
    return cpu[2] - 2 * per_layer, per_layer


def estimate_h100(
    tokens_per_question: float, trainer_host_ms: float, walks: dict, host_layers: tuple, batch_size: int = 4
) -> dict:
    """One epoch of OBQA (4,957 questions) on Llama-3-8B on one H100, from measured and stated parts.

    Measured on this host (CPU time): ``tokens_per_question`` (mean prompt length of the training data
    with a real tokenizer); ``host_layers`` = (fixed, per layer) ms of an eager bare step's host work
    (:func:`host_time_per_layer`), scaled to 32 layers; ``trainer_host_ms``, the trainer's own host
    time per step beyond the bare loop's (tiny model); ``walks``, the per-step walks over a
    Llama-3-8B LoRA's modules and parameters (:func:`llama3_8b_host_walks`). Stated: 7.50e9
    non-embedding parameters; a LoRA step's ~4 N FLOPs per token (forward 2N, the backward through the
    frozen weights 2N, no weight gradients but the adapter's); H100 SXM dense bf16 peak 989 TFLOP/s
    at an assumed 40%; 3.35 TB/s to read the 16 GB of bf16 weights twice a step. The device works
    while the host issues the next kernels, so a step takes the larger of the device's time and the
    host's (a kernel launch, ~5 us, is not in the host figure: not measurable without a GPU).
    """
    params = 7.50e9
    steps = math.ceil(OBQA_TRAIN_QUESTIONS / batch_size)
    tokens = tokens_per_question * batch_size
    compute_s = 4 * params * tokens / (0.40 * 989e12)
    memory_s = 2 * 16.06e9 / 3.35e12
    device_ms = 1e3 * max(compute_s, memory_s)
    eager_ms = host_layers[0] + 32 * host_layers[1]
    host_ms = eager_ms + trainer_host_ms + sum(walks.values())
    step_ms = max(device_ms, host_ms)
    return {
        "steps": steps,
        "tokens_per_step": tokens,
        "compute_ms": 1e3 * compute_s,
        "memory_ms": 1e3 * memory_s,
        "eager_ms": eager_ms,
        "host_layers_ms": list(host_layers),
        "walks_ms": walks,
        "trainer_host_ms": trainer_host_ms,
        "host_ms": host_ms,
        "step_ms": step_ms,
        "epoch_min": steps * step_ms / 60e3,
        "paper_run_h": 10080 * step_ms / 3600e3,
    }


# ---------------------------------------------------------------------------- models and main
def model_folder(name: str, work: Path) -> Path:
    if name == "tiny":
        from lm_eval_evidential.testing.tiny import build_tiny_model

        return build_tiny_model(work / "tiny", seed=0)
    if name == "smollm2":
        from lm_eval_evidential.testing.smollm2 import smollm2_checkpoint

        return smollm2_checkpoint()
    raise SystemExit(f"unknown model {name!r}: choose from tiny, smollm2")


def report(model: str, r: dict, device) -> None:
    a, b = r["ms_step"]["a"], r["ms_step"]["b"]
    print(
        f"{model:8} {r['method']:7} (a) bare step {a:10.1f} ms/step {r['us_token']['a']:9.1f} us/token "
        f"{r['peak_mb']['a']:8.1f} MB added peak {r['cpu_ms_step']['a']:10.1f} CPU ms/step"
    )
    print(
        f"{'':8} {'':7} (b) train     {b:10.1f} ms/step {r['us_token']['b']:9.1f} us/token "
        f"{r['peak_mb']['b']:8.1f} MB added peak {r['cpu_ms_step']['b']:10.1f} CPU ms/step"
    )
    blocks = ", ".join(f"{x:.0f}/{y:.0f}" for x, y in zip(r["blocks_ms_step"]["a"], r["blocks_ms_step"]["b"]))
    verdict = "met" if min(r["ratio"], r["cpu_ratio"]) >= GOAL else "NOT met"
    print(
        f"{'':17} throughput (b)/(a) = {r['ratio']:.2f} wall, {r['cpu_ratio']:.2f} CPU (goal >= {GOAL}: {verdict}); "
        f"{r['steps']} steps each in {r['rounds']} interleaved blocks, a/b ms/step per block: {blocks}; "
        f"1-min load {min(r['load']):.1f}-{max(r['load']):.1f}"
    )
    pa, pb = r["parts_cpu_ms_step"]["a"], r["parts_cpu_ms_step"]["b"]
    rest_a = r["cpu_ms_step"]["a"] - sum(pa.values())
    rest_b = r["cpu_ms_step"]["b"] - sum(pb.values())
    cells = [f"{k} {pa[k]:.2f}/{pb[k]:.2f}" for k in pb] + [f"the rest {rest_a:.2f}/{rest_b:.2f}"]
    print(f"{'':17} where it goes, CPU ms/step (a)/(b): " + "; ".join(cells))
    log_amort = r["log_ms"] / USER_LOGGING_STEPS
    ckpt_amort = r["checkpoint_ms"] / USER_SAVE_STEPS
    epoch_steps = math.ceil(r["num_examples"] / r["batch_size"])
    print(
        f"{'':17} apart: a log line {r['log_ms']:.1f} ms ({log_amort:.2f} ms/step at every {USER_LOGGING_STEPS}), "
        f"a checkpoint {r['checkpoint_ms']:.0f} ms ({ckpt_amort:.2f} ms/step at every {USER_SAVE_STEPS}), "
        f"tokenisation {1e3 * r['tokenisation_s']:.0f} ms once per run "
        f"({1e3 * r['tokenisation_s'] / epoch_steps:.2f} ms/step over one epoch of {epoch_steps} steps), "
        f"final save {1e3 * r['final_save_s']:.0f} ms; with logging and checkpoints amortised "
        f"(b)/(a) = {a / (b + log_amort + ckpt_amort):.2f}"
    )
    print(
        f"{'':17} padding: {100 * r['pad_share']:.1f}% of the tokens in these batches are pads "
        f"(random batches of the same data: {100 * r['random_pad_share']:.1f}%); "
        f"{r['real_tokens_per_step']:.0f} real tokens per step"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="tiny,smollm2", help="comma-separated: tiny, smollm2")
    parser.add_argument("--methods", default="edl,ib_edl", help="comma-separated: edl, ib_edl, softmax")
    parser.add_argument(
        "--steps", type=int, default=None, help=f"timed steps per block and way (default: {DEFAULT_STEPS})"
    )
    parser.add_argument("--rounds", type=int, default=2, help="interleaved blocks of (b) then (a)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps of (b) before the first block")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: see the module doc)")
    parser.add_argument(
        "--device", default=None, help="default: cuda when available (where the Trainer runs), else cpu"
    )
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast in both ways (GPU)")
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--record", type=Path, default=None, help="the run's record (default: in benchmarks/results/)")
    args = parser.parse_args(argv)

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    from lm_eval_evidential.testing.tiny import sample_data_dir

    os.environ.setdefault("EVIDENTIAL_DATA_DIR", str(sample_data_dir()))
    torch.set_num_threads(args.threads)
    from lm_eval_evidential.modeling.threads import THREADS_ENV

    os.environ[THREADS_ENV] = str(args.threads)  # (b)'s train() keeps it (it would time 1 thread against 2)
    # (b) runs where transformers' Trainer puts it (the GPU when there is one); (a) follows
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    print(
        f"# {platform.machine()}, {os.cpu_count()} CPUs, device {device}, torch {torch.__version__}, "
        f"threads {torch.get_num_threads()}, batch {args.batch_size}, task {TASK} train "
        f"({os.environ['EVIDENTIAL_DATA_DIR']}), 1-min load at start {os.getloadavg()[0]:.1f}"
    )
    results = {}
    with tempfile.TemporaryDirectory(prefix="bench_train.") as tmp:
        work = Path(tmp)
        for model in args.models.split(","):
            folder = model_folder(model, work)
            for method in args.methods.split(","):
                run_args = argparse.Namespace(**{**vars(args), "steps": args.steps or DEFAULT_STEPS.get(model, 2)})
                r = measure(folder, method, run_args, device, work)
                examples = _examples(folder)
                r["random_pad_share"] = random_batch_padding(examples, args.batch_size)
                r["num_examples"] = len(examples)
                results[f"{model}/{method}"] = r
                report(model, r, device)
                sys.stdout.flush()
        first = args.methods.split(",")[0]
        tiny, real = results.get(f"tiny/{first}"), results.get(f"smollm2/{first}")
        if tiny is not None and real is not None:  # host overhead from the tiny model, tokens from SmolLM2's tokenizer
            trainer_host = max(0.0, tiny["cpu_ms_step"]["b"] - tiny["cpu_ms_step"]["a"])
            est = estimate_h100(
                real["real_tokens_per_step"] / args.batch_size,
                trainer_host,
                llama3_8b_host_walks(),
                host_time_per_layer(work, _examples(work / "tiny"), device),
                args.batch_size,
            )
            results["h100_estimate"] = est
            walks = ", ".join(f"{k} {v:.1f}" for k, v in est["walks_ms"].items())
            fixed, per_layer = est["host_layers_ms"]
            print(
                f"Llama-3-8B, one H100, one OBQA epoch ({est['steps']} steps of {est['tokens_per_step']:.0f} tokens, "
                f"SmolLM2's tokenizer on this data): device max(compute {est['compute_ms']:.1f}, weights "
                f"{est['memory_ms']:.1f}) ms against host {est['host_ms']:.1f} ms (eager step {fixed:.1f} + 32 x "
                f"{per_layer:.2f} per layer = {est['eager_ms']:.1f}; trainer's own beyond the bare step "
                f"{est['trainer_host_ms']:.1f}; walks over a meta Llama-3-8B LoRA: {walks}; CPU ms on this host) "
                f"= {est['step_ms']:.1f} ms/step: {est['epoch_min']:.1f} min an epoch, "
                f"{est['paper_run_h']:.2f} h for the paper's 10,080 steps (a lower bound: no kernel launch costs)"
            )
    print(f"# 1-min load at the end {os.getloadavg()[0]:.1f}")
    write_record(args, results, device)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


def write_record(args, results: dict, device) -> None:
    """The run's record: per model and method, (b)/(a) in CPU and wall time and (b)'s CPU ms a step."""
    figures = []
    for name, r in results.items():
        if name == "h100_estimate":
            what = "H100 + Llama-3-8B estimate from measured parts (not measured), per step"
            figures.append({"what": what, "value": round(r["step_ms"], 1), "unit": "ms"})
            continue
        what = f"{name.replace('/', ', ')}: (b) train / (a) bare step"
        figures.append({"what": f"{what}, CPU", "value": round(r["cpu_ratio"], 2), "unit": "x", "limit": f">= {GOAL}"})
        figures.append({"what": f"{what}, wall", "value": round(r["ratio"], 2), "unit": "x"})
        figures.append(
            {
                "what": f"{name.replace('/', ', ')}: (b) CPU per step",
                "value": round(r["cpu_ms_step"]["b"], 1),
                "unit": "ms",
            }
        )
    shape = f"{args.models}; {args.methods}; batch {args.batch_size}, {args.threads} torch thread(s), device {device}"
    written = write_result("bench_train", command=command_line(), shape=shape, figures=figures, path=args.record)
    print(f"written: {written}")


def _examples(folder: Path) -> list[dict]:
    from transformers import AutoTokenizer

    from lm_eval_evidential.training import trainer as train_module

    task = train_module.load_task(TASK)
    examples, _ = train_module.encode_examples(
        task, train_module.training_docs(task), AutoTokenizer.from_pretrained(folder)
    )
    return examples


if __name__ == "__main__":
    sys.exit(main())
