"""Data parallel the harness's way: docs sharded over global ranks, records gathered once, no duplicate docs.

Two end-to-end runs on CPU (gloo), each against one in-process run of the same work:

- docs/scaling.md's data-parallel command, verbatim but for the model paths: two processes;
- two nodes of two processes each, simulated on this machine by two ``torchrun --nnodes 2
  --node_rank 0/1`` launches. Their processes see two (fake) GPUs per node, so the harness's
  HF model takes its GPU branch and sets each process's rank to its node-local index
  (0, 1, 0, 1): the plugin must replace that with the global one. Node 1 loads a copy of the
  model and adapter from other paths, as a cluster's local scratch disks would.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("use_mirror")

SCALING = Path(__file__).resolve().parents[2] / "docs" / "scaling.md"
TASKS = ["obqa_edl", "arc_c_edl"]  # the docs command's tasks: K=4, and K=3/4/5 per question
TIMEOUT = 900


def _env(mirror, **extra) -> dict:
    root = str(Path(__file__).resolve().parents[2])
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "EVIDENTIAL_DATA_DIR": str(mirror),
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
        **extra,
    }


@pytest.fixture(scope="module")
def one_process(tiny_model, tiny_adapter, mirror):
    """The records of the same tasks scored in this process."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from lm_eval_evidential.harness.model import EvidentialLM
    from lm_eval_evidential.tasks import tasks_dir

    with pytest.MonkeyPatch.context() as mp:  # module scope: use_mirror is per test
        mp.setenv("EVIDENTIAL_DATA_DIR", str(mirror))
        lm = EvidentialLM(pretrained=str(tiny_model), peft=str(tiny_adapter), device="cpu", batch_size=8)
        tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False)
        results = lm_eval.simple_evaluate(model=lm, tasks=TASKS, bootstrap_iters=0, task_manager=tm)
    return results.records, results["results"]


def _check_one_records_file_equal_to_one_process(out_dir: Path, one_process) -> dict:
    import lm_eval_evidential

    reference, reference_results = one_process
    assert len(list(out_dir.rglob("results_*.json"))) == 1
    for task in TASKS:
        assert len(list(out_dir.rglob(f"records_{task}_*.parquet"))) == 1
        got, want = lm_eval_evidential.load_records(out_dir, task), reference[task]
        assert sorted(got.doc_id.tolist()) == list(range(len(want)))  # every doc, once
        np.testing.assert_array_equal(got.doc_id, want.doc_id)
        for name in ("k", "gold", "pred"):
            np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
        for name in ("logits", "evidence", "alpha", "vacuity"):
            np.testing.assert_allclose(getattr(got, name), getattr(want, name), atol=1e-5, rtol=0, equal_nan=True)
        for key in ("model_sha256", "adapter_sha256"):
            assert got.meta[key] == want.meta[key] is not None
    results = json.loads(next(out_dir.rglob("results_*.json")).read_text())["results"]
    for task in TASKS:
        assert results[task]["acc,none"] == pytest.approx(reference_results[task]["acc,none"])
    return lm_eval_evidential.load_records(out_dir, TASKS[0]).meta


def _docs_command(marker: str) -> str:
    text = SCALING.read_text(encoding="utf-8")
    block = re.search(rf"<!-- {marker} -->\n```bash\n(.*?)```", text, re.S)
    assert block, f"no bash block after <!-- {marker} --> in docs/scaling.md"
    return block.group(1)


