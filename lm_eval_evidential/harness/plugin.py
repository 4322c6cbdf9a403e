"""The plugin's hooks into lm_eval 0.4.x, and nothing else.

lm-eval 0.4.13 has no plugin discovery, so :mod:`lm_eval_evidential._import_hook` calls the
``on_*_imported`` functions below when the matching lm_eval module is first imported:

- ``lm_eval.models``: registers ``--model evidential`` (a lazy string target).
- ``lm_eval.tasks.manager``: a ``TaskManager`` that indexes lm_eval's own tasks
  (``include_defaults=True``) also indexes this package's task folder, after lm_eval's and
  before the user's ``include_path`` (a user's task of the same name wins). Arguments,
  positional or not, and ``tm.include_path`` are exactly as stock; ``include_defaults=False``
  is untouched. Every TaskManager resolves ``<stock task>_edl`` to that task's lettered view when
  asked for it by name (:mod:`lm_eval_evidential.harness.lettered`); nothing more is indexed.
- ``lm_eval.evaluator``: ``simple_evaluate`` with ``--model evidential`` first checks that the
  output folder can be written (before any weights load); after ``evaluate()`` returns,
  :func:`lm_eval_evidential.harness.evaluation.complete`
  builds the evaluation's records (the path is described in :mod:`lm_eval_evidential.harness.evidence`).
- ``lm_eval.loggers.evaluation_tracker``: ``save_results_aggregated`` writes those records
  into the results folder first, then lets the harness write ``results_<date_id>.json``,
  which names them under ``evidential_records``; with ``--hf_hub_log_args push_results_to_hub=True``
  the records are pushed beside it.

If lm_eval's internals moved (another harness version), :func:`check_harness` makes
``--model evidential`` fail at once with one line naming the supported versions and the
``--include_path`` fallback. Each function is idempotent.
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
import time
import weakref
from pathlib import Path

from lm_eval_evidential import errors
from lm_eval_evidential.errors import HarnessVersionError
from lm_eval_evidential.harness import TASKS_DIR, tasks_dir  # noqa: F401 (plugin.tasks_dir: the folder, for callers)

MODEL_NAME = "evidential"
MODEL_TARGET = "lm_eval_evidential.harness.model:EvidentialLM"
# --model evidential-vllm: the same scoring on vLLM (harness/vllm_model.py); vLLM is imported only when it is used.
VLLM_MODEL_NAME = "evidential-vllm"
VLLM_MODEL_TARGET = "lm_eval_evidential.harness.vllm_model:EvidentialVLLM"
# lm_eval modules this plugin hooks, and the attribute each must define.
HOOKED = {
    "lm_eval.models": None,
    "lm_eval.tasks.manager": "TaskManager",
    "lm_eval.evaluator": "evaluate",
    "lm_eval.loggers.evaluation_tracker": "EvaluationTracker",
    "lm_eval.config.evaluate_config": "EvaluatorConfig",
}
# A temp file left by an interrupted records write is removed by the next run once it is this old.
STALE_TEMP_SECONDS = 600

logger = logging.getLogger(__name__)
_applied: set[str] = set()
_task_managers: list[weakref.ref] = []  # the newest TaskManager that indexed this package's tasks


def _patch(owner, name: str, make_wrapper) -> None:
    current = getattr(owner, name)
    if getattr(current, "_evidential_patched", False):
        return
    wrapper = functools.wraps(current)(make_wrapper(current))
    wrapper._evidential_patched = True
    setattr(owner, name, wrapper)


def on_models_imported(module) -> None:
    """Register ``--model evidential`` and ``--model evidential-vllm`` lazily (string targets: torch and
    vLLM load only when used).

    Done after lm_eval.models registered its own models, so the harness's lazy
    "import lm_eval.models when the registry is empty" still happens.
    """
    from lm_eval.api.registry import model_registry

    for name, target in ((MODEL_NAME, MODEL_TARGET), (VLLM_MODEL_NAME, VLLM_MODEL_TARGET)):
        if name not in model_registry:
            model_registry.register(name, target=target)
    _applied.add("lm_eval.models")


def on_task_manager_imported(module) -> None:
    """TaskManagers that include lm_eval's default tasks include this package's tasks too (unless the
    harness finds them itself, through the ``lm_eval.tasks`` entry point)."""
    from lm_eval_evidential.harness.lm_eval_compat import discovered_task_folders

    signature = inspect.signature(module.TaskManager.__init__)

    def make_wrapper(original):
        def __init__(self, *args, **kwargs):
            from lm_eval_evidential.harness.lettered import install

            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            _task_managers[:] = [weakref.ref(self)]  # the newest one, for nearest_task_names
            if not bound.arguments["include_defaults"]:
                original(self, *args, **kwargs)
                install(self)
                return
            given = bound.arguments["include_path"]
            user = [] if given is None else list(given) if isinstance(given, (list, tuple)) else [given]
            # a harness that reads our lm_eval.tasks entry point indexes the folder itself: not twice
            ours = [] if TASKS_DIR in discovered_task_folders(module) else [TASKS_DIR]
            bound.arguments["include_path"] = [*ours, *user]
            original(*bound.args, **bound.kwargs)
            self.include_path = given  # as the caller gave it
            install(self)

        return __init__

    def make_match_wrapper(original):
        def match_tasks(self, task_list):
            from lm_eval_evidential.harness.lettered import match_views

            if model_name(sys.argv[1:]) in (MODEL_NAME, VLLM_MODEL_NAME):
                install_one_line_errors()  # plain lm_eval checks the task names before any model is built

            return match_views(self, task_list, original(self, task_list))

        return match_tasks

    _patch(module.TaskManager, "__init__", make_wrapper)
    _patch(module.TaskManager, "match_tasks", make_match_wrapper)
    _applied.add("lm_eval.tasks.manager")


def on_evaluator_imported(module) -> None:
    """After ``evaluate()``: this evaluation's records and evidential metrics (harness.evaluation)."""
    signature = inspect.signature(module.evaluate)

    def make_wrapper(original):
        def evaluate(*args, **kwargs):
            from lm_eval_evidential.harness.evaluation import (
                align_length_normalised_metrics,
                check_requests,
                check_tasks,
                complete,
                evaluated_tasks,
            )

            arguments = signature.bind(*args, **kwargs)
            arguments.apply_defaults()
            settings = arguments.arguments
            lm = settings["lm"]
            ledger = getattr(lm, "evidence", None)
            if ledger is not None and hasattr(ledger, "take"):
                ledger.take()  # a failed earlier evaluation must not leak into this one
            for task in evaluated_tasks(settings["task_dict"]).values():
                if hasattr(task, "request_limit"):  # ID/OOD pairs take --limit per side
                    task.request_limit(settings["limit"])
            check_tasks(lm, settings["task_dict"])
            check_requests(lm, settings["task_dict"], settings["samples"])
            aligned = align_length_normalised_metrics(lm, settings["task_dict"])
            if aligned:
                logger.warning(
                    "--model evidential: acc_norm and acc_bytes of %s are the argmax accuracy (acc); length "
                    "normalisation means nothing for a K-class classifier (docs/tasks.md)",
                    ", ".join(aligned),
                )
            results = original(*args, **kwargs)
            return complete(
                lm,
                settings["task_dict"],
                results,
                apply_chat_template=settings["apply_chat_template"],
                system_instruction=settings["system_instruction"],
                fewshot_as_multiturn=settings["fewshot_as_multiturn"],
                samples=settings["samples"],
                limit=settings["limit"],
            )

        return evaluate

    _patch(module, "evaluate", make_wrapper)
    simple_signature = inspect.signature(module.simple_evaluate)

    def make_simple_wrapper(original):
        def simple_evaluate(*args, **kwargs):
            settings = simple_signature.bind(*args, **kwargs).arguments
            tracker = settings.get("evaluation_tracker")
            if _is_evidential(settings.get("model")):
                # a run of our model from here on: its checks below are one error: line under plain lm_eval too
                install_one_line_errors()
                check_run_limits(settings.get("limit"), settings.get("batch_size"))
                check_run_flags(settings)
            if _is_evidential(settings.get("model")) and tracker is not None:
                if tracker.output_path:
                    from lm_eval_evidential.files import check_writable_folder

                    check_writable_folder(tracker.output_path)  # before the weights load, not after the evaluation
                else:  # a tracker without a path (the CLI without --output_path) drops the records
                    no_output_path(settings.get("tasks"))
            return original(*args, **kwargs)

        return simple_evaluate

    _patch(module, "simple_evaluate", make_simple_wrapper)
    _applied.add("lm_eval.evaluator")


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
    checked once the tasks are built, before any question is scored: harness.evaluation.check_requests.)"""
    from lm_eval_evidential.errors import EvidentialInputError

    if settings.get("use_cache"):
        raise EvidentialInputError(
            "--use_cache cannot apply to --model evidential: lm_eval's response cache is keyed by the prompt "
            "only, so it would return numbers computed with other model settings (method, adapter, prior "
            "weight) and it cannot hold the evidence the records need; drop --use_cache"
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


def _is_evidential(model) -> bool:
    """``simple_evaluate``'s ``model`` is this package's (by name, or an instance of it)."""
    if isinstance(model, str):
        return model in (MODEL_NAME, VLLM_MODEL_NAME)
    return type(model).__module__.startswith("lm_eval_evidential.")


def on_evaluation_tracker_imported(module) -> None:
    """Records first, then the harness's results file (which names them)."""

    def make_wrapper(original):
        def save_results_aggregated(self, results=None, samples=None, *args, **kwargs):
            records = getattr(results, "records", None)
            folder = results_folder(self)
            written = {}
            if records and folder is not None:
                written = write_run_records(folder, records)
                results["evidential_records"] = {task: path.name for task, path in written.items()}
            elif records and NO_OUTPUT_PATH_POLICY == "warn":
                _say_at_exit(records_not_kept(list(records)))  # after the harness's table, the last thing printed
            try:
                outcome = original(self, results, samples, *args, **kwargs)
            except OSError as exc:  # the harness's own results file: a full disk or a file-size limit is the user's
                from lm_eval_evidential.files import write_error

                raise write_error(exc, exc.filename or folder) from exc
            if written and self.api and self.push_results_to_hub:
                push_run_records(self, written)
            return outcome

        return save_results_aggregated

    _patch(module.EvaluationTracker, "save_results_aggregated", make_wrapper)
    _applied.add("lm_eval.loggers.evaluation_tracker")


