"""The EDL task classes: ordinary multiple-choice ConfigurableTasks whose docs are one MCQA schema.

``EvidentialMCQATask`` (obqa_edl, arc_c_edl, …) scores one MCQA dataset; ``OODPairTask``
(obqa_edl_vs_arc_c_edl, …, :mod:`lm_eval_evidential.tasks.pairs`) scores ID-vs-OOD detection over
the two tasks' docs, with the K check done when its dataset is built, before any forward pass.

Per question the harness's own ``multiple_choice`` scoring gives ``acc``; everything that needs
the whole set of records (calibration, vacuity, detection) is computed after the evaluation
from the records by :meth:`evidential_metrics`, which
:func:`lm_eval_evidential.integration.evaluation.complete` calls — with any model: with
``--model evidential`` the records hold the evidence, with other models (``--model hf``) they
are the ``softmax`` method over the answer log-likelihoods.

A user's own task needs YAML only: ``class: !function
lm_eval_evidential.tasks.evidential_task.EvidentialMCQATask`` brings the shared base
(``tasks/_edl_base.yaml``: prompt, answers, metric) under the task's own keys, and
``metadata.fields`` maps a dataset's columns onto the doc schema (see docs/tasks.md, "Your own tasks").
"""

from __future__ import annotations

import ast
import copy
import logging
import re
from pathlib import Path

from lm_eval.api.task import ConfigurableTask

from lm_eval_evidential.errors import EvidentialInputError, install_one_line_errors
from lm_eval_evidential.tasks import datasets as mcqa_datasets
from lm_eval_evidential.tasks.permutations import QUESTION_FIELD

logger = logging.getLogger(__name__)

BASE_YAML = Path(__file__).resolve().parent / "configs" / "_edl_base.yaml"
# A template that is one doc field, "{{gold}}": its rendering is the field's value written out.
_ONE_FIELD = re.compile(r"\{\{\s*([A-Za-z_]\w*)\s*\}\}")
CALIBRATION_BINS = 15


def _with_base(config: dict) -> dict:
    """The shared base config under ``config`` (a task that included the base YAML already has it)."""
    from lm_eval_evidential.lm_eval_compat import load_yaml

    if "output_type" in config:
        return config
    base = load_yaml(BASE_YAML, resolve_func=False)
    base.pop("class", None)
    return {**base, **config, "metadata": {**(base.get("metadata") or {}), **(config.get("metadata") or {})}}


class _DocList(list):
    """A split's docs as one pass over its ``datasets.Dataset`` yields them, with the Dataset's
    ``features`` (which the harness's task constructor reads)."""

    def __init__(self, dataset) -> None:
        super().__init__(dataset)
        self.features = dataset.features


