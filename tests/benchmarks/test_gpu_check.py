"""benchmarks/gpu_check.py, the GPU check prepared for an accelerator: it runs end to end on the CPU at a small
shape on a machine like the accelerator's, where lm-eval is installed without its dependencies (no ``datasets``,
``dill``, ``evaluate``, ...) and this package is not installed (no ``.pth`` hook), and its bundled questions are
the requests lm-eval itself builds for obqa_edl."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_check  # noqa: E402 (after the path above)
from bench_vllm import render_questions, requests_from  # noqa: E402

#: Installed here, absent from an offline accelerator machine whose image has torch, transformers, peft, accelerate,
#: tokenizers, huggingface_hub, numpy, pandas, pyarrow, scikit-learn, scipy, matplotlib, tqdm, pyyaml, jinja2,
#: sacrebleu and xxhash, and onto which only lm-eval's wheel is carried (installed with --no-deps): lm-eval's and this
#: package's declared dependencies that such an image lacks, and what those pull in.
ABSENT = (
    "datasets",
    "dill",
    "multiprocess",
    "evaluate",
    "sqlitedict",
    "pytablewriter",
    "word2number",
    "more_itertools",
    "rouge_score",
    "gguf",
    "jsonlines",
    "zstandard",
    "numexpr",
    "nltk",
    "pydantic",
)
#: Makes each of ABSENT unimportable as if it were not installed (``import`` raises ModuleNotFoundError,
#: ``importlib.util.find_spec`` answers None), then runs the script as ``python SCRIPT ARGS`` would.
WITHOUT = (
    "import runpy, sys\n"
    "for name in sys.argv[1].split(','):\n"
    "    sys.modules[name] = None\n"
    "sys.argv = sys.argv[2:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


def test_gpu_check_runs_every_way_without_the_packages_an_accelerator_machine_lacks(tmp_path):
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    env["LM_EVAL_EVIDENTIAL_DISABLE_HOOK"] = "1"  # the package is on PYTHONPATH there, not installed: no .pth hook
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    record = tmp_path / "out" / "gpu_check.json"
    cmd = [sys.executable, "-c", WITHOUT, ",".join(ABSENT), str(ROOT / "benchmarks" / "gpu_check.py")]
    cmd += ["--shape", "small", "--device", "cpu", "--dtype", "float32", "--questions", "4", "--shots", "2"]
    cmd += ["--batch-size", "4", "--repeats", "1", "--threads", "1", "--json", str(record)]
    proc = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "# no datasets here" in proc.stdout  # the block above held: the run had no datasets
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    measured = {(r["way"], r["shots"]) for r in rows}
    ways = {("bare", 0), ("bare", 2), ("evidential", 0), ("evidential", 2), ("evidential cached", 2), ("hf", 2)}
    assert measured == ways
    assert all(r["questions"] == 4 and r["q_per_s"] > 0 for r in rows)
    ratios = dict(line.split(": ") for line in proc.stdout.splitlines() if line and line[0] not in "#{")
    assert len(ratios) == 6 and all(float(v) > 0 for v in ratios.values()), proc.stdout
    assert proc.stdout.startswith("# device cpu, shape small")
    # The record holds what was printed: each row's questions per second, then each ratio recomputed from them.
    written = json.loads(record.read_text())
    assert written["benchmark"] == "gpu_check" and "--json" in written["command"]
    figures = {f["what"]: f["value"] for f in written["figures"]}
    for r in rows:
        assert figures[f"{r['way']}, {r['shots']}-shot"] == pytest.approx(r["q_per_s"], rel=1e-3)
    qps = {(r["way"], r["shots"]): r["q_per_s"] for r in rows}
    assert figures["evidential / hf, 2-shot"] == pytest.approx(qps["evidential", 2] / qps["hf", 2], rel=1e-2)
    assert figures["evidential 2-shot, prefix cache on / off"] == pytest.approx(
        qps["evidential cached", 2] / qps["evidential", 2], rel=1e-2
    )
    for label, printed in ratios.items():
        assert float(printed) == pytest.approx(figures[label], abs=0.006)


def test_a_way_that_fails_leaves_the_others_measured_and_the_exit_status_nonzero(tmp_path, monkeypatch, capsys):
    def broken(*args, **kwargs):
        raise RuntimeError("CUDA out of memory (planted)")

    monkeypatch.setattr("lm_eval.models.huggingface.HFLM.loglikelihood", broken)
    record = tmp_path / "gpu_check.json"
    argv = ["--shape", "small", "--device", "cpu", "--dtype", "float32", "--questions", "2", "--shots", "1"]
    argv += ["--batch-size", "4", "--repeats", "1", "--ways", "hf,bare", "--json", str(record)]
    assert gpu_check.main(argv) == 1
    out, err = capsys.readouterr()
    assert "CUDA out of memory (planted)" in err and "# failed: hf" in err
    assert {f["what"] for f in json.loads(record.read_text())["figures"]} == {"bare, 0-shot", "bare, 1-shot"}


def _lm_eval_requests(task, questions: int, shots: int) -> list:
    """lm-eval's own requests for obqa_edl's first questions, with a fixed prefix of the first ``shots`` training
    questions (its ``first_n`` sampler, as MMLU's few-shot prompts are made)."""
    from lm_eval.api.samplers import get_sampler

    task.sampler = get_sampler("first_n")(task.fewshot_pool(), rnd=None)
    requests = []
    for i, doc in enumerate(list(task.eval_docs)[:questions]):
        context = task.fewshot_context(doc, num_fewshot=shots)
        requests += task.construct_requests(doc, context, metadata=("obqa_edl", i, 1))
    return requests


@pytest.fixture(scope="module")
def obqa_edl():
    """obqa_edl on the bundled sample mirror, loaded by lm-eval's TaskManager."""
    from lm_eval.tasks import TaskManager

    from lm_eval_evidential.tasks import tasks_dir
    from lm_eval_evidential.testing.tiny import sample_data_dir

    with pytest.MonkeyPatch.context() as env:
        env.setenv("EVIDENTIAL_DATA_DIR", str(sample_data_dir()))
        tasks = TaskManager(include_path=str(tasks_dir()), include_defaults=False).load(["obqa_edl"])["tasks"]
        yield tasks["obqa_edl"]


def test_bundled_questions_are_what_the_task_renders_now(obqa_edl):
    bundled = json.loads(gpu_check.QUESTIONS.read_text(encoding="utf-8"))
    assert render_questions(gpu_check.RENDERED_QUESTIONS, gpu_check.RENDERED_SHOTS) == bundled, (
        "stale: python benchmarks/gpu_check.py --save-requests benchmarks/gpu_check_questions.json"
    )
    assert len(bundled["questions"]) == 120 and len(bundled["shots"]) == 25


@pytest.mark.parametrize("questions,shots", [(3, 0), (120, 5), (7, 25)])
def test_requests_from_the_bundled_questions_are_lm_evals_own(obqa_edl, questions, shots):
    bundled = json.loads(gpu_check.QUESTIONS.read_text(encoding="utf-8"))
    ours, n = requests_from(bundled, questions, shots)
    theirs = _lm_eval_requests(obqa_edl, questions, shots)
    assert n == questions and len(ours) == len(theirs) == 4 * questions
    for a, b in zip(ours, theirs):
        assert (a.request_type, a.arguments, a.idx, a.metadata, a.doc) == (
            b.request_type,
            b.arguments,
            b.idx,
            b.metadata,
            b.doc,
        )
    some = random.Random(shots).choice(ours)  # a prompt behind the prefix is that many questions long
    assert some.arguments[0].count("Answer:") == shots + 1


def test_more_shots_than_rendered_are_refused():
    bundled = json.loads(gpu_check.QUESTIONS.read_text(encoding="utf-8"))
    with pytest.raises(ValueError, match="26 shots asked, 25 rendered"):
        requests_from(bundled, 1, 26)
