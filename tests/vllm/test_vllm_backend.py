"""--model evidential-vllm on the CPU build of vLLM, against --model evidential (transformers) and own logits.

Run in the vLLM environment (docs/scaling.md, `.ci/run`'s second step): ``python -m pytest -m vllm tests/vllm``.
Skipped, with the reason, where vLLM is not installed. The model is SmolLM2-135M-Instruct in float32
(``lm_eval_evidential.testing.smollm2``), a real checkpoint vLLM's Llama implementation loads. Each vLLM
engine costs a minute or more to start on 2 cores, so the tests share three: the base model, the base
with a LoRA vLLM serves, the base with the paper's adapter (LoRA on lm_head, bias lora_only) merged.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

pytest.importorskip("vllm", reason="vLLM is not installed here; see docs/scaling.md for its environment")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine in this process: no spawn, faster start

from lm_eval_evidential.errors import EvidentialInputError  # noqa: E402
from lm_eval_evidential.records.provenance import differences  # noqa: E402
from tests.harness.test_model import evaluate, make_lm, task_docs  # noqa: E402
from tests.oracles import own_logits  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.usefixtures("use_mirror")]

TASK = "obqa_edl"
LIMIT = 12
# float32 vLLM (its CPU kernels) against float32 transformers on the same token ids, SmolLM2 on the sample
# questions; measured max |Δ logit| about 4e-5 on answer logits of about 15-20 (see the module's notes).
LOGIT_TOL = 2e-4
ENGINE = {"dtype": "float32", "max_model_len": 1024, "kv_cache_memory_bytes": 256 << 20, "enforce_eager": True}


@pytest.fixture(scope="module")
def smollm2():
    from lm_eval_evidential.testing.smollm2 import smollm2_checkpoint

    return smollm2_checkpoint()


def vllm_lm(pretrained, **kwargs):
    from lm_eval_evidential.harness.vllm_model import EvidentialVLLM

    return EvidentialVLLM(pretrained=str(pretrained), **ENGINE, **kwargs)


@pytest.fixture(scope="module")
def base_engine(smollm2):
    lm = vllm_lm(smollm2)
    yield lm
    del lm


def _same_records(got, want, tol=LOGIT_TOL, what=""):
    """The records of two backends agree: the same questions, logits within ``tol``, alphas, predictions."""
    assert [r["doc_id"] for r in got] == [r["doc_id"] for r in want]
    a, b = np.array([r["logits"] for r in got]), np.array([r["logits"] for r in want])
    assert np.abs(a - b).max() <= tol
    if want[0]["alpha"] is not None:
        alpha_a, alpha_b = np.array([r["alpha"] for r in got]), np.array([r["alpha"] for r in want])
        np.testing.assert_allclose(alpha_a, alpha_b, atol=tol, rtol=0)
    assert [r["pred"] for r in got] == [r["pred"] for r in want]
    if getattr(want, "phantom_logits", None) is not None:  # the next labels' logits, from the same request
        np.testing.assert_allclose(got.phantom_logits, want.phantom_logits, atol=tol, rtol=0, equal_nan=True)
    print(f"MEASURED {what}: max |Δ logit| = {np.abs(a - b).max():.2e} over {a.size} logits")


def _head(lm, **settings):
    from lm_eval_evidential.harness.model_args import head_config

    lm.head = head_config(settings)
    return lm


def test_answer_logits_equal_transformers_and_records_equal_the_hf_backends(smollm2, base_engine):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    results, records = evaluate(_head(base_engine, method="edl"), [TASK], limit=LIMIT)
    hf_results, hf_records = evaluate(make_lm(smollm2, batch_size=4), [TASK], limit=LIMIT)
    rec, hf = records[TASK], hf_records[TASK]
    assert len(rec) == LIMIT
    _same_records(rec, hf, what="base EDL")
    # the oracle: the model's own logits, one unpadded prompt at a time, by transformers directly
    task, _ = task_docs(TASK)
    model = AutoModelForCausalLM.from_pretrained(smollm2, dtype=torch.float32).eval()
    own, _, _ = own_logits(model, AutoTokenizer.from_pretrained(smollm2), rec, task)
    assert np.abs(np.array([r["logits"] for r in rec]) - own).max() <= LOGIT_TOL
    assert results["results"][TASK]["acc,none"] == hf_results["results"][TASK]["acc,none"]
    # same producer but for the backend: the fingerprint says which computed them
    assert set(differences(hf.meta, rec.meta)) == {"backend"}
    assert rec.meta["backend"] == "vllm" and rec.meta["adapter_mode"] is None


def test_ib_edl_sigma_reads_the_last_vocabulary_rows(smollm2, base_engine):
    settings = {"method": "ib_edl", "num_noises": 7, "sigma_mult": 1.0, "seed": 3}
    _, records = evaluate(_head(base_engine, **settings), [TASK], limit=LIMIT)
    _, hf_records = evaluate(make_lm(smollm2, batch_size=4, **settings), [TASK], limit=LIMIT)
    _same_records(records[TASK], hf_records[TASK], what="IB-EDL")
    # σ matters here: the same logits with σ = 0 give other alphas (so the comparison above checks σ)
    edl = np.array([r["logits"] for r in records[TASK]])
    alpha = np.array([r["alpha"] for r in records[TASK]])
    assert np.abs(alpha - (np.logaddexp(0, edl) + 1)).max() > 1e-3


def test_softmax_and_the_split_request_path(smollm2, base_engine, monkeypatch):
    import lm_eval_evidential.harness.vllm_model as vllm_model

    _, hf_records = evaluate(make_lm(smollm2, batch_size=4, method="softmax"), [TASK], limit=4)
    monkeypatch.setattr(vllm_model, "MAX_IDS_PER_REQUEST", 2)  # more ids than one request takes: split
    _, records = evaluate(_head(base_engine, method="softmax"), [TASK], limit=4)
    _same_records(records[TASK], hf_records[TASK], what="softmax, split requests")


def test_a_text_choice_task_is_refused_by_the_same_answer_check(base_engine):
    from lm_eval.api.instance import Instance

    request = Instance(
        request_type="loglikelihood",
        doc={},
        arguments=("Question: what colour is the sky?\nAnswer:", " blue sky"),
        idx=0,
        metadata=("openbookqa", 7, 1),
    )
    with pytest.raises(EvidentialInputError, match=r"task 'openbookqa' doc 7: choice ' blue sky' is \d tokens"):
        base_engine.loglikelihood([request])


def test_the_scoring_is_inherited_from_the_one_base_the_transformers_backend_has_too():
    import inspect

    from lm_eval_evidential.harness.model import EvidentialLM
    from lm_eval_evidential.harness.scoring import EvidentialScoring
    from lm_eval_evidential.harness.vllm_model import EvidentialVLLM

    assert EvidentialVLLM.__mro__[1] is EvidentialScoring and not EvidentialVLLM.__abstractmethods__
    for name in ("loglikelihood", "planner", "prompt_logits", "set_cache_hook", "init_scoring"):
        assert name not in vars(EvidentialVLLM)
        assert inspect.getattr_static(EvidentialVLLM, name) is inspect.getattr_static(EvidentialLM, name)
    assert EvidentialVLLM.last_logits_at is not EvidentialLM.last_logits_at


def test_bad_arguments_are_refused_before_the_engine_starts(smollm2):
    with pytest.raises(EvidentialInputError, match="method"):
        vllm_lm(smollm2, method="bayes")
    with pytest.raises(EvidentialInputError, match="logprobs_mode"):
        vllm_lm(smollm2, logprobs_mode="raw_logprobs")
    with pytest.raises(EvidentialInputError, match="two adapters"):
        vllm_lm(smollm2, peft="a", lora_local_path="b")


@pytest.fixture(scope="module")
def served_adapter(smollm2, tmp_path_factory):
    from lm_eval_evidential.testing.tiny import build_lora_adapter

    out = tmp_path_factory.mktemp("lora") / "qv"
    return build_lora_adapter(smollm2, out, target_modules=("q_proj", "v_proj"), bias="none", seed=2, init_std=0.05)


def test_a_lora_adapter_served_by_vllm_equals_peft(smollm2, served_adapter, base_engine):
    _, base_records = evaluate(_head(base_engine, method="edl"), [TASK], limit=LIMIT)
    lm = vllm_lm(smollm2, peft=str(served_adapter))
    assert lm.adapter_mode == "lora" and lm.lora_request is not None
    _, records = evaluate(lm, [TASK], limit=LIMIT)
    del lm
    _, hf_records = evaluate(make_lm(smollm2, served_adapter, batch_size=4), [TASK], limit=LIMIT)
    _same_records(records[TASK], hf_records[TASK], what="LoRA served by vLLM")
    assert records[TASK].meta["adapter_mode"] == "lora" and records[TASK].meta["adapter_sha256"]
    base = np.array([r["logits"] for r in base_records[TASK]])
    assert np.abs(np.array([r["logits"] for r in records[TASK]]) - base).max() > 1e-2  # the adapter acts


def test_the_papers_adapter_is_merged_and_equals_peft(smollm2, tmp_path_factory, monkeypatch):
    from lm_eval_evidential.testing.tiny import build_lora_adapter

    monkeypatch.setenv("LM_EVAL_EVIDENTIAL_CACHE", str(tmp_path_factory.mktemp("cache")))
    adapter = build_lora_adapter(smollm2, tmp_path_factory.mktemp("paper") / "adapter", seed=4, init_std=0.05)
    lm = vllm_lm(smollm2, peft=str(adapter))
    assert lm.adapter_mode == "merged"
    _, records = evaluate(lm, [TASK], limit=LIMIT)
    del lm
    _, hf_records = evaluate(make_lm(smollm2, adapter, batch_size=4), [TASK], limit=LIMIT)
    _same_records(records[TASK], hf_records[TASK], what="paper adapter merged")
    assert records[TASK].meta["adapter_mode"] == "merged"
    assert records[TASK].meta["peft"] == str(adapter)  # what the user named, not the merged folder


def test_two_data_parallel_replicas_give_the_records_of_one_process(smollm2):
    pytest.importorskip("ray", reason="data_parallel_size > 1 needs ray (pip install '.[vllm]')")
    # against the transformers backend, not base_engine: an in-process engine torn down by an earlier test
    # (del lm) takes the process's distributed groups with it, so base_engine cannot run after the adapter tests
    _, one = evaluate(make_lm(smollm2, batch_size=4), [TASK], limit=LIMIT)
    lm = vllm_lm(smollm2, data_parallel_size=2)  # lm-eval's Ray replicas, each its own engine
    assert not hasattr(lm, "model")  # no engine in this process: the two replicas score everything
    _, two = evaluate(lm, [TASK], limit=LIMIT)
    del lm
    assert sorted(r["doc_id"] for r in two[TASK]) == list(range(LIMIT))  # every question once, one file
    _same_records(two[TASK], one[TASK], what="2 replicas vs transformers")
