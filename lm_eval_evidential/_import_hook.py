"""Teach the stock ``lm_eval`` about this package at the moment lm_eval itself is imported.

lm-eval 0.4.13 has no plugin discovery, so a ``.pth`` file installed with the package imports
this module at interpreter start. It imports nothing (``sys`` is already loaded): it only puts
a finder first on ``sys.meta_path`` that, for the lm_eval modules named below and for nothing
else, wraps the real loader so that :func:`lm_eval_evidential.integration.hooks.on_imported`
patches the module once it has executed. Every other import
pays one dictionary lookup. ``benchmarks/bench_startup.py`` measures the cost.
Set ``LM_EVAL_EVIDENTIAL_DISABLE_HOOK=1`` to turn it off.
"""

import sys

# The lm_eval modules the plugin patches (hooks.ON_IMPORT's keys; named here so that start-up imports nothing).
TARGETS = frozenset(
    {
        "lm_eval.models",
        "lm_eval.tasks.manager",
        "lm_eval.evaluator",
        "lm_eval.loggers.evaluation_tracker",
        "lm_eval.config.evaluate_config",
    }
)


def _run(fullname, module):
    from lm_eval_evidential.integration import hooks

    hooks.on_imported(fullname, module)


class _PatchingLoader:
    """The real loader, plus the plugin function once the module has executed."""

    def __init__(self, loader, fullname):
        self._loader = loader
        self._fullname = fullname

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _run(self._fullname, module)

    def __getattr__(self, name):  # resource readers, get_data, …: the real loader's
        return getattr(self._loader, name)


class _Finder:
    """A meta-path finder (PEP 451) that only answers for :data:`TARGETS`."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in TARGETS:
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

    def invalidate_caches(self):
        pass


def install():
    """Install the finder once; modules already imported are patched immediately."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    for fullname in TARGETS:
        module = sys.modules.get(fullname)
        if module is not None:
            _run(fullname, module)


install()
