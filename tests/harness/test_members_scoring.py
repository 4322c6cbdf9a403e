"""Ensembles (peft=DIR of members) and MC dropout (mc_samples=N) through --model evidential, end to end.

Oracles: each member's logits in the records equal that member scored alone (its adapter loaded by
itself), and each MC-dropout pass equals the adapter with the pass's masks replayed by hand (the
documented rule, on lora_A's input), <= 1e-5 in float32 on three architectures; the records do not
change with the batch size; the predictive distribution is the mean of the members' probabilities.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.special import softmax

from lm_eval_evidential.errors import EvidentialInputError
from lm_eval_evidential.modeling.heads import question_seed
from tests.harness.test_model import evaluate, make_lm, task_docs
from tests.oracles import replayed_dropout_logits

pytestmark = pytest.mark.usefixtures("use_mirror")

FAMILIES = ("llama", "qwen2", "gemma2")
TASK = "arc_c_edl"  # K in {3, 4, 5}: mixed K within the batches
LIMIT = 6


def _ensemble(root, family):
    """(base model, ensemble folder of 3 members with dropout 0.2) of one architecture."""
    from lm_eval_evidential.testing.tiny import build_lora_adapter, build_tiny_model

    base = build_tiny_model(root / "model", family=family, seed=0)
    for i in range(3):
        build_lora_adapter(base, root / "ens" / f"member_{i}", dropout=0.2, seed=10 + i)
    return base, root / "ens"


@pytest.fixture(scope="module", params=FAMILIES)
def family(request, tmp_path_factory):
    return _ensemble(tmp_path_factory.mktemp(request.param), request.param)


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return _ensemble(tmp_path_factory.mktemp("llama_only"), "llama")


def test_ensemble_members_equal_each_member_alone(family):
    base, ens = family
    rec = evaluate(make_lm(base, ens), [TASK], limit=LIMIT)[1][TASK]
    assert rec.n_members == 3 and rec.meta["members"] == {
        "source": "ensemble",
        "names": ["member_0", "member_1", "member_2"],
    }
    for m in range(3):
        alone = evaluate(make_lm(base, ens / f"member_{m}"), [TASK], limit=LIMIT)[1][TASK]
        np.testing.assert_allclose(rec.member_logits[:, m], alone.logits, atol=1e-5, rtol=0, equal_nan=True)
        # each member's own phantom logits (" F".. after " E"), which ksweep --phantom model appends to it
        np.testing.assert_allclose(
            rec.member_phantom_logits[:, m], alone.phantom_logits, atol=1e-5, rtol=0, equal_nan=True
        )
    assert rec.n_phantom.sum() > 0 and (rec.phantom_logits.size == 0 or np.isnan(rec.phantom_logits).all())
    for i in range(len(rec)):  # the predictive distribution: the mean of the members' softmax (method=edl: alpha/S)
        k = rec.k[i]
        alpha = np.logaddexp(0.0, rec.member_logits[i, :, :k]) + 1.0
        np.testing.assert_allclose(rec.probs[i, :k], (alpha / alpha.sum(1, keepdims=True)).mean(0), rtol=1e-9)


def test_mc_dropout_passes_equal_the_masks_replayed_by_hand(family):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base, ens = family
    adapter = ens / "member_0"
    rec = evaluate(make_lm(base, adapter, mc_samples=3, method="softmax", seed=7), [TASK], limit=LIMIT)[1][TASK]
    assert rec.n_members == 3 and rec.meta["members"] == {"source": "mc_dropout", "samples": 3, "seed": 7}
    tok = AutoTokenizer.from_pretrained(base)
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32), adapter).eval()
    task, docs = task_docs(TASK)
    for i in range(len(rec)):
        doc = docs[rec.doc_id[i]]
        prompt = task.doc_to_text(doc)
        ids = tok(prompt)["input_ids"]
        answer = [tok(prompt + " " + x)["input_ids"][-1] for x in doc["letters"]]
        after = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[len(doc["letters"]) :][: rec.n_phantom[i]]
        phantom = [tok(prompt + " " + x)["input_ids"][-1] for x in after]
        for sample in range(3):
            row_seed = question_seed(7, f"{','.join(map(str, ids))}\x00mc_sample={sample}")
            replayed = replayed_dropout_logits(model, ids, row_seed)[0].double().numpy()
            np.testing.assert_allclose(rec.member_logits[i, sample, : rec.k[i]], replayed[answer], atol=1e-5, rtol=0)
            kept = rec.member_phantom_logits[i, sample, : rec.n_phantom[i]]
            np.testing.assert_allclose(kept, replayed[phantom], atol=1e-5, rtol=0)
        probs = softmax(rec.member_logits[i, :, : rec.k[i]], axis=1).mean(0)
        np.testing.assert_allclose(rec.probs[i, : rec.k[i]], probs, rtol=1e-9)
    assert rec.n_phantom.sum() > 0


@pytest.mark.parametrize("extra", [{}, {"mc_samples": 3}])
def test_records_do_not_depend_on_the_batch_size(llama, extra):
    base, ens = llama
    peft = ens if not extra else ens / "member_1"
    one = evaluate(make_lm(base, peft, batch_size=1, **extra), [TASK], limit=LIMIT)[1][TASK]
    four = evaluate(make_lm(base, peft, batch_size=4, **extra), [TASK], limit=LIMIT)[1][TASK]
    np.testing.assert_allclose(one.member_logits, four.member_logits, atol=1e-5, rtol=0, equal_nan=True)
    np.testing.assert_allclose(one.member_phantom_logits, four.member_phantom_logits, atol=1e-5, rtol=0, equal_nan=True)
    assert (one.pred == four.pred).all()


def test_refusals_before_weights_load(tiny_model, tiny_adapter, tmp_path):
    nodrop = tmp_path / "nodrop"
    from lm_eval_evidential.testing.tiny import build_lora_adapter

    build_lora_adapter(tiny_model, nodrop, dropout=0.0)
    with pytest.raises(
        EvidentialInputError, match="mc_samples=2 needs LoRA dropout between 0 and 1, but peft=.* has lora_dropout=0"
    ):
        make_lm(tiny_model, nodrop, mc_samples=2)
    with pytest.raises(ValueError, match=r"mc_samples=0 must be an integer number of passes from 2 to 1000 \(MC"):
        make_lm(tiny_model, tiny_adapter, mc_samples=0)
    with pytest.raises(EvidentialInputError, match="mc_samples=2 needs a PEFT adapter"):
        make_lm(tiny_model, None, mc_samples=2)
    ens = tmp_path / "ens"
    for i in range(2):
        build_lora_adapter(tiny_model, ens / f"member_{i}", seed=i)
    with pytest.raises(EvidentialInputError, match="IB-EDL"):
        make_lm(tiny_model, ens, method="ib_edl")
    with pytest.raises(EvidentialInputError, match="either"):
        make_lm(tiny_model, ens, mc_samples=2)
