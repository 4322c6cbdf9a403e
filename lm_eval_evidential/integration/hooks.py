"""The plugin's hooks into lm_eval 0.4.x, and nothing else.

lm-eval 0.4.13 has no plugin discovery, so :mod:`lm_eval_evidential._import_hook` calls the
``on_*_imported`` functions below when the matching lm_eval module is first imported:

- ``lm_eval.models``: registers ``--model evidential`` (a lazy string target).
- ``lm_eval.tasks.manager``: a ``TaskManager`` that indexes lm_eval's own tasks
  (``include_defaults=True``) also indexes this package's task folder, after lm_eval's and
  before the user's ``include_path`` (a user's task of the same name wins). Arguments,
  positional or not, and ``tm.include_path`` are exactly as stock; ``include_defaults=False``
  is untouched. Every TaskManager resolves ``<stock task>_edl`` to that task's lettered view when
  asked for it by name (:mod:`lm_eval_evidential.tasks.stock`); nothing more is indexed.
- ``lm_eval.evaluator``: ``simple_evaluate`` with ``--model evidential`` first checks that the
  output folder can be written (before any weights load); after ``evaluate()`` returns,
  :func:`lm_eval_evidential.integration.evaluation.complete`
  builds the evaluation's records (the path is described in :mod:`lm_eval_evidential.integration.evidence`).
- ``lm_eval.loggers.evaluation_tracker``: ``save_results_aggregated`` writes those records
  into the results folder first (:mod:`~lm_eval_evidential.integration.run_output`), then lets the
  harness write ``results_<date_id>.json``, which names them under ``evidential_records``; with
  ``--hf_hub_log_args push_results_to_hub=True`` the records are pushed beside it
  (:mod:`~lm_eval_evidential.integration.hub`).

The records reach ``save_results_aggregated`` on the results dict itself
(:class:`~lm_eval_evidential.integration.evaluation.EvidentialResults`, a ``dict`` with a ``records``
attribute): lm-eval 0.4.13 hands the dict ``evaluate()`` returns, through ``simple_evaluate``, to
the tracker and has no other channel for a run's artifacts (the tracker is not given to
``evaluate()``); a key in the dict would be written into the results JSON and seen by every
consumer, and a table beside it keyed by the dict would outlive runs that are never saved.

If lm_eval's internals moved (another harness version), :func:`check_harness` makes
``--model evidential`` fail at once with one line naming the supported versions and the
``--include_path`` fallback. Each function is idempotent; what they keep between calls is the
run policy (:data:`~lm_eval_evidential.integration.policy.RUN_POLICY`).
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
import weakref

from lm_eval_evidential.errors import HarnessVersionError
from lm_eval_evidential.integration import MODEL_NAME, MODEL_NAMES, MODEL_TARGET, VLLM_MODEL_NAME, VLLM_MODEL_TARGET
from lm_eval_evidential.integration.command_line import names_our_model
from lm_eval_evidential.integration.error_lines import install_one_line_errors
from lm_eval_evidential.integration.hub import push_run_records
from lm_eval_evidential.integration.policy import RUN_POLICY
from lm_eval_evidential.integration.run_checks import (
    check_run_flags,
    check_run_limits,
    tasks_checked_before_the_weights,
)
from lm_eval_evidential.integration.run_output import (
    no_output_path,
    records_not_kept,
    results_folder,
    write_run_records,
)
from lm_eval_evidential.tasks import TASKS_DIR

# lm_eval modules this plugin hooks, and the attribute each must define.
HOOKED = {
    "lm_eval.models": None,
    "lm_eval.tasks.manager": "TaskManager",
    "lm_eval.evaluator": "evaluate",
    "lm_eval.loggers.evaluation_tracker": "EvaluationTracker",
    "lm_eval.config.evaluate_config": "EvaluatorConfig",
}

logger = logging.getLogger(__name__)


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
    RUN_POLICY.hooked.add("lm_eval.models")


def on_task_manager_imported(module) -> None:
    """TaskManagers that include lm_eval's default tasks include this package's tasks too (unless the
    harness finds them itself, through the ``lm_eval.tasks`` entry point)."""
    from lm_eval_evidential.lm_eval_compat import discovered_task_folders

    signature = inspect.signature(module.TaskManager.__init__)

    def make_wrapper(original):
        def __init__(self, *args, **kwargs):
            from lm_eval_evidential.tasks.stock import install

            bound = signature.bind(self, *args, **kwargs)
            bound.apply_defaults()
            RUN_POLICY.task_manager = weakref.ref(self)  # the newest one, for nearest_task_names
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
            from lm_eval_evidential.tasks.stock import match_views

            if names_our_model(sys.argv[1:]):
                install_one_line_errors()  # plain lm_eval checks the task names before any model is built

            return match_views(self, task_list, original(self, task_list))

        return match_tasks

    _patch(module.TaskManager, "__init__", make_wrapper)
    _patch(module.TaskManager, "match_tasks", make_match_wrapper)
    RUN_POLICY.hooked.add("lm_eval.tasks.manager")


def on_evaluator_imported(module) -> None:
    """After ``evaluate()``: this evaluation's records and evidential metrics (integration.evaluation)."""
    signature = inspect.signature(module.evaluate)

    def make_wrapper(original):
        def evaluate(*args, **kwargs):
            from lm_eval_evidential.integration.evaluation import (
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
            bound = simple_signature.bind(*args, **kwargs)
            settings = bound.arguments
            tracker = settings.get("evaluation_tracker")
            if _is_evidential(settings.get("model")):
                # a run of our model from here on: its checks below are one error: line under plain lm_eval too
                install_one_line_errors()
                check_run_limits(settings.get("limit"), settings.get("batch_size"))
                check_run_flags(settings)
                if isinstance(settings.get("model"), str) and settings.get("tasks"):  # the weights load next
                    from lm_eval.api.registry import get_model

                    # the backend's module first (no weights): a missing vLLM is said before the tasks load
                    get_model(settings["model"])
                    settings["task_manager"] = tasks_checked_before_the_weights(settings)
                    args, kwargs = bound.args, bound.kwargs
            if _is_evidential(settings.get("model")) and tracker is not None:
                if tracker.output_path:
                    from lm_eval_evidential.files import check_writable_folder

                    check_writable_folder(tracker.output_path)  # before the weights load, not after the evaluation
                else:  # a tracker without a path (the CLI without --output_path) drops the records
                    no_output_path(settings.get("tasks"))
            return original(*args, **kwargs)

        return simple_evaluate

    _patch(module, "simple_evaluate", make_simple_wrapper)
    RUN_POLICY.hooked.add("lm_eval.evaluator")


def _is_evidential(model) -> bool:
    """``simple_evaluate``'s ``model`` is this package's (by name, or an instance of it)."""
    if isinstance(model, str):
        return model in MODEL_NAMES
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
            elif records and RUN_POLICY.no_output_path == "warn":
                # after the harness's table: the last thing printed
                RUN_POLICY.say_at_exit(records_not_kept(list(records)))
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
    RUN_POLICY.hooked.add("lm_eval.loggers.evaluation_tracker")


def on_config_imported() -> None:
    """The stock CLI checks its arguments (``--fewshot_as_multiturn`` without ``--apply_chat_template``, task
    names) before any model or task is built: a ``--model evidential`` command line gets its one-line errors
    from there on (stock models keep lm_eval's tracebacks)."""
    if names_our_model(sys.argv[1:]):
        install_one_line_errors()
    RUN_POLICY.hooked.add("lm_eval.config.evaluate_config")


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

    from lm_eval_evidential.lm_eval_compat import (
        INTERNALS,
        PUBLIC,
        dependency_install,
        missing_dependencies,
        missing_internals,
    )

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
        if name not in RUN_POLICY.hooked and name in ON_IMPORT:
            ON_IMPORT[name](module)
        if name not in RUN_POLICY.hooked:
            missing.append(f"{name} (not hooked)")
    missing += missing_internals() + (missing_internals(extra) if extra else [])
    absent = missing_dependencies([*HOOKED, *INTERNALS, *PUBLIC, *extra]) if missing else {}
    if absent:  # lm_eval is where it was, but cannot be imported here: name what to install, not a version
        version = getattr(lm_eval, "__version__", "?")
        needs = "; ".join(f"{module}, needed by {importer}" for module, importer in absent.items())
        what = "a module it needs is" if len(absent) == 1 else "modules it needs are"
        raise HarnessVersionError(
            f"lm-eval {version} cannot be imported: {what} not installed ({needs}); install "
            f"{'it' if len(absent) == 1 else 'them'}: {dependency_install(absent, version)}"
        )
    if missing:
        raise HarnessVersionError(
            f"lm-eval-evidential cannot hook into lm-eval {getattr(lm_eval, '__version__', '?')} "
            f"({', '.join(missing)} moved or was not patched); supported: {supported_versions()}. "
            f"Fallback: run `lm-eval-evidential eval …`, or pass --include_path {TASKS_DIR} to lm_eval "
            "for the tasks (records are then not written)"
        )
