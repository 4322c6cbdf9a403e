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
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

MIRROR_ENV = "EVIDENTIAL_DATA_DIR"


class DatasetError(ValueError):
    """A dataset row or split cannot be used; the message names task, doc and value, and the fix."""


Converted = tuple[str, str, list[str], list[str], Any]


def process_obqa(row: dict, index: int) -> Converted:
    return (str(row.get("id", index)), row["question_stem"], list(row["choices"]["text"]),
            list(row["choices"]["label"]), row["answerKey"])  # fmt: skip


def process_arc(row: dict, index: int) -> Converted:
    return (str(row.get("id", index)), row["question"], list(row["choices"]["text"]),
            list(row["choices"]["label"]), row["answerKey"])  # fmt: skip


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
    letters_all = [t.strip() for t in answer_tokens]
    for index, row in enumerate(rows):
        where = f"task {task!r}, dataset row {index}"
        try:
            converted = convert(row, index)
        except (KeyError, TypeError) as exc:
            raise DatasetError(
                f"{where}: record does not have the expected schema (missing/invalid {exc}); "
                f"got keys {sorted(row)}. Mirror files must keep the hub dataset's own schema."
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
        if any(not str(o).strip() for o in options):
            raise DatasetError(f"{where}: an answer option is empty: {options!r}; fix or drop the row")
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
        gold = [str(x) for x in labels].index(str(key))
        docs.append(
            {
                "doc_id": len(docs),
                "source_id": source_id,
                "question": str(question),
                "options": [str(o) for o in options],
                "letters": letters_all[:k],
                "gold": gold,
                "k": k,
                "answer_tokens": list(answer_tokens),
            }
        )
    return docs


def mirror_file(root: str | os.PathLike, dataset_path: str, config: str | None, split: str) -> Path:
    return Path(root) / dataset_path / (config or "default") / f"{split}.jsonl"


def read_jsonl(path: Path, *, task: str) -> list[dict]:
    if not path.is_file():
        raise FileNotFoundError(
            f"task {task!r}: offline mirror file {path} not found ({MIRROR_ENV}={os.environ.get(MIRROR_ENV)}); "
            f"write the split there in the hub dataset's schema, one JSON record per line, or unset {MIRROR_ENV} to use the hub"
        )
    rows = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DatasetError(f"task {task!r}: {path}:{lineno} is not valid JSON ({exc.msg})") from exc
    return rows


def load_split(
    *, task: str, dataset_path: str, configs: Sequence[str | None], split: str
) -> list[dict]:
    """Rows of ``split`` from the offline mirror (if ``$EVIDENTIAL_DATA_DIR`` is set) or the hub.

    Several configs (MMLU's maths subjects) are concatenated in the order given.
    """
    root = os.environ.get(MIRROR_ENV)
    rows: list[dict] = []
    for config in configs:
        if root:
            part = read_jsonl(mirror_file(root, dataset_path, config, split), task=task)
        else:
            import datasets

            part = list(datasets.load_dataset(dataset_path, config, split=split))
        rows.extend(part)
    if not rows:
        raise DatasetError(
            f"task {task!r}: split {split!r} of {dataset_path} {list(configs)} is empty; "
            "check the mirror file or the split name in the task YAML"
        )
    return rows
