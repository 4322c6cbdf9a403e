"""What permuted evaluation costs: K cyclic orders of N questions in one evaluation against K independent ones.

    python benchmarks/bench_permutations.py [--n 24] [--task obqa_edl] [--model tiny|smollm2] [--repeats 3]
        [--threads 1] [--shots 5 [--sampler first_n|default]]

The K cyclic orders of a question share everything before its options (instruction, question);
the requests of ``--metadata '{"permutations": "cyclic"}'`` reach ``EvidentialLM.loglikelihood`` as one
batch of K x N prompts. Measured side by side in one process, interleaved ``--repeats`` times:

- ``one order``: the N questions in their own order (one ``loglikelihood`` call): today's run;
- ``K orders, one call``: the K x N prompts of the permuted task in one call (what the harness does);
- ``K orders, K calls``: the same prompts as K independent evaluations, one call per shift.

Each with the model's prefix cache (``prefix_cache``, issue 35) on and off (``--prefix-cache both``, the
default). Printed, and written as the run's record (``benchmarks/results/bench_permutations.json`` or
``--json PATH``, through ``measure.write_result``): the median wall time of each and its ratio to ``one order``
without the cache (K would be no sharing at all), with the machine and ``uptime`` load. What the cache shares
between the orders of one question shows as ``one call`` with the cache below the same without it. Beside the
times, the token positions each variant's forward calls process (pads included): the arithmetic's bound on the
ratios, since each order's options and answer cue cannot be shared (they sit at other positions, after other
options).

``--shots N``: every prompt behind N examples of the task's few-shot split (``--num_fewshot``), drawn by
lm-eval's ``first_n`` sampler (one block for every question and order, as MMLU's 5-shot; written to
``bench_permutations_<N>shot.json``) or its ``default`` one, which draws per doc, so that each order of a
question is shown other examples and the orders share only the instruction.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from measure import RESULTS, command_line, write_result  # noqa: E402 (after the path above)


def _model(kind: str, tmp: Path, prefix_cache: bool = True):

    if kind == "smollm2":
        from lm_eval_evidential.testing.smollm2 import smollm2_checkpoint

        pretrained = smollm2_checkpoint()
    else:
        from lm_eval_evidential.testing.tiny import build_tiny_model

        pretrained = build_tiny_model(tmp / "tiny", seed=0)
    return _model_from(pretrained, prefix_cache), pretrained


def _model_from(pretrained, prefix_cache: bool):
    from lm_eval_evidential.harness.model import EvidentialLM

    return EvidentialLM(
        pretrained=str(pretrained), device="cpu", dtype="float32", batch_size=8, prefix_cache=prefix_cache
    )


def _instances(task_name: str, n: int, permuted: bool, shots: int = 0, sampler: str = "first_n"):
    """The requests of ``task_name``'s first ``n`` questions (in their K cyclic orders where ``permuted``), behind
    ``shots`` examples of its few-shot split drawn by lm-eval's ``sampler`` (as ``--num_fewshot`` would)."""
    from lm_eval.tasks import TaskManager

    from lm_eval_evidential.tasks import tasks_dir

    meta = {"permutations": "cyclic"} if permuted else None
    task = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata=meta).load([task_name])
    task = task["tasks"][task_name]
    if shots:
        task.set_config(key="num_fewshot", value=shots)
        task.fewshot_cfg.sampler = sampler
    task.request_limit(n)
    task.build_all_requests(limit=n, rank=0, world_size=1)
    return task.instances


class _PlanRecorder:
    """Wraps the model's batch planner (``harness.model.plan_batches``) to count what the prefix cache
    shares: the prompts planned into prefix batches and their shared prefix lengths, per variant."""

    def __init__(self):
        import lm_eval_evidential.harness.model as model_module

        self._module, self._plan = model_module, model_module.plan_batches
        self.batches: list = []
        model_module.plan_batches = self._record

    def _record(self, prompts, batch_size, **kwargs):
        batches = self._plan(prompts, batch_size, **kwargs)
        self.batches.append(([list(p) for p in prompts], batches))
        return batches

    def close(self):
        self._module.plan_batches = self._plan


def _question_prefix(prompts_by_question: list[list[list[int]]]) -> float:
    """The mean number of tokens the K orders of a question share (everything before its options)."""
    from lm_eval_evidential.modeling.prefix_plan import common_prefix_length

    shared = []
    for prompts in prompts_by_question:
        n = min(len(p) for p in prompts)
        for p in prompts[1:]:
            n = min(n, common_prefix_length(prompts[0], p))
        shared.append(n)
    return statistics.mean(shared) if shared else 0.0


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def _timed(lm, groups) -> float:
    start = time.perf_counter()
    for requests in groups:
        lm.loglikelihood(requests, disable_tqdm=True)
        lm.evidence.take()
    return time.perf_counter() - start