# ------------------------------------------------------------------- runs that keep nothing
#: What a ``--model evidential`` run without ``--output_path`` does: "warn" (plain ``lm_eval``: a warning before
#: the weights load and again at the end), "refuse" (``lm-eval-evidential eval``: an
#: :class:`~lm_eval_evidential.errors.OutputPathError` before the weights load) or "allow" (``eval`` with
#: :data:`NO_OUTPUT_PATH_FLAG`: the user asked for a run that keeps nothing).
NO_OUTPUT_PATH_POLICY = "warn"
NO_OUTPUT_PATH_FLAG = "--no_output_path"
_said_at_exit: list[str] = []


def _task_names(tasks) -> str:
    names = [t.get("task", "?") if isinstance(t, dict) else str(getattr(t, "task_name", t)) for t in tasks or []]
    return ", ".join(names) or "the tasks"


def no_output_path(tasks) -> None:
    """A ``--model evidential`` run without ``--output_path``, before any weights load: refused, warned about
    or allowed (:data:`NO_OUTPUT_PATH_POLICY`); :func:`records_not_kept` says it again at the end."""
    what = (
        f"no --output_path: the evidential records of {_task_names(tasks)} (records_<task>_<date_id>.parquet, "
        "the files every audit reads: ood, ksweep, report, calibration …) will not be written"
    )
    if NO_OUTPUT_PATH_POLICY == "refuse":
        from lm_eval_evidential.errors import OutputPathError

        raise OutputPathError(
            f"{what}; add --output_path DIR to keep them, or {NO_OUTPUT_PATH_FLAG} to run without keeping anything"
        )
    if NO_OUTPUT_PATH_POLICY == "warn":
        logging.getLogger("lm_eval.evidential").warning("%s; add --output_path DIR to keep them", what)


