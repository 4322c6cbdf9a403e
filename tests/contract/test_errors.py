"""One home for errors (lm_eval_evidential.errors): every exception the package raises on purpose
derives from EvidentialError (exit 1) or RefusalError (exit 2) and is still the builtin it was."""

from __future__ import annotations

import doctest
import importlib
import inspect
import pkgutil

import pytest

import lm_eval_evidential
from lm_eval_evidential import errors
from lm_eval_evidential.errors import EvidentialError, RefusalError

#: Every public exception, the builtin callers (and lm_eval) may still catch it as, and whether it is a refusal.
BUILTIN = {
    "InvalidValueError": (ValueError, False),
    "InputNotFoundError": (FileNotFoundError, False),
    "NotAFolderError": (NotADirectoryError, False),
    "OutputExistsError": (FileExistsError, False),
    "UnsupportedRequestError": (NotImplementedError, False),
    "RecordsError": (ValueError, False),
    "OutputPathError": (ValueError, False),
    "OutputWriteError": (OSError, False),
    "InputFileError": (OSError, False),
    "FingerprintMismatchError": (ValueError, True),
    "OrderMismatchError": (ValueError, True),
    "QuestionMismatchError": (ValueError, True),
    "SameRunTwiceError": (ValueError, True),
    "PermutedRecordsError": (ValueError, True),
    "EvidentialInputError": (ValueError, False),
    "AnswerTokenError": (ValueError, False),
    "DatasetError": (ValueError, False),
    "MirrorFileNotFound": (FileNotFoundError, False),
    "HarnessVersionError": (RuntimeError, False),
}


def _package_exceptions():
    """Every exception class (warnings aside) defined anywhere in the package (all modules imported)."""
    found = {}
    for info in pkgutil.walk_packages(lm_eval_evidential.__path__, f"{lm_eval_evidential.__name__}."):
        if info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except EvidentialError:  # a module of an optional dependency not installed here (vllm_model)
            continue
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and not issubclass(obj, Warning)
                and obj.__module__ == module.__name__
            ):
                found[f"{module.__name__}.{name}"] = obj
    return found


def test_every_exception_of_the_package_derives_from_the_expected_error_base():
    found = _package_exceptions()
    assert "lm_eval_evidential.metrics.cardinality.CardinalityMismatchError" in found
    assert len(found) >= len(BUILTIN) + 3  # the bases and the cardinality refusal
    stray = [name for name, cls in found.items() if not issubclass(cls, EvidentialError)]
    assert not stray, f"derive these from lm_eval_evidential.errors' base classes: {stray}"


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_each_error_is_still_its_builtin_and_says_whether_it_refuses(name):
    cls = getattr(errors, name)
    builtin, refusal = BUILTIN[name]
    assert issubclass(cls, builtin) and issubclass(cls, EvidentialError)
    assert issubclass(cls, RefusalError) is refusal


def test_the_k_refusal_is_a_refusal_and_a_value_error():
    from lm_eval_evidential.metrics.cardinality import CardinalityMismatchError

    assert issubclass(CardinalityMismatchError, RefusalError) and issubclass(CardinalityMismatchError, ValueError)


def test_old_import_paths_name_the_same_classes():
    from lm_eval_evidential.harness.model import EvidentialInputError
    from lm_eval_evidential.metrics._validation import UndefinedMetricWarning
    from lm_eval_evidential.modeling.encoding import AnswerTokenError
    from lm_eval_evidential.records import FingerprintMismatchError, RecordsError
    from lm_eval_evidential.tasks.datasets import DatasetError, MirrorFileNotFound

    assert (DatasetError, MirrorFileNotFound, EvidentialInputError) == (
        errors.DatasetError,
        errors.MirrorFileNotFound,
        errors.EvidentialInputError,
    )
    assert (UndefinedMetricWarning, AnswerTokenError, FingerprintMismatchError) == (
        errors.UndefinedMetricWarning,
        errors.AnswerTokenError,
        errors.FingerprintMismatchError,
    )
    assert RecordsError is errors.RecordsError


def test_the_examples_run():
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner()
    out = []
    for test in finder.find(errors, errors.__name__):
        assert runner.run(test, out=out.append).failed == 0, "".join(out)
    assert runner.tries >= 2


def test_the_errors_module_imports_only_the_standard_library():
    import ast
    import sys

    tree = ast.parse(inspect.getsource(errors))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert all(name.split(".")[0] in sys.stdlib_module_names for name in imported), imported


def test_stock_cli_argument_errors_are_expected_and_deeper_value_errors_are_not():
    from lm_eval._cli.utils import key_val_to_dict

    from lm_eval_evidential.lm_eval_compat import stock_argument_error

    with pytest.raises(ValueError) as stock:
        key_val_to_dict("no_equals_sign")
    said = stock_argument_error(stock.value)
    assert isinstance(said, errors.InvalidValueError) and "expected `key=value`" in str(said)
    with pytest.raises(ValueError) as ours:
        int("not a number")
    assert stock_argument_error(ours.value) is None


#: The builtin exceptions a module must not raise for an expected condition (use lm_eval_evidential.errors).
BUILTINS = {
    "ValueError",
    "TypeError",
    "KeyError",
    "OSError",
    "FileNotFoundError",
    "FileExistsError",
    "NotADirectoryError",
    "IsADirectoryError",
    "PermissionError",
    "RuntimeError",
    "NotImplementedError",
}
#: ``raise <builtin>`` that are not expected conditions: (module path, exception) -> why it stays a builtin.
NOT_EXPECTED = {
    ("harness/model_args.py", "ValueError"): "control flow: caught two lines below, never escapes",
    ("integration/evaluation.py", "RuntimeError"): "a question with no evidence is a bug of the model's bookkeeping",
    ("tasks/stock.py", "KeyError"): "the mapping protocol: __missing__ of the task index raises KeyError",
    ("audits/table.py", "KeyError"): "the mapping protocol of typed rows; an unknown column or format is our bug",
    ("audits/table.py", "TypeError"): "a typed row is read-only, as a frozen dataclass: changing one is our bug",
    ("modeling/members.py", "RuntimeError"): "a LoRA layer fed other than (rows, tokens, features) is a bug of ours",
    ("params.py", "TypeError"): "a declaration that cannot be checked (an unknown Interval kind, a name the function "
    "lacks) is a bug of ours, found on import",
    ("harness/model_args.py", "TypeError"): "a HeadConfig field of a type --model_args cannot parse is a bug of "
    "ours, found on import",
}


def test_no_module_raises_a_bare_builtin_for_an_expected_condition():
    """Every ``raise`` of a builtin exception class in the package (testing/ aside: its self-checks of a
    tiny model are bugs by definition) is listed in NOT_EXPECTED with its reason; anything the user can
    cause raises a class of lm_eval_evidential.errors, so the CLI says it in one line."""
    import ast
    from pathlib import Path

    package = Path(lm_eval_evidential.__file__).parent
    found = set()
    for path in package.rglob("*.py"):
        rel = path.relative_to(package).as_posix()
        if rel.startswith("testing/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and isinstance(node.exc.func, ast.Name):
                if node.exc.func.id in BUILTINS:
                    found.add((rel, node.exc.func.id, node.lineno))
    stray = sorted(f"{rel}:{line}: raise {name}" for rel, name, line in found if (rel, name) not in NOT_EXPECTED)
    assert not stray, "raise a class of lm_eval_evidential.errors (or list it in NOT_EXPECTED): " + "; ".join(stray)
    assert {(rel, name) for rel, name, _ in found} == set(NOT_EXPECTED), "NOT_EXPECTED lists a raise that is gone"
