"""The evidential model end to end in-process: evidence against the model's own logits,
batch/padding invariance, IB-EDL reproducibility, harness acc == record accuracy, dedup."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.usefixtures("use_mirror")

LIMIT = 12


def our_tasks(metadata=None):
    """A TaskManager over this package's tasks only: indexing lm_eval's thousands of YAMLs takes seconds."""
    from lm_eval.tasks import TaskManager

    from lm_eval_evidential.tasks import tasks_dir

    return TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata=metadata)


def evaluate(model, tasks, *, limit=LIMIT, metadata=None, **kwargs):
    """``(results, records)``: lm_eval's results and this evaluation's ``{task: Records}``."""
    import lm_eval

    results = lm_eval.simple_evaluate(
        model=model, tasks=tasks, limit=limit, bootstrap_iters=0, task_manager=our_tasks(metadata), **kwargs
    )
    return results, results.records


def make_lm(tiny_model, tiny_adapter=None, **kwargs):
    from lm_eval_evidential.harness.model import EvidentialLM

    args = {"pretrained": str(tiny_model), "device": "cpu", "dtype": "float32", "batch_size": 4, **kwargs}
    if tiny_adapter is not None:
        args["peft"] = str(tiny_adapter)
    return EvidentialLM(**args)


@pytest.fixture(scope="module")
def reference(tiny_model, tiny_adapter):
    """The model's own last-position logits, computed one unpadded prompt at a time."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    base = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    model = PeftModel.from_pretrained(base, tiny_adapter).eval()

    def logits(prompt: str, letters: list[str]) -> np.ndarray:
        ids = tok(prompt)["input_ids"]
        answer = [tok(prompt + " " + x)["input_ids"][-1] for x in letters]
        with torch.no_grad():
            full = model(torch.tensor([ids])).logits[0, -1]
        return full[answer].double().numpy()

    return logits


def task_docs(name):
    task = our_tasks().load([name])["tasks"][name]
    return task, list(task.eval_docs)


def test_evidence_equals_softplus_of_the_models_own_logits(tiny_model, tiny_adapter, reference):
    lm = make_lm(tiny_model, tiny_adapter)
    results, records = evaluate(lm, ["obqa_edl", "arc_c_edl"])
    for name in ("obqa_edl", "arc_c_edl"):
        task, docs = task_docs(name)
        rec = records[name]
        assert len(rec) == LIMIT
        for r in rec:
            doc = docs[r["doc_id"]]
            expected = reference(task.doc_to_text(doc), doc["letters"])
            np.testing.assert_allclose(r["logits"], expected, atol=1e-5, rtol=0)
            np.testing.assert_allclose(r["evidence"], np.logaddexp(0, r["logits"]), atol=1e-12)
            np.testing.assert_allclose(r["alpha"], np.array(r["evidence"]) + 1, atol=1e-12)
            assert r["strength"] == pytest.approx(sum(r["alpha"]), abs=1e-12)
            assert r["vacuity"] == pytest.approx(r["k"] / r["strength"], abs=1e-12)
            assert r["k"] == len(doc["options"]) == len(r["labels"])


def test_harness_acc_is_the_record_accuracy(tiny_model, tiny_adapter):
    lm = make_lm(tiny_model, tiny_adapter)
    results, records = evaluate(lm, ["obqa_edl", "csqa_edl"], limit=20)
    for name in ("obqa_edl", "csqa_edl"):
        res = results["results"][name]
        rec = records[name]
        assert res["acc,none"] == pytest.approx(float(np.mean(rec.correct)), abs=1e-12)
        assert res["vacuity,none"] == pytest.approx(float(np.mean(rec.vacuity)), abs=1e-12)
        for metric in ("ece,none", "nll,none", "brier,none"):
            assert math.isfinite(res[metric])
        assert results["higher_is_better"][name]["acc"] is True
        assert results["higher_is_better"][name]["ece"] is False
        assert results["versions"][name] == 1.0


@pytest.mark.parametrize("method", ["edl", "ib_edl"])
def test_result_does_not_depend_on_batch_size_or_neighbours(tiny_model, tiny_adapter, method):
    one = evaluate(make_lm(tiny_model, tiny_adapter, batch_size=1, method=method), ["arc_c_edl"], limit=None)[1]
    four = evaluate(make_lm(tiny_model, tiny_adapter, batch_size=4, method=method), ["arc_c_edl"], limit=None)[1]
    a, b = one["arc_c_edl"], four["arc_c_edl"]
    assert set(np.unique(a.k)) >= {3, 4}  # mixed lengths and K within the batches
    np.testing.assert_allclose(a.logits, b.logits, atol=1e-5, equal_nan=True)
    np.testing.assert_allclose(a.alpha, b.alpha, atol=1e-5, equal_nan=True)


