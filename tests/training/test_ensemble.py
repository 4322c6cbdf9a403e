"""``train --ensemble N``: the members' folders, seeds, dropout config, resume per member, refusals."""

from __future__ import annotations

import json
import shutil

import pytest
from safetensors.torch import load_file

from lm_eval_evidential.training import ensemble as ensemble_mod
from lm_eval_evidential.training import trainer as train_mod
from lm_eval_evidential.training.config import TrainConfig
from lm_eval_evidential.training.trainer import METADATA_FILE, train
from tests.training.conftest import FAST


def _config(out, **extra):
    return TrainConfig(**{"method": "edl", "output_dir": str(out), "max_steps": 1, "ensemble": 2, **FAST, **extra})


@pytest.fixture(scope="module")
def ensemble(tiny_model, tasks, tmp_path_factory):
    out = tmp_path_factory.mktemp("ens") / "ens"
    with pytest.raises(ValueError, match="config.ensemble is set: train the members with"):
        train(tiny_model, tasks["obqa_edl"], _config(out))
    assert ensemble_mod.train_ensemble(tiny_model, tasks["obqa_edl"], _config(out, lora_dropout=0.2)) == out.resolve()
    return out


def test_members_have_their_own_seeds_and_keep_the_dropout(ensemble, tiny_model):
    assert sorted(p.name for p in ensemble.iterdir()) == ["member_0", "member_1"]
    weights = []
    for i in range(2):
        member = ensemble / f"member_{i}"
        meta = json.loads((member / METADATA_FILE).read_text())
        assert meta["train_config"]["seed"] == 42 + i and meta["base_model"] == str(tiny_model)
        assert meta["train_config"]["ensemble"] is None  # each member is an ordinary adapter
        assert json.loads((member / "adapter_config.json").read_text())["lora_dropout"] == 0.2  # MC dropout's rate
        weights.append(load_file(member / "adapter_model.safetensors"))
    assert weights[0].keys() == weights[1].keys()
    assert any(not (weights[0][key] == weights[1][key]).all() for key in weights[0])  # other seeds, other members


def test_rerun_skips_complete_members_and_finishes_the_rest(ensemble, tiny_model, tasks, tmp_path, monkeypatch):
    out = tmp_path / "ens"
    shutil.copytree(ensemble, out)
    calls = []
    monkeypatch.setattr(train_mod, "train", lambda pretrained, task, config: calls.append(config))
    assert ensemble_mod.train_ensemble(tiny_model, tasks["obqa_edl"], _config(out)) == out.resolve()
    assert calls == []  # both complete: nothing trained
    (out / "member_1" / METADATA_FILE).unlink()  # as if stopped while saving
    (out / "member_1" / "checkpoint-1").mkdir(exist_ok=True)
    ensemble_mod.train_ensemble(tiny_model, tasks["obqa_edl"], _config(out, ensemble=3))
    assert [(c.output_dir, c.seed, c.resume_from_checkpoint, c.ensemble) for c in calls] == [
        (str(out / "member_1"), 43, "latest", None),
        (str(out / "member_2"), 44, None, None),
    ]


def test_refusals_before_anything_trains(ensemble, tiny_model, tasks, tmp_path, monkeypatch):
    monkeypatch.setattr(train_mod, "train", lambda *a: pytest.fail("nothing may train"))
    run = ensemble_mod.train_ensemble
    with pytest.raises(
        ValueError,
        match=r"ensemble=1 must be an integer number of members >= 2; e\.g\. --ensemble 3, or drop --ensemble",
    ):
        _config(tmp_path, ensemble=1)
    own = tmp_path / "own"
    own.mkdir()
    (own / "adapter_config.json").write_text("{}")
    with pytest.raises(FileExistsError, match="no adapter of its own"):
        run(tiny_model, tasks["obqa_edl"], _config(own))
    beyond = tmp_path / "beyond"
    shutil.copytree(ensemble, beyond)
    with pytest.raises(FileExistsError, match="member_1, beyond --ensemble 1|beyond --ensemble"):
        (beyond / "member_1").rename(beyond / "member_4")
        run(tiny_model, tasks["obqa_edl"], _config(beyond))
    other = tmp_path / "other"
    shutil.copytree(ensemble, other)
    with pytest.raises(FileExistsError, match="method 'edl' \\(this run: 'softmax'\\)"):
        run(tiny_model, tasks["obqa_edl"], _config(other, method="softmax"))
    with pytest.raises(FileExistsError, match="seed 42 \\(this run gives it 7\\)"):
        run(tiny_model, tasks["obqa_edl"], _config(other, seed=7))


def test_cli_trains_an_ensemble(tiny_model, tmp_path, monkeypatch, capsys):
    from lm_eval_evidential.cli import main
    from lm_eval_evidential.testing.tiny import sample_data_dir

    monkeypatch.setenv("EVIDENTIAL_DATA_DIR", str(sample_data_dir()))
    out = tmp_path / "cli"
    args = ["train", "--pretrained", str(tiny_model), "--task", "obqa_edl", "--method", "softmax"]
    args += ["--output-dir", str(out), "--max-steps", "1", "--max-train-docs", "4", "--ensemble", "2"]
    assert main(args) == 0
    assert f"softmax: ensemble of 2 members (member_0 ..) in {out.resolve()}" in capsys.readouterr().out
    assert all((out / f"member_{i}" / METADATA_FILE).is_file() for i in range(2))
    assert main(args) == 0  # the rerun: both complete, nothing to do