def _print_plans(plans: dict, permuted, lm) -> dict:
    """What the prefix cache shares in each variant (as the timed calls plan), and what the K orders share; the
    token positions each variant's forward calls process, pads included, with the cache on and off (the
    arithmetic's share of the bound on what sharing can save, whatever the per-call costs): returned by name."""
    from lm_eval_evidential.modeling.prefix_plan import forwarded_positions, plan_batches

    positions = {}
    for name, calls in plans.items():
        on = sum(forwarded_positions(p, b) for p, b in calls)
        off = sum(forwarded_positions(p, plan_batches(p, 8, reuse=False)) for p, _ in calls)
        positions[name] = {True: on, False: off}
        print(f"positions forwarded (pads included), {name}: {on} with the cache, {off} without")
    for name, calls in plans.items():
        rows = sum(len(p) for p, _ in calls)
        shared = [b for _, batches in calls for b in batches if b.prefix_length]
        cached = sum(len(b.rows) for b in shared)
        mean_prefix = statistics.mean(b.prefix_length for b in shared) if shared else 0.0
        inner = [n for b in shared for n in b.inner or () if n > b.prefix_length]
        print(
            f"prefix cache plan, {name}: {cached} of {rows} prompts in {len(shared)} prefix batches, "
            f"mean shared prefix {mean_prefix:.1f} tokens; {len(inner)} prompts behind an inner prefix "
            f"(the question before its options), mean {statistics.mean(inner) if inner else 0.0:.1f} tokens "
            "with the prefix"
        )
    by_question: dict = {}
    for request in permuted:  # each order's context once (a doc has one request per answer label)
        orders = by_question.setdefault(request.doc["question_id"], {})
        orders[tuple(request.doc["permutation"])] = lm.tok_encode(request.args[0])
    by_question = {q: list(orders.values()) for q, orders in by_question.items()}
    print(f"the K orders of a question share {_question_prefix(list(by_question.values())):.1f} tokens on average")
    return positions


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=24, help="questions (default 24)")
    ap.add_argument("--task", default="obqa_edl")
    ap.add_argument("--model", choices=("tiny", "smollm2"), default="tiny")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (default 1: on a shared machine OpenMP barriers across threads stall whenever one is "
        "descheduled, and a variant of more, smaller calls stalls more; 0 = torch's own choice)",
    )
    ap.add_argument(
        "--prefix-cache",
        choices=("on", "off", "both"),
        default="both",
        help="the model's prefix_cache (issue 35); both: each variant with it on and off, side by side",
    )
    ap.add_argument("--shots", type=int, default=0, help="few-shot examples before every prompt (default 0)")
    ap.add_argument(
        "--sampler",
        choices=("first_n", "default"),
        default="first_n",
        help="lm-eval's few-shot sampler with --shots: first_n (one block for every question and order, as MMLU's; "
        "the default here) or default (a random draw per doc: each order of a question gets other examples)",
    )
    ap.add_argument("--json", type=Path, default=None, help="the run's record (default: in benchmarks/results/)")
    return ap.parse_args(argv)


def main(argv=None) -> None:
    import tempfile

    from lm_eval_evidential.testing.tiny import sample_data_dir

    args = parse_args(argv)
    os.environ.setdefault("EVIDENTIAL_DATA_DIR", str(sample_data_dir()))
    start_load = os.getloadavg()[0]
    settings = {"on": [True], "off": [False], "both": [True, False]}[args.prefix_cache]
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
        from lm_eval_evidential.modeling.threads import THREADS_ENV

        os.environ[THREADS_ENV] = str(args.threads)  # the model's load keeps it (it would time 1 against 2)
    with tempfile.TemporaryDirectory() as tmp:
        first, pretrained = _model(args.model, Path(tmp), settings[0])
        models = {settings[0]: (first, pretrained)}
        for cache in settings[1:]:
            models[cache] = (_model_from(pretrained, cache), pretrained)
        plain = _instances(args.task, args.n, False, args.shots, args.sampler)
        permuted = _instances(args.task, args.n, True, args.shots, args.sampler)
        shifts: dict[int, list] = {}
        for request in permuted:
            shifts.setdefault(request.doc["permutation"][0], []).append(request)
        k = len(shifts)
        variants = {
            "one order": [plain],
            "K orders, one call": [permuted],
            "K orders, K calls": [shifts[s] for s in sorted(shifts)],
        }
        times = {(cache, name): [] for cache in settings for name in variants}
        for lm, _ in models.values():
            _timed(lm, [plain])  # warm-up
        plans = {}
        if True in models:  # what the prefix cache shares in each variant (planned as the timed calls plan)
            recorder = _PlanRecorder()
            try:
                for name, groups in variants.items():
                    recorder.batches.clear()
                    _timed(models[True][0], groups)
                    plans[name] = list(recorder.batches)
            finally:
                recorder.close()
        for _ in range(args.repeats):
            for cache, (lm, _) in models.items():
                for name, groups in variants.items():
                    times[(cache, name)].append(_timed(lm, groups))
    load = (start_load, os.getloadavg()[0])
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch threads "
        f"{torch_threads()}; load {load[0]:.2f} at the start, {load[1]:.2f} at the end"
    )
    print(f"model: {args.model} ({pretrained}); task {args.task}: {args.n} questions, K = {k}")
    print(f"requests: {len(plain)} in one order, {len(permuted)} in the K orders")
    positions = _print_plans(plans, permuted, models[True][0]) if plans else None
    medians = {key: statistics.median(values) for key, values in times.items()}
    base = medians[(settings[-1], "one order")]  # without the cache where both ran
    for (cache, name), median in medians.items():
        label = f"{name}, prefix cache {'on' if cache else 'off'}"
        print(f"{label:<36} {median:8.3f} s   x{median / base:5.2f}   (runs: {args.repeats})")
    write_record(args, medians, settings, k, positions)


