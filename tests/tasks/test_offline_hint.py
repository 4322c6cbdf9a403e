"""Without network and without the offline mirror, loading a task says how to fix it."""

from __future__ import annotations

import pytest

from lm_eval_evidential.tasks import datasets as mcqa_datasets


def test_no_network_and_no_mirror_names_the_mirror_variable(monkeypatch):
    import datasets

    def offline(path, *args, **kwargs):
        # What datasets raises when the hub cannot be reached.
        raise ConnectionError(f"Couldn't reach '{path}' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.delenv(mcqa_datasets.MIRROR_ENV, raising=False)
    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(mcqa_datasets.DatasetError) as info:
        mcqa_datasets.load_split(task="obqa_edl", dataset_path="allenai/openbookqa", configs=["main"], split="test")
    message = str(info.value)
    assert "obqa_edl" in message and "Couldn't reach" in message
    assert "EVIDENTIAL_DATA_DIR" in message and "allenai/openbookqa/main/test.jsonl" in message
    assert "\n" not in message  # one line


@pytest.mark.parametrize("hub_offline", [None, "1"])
def test_the_message_names_the_bundled_samples_as_a_working_mirror(monkeypatch, hub_offline):
    """The fix is in the line: the bundled samples' folder, which does hold the missing file, and
    HF_HUB_OFFLINE=1 against the hub's ~25 s of retries unless it is already set."""
    import re

    import datasets

    from lm_eval_evidential.testing.tiny import sample_data_dir

    def offline(path, *args, **kwargs):
        raise ConnectionError(f"Couldn't reach '{path}' on the Hub (OfflineModeIsEnabled)")

    monkeypatch.delenv(mcqa_datasets.MIRROR_ENV, raising=False)
    if hub_offline:
        monkeypatch.setenv("HF_HUB_OFFLINE", hub_offline)
    else:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(mcqa_datasets.DatasetError) as info:
        mcqa_datasets.load_split(task="csqa_edl", dataset_path="tau/commonsense_qa", configs=[None], split="validation")
    message = str(info.value)
    named = re.search(r"EVIDENTIAL_DATA_DIR=(\S+?)[;\s]", message)
    assert named, message
    assert named[1] == str(sample_data_dir())
    assert (sample_data_dir() / "tau/commonsense_qa/default/validation.jsonl").is_file()  # the named folder works
    assert ("HF_HUB_OFFLINE=1" in message) == (hub_offline is None)


def test_the_mirror_is_used_without_touching_the_network(monkeypatch):
    import datasets

    from lm_eval_evidential.testing.tiny import sample_data_dir

    monkeypatch.setenv(mcqa_datasets.MIRROR_ENV, str(sample_data_dir()))
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: pytest.fail("the hub was asked despite the mirror"))
    rows = mcqa_datasets.load_split(task="obqa_edl", dataset_path="allenai/openbookqa", configs=["main"], split="test")
    assert rows and "question_stem" in rows[0]
