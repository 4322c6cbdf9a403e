"""Loading the MCQA datasets (hub or offline mirror) and normalising them to one doc schema.

Every EDL task's docs have the same fields, whatever the source dataset:

    doc_id (int)          position among the task's evaluated docs (the harness's doc_id)
    source_id (str)       the dataset's own id, or "<config>/<row>" where it has none
    question (str)
    options (list[str])   the question's own options, K = len(options)
    letters (list[str])   the labels shown and scored: "A".."E" (ARC's "1".."4" become letters)
    gold (int)            index of the correct option
    k (int)
    answer_tokens (list[str])  the task's declared answer-token set (" A" …), for the model's checks

Converters (``process_*``) map one hub record to (source_id, question, options, raw_labels,
answer_key); they are named in each task YAML as ``process_docs``.

K-matched controls of an OOD task (:mod:`lm_eval_evidential.tasks.distractors`) bring its questions to
the ID task's K by removing wrong options only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from lm_eval_evidential.errors import DatasetError, MirrorFileNotFound
from lm_eval_evidential.params import Param

MIRROR_ENV = "EVIDENTIAL_DATA_DIR"
#: The bundled sample mirror (package data: questions written from templates, in the hub datasets' schemas).
BUNDLED_SAMPLES = Path(__file__).resolve().parents[1] / "samples"
#: huggingface_hub's switch that makes a missing dataset fail at once instead of after ~25 s of retries.
HUB_OFFLINE_ENV = "HF_HUB_OFFLINE"


logger = logging.getLogger(__name__)


Converted = tuple[str, str, list[str], list[str], Any]

# Line breaks as str.splitlines() knows them, with the blank space around them.
_LINE_BREAKS = re.compile(r"[ \t]*[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]+[ \t]*")


def shows_nothing(text: str) -> bool:
    r"""True when ``text`` shows nothing: white space and invisible characters only (a zero-width space,
    a byte-order mark, a soft hyphen, control characters), so an option made of it is empty to a reader.

    Examples
    --------
    >>> shows_nothing("\u200b"), shows_nothing(" \ufeff\n"), shows_nothing("0")
    (True, True, False)
    """
    return all(ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf", "Zs", "Zl", "Zp") for ch in text)


def on_one_line(text: str) -> str:
    r"""``text`` as one line of a prompt: each run of line breaks (and the blank space around it) one space.

    A lettered prompt shows one option per line (``A) …``); an option's own line breaks would start
    lines that read as the prompt's (another option, a forged ``Answer: B``).

    Examples
    --------
    >>> on_one_line("red\nAnswer: B")
    'red Answer: B'
    >>> on_one_line("plain")
    'plain'
    """
    return _LINE_BREAKS.sub(" ", text).strip() if _LINE_BREAKS.search(text) else text


def warn_option_layout(task: str, repeated: list[tuple[str, str]], multiline: list[tuple[str, str]]) -> None:
    """One warning per task for questions that repeat an option's text and for options shown on one line.

    Not errors (the question can still be scored), but identical options split their evidence and a
    gold answer among twins cannot be told apart; an option that spanned several lines is shown with
    its line breaks as spaces (:func:`on_one_line`). ``repeated``/``multiline``: (where, text) pairs.
    """
    if repeated:
        logger.warning(
            "%s: %d question(s) repeat an answer option's text, e.g. %s has %r twice; the model cannot tell "
            "those options apart — fix or drop those rows",
            task,
            len(repeated),
            repeated[0][0],
            repeated[0][1],
        )
    if multiline:
        logger.warning(
            "%s: %d answer option(s) span several lines, e.g. %s has %r; each is shown on one line (line breaks "
            "as spaces) so that no line of an option reads as a line of the prompt (another option, an "
            "'Answer:' line) — fix those rows to show them as written",
            task,
            len(multiline),
            multiline[0][0],
            multiline[0][1],
        )


def process_obqa(row: dict, index: int) -> Converted:
    return (
        str(row.get("id", index)),
        row["question_stem"],
        list(row["choices"]["text"]),
        list(row["choices"]["label"]),
        row["answerKey"],
    )


def process_arc(row: dict, index: int) -> Converted:
    return (
        str(row.get("id", index)),
        row["question"],
        list(row["choices"]["text"]),
        list(row["choices"]["label"]),
        row["answerKey"],
    )


process_csqa = process_arc


def process_csqa4(row: dict, index: int) -> Converted | None:
    """CSQA without option E; questions answered E are dropped (the paper's "removed E" control)."""
    source_id, question, options, labels, key = process_arc(row, index)
    if key == "E":
        return None
    keep = [i for i, label in enumerate(labels) if label != "E"]
    return source_id, question, [options[i] for i in keep], [labels[i] for i in keep], key


def process_mmlu(row: dict, index: int) -> Converted:
    options = list(row["choices"])
    labels = [chr(ord("A") + i) for i in range(len(options))]
    answer = row["answer"]
    key = labels[answer] if isinstance(answer, int) and 0 <= answer < len(labels) else answer
    return f"{row.get('subject', '')}/{index}", row["question"], options, labels, key


def normalise(
    rows: Iterable[dict],
    convert: Callable[[dict, int], Converted | None],
    *,
    task: str,
    answer_tokens: Sequence[str],
) -> list[dict]:
    """Convert and validate hub rows; K is each question's own option count, never padded."""
    docs: list[dict] = []
    repeated: list[tuple[str, str]] = []  # (where, option text) of questions that repeat an option
    multiline: list[tuple[str, str]] = []  # (where, option text) of questions with an option on several lines
    letters_all = [t.strip() for t in answer_tokens]
    for index, row in enumerate(rows):
        where = f"task {task!r}, dataset row {index}"
        try:
            converted = convert(row, index)
        except (KeyError, TypeError, AttributeError) as exc:
            raise DatasetError(
                f"{where}: record does not have the expected schema (missing/invalid {exc}); "
                f"got {f'keys {sorted(row)}' if isinstance(row, dict) else f'a JSON {type(row).__name__}'}. "
                "Mirror files must keep the hub dataset's own schema."
            ) from exc
        if converted is None:
            continue
        source_id, question, options, labels, key = converted
        where = f"task {task!r}, doc {source_id!r} (row {index})"
        k = len(options)
        if k == 0:
            raise DatasetError(f"{where}: the question has no answer options; fix or drop the row")
        if len(labels) != k:
            raise DatasetError(f"{where}: {k} options but {len(labels)} labels {labels}")
        missing = next((i for i, o in enumerate(options) if o is None or isinstance(o, (dict, list))), None)
        if missing is not None:
            raise DatasetError(
                f"{where}: answer option {missing} is {options[missing]!r}, not a text: {options!r}; "
                "fix or drop the row"
            )
        if any(shows_nothing(str(o)) for o in options):
            raise DatasetError(
                f"{where}: an answer option is empty or shows nothing (white space or invisible characters "
                f"only): {options!r}; fix or drop the row"
            )
        shown = [on_one_line(str(o)) for o in options]
        multiline += [(where, str(o)) for o, one in zip(options, shown) if one != str(o)][:1]
        if len(set(labels)) != k:
            raise DatasetError(f"{where}: duplicate answer labels {labels}; labels must be distinct")
        if k > len(answer_tokens):
            raise DatasetError(
                f"{where}: {k} options {labels} but the task declares only {len(answer_tokens)} "
                f"answer tokens {list(answer_tokens)}; extend metadata.answer_tokens in the task YAML "
                "or drop the question"
            )
        if str(key) not in [str(x) for x in labels]:
            raise DatasetError(
                f"{where}: answer key {key!r} is not among the labels {labels}; fix the row's answer key"
            )
        texts = [o.strip() for o in shown]
        if len(set(texts)) != k:
            repeated.append((where, next(t for t in texts if texts.count(t) > 1)))
        gold = [str(x) for x in labels].index(str(key))
        docs.append(
            {
                "doc_id": len(docs),
                "source_id": source_id,
                "question": str(question),
                "options": shown,
                "letters": letters_all[:k],
                "gold": gold,
                "k": k,
                "answer_tokens": list(answer_tokens),
            }
        )
    warn_option_layout(task, repeated, multiline)
    return docs


def mirror_file(root: str | os.PathLike, dataset_path: str, config: str | None, split: str) -> Path:
    return Path(root) / dataset_path / (config or "default") / f"{split}.jsonl"


def read_jsonl(path: Path, *, task: str) -> list[dict]:
    from lm_eval_evidential.files import open_regular_file

    if not path.is_file() and not path.exists():
        raise MirrorFileNotFound(
            f"task {task!r}: offline mirror file {path} not found ({MIRROR_ENV}={os.environ.get(MIRROR_ENV)}); "
            f"write the split there in the hub dataset's schema, one JSON record per line, or unset {MIRROR_ENV} "
            "to use the hub"
        )
    rows = []
    with open_regular_file(path, what=f"task {task!r}: offline mirror file") as fh:  # a FIFO or folder: said
        for lineno, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DatasetError(
                    f"task {task!r}: {path}:{lineno} is not UTF-8 text ({exc.reason}); re-export the file as UTF-8"
                ) from exc
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                cut = "" if raw.endswith(b"\n") else "; the file ends inside this line (truncated?) — copy it again"
                raise DatasetError(f"task {task!r}: {path}:{lineno} is not valid JSON ({exc.msg}){cut}") from exc
    return rows


def offline_hint(task: str, dataset_path: str, config: str | None, split: str, exc: Exception) -> str:
    """The one line for a dataset the hub did not give: what failed, the mirror file that would replace it,
    the bundled samples' folder as a ready mirror, and ``HF_HUB_OFFLINE=1`` against the hub's retries."""
    where = mirror_file("", dataset_path, config, split)
    retries = "" if os.environ.get(HUB_OFFLINE_ENV) else f" ({HUB_OFFLINE_ENV}=1 also skips the hub's retries)"
    return (
        f"task {task!r}: cannot download {dataset_path} ({exc}). To run offline, set {MIRROR_ENV} to a folder "
        f"holding {where} in the hub dataset's own schema, e.g. the bundled samples (questions written from "
        f"templates, for trying the tool, not for results): {MIRROR_ENV}={BUNDLED_SAMPLES}{retries}; "
        "docs/tasks.md, 'Offline mirror'"
    )


def load_split(
    *, task: str, dataset_path: str, configs: Sequence[str | None], split: str, dataset_kwargs: dict | None = None
) -> list[dict]:
    """Rows of ``split`` from the offline mirror (if ``$EVIDENTIAL_DATA_DIR`` is set) or the hub.

    Several configs (MMLU's maths subjects) are concatenated in the order given. A task whose
    ``dataset_kwargs`` name ``data_files`` (a user's own files) is read from them, mirror or not.
    """
    kwargs = dict(dataset_kwargs or {})
    root = None if kwargs.get("data_files") else os.environ.get(MIRROR_ENV)
    rows: list[dict] = []
    for config in configs:
        if root:
            part = read_jsonl(mirror_file(root, dataset_path, config, split), task=task)
        else:
            import datasets

            try:
                part = list(datasets.load_dataset(dataset_path, config, split=split, **kwargs))
            except ConnectionError as exc:  # no network (datasets raises the builtin ConnectionError)
                raise DatasetError(offline_hint(task, dataset_path, config, split, exc)) from exc
        rows.extend(part)
    if not rows:
        raise DatasetError(
            f"task {task!r}: split {split!r} of {dataset_path} {list(configs)} is empty; "
            "check the mirror file or the split name in the task YAML"
        )
    return rows


def _column(row: dict, path: str):
    """``row[path]``, where ``path`` may reach into nested fields with dots (``choices.text``)."""
    value = row
    for part in path.split("."):
        value = value[part]
    return value


def field_converter(fields: dict, *, task: str) -> Callable[[dict, int], Converted]:
    """A converter from a YAML column map (``metadata.fields``) instead of a Python function.

    Keys: ``question``, ``options`` (a list column), ``answer`` (the correct option's label, or
    its 0-based index), optional ``labels`` (a list column of the options' labels; default
    A, B, C, …) and ``id``. Values are column names, dotted for nested fields.
    """
    missing = [key for key in ("question", "options", "answer") if key not in fields]
    if missing:
        raise DatasetError(
            f"task {task!r}: metadata.fields lacks {missing}; map question, options and answer to columns"
        )

    def convert(row: dict, index: int) -> Converted:
        options = list(_column(row, fields["options"]))
        labels = (
            list(_column(row, fields["labels"]))
            if "labels" in fields
            else [chr(ord("A") + i) for i in range(len(options))]
        )
        answer = _column(row, fields["answer"])
        if isinstance(answer, int) and not isinstance(answer, bool) and 0 <= answer < len(labels):
            answer = labels[answer]
        source_id = str(_column(row, fields["id"])) if "id" in fields else str(index)
        return source_id, _column(row, fields["question"]), options, labels, answer

    return convert


def data_origin(dataset_kwargs: dict | None) -> str:
    """Where a task's rows come from: ``hub``, ``mirror <root>`` or ``local files``."""
    if (dataset_kwargs or {}).get("data_files"):
        return "local files"
    root = os.environ.get(MIRROR_ENV)
    return f"mirror {Path(root).resolve()}" if root else "hub"


def content_sha256(rows: Sequence[dict]) -> str:
    """The short content hash of a list of rows or docs (key order does not matter)."""

    text = json.dumps(list(rows), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def data_source(config, docs: Sequence[dict], rows_sha256: str | None = None) -> dict:
    """Provenance of a task's evaluated docs: origin, dataset, revision or files, and content hashes.

    ``sha256`` hashes the task's docs as evaluated, ``rows_sha256`` (:func:`content_sha256` of the
    split's rows as the dataset gives them, before any task's processing) the questions' identity, the same for this
    package's task on a split and a lettered view of a stock task on that split (``arc_c_edl`` and
    ``arc_challenge_edl``), whose docs differ in form.
    """
    kwargs = dict(config.dataset_kwargs or {})
    return {
        "origin": data_origin(kwargs),
        "dataset": config.dataset_path,
        "configs": list((config.metadata or {}).get("dataset_configs") or [config.dataset_name]),
        "revision": kwargs.get("revision"),
        "files": kwargs.get("data_files"),
        "sha256": content_sha256(docs),
        "rows_sha256": rows_sha256,
    }


def metadata_value(task: str, name: str, value, param: Param, error: type[DatasetError] = DatasetError):
    """``metadata.<name>`` of ``task`` if its declaration ``param`` accepts ``value``, else ``error``: one line
    naming the task, the value, what it must be and where to fix it (the task's YAML or ``--metadata``)."""
    if not param.allows(value):
        raise error(f"task {task!r}: metadata.{param.message(name, value)}; fix the task YAML or --metadata")
    return value
