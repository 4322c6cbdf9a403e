"""Lettered views of lm-eval's stock multiple-choice tasks: ``--tasks hellaswag_edl``.

A stock multiple-choice task that asks by answer *text* (arc_challenge, hellaswag, piqa, sciq,
truthfulqa_mc1, winogrande, …) cannot be scored by an EDL checkpoint, which is a K-class
classifier over answer letters. Its lettered view, named ``<stock task>_edl``, shows the same
questions with lettered options in this package's prompt (the family of obqa_edl, McNamara 2026
Table 7) and scores the answers " A", " B", … — each question with its own K.

Nothing is indexed ahead of time: the TaskManager's index is wrapped (:class:`LetteredIndex`)
so that a name ``X_edl`` that is not already a task, where ``X`` is, resolves to a view on the
first lookup. Every other name, and every TaskManager that is never asked for a view, costs
nothing more than before.

How a view is built from the stock task (everything after the stock task's own ``process_docs``,
splits and ``doc_to_text`` / ``doc_to_choice`` / ``doc_to_target``):

- the question is the stock ``doc_to_text`` with its trailing answer cue (a last line
  ``Answer:`` or ``A:``) and surrounding blank space removed, since the lettered prompt adds its
  own ``Answer:``;
- the options are the stock choices, lettered A, B, … in their stock order;
- the gold is the stock target (an index, or a choice's text);
- **shuffled gold position**: where the stock task stores the gold at a fixed position
  (``doc_to_target`` a constant, e.g. sciq's 3, truthfulqa_mc1's 0), the options are shown in
  the order of :data:`SHUFFLE_RULE` and the gold follows them; ``order`` in each doc (logged
  with ``--log_samples``) and ``lettered_view.orders`` in the records' metadata give it;
- **several contexts** (lm-eval's ``multiple_input``, winogrande): the K contexts share the
  text after them; the view shows the sentence with a blank ``_`` where the contexts differ
  and the K differing parts as options (the contexts' common prefix is cut back to a word start);
- refused, naming the task (and doc): a stock task that is not multiple_choice, whose choices
  are already answer letters (run it as it is), with several gold answers, or with more than 26
  options.

With ``EVIDENTIAL_DATA_DIR`` set, the stock task's splits are read from the offline mirror
(``<root>/<dataset_path>/<dataset_name or default>/<split>.jsonl``, the hub dataset's own schema)
instead of the hub, exactly as for the shipped ``*_edl`` tasks.
"""

from __future__ import annotations

import logging
import re
import string
from collections.abc import Callable
from typing import Any

from lm_eval_evidential.tasks import datasets as mcqa_datasets
from lm_eval_evidential.tasks.evidential_task import EvidentialMCQATask

logger = logging.getLogger(__name__)

VIEW_SUFFIX = "_edl"
LETTERS = string.ascii_uppercase
ANSWER_TOKENS = [f" {letter}" for letter in LETTERS]
VIEW_VERSION = 1.0
PROMPT = (
    "Return the label of the correct answer for the question below.\n\n{{question}}\nChoices:\n"
    "{% for letter in letters %}{{letter}}) {{options[loop.index0]}}\n{% endfor %}Answer:"
)
SHUFFLE_RULE = (
    "options ranked by sha256(f'{seed}:{question}:{stock position}') ascending, question = the stock doc_to_text; "
    "the gold follows its option"
)
# A last line that is the stock prompt's own answer cue ("Answer:", "A:").
_ANSWER_CUE = re.compile(r"(?:^|\n)[ \t]*(?:Answer|A)[ \t]*:[ \t]*\Z")
_ONE_LETTER = re.compile(r"\(?[A-Za-z0-9]\)?\.?")


class LetteredViewError(mcqa_datasets.DatasetError):
    """A stock task (or one of its docs) that cannot be shown as a lettered view; the message says why."""


def view_name(stock: str) -> str:
    """``hellaswag`` -> ``hellaswag_edl``."""
    return f"{stock}{VIEW_SUFFIX}"


def stock_name(name: str) -> str | None:
    """``hellaswag_edl`` -> ``hellaswag``; None for a name without the suffix."""
    return name[: -len(VIEW_SUFFIX)] if name.endswith(VIEW_SUFFIX) and len(name) > len(VIEW_SUFFIX) else None