@pytest.mark.slow
def test_docs_command_starts_two_cpu_processes(tiny_model, tiny_adapter, mirror, one_process, tmp_path):
    command = _docs_command("data-parallel-command")
    command, n = re.subn(r"^MODEL=\S+ ADAPTER=\S+", f"MODEL={tiny_model} ADAPTER={tiny_adapter}", command, flags=re.M)
    assert n == 1, "the docs command's first line sets MODEL and ADAPTER"
    proc = subprocess.run(
        ["bash", "-c", command],
        env=_env(mirror),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    # what docs/scaling.md says proves two ranks ran
    for rank in (0, 1):
        assert f"Building contexts for obqa_edl on rank {rank}..." in proc.stderr
    assert "data parallel: rank 1 of 2 (node-local rank 1)" in proc.stderr
    _check_one_records_file_equal_to_one_process(tmp_path / "out", one_process)


# Each process: fake two GPUs (the harness's HF model then takes its GPU branch, with node-local
# ranks), record which docs this rank was given, run what the CLI runs (simple_evaluate, then the
# tracker saves results and records) without indexing every stock lm-eval task.
DRIVER = r"""
import json, os, sys
import torch

torch.cuda.device_count = lambda: 2
import lm_eval_evidential  # noqa: F401  (import hook)
from lm_eval import simple_evaluate
from lm_eval.loggers import EvaluationTracker
from lm_eval.tasks import TaskManager
from lm_eval.utils import setup_logging
from lm_eval_evidential.harness.model import EvidentialLM
from lm_eval_evidential.tasks import tasks_dir

setup_logging("INFO")  # as the CLI does
original = EvidentialLM.loglikelihood

def loglikelihood(self, requests, *args, **kwargs):
    trace = {"rank": self.rank, "world_size": self.world_size,
             "docs": sorted({(r.task_name, r.doc_id) for r in requests})}
    with open(os.path.join(os.environ["DP_TRACE_DIR"], f"rank{os.environ['RANK']}.json"), "w") as fh:
        json.dump(trace, fh)
    return original(self, requests, *args, **kwargs)

EvidentialLM.loglikelihood = loglikelihood
model_args, out = sys.argv[1], sys.argv[2]
tracker = EvaluationTracker(output_path=out)
results = simple_evaluate(model="evidential", model_args=model_args, tasks=sys.argv[3].split(","), batch_size=8,
                          evaluation_tracker=tracker,
                          task_manager=TaskManager(include_path=str(tasks_dir()), include_defaults=False),
                          bootstrap_iters=0)
if results is not None:
    tracker.save_results_aggregated(results=results, samples=None)
"""


@pytest.mark.slow
def test_two_nodes_of_two_processes_use_global_ranks(tiny_model, tiny_adapter, mirror, one_process, tmp_path):
    driver, trace_dir, out_dir = tmp_path / "driver.py", tmp_path / "trace", tmp_path / "out"
    driver.write_text(DRIVER)
    trace_dir.mkdir()
    scratch = {0: (tiny_model, tiny_adapter)}
    scratch[1] = tuple(shutil.copytree(p, tmp_path / "node1_scratch" / p.name) for p in (tiny_model, tiny_adapter))
    port = str(29400 + os.getpid() % 500)
    procs = []
    for node in (0, 1):
        model, adapter = scratch[node]
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nnodes",
            "2",
            "--node_rank",
            str(node),
            "--nproc_per_node",
            "2",
            "--master_addr",
            "127.0.0.1",
            "--master_port",
            port,
            str(driver),
            f"pretrained={model},peft={adapter},device=cpu",
            str(out_dir),
            ",".join(TASKS),
        ]
        env = _env(mirror, ACCELERATE_USE_CPU="1", DP_TRACE_DIR=str(trace_dir))
        procs.append(
            subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        )
    outputs = [p.communicate(timeout=TIMEOUT) for p in procs]
    for p, (_, err) in zip(procs, outputs):
        assert p.returncode == 0, err[-4000:]

    traces = [json.loads((trace_dir / f"rank{r}.json").read_text()) for r in range(4)]
    assert [(t["rank"], t["world_size"]) for t in traces] == [(r, 4) for r in range(4)]
    shards = [{tuple(d) for d in t["docs"]} for t in traces]
    n_docs = {task: len(one_process[0][task]) for task in TASKS}
    assert set().union(*shards) == {(task, i) for task in TASKS for i in range(n_docs[task])}
    assert sum(len(s) for s in shards) == sum(n_docs.values())  # no doc on two ranks
    node1_log = outputs[1][1]
    assert "data parallel: rank 2 of 4 (node-local rank 0)" in node1_log

    meta = _check_one_records_file_equal_to_one_process(out_dir, one_process)
    # the same model from two paths: accepted (same content hashes, checked above); rank 0's paths kept
    assert (meta["pretrained"], meta["peft"]) == (str(tiny_model), str(tiny_adapter))


