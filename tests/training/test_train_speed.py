"""The trainer at the bare step's speed without changing what a step computes: its step is the bare
step (same loss and gradients on the same batch), length-grouped batches cover every question once
with less padding, the GPU settings (pinned memory, asynchronous copies, bf16 autocast) are the
ones asked for, and the run says its speed and the KL schedule's in wall-clock time."""

from __future__ import annotations

import pytest
import torch

from lm_eval_evidential.training import evidential_trainer, objective
from lm_eval_evidential.training import trainer as train_mod
from lm_eval_evidential.training.config import TrainConfig
from lm_eval_evidential.training.data import LeftPadCollator
from lm_eval_evidential.training.evidential_trainer import host_to_device
from lm_eval_evidential.training.objective import batch_loss, last_logits
from lm_eval_evidential.training.schedule import CLOCK_STEPS, describe_kl_clock, kl_full_step
from lm_eval_evidential.training.trainer import train
from tests.training.conftest import FAST


@pytest.fixture(scope="module")
def obqa(tasks):
    return tasks["obqa_edl"]


def _instrument(monkeypatch, callback_factory):
    """Adds ``callback_factory(trainer)`` to the Trainer ``train`` builds; records every collated batch."""
    batches = []
    make = train_mod.trainer_classes

    def instrumented():
        base, *callbacks = make()

        class Recorded(base):
            def __init__(self, *a, **k):
                super().__init__(*a, **k)
                self.add_callback(callback_factory(self))

        return (Recorded, *callbacks)

    class Recording(LeftPadCollator):
        def __call__(self, rows):
            batches.append(list(rows))
            return super().__call__(rows)

    monkeypatch.setattr(train_mod, "trainer_classes", instrumented)
    monkeypatch.setattr(train_mod, "LeftPadCollator", Recording)
    return batches


@pytest.mark.parametrize("method", ["edl", "softmax"])
def test_the_trainers_step_is_the_bare_step(tiny_model, obqa, tmp_path, monkeypatch, method):
    # The LoRA weights before the first step and the gradients the optimiser is given, from inside the
    # Trainer; then the bare step (left_pad, forward with logits_to_keep=1, batch_loss, backward) on the
    # same rows from the same weights, clipped by torch's clip_grad_norm_ over every parameter (a norm
    # limit small enough to bite). No dropout: nothing random.
    from peft import LoraConfig, get_peft_model, set_peft_model_state_dict
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

    seen = {}

    def probe(trainer):
        class Probe(TrainerCallback):
            def on_train_begin(self, args, state, control, model=None, **kwargs):
                from peft import get_peft_model_state_dict

                seen["start"] = {k: v.detach().clone() for k, v in get_peft_model_state_dict(model).items()}

            def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
                if state.global_step == 0:
                    seen["grads"] = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.requires_grad}

        return Probe()

    batches = _instrument(monkeypatch, probe)
    config = TrainConfig(
        method=method,
        output_dir=str(tmp_path / "run"),
        max_steps=1,
        lora_dropout=0.0,
        max_grad_norm=1e-4,
        kl_anneal_epochs=0,  # the KL term at full weight from step 0, so it is in the gradient
        target_modules=("q_proj", "v_proj"),
        **FAST,
    )
    train(tiny_model, obqa, config)

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    base = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    lora = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=["q_proj", "v_proj"], bias="lora_only")
    bare = get_peft_model(base, lora)
    set_peft_model_state_dict(bare, seen["start"])
    bare.train()
    batch = LeftPadCollator(tokenizer.pad_token_id)(batches[0])
    loss, _ = batch_loss(last_logits(bare, batch), batch, config, kl_weight=config.kl_weight)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(bare.parameters(), config.max_grad_norm)
    assert norm > 10 * config.max_grad_norm  # the limit bites
    bare_grads = {n: p.grad for n, p in bare.named_parameters() if p.requires_grad}
    assert set(bare_grads) == set(seen["grads"]) and bare_grads
    for name, grad in bare_grads.items():
        torch.testing.assert_close(seen["grads"][name], grad, rtol=1e-5, atol=1e-7, msg=name)


