"""Ensemble folders and seeded MC dropout (modeling/members.py) on the tiny model."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from lm_eval_evidential.errors import EvidentialInputError
from lm_eval_evidential.modeling import members as mm
from lm_eval_evidential.modeling.encoding import last_position_logits, left_pad
from lm_eval_evidential.modeling.heads import question_seed
from tests.oracles import replayed_dropout_logits


@pytest.fixture(scope="module")
def dropout_model(tiny_model, tmp_path_factory):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from lm_eval_evidential.testing.tiny import build_lora_adapter

    adapter = build_lora_adapter(tiny_model, tmp_path_factory.mktemp("mc") / "a", dropout=0.3, seed=3)
    base = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    return PeftModel.from_pretrained(base, adapter).eval()


PROMPTS = [[5, 9, 14, 3, 22, 7], [8, 4, 19], [11, 2, 6, 30, 12]]
KEYS = ["first question", "second", "third question"]


def _forward(model, rows, prompts, keys, sample, seed=0):
    batch = left_pad(prompts, 0)
    with torch.inference_mode(), mm.dropout_rows(rows, keys, [len(p) for p in prompts], seed, sample):
        return last_position_logits(model, **batch)


def test_masks_do_not_depend_on_the_batch(dropout_model):
    with mm.seeded_dropout(dropout_model) as rows:
        together = _forward(dropout_model, rows, PROMPTS, KEYS, sample=0)
        alone = torch.cat([_forward(dropout_model, rows, [p], [k], sample=0) for p, k in zip(PROMPTS, KEYS)])
        reordered = _forward(dropout_model, rows, PROMPTS[::-1], KEYS[::-1], sample=0).flip(0)
        other_pass = _forward(dropout_model, rows, PROMPTS, KEYS, sample=1)
    torch.testing.assert_close(together, alone, rtol=0, atol=1e-5)
    torch.testing.assert_close(together, reordered, rtol=0, atol=1e-5)
    assert (together - other_pass).abs().max() > 1e-3  # another pass, other masks
    with torch.inference_mode():
        plain = last_position_logits(dropout_model, **left_pad(PROMPTS, 0))
    assert (together - plain).abs().max() > 1e-3  # the dropout is active
    assert not any(isinstance(m, mm.SeededDropout) for m in dropout_model.modules())  # put back on exit


def test_masks_replayed_by_hand_give_the_same_logits(dropout_model):
    """The oracle: the adapter in eval mode (its own dropout off), each lora_A's input multiplied by the mask the
    documented rule gives (generator seeded by question_seed(pass seed, layer name), uniform >= p kept, / (1 - p))."""
    prompt, key, sample, seed = PROMPTS[0], KEYS[0], 2, 5
    with mm.seeded_dropout(dropout_model) as rows:
        got = _forward(dropout_model, rows, [prompt], [key], sample=sample, seed=seed)
    row_seed = question_seed(seed, f"{key}\x00mc_sample={sample}")
    want, layers = replayed_dropout_logits(dropout_model, prompt, row_seed)
    assert layers >= 3
    torch.testing.assert_close(got[0], want, rtol=0, atol=1e-5)


def test_no_dropout_refused(tiny_model, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from lm_eval_evidential.testing.tiny import build_lora_adapter

    adapter = build_lora_adapter(tiny_model, tmp_path / "a", dropout=0.0)
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model), adapter)
    assert mm.lora_dropout_rates(model) == {}
    with pytest.raises(EvidentialInputError, match="mc_samples needs LoRA dropout > 0"), mm.seeded_dropout(model):
        pass


@pytest.mark.parametrize("bad", ["0", "1", "-3", "two", "2.5"])
def test_mc_samples_refused(bad):
    import re

    from lm_eval_evidential.harness.model_args import scoring_option

    said = rf"mc_samples=('?){re.escape(bad)}\1 must be an integer number of passes from 2 to 1000 \(MC dropout"
    with pytest.raises(ValueError, match=said):
        scoring_option("mc_samples", bad)
    assert scoring_option("mc_samples", "4") == 4 and scoring_option("mc_samples", None) is None


def test_ensemble_folders(tiny_model, tiny_adapter, tmp_path):
    from lm_eval_evidential.testing.tiny import build_lora_adapter

    assert mm.ensemble_members(tiny_adapter) is None  # one adapter: no ensemble
    assert mm.ensemble_members(None) is None
    ens = tmp_path / "ens"
    for seed, name in enumerate(("member_1", "member_0", "member_10")):
        build_lora_adapter(tiny_model, ens / name, seed=seed)
    (ens / "notes").mkdir()  # not an adapter: ignored
    assert [p.name for p in mm.ensemble_members(ens)] == ["member_0", "member_1", "member_10"]  # sorted names

    one = tmp_path / "one"
    shutil.copytree(tiny_adapter, one / "member_0")
    with pytest.raises(
        EvidentialInputError, match="holds one adapter folder \\(member_0\\): an ensemble needs at least 2"
    ):
        mm.ensemble_members(one)

    config = ens / "member_1" / "adapter_config.json"
    data = json.loads(config.read_text())
    config.write_text(json.dumps({**data, "base_model_name_or_path": "other/base"}))
    with pytest.raises(EvidentialInputError, match="different base models .*member_1: other/base"):
        mm.ensemble_members(ens)
    config.write_text(json.dumps(data))
    (ens / "member_10" / "evidential_config.json").write_text(json.dumps({"method": "softmax"}))
    with pytest.raises(EvidentialInputError, match="different methods .*member_10: softmax"):
        mm.ensemble_members(ens)


def test_a_member_copied_under_another_name_is_refused(tiny_model, tmp_path):
    """Two members with the same weights (one folder copied) are refused naming both, whatever their configs say
    of dropout; members of their own seeds are an ensemble."""
    from lm_eval_evidential.testing.tiny import build_lora_adapter

    ens = tmp_path / "ens"
    for i in range(2):
        build_lora_adapter(tiny_model, ens / f"member_{i}", seed=i)
    assert [p.name for p in mm.ensemble_members(ens)] == ["member_0", "member_1"]
    shutil.copytree(ens / "member_0", ens / "member_2")
    config = ens / "member_2" / "adapter_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "lora_dropout": 0.3}))  # not a LoRA setting
    with pytest.raises(
        EvidentialInputError,
        match=r"ens: member_0 and member_2 hold the same weights \(adapter_model files sha256 [0-9a-f]{16}\), a copy "
        r"of one member: .* --ensemble N\) or remove the copy",
    ):
        mm.ensemble_members(ens)
