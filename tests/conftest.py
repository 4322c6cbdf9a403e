"""Shared fixtures: a tiny Llama model, a LoRA adapter and an offline dataset mirror, built locally."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


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