def test_length_grouped_batches_cover_every_question_once_and_pad_less(tiny_model, obqa, tmp_path, monkeypatch):
    # Epochs of the Trainer's own dataloader (240 questions, batches of 4), with and without grouping:
    # the same questions, each once; grouping changes which questions share a batch (so a run's numbers
    # differ from an ungrouped run's, not its data) and cuts the padding.
    from transformers import TrainerCallback

    def pads(batches):
        return sum(len(b) * max(len(r["input_ids"]) for r in b) - sum(len(r["input_ids"]) for r in b) for b in batches)

    class ThreeEpochs(TrainerCallback):
        # epochs 0, 1, and 1 again after other random draws (dropout, noise): the order is the epoch's alone,
        # so a run resumed mid-epoch skips the batches it took before
        def on_train_begin(self, args, state, control, train_dataloader=None, **kwargs):
            for epoch in (0, 1, 1):
                train_dataloader.set_epoch(epoch)
                torch.rand(1000)
                for _ in train_dataloader:
                    pass

    runs = {}
    for grouped in (True, False):
        with monkeypatch.context() as mp:
            batches = _instrument(mp, lambda trainer: ThreeEpochs())
            config = TrainConfig(
                output_dir=str(tmp_path / f"run-{grouped}"),
                max_steps=1,
                group_by_length=grouped,
                **{**FAST, "max_train_docs": None},
            )
            train(tiny_model, obqa, config)
        epochs = [batches[i : i + 60] for i in (0, 60, 120)]
        assert epochs[1] == epochs[2] and epochs[0] != epochs[1], grouped
        runs[grouped] = epochs[0]
    everything = sorted(tuple(r["input_ids"]) for b in runs[False] for r in b)
    assert len(everything) == 240
    for batches in runs.values():
        assert all(len(b) == 4 for b in batches)
        assert sorted(tuple(r["input_ids"]) for b in batches for r in b) == everything
    assert pads(runs[True]) < 0.5 * pads(runs[False]), (pads(runs[True]), pads(runs[False]))


def test_gpu_settings_are_asked_for_on_a_gpu_only(tmp_path):
    on_gpu = evidential_trainer.training_arguments(TrainConfig(output_dir="o"), tmp_path / "o", accelerator=True)
    assert on_gpu.dataloader_pin_memory and on_gpu.accelerator_config.non_blocking
    on_cpu = evidential_trainer.training_arguments(TrainConfig(output_dir="o"), tmp_path / "o", accelerator=False)
    assert not on_cpu.dataloader_pin_memory and not on_cpu.accelerator_config.non_blocking
    assert host_to_device(False) == {"dataloader_pin_memory": False, "accelerator_config": {"non_blocking": False}}
    # No per-step host read of the loss; no activation recomputation unless asked.
    assert not on_cpu.logging_nan_inf_filter and not on_cpu.gradient_checkpointing
    asked = evidential_trainer.training_arguments(
        TrainConfig(output_dir="o", gradient_checkpointing=True), tmp_path / "o"
    )
    assert asked.gradient_checkpointing


def test_bf16_runs_the_forward_under_autocast_and_the_loss_in_float32(tiny_model, obqa, tmp_path, monkeypatch):
    # The same code path as on a GPU: accelerate's autocast around compute_loss, the logits cast to
    # float32 before the loss (CPU autocast stands in for CUDA's).
    seen = []
    real = objective.last_position_logits

    def recording(model, *args):
        def hook(module, inputs, output):
            seen.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"), output.dtype))

        handle = model.get_output_embeddings().register_forward_hook(hook)  # inside the model's forward
        try:
            return real(model, *args)
        finally:
            handle.remove()

    real_loss = evidential_trainer.batch_loss

    def loss_recording(logits, *args, **kwargs):
        seen.append(("loss", logits.dtype))
        return real_loss(logits, *args, **kwargs)

    monkeypatch.setattr(objective, "last_position_logits", recording)
    monkeypatch.setattr(evidential_trainer, "batch_loss", loss_recording)
    train(tiny_model, obqa, TrainConfig(output_dir=str(tmp_path / "run"), max_steps=1, bf16=True, **FAST))
    assert seen == [(True, torch.bfloat16, torch.bfloat16), ("loss", torch.float32)]


# ------------------------------------------------------------------ the schedule in wall-clock time
def test_the_kl_schedule_is_told_in_time():
    config = TrainConfig(max_steps=10080)
    assert kl_full_step(config, 1240) == 3720 and kl_full_step(TrainConfig(method="softmax"), 1240) is None
    assert kl_full_step(TrainConfig(kl_anneal_epochs=0), 1240) == 0
    line = describe_kl_clock(config, 1240, step=4, seconds_per_step=0.5)
    assert line == (
        "0.5 s a step: the 10076 steps left take 84.0 min; "
        "the KL weight reaches full strength at step 3720, in 31.0 min"
    )
    short = describe_kl_clock(TrainConfig(max_steps=100), 1240, step=4, seconds_per_step=7.0)
    assert "after this run ends (100 steps; full strength would need 3720 steps, 7.2 h)" in short
    assert describe_kl_clock(TrainConfig(max_steps=100, kl_anneal_steps=2), 1240, 4, 1.0).endswith("since step 2")
    assert describe_kl_clock(TrainConfig(method="ib_edl", max_steps=4), 10, 4, 1.0) == (
        "1 s a step: the 0 steps left take 0 s"
    )


def test_the_run_says_its_speed_after_the_first_steps(tiny_model, obqa, tmp_path, capsys):
    train(tiny_model, obqa, TrainConfig(output_dir=str(tmp_path / "run"), max_steps=CLOCK_STEPS + 2, **FAST))
    said = [line for line in capsys.readouterr().err.splitlines() if "s a step: the" in line]
    assert len(said) == 1, said
    # FAST trains on 4 questions: one step an epoch, full KL weight from step 3 (the reference's 3 epochs)
    assert "the 1 steps left take" in said[0] and said[0].endswith("the KL weight is at full strength since step 3")
