"""lm_eval_compat is the whole inventory of lm_eval: every ``lm_eval`` import in the package names one of
its entries, every function the plugin patches is one, and the installed harness defines them all."""

from __future__ import annotations

import ast
from pathlib import Path

import lm_eval_evidential
from lm_eval_evidential import lm_eval_compat
from lm_eval_evidential.lm_eval_compat import INTERNALS, PUBLIC, VLLM_INTERNALS, missing_internals

PACKAGE = Path(lm_eval_evidential.__file__).parent
INVENTORY = {*INTERNALS, *PUBLIC, *VLLM_INTERNALS}


def _is_lm_eval(module: str | None) -> bool:
    return module is not None and (module == "lm_eval" or module.startswith("lm_eval."))


def lm_eval_imports() -> list[tuple[str, str]]:
    """``(where, entry)`` of every lm_eval import in the package: ``from m import n`` is ``m:n``, ``import m``
    and ``importlib.import_module("m")`` are ``m`` (lazy imports inside functions included)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            where = f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.ImportFrom) and node.level == 0 and _is_lm_eval(node.module):
                found += [(where, f"{node.module}:{alias.name}") for alias in node.names]
            elif isinstance(node, ast.Import):
                found += [(where, alias.name) for alias in node.names if _is_lm_eval(alias.name)]
            elif (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and _is_lm_eval(node.args[0].value)
            ):
                found.append((where, node.args[0].value))
    return found


def test_every_lm_eval_import_is_in_the_inventory():
    imports = lm_eval_imports()
    assert len(imports) > 20  # the scan sees the imports (lazy ones too)
    modules = {entry.partition(":")[0] for entry in INVENTORY}
    outside = [
        (where, entry)
        for where, entry in imports
        if entry not in INVENTORY and not (":" not in entry and entry in modules)
    ]
    assert not outside, f"lm_eval imports not listed in lm_eval_compat.py: {outside}"


def test_every_patched_function_is_in_the_inventory():
    """``_patch(module.Owner, "name", …)`` and ``_patch(module, "name", …)`` in integration/hooks.py."""
    tree = ast.parse((PACKAGE / "integration" / "hooks.py").read_text(encoding="utf-8"))
    patched = [
        (ast.unparse(node.args[0]), node.args[1].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "_patch"
    ]
    assert len(patched) >= 5
    qualnames = {entry.partition(":")[2] for entry in INTERNALS}
    for owner, name in patched:
        qualname = name if owner == "module" else f"{owner.removeprefix('module.')}.{name}"
        assert qualname in qualnames, f"the patched {qualname} is not in lm_eval_compat.INTERNALS"


def test_the_installed_harness_defines_the_whole_inventory():
    assert missing_internals() == []
    assert missing_internals(["lm_eval.tasks._index:Nothing", "lm_eval.no_such_module"]) == [
        "lm_eval.tasks._index:Nothing",
        "lm_eval.no_such_module",
    ]
    assert lm_eval_compat.missing_internals(["lm_eval.api:samplers"]) == []  # a submodule as an attribute
