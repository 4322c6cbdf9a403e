"""Data parallel on one machine: one process against two, on the same work, and the records they write.

    python benchmarks/bench_data_parallel.py [--hidden 384] [--layers 6] [--limit N] [--repeats 1] [--json FILE]

Builds, locally, a random Llama model (``--hidden``, ``--layers``; the tokenizer trained on the
bundled samples) with the paper's LoRA adapter, and scores every bundled sample question of
obqa_edl, arc_c_edl, arc_e_edl, csqa_edl and mmlu_math_edl (455 questions; ``--limit`` per task)
three ways, each a fresh launch of the same driver (what ``lm_eval`` runs: ``simple_evaluate``
with ``--model evidential``, then the tracker writes results and records; it skips only the
CLI's indexing of every stock lm-eval task, 10-20 s per process that no launch changes):

  1p x 2t   ``python driver.py``, one process, 2 torch threads
  1p x 1t   the same, 1 torch thread
  2p x 1t   ``ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2 driver.py``
            (the README's launch), 2 processes of 1 thread each

Reported per way (median over ``--repeats``):
  wall s      the whole launch: interpreter start, imports, model load, evaluation, writing;
  eval s      ``lm_eval.evaluator.evaluate`` (building requests, scoring, gathering, metrics), the
              slowest rank's;
  score s     time inside the model's ``loglikelihood``, the slowest rank's: the part data
              parallel divides;
and the speed-up of 2p x 1t over each one-process way, and whether the records of 2p x 1t equal
those of 1p x 2t: the same documents, once each, the same predictions, and the largest
difference in logits, evidence, alpha and vacuity.

On a 2-core machine the most two processes can gain over one process of two threads is what
two independent processes gain over two threads sharing one forward pass; the start-up (imports,
model load) is paid by each process in parallel and does not shrink.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from measure import command_line, write_result

ROOT = Path(__file__).resolve().parents[1]
TASKS = ["obqa_edl", "arc_c_edl", "arc_e_edl", "csqa_edl", "mmlu_math_edl"]
COLUMNS = ("wall", "eval", "score")
WAYS = {
    "1p x 2t": (1, 2),
    "1p x 1t": (1, 1),
    "2p x 1t": (2, 1),
}
DRIVER = r"""
import json, os, sys, time
import lm_eval_evidential  # noqa: F401  (import hook)
import lm_eval.evaluator
from lm_eval import simple_evaluate
from lm_eval.loggers import EvaluationTracker
from lm_eval.tasks import TaskManager
from lm_eval_evidential.harness.model import EvidentialLM
from lm_eval_evidential.tasks import tasks_dir

timing = {"score": 0.0, "eval": 0.0}

def timed(fn, key):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            timing[key] += time.perf_counter() - start
    return wrapper

EvidentialLM.loglikelihood = timed(EvidentialLM.loglikelihood, "score")
lm_eval.evaluator.evaluate = timed(lm_eval.evaluator.evaluate, "eval")
model_args, out, tasks, limit = sys.argv[1:5]
tracker = EvaluationTracker(output_path=out)
results = simple_evaluate(model="evidential", model_args=model_args, tasks=tasks.split(","), batch_size=8,
                          limit=int(limit) if limit != "all" else None, evaluation_tracker=tracker,
                          task_manager=TaskManager(include_path=str(tasks_dir()), include_defaults=False),
                          bootstrap_iters=0)
if results is not None:
    tracker.save_results_aggregated(results=results, samples=None)
rank = int(os.environ.get("RANK", 0))
with open(os.path.join(out, f"timing_rank{rank}.json"), "w") as fh:
    json.dump(timing, fh)
