"""The evidence head applied to a whole batch: every row bit-identical to that question scored alone.

The oracle for "alone" is the head's formula written out here on one question's own tensors
(softplus of a standalone (K,) or (num_noises, K) tensor, IB-EDL noise from a generator keyed
by the question), i.e. what evaluation computed per question before the head was batched.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from lm_eval_evidential.modeling.heads import (
    HeadConfig,
    apply_head,
    apply_head_batch,
    per_question,
    question_noise,
    question_seed,
)


def alone(config: HeadConfig, z: torch.Tensor, t: torch.Tensor, key: str) -> dict[str, torch.Tensor]:
    """One question's head, formula by formula on its own (K,) tensors (float64)."""
    z = z.to(torch.float64)
    if config.method == "softmax":
        return {"logits": z, "probs": torch.softmax(z, dim=-1)}
    if config.method == "edl":
        alpha = F.softplus(z) + config.prior_weight
    else:
        sigma = F.softplus(t.to(torch.float64))
        gen = torch.Generator().manual_seed(question_seed(config.seed, key))
        noise = torch.randn((config.num_noises, z.shape[0]), generator=gen, dtype=torch.float64)
        alpha = (F.softplus(z + sigma * noise) + config.prior_weight).mean(dim=0)
        alpha = torch.clamp(alpha - config.sigma_mult * sigma, min=config.prior_weight)
    return {"logits": z, "alpha": alpha, "evidence": alpha - config.prior_weight, "probs": alpha / alpha.sum()}


def batch_of(rows: int, k: int, seed: int, dtype) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    gen = torch.Generator().manual_seed(seed)
    # logits over many magnitudes, past softplus's linear threshold (20) too
    scale = 10.0 ** torch.randint(-3, 3, (rows, k), generator=gen).to(torch.float64)
    z = (torch.randn((rows, k), generator=gen, dtype=torch.float64) * scale).to(dtype)
    t = (torch.randn((rows, k), generator=gen, dtype=torch.float64) * 3).to(dtype)
    return z, t, [f"question {seed}-{i}\x00[{k}]" for i in range(rows)]


CONFIGS = [
    HeadConfig(method="edl"),
    HeadConfig(method="edl", prior_weight=0.3),
    HeadConfig(method="ib_edl", seed=5),
    HeadConfig(method="ib_edl", sigma_mult=0.7, prior_weight=2.0, num_noises=7),
    HeadConfig(method="softmax"),
]


@settings(max_examples=40, deadline=None)
@given(
    config=st.sampled_from(CONFIGS),
    rows=st.integers(1, 70),
    k=st.integers(2, 20),
    seed=st.integers(0, 2**16),
    dtype=st.sampled_from([torch.float32, torch.bfloat16, torch.float64]),
)
def test_every_row_is_bit_identical_to_the_question_alone(config, rows, k, seed, dtype):
    z, t, keys = batch_of(rows, k, seed, dtype)
    out = apply_head_batch(config, z, sigma_logits=t, keys=keys)
    for i in range(rows):
        expected = alone(config, z[i], t[i], keys[i])
        single = apply_head(config, z[i], sigma_logits=t[i], key=keys[i])
        for name, value in expected.items():
            assert torch.equal(getattr(out, name)[i], value), (name, i)
            assert torch.equal(getattr(single, name), value), (name, i)


def test_a_batch_mixes_simd_blocks_and_tails():
    # A flat softplus over this batch would put some questions' elements in SIMD blocks and
    # others in the scalar tail, which differ in the last bit: check such elements exist.
    z, t, keys = batch_of(37, 3, 0, torch.float64)
    flat = F.softplus(z.reshape(-1)).reshape(z.shape)
    alone_rows = torch.stack([F.softplus(row) for row in z])
    assert not torch.equal(flat, alone_rows)
    assert torch.equal(per_question(F.softplus, z), alone_rows)


