"""Training stopped by SIGTERM or SIGINT at a random step saves a checkpoint that resumes to the same final
adapter as an uninterrupted run (issue 26, class 7), and the CLI says where it is."""

from __future__ import annotations

import os
import random
import signal

import pytest
import torch

from lm_eval_evidential.modeling.config import METADATA_FILE
from lm_eval_evidential.training import trainer as train_mod
from lm_eval_evidential.training.config import TrainConfig
from lm_eval_evidential.training.interrupt import TrainingInterrupted
from lm_eval_evidential.training.trainer import train
from tests.training.conftest import FAST

STEPS = 6
SETTINGS = {**FAST, "max_train_docs": 8, "lora_dropout": 0.1}  # dropout: the resumed RNG state matters too


def _signal_at(monkeypatch, step: int, signum: int) -> None:
    """The run receives ``signum`` from outside (``os.kill``) while it computes optimizer step ``step``."""
    real = train_mod.make_save_on_signal

    def make():
        base = real()

        class Killed(base):
            def on_step_begin(self, args, state, control, **kwargs):
                if state.global_step + 1 == step:
                    os.kill(os.getpid(), signum)
                return control

        return Killed

    monkeypatch.setattr(train_mod, "make_save_on_signal", make)


def _adapter(folder):
    from safetensors.torch import load_file

    return load_file(str(folder / "adapter_model.safetensors"))


@pytest.fixture(scope="module")
def uninterrupted(tiny_model, tasks, tmp_path_factory):
    out = tmp_path_factory.mktemp("uninterrupted") / "run"
    train(tiny_model, tasks["obqa_edl"], TrainConfig(method="edl", output_dir=str(out), max_steps=STEPS, **SETTINGS))
    return _adapter(out)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_saves_a_checkpoint_that_resumes_to_the_same_adapter(
    signum, uninterrupted, tiny_model, tasks, tmp_path, monkeypatch
):
    step = random.Random(os.urandom(8)).randint(1, STEPS - 1)
    out = tmp_path / "run"
    config = TrainConfig(method="edl", output_dir=str(out), max_steps=STEPS, **SETTINGS)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    with monkeypatch.context() as patch:
        _signal_at(patch, step, signum)
        with pytest.raises(TrainingInterrupted) as stopped:
            train(tiny_model, tasks["obqa_edl"], config)
    assert {s: signal.getsignal(s) for s in handlers} == handlers, "the signal handlers were not put back"
    assert stopped.value.step == step and stopped.value.checkpoint == out / f"checkpoint-{step}", (step, stopped.value)
    assert (out / f"checkpoint-{step}" / METADATA_FILE).is_file() and not (out / "adapter_model.safetensors").exists()
    assert stopped.value.exit_status == 128 + signum

    resumed = TrainConfig(
        method="edl", output_dir=str(out), max_steps=STEPS, resume_from_checkpoint="latest", **SETTINGS
    )
    train(tiny_model, tasks["obqa_edl"], resumed)
    final = _adapter(out)
    assert final.keys() == uninterrupted.keys()
    for name, weight in uninterrupted.items():  # float32 rounding, nothing more (stopped at step {step})
        torch.testing.assert_close(final[name], weight, rtol=1e-5, atol=1e-6, msg=lambda m: f"step {step}: {m}")


def test_the_cli_says_where_the_checkpoint_is_and_exits_as_signalled(tiny_model, tmp_path, monkeypatch, capsys):
    from lm_eval_evidential.cli import main
    from lm_eval_evidential.testing.tiny import sample_data_dir

    monkeypatch.setenv("EVIDENTIAL_DATA_DIR", str(sample_data_dir()))
    _signal_at(monkeypatch, 2, signal.SIGTERM)
    out = tmp_path / "cli"
    argv = ["train", "--pretrained", str(tiny_model), "--task", "obqa_edl", "--output-dir", str(out)]
    code = main([*argv, "--max-steps", "3", "--max-train-docs", "4"])
    err = capsys.readouterr().err
    assert code == 143, err
    assert f"stopped by SIGTERM at step 2; saved a resumable checkpoint in {out / 'checkpoint-2'}" in err, err
    assert "--resume-from-checkpoint latest" in err and "Traceback" not in err


def test_a_folder_that_refuses_writes_mid_run_keeps_the_checkpoint_elsewhere(tiny_model, tasks, tmp_path, monkeypatch):
    """The output folder refuses a checkpoint mid-run (made read-only, a full disk): the checkpoint is saved in
    a rescue folder, one error names both and the fix, and it resumes to the end (issue 36, class 2)."""
    import re
    import shutil
    from pathlib import Path

    from transformers import Trainer

    from lm_eval_evidential.errors import OutputWriteError

    out = tmp_path / "run"
    real = Trainer._save_optimizer_and_scheduler

    def refuse(self, output_dir):
        if str(output_dir).startswith(str(out)):
            raise PermissionError(13, "Permission denied", str(output_dir))
        return real(self, output_dir)

    settings = {**SETTINGS, "save_steps": 2}
    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "_save_optimizer_and_scheduler", refuse)
        with pytest.raises(OutputWriteError) as failed:
            train(
                tiny_model, tasks["obqa_edl"], TrainConfig(method="edl", output_dir=str(out), max_steps=3, **settings)
            )
    said = str(failed.value)
    assert "Permission denied" in said and "--resume-from-checkpoint latest" in said, said
    rescue = Path(re.search(r"step 2 was saved in (\S+)/checkpoint-2 instead", said)[1])
    assert (rescue / "checkpoint-2" / METADATA_FILE).is_file() and (rescue / "checkpoint-2" / "optimizer.pt").is_file()
    shutil.rmtree(out / "checkpoint-2")  # the partial one the folder let through
    shutil.move(rescue / "checkpoint-2", out / "checkpoint-2")
    resumed = TrainConfig(method="edl", output_dir=str(out), max_steps=3, resume_from_checkpoint="latest", **settings)
    train(tiny_model, tasks["obqa_edl"], resumed)
    assert (out / "adapter_model.safetensors").is_file() and (out / METADATA_FILE).is_file()
    shutil.rmtree(rescue)