"""


def run(way: str, driver: Path, model: Path, adapter: Path, mirror: Path, work: Path, limit: int | None) -> dict:
    processes, threads = WAYS[way]
    out = Path(tempfile.mkdtemp(dir=work, prefix=way.replace(" ", "") + "_"))
    launcher = [sys.executable]
    if processes > 1:
        launcher += ["-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", str(processes)]
    cmd = [
        *launcher,
        str(driver),
        f"pretrained={model},peft={adapter},dtype=float32,device=cpu",
        str(out),
        ",".join(TASKS),
        str(limit or "all"),
    ]
    env = {
        **os.environ,
        "EVIDENTIAL_DATA_DIR": str(mirror),
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "ACCELERATE_USE_CPU": "1",
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=work, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-6000:])
        raise SystemExit(f"{way} failed (exit {proc.returncode})")
    ranks = [json.loads(p.read_text()) for p in sorted(out.glob("timing_rank*.json"))]
    return {
        "wall": wall,
        "eval": max(r["eval"] for r in ranks),
        "score": max(r["score"] for r in ranks),
        "ranks": len(ranks),
        "out": out,
    }


def compare_records(a: Path, b: Path) -> dict:
    import numpy as np

    from lm_eval_evidential.records import load_records

    worst = {"docs_once": True, "pred_equal": True, "max_abs_diff": 0.0}
    for task in TASKS:
        ra, rb = load_records(a, task), load_records(b, task)
        once = len(set(rb.doc_id.tolist())) == len(rb.doc_id) and sorted(ra.doc_id.tolist()) == sorted(
            rb.doc_id.tolist()
        )
        worst["docs_once"] &= bool(once)
        ia, ib = np.argsort(ra.doc_id), np.argsort(rb.doc_id)
        worst["pred_equal"] &= bool(np.array_equal(ra.pred[ia], rb.pred[ib]))
        for name in ("logits", "evidence", "alpha", "vacuity"):
            x, y = np.asarray(getattr(ra, name), float)[ia], np.asarray(getattr(rb, name), float)[ib]
            both = ~(np.isnan(x) & np.isnan(y))
            worst["max_abs_diff"] = max(worst["max_abs_diff"], float(np.nanmax(np.abs(x - y)[both], initial=0.0)))
    return worst


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--hidden", type=int, default=384)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--limit", type=int, default=None, help="questions per task (default: all bundled ones)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None, help="the run's record (default: in benchmarks/results/)")
    args = ap.parse_args(argv)

    from lm_eval_evidential.testing.tiny import build_lora_adapter, build_tiny_model, sample_data_dir

    with tempfile.TemporaryDirectory(prefix="bench_dp_") as tmp:
        work = Path(tmp)
        driver = work / "driver.py"
        driver.write_text(DRIVER)
        model = build_tiny_model(
            work / "model", hidden_size=args.hidden, num_layers=args.layers, num_heads=max(1, args.hidden // 64), seed=0
        )
        adapter = build_lora_adapter(model, work / "adapter", seed=1)
        runs: dict[str, list[dict]] = {way: [] for way in WAYS}
        for _ in range(args.repeats):
            for way in WAYS:  # interleaved, so that a change in the machine's load hits every way
                runs[way].append(run(way, driver, model, adapter, sample_data_dir(), work, args.limit))
        med = {way: {k: statistics.median(r[k] for r in rs) for k in COLUMNS} for way, rs in runs.items()}
        same = compare_records(runs["1p x 2t"][-1]["out"], runs["2p x 1t"][-1]["out"])

    n_ranks = {way: rs[-1]["ranks"] for way, rs in runs.items()}
    print(
        f"model: Llama hidden {args.hidden}, {args.layers} layers, float32, LoRA q/v/lm_head; "
        f"tasks {','.join(TASKS)}; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; "
        f"median of {args.repeats}"
    )
    print(f"{'way':<9} {'ranks':>5}" + "".join(f" {c + ' s':>8}" for c in COLUMNS))
    for way in WAYS:
        print(f"{way:<9} {n_ranks[way]:>5}" + "".join(f" {med[way][c]:>8.1f}" for c in COLUMNS))
    for base in ("1p x 2t", "1p x 1t"):
        ratios = ", ".join(f"{c} {med[base][c] / med['2p x 1t'][c]:.2f}x" for c in COLUMNS)
        print(f"speed-up of 2p x 1t over {base}: {ratios}")
    print(
        f"records 2p x 1t vs 1p x 2t: every doc once {same['docs_once']}, predictions equal {same['pred_equal']}, "
        f"max |diff| {same['max_abs_diff']:.2e}"
    )
    figures = [
        {"what": f"{way}, {column}", "value": round(med[way][column], 1), "unit": "s"}
        for way in WAYS
        for column in COLUMNS
    ]
    figures.append({"what": "2p x 1t records vs 1p x 2t: max |diff|", "value": float(same["max_abs_diff"]), "unit": ""})
    shape = (
        f"random Llama, hidden {args.hidden}, {args.layers} layers, LoRA; {','.join(TASKS)}, median of {args.repeats}"
    )
    written = write_result("bench_data_parallel", command=command_line(), shape=shape, figures=figures, path=args.json)
    print(f"written: {written}")
    return 0 if same["docs_once"] and same["pred_equal"] and n_ranks["2p x 1t"] == 2 else 1


if __name__ == "__main__":
    raise SystemExit(main())
