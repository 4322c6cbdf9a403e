"""A model is identified by content, not by path: copies agree, any changed part disagrees."""

from __future__ import annotations

import json
import shutil

import pytest

from lm_eval_evidential.records.provenance import (
    adapter_sha256,
    differences,
    fingerprint,
    merge_run_metas,
    model_sha256,
)


def _copy(src, dst):
    shutil.copytree(src, dst)
    return dst


def _edit_json(path, **changes):
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data, indent=3))  # other formatting too: the content is what counts


def test_copies_at_other_paths_have_the_same_identity(tiny_model, tiny_adapter, tmp_path):
    model = _copy(tiny_model, tmp_path / "scratch" / "node1" / "model")
    adapter = _copy(tiny_adapter, tmp_path / "scratch" / "node1" / "adapter")
    # a re-saved adapter names the base at its new path; the config is otherwise the same
    _edit_json(adapter / "adapter_config.json", base_model_name_or_path=str(model))
    _edit_json(model / "config.json", _name_or_path=str(model))
    assert model_sha256(model) == model_sha256(tiny_model) is not None
    assert adapter_sha256(adapter) == adapter_sha256(tiny_adapter) is not None


def test_every_tensor_takes_part_in_the_identity(tiny_model, tmp_path):
    """Scaling any one tensor (a fine-tune or a merged adapter touches whole tensors) changes the hash."""
    from safetensors.torch import load_file, save_file

    original = model_sha256(tiny_model)
    weights = load_file(tiny_model / "model.safetensors")
    seen = set()
    for name in weights:
        changed = _copy(tiny_model, tmp_path / name)
        save_file(
            {k: (v * 1.01 if k == name else v) for k, v in weights.items()},
            changed / "model.safetensors",
            metadata={"format": "pt"},
        )
        seen.add(model_sha256(changed))
        shutil.rmtree(changed)
    assert original not in seen and len(seen) == len(weights)
    # so does a change of only the last bytes of the last tensor in the file
    changed = _copy(tiny_model, tmp_path / "tail")
    with open(changed / "model.safetensors", "r+b") as fh:
        fh.seek(-4, 2)
        last = fh.read(4)
        fh.seek(-4, 2)
        fh.write(bytes(b ^ 0xFF for b in last))
    assert model_sha256(changed) != original


@pytest.mark.parametrize(
    "change",
    [
        lambda m: _edit_json(m / "config.json", rms_norm_eps=1e-5),
        lambda m: _edit_json(m / "tokenizer_config.json", model_max_length=2048),
        lambda m: (m / "tokenizer.json").write_text((m / "tokenizer.json").read_text().replace('"<pad>"', '"<pad2>"')),
    ],
    ids=["config", "tokenizer config", "tokenizer"],
)
def test_a_changed_config_or_tokenizer_is_another_model(tiny_model, tmp_path, change):
    changed = _copy(tiny_model, tmp_path / "m")
    change(changed)
    assert model_sha256(changed) != model_sha256(tiny_model)


def test_adapter_identity_does_not_depend_on_the_order_peft_wrote_its_module_sets(tiny_adapter, tmp_path):
    """PEFT saves target_modules (a set) in the set's order, which changes with the process's hash seed."""
    adapter = _copy(tiny_adapter, tmp_path / "reordered")
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert isinstance(config["target_modules"], list) and len(config["target_modules"]) > 1
    _edit_json(adapter / "adapter_config.json", target_modules=config["target_modules"][::-1])
    assert adapter_sha256(adapter) == adapter_sha256(tiny_adapter) is not None
    _edit_json(adapter / "adapter_config.json", target_modules=config["target_modules"][:1])
    assert adapter_sha256(adapter) != adapter_sha256(tiny_adapter)  # another set of modules is another adapter


def test_adapter_identity_covers_its_weights_and_config(tiny_model, tiny_adapter, tmp_path):
    from lm_eval_evidential.testing.tiny import build_lora_adapter

    other_seed = build_lora_adapter(tiny_model, tmp_path / "seed2", seed=2)
    scaled = _copy(tiny_adapter, tmp_path / "alpha")
    _edit_json(scaled / "adapter_config.json", lora_alpha=32)  # same weights, twice the update
    hashes = {adapter_sha256(p) for p in (tiny_adapter, other_seed, scaled)}
    assert len(hashes) == 3


def test_no_local_files_means_no_content_hash(tmp_path):
    assert model_sha256("meta-llama/Meta-Llama-3-8B") is None and adapter_sha256(None) is None
    (tmp_path / "config.json").write_text("{}")
    assert model_sha256(tmp_path) is None  # a config without weights identifies nothing


META = {
    "method": "edl",
    "pretrained": "/scratch/a/model",
    "model_sha256": "m1",
    "peft": "/scratch/a/ckpt",
    "adapter_sha256": "a1",
    "dtype": "bfloat16",
}


def test_paths_are_information_when_content_is_known():
    moved = {**META, "pretrained": "/scratch/b/model", "peft": "/scratch/b/ckpt"}
    assert differences(META, moved) == {}
    assert "pretrained" not in fingerprint(META) and "peft" not in fingerprint(META)
    assert differences(META, {**moved, "model_sha256": "m2"}) == {"model_sha256": ("m1", "m2")}
    assert differences(META, {**META, "adapter_sha256": "a2"}) == {"adapter_sha256": ("a1", "a2")}
    # without content hashes (older records, hub ids not in the local cache) the path is all there is
    old = {k: v for k, v in META.items() if not k.endswith("sha256")}
    assert differences(old, {**old, "pretrained": "/scratch/b/model"}) == {
        "pretrained": ("/scratch/a/model", "/scratch/b/model")
    }


def test_one_run_keeps_every_path_and_refuses_another_model():
    metas = [META, {**META, "pretrained": "/scratch/b/model"}, META]
    merged = merge_run_metas("obqa_edl", metas)
    assert merged["pretrained"] == ["/scratch/a/model", "/scratch/b/model"] and merged["peft"] == "/scratch/a/ckpt"
    assert merged["model_sha256"] == "m1"
    with pytest.raises(ValueError, match=r"task 'obqa_edl'.*adapter_sha256: 'a1' vs 'a2'"):
        merge_run_metas("obqa_edl", [META, {**META, "adapter_sha256": "a2", "peft": "/other"}])


def test_a_hub_id_is_hashed_from_its_cached_snapshot_like_a_local_copy(tiny_model, tiny_adapter, tmp_path, monkeypatch):
    """``pretrained=org/name`` on one node and a copied folder on another are the same model."""
    from huggingface_hub import constants

    from lm_eval_evidential.harness.loading_checks import local_folder

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--org--tiny"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    shutil.copytree(tiny_model, repo / "snapshots" / commit)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert model_sha256(local_folder("org/tiny", "main")) == model_sha256(tiny_model)
    assert local_folder("org/not-downloaded", "main") is None
    assert local_folder(str(tiny_adapter), "main") == tiny_adapter
