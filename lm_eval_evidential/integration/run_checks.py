"""Harness arguments of an evidential run refused before the weights load, where lm_eval would reject them
only later (or with its own traceback). Stock models keep lm_eval's own handling."""

from __future__ import annotations

from pathlib import Path


def check_run_limits(limit, batch_size) -> None:
    """``--limit`` and ``--batch_size`` of an evidential run, refused before the weights load when they
    cannot describe a run: a limit of 0 or below (lm_eval would fail later with a traceback, or
    evaluate nothing), a batch size of 0 or below. (Stock models keep lm_eval's own handling.)"""
    from lm_eval_evidential.errors import EvidentialInputError

    if limit is not None:
        try:
            value = float(limit)
        except (TypeError, ValueError):
            value = float("nan")
        if not value > 0:
            raise EvidentialInputError(
                f"--limit {limit}: give a positive number of questions per task (e.g. --limit 100), or a fraction "
                "of each task below 1 (e.g. --limit 0.1); leave it out to evaluate every question"
            )
    text = str(batch_size).strip() if batch_size is not None else ""
    if text and not text.startswith("auto"):
        try:
            size = int(text)
        except ValueError:
            size = 0
        if size < 1:
            raise EvidentialInputError(
                f"--batch_size {batch_size}: give a positive whole number of questions per batch (e.g. "
                "--batch_size 8), or auto to find the largest that fits"
            )


def check_run_flags(settings: dict) -> None:
    """Harness flags of an evidential run that lm_eval would reject only after the weights load (or with its
    own traceback), refused before: ``--use_cache`` (its cache cannot hold evidence), ``--samples`` ids that
    are not doc ids (whole numbers >= 0: a negative one counts from the end and files another doc's answer
    under it), ``--apply_chat_template`` on a local tokenizer without a chat template. (Stock models keep
    lm_eval's own handling; ids beyond a task's docs and ``--num_fewshot`` beyond its few-shot docs are
    checked once the tasks are loaded, still before the weights: :func:`tasks_checked_before_the_weights`.)
    A negative ``--num_fewshot`` is refused here too (lm_eval would pass it to its sampler)."""
    from lm_eval_evidential.errors import EvidentialInputError

    if settings.get("use_cache"):
        raise EvidentialInputError(
            "--use_cache cannot apply to --model evidential: lm_eval's response cache is keyed by the prompt "
            "only, so it would return numbers computed with other model settings (method, adapter, prior "
            "weight) and it cannot hold the evidence the records need; drop --use_cache"
        )
    shots = settings.get("num_fewshot")
    if shots is not None and (isinstance(shots, bool) or not isinstance(shots, int) or shots < 0):
        raise EvidentialInputError(
            f"--num_fewshot {shots}: give a whole number of examples >= 0 (0: zero-shot), or leave it out for "
            "each task's own setting"
        )
    for task, ids in (settings.get("samples") or {}).items():
        bad = [i for i in ids if isinstance(i, bool) or not isinstance(i, int) or i < 0]
        if bad:
            raise EvidentialInputError(
                f"--samples: task {task!r}: {bad[0]!r} is not a doc id (a whole number >= 0, the doc's position in "
                "the evaluated split; a negative one would count from the end and file another doc's answer under "
                "it); give ids from 0"
            )
    if settings.get("apply_chat_template"):
        folder = _local_tokenizer_folder(settings.get("model_args"))
        if folder is not None and not _has_chat_template(folder):
            raise EvidentialInputError(
                f"--apply_chat_template: the tokenizer in {folder} has no chat template (no chat_template in its "
                "tokenizer_config.json, no chat_template.jinja); drop --apply_chat_template (with it "
                "--fewshot_as_multiturn), or pass a tokenizer that has one (--model_args tokenizer=…)"
            )


def tasks_checked_before_the_weights(settings: dict):
    """The tasks of an evidential run, loaded before the model is and checked (``--samples`` ids beyond a
    task's docs, a ``--num_fewshot`` (given, or a task's own) beyond its few-shot docs: integration.evaluation's
    ``check_request_ranges``), so that such a run is refused before the weights load, not after.

    ``simple_evaluate`` builds the model first and loads the tasks after; it is given back the TaskManager
    it would have used (``settings["task_manager"]``, or one built from the model_args and metadata as it
    builds one), whose ``load`` of the same task list returns the tasks loaded here: they are built once.
    """
    from lm_eval.tasks import TaskManager
    from lm_eval.utils import simple_parse_args_string

    from lm_eval_evidential.integration.evaluation import check_request_ranges

    tasks, manager = settings["tasks"], settings.get("task_manager")
    if manager is None:  # as simple_evaluate builds it
        model_args = settings.get("model_args")
        metadata = simple_parse_args_string(model_args) if isinstance(model_args, str) else model_args
        metadata = metadata if isinstance(metadata, dict) else {}
        manager = TaskManager(metadata=metadata | (settings.get("metadata") or {}))
    loaded = manager.load(tasks)
    check_request_ranges(loaded, settings.get("samples"), settings.get("num_fewshot"))

    def load(task_list):
        vars(manager).pop("load", None)  # once: the class's own load from here on
        return loaded if task_list is tasks else manager.load(task_list)

    manager.load = load
    return manager


def _local_tokenizer_folder(model_args) -> Path | None:
    """The local folder the tokenizer of ``model_args`` is read from, or None (a hub id, a GGUF file)."""
    from lm_eval.utils import simple_parse_args_string

    args = simple_parse_args_string(model_args) if isinstance(model_args, str) else dict(model_args or {})
    if args.get("gguf_file"):
        return None
    source = args.get("tokenizer") or args.get("pretrained")
    folder = Path(str(source)).expanduser() if source else None
    return folder if folder is not None and folder.is_dir() else None


def _has_chat_template(folder: Path) -> bool:
    import json

    if any((folder / name).is_file() for name in ("chat_template.jinja", "chat_template.json")):
        return True
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text())
    except (OSError, ValueError):
        return True  # unreadable here: the tokenizer's own load says what is wrong
    return bool(isinstance(config, dict) and config.get("chat_template"))
