"""The EDL task classes: ordinary ConfigurableTasks with evidential metrics and records.

``EvidentialMCQATask`` (obqa_edl, arc_c_edl, …) scores one MCQA dataset; ``OODPairTask``
(obqa_edl_vs_arc_c_edl, …) scores ID-vs-OOD detection over the two tasks' docs, with the K
check done when its dataset is built, before any forward pass.

Both work with any harness model. With ``--model evidential`` each loglikelihood response
carries a third element, the per-class evidence payload; with other models (``--model hf``)
only log-likelihoods exist, and the records are the ``softmax`` method over them (softmax
of answer log-likelihoods equals softmax of the answer logits: they differ by a constant).
"""

from __future__ import annotations

import ast
import logging
import math
from collections.abc import Sequence
from typing import Any

from lm_eval.api.metrics import mean
from lm_eval.api.task import ConfigurableTask

from lm_eval_evidential.harness import datasets as mcqa_datasets
from lm_eval_evidential.records import Records, make_record, record_probs

logger = logging.getLogger(__name__)

# Records of the evaluated tasks, by task name, collected where the harness aggregates
# (rank 0, after the data-parallel gather); the results hook writes and removes them.
_COLLECTED: dict[str, Records] = {}


def pop_collected(tasks: Sequence[str]) -> dict[str, Records]:
    return {t: _COLLECTED.pop(t) for t in list(tasks) if t in _COLLECTED}


def _meta_from_payload(payload: dict | None) -> dict:
    if payload is None:
        return {"method": "softmax", "prior_weight": 1.0, "model": "non-evidential (log-likelihoods)"}
    return {k: v for k, v in payload.items() if k not in ("logit", "alpha")}


def record_from_results(task: str, doc: dict, results: Sequence[Any]) -> tuple[dict, dict]:
    """(record, meta) for one doc from the harness's per-choice responses."""
    k = doc["k"]
    if len(results) != k:
        raise ValueError(f"task {task!r} doc {doc['doc_id']}: {len(results)} responses for K={k} options")
    payloads = [r[2] if len(r) > 2 else None for r in results]
    if payloads[0] is None:
        logits, alpha, meta = [float(r[0]) for r in results], None, _meta_from_payload(None)
    else:
        logits = [p["logit"] for p in payloads]
        alpha = None if payloads[0]["alpha"] is None else [p["alpha"] for p in payloads]
        meta = _meta_from_payload(payloads[0])
    bad = [x for x in logits if not math.isfinite(x)]
    if bad:
        raise ValueError(
            f"task {task!r} doc {doc['doc_id']} ({doc.get('source_id')}): non-finite answer logit {bad[0]!r}; "
            "this is usually float16 overflow — run with dtype=bfloat16 or dtype=float32"
        )
    record = make_record(
        task=task, doc_id=doc["doc_id"], labels=doc["letters"], gold=doc["gold"],
        logits=logits, alpha=alpha, prior_weight=float(meta.get("prior_weight", 1.0)),
    )  # fmt: skip
    return record, meta


def _records_from_items(task: str, items: Sequence[dict]) -> Records:
    metas = {tuple(sorted((k, str(v)) for k, v in it["meta"].items())) for it in items}
    if len(metas) > 1:
        raise ValueError(f"task {task!r}: records produced with different model settings in one run: {metas}")
    meta = items[0]["meta"] if items else {}
    return Records.from_rows([it["record"] for it in items], task=task, meta=meta)


