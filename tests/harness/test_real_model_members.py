"""Members on the real SmolLM2-135M-Instruct (slow): an ensemble, MC dropout and a Laplace posterior.

Oracles as on the tiny models (tests/harness/test_members_scoring.py, test_laplace_members.py), on the
real model and tokenizer, all <= 1e-5 in float32: each ensemble member's logits equal that adapter
scored alone; each MC-dropout pass equals the masks replayed by hand with plain transformers/peft on
one unpadded prompt, and each Laplace member equals its weight sample loaded into peft by hand.

The hand oracles run one prompt, unpadded, through the output layer at the last position only
(``logits_to_keep=1``), so the harness is compared at ``batch_size=1``, where it computes the same
matrix products in the same shapes (measured: equal bit for bit). At the harness's batch of 4 left-padded
prompts the members move by float32 rounding alone — the products' shapes differ (measured on these 3
questions: 1.1e-5 for MC dropout, logits ~15; 4.8e-6 for the plain adapter, 3.8e-6 of which is the
output layer over every position in place of the last) — so the same records at batch 4 are checked
against those at batch 1 within BATCH_TOL.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lm_eval_evidential.modeling.heads import question_seed
from tests.harness.test_laplace_members import _hand_posterior
from tests.harness.test_model import evaluate, make_lm, task_docs
from tests.oracles import replayed_dropout_logits

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("use_mirror")]

TASK, LIMIT = "obqa_edl", 3
#: Records at batch 4 (left padded) against batch 1: float32 rounding of other product shapes (measured 1.1e-5).
BATCH_TOL = 1e-4


@pytest.fixture(scope="module")
def smollm2_members(tmp_path_factory):
    from lm_eval_evidential.testing.smollm2 import smollm2_checkpoint
    from lm_eval_evidential.testing.tiny import build_lora_adapter

    base = smollm2_checkpoint()
    root = tmp_path_factory.mktemp("smollm2_members")
    for i in range(2):
        build_lora_adapter(
            base, root / "ens" / f"member_{i}", dropout=0.2, seed=20 + i, target_modules=("q_proj", "v_proj")
        )
    return base, root


def _prompts(tok, rec):
    task, docs = task_docs(TASK)
    for i in range(len(rec)):
        doc = docs[rec.doc_id[i]]
        prompt = task.doc_to_text(doc)
        yield i, tok(prompt)["input_ids"], [tok(prompt + " " + x)["input_ids"][-1] for x in doc["letters"]]


def test_ensemble_members_equal_each_adapter_alone(smollm2_members):
    base, root = smollm2_members
    rec = evaluate(make_lm(base, root / "ens"), [TASK], limit=LIMIT)[1][TASK]
    assert rec.n_members == 2
    for m in range(2):
        alone = evaluate(make_lm(base, root / "ens" / f"member_{m}"), [TASK], limit=LIMIT)[1][TASK]
        np.testing.assert_allclose(rec.member_logits[:, m], alone.logits, atol=1e-5, rtol=0, equal_nan=True)


def test_mc_dropout_and_laplace_members_equal_the_hand_oracles(smollm2_members, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base, root = smollm2_members
    adapter = root / "ens" / "member_0"
    tok = AutoTokenizer.from_pretrained(base)
    mc_args = {"mc_samples": 2, "method": "softmax", "seed": 3}
    mc = evaluate(make_lm(base, adapter, batch_size=1, **mc_args), [TASK], limit=LIMIT)[1][TASK]
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32), adapter).eval()
    for i, ids, answer in _prompts(tok, mc):
        for sample in range(2):
            row_seed = question_seed(3, f"{','.join(map(str, ids))}\x00mc_sample={sample}")
            want = replayed_dropout_logits(model, ids, row_seed)[0][answer].double().numpy()
            np.testing.assert_allclose(mc.member_logits[i, sample, : mc.k[i]], want, atol=1e-5, rtol=0)
    batched = evaluate(make_lm(base, adapter, **mc_args), [TASK], limit=LIMIT)[1][TASK]
    np.testing.assert_allclose(batched.member_logits, mc.member_logits, atol=BATCH_TOL, rtol=0, equal_nan=True)

    folder, params, scale = _hand_posterior(base, adapter, tmp_path / "posterior", samples=2, seed=4)
    lap = evaluate(make_lm(base, folder, batch_size=1), [TASK], limit=LIMIT)[1][TASK]
    assert lap.meta["members"]["source"] == "laplace"
    batched = evaluate(make_lm(base, folder), [TASK], limit=LIMIT)[1][TASK]
    np.testing.assert_allclose(batched.member_logits, lap.member_logits, atol=BATCH_TOL, rtol=0, equal_nan=True)
    z = torch.randn(2, scale.numel(), generator=torch.Generator().manual_seed(4))
    named = dict(model.named_parameters())
    for m in range(2):
        start = 0
        with torch.no_grad():
            for name, value in params:
                n = value.numel()
                named[name].copy_(value + (scale[start : start + n] * z[m, start : start + n]).reshape(value.shape))
                start += n
        for i, ids, answer in _prompts(tok, lap):
            with torch.no_grad():
                want = model(torch.tensor([ids]), logits_to_keep=1).logits[0, -1][answer].double().numpy()
            np.testing.assert_allclose(lap.member_logits[i, m, : lap.k[i]], want, atol=1e-5, rtol=0)
