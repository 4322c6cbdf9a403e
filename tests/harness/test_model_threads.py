"""harness/model.py: ``--model evidential`` picks its CPU thread count at load as training does (a small model on the
CPU timed on 1 thread and on torch's default, the faster kept and said); ``threads=N`` sets it; bad values refused."""

from __future__ import annotations

import logging

import pytest
import torch

from lm_eval_evidential.errors import EvidentialInputError
from lm_eval_evidential.modeling import threads

from .test_model import make_lm


def _forward_threads(monkeypatch) -> list[tuple[int, int]]:
    """(torch's thread count, rows) of every forward pass the model's loading times from now on."""
    from lm_eval_evidential.harness import model

    seen, real = [], model.last_position_logits

    def timed(net, input_ids, **kwargs):
        seen.append((torch.get_num_threads(), input_ids.shape[0]))
        return real(net, input_ids, **kwargs)

    monkeypatch.setattr(model, "last_position_logits", timed)
    return seen


def test_a_small_model_is_timed_on_one_thread_and_the_default_and_runs_on_the_faster(
    tiny_model, tiny_adapter, two_cores, monkeypatch, caplog
):
    seen = _forward_threads(monkeypatch)
    with caplog.at_level(logging.INFO, logger="lm_eval.evidential"):
        make_lm(tiny_model, tiny_adapter, batch_size=3)
    # a warm-up and one timed pass on each count (a count that loses by far stops at its warm-up), a batch of the
    # model's batch size (up to 4)
    counts = [n for n, _ in seen]
    assert counts[:2] == [1, 1] and counts[2:] in ([2], [2, 2]) and {rows for _, rows in seen} == {3}
    said = [r.getMessage() for r in caplog.records if "CPU thread" in r.getMessage()]
    assert len(said) == 1 and "the faster in a timed forward pass" in said[0]
    assert torch.get_num_threads() == int(said[0].split()[0])


def test_threads_in_model_args_sets_the_count_without_timing(tiny_model, two_cores, monkeypatch, caplog):
    seen = _forward_threads(monkeypatch)
    torch.set_num_threads(2)
    with caplog.at_level(logging.INFO, logger="lm_eval.evidential"):
        make_lm(tiny_model, threads=1)
    assert seen == [] and torch.get_num_threads() == 1
    assert any("threads=1 in --model_args" in r.getMessage() for r in caplog.records)


def test_a_count_set_in_the_environment_is_kept(tiny_model, two_cores, monkeypatch):
    seen = _forward_threads(monkeypatch)
    monkeypatch.setenv(threads.THREADS_ENV, "1")
    torch.set_num_threads(2)
    make_lm(tiny_model)
    assert seen == [] and torch.get_num_threads() == 1


@pytest.mark.parametrize("value", [1.0, "1"])
def test_a_whole_thread_count_given_as_a_float_or_text_is_taken_as_an_int(tiny_model, two_cores, value):
    # as the scoring's model_args are (model_args.model_arg, one home for both)
    torch.set_num_threads(2)
    make_lm(tiny_model, threads=value)
    assert torch.get_num_threads() == 1


@pytest.mark.parametrize("value", [0, -1, "two", 1.5, True])
def test_a_bad_thread_count_is_refused_before_the_weights_load(tiny_model, value):
    with pytest.raises(
        EvidentialInputError, match=r"threads=.* must be a whole number of threads >= 1.*e\.g\. threads=1"
    ):
        make_lm(tiny_model, threads=value)


@pytest.mark.usefixtures("use_mirror")
def test_the_thread_count_does_not_move_the_records(tiny_model, tiny_adapter, two_cores):
    # what a timed pick changes is the thread count only: the records are the same on 1 and on 2 threads
    from .test_model import evaluate

    records = [
        evaluate(make_lm(tiny_model, tiny_adapter, threads=n), ["csqa_edl"], limit=8)[1]["csqa_edl"] for n in (1, 2)
    ]
    assert list(records[0]) == list(records[1])