def question_text(prompt: str) -> str:
    """The stock prompt without its trailing answer cue (the lettered prompt ends in its own ``Answer:``).

    Examples
    --------
    >>> question_text("Question: Why is the sky blue?\\nAnswer:")
    'Question: Why is the sky blue?'
    >>> question_text("Q: Which is larger?\\nA:")
    'Q: Which is larger?'
    >>> question_text("The trophy did not fit in the case.")
    'The trophy did not fit in the case.'
    """
    return _ANSWER_CUE.sub("", prompt.strip()).strip()


def shuffled_order(question: str, k: int, *, seed: int = 0) -> list[int]:
    """The stock positions of a question's options in the order a gold-shuffling view shows them.

    Position ``i`` is ranked by ``sha256(f"{seed}:{question}:{i}")``, smallest first
    (:func:`~lm_eval_evidential.tasks.datasets.removal_order` with the positions as labels): the
    same on every run and machine, independent of the option texts and of which one is gold, so
    a gold stored at a fixed stock position lands on each letter equally often over questions.

    Examples
    --------
    >>> order = shuffled_order("Which gas do plants take in?", 4)
    >>> sorted(order), order == shuffled_order("Which gas do plants take in?", 4)
    ([0, 1, 2, 3], True)
    """
    return mcqa_datasets.removal_order(question, [str(i) for i in range(k)], seed=seed)


def blank_rendering(contexts: list[str], continuation: str, delimiter: str = " ") -> tuple[str, list[str]]:
    """A several-context question (winogrande) as one sentence with a blank and K fillers.

    The contexts' common prefix, cut back to the start of a word, stays in the sentence;
    each context's rest is its option; ``_`` marks the blank, followed by the shared
    continuation.

    Examples
    --------
    >>> blank_rendering(["The cup fell off the shelf because the shelf",
    ...                  "The cup fell off the shelf because the cup"], "was tilted.")
    ('The cup fell off the shelf because the _ was tilted.', ['shelf', 'cup'])
    """
    prefix = contexts[0]
    for context in contexts[1:]:
        n = 0
        while n < min(len(prefix), len(context)) and prefix[n] == context[n]:
            n += 1
        prefix = prefix[:n]
    if any(len(c) > len(prefix) for c in contexts) and not prefix.endswith((" ", "\n")):
        prefix = prefix[: max(prefix.rfind(" "), prefix.rfind("\n")) + 1]
    options = [c[len(prefix) :].strip() for c in contexts]
    return f"{prefix}_{delimiter}{continuation}".strip(), options


def _fixed_target(config) -> bool:
    """The stock ``doc_to_target`` is a constant index: the gold sits at one position in every question."""
    target = config.doc_to_target
    return (isinstance(target, int) and not isinstance(target, bool)) or (
        isinstance(target, str) and target.strip().isdigit()
    )


def _stock_split_docs(stock, split: str):
    """The stock task's docs of ``split`` after its own ``process_docs`` (as ``training_docs()`` etc. do)."""
    config = stock.config
    if split not in stock.dataset:
        return None
    docs = stock.dataset[split]
    return config.process_docs(docs) if config.process_docs is not None else docs


def _stock_call(method, doc, where: str, name: str):
    """The stock task's ``doc_to_text`` / ``doc_to_choice`` / ``doc_to_target`` of one doc; a template or
    function of the task that raises on this doc is named with the task and doc."""
    try:
        return method(doc)
    except mcqa_datasets.DatasetError:
        raise
    except Exception as exc:  # the stock task's own template or function, on this doc's data
        raise LetteredViewError(
            f"{where}: the stock task's {name} raised {type(exc).__name__}: {exc}; fix the doc or the task's "
            f"{name} (the stock task fails on it too)"
        ) from exc


