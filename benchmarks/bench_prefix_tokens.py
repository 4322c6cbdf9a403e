"""Tokenising a shared few-shot block once (``modeling/prefix_tokens.py``) against tokenising every prompt whole.

Three measurements, each side by side in interleaved rounds (the way that runs first alternates), on
``gpu_check_questions.json``'s obqa_edl questions behind one fixed ``--shots``-question block (the requests
lm-eval builds with its ``first_n`` sampler; ``gpu_check.py`` reads the same file):

- **tokenising**: the backend's ``encode_batch_fast`` on every whole prompt against
  :func:`~lm_eval_evidential.modeling.prefix_tokens.encode_shared_prefixes`, on SmolLM2's real tokenizer
  (``--tokenizer smollm2``, fetched on first use) or the test tokenizer (``tiny``); the ids are checked equal;
- **the rule** (``--sweep``): the same ratio with the rule switched off (every group cut), for groups of 2
  to all prompts behind blocks of 1 to ``--shots`` questions, against the characters a group's cut leaves
  untokenised, which is what ``MIN_SAVED_CHARS`` is chosen from;
- **the call** (``--call``): ``--model evidential``'s ``lm.loglikelihood(requests)`` with the prefix cache on, on
  ``gpu_check.py``'s small random model (CPU, float32), with the shortcut and without it (the planner's
  ``encode_shared_prefixes`` replaced by the whole call), its time in ``encode_prompts`` beside; the two
  calls' responses are checked equal.

Writes ``results/bench_prefix_tokens.json`` (or ``--json PATH``)::

    python benchmarks/bench_prefix_tokens.py --tokenizer smollm2 --shots 25 --sweep --call
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_vllm import requests_from  # noqa: E402 (after the path above)
from measure import command_line, write_result  # noqa: E402


def contexts_of(requests) -> list[str]:
    return list(dict.fromkeys(r.args[0] for r in requests))


def load_tokenizer(kind: str, work: Path):
    from transformers import AutoTokenizer

    if kind == "smollm2":
        from lm_eval_evidential.testing.smollm2 import smollm2_checkpoint

        return AutoTokenizer.from_pretrained(smollm2_checkpoint())
    from lm_eval_evidential.testing.tiny import build_tiny_model

    return AutoTokenizer.from_pretrained(build_tiny_model(work / "tokenizer", hidden_size=8, num_layers=1, num_heads=1))


def rounds(ways: dict, repeats: int) -> dict[str, list[float]]:
    """CPU seconds of each way, ``repeats`` interleaved rounds (the first way alternates), after one warm-up each."""
    for fn in ways.values():
        fn()
    found: dict[str, list[float]] = {name: [] for name in ways}
    names = list(ways)
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            start = time.process_time()
            ways[name]()
            found[name].append(time.process_time() - start)
    return found


def tokenising(backend, texts: list[str], repeats: int, *, rule: bool = True) -> dict:
    """CPU seconds of the whole call and of the shared-prefix one on ``texts`` (``rule=False``: every group cut)."""
    from lm_eval_evidential.modeling.prefix_tokens import MIN_SAVED_CHARS, encode_shared_prefixes

    min_saved = MIN_SAVED_CHARS if rule else -(10**9)
    whole = [e.ids for e in backend.encode_batch_fast(texts, add_special_tokens=True)]
    if encode_shared_prefixes(backend, texts, min_saved=min_saved) != whole:
        raise AssertionError("the shared-prefix ids differ from the whole texts' ids")
    found = rounds(
        {
            "whole": lambda: backend.encode_batch_fast(texts, add_special_tokens=True),
            "shared": lambda: encode_shared_prefixes(backend, texts, min_saved=min_saved),
        },
        repeats,
    )
    ratio = statistics.median(w / s for w, s in zip(found["whole"], found["shared"]))
    return {"whole": min(found["whole"]), "shared": min(found["shared"]), "ratio": ratio}


def sweep(backend, rendered: dict, shots: int, repeats: int) -> list[dict]:
    """Whole / shared on 120 prompts in groups of 2 to 120, each group behind its own block of k questions (a line
    naming the group before it, so groups share nothing), in one call as the planner makes it, every group cut."""
    from lm_eval_evidential.modeling.prefix_tokens import cut_rule, find_cut

    rule = cut_rule(backend)[0]
    rows = []
    for k in sorted({1, 2, 5, shots}):
        texts = contexts_of(requests_from(rendered, 120, k)[0])
        shared = os.path.commonprefix(texts)
        for size in (2, 4, 16, len(texts)):
            batch = [f"Group {i // size}.\n\n{t}" for i, t in enumerate(texts)]
            cut = find_cut(batch[0][: len(shared) + len("Group 0.\n\n")], rule)
            saved = (size - 1) * cut - (len(batch[0]) - cut)
            row = {"shots": k, "shared_chars": len(shared), "group": size, "saved_chars": saved}
            row["ratio"] = tokenising(backend, batch, repeats, rule=False)["ratio"]
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def call(rendered: dict, shots: int, questions: int, repeats: int, batch_size: int, work: Path) -> dict:
    import torch
    from gpu_check import build_model, harness_check_for_this_machine

    from lm_eval_evidential.harness import planning
    from lm_eval_evidential.harness.model import EvidentialLM
    from lm_eval_evidential.modeling import prefix_tokens

    model, tiny_tok = build_model("small", "cpu", "float32", work, seed=0)
    requests, n = requests_from(rendered, questions, shots)
    with harness_check_for_this_machine():
        lm = EvidentialLM(pretrained=model, tokenizer=tiny_tok, batch_size=batch_size, prefix_cache=True, threads=1)
    shortcut = prefix_tokens.encode_shared_prefixes
    spent = {"tok": 0.0}
    encode_prompts = lm.planner.encode_prompts

    def timed_encode(contexts):
        start = time.process_time()
        try:
            return encode_prompts(contexts)
        finally:
            spent["tok"] += time.process_time() - start

    lm.planner.encode_prompts = timed_encode

    def whole(backend, texts, *, add_special_tokens=True, **_):
        return [e.ids for e in backend.encode_batch_fast(list(texts), add_special_tokens=add_special_tokens)]

    responses = {}
    tok_time: dict[str, list[float]] = {"shared": [], "whole": []}

    def way(name, fn):
        def run():
            planning.encode_shared_prefixes = fn
            spent["tok"] = 0.0
            try:
                with torch.inference_mode():
                    responses[name] = lm.loglikelihood(requests, disable_tqdm=True)
            finally:
                planning.encode_shared_prefixes = shortcut
            tok_time[name].append(spent["tok"])
            lm.evidence.take()

        return run

    found = rounds({"shared": way("shared", shortcut), "whole": way("whole", whole)}, repeats)
    if responses["shared"] != responses["whole"]:
        raise AssertionError("the call's responses differ with the shortcut")
    per = {name: statistics.median(t) for name, t in tok_time.items()}
    return {
        "questions": n,
        "shared": min(found["shared"]),
        "whole": min(found["whole"]),
        "ratio": statistics.median(w / s for w, s in zip(found["whole"], found["shared"])),
        "tok_shared": per["shared"],
        "tok_whole": per["whole"],
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenizer", choices=["smollm2", "tiny"], default="smollm2", help="default: smollm2")
    parser.add_argument("--shots", type=int, default=25, help="questions in the fixed block (default: 25)")
    parser.add_argument("--questions", type=int, default=120, help="questions behind it (default: 120)")
    parser.add_argument("--repeats", type=int, default=7, help="interleaved rounds (default: 7)")
    parser.add_argument("--sweep", action="store_true", help="the rule's sweep (default: off)")
    parser.add_argument("--call", action="store_true", help="the whole cached call on a small model (default: off)")
    parser.add_argument("--batch-size", type=int, default=16, help="the call's batch size (default: 16)")
    parser.add_argument("--json", type=Path, default=None, help="the record's path (default: results/)")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    from lm_eval_evidential.modeling.threads import THREADS_ENV

    os.environ[THREADS_ENV] = "1"
    rendered = json.loads((HERE / "gpu_check_questions.json").read_text(encoding="utf-8"))
    load = [os.getloadavg()[0]]
    figures = []
    with tempfile.TemporaryDirectory() as tmp:
        tok = load_tokenizer(args.tokenizer, Path(tmp))
        backend = tok.backend_tokenizer
        texts = contexts_of(requests_from(rendered, args.questions, args.shots)[0])
        found = tokenising(backend, texts, args.repeats)
        print(json.dumps({"tokenising": found, "prompts": len(texts)}), flush=True)
        figures += [
            {"what": "tokenising, every prompt whole", "value": round(found["whole"], 4), "unit": "CPU s"},
            {"what": "tokenising, the shared block once", "value": round(found["shared"], 4), "unit": "CPU s"},
            {"what": "tokenising: whole / shared block once", "value": round(found["ratio"], 2), "unit": "x"},
        ]
        if args.sweep:
            for row in sweep(backend, rendered, args.shots, max(3, args.repeats // 2)):
                figures.append(
                    {
                        "what": f"rule sweep: {row['shots']}-shot ({row['shared_chars']} shared characters), "
                        f"groups of {row['group']} ({row['saved_chars']} characters saved a group): whole / shared",
                        "value": round(row["ratio"], 2),
                        "unit": "x",
                    }
                )
        if args.call:
            got = call(rendered, args.shots, args.questions, args.repeats, args.batch_size, Path(tmp) / "call")
            print(json.dumps({"call": got}), flush=True)
            figures += [
                {"what": "cached call, prompts tokenised whole", "value": round(got["whole"], 3), "unit": "CPU s"},
                {"what": "cached call, shared block once", "value": round(got["shared"], 3), "unit": "CPU s"},
                {"what": "cached call: whole / shared block once", "value": round(got["ratio"], 3), "unit": "x"},
                {"what": "cached call's tokenising, whole", "value": round(got["tok_whole"], 4), "unit": "CPU s"},
                {"what": "cached call's tokenising, shared", "value": round(got["tok_shared"], 4), "unit": "CPU s"},
            ]
    load.append(os.getloadavg()[0])
    shape = (
        f"{len(texts)} obqa_edl prompts behind one {args.shots}-question block, {args.tokenizer} tokenizer; "
        f"call: gpu_check's small random Llama, CPU float32, batch {args.batch_size}, 1 torch thread"
    )
    notes = f"median of {args.repeats} interleaved rounds' ratios, best CPU times; 1-min load {load[0]:.1f} -> "
    notes += f"{load[1]:.1f}"
    path = write_result(
        "bench_prefix_tokens", command=command_line(argv), shape=shape, figures=figures, path=args.json, notes=notes
    )
    print(f"# load {load[0]:.2f} -> {load[1]:.2f}; record: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
