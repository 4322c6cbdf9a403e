"""Cost of scoring M members (a LoRA ensemble, or MC dropout with N passes) against one adapter, side by side.

    python benchmarks/bench_members.py [--members 3] [--questions 240] [--repeats 3] [--hidden 256] [--layers 4]

One process, one random Llama of the given shape (vocab 32,000) with LoRA adapters on q_proj/v_proj/lm_head
(dropout 0.1), the bundled OBQA/CSQA questions repeated to ``--questions``. Each way is
``EvidentialLM.loglikelihood`` over the same requests, timed ``--repeats`` times after a warm-up, the
median kept: (1) one adapter, (2) an ensemble of M members (``peft=DIR``), (3) MC dropout with N = M
passes (``mc_samples=M``). Reported: seconds per way and the ratios (2) / (M x (1)) and (3) / (M x (1));
goal <= 1.1 each (issue 32). Say ``uptime``'s load with the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from measure import command_line, write_result

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
GOAL = 1.1


def _requests(n: int):
    from lm_eval.api.instance import Instance

    from lm_eval_evidential.testing.tiny import ANSWER_LETTERS, render_prompt, sample_questions

    rows = list(sample_questions())
    out = []
    for q in range(n):
        question, options, _ = rows[q % len(rows)]
        prompt = render_prompt(f"{question} ({q})", options)  # distinct prompts: every question forwarded
        for j in range(len(options)):
            out.append(Instance("loglikelihood", {}, (prompt, " " + ANSWER_LETTERS[j]), j, metadata=("bench", q, 1)))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--questions", type=int, default=240)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--json", type=Path, default=None, help="the run's record (default: in benchmarks/results/)")
    args = parser.parse_args(argv)

    import torch

    from lm_eval_evidential.harness.model import EvidentialLM
    from lm_eval_evidential.testing.tiny import build_lora_adapter, build_tiny_model

    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "1")))
    from lm_eval_evidential.modeling.threads import THREADS_ENV

    os.environ[THREADS_ENV] = str(torch.get_num_threads())  # the model's load keeps it (it would time 1 against 2)
    root = Path(tempfile.mkdtemp(prefix="bench_members_"))
    base = build_tiny_model(root / "model", hidden_size=args.hidden, num_layers=args.layers, seed=0)
    for i in range(args.members):
        build_lora_adapter(base, root / "ens" / f"member_{i}", seed=10 + i)
    requests = _requests(args.questions)
    ways = {
        "one adapter": {"peft": str(root / "ens" / "member_0")},
        f"ensemble of {args.members}": {"peft": str(root / "ens")},
        f"MC dropout, {args.members} passes": {"peft": str(root / "ens" / "member_0"), "mc_samples": args.members},
    }
    seconds = {}
    for name, extra in ways.items():
        lm = EvidentialLM(pretrained=str(base), device="cpu", dtype="float32", batch_size=16, **extra)
        lm.loglikelihood(requests[:40], disable_tqdm=True)  # warm-up
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            lm.loglikelihood(requests, disable_tqdm=True)
            times.append(time.perf_counter() - start)
        seconds[name] = statistics.median(times)
        del lm
    one = seconds["one adapter"]
    print(
        f"shape: Llama vocab 32000, hidden {args.hidden}, {args.layers} layers; {args.questions} questions; "
        f"torch threads {torch.get_num_threads()}; load {os.getloadavg()[0]:.2f}"
    )
    for name, value in seconds.items():
        ratio = "" if value is one else f"  ratio to {args.members} x one adapter: {value / (args.members * one):.3f}"
        print(f"{name:28s} {value:8.3f} s{ratio}")
    worst = max(v / (args.members * one) for k, v in seconds.items() if k != "one adapter")
    print(f"goal <= {GOAL}: {'met' if worst <= GOAL else 'NOT met'} (worst {worst:.3f})")
    figures = [{"what": "one adapter", "value": round(one, 2), "unit": "s"}]
    figures += [
        {"what": f"{name} / {args.members} x one adapter", "value": round(v / (args.members * one), 3), "unit": "x"}
        for name, v in seconds.items()
        if name != "one adapter"
    ]
    for figure in figures[1:]:
        figure["limit"] = f"<= {GOAL}"
    shape = f"random Llama, vocabulary 32,000, hidden {args.hidden}, {args.layers} layers; {args.questions} questions"
    written = write_result("bench_members", command=command_line(), shape=shape, figures=figures, path=args.json)
    print(f"written: {written}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
