"""The GPU check: a Llama-3-8B-shaped model with random weights, scored four ways in one run.

Prepared for an offline machine with an accelerator, Python, torch and transformers (peft, accelerate,
tokenizers, numpy, scipy, scikit-learn, pandas, pyarrow, pyyaml, jinja2, requests, psutil, tqdm) but
nothing else of ours: nothing is downloaded there. The model is built from its config on the device,
the tokenizer is trained on the bundled sample questions, and the questions are read from
``gpu_check_questions.json`` beside this script: obqa_edl's 120 bundled OpenBookQA-format questions and
25 training questions with their answers, rendered by the task here (``--save-requests``; a test keeps
the file equal to what the task renders now, and the requests built from it equal lm-eval's own, its
``first_n`` sampler for the fixed prefix). So the machine needs neither ``datasets`` nor the rest of
lm-eval's dependencies; it needs this repository and one wheel, lm-eval 0.4.13's
(``lm_eval-0.4.13-py3-none-any.whl``, 9 MB, pure Python), installed without its dependencies::

    pip download --no-deps -d wheels lm_eval==0.4.13                      # where there is an index
    # copy the repository and wheels/ to the machine, then in the repository's root there:
    python3 -m pip install --no-deps --no-index --target /tmp/site wheels/lm_eval-0.4.13-py3-none-any.whl
    HF_HUB_OFFLINE=1 PYTHONPATH=/tmp/site:$PWD python3 benchmarks/gpu_check.py --json gpu_check.json

On an NVIDIA H200 that command, with a small-shape run first, took 62 s of wall time. The model
was built in 6.9 s, and the run did about 5 PFLOP of forwards. It needs 16 GB of weights in
bfloat16. On the CPU, at the test's shape (``tests/benchmarks/test_gpu_check.py`` runs it so, with
``datasets`` and the others made unimportable)::

    python benchmarks/gpu_check.py --shape small --device cpu --dtype float32 --questions 8 --threads 1

Ways, each timed as the harness's ``lm.loglikelihood(requests)`` (best of ``--repeats``, after one
warm-up call), on the same questions zero-shot and behind one fixed ``--shots``-question prefix, all on
one torch CPU thread count (``--threads``):

- ``bare``: the model's forward on each question's prompt, tokenised and batched before the clock
  (left-padded, position ids, longest first, ``logits_to_keep=1``), answer logits gathered on the
  device and copied to the host once: the device's limit.
- ``evidential``: ``--model evidential`` (:class:`~lm_eval_evidential.harness.model.EvidentialLM`) with
  ``prefix_cache=False``, and (``evidential cached``, few-shot) with the prefix cache.
- ``hf``: lm-eval's own ``--model hf`` (``HFLM``), few-shot only.

Both models are given the same model object (``pretrained=<model>``; the harness's path for an
already-built model), so no weights are written or read. ``--model evidential``'s start-up check of
lm-eval imports lm-eval's task manager and evaluator, which need ``datasets``; where it is missing the
check is narrowed to the ``lm_eval.models`` names this script's path uses, and a ``#`` line says so.
Prints one JSON line per measurement (questions per second and, on CUDA, peak device memory), then the
ratios, the device's name, the versions and the machine's load; ``--json PATH`` writes the run's record
(``measure.write_result``, the format of ``results/``) after every measurement, so a run cut short keeps
what it measured. A way that fails prints its traceback and the others still run (exit status 1). The
Llama-3-8B shape is 32 layers, hidden 4,096, 32 query and 8 key/value heads, MLP 14,336, vocabulary
128,256 (an 80 GB card holds it and ``--model hf``'s full-vocabulary logits at the default batch size).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # bench_vllm's request builder and measure's record, when imported as a module

from bench_vllm import render_questions, requests_from  # noqa: E402 (after the path above)
from measure import command_line, write_result  # noqa: E402

#: obqa_edl's sample questions as the task renders them (``--save-requests`` wrote it; a test checks it is
#: what the task renders now), for machines without ``datasets``: every one of the 120, and 25 training
#: questions with their answers for the few-shot prefix.
QUESTIONS = HERE / "gpu_check_questions.json"
RENDERED_QUESTIONS, RENDERED_SHOTS = 120, 25

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


def save_requests(path: Path) -> None:
    """Render obqa_edl's sample questions by the task (this needs ``datasets``) and write them to ``path``."""
    from lm_eval_evidential.files import atomic_write_text

    rendered = render_questions(RENDERED_QUESTIONS, RENDERED_SHOTS)
    atomic_write_text(path, json.dumps(rendered, indent=1, ensure_ascii=False) + "\n")
    print(f"written: {path} ({len(rendered['questions'])} questions, {len(rendered['shots'])} shots)")


