"""Offline means offline: under ``EVIDENTIAL_DATA_DIR`` stock tasks read the offline mirror (no hub), a split
the mirror lacks is one line naming the file and where it goes; without the variable, stock tasks are built
exactly as stock lm-eval builds them.

lm-eval's own YAML files for arc_challenge and commonsense_qa, indexed alone (the full index takes tens of
seconds), and the bundled sample mirror.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def stock_configs(tmp_path_factory) -> Path:
    import lm_eval.tasks

    stock = Path(lm_eval.tasks.__file__).parent
    folder = tmp_path_factory.mktemp("stock_configs")
    for name in ("arc/arc_easy.yaml", "arc/arc_challenge.yaml", "commonsense_qa/default.yaml"):
        shutil.copy(stock / name, folder / Path(name).name)
    return folder


def _manager(folder: Path):
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=str(folder), include_defaults=False)


def _no_hub(monkeypatch):
    import datasets

    def offline(*args, **kwargs):
        raise AssertionError("the hub was asked")

    monkeypatch.setattr(datasets, "load_dataset", offline)


def test_stock_tasks_read_the_mirror_without_asking_the_hub(stock_configs, use_mirror, monkeypatch):
    import json

    _no_hub(monkeypatch)
    tasks = _manager(stock_configs).load(["arc_challenge", "commonsense_qa"])["tasks"]
    arc = tasks["arc_challenge"]
    rows = [json.loads(line) for line in (use_mirror / "allenai/ai2_arc/ARC-Challenge/test.jsonl").open()]
    assert [d["question"] for d in arc.test_docs()] == [r["question"] for r in rows]
    assert arc.doc_to_choice(arc.test_docs()[0]) == rows[0]["choices"]["text"]
    csqa = tasks["commonsense_qa"]
    assert len(csqa.validation_docs()) == 100 and csqa.config.task == "commonsense_qa"


def test_a_split_the_mirror_lacks_is_one_line_naming_the_file(stock_configs, use_mirror, monkeypatch):
    from lm_eval_evidential.errors import MirrorFileNotFound

    _no_hub(monkeypatch)
    (use_mirror / "allenai/ai2_arc/ARC-Easy/test.jsonl").rename(use_mirror / "moved.jsonl")
    try:
        with pytest.raises(MirrorFileNotFound) as info:
            _manager(stock_configs).load(["arc_easy"])
    finally:
        (use_mirror / "moved.jsonl").rename(use_mirror / "allenai/ai2_arc/ARC-Easy/test.jsonl")
    message = str(info.value)
    assert "'arc_easy'" in message and "allenai/ai2_arc/ARC-Easy/test.jsonl" in message and "\n" not in message


def test_without_the_variable_stock_tasks_are_built_as_stock_lm_eval_builds_them(stock_configs, monkeypatch):
    from lm_eval.api.task import ConfigurableTask

    monkeypatch.delenv("EVIDENTIAL_DATA_DIR", raising=False)
    built = []
    monkeypatch.setattr(ConfigurableTask, "download", lambda self, *a, **k: built.append(type(self)))
    manager = _manager(stock_configs)
    with pytest.raises(Exception):  # noqa: B017  (no dataset: whatever stock lm-eval raises on it)
        manager.load(["arc_challenge"])
    assert built == [ConfigurableTask]  # lm-eval's own class, its own download
