"""Data parallel the harness's way: docs sharded over ranks, records gathered once, no duplicate docs.

The end-to-end test launches two real CPU processes (``torch.distributed.run``, gloo, accelerate
in CPU mode) running the stock lm_eval CLI. ``accelerate launch --cpu --num_processes 2`` is not
used: without ``--mpirun_hostfile`` (MPI is not installed) it starts a single process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("use_mirror")

LIMIT = 21  # odd, with K=4 and K=5 tasks: the ranks get unequal request counts and the harness pads
TASKS = ["obqa_edl", "csqa_edl"]

# Runs the lm_eval CLI in each process and records which docs this rank was given.
# lm-eval's HFLM takes rank/world size from accelerate only when it sees > 1 GPU, so on CPU every
# process would be "rank 0 of 1" and score every doc; the shim applies HFLM's GPU assignment
# when the model did not do it itself (a no-op once the model shards CPU processes natively).
DRIVER = r'''
import json, os, sys
import lm_eval_evidential  # noqa: F401  (import hook)
from lm_eval_evidential.harness.model import EvidentialLM

original = EvidentialLM.__init__

def __init__(self, *args, **kwargs):
    original(self, *args, **kwargs)
    accelerator = getattr(self, "accelerator", None)
    shimmed = False
    if accelerator is not None and accelerator.num_processes > 1 and self.world_size == 1:
        self._rank, self._world_size = accelerator.process_index, accelerator.num_processes
        shimmed = True
    trace = {"rank": self.rank, "world_size": self.world_size, "shimmed": shimmed, "docs": [], "requests": 0}
    inner = self.loglikelihood

    def loglikelihood(requests, *a, **k):
        out = inner(requests, *a, **k)
        trace["docs"] += sorted({(r.task_name, r.doc_id) for r in requests})
        trace["requests"] += len(requests)
        path = os.path.join(os.environ["DP_TRACE_DIR"], f"rank{os.environ['RANK']}.json")
        with open(path + ".tmp", "w") as fh:
            json.dump(trace, fh)
        os.replace(path + ".tmp", path)
        return out

    self.loglikelihood = loglikelihood

EvidentialLM.__init__ = __init__
from lm_eval.__main__ import cli_evaluate
sys.argv = ["lm_eval", *sys.argv[1:]]
cli_evaluate()
'''


def single_process_records(tiny_model, tiny_adapter):
    import lm_eval
    from lm_eval.tasks import TaskManager

    from lm_eval_evidential.harness.model import EvidentialLM
    from lm_eval_evidential.harness.plugin import tasks_dir

    lm = EvidentialLM(pretrained=str(tiny_model), peft=str(tiny_adapter), device="cpu", dtype="float32", batch_size=4)
    results = lm_eval.simple_evaluate(
        model=lm, tasks=TASKS, limit=LIMIT, bootstrap_iters=0,
        task_manager=TaskManager(include_path=str(tasks_dir()), include_defaults=False),
    )
    return results.records


@pytest.mark.slow
def test_two_cpu_processes_shard_the_docs_and_write_each_record_once(tiny_model, tiny_adapter, mirror, tmp_path):
    import lm_eval_evidential

    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    trace_dir = tmp_path / "trace"
    trace_dir.mkdir()
    out_dir = tmp_path / "out"
    env = {
        **os.environ, "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "EVIDENTIAL_DATA_DIR": str(mirror), "DP_TRACE_DIR": str(trace_dir),
    }  # fmt: skip
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(driver),
        "--model", "evidential", "--model_args", f"pretrained={tiny_model},peft={tiny_adapter},device=cpu,dtype=float32",
        "--batch_size", "4", "--tasks", ",".join(TASKS), "--limit", str(LIMIT), "--output_path", str(out_dir),
    ]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp_path, timeout=540, check=False)
    errors = [line for line in proc.stderr.splitlines() if "Error" in line]
    assert proc.returncode == 0, "\n".join(errors[:8]) + "\n...\n" + proc.stderr[-3000:]

    # Each rank was given its own docs; together they are every doc, each on one rank only.
    traces = [json.loads((trace_dir / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [(t["rank"], t["world_size"]) for t in traces] == [(0, 2), (1, 2)]
    shards = [{tuple(d) for d in t["docs"]} for t in traces]
    assert not shards[0] & shards[1]
    assert shards[0] | shards[1] == {(task, i) for task in TASKS for i in range(LIMIT)}
    assert all(len(s) < len(TASKS) * LIMIT for s in shards)

    # Gathered once on rank 0: one results file, one records file per task, every doc once.
    assert len(list(out_dir.rglob("results_*.json"))) == 1
    reference = single_process_records(tiny_model, tiny_adapter)
    for task in TASKS:
        files = list(out_dir.rglob(f"records_{task}_*.parquet"))
        assert len(files) == 1, files
        got = lm_eval_evidential.load_records(out_dir, task)
        np.testing.assert_array_equal(np.sort(got.doc_id), np.arange(LIMIT))
        want = reference[task]
        np.testing.assert_array_equal(got.doc_id, want.doc_id)
        np.testing.assert_array_equal(got.k, want.k)
        np.testing.assert_array_equal(got.gold, want.gold)
        np.testing.assert_array_equal(got.pred, want.pred)
        for name in ("logits", "evidence", "alpha"):
            np.testing.assert_allclose(getattr(got, name), getattr(want, name), atol=1e-5, rtol=0, equal_nan=True)
        np.testing.assert_allclose(got.vacuity, want.vacuity, atol=1e-5, rtol=0)
    results = json.loads(next(out_dir.rglob("results_*.json")).read_text())
    for task in TASKS:
        assert results["results"][task]["acc,none"] == pytest.approx(float(np.mean(reference[task].correct)))


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
