"""CPU threads for small models: the count that is fastest for the model at hand, measured, and said.

torch uses as many intra-op threads as the machine has cores. For a model of a few million parameters
each matrix product is so small that splitting it costs more than it saves, and on a machine other
processes keep busy a thread that waits for a busy core stalls every step: the demo's tiny model trained
40 IB-EDL steps in 35 s on one thread against 96 s on torch's default two (2 shared cores, load 15-20;
the whole train command, measured once for commit d5e07ed, 2026-11-27). SmolLM2-135M stalls the same way:
a forward pass of 4 prompts of 48 tokens took 2.7-3.1 s on 1 thread against 21.6-33.7 s on 2, side by side in
one process (load 13-15, 2026-11-27), which made its training steps cost 60-100 s. Large models are the other
way round, and timing their forward passes costs more than it can save, so only a model under
:data:`SMALL_MODEL_PARAMETERS` is measured, and only on the CPU, and never where the user chose
(``OMP_NUM_THREADS`` set, or :data:`THREADS_ENV`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

#: Models with fewer parameters than this get their thread count measured (larger ones keep torch's default).
SMALL_MODEL_PARAMETERS = 200_000_000
#: An environment variable that fixes the thread count (as ``OMP_NUM_THREADS`` does for torch itself).
THREADS_ENV = "LM_EVAL_EVIDENTIAL_THREADS"


def user_threads() -> int | None:
    """The thread count the user set (``LM_EVAL_EVIDENTIAL_THREADS``, else ``OMP_NUM_THREADS``), None if none."""
    for name in (THREADS_ENV, "OMP_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return None


def machine_threads() -> int:
    """torch's default intra-op thread count here: the cores this process may run on (not the count an
    earlier pick set)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


#: A count whose run (its warm-up included) takes longer than ``LOSING_FACTOR`` times the best so far plus
#: ``LOSING_MARGIN_S`` seconds has lost: it is not run again (SmolLM2 on 2 threads under load: 52 s a forward
#: pass against 8.7 s on 1, so its three more runs would have added 2.6 min to the measurement).
LOSING_FACTOR = 2.0
LOSING_MARGIN_S = 1.0


def fastest_threads(run: Callable[[], object], candidates, *, repeats: int = 3) -> tuple[int, dict[int, float]]:
    """The thread count among ``candidates`` under which ``run()`` is fastest (best of ``repeats`` after one
    warm-up), and the seconds each took; torch is left set to the winner. A count that is clearly losing
    (:data:`LOSING_FACTOR`) stops at its first run that says so.

    Examples
    --------
    >>> n, seconds = fastest_threads(lambda: sum(range(1000)), [1])
    >>> n, sorted(seconds)
    (1, [1])
    """
    import torch

    seconds: dict[int, float] = {}
    for n in dict.fromkeys(int(c) for c in candidates if int(c) > 0):
        torch.set_num_threads(n)
        leader = min(seconds.values(), default=float("inf"))
        best = float("inf")
        for i in range(repeats + 1):  # run 0 is the warm-up: it counts only to stop a losing count
            start = time.perf_counter()
            run()
            took = time.perf_counter() - start
            if i:
                best = min(best, took)
            if took > LOSING_FACTOR * leader + LOSING_MARGIN_S:
                best = min(best, took)
                break
        seconds[n] = best
    chosen = min(seconds, key=seconds.get)
    torch.set_num_threads(chosen)
    return chosen, seconds


def pick_threads_for(model, forward: Callable[[], object], *, repeats: int = 3) -> str | None:
    """For a small model on the CPU: time ``forward()`` (a forward pass, no gradients) on 1 thread and on
    torch's default (best of ``repeats`` after a warm-up each), keep the faster, and return the sentence that
    says so (None where nothing was measured: a large model, a GPU, one core); a count the user set is kept and
    said."""
    import torch

    parameters = sum(p.numel() for p in model.parameters())
    device = next(model.parameters()).device
    if parameters >= SMALL_MODEL_PARAMETERS or device.type != "cpu":
        return None
    chosen = user_threads()
    if chosen is not None:
        torch.set_num_threads(chosen)
        return f"{chosen} CPU thread{'s' if chosen != 1 else ''} (set by the environment)"
    default = machine_threads()
    if default <= 1:
        return None
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            chosen, seconds = fastest_threads(forward, [1, default], repeats=repeats)
    finally:
        model.train(was_training)
    times = ", ".join(f"{_short(seconds[n])} on {n}" for n in sorted(seconds))
    return (
        f"{chosen} CPU thread{'s' if chosen != 1 else ''} for this {parameters / 1e6:.3g}M-parameter model, the "
        f"faster in a timed forward pass ({times}; {THREADS_ENV}=N sets it)"
    )


def _short(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def time_forward(model, forward: Callable[[], object], *, repeats: int = 2) -> float:
    """Seconds of one ``forward()`` without gradients (best of ``repeats`` after a warm-up), the model's mode kept."""
    import torch

    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            forward()
            best = float("inf")
            for _ in range(repeats):
                start = time.perf_counter()
                forward()
                if torch.cuda.is_available():
                    torch.cuda.synchronize()
                best = min(best, time.perf_counter() - start)
    finally:
        model.train(was_training)
    return best
