"""Throughput and added memory of ``--model evidential`` against the bare forward pass and ``--model hf``.

    python benchmarks/bench_throughput.py [--vocab 32000,128256] [--questions 300]
        [--batch-size 8] [--repeats 3] [--hidden 256] [--layers 4] [--threads N] [--quick]

Builds, locally, a random Llama model per vocabulary size (hidden ``--hidden``, ``--layers``
layers, the output layer 32,000 or 128,256 rows like Llama-2/3, the tokenizer padded with
unused entries to the same size as theirs are) and a LoRA adapter on q_proj, v_proj and
lm_head (the paper's). Writes ``--questions`` generated questions into a temporary offline
mirror, half OpenBookQA-shaped (K=4, task ``obqa_edl``), half CommonsenseQA-shaped (K=5,
``csqa_edl``), and scores them three ways, each in its own fresh subprocess:

(a) limit       the same PeftModel's forward on the same prompts (task templates), tokenised,
                left-padded with position ids, sorted longest first, in batches of
                ``--batch-size``, ``logits_to_keep=1``, keeping the answer-token logits. No harness.
(b) evidential  ``lm_eval.simple_evaluate(model=EvidentialLM(...), tasks=[obqa_edl, csqa_edl])``.
(c) hf          the same with the harness's own ``HFLM(..., peft=adapter)``.

Reported per way (medians over ``--repeats`` runs):
  q/s model   questions / wall seconds spent in the model's ``loglikelihood`` (for (a): the forward loop);
  q/s e2e     questions / wall seconds of ``lm_eval.evaluator.evaluate`` (building requests from the
              docs, tokenising, the model, process_results, aggregation; not the dataset loading
              or simple_evaluate's environment report). For (a) this equals q/s model;
  q/cpu-s     the same two rates per second of process CPU time;
  added MB    peak RSS during the evaluation minus RSS once the model is loaded (and warmed up
              with one forward); the peak is the kernel's VmHWM after resetting it through
              /proc/self/clear_refs, or a 1 ms psutil sampling thread where that is unavailable;
  acc         accuracy over all questions: the three ways must agree (argmax of the answer logits);
  fwd share   the fraction of the e2e time spent inside the model's forward calls (timed by hooks);
  forwards    the number of forward calls: each distinct prompt once means ceil(questions / batch).
The ratios b/a and b/c are computed per repeat and their median is shown. Because (a) and (b)
run the same forward passes, b/a is also estimated as the ratio of their forward shares, each
measured inside its own process, which other load on the machine barely moves; the b/a verdict
uses that estimate (wall and CPU ratios are printed next to it).
Goals at the 128k vocabulary: b/a >= 0.9 and b/c >= 1.2 in throughput, b/c <= 0.5 in added memory.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASKS = ["obqa_edl", "csqa_edl"]
WAYS = ("limit", "evidential", "hf")
LETTERS = "ABCDE"


# ---------------------------------------------------------------------------- setup (parent)
def _word_pool() -> list[str]:
    from lm_eval_evidential.testing.tiny import _sample_records

    words = set()
    for question, options, _ in _sample_records():
        for text in [question, *options]:
            words.update(w.strip("?,.!;:\"'()").lower() for w in text.split())
    return sorted(w for w in words if w.isalpha())


def write_mirror(root: Path, n_questions: int, seed: int) -> tuple[int, int]:
    """Generated questions in hub schema: n//2 OBQA (K=4) and the rest CSQA (K=5)."""
    rng = random.Random(seed)
    words = _word_pool()

    def sentence(lo, hi):
        return " ".join(rng.choice(words) for _ in range(rng.randint(lo, hi)))

    n_obqa = n_questions // 2
    n_csqa = n_questions - n_obqa
    obqa = root / "allenai" / "openbookqa" / "main" / "test.jsonl"
    csqa = root / "tau" / "commonsense_qa" / "default" / "validation.jsonl"
    for path in (obqa, csqa):
        path.parent.mkdir(parents=True, exist_ok=True)
    with open(obqa, "w", encoding="utf-8") as fh:
        for i in range(n_obqa):
            fh.write(json.dumps({
                "id": f"bench-obqa-{i}", "question_stem": sentence(6, 40) + "?",
                "choices": {"text": [sentence(1, 8) for _ in range(4)], "label": list("ABCD")},
                "answerKey": rng.choice("ABCD"),
            }) + "\n")  # fmt: skip
    with open(csqa, "w", encoding="utf-8") as fh:
        for i in range(n_csqa):
            fh.write(json.dumps({
                "id": f"bench-csqa-{i}", "question": sentence(6, 40) + "?", "question_concept": rng.choice(words),
                "choices": {"label": list("ABCDE"), "text": [sentence(1, 8) for _ in range(5)]},
                "answerKey": rng.choice("ABCDE"),
            }) + "\n")  # fmt: skip
    return n_obqa, n_csqa


