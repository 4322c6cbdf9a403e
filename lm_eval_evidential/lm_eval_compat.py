"""Every lm_eval internal this plugin relies on, in one place, covered by ``hooks.check_harness``.

lm-eval 0.4.13 has no plugin API, so the plugin leans on names that are not lm_eval's public
interface: private helpers, the functions it patches, the methods its model and task classes
override. Each is listed in :data:`INTERNALS`; :func:`missing_internals` (run by
:func:`~lm_eval_evidential.integration.hooks.check_harness` before any weights load) names those a
harness upgrade moved, and the helpers below are the only places that import them. Nothing here
imports lm_eval at module level: the plugin imports this module while lm_eval is still importing.

Instance attributes the subclasses read (``HFLM._model``, ``_config``, ``_rank``, ``_world_size``;
``ConfigurableTask._config``, ``_instances``, ``sampler``) and the one the lettered views replace
(``TaskManager._index``, tasks/stock.py) cannot be checked without an instance; the evaluation
tests read them on every run.

Every ``lm_eval`` import in the package names an entry of :data:`INTERNALS`, :data:`PUBLIC` or
:data:`VLLM_INTERNALS`, and every patched function one of :data:`INTERNALS`
(``tests/contract/test_lm_eval_compat.py`` reads every import and every patch).
"""

from __future__ import annotations

import importlib

#: ``module:qualified.name`` of every lm_eval internal the plugin uses.
INTERNALS = (
    # private or undocumented helpers (the functions below wrap them)
    "lm_eval.tasks._yaml_loader:load_yaml",
    "lm_eval.models.utils:_add_special_kwargs",
    "lm_eval.models.utils:has_bos_prefix",
    "lm_eval.models.utils:resolve_max_length",
    "lm_eval.utils:simple_parse_args_string",
    "lm_eval.utils:env",
    "lm_eval.utils:create_iterator",
    "lm_eval.api.samplers:get_sampler",
    "lm_eval.api.registry:model_registry",
    "lm_eval.tasks._index:Entry",
    "lm_eval.tasks._index:Kind",
    # the functions the plugin patches (integration.hooks)
    "lm_eval.tasks.manager:TaskManager.__init__",
    "lm_eval.tasks.manager:TaskManager.match_tasks",
    "lm_eval.evaluator:evaluate",
    "lm_eval.evaluator:simple_evaluate",
    "lm_eval.loggers.evaluation_tracker:EvaluationTracker.save_results_aggregated",
    # the methods EvidentialLM (harness.model) and EvidentialMCQATask (tasks.evidential_task) override
    "lm_eval.models.huggingface:HFLM._create_model",
    "lm_eval.models.huggingface:HFLM._get_config",
    "lm_eval.models.huggingface:HFLM.set_cache_hook",
    "lm_eval.api.task:ConfigurableTask.download",
    "lm_eval.api.task:ConfigurableTask.fewshot_context",
    "lm_eval.api.task:ConfigurableTask.set_fewshot_seed",
    "lm_eval.api.task:ConfigurableTask.build_all_requests",
    "lm_eval.api.task:ConfigurableTask.doc_iterator",
    # where the stock CLI checks its arguments (stock_argument_error)
    "lm_eval._cli.utils:key_val_to_dict",
    "lm_eval.config.evaluate_config:EvaluatorConfig",
)

#: lm_eval's public interface as the package uses it (documented, but checked all the same).
PUBLIC = (
    "lm_eval",
    "lm_eval:utils",
    "lm_eval.__main__:cli_evaluate",
    "lm_eval.api:samplers",
    "lm_eval.api.registry:get_model",
    "lm_eval.api.task:ConfigurableTask",
    "lm_eval.models.huggingface:HFLM",
    "lm_eval.tasks:TaskManager",
)

#: What ``--model evidential-vllm`` uses besides (checked when that backend is built: it imports vLLM).
VLLM_INTERNALS = ("lm_eval.models.vllm_causallms:VLLM",)

#: Modules whose ``ValueError`` is the stock CLI's own check of its arguments (``--tasks`` naming
#: no task, ``--samples`` with ``--limit``, a malformed ``--model_args``, an unreadable ``--config``).
STOCK_ARGUMENT_CHECKS = ("lm_eval._cli", "lm_eval.config")


