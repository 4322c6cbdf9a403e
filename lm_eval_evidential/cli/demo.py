"""``lm-eval-evidential demo``: the whole story offline, on a laptop, in minutes.

1. build a tiny Llama model and tokenizer locally;
2. fine-tune EDL and IB-EDL LoRA adapters briefly on the bundled OBQA-format sample questions;
3. run the stock ``lm_eval`` CLI with ``--model evidential`` on the bundled ID and OOD samples;
4. audit the records: the refusal on a K mismatch (csqa_edl, K=5 vs OBQA's 4), the matched
   control (csqa4_edl), the mismatch computed on purpose with one sentence on which scores the
   real fifth option moved for this model and why, the K sweep table and figure, and a report folder.

The tiny model's numbers are illustrative only.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from lm_eval_evidential.errors import EvidentialError

EVAL_TASKS = (
    "obqa_edl",
    "arc_c_edl",
    "arc_e_edl",
    "csqa_edl",
    "csqa4_edl",
    "mmlu_math_edl",
    "csqa_k4_edl",
    "arc_c_k4_edl",
    "arc_e_k4_edl",
)
DEMO_METHODS = ("edl", "ib_edl")  # the two evidential objectives the demo fine-tunes


def add_parser(sub) -> None:
    from lm_eval_evidential.cli.arguments import add_param
    from lm_eval_evidential.params import declared_params
    from lm_eval_evidential.training.config import AT_LEAST_ONE_OR_NONE, TrainConfig

    p = sub.add_parser(
        "demo",
        help="offline end-to-end demo: tiny model, EDL/IB-EDL fine-tuning, stock lm_eval run, K audit",
        description=(
            "The whole story offline, on bundled data: builds a tiny Llama model, fine-tunes EDL and IB-EDL LoRA "
            "adapters on the OBQA-format sample questions, runs the stock lm_eval CLI with --model evidential on the "
            "ID and OOD samples, then shows the K audit (the refusal of a K mismatch, the K-matched controls, the K "
            "sweep) and writes a report folder. The tiny model's numbers are illustrative only."
        ),
    )
    p.add_argument("--out", default="demo_out", help="working folder: new, empty, or a previous demo's (reused)")
    # train's own declarations: a bad number is refused here, before the demo builds anything
    add_param(
        p, "--max-steps", declared_params(TrainConfig)["max_steps"], default=120, help="fine-tuning steps per method"
    )
    add_param(
        p, "--limit", AT_LEAST_ONE_OR_NONE, default=None, help="evaluate only the first N docs per task (default: all)"
    )
    p.add_argument("--fast", action="store_true", help="a quick smoke setting: 20 steps, EDL only, 24 docs per task")
    p.set_defaults(func=run)


def say(text: str = "") -> None:
    print(text, flush=True)


def heading(text: str) -> None:
    say()
    say(f"== {text} " + "=" * max(0, 70 - len(text)))


class DemoStepFailed(EvidentialError):
    """A command of the demo exited non-zero; the demo stops with its exit status (the command said why itself,
    so this carries only the status, caught in :func:`run`)."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


def run(args) -> int:
    from lm_eval_evidential.testing.tiny import sample_data_dir

    out = demo_folder(args.out)
    data = sample_data_dir()
    env = offline_environment(data)
    methods = ("edl",) if args.fast else DEMO_METHODS
    steps = min(args.max_steps, 20) if args.fast else args.max_steps
    limit = args.limit if args.limit is not None else (24 if args.fast else None)
    started = time.monotonic()
    try:
        model_dir = build_model(out, data)
        adapters = fine_tune(model_dir, methods, steps, out)
        runs = evaluate(model_dir, adapters, limit, env, out)
        primary = runs.get("ib_edl") or runs["edl"]
        audit(primary, out)
    except DemoStepFailed as failed:
        return failed.code
    say_done(primary, out, started)
    return 0


