"""The package's layers, read off its imports: every module imports only from layers below its own.

metrics < records < {audits, modeling} < {plots, harness} < {report, training, testing} < cli.
Third-party limits per layer: metrics is numpy/scipy only; records adds pyarrow; audits,
plots and report never import torch or lm_eval.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import lm_eval_evidential

PACKAGE = Path(lm_eval_evidential.__file__).resolve().parent
RANK = {
    "metrics": 0, "records": 1, "audits": 2, "modeling": 2, "plots": 3, "harness": 3,
    "report": 4, "training": 4, "testing": 4, "cli": 5,
}  # fmt: skip
# Modules outside the layers: the package root (lazy re-exports) and the import hook (stdlib only).
ROOT_MODULES = {"__init__", "__main__", "_import_hook"}
FORBIDDEN_THIRD_PARTY = {
    "metrics": {"torch", "lm_eval", "matplotlib", "transformers", "peft", "pyarrow", "datasets"},
    "records": {"torch", "lm_eval", "matplotlib", "transformers", "peft", "datasets"},
    "audits": {"torch", "lm_eval", "matplotlib", "transformers", "peft", "datasets"},
    "plots": {"torch", "lm_eval", "transformers", "peft", "datasets"},
    "report": {"torch", "lm_eval", "transformers", "peft", "datasets"},
}


def _layer(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(path: Path):
    """(imported top-level package, imported lm_eval_evidential layer or None) for every import."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the module's package
                base = list(path.relative_to(PACKAGE).parent.parts)[: len(path.relative_to(PACKAGE).parent.parts) - node.level + 1]
                yield ".".join(["lm_eval_evidential", *base, *(node.module.split(".") if node.module else [])])
            elif node.module:
                if node.module == "lm_eval_evidential":
                    for alias in node.names:
                        yield f"lm_eval_evidential.{alias.name}"
                else:
                    yield node.module


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if _layer(p) not in ROOT_MODULES and "data" not in p.relative_to(PACKAGE).parts)


def test_every_module_belongs_to_a_layer():
    assert {_layer(p) for p in MODULES} <= set(RANK), {_layer(p) for p in MODULES} - set(RANK)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_only_go_down(path):
    layer = _layer(path)
    wrong = []
    for name in _imports(path):
        parts = name.split(".")
        if parts[0] == "lm_eval_evidential" and len(parts) > 1 and parts[1] in RANK:
            if parts[1] != layer and RANK[parts[1]] >= RANK[layer]:
                wrong.append(name)
        elif parts[0] in FORBIDDEN_THIRD_PARTY.get(layer, ()):
            wrong.append(name)
    assert not wrong, f"{path.relative_to(PACKAGE)} ({layer}, rank {RANK[layer]}) imports {wrong}"