def test_launched_processes_that_accelerate_leaves_apart_are_refused(tiny_model, monkeypatch):
    """torchrun on CPU without ACCELERATE_USE_CPU: N processes, each rank 0 of 1, each scoring everything."""
    from accelerate.state import AcceleratorState, PartialState

    from lm_eval_evidential.harness.model import EvidentialInputError, EvidentialLM

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("ACCELERATE_USE_CPU", raising=False)
    monkeypatch.delenv("LOCAL_RANK", raising=False)  # accelerate would then try to join a process group
    AcceleratorState._reset_state(True)
    try:
        with pytest.raises(EvidentialInputError, match=r"launched as one of 2 .* ACCELERATE_USE_CPU=1"):
            EvidentialLM(pretrained=str(tiny_model), device="cpu", batch_size=4)
    finally:
        AcceleratorState._reset_state(True)
        PartialState._reset_state()


def test_padding_copies_of_the_last_request_get_its_response(tiny_model):
    """The harness evens out ranks by repeating a rank's last request object (evaluator: numpad)."""
    from lm_eval_evidential.harness.model import EvidentialLM

    lm = EvidentialLM(pretrained=str(tiny_model), device="cpu", dtype="float32", batch_size=4)

    class Req:
        def __init__(self, doc_id, cont):
            self.args = (f"Question {doc_id}?\nAnswer:", cont)
            self.task_name, self.doc_id, self.doc = "custom", doc_id, {}

    reqs = [Req(d, f" {x}") for d in (0, 1) for x in "ABCD"]
    plain = lm.loglikelihood(reqs)
    plain_evidence = lm.evidence.take()
    padded = lm.loglikelihood(reqs + [reqs[-1]] * 3)
    padded_evidence = lm.evidence.take()
    assert len(padded) == len(reqs) + 3
    for a, b in zip(plain, padded[: len(reqs)]):
        assert a[0] == pytest.approx(b[0], abs=1e-6) and a[1] == b[1]
    assert plain_evidence.keys() == padded_evidence.keys() == {("custom", 0), ("custom", 1)}
    for key, question in plain_evidence.items():
        assert question.logits == pytest.approx(padded_evidence[key].logits, abs=1e-6)
    for copy in padded[len(reqs) :]:
        assert copy[0] == pytest.approx(plain[-1][0], abs=1e-6) and copy[1] == plain[-1][1]
    assert sum(r[1] for r in padded[4:8]) == 1  # still one argmax per question


@pytest.mark.slow
@pytest.mark.parametrize("members", ["mc_samples=3", "laplace"])
def test_member_records_do_not_depend_on_the_process_count(tiny_model, tiny_adapter, mirror, tmp_path, members):
    """docs/scaling.md's two-process command with MC dropout or a Laplace posterior: each member's logits equal
    the one-process run's (MC masks are seeded by the prompt, Laplace samples are weights shared by all)."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    import lm_eval_evidential
    from lm_eval_evidential.harness.model import EvidentialLM
    from lm_eval_evidential.tasks import tasks_dir
    from tests.harness.test_laplace_members import _hand_posterior

    if members == "laplace":
        adapter, extra = _hand_posterior(tiny_model, tiny_adapter, tmp_path / "posterior")[0], ""
    else:
        adapter, extra = tiny_adapter, f",{members}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EVIDENTIAL_DATA_DIR", str(mirror))
        kwargs = {"mc_samples": 3} if extra else {}
        lm = EvidentialLM(pretrained=str(tiny_model), peft=str(adapter), device="cpu", batch_size=8, **kwargs)
        tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False)
        reference = lm_eval.simple_evaluate(model=lm, tasks=TASKS, bootstrap_iters=0, task_manager=tm).records
    command = _docs_command("data-parallel-command")
    command = re.sub(r"^MODEL=\S+ ADAPTER=\S+", f"MODEL={tiny_model} ADAPTER={adapter}", command, flags=re.M)
    command = command.replace("peft=$ADAPTER", f"peft=$ADAPTER{extra}")
    proc = subprocess.run(
        ["bash", "-c", command], env=_env(mirror), cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "data parallel: rank 1 of 2 (node-local rank 1)" in proc.stderr
    for task in TASKS:
        got, want = lm_eval_evidential.load_records(tmp_path / "out", task), reference[task]
        assert got.n_members == want.n_members == 3
        np.testing.assert_array_equal(got.doc_id, want.doc_id)
        np.testing.assert_allclose(got.member_logits, want.member_logits, atol=1e-5, rtol=0, equal_nan=True)
        np.testing.assert_array_equal(got.pred, want.pred)
