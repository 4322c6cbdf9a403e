"""Phantom logits in the records: the logits of the labels after a question's last one (" E".." H"
after " A".." D"), from the same forward pass, checked on a model whose output layer is set by hand."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from tests.harness.test_model import evaluate, make_lm, task_docs

pytestmark = pytest.mark.usefixtures("use_mirror")

# Output rows of the phantom letters set to multiples of " A"'s row: each phantom logit is then that
# multiple of the question's first answer logit (scaling by a power of two, or 0, is exact in float).
MULTIPLES = {"E": 2.0, "F": -1.0, "G": 0.5, "H": 0.0}


@pytest.fixture(scope="module")
def hand_set_model(tiny_model, tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path_factory.mktemp("phantom") / "model"
    tok = AutoTokenizer.from_pretrained(tiny_model)
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    prompt = "Question: x\nAnswer:"
    token = {x: tok(prompt + " " + x)["input_ids"][-1] for x in "ABCDEFGH"}
    weight = model.get_output_embeddings().weight
    with torch.no_grad():
        for letter, c in MULTIPLES.items():
            weight[token[letter]] = c * weight[token["A"]]
    model.save_pretrained(out)
    tok.save_pretrained(out)
    for extra in tiny_model.glob("lm_eval_evidential_*.json"):
        shutil.copy(extra, out)
    return out


def own_phantom_logits(model_dir, task, records):
    """Per record, the model's own last-position logits at the next labels' tokens, one prompt at a time."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    docs = list(task.eval_docs)
    out = []
    for r in records:
        prompt = task.doc_to_text(docs[r["doc_id"]])
        nxt = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[r["k"] : r["k"] + 4]
        ids = [tok(prompt + " " + x)["input_ids"][-1] for x in nxt]
        with torch.no_grad():
            full = model(torch.tensor([tok(prompt)["input_ids"]])).logits[0, -1].double()
        out.append(full[ids].numpy())
    return out


def test_phantom_logits_are_the_models_own_logits_at_the_next_labels(hand_set_model):
    lm = make_lm(hand_set_model, batch_size=3)
    chosen = {"obqa_edl": [0, 1, 2, 3], "arc_c_edl": [0, 16, 22, 27]}  # arc_c docs of K = 4, 5, 3, 3
    _, records = evaluate(lm, ["obqa_edl", "arc_c_edl"], limit=None, samples=chosen)
    for name in ("obqa_edl", "arc_c_edl"):
        task, _ = task_docs(name)
        rec = records[name]
        assert rec.meta["phantom_count"] == 4 and rec.has_phantoms
        for r, own in zip(rec, own_phantom_logits(hand_set_model, task, rec)):
            assert len(r["phantom_logits"]) == 4  # the tiny tokenizer has every letter as one token
            np.testing.assert_allclose(r["phantom_logits"], own, atol=1e-5, rtol=0)
            if r["k"] == 4:  # " E".." H": the hand-set multiples of the " A" logit
                np.testing.assert_allclose(
                    r["phantom_logits"], [c * r["logits"][0] for c in MULTIPLES.values()], rtol=1e-6, atol=1e-6
                )
    assert set(np.unique(records["arc_c_edl"].k)) == {3, 4, 5}  # phantoms start after each question's own K


def test_phantom_logits_do_not_change_the_answers_or_depend_on_the_batch(hand_set_model):
    plain = evaluate(make_lm(hand_set_model, batch_size=1, phantom_count=0), ["arc_c_edl"])[1]["arc_c_edl"]
    two = evaluate(make_lm(hand_set_model, batch_size=1, phantom_count=2), ["arc_c_edl"])[1]["arc_c_edl"]
    four = evaluate(make_lm(hand_set_model, batch_size=4), ["arc_c_edl"])[1]["arc_c_edl"]
    assert plain.n_phantom.tolist() == [0] * len(plain) and two.n_phantom.tolist() == [2] * len(two)
    np.testing.assert_array_equal(plain.logits, two.logits)
    np.testing.assert_allclose(two.logits, four.logits, atol=1e-5, equal_nan=True)
    np.testing.assert_allclose(two.phantom_logits, four.phantom_logits[:, :2], atol=1e-5)


def test_softmax_and_ib_edl_keep_phantom_logits_too(hand_set_model):
    for method in ("softmax", "ib_edl"):
        rec = evaluate(make_lm(hand_set_model, method=method), ["obqa_edl"], limit=4)[1]["obqa_edl"]
        np.testing.assert_allclose(rec.phantom_logits[:, 0], 2 * rec.logits[:, 0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("value", [-1, 27, 1.5, "many"])
def test_bad_phantom_count_is_refused_before_loading(hand_set_model, value):
    from lm_eval_evidential.harness.model import EvidentialInputError

    with pytest.raises(EvidentialInputError, match="phantom_count="):
        make_lm(hand_set_model, phantom_count=value)
