"""Shared by the training tests: the loaded tasks (training splits included) and fast settings."""

from __future__ import annotations

import pytest

# Settings for runs of a few steps on the tiny model: big steps, one-step logs, no mid-run checkpoints.
FAST = dict(learning_rate=1e-2, warmup_steps=0, logging_steps=1, save_steps=1000, max_train_docs=4, num_noises=5)


@pytest.fixture(scope="session")
def tasks():
    from lm_eval.tasks import TaskManager

    from lm_eval_evidential.tasks import tasks_dir
    from lm_eval_evidential.testing.tiny import sample_data_dir

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EVIDENTIAL_DATA_DIR", str(sample_data_dir()))
        manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata={"load_all_splits": True})
        return manager.load(["obqa_edl", "csqa_edl"])["tasks"]
