"""Training that cannot fail silently: the KL schedule, loss terms in the log, evidence
collapse warnings, target modules fitted or refused per architecture, the output folder rule."""

from __future__ import annotations

import logging

import pytest
import torch

from lm_eval_evidential.training import evidential_trainer
from lm_eval_evidential.training.config import TrainConfig
from lm_eval_evidential.training.lora_targets import resolve_target_modules
from lm_eval_evidential.training.objective import COLLAPSED_EVIDENCE, evidence_warning
from lm_eval_evidential.training.schedule import describe_kl_schedule, kl_weight_at, steps_per_epoch
from lm_eval_evidential.training.trainer import train
from tests.training.conftest import FAST


@pytest.fixture(scope="module")
def obqa(tasks):
    return tasks["obqa_edl"]


# ------------------------------------------------------------------ KL schedule
def test_kl_schedule_is_the_reference_ramp_in_epochs_whatever_the_run_length():
    # OBQA's 4,957 training questions in batches of 4: 1,240 steps an epoch (the reference's run: 10,080 steps).
    epoch = steps_per_epoch(4957, TrainConfig())
    assert epoch == 1240
    for max_steps in (60, 10080):
        config = TrainConfig(max_steps=max_steps)
        weights = [kl_weight_at(s, config, epoch) for s in (0, 59, 1239, 1240, 2480, 3719, 3720, 10079)]
        assert weights == pytest.approx([0, 0, 0, 1 / 3, 2 / 3, 2 / 3, 1, 1])
    assert (
        steps_per_epoch(10, TrainConfig(per_device_train_batch_size=4, gradient_accumulation_steps=2), world_size=1)
        == 2
    )
    assert kl_weight_at(5, TrainConfig(kl_anneal_steps=10, kl_weight=0.5), epoch) == pytest.approx(0.25)
    assert kl_weight_at(0, TrainConfig(kl_anneal_epochs=0), epoch) == 1.0
    assert kl_weight_at(10**6, TrainConfig(method="ib_edl"), epoch) == 0.0


def test_the_schedule_is_said_before_training():
    short = describe_kl_schedule(TrainConfig(max_steps=60), 1240)
    assert "min(1, epoch/3)" in short and "1240 steps" in short and "full weight from step 3720" in short
    assert short.endswith("at the last of 60 steps: 0 (in wall-clock time after step 4)")
    assert describe_kl_schedule(TrainConfig(method="ib_edl"), 10) == "ib_edl: no KL-to-uniform regulariser"


# ------------------------------------------------------------------ loss terms and collapse
def test_evidence_warning_names_the_cause():
    edl = TrainConfig(learning_rate=1e-3)
    low = evidence_warning(0.01, 60, edl, kl_weight=1.0)
    assert "collapsed" in low and "weight now 1" in low and "--kl-anneal-epochs" in low and "--lr 0.001" in low
    assert "--beta" in evidence_warning(0.01, 60, TrainConfig(method="ib_edl"), 0.0)
    assert "exploding" in evidence_warning(5e3, 60, edl, 1.0)
    assert evidence_warning(2.0, 60, edl, 1.0) is None
    assert evidence_warning(0.0, 60, TrainConfig(method="softmax"), 0.0) is None


def test_collapse_is_logged_with_the_loss_terms_apart(tiny_model, obqa, tmp_path, caplog):
    # A KL term 50x too strong from the first step drives every answer's evidence to zero.
    # (the symptom: loss flat at 0.90 = the all-zero-evidence loss at K=4, vacuity -> 1)
    config = TrainConfig(
        output_dir=str(tmp_path / "run"),
        max_steps=8,
        kl_weight=50.0,
        kl_anneal_epochs=0,
        **{**FAST, "learning_rate": 3e-2},
        lr_scheduler_type="constant",
    )
    with caplog.at_level(logging.WARNING, logger=evidential_trainer.__name__):
        out = train(tiny_model, obqa, config)
    warned = [r.getMessage() for r in caplog.records if "collapsed" in r.getMessage()]
    assert len(warned) == 1 and "KL regulariser (weight now 50)" in warned[0]
    import json

    history = json.loads((out / "checkpoint-8" / "trainer_state.json").read_text())["log_history"]
    logged = [h for h in history if "loss" in h]
    assert {"mse", "kl", "kl_weight", "evidence", "vacuity"} <= set(logged[0])
    for h in logged:  # the logged loss is its terms' sum
        assert h["loss"] == pytest.approx(h["mse"] + h["kl_weight"] * h["kl"], rel=1e-3, abs=1e-4)
    assert logged[-1]["evidence"] < COLLAPSED_EVIDENCE < logged[0]["evidence"]
    assert logged[-1]["loss"] == pytest.approx(0.9, abs=0.01) and logged[-1]["vacuity"] > 0.99


def test_a_healthy_run_does_not_warn(tiny_model, obqa, tmp_path, caplog):
    config = TrainConfig(output_dir=str(tmp_path / "run"), max_steps=3, **FAST)
    with caplog.at_level(logging.WARNING, logger=evidential_trainer.__name__):
        train(tiny_model, obqa, config)
    assert not [r for r in caplog.records if "evidence" in r.getMessage()]


# ------------------------------------------------------------------ target modules per architecture
def _model(folder):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder)