def write_record(args, medians: dict, settings: list[bool], k: int, positions: dict | None = None) -> None:
    """The run's record, through ``measure.write_result``: its shape and :func:`figures`."""
    shots = f", {args.shots}-shot ({args.sampler} sampler)" if args.shots else ""
    shape = (
        f"{'SmolLM2-135M-Instruct' if args.model == 'smollm2' else 'tiny Llama (hidden 64, 2 layers)'}, {args.task}"
        f"{shots}, {args.n} questions, K = {k}, batch 8, CPU float32, {torch_threads()} torch thread(s)"
    )
    name = "bench_permutations" + (f" --shots {args.shots}" if args.shots else "")
    written = write_result(
        name,
        command=command_line(),
        shape=shape,
        figures=figures(medians, settings, k, positions),
        path=args.json or (RESULTS / f"bench_permutations_{args.shots}shot.json" if args.shots else None),
        notes=f"median of {args.repeats} interleaved rounds; ratios to one order with the cache "
        f"{'off' if settings[-1] is False else 'on'}",
    )
    print(f"written: {written}")


def figures(medians: dict, settings: list[bool], k: int | None = None, positions: dict | None = None) -> list[dict]:
    """The record's figures: one order's seconds (without the cache where both ran), each variant's ratio to it,
    and, with both settings, issue 35's goal: K calls without the cache against K orders in one call with it.
    With ``k`` and the cache on, the same goal against the cached ways: K single orders (K x one order) and K
    calls; with ``positions`` (:func:`_print_plans`), the token positions' ratios for each of the three."""
    base_cache = settings[-1]
    base = medians[(base_cache, "one order")]

    def said(cache):
        return f"cache {'on' if cache else 'off'}"

    found = [{"what": f"one order, prefix {said(base_cache)}", "value": round(base, 3), "unit": "s"}]
    for (cache, name), median in medians.items():
        if (cache, name) != (base_cache, "one order"):
            found.append({"what": f"{name} / one order, {said(cache)}", "value": round(median / base, 2), "unit": "x"})
    if len(settings) == 2:
        gain = medians[(False, "K orders, K calls")] / medians[(True, "K orders, one call")]
        found.append(
            {
                "what": "K calls without the cache / K orders in one call with it",
                "value": round(gain, 2),
                "unit": "x",
                "limit": ">= 2 (issue 35)",
            }
        )
    one_call = (True, "K orders, one call")
    if k and one_call in medians:
        against = {
            "K single orders with the cache": (True, "one order", k),
            "K calls with the cache": (True, "K orders, K calls", 1),
        }
        if len(settings) == 2:
            against["K calls without the cache"] = (False, "K orders, K calls", 1)
        for label, (cache, name, times) in against.items():
            if cache:  # without the cache: the goal's figure above
                found.append(
                    {
                        "what": f"{label} / K orders in one call with it",
                        "value": round(times * medians[(cache, name)] / medians[one_call], 2),
                        "unit": "x",
                    }
                )
            if positions:
                bound = times * positions[name][cache] / positions["K orders, one call"][True]
                found.append(
                    {
                        "what": f"{label} / K orders in one call with it: positions forwarded",
                        "value": round(bound, 2),
                        "unit": "x",
                    }
                )
    return found


if __name__ == "__main__":
    main()