class EvidentialMCQATask(ConfigurableTask):
    """An MCQA task scored as a K-class evidential classifier (K per question).

    YAML: ``process_docs`` names a converter from :mod:`lm_eval_evidential.harness.datasets`,
    ``metadata.answer_tokens`` the declared answer-token set, ``metadata.dataset_configs``
    the hub configs to concatenate (default: ``dataset_name``).
    """

    def __init__(self, config: dict | None = None, **kwargs) -> None:
        config = dict(config or {})
        config.pop("class", None)
        # The converter runs once in download() with the task's metadata (answer tokens),
        # not per call of test_docs(), so it is taken out of the harness's hands here.
        self._convert = config.pop("process_docs", None)
        super().__init__(config=config, **kwargs)

    # -- data ---------------------------------------------------------------------------
    @property
    def answer_tokens(self) -> list[str]:
        tokens = (self.config.metadata or {}).get("answer_tokens")
        if not tokens:
            raise ValueError(f"task {self.config.task!r}: metadata.answer_tokens is missing from its YAML")
        return list(tokens)

    def download(self, dataset_kwargs: dict | None = None, **kwargs) -> None:
        import datasets

        meta = self.config.metadata or {}
        configs = meta.get("dataset_configs") or [self.config.dataset_name]
        splits = {s for s in (self.config.training_split, self.config.validation_split, self.config.test_split) if s}
        if self._convert is None:
            raise ValueError(f"task {self.config.task!r}: process_docs (a converter) is missing from its YAML")
        self.dataset = datasets.DatasetDict()
        for split in sorted(splits):
            if split != self.eval_split and not meta.get("load_all_splits", False):
                continue  # declared for training; loaded on demand by lm_eval_evidential.training.trainer
            rows = mcqa_datasets.load_split(
                task=self.config.task, dataset_path=self.config.dataset_path, configs=configs, split=split
            )
            docs = mcqa_datasets.normalise(rows, self._convert, task=self.config.task, answer_tokens=self.answer_tokens)
            if not docs:
                raise mcqa_datasets.DatasetError(f"task {self.config.task!r}: no usable docs in split {split!r}")
            self.dataset[split] = datasets.Dataset.from_list(docs)

    @property
    def eval_split(self) -> str:
        return self.config.test_split or self.config.validation_split

    def has_training_docs(self) -> bool:
        return self.config.training_split in getattr(self, "dataset", {})

    def has_validation_docs(self) -> bool:
        return self.config.validation_split in getattr(self, "dataset", {})

    # -- prompts --------------------------------------------------------------------------
    # lm_eval compiles a task's Jinja templates anew for every doc (utils.apply_template); the
    # compiled templates are cached here (same environment, same output). This was 9% of an
    # end-to-end run in benchmarks/bench_throughput.py at the 128k vocabulary.
    def _template(self, source: str):
        from lm_eval.utils import env

        cache = self.__dict__.setdefault("_templates", {})
        if source not in cache:
            cache[source] = env.from_string(source)
        return cache[source]

    def _plain_template(self, explicit, configured) -> str | None:
        if explicit is None and self.prompt is None and isinstance(configured, str) and configured not in self.features:
            return configured
        return None

    def doc_to_text(self, doc, doc_to_text=None):
        source = self._plain_template(doc_to_text, self.config.doc_to_text)
        if source is None:
            return super().doc_to_text(doc, doc_to_text)
        text = self._template(source).render(**doc)
        return ast.literal_eval(text) if text.isdigit() and self.config.doc_to_choice is not None else text

    def doc_to_choice(self, doc, doc_to_choice=None):
        source = self._plain_template(doc_to_choice, self.config.doc_to_choice)
        if source is None:
            return super().doc_to_choice(doc, doc_to_choice)
        return ast.literal_eval(self._template(source).render(**doc))

    def doc_to_target(self, doc, doc_to_target=None):
        source = self._plain_template(doc_to_target, self.config.doc_to_target)
        if source is None:
            return super().doc_to_target(doc, doc_to_target)
        target = self._template(source).render(**doc)
        if target.isdigit() and self.config.doc_to_choice is not None:
            return ast.literal_eval(target)
        return super().doc_to_target(doc, doc_to_target)  # lists and strings: the harness's own rules

    # -- scoring --------------------------------------------------------------------------
    @property
    def fingerprint(self) -> dict:
        """What defines this task's records besides the model: prompt template, answer set, version."""
        if getattr(self, "_fingerprint", None) is not None:
            return self._fingerprint
        import hashlib

        template = self.config.doc_to_text if isinstance(self.config.doc_to_text, str) else repr(self.config.doc_to_text)
        self._fingerprint = {
            "prompt_template_sha256": hashlib.sha256(template.encode()).hexdigest()[:16],
            "answer_tokens": self.answer_tokens,
            "task_version": self.VERSION,
        }
        return self._fingerprint

    def _item(self, doc: dict, results) -> dict:
        record, meta = record_from_results(self.config.task, doc, results)
        return {"record": record, "meta": {**meta, **self.fingerprint}}

    def process_results(self, doc: dict, results) -> dict:
        item = self._item(doc, results)
        record = item["record"]
        probs, gold = record_probs(record), record["gold"]
        return {
            "acc": float(record["correct"]),
            "ece": item,
            "adaptive_ece": item,
            "nll": -math.log(max(probs[gold], 1e-300)),
            "brier": sum((p - (i == gold)) ** 2 for i, p in enumerate(probs)),
            "vacuity": record["vacuity"],
        }

    def _ece(self, items: list[dict]) -> float:
        import numpy as np

        from lm_eval_evidential.metrics.calibration import ece

        records = _records_from_items(self.config.task, items)
        # ECE needs every example's confidence, so its aggregation sees the full records:
        # this is where (rank 0, after gathering) the run's records are collected for the hook.
        _COLLECTED[self.config.task] = records
        return float(ece(records.max_prob, records.correct.astype(np.float64), n_bins=15))

    def _adaptive_ece(self, items: list[dict]) -> float:
        import numpy as np

        from lm_eval_evidential.metrics.calibration import adaptive_ece

        conf = np.array([it["record"]["max_prob"] for it in items])
        correct = np.array([float(it["record"]["correct"]) for it in items])
        return float(adaptive_ece(conf, correct, n_bins=15))

    def _mean_vacuity(self, items: list[float]) -> float:
        if any(math.isnan(x) for x in items):
            logger.warning("%s: vacuity is undefined for method=softmax records; mean vacuity is NaN", self.config.task)
            return float("nan")
        return mean(items)

    def aggregation(self) -> dict:
        return {
            "acc": mean, "ece": self._ece, "adaptive_ece": self._adaptive_ece, "nll": mean, "brier": mean,
            "vacuity": self._mean_vacuity,
        }  # fmt: skip

    def higher_is_better(self) -> dict:
        return {"acc": True, "ece": False, "adaptive_ece": False, "nll": False, "brier": False, "vacuity": False}