def test_default_targets_fit_the_architecture(tiny_family):
    assert resolve_target_modules(_model(tiny_family("llama")), None)[0] == ("q_proj", "v_proj", "lm_head")
    targets, notes = resolve_target_modules(_model(tiny_family("llama", tied=True)), None)
    assert targets == ("q_proj", "v_proj") and "tied to the input embeddings" in notes[0]
    targets, notes = resolve_target_modules(_model(tiny_family("phi3")), None)
    assert targets == ("qkv_proj", "lm_head") and "qkv_proj" in notes[0]
    assert resolve_target_modules(_model(tiny_family("gemma2", tied=True)), None)[0] == ("q_proj", "v_proj")


def test_lm_head_on_a_tied_model_is_refused_before_training_with_the_fix(tiny_family, obqa, tmp_path, monkeypatch):
    from transformers import Trainer

    monkeypatch.setattr(Trainer, "train", lambda *a, **k: pytest.fail("trained despite the refusal"))
    config = TrainConfig(output_dir=str(tmp_path / "run"), target_modules="q_proj,v_proj,lm_head", max_steps=1, **FAST)
    with pytest.raises(
        ValueError, match=r"ties its output layer.*--model hf.*attribute 'weight' already exists.*q_proj,v_proj"
    ):
        train(tiny_family("llama", tied=True), obqa, config)
    with pytest.raises(ValueError, match="q_proj, v_proj not found.*qkv_proj"):
        resolve_target_modules(_model(tiny_family("phi3")), ("q_proj", "v_proj"))


# ------------------------------------------------------------------ output folder
def test_non_empty_output_folder_is_refused_in_one_line(tiny_model, tmp_path, monkeypatch, capsys):
    from lm_eval_evidential.cli.main import main
    from lm_eval_evidential.testing.tiny import sample_data_dir

    monkeypatch.setenv("EVIDENTIAL_DATA_DIR", str(sample_data_dir()))
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    argv = [
        "train",
        "--pretrained",
        str(tiny_model),
        "--task",
        "obqa_edl",
        "--output-dir",
        str(out),
        "--max-steps",
        "1",
    ]
    assert main(argv) == 1  # an error, in the CLI's one exit-code map
    message = capsys.readouterr().err.strip()
    assert message.startswith("lm-eval-evidential train: error: output folder") and "\n" not in message
    assert "--overwrite-output-dir" in message and "--resume-from-checkpoint" in message
    assert (out / "notes.txt").read_text() == "mine" and len(list(out.iterdir())) == 1


# ------------------------------------------------------------------ what a run says before it starts
def test_the_step_count_and_an_estimate_are_said_before_the_first_step(tiny_model, obqa, tmp_path, capsys):
    import re

    config = TrainConfig(output_dir=str(tmp_path / "run"), max_steps=3, **FAST)
    train(tiny_model, obqa, config)
    err = capsys.readouterr().err
    said = re.search(r"edl: 3 steps \(.* epochs of 4 questions, 4 a step\); about \S+ s a step from a timed", err)
    assert said, err
    assert err.index(said.group(0)) < err.index("3/3")  # before the steps, not after them
    assert re.search(r"CPU threads? (for this .*M-parameter model, the faster in a timed forward pass|\(set by)", err)


def test_the_fastest_thread_count_is_measured_and_kept():
    import torch

    from lm_eval_evidential.modeling.threads import fastest_threads

    before = torch.get_num_threads()
    try:
        calls = []
        chosen, seconds = fastest_threads(lambda: calls.append(torch.get_num_threads()), [1, 2], repeats=2)
        assert sorted(seconds) == [1, 2] and calls == [1, 1, 1, 2, 2, 2]  # a warm-up and two timed runs each
        assert chosen == min(seconds, key=seconds.get) and torch.get_num_threads() == chosen
    finally:
        torch.set_num_threads(before)


def test_overwrite_output_dir_clears_the_earlier_runs_checkpoints(tiny_model, obqa, tmp_path, capsys):
    out = tmp_path / "run"
    fast = {**FAST, "save_steps": 1}
    train(tiny_model, obqa, TrainConfig(output_dir=str(out), max_steps=3, **fast))
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-3"]  # save_total_limit 2
    (out / "notes.txt").write_text("mine")
    (out / "checkpoint-9-notes").mkdir()  # not a checkpoint: kept
    capsys.readouterr()
    train(tiny_model, obqa, TrainConfig(output_dir=str(out), max_steps=1, overwrite_output_dir=True, **fast))
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-9-notes"]
    assert (out / "notes.txt").read_text() == "mine"
    assert "removed the earlier run's checkpoint-3" in capsys.readouterr().err


def test_a_dtype_set_after_construction_is_refused_before_the_weights_load(tmp_path, monkeypatch):
    """TrainConfig checks its dtype on construction; one set afterwards meets the same declaration (DTYPE) before
    the base model loads."""
    import transformers

    from lm_eval_evidential.errors import InvalidValueError
    from lm_eval_evidential.training.trainer import _load_base

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", lambda *a, **k: pytest.fail("loaded"))
    config = TrainConfig(output_dir=str(tmp_path / "o"))
    with pytest.raises(InvalidValueError, match="dtype 'float8'; choose one of auto, float32, bfloat16, float16"):
        TrainConfig(output_dir=str(tmp_path / "o"), dtype="float8")
    config.dtype = "float8"
    with pytest.raises(InvalidValueError, match="unknown dtype 'float8'; choose one of auto, float32, bfloat16"):
        _load_base("any", config)
    seen = {}
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", lambda name, **k: seen.update(k))
    for name in ("auto", "bfloat16"):
        config.dtype = name
        _load_base("any", config)
        assert list(seen.values())[-1] == ("auto" if name == "auto" else torch.bfloat16)
