"""``--hf_hub_log_args``: the Hugging Face Hub uploads of a ``--model evidential`` run are those the
stock ``EvaluationTracker`` makes (the plugin's hook removed), plus the records files beside the
results file that names them. The hub is replaced by an object that records every call (no network
here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..harness.test_model import make_lm, our_tasks

pytestmark = pytest.mark.usefixtures("use_mirror")

HUB_ARGS = {
    "hub_results_org": "an-org",
    "details_repo_name": "evals",
    "push_results_to_hub": True,
    "push_samples_to_hub": True,
    "public_repo": False,
    "token": "not-a-real-token",
}


class RecordingHub:
    """Stands in for ``huggingface_hub.HfApi``: keeps each call, with the files an upload would send."""

    def __init__(self):
        self.calls = []
        self.uploaded = {}  # path in repo -> local bytes

    def create_repo(self, repo_id, **kwargs):
        self.calls.append(("create_repo", repo_id, kwargs.get("private")))

    def upload_file(self, repo_id, path_or_fileobj, path_in_repo, **kwargs):
        self.calls.append(("upload_file", repo_id, _shape(path_in_repo)))
        self.uploaded[path_in_repo] = Path(path_or_fileobj).read_bytes()

    def upload_folder(self, repo_id, folder_path, path_in_repo, **kwargs):
        files = sorted(p for p in Path(folder_path).iterdir() if p.is_file())
        self.calls.append(("upload_folder", repo_id, path_in_repo, tuple(_shape(p.name) for p in files)))
        for p in files:
            self.uploaded[f"{path_in_repo}/{p.name}"] = p.read_bytes()


def _shape(name: str) -> str:
    """A file name with its date stamp removed, so that two runs compare."""
    stem, _, suffix = Path(name).name.rpartition("_")
    return f"{Path(name).parent}/{stem}_<date>{Path(suffix).suffix}".lstrip("./")


class UnreachableForRecords(RecordingHub):
    def upload_file(self, repo_id, path_or_fileobj, path_in_repo, **kwargs):
        if Path(path_in_repo).name.startswith("records_"):
            raise ConnectionError("hub unreachable")
        super().upload_file(repo_id, path_or_fileobj, path_in_repo, **kwargs)


def _run_as_the_cli_does(lm, out: Path, monkeypatch, hub=None) -> RecordingHub:
    """The calls ``lm_eval --output_path out --log_samples --hf_hub_log_args …`` makes after evaluating."""
    import lm_eval
    from lm_eval.loggers import EvaluationTracker

    hub = hub or RecordingHub()
    monkeypatch.setattr(EvaluationTracker, "_api", staticmethod(lambda token=None: hub))
    tracker = EvaluationTracker(output_path=str(out), **HUB_ARGS)
    results = lm_eval.simple_evaluate(
        model=lm,
        tasks=["obqa_edl"],
        limit=3,
        bootstrap_iters=0,
        log_samples=True,
        task_manager=our_tasks(),
        evaluation_tracker=tracker,
    )
    samples = results.pop("samples")
    tracker.save_results_aggregated(results=results, samples=samples)
    for task_name in results["configs"]:
        tracker.save_results_samples(task_name=task_name, samples=samples[task_name])
    return hub


def test_hub_uploads_are_stock_plus_the_named_records(tiny_model, tiny_adapter, tmp_path, monkeypatch):
    from lm_eval.loggers import EvaluationTracker

    from lm_eval_evidential.records import read_records_file

    ours = _run_as_the_cli_does(make_lm(tiny_model, tiny_adapter), tmp_path / "evidential", monkeypatch)
    lm = make_lm(tiny_model, tiny_adapter)  # before unhooking: the model checks (and restores) the hooks
    hooked = EvaluationTracker.save_results_aggregated
    monkeypatch.setattr(EvaluationTracker, "save_results_aggregated", hooked.__wrapped__)
    stock = _run_as_the_cli_does(lm, tmp_path / "stock", monkeypatch)
    monkeypatch.setattr(EvaluationTracker, "save_results_aggregated", hooked)

    # The same calls, in the same order, to the same private repository, with the same file layout;
    # the hooked run adds its records file to the results push and to the samples folder.
    records_file = "records_obqa_edl_<date>.parquet"
    expected = []
    for call in stock.calls:
        if call[0] == "upload_folder":
            call = (*call[:3], tuple(sorted((*call[3], records_file))))
        expected.append(call)
        if call[0] == "upload_file":
            expected.append(("upload_file", call[1], call[2].rsplit("/", 1)[0] + "/" + records_file))
    assert ours.calls == expected
    assert all(call[1] == "an-org/evals-private" for call in ours.calls)

    # What lands on the hub is self-consistent: the results file names records that were uploaded
    # beside it, and they are the run's records.
    [results_path] = [p for p in ours.uploaded if Path(p).name.startswith("results_")]
    named = json.loads(ours.uploaded[results_path])["evidential_records"]
    folder = str(Path(results_path).parent)
    pushed = ours.uploaded[f"{folder}/{named['obqa_edl']}"]
    [local] = (tmp_path / "evidential").rglob(named["obqa_edl"])
    assert pushed == local.read_bytes()
    assert len(read_records_file(local)) == 3


def test_a_failed_records_push_warns_and_keeps_the_files(tiny_model, tiny_adapter, tmp_path, monkeypatch, caplog):
    with caplog.at_level("WARNING"):
        hub = _run_as_the_cli_does(make_lm(tiny_model, tiny_adapter), tmp_path, monkeypatch, UnreachableForRecords())
    assert "Could not push the evidential records" in caplog.text and "hub unreachable" in caplog.text
    assert any(Path(p).name.startswith("results_") for p in hub.uploaded)
    assert len(list(tmp_path.rglob("records_obqa_edl_*.parquet"))) == 1
