"""Records pushed to the Hugging Face hub beside the results file the harness pushed (``push_results_to_hub``)."""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


def push_run_records(tracker, written: dict) -> None:
    """Upload the records files beside the results file the harness just pushed (``push_results_to_hub``).

    Same repository and folder as the harness's ``results_<date_id>.json`` (``<model_name>/``), so
    the ``evidential_records`` names in it resolve on the hub as they do on disk. Like the harness's
    own push, a failure is a warning: the files are on disk either way.
    """
    repo_id = tracker.results_repo if tracker.public_repo else tracker.results_repo_private
    model_name = str(tracker.general_config_tracker.model_name)
    try:
        for path in written.values():
            tracker.api.upload_file(
                repo_id=repo_id,
                path_or_fileobj=str(path),
                path_in_repo=f"{model_name}/{path.name}",
                repo_type="dataset",
                commit_message=f"Adding evidential records for {model_name}",
            )
        logger.info("pushed %d evidential records file(s) to %s", len(written), repo_id)
    except Exception as error:  # noqa: BLE001 - the harness treats a failed push the same way
        logger.warning("Could not push the evidential records to the Hugging Face Hub: %r", error)