@contextlib.contextmanager
def harness_check_for_this_machine():
    """``--model evidential``'s start-up check of lm-eval, narrowed where ``datasets`` cannot be imported.

    The check imports lm-eval's task manager and evaluator, which need ``datasets`` (and ``dill``); this
    script calls ``lm.loglikelihood`` on the model itself and uses neither. Without ``datasets`` the check
    covers the part of its inventory this script's path uses (``lm_eval.models.*``) and says so; with it,
    the whole check runs as in every evaluation.
    """
    from unittest import mock

    from lm_eval_evidential.errors import HarnessVersionError
    from lm_eval_evidential.integration import hooks
    from lm_eval_evidential.lm_eval_compat import INTERNALS, PUBLIC, missing_internals

    if importlib.util.find_spec("datasets") is not None:
        yield
        return
    used = tuple(entry for entry in (*INTERNALS, *PUBLIC) if entry.startswith("lm_eval.models."))

    def check_models_only(extra: tuple[str, ...] = ()) -> None:
        missing = missing_internals(used + extra)
        if missing:
            raise HarnessVersionError(f"lm-eval lacks {', '.join(missing)}: install lm-eval 0.4.13")

    print(f"# no datasets here: the harness check covers {len(used)} lm_eval.models names", flush=True)
    with mock.patch.object(hooks, "check_harness", check_models_only):
        yield


def _measure_ways(args, model, tok, runs: dict, record) -> list[str]:
    """Every way of ``args.ways`` on ``runs`` ({shots: (requests, questions)}); a way that fails prints its
    traceback and the others still run. Returns the failed ways."""
    import torch

    from lm_eval_evidential.harness.model import EvidentialLM

    def evidential(cache: bool) -> None:
        with harness_check_for_this_machine():
            lm = EvidentialLM(
                pretrained=model,
                tokenizer=tok,
                batch_size=args.batch_size,
                prefix_cache=cache,
                threads=torch.get_num_threads(),  # the count every way runs on, not a count of its own picking
            )
        for s, (requests, n) in runs.items():
            if s or not cache:  # zero-shot prompts share nothing worth caching
                name = "evidential cached" if cache else "evidential"
                record(measure(name, lm.loglikelihood, requests, n, args.device, args.repeats, shots=s))
            lm.evidence.take()

    def hf() -> None:
        from lm_eval.models.huggingface import HFLM

        lm = HFLM(pretrained=model, tokenizer=tok, batch_size=args.batch_size)
        requests, n = runs[args.shots]
        record(measure("hf", lm.loglikelihood, requests, n, args.device, args.repeats, shots=args.shots))

    def bare() -> None:
        for s, (requests, n) in runs.items():
            score = bare_forward(model, tok, requests, args.batch_size)
            record(measure("bare", score, requests, n, args.device, args.repeats, shots=s))

    steps = {"bare": [bare], "evidential": [lambda: evidential(False), lambda: evidential(True)], "hf": [hf]}
    failed = []
    for way in args.ways.split(","):
        for step in steps[way]:
            try:
                step()
            except Exception:  # the other ways still run: their figures are what the run is for
                traceback.print_exc()
                failed.append(way)
            gc.collect()
            if args.device.startswith("cuda"):
                torch.cuda.empty_cache()
    return failed


RATIOS = (  # (label, numerator, denominator); "{s}" is the few-shot prefix's length
    ("evidential / bare, zero-shot", ("evidential", 0), ("bare", 0)),
    ("evidential / bare, {s}-shot", ("evidential", "s"), ("bare", "s")),
    ("evidential {s}-shot / zero-shot", ("evidential", "s"), ("evidential", 0)),
    ("evidential {s}-shot, prefix cache on / off", ("evidential cached", "s"), ("evidential", "s")),
    ("evidential {s}-shot cached / zero-shot", ("evidential cached", "s"), ("evidential", 0)),
    ("evidential / hf, {s}-shot", ("evidential", "s"), ("hf", "s")),
)