def records_not_kept(tasks) -> str:
    """The run's last line when it kept nothing (:func:`no_output_path` said it at the start too)."""
    return (
        f"WARNING: the evidential records of {_task_names(tasks)} were NOT written (no --output_path): only the "
        "table above is left, and no audit can read it. Re-run with --output_path DIR to keep them."
    )


def _say_at_exit(message: str) -> None:
    """Print ``message`` on stderr when the process ends: after the harness's results table, where it is read."""
    import atexit

    if not _said_at_exit:
        atexit.register(lambda: [print(line, file=sys.stderr) for line in _said_at_exit])
    _said_at_exit.append(message)


def on_config_imported() -> None:
    """The stock CLI checks its arguments (``--fewshot_as_multiturn`` without ``--apply_chat_template``, task
    names) before any model or task is built: a ``--model evidential`` command line gets its one-line errors
    from there on (stock models keep lm_eval's tracebacks)."""
    if model_name(sys.argv[1:]) in (MODEL_NAME, VLLM_MODEL_NAME):
        install_one_line_errors()
    _applied.add("lm_eval.config.evaluate_config")


def nearest_task_names(exc: Exception) -> str:
    """For lm_eval's ``ValueError("Tasks not found: a, b")``: ``"; did you mean …"`` with the nearest
    names the newest TaskManager indexed (difflib), else ``""``."""
    import difflib

    prefix = "Tasks not found: "
    manager = _task_managers[-1]() if _task_managers else None
    if not (isinstance(exc, ValueError) and str(exc).startswith(prefix)) or manager is None:
        return ""
    from lm_eval_evidential.harness.lettered import missing_view_hint

    known = list(manager.all_tasks)
    hints = []
    for name in str(exc)[len(prefix) :].split(", "):
        view_hint = missing_view_hint(name.strip())
        if view_hint is not None:
            hints.append(view_hint)
            continue
        # obqa -> obqa_edl: a shortened name is the start of the task's, too short for difflib's ratio
        close = sorted((k for k in known if k.startswith(name.strip() + "_")), key=len)[:3]
        close = close or difflib.get_close_matches(name.strip(), known, n=3, cutoff=0.7)
        hints.append(
            f"{name.strip()!r}: did you mean {' or '.join(close)}?" if close else f"{name.strip()!r}: no close name"
        )
    return f" ({'; '.join(hints)}; `lm_eval ls tasks` lists every task)"


