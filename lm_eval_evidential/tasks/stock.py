"""Stock lm-eval tasks on this package's side: built from the offline mirror, their lettered views resolved by
name in a TaskManager's index, and the ones ``--model evidential`` cannot score as they are.

The views themselves (the task class, the prompt, the refusals) are :mod:`lm_eval_evidential.tasks.lettered`.
"""

from __future__ import annotations

from collections.abc import Callable

from lm_eval_evidential.tasks import datasets as mcqa_datasets
from lm_eval_evidential.tasks.evidential_task import EvidentialMCQATask
from lm_eval_evidential.tasks.lettered import (
    ANSWER_TOKENS,
    PROMPT,
    VIEW_VERSION,
    LetteredViewError,
    LetteredViewTask,
    stock_name,
    view_name,
)


# ------------------------------------------------------------------ building the stock task
def _mirror_download(self, dataset_kwargs=None, **kwargs) -> None:
    """``download`` of a stock task under ``EVIDENTIAL_DATA_DIR``: its declared splits from the mirror."""
    import datasets

    config = self.config
    splits = [s for s in (config.training_split, config.validation_split, config.test_split) if s]
    fewshot = (config.fewshot_config or {}).get("split") if isinstance(config.fewshot_config, dict) else None
    splits += [s for s in (config.fewshot_split, fewshot) if s and s not in splits]
    eval_split = config.test_split or config.validation_split
    loaded = {}
    for split in dict.fromkeys(splits):
        try:
            rows = mcqa_datasets.load_split(
                task=config.task, dataset_path=config.dataset_path, configs=[config.dataset_name], split=split
            )
        except mcqa_datasets.MirrorFileNotFound:
            if split == eval_split:
                raise
            continue  # a training split the mirror does not hold: only needed for few-shot examples
        loaded[split] = datasets.Dataset.from_list(rows)
    self.dataset = datasets.DatasetDict(loaded)


def build_stock(factory, entry):
    """Build the stock task of ``entry`` as the TaskManager's factory would, reading the offline mirror if set."""
    import os

    from lm_eval.api.task import ConfigurableTask

    cfg = factory._load_full_config(entry, None)
    if not os.environ.get(mcqa_datasets.MIRROR_ENV) or (cfg.get("dataset_kwargs") or {}).get("data_files"):
        # a task on its own files (dataset_path: json + data_files) reads them, mirror or not, as own tasks do
        return factory.build(entry, overrides=None, registry={})
    for key in ("tag", "group", "task_list"):
        cfg.pop(key, None)
    return mirrored(cfg.pop("class", ConfigurableTask))(config=cfg)


def mirrored(cls):
    """``cls`` (a ConfigurableTask class) reading its declared splits from the offline mirror."""
    return type(
        f"Mirrored{cls.__name__}",
        (cls,),
        {
            "download": _mirror_download,
            # A split the mirror does not hold (training, few-shot) is absent, as where a stock task declares none.
            "has_training_docs": lambda self: self.config.training_split in self.dataset,
            "has_validation_docs": lambda self: self.config.validation_split in self.dataset,
            "fewshot_docs": lambda self: (
                None
                if self.fewshot_cfg.split is not None and self.fewshot_cfg.split not in self.dataset
                else cls.fewshot_docs(self)
            ),
        },
    )


def serve_from_mirror(factory) -> None:
    """Under ``EVIDENTIAL_DATA_DIR``, ``factory`` builds stock YAML tasks (``arc_challenge``,
    ``mmlu_abstract_algebra``) that read their splits from the offline mirror instead of the hub; an
    evaluated split the mirror lacks is one line naming the file and where it goes. Only where the user set
    the variable: otherwise, and for tasks with a Python class, their own ``data_files`` or a
    ``custom_dataset``, the factory builds as stock lm-eval does."""
    import os

    from lm_eval.api.task import ConfigurableTask

    original = factory._build_task
    if getattr(original, "serves_the_mirror", False):
        return

    def build_task(entry, overrides):
        if not os.environ.get(mcqa_datasets.MIRROR_ENV):
            return original(entry, overrides)
        cfg = factory._load_full_config(entry, overrides)
        kwargs = cfg.get("dataset_kwargs") or {}
        if "class" in cfg or not cfg.get("dataset_path") or cfg.get("custom_dataset") or kwargs.get("data_files"):
            return original(entry, overrides)
        for key in ("tag", "group", "task_list"):
            cfg.pop(key, None)
        return mirrored(ConfigurableTask)(config=cfg)

    build_task.serves_the_mirror = True
    factory._build_task = build_task


# ------------------------------------------------------------------ the index
class LetteredIndex(dict):
    """A TaskManager's index (``{name: Entry}``) that resolves ``X_edl`` to ``X``'s lettered view on lookup.

    Only a name not already in the index, ending in ``_edl``, whose stock name is a task, group or tag
    is affected; the view's entry is added then (once). Iteration and ``len`` are the stock index's.
    """

    def __init__(self, index: dict, factory) -> None:
        super().__init__(index)
        self._factory = factory

    def _view(self, name) -> bool:
        if not isinstance(name, str) or dict.__contains__(self, name):
            return False
        stock = stock_name(name)
        if stock is None or stock_name(stock) is not None or not dict.__contains__(self, stock):
            return False  # no view of a view (obqa_edl_edl)
        self[name] = view_entry(name, dict.__getitem__(self, stock), self._factory, known=self._known)
        return True

    def _known(self, name) -> bool:
        """``name`` is in the stock index (no view is made to answer)."""
        return dict.__contains__(self, name)

    def __contains__(self, name) -> bool:
        return dict.__contains__(self, name) or self._view(name)

    def __missing__(self, name):
        if self._view(name):
            return dict.__getitem__(self, name)
        raise KeyError(name)

    def get(self, name, default=None):
        return self[name] if name in self else default


