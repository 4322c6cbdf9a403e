"""ID-vs-OOD pair tasks (obqa_edl_vs_arc_c_edl, …): the two tasks' docs in one task, detection scored over them,
with the K check done when its dataset is built, before any forward pass."""

from __future__ import annotations

import logging
from pathlib import Path

from lm_eval_evidential.tasks.evidential_task import EvidentialMCQATask

logger = logging.getLogger(__name__)


class OODPairTask(EvidentialMCQATask):
    """ID-vs-OOD detection over an ID task's and an OOD task's docs (ID = positive = 1).

    ``metadata``: ``id_task``, ``ood_task``, ``k_policy`` (assert | restrict | report;
    overridable with ``--metadata '{"k_policy": "report"}'``) and ``scores``. The docs are
    the two tasks' own docs with their own prompts, alternating ID and OOD, so a run that also
    evaluates the single tasks forwards each question once, and ``--limit N`` takes N per side
    (``--limit f < 1``: that fraction of each side).
    Few-shot examples come from the ID task.
    """

    WRITES_RECORDS = False  # its questions are the two tasks' questions: their records hold them

    def __init__(self, config: dict | None = None, **kwargs) -> None:
        super().__init__(config, **kwargs)
        # For lm_eval's loggers (W&B reads the per-sample metrics from metric_list).
        self._config.metric_list = [
            {"metric": name, "aggregation": "sum", "higher_is_better": None} for name in ("n_id", "n_ood")
        ]

    def _resolve_tasks(self):
        from lm_eval.tasks import TaskManager

        from lm_eval_evidential.tasks import tasks_dir

        meta = self.config.metadata or {}
        paths = [str(tasks_dir())]
        source = meta.get("config_source")
        if source and source != "inline" and Path(source).parent != tasks_dir():
            paths.append(str(Path(source).parent))  # a user's pair finds the user's tasks beside it
        names = [meta["id_task"], meta["ood_task"]]
        # The pair's permutations are its two tasks' (each shows its questions in those orders).
        shared = {key: meta[key] for key in ("permutations", "permutation_seed") if key in meta} or None
        manager = TaskManager(include_path=paths, include_defaults=False, metadata=shared)
        if not all(manager.match_tasks([name]) for name in names):
            # a lettered view of a stock task (hellaswag_edl) needs lm_eval's own tasks in the index
            manager = TaskManager(include_path=paths[1:] or None, metadata=shared)
        return manager.load(names)["tasks"], names

    def download(self, dataset_kwargs: dict | None = None, **kwargs) -> None:
        import datasets
        import numpy as np

        from lm_eval_evidential.metrics.cardinality import check_cardinality
        from lm_eval_evidential.tasks import tasks_dir
        from lm_eval_evidential.tasks.distractors import control_tasks

        meta = self.config.metadata or {}
        loaded, (id_name, ood_name) = self._resolve_tasks()
        self._id_task = loaded[id_name]
        id_docs, ood_docs = list(loaded[id_name].eval_docs), list(loaded[ood_name].eval_docs)
        check = check_cardinality(
            np.array([d["k"] for d in id_docs]),
            np.array([d["k"] for d in ood_docs]),
            policy=str(meta.get("k_policy", "assert")),
            id_name=id_name,
            ood_name=ood_name,
            controls=[c["task"] for c in control_tasks(tasks_dir()).get(ood_name, [])],
        )
        self.k_check = check
        sides = [
            [
                {**d, "side": side, "origin": f"{name}/{d['doc_id']}", "answer_tokens": self.answer_tokens}
                for d, kept in zip(docs, keep)
                if kept
            ]
            for side, docs, keep, name in (
                (1, id_docs, check.keep_id, id_name),
                (0, ood_docs, check.keep_ood, ood_name),
            )
        ]
        pair_docs = [doc for pair in _alternate(*sides) for doc in pair]
        questions: dict[str, int] = {}
        for i, doc in enumerate(pair_docs):
            doc["doc_id"] = i
            if "question_id" in doc:  # permuted: the orders of one question share its pair-wide number
                doc["question_id"] = questions.setdefault(doc["origin"], len(questions))
        self._chosen = None
        self._sides = [doc["side"] for doc in pair_docs]
        self._questions = [doc["origin"] for doc in pair_docs]
        self._data_source = {
            "id": loaded[id_name].fingerprint["data_source"],
            "ood": loaded[ood_name].fingerprint["data_source"],
        }
        self.dataset = datasets.DatasetDict({self.eval_split: datasets.Dataset.from_list(pair_docs)})

    def fewshot_pool(self) -> list[dict]:
        return self._id_task.fewshot_pool()

    # -- --limit N: N per side ---------------------------------------------------------------
    def request_limit(self, limit: float | None) -> None:
        """Take ``--limit`` as the user wrote it, before lm_eval turns a fraction into a count.

        lm_eval passes ``ceil(f * number of docs)`` to :meth:`build_all_requests` for ``--limit f``
        with ``f < 1``: a fraction of the two sides together, which :meth:`build_all_requests`
        would then take per side. The ``lm_eval.evaluator.evaluate`` hook calls this first, so that
        ``--limit 0.5`` takes half of each side. Consumed by the next :meth:`build_all_requests`.
        """
        self._requested_limit = limit

    def build_all_requests(self, *, limit: int | None = None, **kwargs) -> None:
        requested, self._requested_limit = getattr(self, "_requested_limit", None), None
        self._chosen = None
        if limit is not None:
            sizes = {side: self._sides.count(side) for side in (1, 0)}
            if requested is not None and 0 < requested < 1:
                # lm_eval's count, ceil(f * all docs), shared between the sides in proportion.
                n_id = min(sizes[1], round(int(limit) * sizes[1] / len(self._sides)))
                per_side, how = {1: n_id, 0: int(limit) - n_id}, f"{requested:g} of each side"
            else:
                per_side, how = {1: int(limit), 0: int(limit)}, f"{int(limit)} per side"
            # Questions are counted, so that a permuted pair keeps every order of each question it takes.
            taken, chosen, seen = {0: 0, 1: 0}, [], set()
            for doc_id, (side, question) in enumerate(zip(self._sides, self._questions)):
                if question not in seen and taken[side] < per_side[side]:
                    seen.add(question)
                    taken[side] += 1
                if question in seen:
                    chosen.append(doc_id)
            self._chosen = frozenset(chosen)
            logger.warning(
                "%s: --limit %s on an ID/OOD pair takes %s: %d ID and %d OOD docs",
                self.config.task,
                f"{requested:g}" if requested is not None else limit,
                how,
                taken[1],
                taken[0],
            )
            limit = max(chosen, default=-1) + 1  # the leading docs that hold them (what a request cache slices)
        super().build_all_requests(limit=limit, **kwargs)
        if self._chosen is not None:
            self._instances = [instance for instance in self._instances if instance.doc_id in self._chosen]

    def doc_iterator(self, *, rank: int = 0, limit: int | None = None, world_size: int = 1, samples=None):
        chosen = getattr(self, "_chosen", None)
        if limit is None or chosen is None or samples:
            return super().doc_iterator(rank=rank, limit=limit, world_size=world_size, samples=samples)
        from lm_eval import utils

        docs = ((doc_id, doc) for doc_id, doc in enumerate(self.eval_docs) if doc_id in chosen)
        return utils.create_iterator(docs, rank=int(rank), limit=None, world_size=int(world_size))

    # -- metrics ------------------------------------------------------------------------------
    @property
    def scores(self) -> list[str]:
        from lm_eval_evidential.metrics.scores import OOD_DEFAULT_SCORES, check_score_names

        return check_score_names((self.config.metadata or {}).get("scores") or OOD_DEFAULT_SCORES)

    def process_results(self, doc: dict, results) -> dict:
        return {"n_id": doc["side"], "n_ood": 1 - doc["side"]}

    def aggregation(self) -> dict:
        return {"n_id": sum, "n_ood": sum}

    def higher_is_better(self) -> dict:
        return {"n_id": None, "n_ood": None}  # counts: neither direction is better

    def evidential_metrics(self, records) -> dict[str, tuple[float, bool | None]]:
        """AUROC, AUPR-In, AUPR-Out and FPR@95 per score, by the audit's own ``ood_rows`` (``fpr95_<score>``: the
        share of OOD questions accepted at 95 % ID recall, as ``ood``'s table; lower is better); ``k_matched`` (1/0).

        Permuted (``metadata.permutations``): those pool every (question, order), and each score adds the
        spread of its AUROC over the orders (order s of the ID side against order s of the OOD side):
        ``auroc_order_min_<score>``, ``auroc_order_median_<score>``, ``auroc_order_max_<score>`` and
        ``auroc_order_range_<score>`` (max - min: what reordering alone moves), beside
        ``auroc_order_averaged_<score>`` (of the score averaged over each question's orders), by the
        order audit's own :func:`~lm_eval_evidential.audits.permutations.permutation_ood_rows`
        (``lm-eval-evidential permutations --id --ood`` gives the same numbers).
        """
        import numpy as np

        from lm_eval_evidential.audits.ood import ood_rows, subset_records
        from lm_eval_evidential.metrics.scores import computable_scores
        from lm_eval_evidential.records.orders import pool_orders

        side = np.array([self._sides[int(d)] for d in records.doc_id], dtype=bool)
        scores = computable_scores(self.scores, records.has_alpha, records.has_members)[0]
        pooled = pool_orders(records)  # permuted: every (question, order) one example, as lm-eval's docs
        rows = ood_rows(
            subset_records(pooled, side), subset_records(pooled, ~side), scores=scores, k_policy="report", n_boot=0
        )
        metrics: dict[str, tuple[float, bool | None]] = {}
        for row in rows:
            metrics[f"auroc_{row['score']}"] = (row["auroc"], True)
            metrics[f"aupr_in_{row['score']}"] = (row["aupr_in"], True)
            metrics[f"aupr_out_{row['score']}"] = (row["aupr_out"], True)
            metrics[f"fpr95_{row['score']}"] = (row["fpr95"], False)
        if records.order is not None:  # permuted: how far reordering alone moves each score's AUROC
            from lm_eval_evidential.audits.permutations import permutation_ood_rows

            by_order = permutation_ood_rows(
                subset_records(records, side), subset_records(records, ~side), scores=scores, k_policy="report"
            )
            for row in by_order:
                for stat in ("min", "median", "max"):
                    metrics[f"auroc_order_{stat}_{row['score']}"] = (row[f"auroc_{stat}"], True)
                metrics[f"auroc_order_range_{row['score']}"] = (row["auroc_range"], False)
                metrics[f"auroc_order_averaged_{row['score']}"] = (row["auroc_order_averaged"], True)
        metrics["k_matched"] = (float(self.k_check.matched), None)
        return metrics


def _alternate(first: list, second: list) -> list[list]:
    """[[a0, b0], [a1, b1], …, then the longer list's rest]: ID and OOD docs alternate."""
    out = [[a, b] for a, b in zip(first, second)]
    n = min(len(first), len(second))
    out += [[d] for d in first[n:]] + [[d] for d in second[n:]]
    return out
