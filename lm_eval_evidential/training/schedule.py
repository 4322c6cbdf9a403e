"""The run's schedule: steps per epoch, EDL's KL-weight schedule, and the run told in steps and wall-clock time."""

from __future__ import annotations

import math

from lm_eval_evidential.training.config import TrainConfig

# Steps timed (after the first, which pays one-off costs) before the run says its speed and the KL schedule's.
CLOCK_STEPS = 3


def steps_per_epoch(num_examples: int, config: TrainConfig, world_size: int = 1) -> int:
    """Optimiser steps in one pass over the training docs."""
    batches = math.ceil(num_examples / (config.per_device_train_batch_size * world_size))
    return max(1, math.ceil(batches / config.gradient_accumulation_steps))


def kl_weight_at(step: int, config: TrainConfig, epoch_steps: int) -> float:
    """EDL's KL weight at optimiser step ``step`` (0-based: steps already taken).

    Default: ``kl_weight · min(1, e / kl_anneal_epochs)``, e = ⌊step / epoch_steps⌋ completed
    epochs, the IB-EDL reference's schedule (its callback sets min(1, epoch / num_train_epochs)
    at each epoch start, and its Trainer kept num_train_epochs at 3). With ``kl_anneal_steps``:
    ``kl_weight · min(1, step / kl_anneal_steps)``. A schedule of 0 means full weight at once.

    Examples
    --------
    >>> config = TrainConfig(kl_anneal_epochs=3)
    >>> [round(kl_weight_at(s, config, epoch_steps=10), 3) for s in (0, 9, 10, 25, 30, 99)]
    [0.0, 0.0, 0.333, 0.667, 1.0, 1.0]
    """
    from lm_eval_evidential.modeling.losses import kl_anneal_weight

    if config.method != "edl":
        return 0.0
    if config.kl_anneal_steps is not None:
        return config.kl_weight * kl_anneal_weight(step, config.kl_anneal_steps)
    if config.kl_anneal_epochs <= 0:
        return config.kl_weight
    return config.kl_weight * min(1.0, (step // epoch_steps) / config.kl_anneal_epochs)


def describe_kl_schedule(config: TrainConfig, epoch_steps: int) -> str:
    """One line saying how the KL weight will move in this run (printed before training)."""
    if config.method != "edl":
        return f"{config.method}: no KL-to-uniform regulariser"
    end = kl_weight_at(config.max_steps - 1, config, epoch_steps)
    if config.kl_anneal_steps is not None:
        rule = f"kl_weight·min(1, step/{config.kl_anneal_steps}) (--kl-anneal-steps)"
    elif config.kl_anneal_epochs <= 0:
        rule = "kl_weight from the first step (--kl-anneal-epochs 0)"
    else:
        full = math.ceil(config.kl_anneal_epochs) * epoch_steps
        rule = (
            f"kl_weight·min(1, epoch/{config.kl_anneal_epochs:g}), one epoch = {epoch_steps} steps, full weight from "
            f"step {full} (IB-EDL reference schedule; --kl-anneal-epochs, --kl-anneal-steps)"
        )
    return (
        f"edl: KL weight = {rule}; kl_weight={config.kl_weight:g}; at the last of {config.max_steps} steps: {end:.3g} "
        f"(in wall-clock time after step {CLOCK_STEPS + 1})"
    )


def kl_full_step(config: TrainConfig, epoch_steps: int) -> int | None:
    """The first optimiser step (0-based) at which EDL's KL weight is at full strength; None without a KL term.

    Examples
    --------
    >>> kl_full_step(TrainConfig(kl_anneal_epochs=3), epoch_steps=1240)
    3720
    >>> kl_full_step(TrainConfig(kl_anneal_steps=500), epoch_steps=1240)
    500
    """
    if config.method != "edl":
        return None
    if config.kl_anneal_steps is not None:
        return config.kl_anneal_steps
    return math.ceil(config.kl_anneal_epochs) * epoch_steps if config.kl_anneal_epochs > 0 else 0


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def describe_kl_clock(config: TrainConfig, epoch_steps: int, step: int, seconds_per_step: float) -> str:
    """The run and the KL schedule in wall-clock terms at ``seconds_per_step``, said after step ``step``.

    Examples
    --------
    >>> describe_kl_clock(TrainConfig(max_steps=40), epoch_steps=60, step=4, seconds_per_step=9.0)
    '9 s a step: the 36 steps left take 5.4 min; the KL weight reaches full strength at step 180, \
after this run ends (40 steps; full strength would need 180 steps, 27.0 min)'
    """
    left = max(0, config.max_steps - step)
    line = f"{seconds_per_step:.3g} s a step: the {left} steps left take {_duration(left * seconds_per_step)}"
    full = kl_full_step(config, epoch_steps)
    if full is None or full <= 0:
        return line
    if full >= config.max_steps:
        return (
            f"{line}; the KL weight reaches full strength at step {full}, after this run ends ({config.max_steps} "
            f"steps; full strength would need {full} steps, {_duration(full * seconds_per_step)})"
        )
    if full <= step:
        return f"{line}; the KL weight is at full strength since step {full}"
    return (
        f"{line}; the KL weight reaches full strength at step {full}, in {_duration((full - step) * seconds_per_step)}"
    )


def describe_run(config: TrainConfig, n_examples: int, epoch_steps: int, seconds_per_step: float | None) -> str:
    """The run before it starts: its step count, what that is in epochs, and a time estimate.

    Examples
    --------
    >>> describe_run(TrainConfig(max_steps=10080), 240, 60, 0.27)
    '10080 steps (168 epochs of 240 questions, 4 a step); about 0.27 s a step from a timed forward pass, so about \
45.4 min (said again, measured, after 3 steps; --max-steps N for fewer)'
    """
    epochs = config.max_steps / max(1, epoch_steps)
    line = (
        f"{config.max_steps} steps ({epochs:.3g} epochs of {n_examples} questions, "
        f"{config.per_device_train_batch_size * config.gradient_accumulation_steps} a step)"
    )
    if seconds_per_step is None:
        return line
    return (
        f"{line}; about {seconds_per_step:.2g} s a step from a timed forward pass, so about "
        f"{_duration(config.max_steps * seconds_per_step)} (said again, measured, after {CLOCK_STEPS} steps; "
        "--max-steps N for fewer)"
    )