def pad_tokenizer(model_dir: Path, vocab: int) -> None:
    """Give the tokenizer as many entries as the model's output layer, as Llama-2/3's have.

    HFLM resizes the embeddings to len(tokenizer) whenever it loads a PEFT adapter and the two
    differ, which would cut the 128,256-row head and make the lm_head LoRA not fit. The extra
    BPE entries have no merges, so no text ever encodes to them.
    """
    path = model_dir / "tokenizer.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    table = data["model"]["vocab"]
    start = max(table.values()) + 1
    for i in range(start, vocab):
        table[f"<unused_{i}>"] = i
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)


def build_models(work: Path, vocab: int, hidden: int, layers: int) -> tuple[Path, Path]:
    from lm_eval_evidential.testing.tiny import build_lora_adapter, build_tiny_model

    heads = max(1, hidden // 64)
    model = build_tiny_model(work / f"model_{vocab}", hidden_size=hidden, num_layers=layers, num_heads=heads,
                             model_vocab_size=vocab, seed=0)  # fmt: skip
    pad_tokenizer(model, vocab)
    adapter = build_lora_adapter(model, work / f"adapter_{vocab}", seed=1)
    return model, adapter


# ---------------------------------------------------------------------------- worker (child)
class PeakRSS:
    """Peak resident memory from now on: kernel VmHWM after a reset, else a sampling thread."""

    def __init__(self):
        import psutil

        self._proc = psutil.Process()
        self.method = "VmHWM"
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
            self._hwm()
        except OSError:
            self.method = "sampled"
        self._peak = self._proc.memory_info().rss
        self._stop = None
        if self.method == "sampled":
            import threading

            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()

    @staticmethod
    def _hwm() -> int:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        raise OSError("no VmHWM")

    def _sample(self):
        while not self._stop.is_set():
            self._peak = max(self._peak, self._proc.memory_info().rss)
            time.sleep(0.001)

    def stop(self) -> int:
        if self._stop is not None:
            self._stop.set()
            self._thread.join()
            return max(self._peak, self._proc.memory_info().rss)
        return self._hwm()


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def _prompts(task_manager):
    """(prompt, letters, gold) of every evaluated doc, rendered by the tasks themselves."""
    tasks = task_manager.load(TASKS)["tasks"]
    out = []
    for name in TASKS:
        task = tasks[name]
        for doc in task.eval_docs:
            out.append((task.doc_to_text(doc), list(doc["letters"]), int(doc["gold"])))
    return out


def run_limit(model, tok, task_manager, batch_size: int) -> dict:
    import torch

    t0 = time.perf_counter()
    items = _prompts(task_manager)
    letter_ids = {x: tok.encode(" " + x, add_special_tokens=False)[0] for x in LETTERS}
    encoded = [tok.encode(p) for p, _, _ in items]
    order = sorted(range(len(items)), key=lambda i: -len(encoded[i]))
    pad = tok.pad_token_id
    batches = []
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        width = len(encoded[rows[0]])
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for r, i in enumerate(rows):
            ids[r, width - len(encoded[i]) :] = torch.tensor(encoded[i])
            mask[r, width - len(encoded[i]) :] = 1
        answer = torch.tensor([[letter_ids[x] for x in items[i][1]] + [letter_ids["A"]] * (5 - len(items[i][1])) for i in rows])
        batches.append((rows, ids, mask, (mask.cumsum(-1) - 1).clamp(min=0), answer))
    t1, c1 = time.perf_counter(), time.process_time()
    correct = 0
    with torch.inference_mode():
        for rows, ids, mask, pos, answer in batches:
            logits = model(input_ids=ids, attention_mask=mask, position_ids=pos, logits_to_keep=1, use_cache=False).logits[:, -1, :]
            z = logits.gather(1, answer).float()
            for r, i in enumerate(rows):
                k = len(items[i][1])
                correct += int(torch.argmax(z[r, :k])) == items[i][2]
    t2, c2 = time.perf_counter(), time.process_time()
    return {"t_model": t2 - t1, "t_e2e": t2 - t1, "c_model": c2 - c1, "c_e2e": c2 - c1, "t_prep": t1 - t0,
            "n": len(items), "correct": correct}  # fmt: skip


def run_harness(lm, task_manager) -> dict:
    import lm_eval
    import lm_eval.evaluator as ev

    spent = {"model": 0.0, "e2e": 0.0, "c_model": 0.0, "c_e2e": 0.0}
    inner = lm.loglikelihood

    def timed_loglikelihood(*args, **kwargs):
        t, c = time.perf_counter(), time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            spent["model"] += time.perf_counter() - t
            spent["c_model"] += time.process_time() - c

    lm.loglikelihood = timed_loglikelihood
    original_evaluate = ev.evaluate

    def timed_evaluate(*args, **kwargs):
        t, c = time.perf_counter(), time.process_time()
        try:
            return original_evaluate(*args, **kwargs)
        finally:
            spent["e2e"] += time.perf_counter() - t
            spent["c_e2e"] += time.process_time() - c

    ev.evaluate = timed_evaluate
    t0 = time.perf_counter()
    results = lm_eval.simple_evaluate(
        model=lm, tasks=TASKS, task_manager=task_manager, bootstrap_iters=0, log_samples=False, limit=None
    )
    t_all = time.perf_counter() - t0
    ev.evaluate = original_evaluate
    n = correct = 0
    for name in TASKS:
        size = results["n-samples"][name]["effective"]
        n += size
        correct += round(results["results"][name]["acc,none"] * size)
    return {"t_model": spent["model"], "t_e2e": spent["e2e"], "c_model": spent["c_model"], "c_e2e": spent["c_e2e"],
            "t_simple_evaluate": t_all, "n": n, "correct": correct}  # fmt: skip


def worker(args) -> dict:
    import gc
    import logging

    # Every import up front, so the baseline RSS holds the libraries and only the evaluation
    # adds to it.
    import lm_eval  # noqa: F401
    import lm_eval.evaluator  # noqa: F401
    import psutil  # noqa: F401
    import torch
    from lm_eval.tasks import TaskManager
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import lm_eval_evidential  # noqa: F401  (the import hook: --model evidential, our tasks)

    for name in ("lm_eval", "lm-eval", "transformers", "peft", "datasets", "lm_eval_evidential"):
        logging.getLogger(name).setLevel(logging.ERROR)
    if args.threads:
        torch.set_num_threads(args.threads)
    task_manager = TaskManager(include_defaults=False)

    way = args._worker
    if way == "limit":
        tok = AutoTokenizer.from_pretrained(args.model_dir)
        base = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=torch.float32)
        model = PeftModel.from_pretrained(base, args.adapter_dir).eval()
    else:
        from lm_eval.api.registry import get_model

        lm = get_model(way).create_from_arg_obj({
            "pretrained": str(args.model_dir), "peft": str(args.adapter_dir), "device": "cpu",
            "dtype": "float32", "batch_size": args.batch_size,
        })  # fmt: skip
        model = lm.model
    with torch.inference_mode():  # one-time kernel set-up is not part of either way's cost
        model(input_ids=torch.ones((args.batch_size, 32), dtype=torch.long), use_cache=False)
    # Time every call of the model itself: the same process's share of time outside the forward
    # pass is the harness's overhead, whatever else runs on the machine.
    fwd = {"s": 0.0, "calls": 0, "start": 0.0}

    def pre_hook(module, inputs):
        fwd["start"] = time.perf_counter()

    def post_hook(module, inputs, output):
        fwd["s"] += time.perf_counter() - fwd["start"]
        fwd["calls"] += 1

    model.register_forward_pre_hook(pre_hook)
    model.register_forward_hook(post_hook)
    gc.collect()
    base_rss = _rss()
    load_start = os.getloadavg()[0]
    peak = PeakRSS()
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    if way == "limit":
        out = run_limit(model, tok, task_manager, args.batch_size)
    else:
        out = run_harness(lm, task_manager)
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(str(args._out.with_suffix(".prof")))
    out.update(t_forward=fwd["s"], forwards=fwd["calls"], way=way, load_start=load_start, load_end=os.getloadavg()[0], rss_base=base_rss, rss_peak=peak.stop(), peak_method=peak.method, threads=torch.get_num_threads())
    return out


