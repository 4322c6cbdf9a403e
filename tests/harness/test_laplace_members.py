"""Laplace-LoRA posteriors at evaluation (modeling/laplace.py, harness members "laplace"), without laplace-torch.

Oracles: P^(-1/2) z of a Kronecker block equals the dense (Q1 ⊗ Q2) diag(s) (Q1 ⊗ Q2)ᵀ z built with
torch.kron; each scored member equals the adapter with that sample's weights (θ_MAP + scale ⊙ z_m,
z drawn as the documented rule says) loaded and run alone by peft, one unpadded prompt at a time;
the records do not change with the batch size. The library's own predictive is the oracle of the
fitted posteriors in tests/training/test_laplace.py (where laplace-torch is installed).
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from lm_eval_evidential.errors import EvidentialInputError
from lm_eval_evidential.modeling.laplace import LaplacePosterior, load_posterior, sample_deltas, save_posterior
from tests.harness.test_model import evaluate, make_lm, task_docs


def _orthogonal(n, gen):
    q, _ = torch.linalg.qr(torch.randn(n, n, generator=gen, dtype=torch.float64))
    return q.float()


def test_kron_scale_equals_the_dense_kronecker_product():
    gen = torch.Generator().manual_seed(0)
    q1, q2, q3 = _orthogonal(3, gen), _orthogonal(4, gen), _orthogonal(5, gen)
    s12 = torch.rand(3, 4, generator=gen) + 0.1
    s3 = torch.rand(5, generator=gen) + 0.1
    post = LaplacePosterior(
        names=("a", "b"),
        shapes=((3, 4), (5,)),
        mean=torch.zeros(17),
        structure="kron",
        scale=None,
        blocks=((q1, q2, s12), (q3, s3)),
        config={},
    )
    z = torch.randn(6, 17, generator=gen)
    dense_a = torch.kron(q1, q2) @ torch.diag(s12.reshape(-1)) @ torch.kron(q1, q2).T
    dense_b = q3 @ torch.diag(s3) @ q3.T
    want = torch.cat([z[:, :12] @ dense_a.T, z[:, 12:] @ dense_b.T], dim=1)
    torch.testing.assert_close(post.apply_scale(z), want, atol=1e-5, rtol=1e-5)
    # diag: elementwise
    diag = LaplacePosterior(("a",), ((17,),), torch.zeros(17), "diag", torch.arange(1.0, 18.0), (), {})
    torch.testing.assert_close(diag.apply_scale(z), z * torch.arange(1.0, 18.0))


def _hand_posterior(base, adapter, out, *, samples=3, seed=5):
    """``out``: ``adapter``'s files and a diagonal posterior written by hand (scale 0.05 + U(0, 0.05))."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    shutil.copytree(adapter, out)
    (out / "evidential_config.json").write_text(json.dumps({"method": "softmax"}), encoding="utf-8")
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32), str(adapter))
    params = [(n, p.detach()) for n, p in model.named_parameters() if ".lora_" in n]
    mean = torch.cat([p.reshape(-1) for _, p in params])
    scale = 0.05 + 0.05 * torch.rand(mean.numel(), generator=torch.Generator().manual_seed(1))
    config = {
        "structure": "diag",
        "parameters": [{"name": n, "shape": list(p.shape)} for n, p in params],
        "prior_precision": 1.0,
        "samples": samples,
        "seed": seed,
    }
    save_posterior(out, config, {"mean": mean, "scale": scale})
    return out, params, scale


@pytest.fixture(scope="module")
def hand_posterior(tiny_model, tiny_adapter, tmp_path_factory):
    return _hand_posterior(tiny_model, tiny_adapter, tmp_path_factory.mktemp("laplace") / "posterior")


