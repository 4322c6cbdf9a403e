"""Lettered views of lm-eval's stock multiple-choice tasks: ``--tasks hellaswag_edl``.

A stock multiple-choice task that asks by answer *text* (arc_challenge, hellaswag, piqa, sciq,
truthfulqa_mc1, winogrande, …) cannot be scored by an EDL checkpoint, which is a K-class
classifier over answer letters. Its lettered view, named ``<stock task>_edl``, shows the same
questions with lettered options in this package's prompt (the family of obqa_edl, McNamara 2026
Table 7) and scores the answers " A", " B", … — each question with its own K.

Nothing is indexed ahead of time: the TaskManager's index is wrapped
(:class:`~lm_eval_evidential.tasks.stock.LetteredIndex`) so that a name ``X_edl`` that is not already a
task, where ``X`` is, resolves to a view on the first lookup. Every other name, and every TaskManager
that is never asked for a view, costs
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

from lm_eval_evidential.params import Integral, Interval, Param
from lm_eval_evidential.tasks import datasets as mcqa_datasets
from lm_eval_evidential.tasks.distractors import removal_order
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


#: ``metadata.shuffle_seed``: any integer (it is hashed with each question's id).
SHUFFLE_SEED = Param(Interval(Integral), example="0")


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
    (:func:`~lm_eval_evidential.tasks.distractors.removal_order` with the positions as labels): the
    same on every run and machine, independent of the option texts and of which one is gold, so
    a gold stored at a fixed stock position lands on each letter equally often over questions.

    Examples
    --------
    >>> order = shuffled_order("Which gas do plants take in?", 4)
    >>> sorted(order), order == shuffled_order("Which gas do plants take in?", 4)
    ([0, 1, 2, 3], True)
    """
    return removal_order(question, [str(i) for i in range(k)], seed=seed)


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

    Built by :class:`~lm_eval_evidential.tasks.stock.LetteredIndex` with ``metadata.stock_task`` and a
    ``stock_builder`` (the TaskManager's way to build the stock task); the stock task is built, and its data
    loaded, when the view's dataset is.
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
        return mcqa_datasets.metadata_value(self.config.task, "shuffle_seed", seed, SHUFFLE_SEED, LetteredViewError)

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


# ------------------------------------------------------------------ "(A)"-style labels