#: The function that patches each hooked module, once it has executed.
ON_IMPORT = {
    "lm_eval.models": on_models_imported,
    "lm_eval.tasks.manager": on_task_manager_imported,
    "lm_eval.evaluator": on_evaluator_imported,
    "lm_eval.loggers.evaluation_tracker": on_evaluation_tracker_imported,
    "lm_eval.config.evaluate_config": lambda module: on_config_imported(),
}


def on_imported(name: str, module) -> None:
    """Patch the lm_eval module ``name`` that just executed (what :mod:`lm_eval_evidential._import_hook` calls)."""
    ON_IMPORT[name](module)


def supported_versions() -> str:
    """The lm-eval requirement this package declares (its one source of truth: the package metadata)."""
    from importlib.metadata import PackageNotFoundError, requires

    try:
        for requirement in requires("lm-eval-evidential") or []:
            if requirement.replace("_", "-").startswith("lm-eval") and "extra" not in requirement:
                return requirement.split(";")[0].strip()
    except PackageNotFoundError:
        pass
    return "lm-eval>=0.4.13,<0.5"


def check_harness(extra: tuple[str, ...] = ()) -> None:
    """Raise :class:`HarnessVersionError` (one line) unless every hook above, every lm_eval name the package
    uses (``lm_eval_compat``) and the ``extra`` ones (a backend's own) are in place.

    A hooked module imported without the import hook (``python -S``, ``LM_EVAL_EVIDENTIAL_DISABLE_HOOK``)
    is patched here, as the hook would have done.
    """
    import importlib

    import lm_eval

    from lm_eval_evidential.harness.lm_eval_compat import missing_internals

    missing = []
    for name, attribute in HOOKED.items():
        try:
            module = importlib.import_module(name)
        except ImportError:
            missing.append(name)
            continue
        if attribute is not None and not hasattr(module, attribute):
            missing.append(f"{name}.{attribute}")
            continue
        if name not in _applied and name in ON_IMPORT:
            ON_IMPORT[name](module)
        if name not in _applied:
            missing.append(f"{name} (not hooked)")
    missing += missing_internals() + (missing_internals(extra) if extra else [])
    if missing:
        raise HarnessVersionError(
            f"lm-eval-evidential cannot hook into lm-eval {getattr(lm_eval, '__version__', '?')} "
            f"({', '.join(missing)} moved or was not patched); supported: {supported_versions()}. "
            f"Fallback: run `lm-eval-evidential eval …`, or pass --include_path {TASKS_DIR} to lm_eval "
            "for the tasks (records are then not written)"
        )