def _gold_index(target, choices: list[str], where: str):
    """The stock target as an index: an index as it is, a choice's text as the position of that text
    (refused where the text is two options, or none)."""
    if not isinstance(target, str):
        return target
    at = [i for i, choice in enumerate(choices) if choice == target]
    if len(at) > 1:
        letters = " and ".join(LETTERS[i] for i in at)
        raise LetteredViewError(
            f"{where}: the gold text {target!r} is options {letters} alike, so the gold letter is not known; "
            "fix the doc (distinct options), or make doc_to_target give the gold's index"
        )
    if not at:
        raise LetteredViewError(
            f"{where}: the gold {target!r} is not one of the choices {choices!r}; fix the doc or the task's "
            "doc_to_target"
        )
    return at[0]


def _built_stock(build: Callable[[], Any], view: str, stock: str):
    """The stock task, built as ``--tasks <stock>`` builds it; lm-eval's own check of its first doc
    (``ConfigurableTask.__init__``: doc_to_text / doc_to_choice / doc_to_target on one doc) failing is
    named with the view, the stock task and that doc."""
    try:
        return build()
    except mcqa_datasets.DatasetError:
        raise
    except Exception as exc:
        doc = _first_doc_checked(exc)
        if doc is _NOT_CHECKING:
            raise  # not lm-eval's check of the task's templates on a doc: a real fault keeps its traceback
        shown = repr(doc if not isinstance(doc, dict) else {k: doc[k] for k in list(doc)[:8]})
        raise LetteredViewError(
            f"task {view!r}: the stock task {stock!r} fails lm-eval's check of its first evaluated doc "
            f"({type(exc).__name__}: {exc}) on {shown[:300]}; its doc_to_choice must give a list of texts and its "
            f"doc_to_target an index or one of them — fix the doc or the task ({stock!r} fails the same way "
            "under --model hf)"
        ) from exc


_NOT_CHECKING = object()


def _first_doc_checked(exc: BaseException):
    """The doc lm-eval's ``ConfigurableTask.__init__`` was checking when ``exc`` was raised, or ``_NOT_CHECKING``
    (raised elsewhere: downloading, building, …). Read off the traceback: the constructor's frame holds
    ``test_doc`` from the moment that check begins."""
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == "__init__" and "test_doc" in frame.f_locals:
            module = frame.f_globals.get("__name__", "")
            if module.startswith("lm_eval."):
                return frame.f_locals["test_doc"]
        tb = tb.tb_next
    return _NOT_CHECKING


