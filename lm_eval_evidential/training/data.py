"""The training data: a task's docs, tokenised the way the evaluator does, and their batches.

The prompt is ``task.doc_to_text(doc)``, the K answers are ``target_delimiter + choice``
(" A".." E"), and the answer ids and left padding come from
:mod:`lm_eval_evidential.modeling.encoding`, the functions evaluation uses. K may vary per
question: batches are padded to the batch's largest K (the padded classes are masked by the loss).
"""

from __future__ import annotations

from lm_eval_evidential.errors import InputNotFoundError, InvalidValueError
from lm_eval_evidential.modeling.encoding import answer_token_ids, left_pad


def load_task(task_name: str):
    from lm_eval.tasks import TaskManager

    from lm_eval_evidential.tasks import tasks_dir

    meta = {"load_all_splits": True}
    # Our own folder alone indexes in milliseconds; the full harness index takes seconds.
    manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata=meta)
    if task_name not in manager.all_tasks:
        manager = TaskManager(metadata=meta)
    if not manager.match_tasks([task_name]):  # lm-eval's own lookup (lettered views included)
        import difflib

        close = difflib.get_close_matches(task_name, list(manager.all_tasks), n=3, cutoff=0.7)
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        raise InputNotFoundError(
            f"--task {task_name!r}: no such task; {hint}`lm_eval ls tasks` lists them; train and laplace "
            "read no --include_path (name a task of lm-eval or of this package)"
        )
    loaded = manager.load([task_name])["tasks"]
    if task_name not in loaded:
        raise InvalidValueError(f"task {task_name!r} is not a single task (a group?); pass one task such as obqa_edl")
    return loaded[task_name]


def task_name_of(task) -> str:
    return str(getattr(getattr(task, "config", None), "task", None) or getattr(task, "task_name", "task"))


def training_docs(task, split: str | None = None) -> list[dict]:
    """The docs of ``split`` (default: the task's training split), loading it if needed."""
    name = task_name_of(task)
    split = split or task.config.training_split
    if not split:
        raise InvalidValueError(f"task {name!r} declares no training_split; pass --train-split")
    if split == task.config.training_split and task.has_training_docs():
        return list(task.training_docs())  # with the task's own process_docs, where it has one
    if split == task.config.validation_split and task.has_validation_docs():
        return list(task.validation_docs())
    dataset = getattr(task, "dataset", None) or {}
    config = task.config
    declared = sorted({config.training_split, config.validation_split, config.test_split} - {None} | set(dataset))
    if split not in dataset and split not in declared:  # a typo, not a split left unloaded
        raise InvalidValueError(
            f"task {name!r} has no split {split!r}; its splits are {', '.join(declared)}: pass one of them to "
            "--train-split"
        )
    if split not in dataset:
        raise InvalidValueError(
            f"task {name!r}: split {split!r} is not loaded (loaded: {sorted(dataset)}); load the task with "
            "TaskManager(metadata={'load_all_splits': True}) or pass the task name to train()"
        )
    return list(dataset[split])


def encode_examples(
    task, docs: list[dict], tokenizer, max_length: int | None = None
) -> tuple[list[dict], dict[str, int]]:
    """Tokenise ``docs`` the way the evaluator does: (examples, {answer string: token id}).

    Each example: ``input_ids`` (prompt tokens, the tokenizer's default special tokens, as
    lm-eval's ``tok_encode``), ``answer_ids`` (K ids), ``target`` (gold index), ``k``.
    """
    from tqdm import tqdm

    from lm_eval_evidential.modeling.quiet import progress_options

    name = task_name_of(task)
    delimiter = task.config.target_delimiter
    prompts, choices, golds = [], [], []
    for doc in docs:
        prompts.append(task.doc_to_text(doc))
        choices.append([delimiter + str(c) for c in task.doc_to_choice(doc)])
        golds.append(int(task.doc_to_target(doc)))
    prompt_ids = tokenizer(prompts)["input_ids"]
    whole_ids = iter(tokenizer([p + c for p, cs in zip(prompts, choices) for c in cs])["input_ids"])

    answer_map: dict[str, int] = {}
    examples = []
    bar = tqdm(docs, desc=f"{name}: encoding", unit="doc", **{"mininterval": 1.0, **progress_options()})
    for i, doc in enumerate(bar):
        where = f"task {name!r} doc {doc.get('doc_id', i)}"
        ids = list(prompt_ids[i])
        if max_length is not None and len(ids) > max_length:
            raise InvalidValueError(
                f"{where}: prompt is {len(ids)} tokens, longer than max_length={max_length}; raise --max-length "
                "(training never truncates a question)"
            )
        answers = answer_token_ids(ids, [next(whole_ids) for _ in choices[i]], choices[i], where)
        for cont, tid in zip(choices[i], answers):
            if answer_map.setdefault(cont, tid) != tid:
                raise InvalidValueError(
                    f"{where}: answer {cont!r} encodes as token {tid} here but {answer_map[cont]} elsewhere"
                )
        if not 0 <= golds[i] < len(answers):
            raise InvalidValueError(f"{where}: gold index {golds[i]} is not one of its {len(answers)} options")
        examples.append({"input_ids": ids, "answer_ids": answers, "target": golds[i], "k": len(answers)})
    return examples, answer_map


class LeftPadCollator:
    """Batches of examples → left-padded tensors (:func:`modeling.encoding.left_pad`) and answer ids."""

    def __init__(self, pad_token_id: int):
        self.pad_token_id = int(pad_token_id)

    def __call__(self, rows: list[dict]) -> dict:
        import torch

        k_max = max(r["k"] for r in rows)
        # Padded classes reuse a real id: a valid index whose value the class mask discards.
        answer_ids = [r["answer_ids"] + r["answer_ids"][:1] * (k_max - r["k"]) for r in rows]
        return {
            **left_pad([r["input_ids"] for r in rows], self.pad_token_id),
            "answer_ids": torch.tensor(answer_ids, dtype=torch.long),
            "k": torch.tensor([r["k"] for r in rows], dtype=torch.long),
            "target": torch.tensor([r["target"] for r in rows], dtype=torch.long),
        }
