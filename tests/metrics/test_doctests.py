"""The ``Examples`` of every public metric function run as doctests, and every one has them.

Each public function of :mod:`lm_eval_evidential.metrics` documents its parameters, its return
value, its formula and ``>>>`` examples (numpydoc, in the style of scikit-learn's
``metrics/_ranking.py``), and each module lists its References. Here the examples are executed,
so a docstring that stops matching the code fails the suite.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil

import pytest

import lm_eval_evidential.metrics as metrics

MODULES = [
    importlib.import_module(f"{metrics.__name__}.{info.name}")
    for info in pkgutil.iter_modules(metrics.__path__)
    if not info.name.startswith("_")
]
IDS = [m.__name__.rsplit(".", 1)[-1] for m in MODULES]


def _public_functions(module):
    names = getattr(module, "__all__", ())
    return [(n, getattr(module, n)) for n in names if inspect.isfunction(getattr(module, n))]


@pytest.mark.parametrize("module", MODULES, ids=IDS)
def test_examples_run(module):
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    failures = []
    for test in finder.find(module, module.__name__):
        result = runner.run(test, out=failures.append)
        assert result.failed == 0, "".join(failures)
    assert runner.tries > 0, f"{module.__name__} has no examples"


#: Public functions that name or render things rather than compute a formula.
NOT_FORMULAS = (
    "available_scores",
    "computable_scores",
    "no_alpha_reason",
    "check_score_names",
    "k_histogram",
    "format_k",
    "aupr_in_interval_label",
)


@pytest.mark.parametrize("module", MODULES, ids=IDS)
def test_every_public_function_documents_parameters_returns_formula_and_examples(module):
    missing = []
    for name, fn in _public_functions(module):
        doc = inspect.getdoc(fn) or ""
        lacking = [s for s in ("Parameters", "Returns", "Examples") if f"\n{s}\n---" not in doc]
        if ">>> " not in doc:
            lacking.append(">>> example")
        if ".. math::" not in doc and name not in NOT_FORMULAS:
            lacking.append("formula")
        if lacking:
            missing.append(f"{name}: {lacking}")
    assert not missing, f"{module.__name__}: " + "; ".join(missing)
    assert "\nReferences\n----------\n.. [1]" in (module.__doc__ or ""), f"{module.__name__}: no References"


def test_the_examples_can_fail():
    """A wrong expected value in an example is reported (the check is not vacuous)."""
    bad = doctest.DocTestParser().get_doctest(
        ">>> from lm_eval_evidential.metrics.detection import auroc\n>>> auroc([1, 0], [0.9, 0.1])\n0.5\n",
        {},
        "planted",
        None,
        0,
    )
    runner = doctest.DocTestRunner()
    assert runner.run(bad, out=lambda _: None).failed == 1
