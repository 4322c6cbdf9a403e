"""lm-eval-evidential: evidential (Dirichlet) uncertainty for lm-evaluation-harness, with K-controlled audits.

Importing this package is cheap on purpose (it is imported from a ``.pth`` hook in every
interpreter): heavy modules load on first attribute access.
"""

__version__ = "0.1.0"

_LAZY = {
    "load_records": ("lm_eval_evidential.records", "load_records"),
    "load_run": ("lm_eval_evidential.records", "load_run"),
    "Records": ("lm_eval_evidential.records", "Records"),
    "CardinalityMismatchError": ("lm_eval_evidential.metrics.cardinality", "CardinalityMismatchError"),
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["__version__", *_LAZY]