class LetteredViewTask(EvidentialMCQATask):
    """The lettered view of one stock multiple-choice task (see the module docstring).

    Built by :class:`LetteredIndex` with ``metadata.stock_task`` and a ``stock_builder`` (the
    TaskManager's way to build the stock task); the stock task is built, and its data loaded,
    when the view's dataset is.
    """

    def __init__(self, config: dict | None = None, **kwargs) -> None:
        config = dict(config or {})
        build_stock: Callable[[], Any] = config.pop("stock_builder")
        declared = config.pop("stock_output_type", None)
        if declared not in (None, "multiple_choice"):  # refused before its data loads
            raise LetteredViewError(_not_multiple_choice(config["task"], config["metadata"]["stock_task"], declared))
        # The stock task is built (its data loaded) now, as it would be for --tasks <stock task>; the view
        # takes its splits, dataset and default number of shots.
        self.stock = _built_stock(build_stock, config["task"], config["metadata"]["stock_task"])
        check_stock(self.stock, config["task"])
        stock_config = self.stock.config
        for key in (
            "training_split",
            "validation_split",
            "test_split",
            "fewshot_split",
            "dataset_path",
            "dataset_name",
        ):
            config.setdefault(key, getattr(stock_config, key))
        if stock_config.num_fewshot is not None:
            config.setdefault("num_fewshot", stock_config.num_fewshot)
        sampler = (
            (stock_config.fewshot_config or {}).get("sampler")
            if isinstance(stock_config.fewshot_config, dict)
            else None
        )
        if isinstance(sampler, str):
            config.setdefault("fewshot_config", {"sampler": sampler})
        super().__init__(config, **kwargs)

    @property
    def stock_task_name(self) -> str:
        return self.config.metadata["stock_task"]

    @property
    def shuffle_seed(self) -> int:
        seed = (self.config.metadata or {}).get("shuffle_seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise LetteredViewError(
                f"task {self.config.task!r}: metadata.shuffle_seed must be an integer, got {seed!r}"
            )
        return seed

    def load_docs(self, split: str) -> list[dict]:
        stock = self.stock
        rows = _stock_split_docs(stock, split)
        if rows is None:
            raise LetteredViewError(
                f"task {self.config.task!r}: the stock task {self.stock_task_name!r} has no split {split!r}"
            )
        shuffle = _fixed_target(stock.config)
        docs, orders = [], []
        repeated: list[tuple[str, str]] = []
        multiline: list[tuple[str, str]] = []
        for index, row in enumerate(rows):
            question, options, gold = self._lettered(stock, row, index, split)
            where = f"task {self.config.task!r}, {split} doc {index}"
            shown = [mcqa_datasets.on_one_line(o) for o in options]
            multiline += [(where, o) for o, one in zip(options, shown) if one != o][:1]
            texts = [o.strip() for o in shown]
            if len(set(texts)) != len(texts):
                repeated.append((where, next(t for t in texts if texts.count(t) > 1)))
            options = shown
            order = (
                shuffled_order(question, len(options), seed=self.shuffle_seed) if shuffle else list(range(len(options)))
            )
            docs.append(
                {
                    "doc_id": index,
                    "source_id": f"{split}/{index}",
                    "question": question,
                    "options": [options[i] for i in order],
                    "letters": list(LETTERS[: len(options)]),
                    "gold": order.index(gold),
                    "k": len(options),
                    "answer_tokens": list(ANSWER_TOKENS),
                    "order": order,
                }
            )
            orders.append(order)
        if not docs:
            raise LetteredViewError(f"task {self.config.task!r}: split {split!r} of {self.stock_task_name!r} is empty")
        mcqa_datasets.warn_option_layout(self.config.task, repeated, multiline)
        if split == self.eval_split:
            self.view_summary = {
                "stock_task": self.stock_task_name,
                "stock_version": (stock.config.metadata or {}).get("version"),
                "shuffled": shuffle,
                "shuffle_rule": SHUFFLE_RULE if shuffle else None,
                "shuffle_seed": self.shuffle_seed if shuffle else None,
                "several_contexts": bool(getattr(stock, "multiple_input", 0)),
                "orders": orders if shuffle else None,
            }
        return docs

    def _lettered(self, stock, doc, index: int, split: str) -> tuple[str, list[str], int]:
        where = f"task {self.config.task!r} (view of {self.stock_task_name!r}), {split} doc {index}"
        text = _stock_call(stock.doc_to_text, doc, where, "doc_to_text")
        choices = _stock_call(stock.doc_to_choice, doc, where, "doc_to_choice")
        if not isinstance(choices, list) or not choices:
            raise LetteredViewError(
                f"{where}: doc_to_choice gave {choices!r}, not a list of choices; make the stock task's "
                "doc_to_choice give a list of texts"
            )
        odd = next((i for i, c in enumerate(choices) if not isinstance(c, str)), None)
        if odd is not None:
            raise LetteredViewError(
                f"{where}: choice {odd} is {choices[odd]!r} ({type(choices[odd]).__name__}), not a text: "
                f"{choices!r}; fix the doc, or make the stock task's doc_to_choice give texts"
            )
        if len(choices) > len(LETTERS):
            raise LetteredViewError(
                f"{where}: {len(choices)} options, more than the {len(LETTERS)} letters A..Z a lettered view can "
                "show; drop the question or evaluate the stock task with --model hf"
            )
        if getattr(stock, "multiple_input", 0):
            gold = text
            continuation = _stock_call(stock.doc_to_target, doc, where, "doc_to_target")
            question, options = blank_rendering(choices, str(continuation), stock.config.target_delimiter)
            if any(not o for o in options):
                raise LetteredViewError(f"{where}: its {len(choices)} contexts do not differ ({choices!r})")
        else:
            target = _stock_call(stock.doc_to_target, doc, where, "doc_to_target")
            gold = _gold_index(target, choices, where)
            question, options = question_text(str(text)), choices
        if not question:
            raise LetteredViewError(
                f"{where}: the stock prompt is empty: the task scores its choices alone (a minimal pair, "
                "which is more likely), there is no question to show them under"
            )
        if any(mcqa_datasets.shows_nothing(option) for option in options):
            raise LetteredViewError(
                f"{where}: an option is empty or shows nothing (white space or invisible characters only: "
                f"{options!r}); a lettered view cannot show it — fix or drop the doc"
            )
        if hasattr(gold, "item"):
            gold = gold.item()
        if isinstance(gold, list):
            raise LetteredViewError(
                f"{where}: several gold answers {gold!r}; a K-class view needs exactly one (evaluate the stock task "
                "with --model hf)"
            )
        if isinstance(gold, bool) or not isinstance(gold, int) or not 0 <= gold < len(options):
            raise LetteredViewError(f"{where}: target {gold!r} is not one of the {len(options)} choices' indices")
        return question, options, gold

    def download(self, dataset_kwargs: dict | None = None, **kwargs) -> None:
        super().download(dataset_kwargs, **kwargs)
        if self.eval_split in self.dataset:
            self._data_source = stock_data_source(self.stock, list(self._question_docs), self.eval_split)

    @property
    def fingerprint(self) -> dict:
        return {**super().fingerprint, "lettered_view": getattr(self, "view_summary", None)}

    def dump_config(self) -> dict:
        config = dict(super().dump_config())
        summary = {k: v for k, v in (getattr(self, "view_summary", None) or {}).items() if k != "orders"}
        config["metadata"] = {**(config.get("metadata") or {}), "lettered_view": summary}
        return config


