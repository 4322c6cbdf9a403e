"""Shared fixtures: a tiny Llama model, a LoRA adapter and an offline dataset mirror, built locally."""

from __future__ import annotations

import logging
import os
import shutil
import sys
from pathlib import Path

import pytest

# One CPU thread for every model the suite loads, in this process and the commands it starts (-n 2 on 2 cores
# wants no more): --model evidential and the trainer would otherwise time 1 thread against torch's default at each
# load (modeling/threads.py), about half a second a tiny model under load, hundreds of times. The tests of that
# timing (tests/harness/test_model_threads.py, tests/modeling/test_threads.py) unset it.
os.environ.setdefault("LM_EVAL_EVIDENTIAL_THREADS", "1")


class _CurrentStderr:
    """A stream that writes to whatever ``sys.stderr`` is now (pytest swaps it for each test's capture)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


_CURRENT_STDERR = _CurrentStderr()


def _follow_stderr() -> None:
    """Point every logging handler whose stream is closed (an ended test's capture) at the current stderr.

    lm_eval's ``setup_logging`` adds, once per process, a ``StreamHandler()`` on the ``sys.stderr`` of
    that moment — in a test, that test's capture, closed when the test ends. Every later test in the
    same process (an xdist worker runs hundreds) would then log into a closed file ("--- Logging
    error ---" on stderr). A real process has one stderr for its whole life; this restores that.
    """
    loggers = [logging.getLogger()] + [
        lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger)
    ]
    for lg in loggers:
        for handler in lg.handlers:
            if type(handler) is logging.StreamHandler and getattr(handler.stream, "closed", False):
                handler.stream = _CURRENT_STDERR  # not setStream(): it would flush the closed stream


@pytest.fixture
def two_cores(monkeypatch):
    """A machine of 2 cores on which no thread count is set (the suite's LM_EVAL_EVIDENTIAL_THREADS=1 unset): what
    modeling/threads.py times 1 thread against; torch's count put back after."""
    import torch

    from lm_eval_evidential.modeling import threads

    for name in (threads.THREADS_ENV, "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(threads, "machine_threads", lambda: 2)
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def _handlers_follow_stderr():
    _follow_stderr()
    yield
    _follow_stderr()


@pytest.fixture(autouse=True)
def _lm_eval_logger_restored():
    """Put the ``lm_eval`` logger back as it was after each test.

    A test that runs lm_eval's CLI in this process calls its ``setup_logging``, which sets
    ``propagate = False`` on ``lm_eval`` for the rest of the process. Under xdist, every later test in
    that worker that reads ``lm_eval.evidential``'s records through ``caplog`` (a handler on the root
    logger) then sees none, and fails or passes depending on how the tests were scheduled.
    """
    logger = logging.getLogger("lm_eval")
    saved = logger.propagate, logger.level, list(logger.handlers)
    yield
    logger.propagate, logger.level, logger.handlers[:] = saved[0], saved[1], saved[2]


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    from lm_eval_evidential.testing.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


@pytest.fixture(scope="session")
def tiny_adapter(tiny_model, tmp_path_factory) -> Path:
    from lm_eval_evidential.testing.tiny import build_lora_adapter

    return build_lora_adapter(tiny_model, tmp_path_factory.mktemp("tiny") / "adapter", seed=1)


@pytest.fixture(scope="session")
def mirror(tmp_path_factory) -> Path:
    """A copy of the bundled sample mirror that tests may extend with edge-case files."""
    from lm_eval_evidential.testing.tiny import sample_data_dir

    root = tmp_path_factory.mktemp("mirror") / "data"
    shutil.copytree(sample_data_dir(), root)
    return root


@pytest.fixture
def use_mirror(mirror, monkeypatch) -> Path:
    monkeypatch.setenv("EVIDENTIAL_DATA_DIR", str(mirror))
    return mirror


@pytest.fixture(scope="session")
def tiny_family(tiny_model, tmp_path_factory):
    """``tiny_family(family, tied=False, padding=0)``: a tiny random model of that architecture
    family (``testing.tiny.FAMILIES``) sharing ``tiny_model``'s tokenizer, built once per session.
    ``padding``: output rows beyond the tokenizer (Qwen2.5 ships 271 of them)."""
    from lm_eval_evidential.testing.tiny import build_tiny_model

    built: dict[tuple, Path] = {}
    root = tmp_path_factory.mktemp("families")

    def build(family: str, tied: bool = False, padding: int = 0) -> Path:
        key = (family, tied, padding)
        if key not in built:
            from transformers import AutoTokenizer

            vocab = len(AutoTokenizer.from_pretrained(tiny_model)) + padding
            built[key] = build_tiny_model(
                root / f"{family}-{'tied' if tied else 'untied'}-{padding}",
                family=family,
                tie_word_embeddings=tied,
                model_vocab_size=vocab,
                hidden_size=32,
                num_layers=2,
                num_heads=4,
                num_kv_heads=2,
                tokenizer_from=tiny_model,
            )
        return built[key]

    return build