def test_ib_edl_is_reproducible_with_its_seed_and_changes_with_it(tiny_model, tiny_adapter):
    runs = [
        evaluate(make_lm(tiny_model, tiny_adapter, method="ib_edl", seed=s, num_noises=8), ["obqa_edl"])[1]["obqa_edl"]
        for s in (3, 3, 4)
    ]
    np.testing.assert_array_equal(runs[0].alpha, runs[1].alpha)
    assert not np.allclose(runs[0].alpha, runs[2].alpha)
    # alpha never falls below the prior, and vacuity stays in (0, 1]
    assert np.nanmin(runs[0].alpha) >= 1.0
    assert np.all((runs[0].vacuity > 0) & (runs[0].vacuity <= 1))
    assert runs[0].meta["method"] == "ib_edl" and runs[0].meta["num_noises"] == 8


def test_softmax_method_has_no_vacuity(tiny_model, tiny_adapter):
    results, records = evaluate(make_lm(tiny_model, tiny_adapter, method="softmax"), ["obqa_edl"])
    rec = records["obqa_edl"]
    assert np.isnan(rec.vacuity).all() and np.isnan(rec.alpha).all()
    assert rec[0]["evidence"] is None
    z = rec.logits
    p = np.exp(z - z.max(1, keepdims=True))
    np.testing.assert_allclose(rec.max_prob, (p / p.sum(1, keepdims=True)).max(1), atol=1e-12)
    assert "vacuity,none" not in results["results"]["obqa_edl"]  # undefined: no row rather than a NaN row
    assert results.records["obqa_edl"].meta["method"] == "softmax"


def test_prior_weight_scales_vacuity(tiny_model, tiny_adapter):
    rec = evaluate(make_lm(tiny_model, tiny_adapter, prior_weight=0.5), ["obqa_edl"])[1]["obqa_edl"]
    np.testing.assert_allclose(rec.alpha, np.logaddexp(0, rec.logits) + 0.5, atol=1e-12)
    np.testing.assert_allclose(rec.vacuity, 0.5 * rec.k / rec.strength, atol=1e-12)


def test_each_distinct_prompt_is_forwarded_once_across_tasks(tiny_model, tiny_adapter, monkeypatch):
    lm = make_lm(tiny_model, tiny_adapter)
    seen = []
    original = lm._last_logits

    def counting(batch, *prefix_length):
        seen.extend(tuple(x) for x in batch)
        return original(batch, *prefix_length)

    monkeypatch.setattr(lm, "_last_logits", counting)
    results, records = evaluate(lm, ["obqa_edl", "obqa_edl_vs_mmlu_math_edl"], limit=None)
    n_obqa = len(task_docs("obqa_edl")[1])
    n_pair = (
        results["results"]["obqa_edl_vs_mmlu_math_edl"]["n_id,none"]
        + results["results"]["obqa_edl_vs_mmlu_math_edl"]["n_ood,none"]
    )
    assert n_pair > n_obqa
    assert len(seen) == len(set(seen))  # no prompt twice
    assert len(seen) <= n_pair  # the pair's ID prompts are the single task's prompts


def test_ece_matches_the_core_metric_on_the_records(tiny_model, tiny_adapter):
    from lm_eval_evidential.metrics.calibration import adaptive_ece, brier, ece, nll

    results, records = evaluate(make_lm(tiny_model, tiny_adapter), ["obqa_edl"], limit=None)
    rec, res = records["obqa_edl"], results["results"]["obqa_edl"]
    assert res["ece,none"] == pytest.approx(ece(rec.max_prob, rec.correct, n_bins=15), abs=1e-12)
    assert res["adaptive_ece,none"] == pytest.approx(adaptive_ece(rec.max_prob, rec.correct, n_bins=15), abs=1e-12)
    assert res["nll,none"] == pytest.approx(nll(rec.probs, rec.gold), abs=1e-9)
    assert res["brier,none"] == pytest.approx(brier(rec.probs, rec.gold), abs=1e-9)


def test_batch_size_auto_finds_a_size_and_gives_the_same_records(tiny_model, tiny_adapter):
    lm = make_lm(tiny_model, tiny_adapter, batch_size="auto", max_batch_size=16)
    auto = evaluate(lm, ["obqa_edl"], limit=20)[1]["obqa_edl"]
    fixed = evaluate(make_lm(tiny_model, tiny_adapter, batch_size=3), ["obqa_edl"], limit=20)[1]["obqa_edl"]
    np.testing.assert_allclose(auto.alpha, fixed.alpha, atol=1e-5)