# ---------------------------------------------------------------------------- driver
def spawn(way: str, model_dir: Path, adapter_dir: Path, mirror: Path, args, out_file: Path) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_worker", way, "--model-dir", str(model_dir),
           "--adapter-dir", str(adapter_dir), "--batch-size", str(args.batch_size), "--_out", str(out_file)]  # fmt: skip
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    if args.profile:
        cmd += ["--profile", str(args.profile)]
    env = {**os.environ, "EVIDENTIAL_DATA_DIR": str(mirror), "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-8000:])
        raise SystemExit(f"worker {way} failed (exit {proc.returncode})")
    return json.loads(out_file.read_text())


def _median(xs):
    return statistics.median(xs) if xs else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", default=None, help="comma-separated output-layer sizes (default 32000,128256; quick: 32000)")
    ap.add_argument("--questions", type=int, default=None, help="generated questions, half K=4 half K=5 (default 300; quick: 24)")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=None, help="fresh-process runs per way (default 3; quick: 1)")
    ap.add_argument("--hidden", type=int, default=None, help="hidden size (default 256; quick: 64)")
    ap.add_argument("--layers", type=int, default=None, help="decoder layers (default 4; quick: 2)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads per worker (default 1: on a shared machine, OpenMP barriers across "
                         "2 threads stall whenever either is descheduled; 0 = torch's own choice)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="a small smoke test (tiny model, few questions, one repeat)")
    ap.add_argument("--json", type=Path, default=None, help="also write every run's raw figures here")
    ap.add_argument("--profile", type=Path, default=None,
                    help="folder: cProfile each run's evaluation into <vocab>_<way>_<repeat>.prof there (slows the runs)")
    ap.add_argument("--_worker", choices=WAYS, help=argparse.SUPPRESS)
    ap.add_argument("--_out", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--model-dir", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--adapter-dir", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args._worker:
        result = worker(args)
        tmp = args._out.with_suffix(".tmp")
        tmp.write_text(json.dumps(result))
        os.replace(tmp, args._out)
        return 0

    quick = args.quick
    vocabs = [int(v) for v in (args.vocab or ("32000" if quick else "32000,128256")).split(",")]
    args.questions = args.questions or (24 if quick else 300)
    args.repeats = args.repeats or (1 if quick else 3)
    hidden = args.hidden or (64 if quick else 256)
    layers = args.layers or (2 if quick else 4)
    if args.questions < 2 or args.batch_size < 1 or args.repeats < 1:
        ap.error("--questions must be >= 2, --batch-size and --repeats >= 1")

    runs: dict[tuple[int, str], list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_throughput.") as tmp:
        work = Path(tmp)
        n_obqa, n_csqa = write_mirror(work / "mirror", args.questions, args.seed)
        print(f"# {args.questions} questions ({n_obqa} K=4 obqa_edl, {n_csqa} K=5 csqa_edl), batch size "
              f"{args.batch_size}, {args.repeats} repeat(s); Llama hidden {hidden}, {layers} layers, LoRA r=8 "
              f"on q_proj/v_proj/lm_head; float32 on CPU", flush=True)  # fmt: skip
        built = {}
        for vocab in vocabs:
            t = time.perf_counter()
            built[vocab] = build_models(work, vocab, hidden, layers)
            print(f"# built vocab {vocab} in {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
        for rep in range(args.repeats):
            for vocab in vocabs:
                for way in WAYS:
                    t = time.perf_counter()
                    res = spawn(way, *built[vocab], work / "mirror", args, work / f"out_{vocab}_{way}_{rep}.json")
                    runs.setdefault((vocab, way), []).append(res)
                    prof = (work / f"out_{vocab}_{way}_{rep}.json").with_suffix(".prof")
                    if args.profile and prof.exists():
                        args.profile.mkdir(parents=True, exist_ok=True)
                        os.replace(prof, args.profile / f"{vocab}_{way}_{rep}.prof")
                    print(f"# repeat {rep + 1} vocab {vocab} {way}: {res['n'] / res['t_model']:.1f} q/s model, "
                          f"{(res['rss_peak'] - res['rss_base']) / 2**20:.1f} MB added ({time.perf_counter() - t:.0f} s)",
                          file=sys.stderr, flush=True)  # fmt: skip

    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch threads "
          f"{runs[(vocabs[0], 'limit')][0]['threads']}, peak via {runs[(vocabs[0], 'limit')][0]['peak_method']}")  # fmt: skip
    cols = [("q/s model", "t_model"), ("q/s e2e", "t_e2e"), ("q/cpu-s mdl", "c_model"), ("q/cpu-s e2e", "c_e2e")]
    head = f"{'vocab':>7}  {'way':<30}" + "".join(f"{c:>12}" for c, _ in cols) + f"{'added MB':>10}{'acc':>7}{'fwd share':>10}{'forwards':>9}"
    print(head)
    print("-" * len(head))
    labels = {"limit": "(a) bare forward (PeftModel)", "evidential": "(b) --model evidential", "hf": "(c) --model hf, peft="}
    added = lambda r: (r["rss_peak"] - r["rss_base"]) / 2**20  # noqa: E731
    verdicts = []
    for vocab in vocabs:
        accs = set()
        for way in WAYS:
            rs = runs[(vocab, way)]
            speeds = [_median([r["n"] / r[key] for r in rs]) for _, key in cols]
            acc = rs[0]["correct"] / rs[0]["n"]
            accs.update(round(r["correct"] / r["n"], 9) for r in rs)
            share = _median([r["t_forward"] / r["t_e2e"] for r in rs])
            print(f"{vocab:>7}  {labels[way]:<30}" + "".join(f"{v:>12.2f}" for v in speeds)
                  + f"{_median([added(r) for r in rs]):>10.1f}{acc:>7.3f}{share:>10.3f}{rs[0]['forwards']:>9d}")  # fmt: skip

        def ratio(num, den, key, vocab=vocab):
            pairs = zip(runs[(vocab, num)], runs[(vocab, den)])
            if key == "mem":
                return _median([added(a) / max(added(b), 1e-9) for a, b in pairs])
            return _median([(a["n"] / a[key]) / (b["n"] / b[key]) for a, b in pairs])

        r = {f"{num[0]}/{den[0]}": {key: ratio(num, den, key) for key in [k for _, k in cols] + ["mem"]}
             for num, den in (("evidential", "limit"), ("evidential", "hf"))}  # fmt: skip
        for name, label in (("e/l", "b/a (median of per-repeat ratios)"), ("e/h", "b/c")):
            print(f"{'':>7}  {label:<30}" + "".join(f"{r[name][k]:>12.2f}" for _, k in cols) + f"{r[name]['mem']:>10.2f}")
        # The same forward passes run in (a) and (b), so b/a is also the ratio of the time shares
        # spent in them, each measured inside its own process: insensitive to other load.
        share = lambda way, key, vocab=vocab: _median([r["t_forward"] / r[key] for r in runs[(vocab, way)]])  # noqa: E731
        r["e/l"]["share_model"] = share("evidential", "t_model") / share("limit", "t_model")
        r["e/l"]["share_e2e"] = share("evidential", "t_e2e") / share("limit", "t_e2e")
        print(f"{'':>7}  {'b/a from forward shares':<30}{r['e/l']['share_model']:>12.2f}{r['e/l']['share_e2e']:>12.2f}")
        if len(accs) != 1:
            print(f"{'':>7}  WARNING: the ways disagree on accuracy {sorted(accs)}; they did not score the same thing")
        verdicts.append((vocab, r["e/l"], r["e/h"]))
    loads = [x for rs in runs.values() for r in rs for x in (r["load_start"], r["load_end"])]
    print(f"# 1-min load average during the runs: {min(loads):.1f} to {max(loads):.1f} on {os.cpu_count()} CPUs "
          "(other processes on the machine make wall-clock figures noisy; CPU-time columns are less sensitive)")  # fmt: skip
    print()
    ok = lambda c: "met" if c else "NOT met"  # noqa: E731
    for vocab, ba, bc in verdicts:
        print(f"# vocab {vocab}: b/a >= 0.9 (from forward shares): {ok(ba['share_model'] >= 0.9)} in the model phase "
              f"({ba['share_model']:.2f}; wall {ba['t_model']:.2f}, CPU {ba['c_model']:.2f}), {ok(ba['share_e2e'] >= 0.9)} "
              f"end to end ({ba['share_e2e']:.2f}; wall {ba['t_e2e']:.2f}, CPU {ba['c_e2e']:.2f}); "
              f"b/c >= 1.2: {ok(bc['t_e2e'] >= 1.2)} ({bc['t_model']:.2f} model, {bc['t_e2e']:.2f} e2e); "
              f"added memory b/c <= 0.5: {ok(bc['mem'] <= 0.5)} ({bc['mem']:.3f})")  # fmt: skip
    if args.json:
        data = [{"vocab": v, **r} for (v, _), rs in runs.items() for r in rs]
        tmpf = args.json.with_suffix(".tmp")
        tmpf.write_text(json.dumps(data, indent=1))
        os.replace(tmpf, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