def results_folder(tracker) -> Path | None:
    """The folder the harness writes results_<date_id>.json to (None without --output_path)."""
    if not tracker.output_path:
        return None
    path = Path(tracker.output_path)
    if path.suffix == ".json":
        return path.parent
    return path / str(tracker.general_config_tracker.model_name_sanitized)


def remove_stale_temp_files(folder: Path, *, older_than: float = STALE_TEMP_SECONDS) -> list[Path]:
    """Remove the hidden temp files (``.records_*.tmp``) an interrupted records write left in ``folder``.

    Only files untouched for ``older_than`` seconds: a younger one may belong to a run still writing.
    """
    removed = []
    now = time.time()
    for path in folder.glob(".records_*.tmp") if folder.is_dir() else []:
        try:
            if now - path.stat().st_mtime >= older_than:
                path.unlink()
                removed.append(path)
        except FileNotFoundError:
            continue
    if removed:
        logger.info("removed %d stale temporary records file(s) in %s", len(removed), folder)
    return removed


def write_run_records(folder: Path, records: dict) -> dict:
    """Write each task's records into ``folder`` (atomically, one date_id for the run); ``{task: path}``."""
    from dataclasses import replace
    from datetime import datetime

    from lm_eval_evidential import __version__
    from lm_eval_evidential.files import write_error
    from lm_eval_evidential.records import records_path, write_records

    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(exc, folder) from exc
    remove_stale_temp_files(folder)
    date_id = datetime.now().isoformat().replace(":", "-")  # the harness's own date_id format
    written = {}
    for task, task_records in records.items():
        meta = {**task_records.meta, "date_id": date_id, "package_version": __version__}
        path = write_records(records_path(folder, task, date_id), replace(task_records, meta=meta))
        logger.info("wrote %d %s records to %s", len(task_records), task, path)
        written[task] = path
    return written