@pytest.mark.usefixtures("use_mirror")
def test_members_equal_each_weight_sample_loaded_alone(tiny_model, hand_posterior):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, params, scale = hand_posterior
    rec = evaluate(make_lm(tiny_model, folder), ["arc_c_edl"], limit=5)[1]["arc_c_edl"]
    meta = rec.meta["members"]
    assert rec.n_members == 3 and meta["source"] == "laplace" and (meta["samples"], meta["seed"]) == (3, 5)
    z = torch.randn(3, scale.numel(), generator=torch.Generator().manual_seed(5))  # the documented draw
    tok = AutoTokenizer.from_pretrained(tiny_model)
    task, docs = task_docs("arc_c_edl")
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32), folder)
    named = dict(model.named_parameters())
    for m in range(3):
        start = 0
        with torch.no_grad():
            for name, value in params:
                n = value.numel()
                named[name].copy_(value + (scale[start : start + n] * z[m, start : start + n]).reshape(value.shape))
                start += n
        for i in range(len(rec)):
            doc = docs[rec.doc_id[i]]
            prompt = task.doc_to_text(doc)
            ids = tok(prompt)["input_ids"]
            answer = [tok(prompt + " " + x)["input_ids"][-1] for x in doc["letters"]]
            after = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[len(doc["letters"]) :][: rec.n_phantom[i]]
            phantom = [tok(prompt + " " + x)["input_ids"][-1] for x in after]
            with torch.no_grad():
                want = model(torch.tensor([ids])).logits[0, -1].double().numpy()
            np.testing.assert_allclose(rec.member_logits[i, m, : rec.k[i]], want[answer], atol=1e-5, rtol=0)
            kept = rec.member_phantom_logits[i, m, : rec.n_phantom[i]]  # the sample's own phantom logits
            np.testing.assert_allclose(kept, want[phantom], atol=1e-5, rtol=0)
    assert rec.n_phantom.sum() > 0
    for i in range(len(rec)):  # the predictive: the mean of the members' softmax
        k = rec.k[i]
        p = np.exp(rec.member_logits[i, :, :k] - rec.member_logits[i, :, :k].max(1, keepdims=True))
        np.testing.assert_allclose(rec.probs[i, :k], (p / p.sum(1, keepdims=True)).mean(0), rtol=1e-9)


@pytest.mark.usefixtures("use_mirror")
def test_records_do_not_depend_on_the_batch_size_and_samples_override(tiny_model, hand_posterior):
    folder = hand_posterior[0]
    one = evaluate(make_lm(tiny_model, folder, batch_size=1), ["arc_c_edl"], limit=5)[1]["arc_c_edl"]
    four = evaluate(make_lm(tiny_model, folder, batch_size=4), ["arc_c_edl"], limit=5)[1]["arc_c_edl"]
    np.testing.assert_allclose(one.member_logits, four.member_logits, atol=1e-5, rtol=0, equal_nan=True)
    more = evaluate(make_lm(tiny_model, folder, laplace_samples=4), ["arc_c_edl"], limit=5)[1]["arc_c_edl"]
    assert more.n_members == 4  # the first 3 samples are the same draws: one generator, randn(4, P)
    np.testing.assert_allclose(more.member_logits[:, :3], four.member_logits, atol=1e-5, rtol=0, equal_nan=True)


def test_sample_deltas_follow_the_library_rule(hand_posterior):
    folder, _, scale = hand_posterior
    post = load_posterior(folder)
    got = sample_deltas(post, 2, 9)
    z = torch.randn(2, post.n_params, generator=torch.Generator().manual_seed(9))
    torch.testing.assert_close(got, z * scale)


def test_refusals(tiny_model, tiny_adapter, hand_posterior, tmp_path):
    folder = hand_posterior[0]
    with pytest.raises(EvidentialInputError, match="laplace_samples=3: peft=.* holds no Laplace posterior"):
        make_lm(tiny_model, tiny_adapter, laplace_samples=3)
    with pytest.raises(EvidentialInputError, match="mc_samples=2 with peft=.*Laplace posterior: score either"):
        make_lm(tiny_model, folder, mc_samples=2)
    with pytest.raises(EvidentialInputError, match="softmax likelihood .* but method=edl"):
        make_lm(tiny_model, folder, method="edl")
    with pytest.raises(EvidentialInputError, match=r"laplace_samples=1 must be an integer number of weight samples"):
        make_lm(tiny_model, folder, laplace_samples=1)
    other = tmp_path / "other"  # the posterior beside weights it was not fitted at
    shutil.copytree(folder, other)
    shutil.copy2(hand_posterior[0] / "adapter_model.safetensors", other / "adapter_model.safetensors")
    config = json.loads((other / "laplace_config.json").read_text())
    from safetensors.torch import load_file, save_file

    tensors = load_file(other / "laplace_posterior.safetensors")
    tensors["mean"] = tensors["mean"] + 0.1
    save_file(tensors, other / "laplace_posterior.safetensors")
    (other / "laplace_config.json").write_text(json.dumps(config))
    with pytest.raises(EvidentialInputError, match="differs from the Laplace posterior's mean"):
        make_lm(tiny_model, other)