def test_ib_edl_noise_follows_the_question_not_its_position():
    config = HeadConfig(method="ib_edl", seed=3)
    z, t, keys = batch_of(9, 4, 1, torch.float32)
    order = torch.randperm(9, generator=torch.Generator().manual_seed(0))
    out = apply_head_batch(config, z, sigma_logits=t, keys=keys)
    shuffled = apply_head_batch(config, z[order], sigma_logits=t[order], keys=[keys[i] for i in order])
    assert torch.equal(shuffled.alpha, out.alpha[order])
    noise = question_noise(config.seed, keys, config.num_noises, 4)
    assert noise.shape == (9, config.num_noises, 4)
    assert torch.equal(question_noise(config.seed, keys[2:3], config.num_noises, 4)[0], noise[2])
    # and it is a standard normal: mean ~0, variance ~1 over many questions
    many = question_noise(0, [str(i) for i in range(500)], 20, 5).numpy()
    assert abs(many.mean()) < 0.02 and abs(many.var() - 1) < 0.03


def test_edl_formula_against_numpy():
    z, _, _ = batch_of(50, 5, 2, torch.float64)
    out = apply_head_batch(HeadConfig(method="edl", prior_weight=0.5), z)
    alpha = np.logaddexp(0, z.numpy()) + 0.5
    # torch's softplus returns x itself above x = 20 (relative error <= exp(-20) = 2e-9)
    np.testing.assert_allclose(out.alpha.numpy(), alpha, rtol=1e-8, atol=0)
    np.testing.assert_allclose(out.probs.numpy(), alpha / alpha.sum(1, keepdims=True), rtol=1e-8, atol=0)


def test_outputs_are_float64_on_the_cpu_whatever_the_input():
    z, t, keys = batch_of(4, 4, 3, torch.bfloat16)
    for config in CONFIGS:
        out = apply_head_batch(config, z, sigma_logits=t, keys=keys)
        for value in (out.logits, out.probs, out.alpha):
            if value is not None:
                assert value.dtype == torch.float64 and value.device.type == "cpu"


def test_empty_batch():
    for config in CONFIGS:
        out = apply_head_batch(config, torch.empty((0, 4)), sigma_logits=torch.empty((0, 4)), keys=[])
        assert out.probs.shape == (0, 4)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"logits": torch.zeros(4)}, r"shape \(B, K\)"),
        ({"logits": torch.zeros((2, 4)), "config": HeadConfig(method="ib_edl")}, "sigma_logits"),
        (
            {
                "logits": torch.zeros((2, 4)),
                "config": HeadConfig(method="ib_edl"),
                "sigma_logits": torch.zeros((2, 4)),
                "keys": ["one"],
            },
            "one key per question",
        ),
    ],
)
def test_bad_input_is_named(kwargs, match):
    config = kwargs.pop("config", HeadConfig())
    with pytest.raises(ValueError, match=match):
        apply_head_batch(config, **kwargs)


def test_sigma_logits_are_the_last_k_vocabulary_logits_per_row_or_for_all():
    """IB-EDL's σ rule (modeling.heads.sigma_logits), as training (per-row K, masked) and evaluation
    (one K, from a kept tail) read it: class j of a K-class question is vocabulary logit V − K + j."""
    from lm_eval_evidential.modeling.heads import sigma_logits

    vocab = torch.randn(3, 11, generator=torch.Generator().manual_seed(0))
    k = torch.tensor([4, 2, 3])
    mask = torch.arange(4)[None, :] < k[:, None]
    per_row = sigma_logits(vocab, k, mask)
    for i, ki in enumerate(k.tolist()):
        assert torch.equal(per_row[i, :ki], vocab[i, 11 - ki :])
        assert torch.equal(sigma_logits(vocab[i : i + 1], ki)[0], vocab[i, 11 - ki :])
        tail = sigma_logits(vocab, 4)  # evaluation keeps the last max-K logits, then takes each K's own
        assert torch.equal(sigma_logits(tail[i : i + 1], ki)[0], vocab[i, 11 - ki :])