def ratios(rows: list[dict], shots: int) -> dict[str, float]:
    """The ratios of questions per second that both of whose ways were measured."""
    qps = {(r["way"], r["shots"]): r["q_per_s"] for r in rows}
    found = {}
    for label, *pair in RATIOS:
        a, b = ((way, shots if s == "s" else s) for way, s in pair)
        if a in qps and b in qps:
            found[label.format(s=shots)] = qps[a] / qps[b]
    return found


def figures_of(rows: list[dict], shots: int, repeats: int) -> list[dict]:
    """The record's figures: each measurement's questions per second, then the ratios."""
    figures = []
    for r in rows:
        note = f"{r['seconds']:.3f} s for {r['questions']} questions, best of {repeats}"
        if r["peak_mb"] is not None:
            note += f"; peak {r['peak_mb']:.0f} MiB"
        figures.append({"what": f"{r['way']}, {r['shots']}-shot", "value": round(r["q_per_s"], 3), "unit": "q/s"})
        figures[-1]["note"] = note
    figures += [{"what": k, "value": round(v, 3), "unit": "x"} for k, v in ratios(rows, shots).items()]
    return figures


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), default="llama3-8b")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--questions", type=int, default=120, help="OBQA-format sample questions (at most 120)")
    ap.add_argument(
        "--shots", type=int, default=5, help=f"questions in the fixed few-shot prefix (at most {RENDERED_SHOTS})"
    )
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ways", default="bare,evidential,hf")
    ap.add_argument(
        "--threads", type=int, default=None, help="torch's CPU threads, the same for every way (default: torch's)"
    )
    ap.add_argument(
        "--requests", type=Path, default=QUESTIONS, help="the rendered questions (default: the bundled file)"
    )
    ap.add_argument(
        "--save-requests", type=Path, default=None, help="render the questions by the task, write them, stop"
    )
    ap.add_argument("--json", type=Path, default=None, help="write the run's record here, after every measurement")
    args = ap.parse_args(argv)
    unknown = set(args.ways.split(",")) - {"bare", "evidential", "hf"}
    if unknown:
        ap.error(f"--ways: unknown {sorted(unknown)}; choose among bare, evidential, hf")
    if args.save_requests is not None:
        save_requests(args.save_requests)
        return 0

    import torch
    import transformers

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    rendered = json.loads(args.requests.read_text(encoding="utf-8"))
    runs = {s: requests_from(rendered, args.questions, s) for s in (0, args.shots)}
    if args.device.startswith("cuda"):
        card = torch.cuda.get_device_name(torch.device(args.device))
    else:
        card = args.device
    threads = torch.get_num_threads()
    versions = f"torch {torch.__version__}, transformers {transformers.__version__}, lm_eval {_version('lm_eval')}"
    print(
        f"# device {card}, shape {args.shape}, dtype {args.dtype}, batch size {args.batch_size}, "
        f"{threads} CPU thread{'s' * (threads != 1)}; {versions}"
    )
    print(f"# load before: {os.getloadavg()}", flush=True)
    rows: list[dict] = []
    shape = f"{args.shape} (random weights), {args.dtype} on {card}, batch {args.batch_size}, "
    shape += f"{runs[0][1]} obqa_edl questions, 0- and {args.shots}-shot"

    def record(row: dict) -> None:
        rows.append(row)
        if args.json is not None:  # after every measurement: a run cut short keeps what it measured
            figures = figures_of(rows, args.shots, args.repeats)
            write_result(
                "gpu_check", command=command_line(), shape=shape, figures=figures, path=args.json, notes=versions
            )

    with tempfile.TemporaryDirectory(prefix="gpu_check.") as tmp:
        start = time.perf_counter()
        model, tok = build_model(args.shape, args.device, args.dtype, Path(tmp), args.seed)
        print(f"# model built on {model.device} in {time.perf_counter() - start:.1f} s", flush=True)
        failed = _measure_ways(args, model, tok, runs, record)
    for label, value in ratios(rows, args.shots).items():
        print(f"{label}: {value:.2f}")
    print(f"# load after: {os.getloadavg()}")
    if failed:
        print(f"# failed: {', '.join(failed)} (tracebacks above)", file=sys.stderr)
    return 1 if failed else 0


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