def check_stock(stock, view: str) -> None:
    """Refuse a stock task that has no lettered view, saying why."""
    name = stock.config.task
    if stock.OUTPUT_TYPE != "multiple_choice":
        raise LetteredViewError(_not_multiple_choice(view, name, stock.OUTPUT_TYPE))
    doc = stock.eval_docs[0]
    choices = stock.doc_to_choice(doc)
    if not getattr(stock, "multiple_input", 0) and all(_ONE_LETTER.fullmatch(str(c).strip()) for c in choices):
        raise LetteredViewError(
            f"task {view!r}: the choices of {name!r} are already answer labels {choices!r}; run {name!r} itself "
            "with --model evidential"
        )


def _not_multiple_choice(view: str, stock: str, output_type: str) -> str:
    return f"task {view!r}: {stock!r} is a {output_type} task; lettered views exist for multiple_choice tasks only"


def stock_data_source(stock, docs: list[dict], split: str | None = None) -> dict:
    """The view's data source: the stock task's dataset (and revision), the view docs' content hash and
    the hash of the stock split's rows as the dataset gives them (``rows_sha256``: the questions' identity,
    equal to this package's own task's on that split)."""
    kwargs = dict(stock.config.dataset_kwargs or {})
    rows = stock.dataset[split] if split is not None and split in stock.dataset else None
    return {
        "origin": mcqa_datasets.data_origin(kwargs),
        "dataset": stock.config.dataset_path,
        "configs": [stock.config.dataset_name],
        "revision": kwargs.get("revision"),
        "files": kwargs.get("data_files"),
        "sha256": mcqa_datasets.content_sha256(docs),
        "rows_sha256": None if rows is None else mcqa_datasets.content_sha256(list(rows)),
        "stock_task": stock.config.task,
    }


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


# ------------------------------------------------------------------ census
CENSUS_KEYS = ("task", "k", "choices", "as_is", "view", "note")
_LABEL = re.compile(r"[A-Za-z0-9]")
_PAREN_LABEL = re.compile(r"\(\s*[A-Za-z0-9]\s*\)")
_LITERAL_LIST = re.compile(r"\{\{\s*\[([^\[\]{}]*)\]\s*\}\}")


