"""Determinism and resumed runs: identical records for identical inputs; --use_cache resumes exactly;
bf16 vs float32 differences stay within a measured, documented bound."""

from __future__ import annotations

import numpy as np
import pytest

from .test_model import evaluate, make_lm

pytestmark = pytest.mark.usefixtures("use_mirror")


def test_same_inputs_same_records(tiny_model, tiny_adapter):
    a = evaluate(make_lm(tiny_model, tiny_adapter, method="ib_edl", seed=7), ["csqa_edl"], limit=10)[1]["csqa_edl"]
    b = evaluate(make_lm(tiny_model, tiny_adapter, method="ib_edl", seed=7), ["csqa_edl"], limit=10)[1]["csqa_edl"]
    assert list(a) == list(b)


def test_use_cache_is_refused_for_the_evidential_model_before_any_forward(
    tiny_model, tiny_adapter, tmp_path, monkeypatch
):
    """lm_eval's response cache is keyed by the prompt only: it would replay numbers from other settings."""
    from lm_eval_evidential.harness.model import EvidentialInputError

    lm = make_lm(tiny_model, tiny_adapter, method="ib_edl")
    monkeypatch.setattr(lm, "_last_logits", lambda batch: pytest.fail("forward pass before the refusal"))
    with pytest.raises(EvidentialInputError, match="--use_cache cannot apply to --model evidential"):
        evaluate(lm, ["obqa_edl"], limit=3, use_cache=str(tmp_path / "cache"))


def test_use_cache_with_a_stock_model_replays_its_records_exactly(tiny_model, tmp_path):
    args = f"pretrained={tiny_model},device=cpu,dtype=float32"
    cache = str(tmp_path / "cache")
    first = evaluate("hf", ["obqa_edl"], limit=6, use_cache=cache, model_args=args)[1]["obqa_edl"]
    again = evaluate("hf", ["obqa_edl"], limit=6, use_cache=cache, model_args=args)[1]["obqa_edl"]
    np.testing.assert_array_equal(first.logits, again.logits)
    np.testing.assert_array_equal(first.pred, again.pred)
    assert first.meta["method"] == "softmax"


# Measured on the tiny model (2 layers, hidden 64, 120 OBQA sample questions): max |Δ logit|
# between bfloat16 and float32 = 2.4e-3, max |Δ vacuity| = 1.6e-4 (docs/usage.md, Determinism).
BF16_LOGIT_BOUND = 0.05
BF16_VACUITY_BOUND = 0.02


def test_bfloat16_against_float32_within_the_documented_bound(tiny_model, tiny_adapter):
    f32 = evaluate(make_lm(tiny_model, tiny_adapter, dtype="float32"), ["obqa_edl"], limit=None)[1]["obqa_edl"]
    bf16 = evaluate(make_lm(tiny_model, tiny_adapter, dtype="bfloat16"), ["obqa_edl"], limit=None)[1]["obqa_edl"]
    d_logit = float(np.nanmax(np.abs(f32.logits - bf16.logits)))
    d_vac = float(np.max(np.abs(f32.vacuity - bf16.vacuity)))
    print(f"bf16 vs f32: max |d logit| = {d_logit:.3g}, max |d vacuity| = {d_vac:.3g}")
    assert bf16.logits.dtype == np.float64  # records are never stored in low precision
    assert d_logit < BF16_LOGIT_BOUND and d_vac < BF16_VACUITY_BOUND
