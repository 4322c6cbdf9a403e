"""A training run stopped by SIGTERM (a scheduler's time limit, ``kill``) or SIGINT (Ctrl-C) leaves a
checkpoint it can resume from, and says where.

:class:`SaveOnSignal` is a ``transformers`` callback: while ``Trainer.train`` runs, the first SIGTERM
or SIGINT only sets a flag (the default handler is put back at once, so a second signal stops the
process as usual); at the end of the optimizer step in progress the Trainer saves a full checkpoint
(``checkpoint-N``: adapter, optimizer, scheduler, RNG states and ``evidential_config.json``) and stops.
:func:`lm_eval_evidential.training.trainer.train` then raises :class:`TrainingInterrupted` naming it;
``--resume-from-checkpoint latest`` continues from there to the same final adapter as an
uninterrupted run.
"""

from __future__ import annotations

import signal
from pathlib import Path

from lm_eval_evidential.errors import EvidentialError

#: The signals that end a training run with a checkpoint.
SIGNALS = (signal.SIGTERM, signal.SIGINT)


class TrainingInterrupted(EvidentialError):
    """Training stopped on a signal after saving ``checkpoint``; ``signum`` is the signal received.

    Expected (the user stopped it), so one line; ``lm-eval-evidential train`` exits with :attr:`exit_status`."""

    def __init__(self, signum: int, checkpoint: Path, step: int):
        self.signum, self.checkpoint, self.step = signum, Path(checkpoint), step
        super().__init__(
            f"stopped by {signal.Signals(signum).name} at step {step}; saved a resumable checkpoint in "
            f"{self.checkpoint} — continue with --resume-from-checkpoint latest (the same --output-dir)"
        )

    @property
    def exit_status(self) -> int:
        """The shell's status for a process ended by this signal (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + self.signum


def make_save_on_signal():
    """The :class:`SaveOnSignal` callback class (built on first use: transformers is imported lazily)."""
    from transformers import TrainerCallback

    class SaveOnSignal(TrainerCallback):
        """Save a checkpoint and stop at the end of the current step when SIGTERM or SIGINT arrives."""

        def __init__(self):
            self.received: int | None = None
            self._previous: dict[int, object] = {}

        def _handle(self, signum, frame) -> None:
            self.received = signum
            self._restore()  # a second signal acts at once, as without this callback

        def _restore(self) -> None:
            for signum, handler in self._previous.items():
                signal.signal(signum, handler)
            self._previous = {}

        def on_train_begin(self, args, state, control, **kwargs):
            import threading

            if threading.current_thread() is threading.main_thread():  # handlers can only be set there
                self._previous = {s: signal.signal(s, self._handle) for s in SIGNALS}
            return control

        def on_step_end(self, args, state, control, **kwargs):
            if self.received is not None:
                control.should_save = True
                control.should_training_stop = True
            return control

        def on_train_end(self, args, state, control, **kwargs):
            self._restore()
            return control

    return SaveOnSignal


def epoch_seeded(sampler, seed: int):
    """``sampler`` made resumable: a ``transformers`` ``LengthGroupedSampler`` draws each epoch's order
    from the global RNG when the epoch starts, so a run resumed inside a later epoch would see another
    order than the uninterrupted run; the same grouping is drawn here from a generator seeded by
    ``seed`` and the epoch (``set_epoch``, which the Trainer calls), as accelerate does for random
    sampling. Any other sampler is returned as it is."""
    import torch
    from transformers.trainer_pt_utils import LengthGroupedSampler, get_length_grouped_indices

    if type(sampler) is not LengthGroupedSampler:
        return sampler

    class EpochSeededLengthGroupedSampler(LengthGroupedSampler):
        def __init__(self):
            super().__init__(sampler.batch_size, lengths=sampler.lengths)
            self.epoch = 0

        def set_epoch(self, epoch: int) -> None:
            self.epoch = epoch

        def __iter__(self):
            generator = torch.Generator().manual_seed(seed + self.epoch)
            return iter(get_length_grouped_indices(self.lengths, self.batch_size, generator=generator))

    return EpochSeededLengthGroupedSampler()