def test_a_saved_kron_posterior_loads_back(tmp_path):
    """save_posterior then load_posterior gives the factors back (the checks accept both block kinds)."""
    gen = torch.Generator().manual_seed(2)
    q1, q2, q3 = _orthogonal(3, gen), _orthogonal(4, gen), _orthogonal(5, gen)
    s12, s3 = torch.rand(3, 4, generator=gen) + 0.1, torch.rand(5, generator=gen) + 0.1
    config = {
        "structure": "kron",
        "parameters": [{"name": "a", "shape": [4, 3]}, {"name": "b", "shape": [5]}],
        "prior_precision": 1.0,
        "samples": 2,
        "seed": 0,
    }
    tensors = {"mean": torch.zeros(17), "block0.q0": q1, "block0.q1": q2, "block0.scale": s12}
    save_posterior(tmp_path, config, {**tensors, "block1.q0": q3, "block1.scale": s3})
    post = load_posterior(tmp_path)
    assert [len(b) for b in post.blocks] == [3, 2] and post.samples == 2
    torch.testing.assert_close(post.blocks[0][2], s12)
    torch.testing.assert_close(post.blocks[1][0], q3)


@pytest.mark.parametrize("saved", [1, 5000, "ten", None])
def test_a_bad_saved_sample_count_is_refused_unless_laplace_samples_stands_in(tmp_path, saved):
    """The saved count is checked against the fit's range where it is read: ``laplace_samples=N``, which the
    refusal offers, replaces it (it used to be refused whatever laplace_samples said)."""
    from lm_eval_evidential.harness.members import members_from_args

    config = {"structure": "diag", "parameters": [{"name": "a", "shape": [4]}], "prior_precision": 1.0, "seed": 0}
    save_posterior(tmp_path, {**config, "samples": saved}, {"mean": torch.zeros(4), "scale": torch.ones(4)})
    (tmp_path / "evidential_config.json").write_text(json.dumps({"method": "softmax"}), encoding="utf-8")
    want = rf"{tmp_path}/laplace_config\.json: samples={saved!r} is not an integer in 2\.\.1000 \(or pass laplace_"
    with pytest.raises(EvidentialInputError, match=want):
        members_from_args(None, str(tmp_path), "softmax")
    assert members_from_args(None, str(tmp_path), "softmax", laplace_samples=4).samples == 4


def test_weight_samples_beyond_the_free_memory_are_refused(tiny_model, hand_posterior, monkeypatch):
    import psutil

    class Little:
        available = 1 << 16  # 64 KiB: less than 3 samples x 26,728 weights x 4 bytes

    monkeypatch.setattr(psutil, "virtual_memory", lambda: Little)
    with pytest.raises(EvidentialInputError, match=r"laplace_config.json's samples=3: the weight samples take .* GiB"):
        make_lm(tiny_model, hand_posterior[0])


@pytest.mark.usefixtures("use_mirror")
def test_a_posterior_too_wide_for_its_weights_is_named_not_blamed_on_float16(tiny_model, hand_posterior, tmp_path):
    from safetensors.torch import load_file, save_file

    wide = tmp_path / "wide"
    shutil.copytree(hand_posterior[0], wide)
    tensors = load_file(wide / "laplace_posterior.safetensors")
    tensors["scale"] = tensors["scale"] * 1e30  # finite and positive, so the file passes its checks
    save_file(tensors, wide / "laplace_posterior.safetensors")
    with pytest.raises(EvidentialInputError, match=r"in Laplace weight sample 0 of 3 .*computed in float32, so no "):
        evaluate(make_lm(tiny_model, wide), ["arc_c_edl"], limit=2)
