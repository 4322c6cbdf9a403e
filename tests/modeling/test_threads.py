"""modeling/threads.py: which models get their CPU thread count measured (the one rule, by parameter count)."""

from __future__ import annotations

import pytest
import torch

from lm_eval_evidential.modeling import threads


class _Sized(torch.nn.Module):
    """A stand-in model that reports ``n`` parameters without allocating them (only the count is read)."""

    def __init__(self, n: int):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.n = n

    def parameters(self, recurse: bool = True):
        yield self.weight.expand(self.n)


@pytest.mark.parametrize("n, measured", [(481_000, True), (134_515_008, True), (360_000_000, False)])
def test_models_up_to_smollm2_size_are_measured_larger_ones_keep_torchs_default(two_cores, n, measured):
    calls = []
    said = threads.pick_threads_for(_Sized(n), lambda: calls.append(torch.get_num_threads()))
    assert (said is not None) == measured and bool(calls) == measured
    if measured:  # a warm-up and three timed runs on each count, then the faster kept
        assert sorted(set(calls)) == [1, 2] and len(calls) == 8
        assert f"{n / 1e6:.3g}M-parameter model" in said and torch.get_num_threads() == int(said.split()[0])


def test_a_count_set_by_the_user_is_kept_at_any_size(two_cores, monkeypatch):
    monkeypatch.setenv(threads.THREADS_ENV, "1")
    assert threads.pick_threads_for(_Sized(134_515_008), lambda: None) == "1 CPU thread (set by the environment)"
    assert torch.get_num_threads() == 1


def test_a_count_that_is_clearly_losing_is_not_run_again(two_cores):
    import time

    calls = []

    def run():  # 2 threads stall (a shared machine): one run of it says enough
        calls.append(torch.get_num_threads())
        time.sleep(1.2 if calls[-1] == 2 else 0.0)

    chosen, seconds = threads.fastest_threads(run, [1, 2], repeats=3)
    assert calls == [1, 1, 1, 1, 2] and chosen == 1 and seconds[2] >= 1.2 > seconds[1]
    calls.clear()
    chosen, seconds = threads.fastest_threads(run, [2, 1], repeats=3)  # the leader first: nothing to stop
    assert calls == [2, 2, 2, 2, 1, 1, 1, 1] and chosen == 1