def census_row(name: str, cfg: dict) -> dict:
    """What a stock multiple-choice task's config says about scoring it with ``--model evidential``.

    Read from the config alone (no data, no tokenizer): ``choices`` is ``labels`` (single letters
    or digits: runs as it is), ``(A) labels`` (runs as it is: the shared prefix joins the
    prompt), ``words`` (a fixed list of words: runs where each is one token for the model's
    tokenizer, else its view) or ``texts`` (from the data: its view); ``k`` is the list's length,
    or ``per question`` where the data decide it.

    Examples
    --------
    >>> census_row("sciq", {"doc_to_choice": "{{[distractor1, distractor2, distractor3, correct_answer]}}",
    ...                     "doc_to_target": 3})["note"]
    'gold stored at one position: the view shuffles the options'
    >>> census_row("mmlu_x", {"doc_to_choice": ["A", "B", "C", "D"]})["as_is"]
    'yes'
    """
    choice, target = cfg.get("doc_to_choice"), cfg.get("doc_to_target")
    notes = []
    if isinstance(choice, list):
        k: int | str = len(choice)
        texts = [str(c).strip() for c in choice]
        if all(_LABEL.fullmatch(t) for t in texts):
            kind, as_is = "labels", "yes"
        elif all(_PAREN_LABEL.fullmatch(t) for t in texts):
            kind, as_is = "(A) labels", "yes"
        else:
            kind, as_is = "words", "if one token each"
    else:
        literal = _LITERAL_LIST.fullmatch(str(choice).strip()) if isinstance(choice, str) else None
        k = len([part for part in literal.group(1).split(",") if part.strip()]) if literal else "per question"
        kind, as_is = "texts", "no"
    view = view_name(name) if kind in ("words", "texts") else ""
    if isinstance(k, int) and k > len(LETTERS):
        view, notes = "", [f"{k} options: more than the {len(LETTERS)} letters"]
    if view and isinstance(cfg.get("doc_to_text"), str) and not cfg["doc_to_text"].strip():
        view, notes = "", ["no question: the choices are scored alone (a minimal pair)"]
    if view and ((isinstance(target, int) and not isinstance(target, bool)) or str(target).strip().isdigit()):
        notes.append("gold stored at one position: the view shuffles the options")
    return {"task": name, "k": k, "choices": kind, "as_is": as_is, "view": view, "note": "; ".join(notes)}


def census(manager, patterns: list[str] | None = None) -> list[dict]:
    """:func:`census_row` of every multiple-choice task in ``manager``'s index (those matching ``patterns``)."""
    import fnmatch

    from lm_eval.tasks._index import Kind

    rows = []
    for name in sorted(manager.task_index):
        entry = manager.task_index[name]
        cfg = entry.cfg or {}
        if entry.kind not in (Kind.TASK, Kind.PY_TASK) or cfg.get("output_type") != "multiple_choice":
            continue
        if stock_name(name) is not None:
            continue  # this package's tasks (and a user's *_edl tasks): lettered already
        if patterns and not any(fnmatch.fnmatchcase(name, p) for p in patterns):
            continue
        rows.append(census_row(name, cfg))
    return rows


# ------------------------------------------------------------------ "(A)"-style labels
def shared_prefix_split(continuations_ids: list[list[int]]) -> tuple[list[int], list[int]] | None:
    """``(prefix, answer ids)`` where every choice is ``prefix + [its own token] + a shared tail``, else None.

    " (A)", " (B)" are three tokens each for most tokenizers (" (", "A", ")"): they share the
    prefix " (" and the tail ")", and differ in one token. The prefix then belongs to the
    prompt, and the choice's evidence is read at the differing token: the K-class classifier
    over answer labels is the model's next-token logits after ``prompt + prefix``. The tail is
    not scored (it is the same for every choice). None where the choices differ in more than
    one token, or in none, or share a differing token.

    Examples
    --------
    >>> shared_prefix_split([[506, 36, 12], [506, 37, 12], [506, 38, 12]])
    ([506], [36, 37, 38])
    >>> shared_prefix_split([[506, 36, 12], [506, 37, 40, 12]]) is None
    True
    """
    if len(continuations_ids) < 2 or any(not ids for ids in continuations_ids):
        return None
    n = min(len(ids) for ids in continuations_ids)
    start = 0
    while start < n and len({ids[start] for ids in continuations_ids}) == 1:
        start += 1
    tails = {tuple(ids[start + 1 :]) for ids in continuations_ids}
    answers = [ids[start] for ids in continuations_ids if len(ids) > start]
    if len(tails) != 1 or len(answers) != len(continuations_ids) or len(set(answers)) != len(answers):
        return None
    return list(continuations_ids[0][:start]), answers