class OODPairTask(EvidentialMCQATask):
    """ID-vs-OOD detection over an ID task's and an OOD task's docs (ID = positive = 1).

    ``metadata``: ``id_task``, ``ood_task``, ``k_policy`` (assert | restrict | report;
    overridable with ``--metadata '{"k_policy": "report"}'``) and ``scores``. The docs are
    the two tasks' own docs with their own prompts, so a run that also evaluates the single
    tasks forwards each question once.
    """

    def download(self, dataset_kwargs: dict | None = None, **kwargs) -> None:
        import datasets
        import numpy as np
        from lm_eval.tasks import TaskManager

        from lm_eval_evidential.harness.plugin import tasks_dir
        from lm_eval_evidential.metrics.cardinality import check_cardinality

        meta = self.config.metadata or {}
        id_name, ood_name = meta["id_task"], meta["ood_task"]
        manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False)
        loaded = manager.load([id_name, ood_name])["tasks"]
        id_docs = list(loaded[id_name].eval_docs)
        ood_docs = list(loaded[ood_name].eval_docs)
        check = check_cardinality(
            np.array([d["k"] for d in id_docs]),
            np.array([d["k"] for d in ood_docs]),
            policy=str(meta.get("k_policy", "assert")),
            id_name=id_name,
            ood_name=ood_name,
        )
        self.k_check = check
        pair_docs = []
        for side, source, keep, task_name in ((1, id_docs, check.keep_id, id_name), (0, ood_docs, check.keep_ood, ood_name)):
            for doc, kept in zip(source, keep):
                if kept:
                    pair_docs.append({**doc, "doc_id": len(pair_docs), "side": side, "origin": f"{task_name}/{doc['doc_id']}",
                                      "answer_tokens": self.answer_tokens})  # fmt: skip
        self.dataset = datasets.DatasetDict({self.eval_split: datasets.Dataset.from_list(pair_docs)})

    @property
    def scores(self) -> list[str]:
        from lm_eval_evidential.metrics.scores import OOD_DEFAULT_SCORES, check_score_names

        return check_score_names((self.config.metadata or {}).get("scores") or OOD_DEFAULT_SCORES)

    def process_results(self, doc: dict, results) -> dict:
        item = {**self._item(doc, results), "side": doc["side"]}
        out = {}
        for score in self.scores:
            out[f"auroc_{score}"] = item
            out[f"aupr_in_{score}"] = item
        out["n_id"] = doc["side"]
        out["n_ood"] = 1 - doc["side"]
        out["k_matched"] = item
        return out

    def _detection(self, items: list[dict], score: str, metric: str) -> float:
        import numpy as np

        from lm_eval_evidential.metrics import detection
        from lm_eval_evidential.metrics._validation import undefined
        from lm_eval_evidential.metrics.scores import SCORES, compute_score

        records = _records_from_items(self.config.task, items)
        side = np.array([it["side"] for it in sorted(items, key=lambda it: it["record"]["doc_id"])])
        if SCORES[score].needs_alpha and not records.has_alpha:
            return undefined(f"{self.config.task}: {score} needs Dirichlet alpha; these records are method=softmax")
        values = compute_score(
            score, probs=records.probs, k=records.k, alpha=records.alpha if records.has_alpha else None,
            prior_weight=records.prior_weight,
        )  # fmt: skip
        fn = detection.auroc if metric == "auroc" else detection.aupr_in
        return float(fn(side, values))

    def _k_matched(self, items: list[dict]) -> float:
        return float(self.k_check.matched)

    def aggregation(self) -> dict:
        agg = {"n_id": sum, "n_ood": sum, "k_matched": self._k_matched}
        for score in self.scores:
            agg[f"auroc_{score}"] = lambda items, s=score: self._detection(items, s, "auroc")
            agg[f"aupr_in_{score}"] = lambda items, s=score: self._detection(items, s, "aupr_in")
        return agg

    def higher_is_better(self) -> dict:
        hib = {"n_id": True, "n_ood": True, "k_matched": True}
        for score in self.scores:
            hib[f"auroc_{score}"] = True
            hib[f"aupr_in_{score}"] = True
        return hib