def missing_internals(names=None) -> list[str]:
    """The entries of ``names`` (default :data:`INTERNALS` and :data:`PUBLIC`) that the installed lm_eval does
    not define (``module`` alone: the module; ``module:a.b``: an attribute, or a submodule, of it)."""
    missing = []
    for entry in (*INTERNALS, *PUBLIC) if names is None else names:
        module_name, _, qualname = entry.partition(":")
        try:
            obj = importlib.import_module(module_name)
        except ImportError:
            missing.append(entry)
            continue
        path = module_name
        for part in qualname.split(".") if qualname else []:
            path = f"{path}.{part}"
            found = getattr(obj, part, None)
            if found is None and isinstance(obj, type(importlib)):
                try:
                    found = importlib.import_module(path)
                except ImportError:
                    found = None
            obj = found
            if obj is None:
                missing.append(entry)
                break
    return missing


def missing_dependencies(module_names) -> dict[str, str]:
    """The modules outside lm_eval that importing ``module_names`` (lm_eval's) lacks: each missing top-level
    module (a dependency not installed, such as ``datasets``) -> the first of ``module_names`` that needs it.
    A module that fails for any other reason is left to :func:`missing_internals`."""
    found: dict[str, str] = {}
    for name in dict.fromkeys(entry.partition(":")[0] for entry in module_names):
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            top = (exc.name or "").partition(".")[0]
            if top and top != "lm_eval":
                found.setdefault(top, name)
        except ImportError:
            continue
    return found


def dependency_install(modules, version: str) -> str:
    """The pip command that installs the missing ``modules``: their names as lm_eval's own metadata requires
    them (``datasets``), or, where a module is not one lm_eval names, lm_eval again (pip installs its missing
    dependencies)."""
    import re
    from importlib.metadata import PackageNotFoundError, requires

    def canonical(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    try:
        required = [re.split(r"[\s;<>=!~\[(]", line, maxsplit=1)[0] for line in requires("lm_eval") or ()]
    except PackageNotFoundError:
        required = []
    by_name = {canonical(name): name for name in reversed(required)}
    names = [by_name.get(canonical(module)) for module in modules]
    return f"pip install {' '.join(names)}" if all(names) else f"pip install lm_eval=={version}"


def load_yaml(path, **kwargs):
    """lm_eval's own YAML loader (``!function``, ``include:``), as its TaskManager reads task files."""
    from lm_eval.tasks._yaml_loader import load_yaml as _load_yaml

    return _load_yaml(path, **kwargs)


def tokenizer_kwargs(add_bos_token) -> dict:
    """The ``add_special_tokens`` keyword HFLM gives its tokenizer for ``add_bos_token`` ({}: its default)."""
    from lm_eval.models.utils import _add_special_kwargs

    return _add_special_kwargs(None, add_bos_token)


def has_bos_prefix(text: str, bos_text) -> bool:
    """Whether ``text`` already starts with the BOS text (HFLM then adds no BOS token)."""
    from lm_eval.models.utils import has_bos_prefix as _has_bos_prefix

    return _has_bos_prefix(text, bos_text)


def resolve_max_length(config, tokenizer=None, **kwargs) -> int:
    """A model's context length as HFLM reads it off its config and tokenizer."""
    from lm_eval.models.utils import resolve_max_length as _resolve_max_length

    return _resolve_max_length(config, tokenizer, **kwargs)


def discovered_task_folders(manager_module) -> list:
    """The task folders the harness finds itself through ``lm_eval.tasks`` entry points (its TaskManager's
    ``discover_plugin_task_paths``, in harnesses with plugin discovery); [] where it has none (0.4.13).
    Optional, so not in :data:`INTERNALS`: its absence is the 0.4.13 case, not a moved internal."""
    from pathlib import Path

    discover = getattr(manager_module, "discover_plugin_task_paths", None)
    return [Path(p).resolve() for p in discover()] if callable(discover) else []


def stock_argument_error(exc: ValueError, *, hint: str = ""):
    """``exc`` as an :class:`~lm_eval_evidential.errors.InvalidValueError` when the stock CLI raised it
    itself while checking its arguments (the raising frame is in :data:`STOCK_ARGUMENT_CHECKS`), else
    None: a ``ValueError`` from deeper down is not known to be the user's, and keeps its traceback.
    ``hint`` is appended to the message (e.g. the nearest task names)."""
    from lm_eval_evidential.errors import InvalidValueError

    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    module = tb.tb_frame.f_globals.get("__name__", "") if tb is not None else ""
    if any(module == name or module.startswith(name + ".") for name in STOCK_ARGUMENT_CHECKS):
        return InvalidValueError(f"{exc}{hint}")
    return None
