"""The distractor-removal control: an OOD task brought to the ID task's K by removing wrong options.

Vacuity depends on K, so an OOD set must be compared at the ID set's K. ``restrict`` drops the
OOD questions whose K differs, and csqa4_edl drops option E *and every question answered E* (a
selection by gold label). A ``KMatchedControlTask`` keeps every question that has at least the
ID task's K options: it removes wrong options chosen by a seeded hash of the question id
(:func:`lm_eval_evidential.tasks.distractors.remove_distractors`), keeps the gold, re-letters the
kept options in their original order, and excludes (and counts) questions with fewer options.

YAML ``metadata``: ``control_of`` (the task it controls), ``control`` (one line for reports),
``k_from`` (the ID task; the control takes its single K) or ``target_k`` (an explicit K), and
``removal_seed`` (default 0). The summary (counts, exclusions by reason, rule) is logged when
the dataset is built, stored in the records' metadata under ``control`` and shown in the results
JSON under ``configs.<task>.metadata.control_summary``.
"""

from __future__ import annotations

import logging

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.tasks import datasets as mcqa_datasets
from lm_eval_evidential.tasks.distractors import REMOVAL_SEED, TARGET_K, DistractorRemoval
from lm_eval_evidential.tasks.evidential_task import EvidentialMCQATask

logger = logging.getLogger(__name__)


class KMatchedControlTask(EvidentialMCQATask):
    """An MCQA task whose questions are brought to one target K by removing wrong options."""

    control: dict | None = None

    def target_k(self) -> int:
        """``metadata.target_k`` if set, else the single K of the ``metadata.k_from`` task's docs."""
        task, meta = self.config.task, self.config.metadata or {}
        if meta.get("target_k") is not None:
            return mcqa_datasets.metadata_value(task, "target_k", meta["target_k"], TARGET_K)
        id_task = meta.get("k_from")
        if not id_task:
            raise mcqa_datasets.DatasetError(
                f"task {task!r}: a distractor-removal control needs metadata.k_from (the ID task whose K it matches, "
                "e.g. obqa_edl) or metadata.target_k in its YAML"
            )
        from lm_eval.tasks import TaskManager

        from lm_eval_evidential.metrics.cardinality import format_k, k_histogram
        from lm_eval_evidential.tasks import tasks_dir

        manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False)
        if id_task not in manager.all_tasks:
            raise mcqa_datasets.DatasetError(
                f"task {task!r}: metadata.k_from names {id_task!r}, which is not one of this package's tasks; "
                "name an EDL task (e.g. obqa_edl) or set metadata.target_k to the ID task's K"
            )
        docs = manager.load([id_task])["tasks"][id_task].eval_docs
        hist = k_histogram([d["k"] for d in docs])
        if len(hist) != 1:
            raise mcqa_datasets.DatasetError(
                f"task {task!r}: k_from task {id_task!r} has mixed K {format_k(hist)} (K: questions), so there is no "
                "single K to match; use an ID task with one K or set metadata.target_k"
            )
        return next(iter(hist))

    def download(self, dataset_kwargs: dict | None = None, **kwargs) -> None:
        task, meta = self.config.task, self.config.metadata or {}
        source = self._convert.convert if isinstance(self._convert, DistractorRemoval) else self._convert
        if source is None:
            raise InvalidValueError(f"task {task!r}: process_docs (a converter) is missing from its YAML")
        seed = mcqa_datasets.metadata_value(task, "removal_seed", meta.get("removal_seed", 0), REMOVAL_SEED)
        removal = DistractorRemoval(source, k=self.target_k(), seed=seed)
        self._convert = removal
        super().download(dataset_kwargs, **kwargs)
        self.control = {"of": meta.get("control_of"), "k_from": meta.get("k_from"), **removal.summary()}
        # Splits loaded later (few-shot examples) get the same removal, counted apart from the evaluated one.
        self._convert = DistractorRemoval(source, k=removal.k, seed=seed)
        c = self.control
        k_source = f"{c['k_from']}'s K" if c["k_from"] and meta.get("target_k") is None else "metadata.target_k"
        excluded = "; ".join(f"{n} ({reason})" for reason, n in c["excluded"].items()) or "none"
        logger.info(
            "%s: %d of %d %s questions kept at K=%d (%s); %d had wrong options removed (seed %d); excluded: %s",
            task,
            c["n_kept"],
            c["n_questions"],
            c["of"] or "source",
            c["target_k"],
            k_source,
            c["n_reduced"],
            c["seed"],
            excluded,
        )

    @property
    def fingerprint(self) -> dict:
        return {**super().fingerprint, "control": self.control}

    def dump_config(self) -> dict:
        """The harness's task config, plus the control's summary (so results JSON shows the counts too)."""
        config = dict(super().dump_config())
        config["metadata"] = {**(config.get("metadata") or {}), "control_summary": self.control}
        return config
