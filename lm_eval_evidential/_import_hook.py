"""Teach the stock ``lm_eval`` about this package at the moment lm_eval itself is imported.

lm-eval 0.4.13 has no plugin discovery, so a ``.pth`` file installed with the package imports
this module at interpreter start. It only adds a meta-path finder (stdlib only, no numpy,
torch or lm_eval import); when one of the lm_eval modules below finishes executing, the
matching function of :mod:`lm_eval_evidential.harness.plugin` runs on it. Unrelated
processes pay for one tiny module import. Set ``LM_EVAL_EVIDENTIAL_DISABLE_HOOK=1`` to turn
it off.
"""

from __future__ import annotations

import importlib.abc
import sys

# module name -> name of the function in lm_eval_evidential.harness.plugin
_TARGETS = {
    "lm_eval.models": "on_models_imported",
    "lm_eval.tasks.manager": "on_task_manager_imported",
    "lm_eval.loggers.evaluation_tracker": "on_evaluation_tracker_imported",
}


def _run(fullname: str, module) -> None:
    from lm_eval_evidential.harness import plugin

    getattr(plugin, _TARGETS[fullname])(module)


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader, fullname: str):
        self._loader = loader
        self._fullname = fullname

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _run(self._fullname, module)

    def __getattr__(self, name):  # resource readers, get_data, …: the real loader's
        return getattr(self._loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname not in _TARGETS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PatchingLoader(spec.loader, fullname)
                return spec
        return None


def install() -> None:
    """Install the finder once; modules already imported are patched immediately."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    for fullname in _TARGETS:
        module = sys.modules.get(fullname)
        if module is not None:
            _run(fullname, module)


install()