class EvidentialMCQATask(ConfigurableTask):
    """An MCQA task scored as a K-class evidential classifier (K per question).

    YAML: ``process_docs`` names a converter from :mod:`lm_eval_evidential.tasks.datasets`
    (or ``metadata.fields`` maps columns), ``metadata.answer_tokens`` the declared answer-token
    set, ``metadata.dataset_configs`` the hub configs to concatenate (default: ``dataset_name``).
    """

    def __init__(self, config: dict | None = None, **kwargs) -> None:
        install_one_line_errors()  # plain lm_eval: a dataset error or K refusal of this task is one line
        config = _with_base(dict(config or {}))
        config.pop("class", None)
        # The converter runs once in download() with the task's metadata (answer tokens),
        # not per call of test_docs(), so it is taken out of the harness's hands here.
        self._convert = config.pop("process_docs", None)
        self._fewshot_seed = None
        self._question_draws: dict[int, list[dict]] = {}  # permuted runs: each question's replayed draw
        self._replay_sampler = None
        super().__init__(config=config, **kwargs)

    # -- data ---------------------------------------------------------------------------
    @property
    def answer_tokens(self) -> list[str]:
        tokens = (self.config.metadata or {}).get("answer_tokens")
        if not tokens:
            raise mcqa_datasets.DatasetError(
                f"task {self.config.task!r}: metadata.answer_tokens is missing from its YAML"
            )
        return list(tokens)

    def _converter(self):
        fields = (self.config.metadata or {}).get("fields")
        if self._convert is None and fields:
            return mcqa_datasets.field_converter(fields, task=self.config.task)
        if self._convert is None:
            raise mcqa_datasets.DatasetError(
                f"task {self.config.task!r}: name a converter (process_docs) or map the columns (metadata.fields) "
                "in its YAML"
            )
        return self._convert

    def load_docs(self, split: str) -> list[dict]:
        """The normalised docs of ``split`` (mirror, local files or hub), validated."""
        meta = self.config.metadata or {}
        rows = mcqa_datasets.load_split(
            task=self.config.task,
            dataset_path=self.config.dataset_path,
            configs=meta.get("dataset_configs") or [self.config.dataset_name],
            split=split,
            dataset_kwargs=self.config.dataset_kwargs,
        )
        docs = mcqa_datasets.normalise(rows, self._converter(), task=self.config.task, answer_tokens=self.answer_tokens)
        if split == self.eval_split:  # the questions' identity (data_source's rows_sha256)
            self._eval_rows_sha256 = mcqa_datasets.content_sha256(rows)
        if not docs:
            raise mcqa_datasets.DatasetError(f"task {self.config.task!r}: no usable docs in split {split!r}")
        return docs

    def download(self, dataset_kwargs: dict | None = None, **kwargs) -> None:
        import datasets

        # The evaluated split only (metadata.load_all_splits: every declared split, for training);
        # few-shot examples are loaded when --num_fewshot asks for them.
        config = self.config
        splits = {config.training_split, config.validation_split, config.test_split, config.fewshot_split} - {None}
        load_all = (config.metadata or {}).get("load_all_splits", False)
        self.dataset = datasets.DatasetDict()
        for split in sorted(splits):
            if split == self.eval_split or load_all:
                docs = self.load_docs(split)
                if split == self.eval_split:
                    rows_sha256 = getattr(self, "_eval_rows_sha256", None)
                    self._data_source = mcqa_datasets.data_source(config, docs, rows_sha256)
                    self._question_docs = docs
                    docs = self._permuted(docs)
                self.dataset[split] = datasets.Dataset.from_list(docs)

    # -- permuted evaluation (metadata.permutations; tasks/permutations.py) -------------------
    @property
    def permutations(self) -> str | None:
        """``metadata.permutations`` (``cyclic``, ``random:N``, ``all``), or None: the options in their own order."""
        from lm_eval_evidential.tasks.permutations import METADATA_KEY

        return (self.config.metadata or {}).get(METADATA_KEY)

    def _permuted(self, docs: list[dict]) -> list[dict]:
        """The evaluated docs under every order asked for (``docs`` itself when none is)."""
        from lm_eval_evidential.tasks import permutations

        self._question_of = None
        meta = self.config.metadata or {}
        permutations.check_metadata(meta, task=self.config.task)
        if self.permutations is None:
            return docs
        out = permutations.permute_docs(
            docs, self.permutations, task=self.config.task, seed=meta.get("permutation_seed", 0)
        )
        self._question_of = [doc[permutations.QUESTION_FIELD] for doc in out]
        logger.info(
            "%s: %d questions shown in %d orders in all (permutations %r)",
            self.config.task,
            len(docs),
            len(out),
            self.permutations,
        )
        return out

    def request_limit(self, limit: float | None) -> None:
        """``--limit`` as the user wrote it (the evaluate hook passes it): on a permuted task it counts questions."""
        self._requested_limit = limit

    def _question_limit(self, limit: int | None) -> int | None:
        """The number of leading (question, order) docs that hold the first ``--limit`` questions, every order of each.

        lm_eval turns ``--limit f < 1`` into ``ceil(f * docs)``; on a permuted task that is taken as
        ``ceil(f * questions)`` instead, so that a limit never cuts a question's orders apart.
        """
        question_of = getattr(self, "_question_of", None)
        if limit is None or question_of is None:
            return limit
        import math

        requested = getattr(self, "_requested_limit", None)
        n_questions = len(getattr(self, "_question_docs", ())) or (question_of[-1] + 1 if question_of else 0)
        wanted = math.ceil(requested * n_questions) if requested is not None and 0 < requested < 1 else int(limit)
        return sum(1 for q in question_of if q < wanted)

    @property
    def eval_split(self) -> str:
        return self.config.test_split or self.config.validation_split

    def test_docs(self) -> list[dict] | None:
        return self._doc_list(self.config.test_split) if self.has_test_docs() else None

    def validation_docs(self) -> list[dict] | None:
        return self._doc_list(self.config.validation_split) if self.has_validation_docs() else None

    def _doc_list(self, split: str) -> list[dict]:
        """The split's docs as a list, read out of its Dataset once.

        The harness iterates the evaluated docs several times per run (requests, scoring, the
        records), and a ``datasets.Dataset`` converts every row from Arrow on every pass (~0.03 ms
        a doc); the list holds what one pass yields, so every pass sees the same docs as before.
        """
        dataset = self.dataset[split]
        cached = self.__dict__.get("_doc_lists", {}).get(split)
        if cached is None or cached[0] is not dataset:  # read again if download() replaced the split
            cached = self.__dict__.setdefault("_doc_lists", {})[split] = (dataset, _DocList(dataset))
        return cached[1]

    def has_training_docs(self) -> bool:
        return self.config.training_split in getattr(self, "dataset", {})

    def has_validation_docs(self) -> bool:
        return self.config.validation_split in getattr(self, "dataset", {})

    def fewshot_docs(self):
        return None  # no sampler at construction: see fewshot_context

    # -- few-shot -----------------------------------------------------------------------
    @property
    def fewshot_split(self) -> str | None:
        """``fewshot_split``, else the training split, else a validation split that is not evaluated."""
        config = self.config
        for split in (config.fewshot_split, config.training_split, config.validation_split):
            if split and split != self.eval_split:
                return split
        return None

    def fewshot_pool(self) -> list[dict]:
        split = self.fewshot_split
        if split is None:
            raise EvidentialInputError(
                f"task {self.config.task!r}: --num_fewshot needs examples from a split other than the evaluated "
                f"{self.eval_split!r}, and its YAML declares none; add training_split or fewshot_split, or drop "
                "--num_fewshot"
            )
        loaded = getattr(self, "dataset", {})
        return list(loaded[split]) if split in loaded else self.load_docs(split)

    def set_fewshot_seed(self, seed: int | None = None) -> None:
        self._fewshot_seed = seed
        self._question_draws, self._replay_sampler = {}, None  # permuted runs replay their draws from the new seed
        super().set_fewshot_seed(seed)

    def fewshot_context(self, doc, num_fewshot, *args, **kwargs):
        if num_fewshot and not hasattr(self, "sampler"):
            from lm_eval.api import samplers

            name = self.fewshot_cfg.sampler if self.config.fewshot_config else "default"
            sampler_cls = samplers.get_sampler(name) if isinstance(name, str) else name
            self.sampler = sampler_cls(self.fewshot_pool(), rnd=None)
            self.sampler.set_rnd(self._fewshot_seed)
        if num_fewshot and QUESTION_FIELD in doc:
            return self._permuted_fewshot_context(doc, num_fewshot, *args, **kwargs)
        return super().fewshot_context(doc, num_fewshot, *args, **kwargs)

    def _permuted_fewshot_context(self, doc, num_fewshot, *args, **kwargs):
        """Every order of one question gets the few-shot examples an unpermuted run draws for it.

        lm-eval's samplers draw from one generator in the order the docs come, so under permutations
        each order (its own doc) would see other examples and the order audit would mix the options'
        order with the examples'. The draws are replayed here as an unpermuted single-process run
        makes them, question by question (``question_id``), so the identity order's prompt is the
        unpermuted prompt and the draw does not depend on the process count or the docs' order.
        """
        draws = self._question_draws
        if self._replay_sampler is None:
            self._replay_sampler = copy.copy(self.sampler).set_rnd(self._fewshot_seed)
        question = int(doc[QUESTION_FIELD])
        # lm-eval passes the doc to the sampler when few-shot and evaluated splits are one split, and
        # then draws one more example to drop it: the replay makes the same number of draws.
        exclude = self.fewshot_cfg.split == self.config.test_split
        while question not in draws:
            draws[len(draws)] = self._replay_sampler.sample(n=num_fewshot, eval_doc=doc if exclude else None)
        chosen, sampler = draws[question], self.sampler
        self.sampler = _FixedDraw(chosen)
        try:
            return super().fewshot_context(doc, num_fewshot, *args, **kwargs)
        finally:
            self.sampler = sampler

    # -- request cache --------------------------------------------------------------------
    def build_all_requests(
        self, *, cache_requests: bool = False, rewrite_requests_cache: bool = False, limit=None, **kwargs
    ) -> None:
        limit = self._question_limit(limit)
        # lm_eval's request cache is keyed by task name, shots, chat template and tokenizer, not
        # by the data: prompts cached from another mirror or dataset version would be reused.
        super().build_all_requests(
            cache_requests=cache_requests, rewrite_requests_cache=rewrite_requests_cache, limit=limit, **kwargs
        )
        if cache_requests and not rewrite_requests_cache and not self._requests_match_docs():
            logger.warning("%s: the request cache holds prompts of other data; rebuilding it", self.config.task)
            super().build_all_requests(cache_requests=True, rewrite_requests_cache=True, limit=limit, **kwargs)

    def doc_iterator(self, *, rank: int = 0, limit: int | None = None, world_size: int = 1, samples=None):
        limit = self._question_limit(limit)
        return super().doc_iterator(rank=rank, limit=limit, world_size=world_size, samples=samples)

    def _requests_match_docs(self) -> bool:
        docs = self.eval_docs
        return all(r.doc_id < len(docs) and r.doc == docs[r.doc_id] for r in self._instances)

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

    @staticmethod
    def _one_field(source: str, doc):
        """``doc[name]`` when the template is ``{{name}}``, else None.

        The harness calls doc_to_choice and doc_to_target several times per doc (building
        requests, scoring each); rendering and parsing back ``{{letters}}`` or ``{{gold}}`` cost
        more per question than the evidential model's own work. The field is returned where its
        rendering would parse back to it exactly: a list of strings, a non-negative int.
        """
        match = _ONE_FIELD.fullmatch(source)
        return doc.get(match.group(1)) if match and isinstance(doc, dict) else None

    def doc_to_choice(self, doc, doc_to_choice=None):
        source = self._plain_template(doc_to_choice, self.config.doc_to_choice)
        if source is None:
            return super().doc_to_choice(doc, doc_to_choice)
        value = self._one_field(source, doc)
        if type(value) is list and all(type(x) is str for x in value):
            return list(value)
        return ast.literal_eval(self._template(source).render(**doc))

    def doc_to_target(self, doc, doc_to_target=None):
        source = self._plain_template(doc_to_target, self.config.doc_to_target)
        if source is None:
            return super().doc_to_target(doc, doc_to_target)
        value = self._one_field(source, doc)
        if type(value) is int and value >= 0 and self.config.doc_to_choice is not None:
            return value
        target = self._template(source).render(**doc)
        if target.isdigit() and self.config.doc_to_choice is not None:
            return ast.literal_eval(target)
        return super().doc_to_target(doc, doc_to_target)  # lists and strings: the harness's own rules

    # -- records and metrics -----------------------------------------------------------------
    @property
    def fingerprint(self) -> dict:
        """What defines this task's records besides the model: prompt template, answer set, version, data."""
        from lm_eval_evidential.records.provenance import sha256_text

        template = (
            self.config.doc_to_text if isinstance(self.config.doc_to_text, str) else repr(self.config.doc_to_text)
        )
        out = {
            "prompt_template_sha256": sha256_text(template),
            "answer_tokens": self.answer_tokens,
            "task_version": self.VERSION,
            "data_source": getattr(self, "_data_source", None),
        }
        if self.permutations is not None:  # only then: an unpermuted run's metadata stays what it was
            from lm_eval_evidential.tasks.permutations import canonical_spec

            out["permutations"] = {
                "spec": canonical_spec(self.permutations, task=self.config.task),
                "seed": (self.config.metadata or {}).get("permutation_seed", 0),
            }
        return out

    def evidential_metrics(self, records) -> dict[str, tuple[float, bool | None]]:
        """``{metric: (value, higher_is_better)}`` for the harness table, from this task's records.

        The calibration metrics are the audit's own rows (``lm-eval-evidential calibration``);
        mean vacuity only where there is a Dirichlet (not for ``method=softmax``). Permuted, every
        (question, order) is an example, as it is one of lm-eval's docs (``acc`` beside them counts it so).
        """
        import numpy as np

        from lm_eval_evidential.audits.quality import calibration_rows
        from lm_eval_evidential.records.orders import pool_orders

        row = calibration_rows({self.config.task: pool_orders(records)}, n_bins=CALIBRATION_BINS)[0]
        metrics = {name: (row[name], False) for name in ("ece", "adaptive_ece", "nll", "brier")}
        if records.has_alpha:
            metrics["vacuity"] = (float(np.mean(records.vacuity)), False)
        return metrics


class _FixedDraw:
    """A sampler that returns one question's replayed few-shot examples (see ``_permuted_fewshot_context``)."""

    def __init__(self, docs: list[dict]) -> None:
        self.docs = docs

    def sample(self, n: int, eval_doc=None, **kwargs) -> list[dict]:
        return list(self.docs[:n])