def demo_folder(option: str) -> Path:
    """The demo's working folder, made: reused only if it is a previous demo's (its tiny model was built first) or
    empty, never someone's files."""
    from lm_eval_evidential.files import check_output_folder

    out = check_output_folder(
        Path(option).resolve(),
        option="--out",
        replaceable=lambda folder: (folder / "tiny-llama" / "config.json").is_file(),
    )
    out.mkdir(parents=True, exist_ok=True)
    return out


def offline_environment(data: Path) -> dict:
    """The environment of the demo's commands: the bundled samples, no hub; set in this process too (``train`` and
    the audits run in it)."""
    env = {
        **os.environ,
        "EVIDENTIAL_DATA_DIR": str(data),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    os.environ.update(
        {k: env[k] for k in ("EVIDENTIAL_DATA_DIR", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TOKENIZERS_PARALLELISM")}
    )
    return env


def build_model(out: Path, data: Path) -> Path:
    """Step 1: the tiny Llama model and its tokenizer, built in ``out``."""
    from lm_eval_evidential.testing.tiny import build_tiny_model

    heading("1. a tiny Llama model, built here (no hub access)")
    model_dir = build_tiny_model(out / "tiny-llama", seed=0, overwrite=True)
    say(f"model + tokenizer: {model_dir}")
    say(f"sample data (generated for this project, hub schemas): {data}")
    return model_dir


def fine_tune(model_dir: Path, methods, steps: int, out: Path) -> dict[str, Path]:
    """Step 2: one LoRA adapter per method, by the ``train`` command; ``{method: adapter folder}``."""
    from lm_eval_evidential.cli.main import main as cli

    heading("2. LoRA fine-tuning on the OBQA-format sample questions")
    say("EDL's loss is the Bayes-risk MSE plus a KL term whose weight ramps from 0 to 1 over the run (Sensoy et al.")
    say("(2018)), so the logged `loss` can rise while the fit improves; `mse`, `kl` and `kl_weight` are logged")
    say("apart (the `loss` is mse + kl_weight * kl). IB-EDL's is the MSE under noise plus beta times its")
    say("information loss (Li et al. (2025)).")
    adapters = {}
    for method in methods:
        target = out / f"adapter-{method}"
        code = cli(
            [
                "train",
                "--pretrained",
                str(model_dir),
                "--task",
                "obqa_edl",
                "--method",
                method,
                "--output-dir",
                str(target),
                "--max-steps",
                str(steps),
                "--overwrite-output-dir",
            ]
        )
        if code:
            raise DemoStepFailed(code)
        adapters[method] = target  # `train` itself said where: "METHOD: adapter in DIR"
    return adapters


def evaluate(model_dir: Path, adapters: dict[str, Path], limit, env: dict, out: Path) -> dict[str, Path]:
    """Step 3: the stock ``lm_eval`` CLI with ``--model evidential`` on each adapter; ``{method: output path}``."""
    heading("3. the stock lm_eval CLI with --model evidential")
    if "OMP_NUM_THREADS" not in os.environ:  # the count `train` measured fastest for this model (said above)
        import torch

        env["OMP_NUM_THREADS"] = str(torch.get_num_threads())
        say(f"(OMP_NUM_THREADS={env['OMP_NUM_THREADS']}: the CPU thread count `train` found fastest for this model)")
    runs = {}
    for method, adapter in adapters.items():
        output_path = out / f"eval-{method}"
        cmd = [
            sys.executable,
            "-m",
            "lm_eval",
            "--model",
            "evidential",
            "--model_args",
            f"pretrained={model_dir},peft={adapter},method={method},dtype=float32",
            "--device",
            "cpu",
            "--batch_size",
            "8",
            "--tasks",
            ",".join(EVAL_TASKS),
            "--output_path",
            str(output_path),
        ]
        if limit:
            cmd += ["--limit", str(limit)]
        say("$ lm_eval " + " ".join(cmd[3:]))
        say("  (lm_eval takes 20 s or more to start; its log and progress bars follow, then its results table)")
        code, stdout = run_live(cmd, env)
        if code:
            say(stdout[-4000:])
            raise DemoStepFailed(code)
        say(_results_table(stdout))
        runs[method] = output_path
    return runs


def audit_commands(out: Path) -> list[tuple[str, list[str], int]]:
    """The K audit's commands: (what is shown, argv after the output path, the exit status it must give: cli.main's
    map, 2 = refused)."""
    from lm_eval_evidential.cli.exit_codes import EXIT_OK, EXIT_REFUSED

    scores = ["--scores", "reciprocal_vacuity,max_prob,neg_norm_entropy"]
    return [
        (
            "ood … --id obqa_edl --ood csqa_edl   (K=4 vs K=5: must refuse)",
            ["ood", "--id", "obqa_edl", "--ood", "csqa_edl", *scores],
            EXIT_REFUSED,
        ),
        (
            "ood … --id obqa_edl --ood csqa4_edl,mmlu_math_edl   (matched K=4)",
            [
                "ood",
                "--id",
                "obqa_edl",
                "--ood",
                "csqa4_edl,mmlu_math_edl",
                *scores,
                "--json",
                str(out / "ood_matched.json"),
            ],
            EXIT_OK,
        ),
        (
            "ood … --id obqa_edl --ood csqa_edl --k-policy report   (the artefact, on purpose)",
            [
                "ood",
                "--id",
                "obqa_edl",
                "--ood",
                "csqa_edl",
                "--k-policy",
                "report",
                *scores,
                "--json",
                str(out / "ood_mismatched.json"),
            ],
            EXIT_OK,
        ),
        (
            "ksweep … --id obqa_edl --ood csqa4_edl   (McNamara 2026, Table 1 / Figure 1)",
            [
                "ksweep",
                "--id",
                "obqa_edl",
                "--ood",
                "csqa4_edl",
                "--json",
                str(out / "ksweep.json"),
                "--plot",
                str(out / "ksweep"),
            ],
            EXIT_OK,
        ),
        (
            "report … --near …,csqa_edl,… --far mmlu_math_edl (csqa_edl, K=5, is refused; its K-matched controls "
            "are compared)",
            [
                "report",
                "--id",
                "obqa_edl",
                "--near",
                "arc_c_edl,arc_e_edl,csqa_edl,csqa4_edl,csqa_k4_edl,arc_c_k4_edl,arc_e_k4_edl",
                "--far",
                "mmlu_math_edl",
                "--k-policy",
                "assert,restrict",
                "--out",
                str(out / "report"),
            ],
            EXIT_REFUSED,
        ),
    ]


def audit(primary: Path, out: Path) -> None:
    """Step 4: the K audit of :func:`audit_commands` on the records in ``primary``, each checked for its exit status,
    and the sentence on what the real fifth option moved."""
    from lm_eval_evidential.cli.exit_codes import EXIT_ERROR, EXIT_REFUSED
    from lm_eval_evidential.cli.main import main as cli

    heading(f"4. the K audit on {primary.name}")
    for shown, (command, *rest), expected in audit_commands(out):
        say(f"$ lm-eval-evidential {shown}")
        code = cli([command, str(primary), *rest])
        say(f"-> exit status {code}" + (" (refused, as it should be)" if code == EXIT_REFUSED else ""))
        say()
        if code != expected:
            say(f"demo: expected exit status {expected} from `{command}`, got {code}")
            raise DemoStepFailed(EXIT_ERROR)
        if "--k-policy" in rest and "report" in rest:
            story = real_option_story(primary, out / "ood_matched.json", out / "ood_mismatched.json")
            if story:
                say(f"what moved, and why: {story}")
                say()


def say_done(primary: Path, out: Path, started: float) -> None:
    """Where everything is, how long it took, and what the numbers are not."""
    heading("done")
    say(f"records:      {primary}/**/records_<task>_<date>.parquet  (lm_eval_evidential.load_records)")
    say(f"K sweep plot: {out / 'ksweep.png'}")
    say(f"report:       {out / 'report' / 'report.md'} (+ report.json, figures)")
    say(f"time:         {time.monotonic() - started:.0f} s")
    say()
    say("These numbers come from a tiny random model fine-tuned for a few steps on questions generated")
    say("for this project: they are ILLUSTRATIVE ONLY and say nothing about real models or datasets.")
    say("With a real checkpoint (hub access, a GPU):")
    say("  lm_eval --model evidential --model_args pretrained=meta-llama/Meta-Llama-3-8B,peft=ckpt/,dtype=bfloat16 \\")
    say("    --batch_size auto --tasks obqa_edl,arc_c_edl,csqa4_edl,mmlu_math_edl --output_path out")
    say("  lm-eval-evidential report out --id obqa_edl --near arc_c_edl,csqa4_edl --far mmlu_math_edl \\")
    say("    --k-policy restrict --out report")


def real_option_story(output_path: Path, matched_json: Path, mismatched_json: Path) -> str | None:
    """The demo's one sentence on csqa_edl (K = 5) against csqa4_edl (K = 4): which scores the real fifth option
    moved for this model, and why (:func:`~lm_eval_evidential.audits.explain.real_option_sentence`)."""
    import json

    from lm_eval_evidential.audits.explain import real_option_sentence
    from lm_eval_evidential.records import load_run

    run = load_run(output_path, ["obqa_edl", "csqa_edl", "csqa4_edl"])
    matched = [r for r in json.loads(matched_json.read_text()) if r["ood_task"] == "csqa4_edl"]
    mismatched = json.loads(mismatched_json.read_text())
    return real_option_sentence(run["obqa_edl"], run["csqa_edl"], run["csqa4_edl"], mismatched, matched)


#: Lines third-party code prints on our behalf that tell the user nothing: lm_eval runs `git describe`
#: to record a commit hash, and git complains on stderr outside a repository.
NOISE = (b"fatal: not a git repository",)


def run_live(cmd: list[str], env: dict) -> tuple[int, str]:
    """Run ``cmd``; its stderr (the harness's log and progress bars) passes through live, minus :data:`NOISE`
    lines; its stdout (the results table) is returned. Returns ``(exit status, stdout)``."""
    import threading

    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)
    reader.start()
    pass_through(proc.stderr.fileno(), sys.stderr.buffer)
    reader.join()
    code = proc.wait()
    return code, b"".join(out).decode("utf-8", errors="replace")


def pass_through(src_fd: int, dst, noise: tuple[bytes, ...] = NOISE) -> None:
    """Copy ``src_fd`` to the binary stream ``dst`` as it arrives, dropping whole lines that start with a
    ``noise`` prefix. A line that cannot be noise is written at once, before its end arrives (progress bars
    redraw with ``\\r`` and end their line only when done)."""
    buf, mid_line = b"", False
    while chunk := os.read(src_fd, 65536):
        buf += chunk
        while buf:
            if mid_line:  # the rest of a line already started on the screen
                line, nl, buf = buf.partition(b"\n")
                dst.write(line + nl)
                mid_line = not nl
            elif b"\n" in buf:
                line, _, buf = buf.partition(b"\n")
                if not line.startswith(noise):
                    dst.write(line + b"\n")
            elif any(n.startswith(buf[: len(n)]) for n in noise):
                break  # could still become a noise line: wait for more
            else:
                dst.write(buf)
                buf, mid_line = b"", True
        dst.flush()
    if buf and not buf.startswith(noise):
        dst.write(buf)
        dst.flush()


def _results_table(stdout: str) -> str:
    """The harness's own results table from its stdout (the lines that look like a table)."""
    lines = [ln for ln in stdout.splitlines() if ln.startswith("|")]
    return "\n".join(lines) if lines else stdout[-2000:]