def view_entry(name: str, stock_entry, factory, *, known: Callable[[str], bool] = lambda name: True):
    """The index entry of ``name``, the view of ``stock_entry``: a view task, or for a group or tag a group of views.

    A group's member that is lettered already (``obqa_edl``, a name ending in ``_edl`` in the index) is
    taken as it is; a member given as a mapping must name an indexed task (overrides such as
    ``num_fewshot`` kept), else it defines a task inline and the group has no view (refused, naming it).
    ``known(name)``: whether ``name`` is in the stock index.
    """
    from lm_eval.tasks._index import Entry, Kind

    if stock_entry.kind in (Kind.TASK, Kind.PY_TASK):
        cfg = {
            "task": name,
            "class": LetteredViewTask,
            "stock_builder": lambda: build_stock(factory, stock_entry),
            "stock_output_type": (stock_entry.cfg or {}).get("output_type"),
            "doc_to_text": PROMPT,
            "metadata": {"version": VIEW_VERSION, "stock_task": stock_entry.name, "answer_tokens": ANSWER_TOKENS},
        }
        return Entry(name=name, kind=Kind.PY_TASK, yaml_path=None, cfg=cfg)
    if stock_entry.kind == Kind.TAG:
        members = sorted(stock_entry.tags)
        version = None
    else:
        raw = stock_entry.cfg or {}
        members = raw.get("task") or []
        members = [members] if isinstance(members, (str, dict)) else list(members)
        version = (raw.get("metadata") or {}).get("version") if isinstance(raw.get("metadata"), dict) else None
        for member in members:
            named = member if isinstance(member, str) else member.get("task") if isinstance(member, dict) else None
            if not isinstance(named, str) or (isinstance(member, dict) and not known(named)):
                raise LetteredViewError(
                    f"task {name!r}: group {stock_entry.name!r} defines a member inline ({member!r}); only groups of "
                    "named tasks have a lettered view — give the member its own task YAML and name it in the group"
                )

    def member_view(task: str) -> str:
        return task if stock_name(task) is not None and known(task) else view_name(task)

    views = [member_view(m) if isinstance(m, str) else {**m, "task": member_view(m["task"])} for m in members]
    cfg = {
        "group": name,
        "task": views,
        "aggregate_metric_list": [{"metric": "acc", "aggregation": "mean", "weight_by_size": True}],
        "metadata": {"version": VIEW_VERSION, "stock_group": stock_entry.name, "stock_version": version},
    }
    return Entry(name=name, kind=Kind.GROUP, yaml_path=None, cfg=cfg)


def install(manager) -> None:
    """Make ``manager`` (a constructed TaskManager) resolve lettered views by name."""
    if not isinstance(manager._index, LetteredIndex):
        manager._index = LetteredIndex(manager._index, manager._factory)
    serve_from_mirror(manager._factory)


def missing_view_hint(name: str) -> str | None:
    """Why ``name``, a task name not found, names no lettered view (a view of a view, a glob), or None.

    Examples
    --------
    >>> missing_view_hint("obqa_edl_edl")
    "'obqa_edl_edl': obqa_edl is lettered already (there is no view of a view): --tasks obqa_edl"
    >>> missing_view_hint("obqa")
    """
    stock = stock_name(name)
    if stock is not None and stock_name(stock) is not None:
        return f"{name!r}: {stock} is lettered already (there is no view of a view): --tasks {stock}"
    if stock is not None and any(ch in name for ch in "*?["):
        return (
            f"{name!r}: glob patterns do not reach lettered views; name each view (e.g. arc_challenge_edl): "
            "`lm-eval-evidential tasks` lists the tasks that have one"
        )
    return None


def match_views(manager, patterns, matched: list[str]) -> list[str]:
    """``TaskManager.match_tasks`` plus each exact (non-glob) pattern that names a lettered view."""
    extra = [p for p in patterns if isinstance(p, str) and p not in matched and p in manager._index]
    return sorted({*matched, *extra})


# ------------------------------------------------------------------ stock tasks under --model evidential
def unscorable_stock_tasks(lm, tasks: dict) -> dict[str, str]:
    """``{task: why}`` for the stock multiple-choice tasks ``lm`` cannot score, each naming its lettered view.

    Read off each task's first doc, before any forward pass: its choices must be single answer
    tokens after the prompt for ``lm``'s tokenizer (the model's own check), on one context.
    """
    from lm_eval_evidential.errors import EvidentialInputError

    out = {}
    for name, task in tasks.items():
        if isinstance(task, EvidentialMCQATask) or getattr(task, "OUTPUT_TYPE", None) != "multiple_choice":
            continue
        view = f"use its lettered view {view_name(name)} (docs/tasks.md: Lettered views)"
        if getattr(task, "multiple_input", 0):
            out[name] = f"task {name!r}: its K choices are K different contexts, not answers to one prompt — {view}"
            continue
        doc = task.eval_docs[0]
        context = str(task.doc_to_text(doc))
        continuations = tuple(task.config.target_delimiter + str(c) for c in task.doc_to_choice(doc))
        try:
            lm.planner.split_answers(context, lm.tok_encode(context), continuations, name, f"task {name!r} doc 0")
        except EvidentialInputError as error:
            out[name] = str(error)
    return out
