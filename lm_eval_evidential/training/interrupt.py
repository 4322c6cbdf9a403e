"""A training run stopped by SIGTERM (a scheduler's time limit, ``kill``) or SIGINT (Ctrl-C) leaves a
checkpoint it can resume from, and says where.

:class:`SaveOnSignal` is a ``transformers`` callback: while ``Trainer.train`` runs, the first SIGTERM
or SIGINT only sets a flag (the default handler is put back at once, so a second signal stops the
process as usual); at the end of the optimizer step in progress the Trainer saves a full checkpoint
(``checkpoint-N``: adapter, optimizer, scheduler, RNG states and ``evidential_config.json``) and stops.
:func:`lm_eval_evidential.training.trainer.train` then raises :class:`TrainingInterrupted` naming it;
``--resume-from-checkpoint latest`` continues from there to the same final adapter as an
uninterrupted run.

A fit that has no step to end at (``laplace``'s curvature and prior search) stops at once instead:
:func:`stop_on_signal` turns the first SIGTERM or SIGINT into :class:`FitInterrupted`, which says
what the output folder holds (its previous output, or nothing: the result is written whole at the
end, :func:`lm_eval_evidential.files.atomic_folder`) and that the same command starts again.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from lm_eval_evidential.errors import EvidentialError

#: The signals that end a training run with a checkpoint.
SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StoppedBySignal(EvidentialError):
    """A command stopped by the signal ``signum`` (SIGTERM or SIGINT). Expected (the user or a scheduler stopped
    it), so one line; the command exits with :attr:`exit_status`, as a process ended by that signal would."""

    def __init__(self, signum: int, message: str):
        self.signum = signum
        super().__init__(message)

    @property
    def exit_status(self) -> int:
        """The shell's status for a process ended by this signal (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + self.signum


class TrainingInterrupted(StoppedBySignal):
    """Training stopped on a signal after saving ``checkpoint``; ``lm-eval-evidential train`` exits with
    :attr:`exit_status`."""

    def __init__(self, signum: int, checkpoint: Path, step: int):
        self.checkpoint, self.step = Path(checkpoint), step
        super().__init__(
            signum,
            f"stopped by {signal.Signals(signum).name} at step {step}; saved a resumable checkpoint in "
            f"{self.checkpoint} — continue with --resume-from-checkpoint latest (the same --output-dir)",
        )


class FitInterrupted(StoppedBySignal):
    """A fit stopped on a signal before it wrote its output; the command exits with :attr:`exit_status`."""

    def __init__(self, signum: int, command: str, output: Path, kept: bool):
        held = "keeps its previous output" if kept else "was not written"
        super().__init__(
            signum,
            f"stopped by {signal.Signals(signum).name} during the fit; {output} {held} (the result is written whole "
            f"at the end, never in part) — run the same {command} command again to fit from the start",
        )


@contextlib.contextmanager
def stop_on_signal(make_error: Callable[[int], EvidentialError]) -> Iterator[None]:
    """While the block runs, the first SIGTERM or SIGINT stops it with ``make_error(signum)`` (the handlers
    before are put back at once, so a second signal acts as without this; outside the main thread, where
    handlers cannot be set, nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}

    def restore() -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        previous.clear()

    def handle(signum, frame) -> None:
        restore()
        # A KeyboardInterrupt (a BaseException: no library's ``except Exception`` on the way swallows it) that
        # knows its signal; turned into make_error(signum) below.
        stop = KeyboardInterrupt(signal.Signals(signum).name)
        stop.signum = signum
        raise stop

    previous.update({s: signal.signal(s, handle) for s in SIGNALS})
    try:
        yield
    except KeyboardInterrupt as stop:
        if getattr(stop, "signum", None) is None:
            raise  # a second Ctrl-C, after the handlers before were put back: as without this
        raise make_error(stop.signum) from None
    finally:
        restore()


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