def push_run_records(tracker, written: dict) -> None:
    """Upload the records files beside the results file the harness just pushed (``push_results_to_hub``).

    Same repository and folder as the harness's ``results_<date_id>.json`` (``<model_name>/``), so
    the ``evidential_records`` names in it resolve on the hub as they do on disk. Like the harness's
    own push, a failure is a warning: the files are on disk either way.
    """
    repo_id = tracker.results_repo if tracker.public_repo else tracker.results_repo_private
    model_name = str(tracker.general_config_tracker.model_name)
    try:
        for path in written.values():
            tracker.api.upload_file(
                repo_id=repo_id,
                path_or_fileobj=str(path),
                path_in_repo=f"{model_name}/{path.name}",
                repo_type="dataset",
                commit_message=f"Adding evidential records for {model_name}",
            )
        logger.info("pushed %d evidential records file(s) to %s", len(written), repo_id)
    except Exception as error:  # noqa: BLE001 - the harness treats a failed push the same way
        logger.warning("Could not push the evidential records to the Hugging Face Hub: %r", error)


# ---------------------------------------------------------------------------------- errors
#: The one line for a limit of this process that the stock CLI leaves as a traceback.
RESOURCE_ERRORS = {
    MemoryError: (
        "out of memory: this process may not allocate what the evaluation needs (an address-space limit, "
        "`ulimit -v`, or the machine's memory); raise the limit, or lower batch_size or max_length, or use a "
        "smaller model or dtype=bfloat16"
    ),
    RecursionError: (
        "an input is nested too deeply to read: a JSON or YAML argument or file (--metadata, --model_args, a "
        "task YAML, an adapter's JSON) nests beyond Python's recursion limit; flatten it"
    ),
}


def _out_of_address_space(exc: ImportError) -> bool:
    """A native library that could not be mapped for lack of address space (``ulimit -v``): the loader says
    ``failed to map segment from shared object`` or ``Cannot allocate memory``, not a missing module."""
    return any(text in str(exc) for text in ("failed to map segment", "Cannot allocate memory"))


def resource_error_text(exc: BaseException, argv: list[str]) -> str | None:
    """The one line for ``exc`` when it is a limit of this process (out of memory, an input nested too
    deeply) in a ``--model evidential`` run named by ``argv``; None otherwise (stock models keep lm_eval's
    own traceback; an ImportError of a missing module is a bug)."""
    if model_name(argv) not in (MODEL_NAME, VLLM_MODEL_NAME) or not isinstance(
        exc, (MemoryError, RecursionError, ImportError)
    ):
        return None
    if isinstance(exc, ImportError) and not _out_of_address_space(exc):
        return None
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return f"{RESOURCE_ERRORS[RecursionError if isinstance(exc, RecursionError) else MemoryError]} ({detail})"


def model_name(argv: list[str]) -> str | None:
    """The ``--model`` an lm_eval command line names (None when it names none)."""
    for i, arg in enumerate(argv):
        if arg == "--model" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--model="):
            return arg.split("=", 1)[1]
    return None


def stock_argument_text(exc: BaseException, argv: list[str]) -> str | None:
    """The one line for a ``ValueError`` the stock CLI raised checking its own arguments (``Tasks not found``,
    with the nearest names and why a lettered view was not found) in a ``--model evidential`` run named
    by ``argv``; None otherwise (stock models keep lm_eval's traceback)."""
    from lm_eval_evidential.harness.lm_eval_compat import stock_argument_error

    if model_name(argv) not in (MODEL_NAME, VLLM_MODEL_NAME) or not isinstance(exc, ValueError):
        return None
    said = stock_argument_error(exc, hint=nearest_task_names(exc))
    return None if said is None else str(said)


def _explain(exc: BaseException) -> str | None:
    argv = sys.argv[1:]
    return resource_error_text(exc, argv) or stock_argument_text(exc, argv)


def install_one_line_errors() -> None:
    """:func:`lm_eval_evidential.errors.install_one_line_errors`, plus the one line for a limit of this
    process (:func:`resource_error_text`) and for the stock CLI's own argument checks
    (:func:`stock_argument_text`) under plain ``lm_eval --model evidential``."""
    errors.install_one_line_errors(explain=_explain)
