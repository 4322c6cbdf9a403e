"""The package's layers, read off its imports: every module imports only from layers below its own.

errors < {files, lm_eval_compat, params} < metrics < records < {audits, modeling} < {plots, tasks} < integration
< harness < {report, training, testing} < cli

Every ``import`` in every module counts, including the ones inside functions (lazy imports keep
the CLI fast; they are no way around the layering), and two layers of the same rank never
import each other (audits never imports modeling, plots never harness, report never training).
Each lower layer may use only the third-party libraries listed for it (the standard library is
always allowed): errors, files and params are the standard library alone, metrics is numpy/scipy, records adds
pyarrow, audits and report never import torch, lm_eval or matplotlib. And no module imports
itself through others: the graph of the package's own imports has no cycle.

And no function of the package, tools/ or benchmarks/ is over 80 lines (issue 31), bar the shrinking list of
those being split, and no module of the package is over 500 lines.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import lm_eval_evidential

PACKAGE = Path(lm_eval_evidential.__file__).resolve().parent
NAME = PACKAGE.name
RANK = {
    "errors": -2,
    "files": -1,
    "params": -1,  # parameters' constraints, declared once (sklearn's _param_validation): every layer declares with it
    "lm_eval_compat": -1,  # the inventory of lm_eval names: tasks, integration, harness and training use it
    "metrics": 0,
    "records": 1,
    "audits": 2,
    "modeling": 2,
    "plots": 3,
    "tasks": 3,
    "integration": 4,  # lm_eval's hooks, the evidence ledger, the records hook, run output: no backend
    "harness": 5,  # the backends: a backend asks integration's check_harness before its weights load
    "report": 6,
    "training": 6,
    "testing": 6,
    "cli": 7,
}
#: Top-level modules outside the folders: the layer each belongs to (the import hook calls integration's hooks).
MODULE_LAYER = {"_import_hook": "integration", "__main__": "cli"}
NUMERIC = {"numpy", "scipy"}
#: The only third-party packages each of these layers may import (others: anything they need).
ALLOWED_THIRD_PARTY = {
    "errors": set(),
    "files": set(),
    "params": set(),
    "lm_eval_compat": {"lm_eval"},
    "metrics": NUMERIC,
    "records": NUMERIC | {"pyarrow"},
    "audits": NUMERIC,
    "modeling": NUMERIC | {"torch", "transformers", "peft", "safetensors"},
    "plots": NUMERIC | {"matplotlib"},
    "report": NUMERIC,
    "__init__": set(),  # the package root maps names lazily; importing it costs nothing
}


def _layer(path: Path, package: Path) -> str:
    rel = path.relative_to(package)
    top = rel.parts[0] if len(rel.parts) > 1 else rel.stem
    return MODULE_LAYER.get(top, top)


def _imports(path: Path, package: Path):
    """(line, absolute module name) of every import in ``path``; names imported from the package
    root (``from lm_eval_evidential import report``) resolve to the subpackage they name."""
    rel = path.relative_to(package)
    here = [NAME, *rel.parent.parts]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the module's package
                base = here[: len(here) - node.level + 1]
                module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            else:
                module = node.module
            if module == NAME:
                for alias in node.names:
                    yield node.lineno, f"{NAME}.{alias.name}"
            else:
                yield node.lineno, module


def violations(package: Path = PACKAGE) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        layer = _layer(path, package)
        where = f"{path.relative_to(package.parent)}"
        if layer not in RANK and layer != "__init__":
            found.append(f"{where}: in no declared layer (declare it in tests/contract/test_layers.py)")
            continue
        for line, module in _imports(path, package):
            parts = module.split(".")
            if parts[0] == NAME:
                target = parts[1] if len(parts) > 1 else None
                if target is None or target == "__version__":
                    continue
                target = MODULE_LAYER.get(target, target)
                if target not in RANK:
                    found.append(f"{where}:{line}: imports {module}, which is in no declared layer")
                elif layer == "__init__" or (target != layer and RANK[target] >= RANK[layer]):
                    rank = RANK.get(layer, -1)
                    found.append(
                        f"{where}:{line}: {layer} (rank {rank}) imports {module} ({target}, rank {RANK[target]})"
                    )
            elif layer in ALLOWED_THIRD_PARTY and parts[0] not in sys.stdlib_module_names:
                if parts[0] not in ALLOWED_THIRD_PARTY[layer]:
                    found.append(
                        f"{where}:{line}: {layer} imports {module}; it may use only "
                        f"{sorted(ALLOWED_THIRD_PARTY[layer])} and the standard library"
                    )
    return found


def _module_name(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """``{module: modules of the package it imports}``, every import counted: lazy ones, and those under
    ``if TYPE_CHECKING:`` too (an annotation that names another module's type depends on that module as
    much as a call does: two modules that name each other's types are one module split in two); a name
    imported from a package resolves to its submodule when there is one (``from .records import io``)."""
    paths = {_module_name(p, package): p for p in package.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = here.split(".")[: len(here.split(".")) - node.level + 1] if node.level else []
                module = ".".join([*base, *([node.module] if node.module else [])])
                targets = [f"{module}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                while target and target not in paths:  # a name inside a module: that module
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def import_cycles(package: Path = PACKAGE) -> list[list[str]]:
    """The strongly connected components of :func:`import_graph` with more than one module (Tarjan)."""
    graph, index, low, stack, on_stack, cycles = import_graph(package), {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_no_import_cycles():
    cycles = import_cycles()
    assert not cycles, "modules importing each other (directly or through others): " + "; ".join(
        " <-> ".join(c) for c in cycles
    )


def test_the_cycle_finder_reports_a_planted_cycle(tmp_path):
    """The check can fail: a three-module circle planted in a copy of the package layout is found."""
    fake = tmp_path / NAME
    (fake / "harness").mkdir(parents=True)
    (fake / "harness" / "a.py").write_text("from lm_eval_evidential.harness import b\n")
    (fake / "harness" / "b.py").write_text("def f():\n    from .c import x\n")
    (fake / "harness" / "c.py").write_text("from lm_eval_evidential.harness.a import y\n")
    (fake / "harness" / "d.py").write_text("from lm_eval_evidential.harness.a import y\n")
    # an import for annotations only (under TYPE_CHECKING) closes a circle too
    (fake / "harness" / "e.py").write_text("if TYPE_CHECKING:\n    from lm_eval_evidential.harness.f import z\n")
    (fake / "harness" / "f.py").write_text("from lm_eval_evidential.harness.e import q\n")
    assert import_cycles(fake) == [
        [f"{NAME}.harness.a", f"{NAME}.harness.b", f"{NAME}.harness.c"],
        [f"{NAME}.harness.e", f"{NAME}.harness.f"],
    ]


def test_imports_only_go_down_and_each_layer_uses_only_its_libraries():
    found = violations()
    assert not found, "\n".join(found)


def test_every_folder_is_a_declared_layer():
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and any(p.rglob("*.py"))}
    undeclared = folders - set(RANK) - set(MODULE_LAYER)
    assert not undeclared, f"declare the layer of {sorted(undeclared)} in RANK (or MODULE_LAYER)"


@pytest.mark.parametrize(
    "layer, source, expected",
    [
        (
            "metrics",
            "from lm_eval_evidential.records import Records",
            "metrics (rank 0) imports lm_eval_evidential.records",
        ),
        ("metrics", "def f():\n    import torch", "metrics imports torch"),
        (
            "metrics",
            "if TYPE_CHECKING:\n    from lm_eval_evidential.records import Records",
            "metrics (rank 0) imports lm_eval_evidential.records",
        ),
        ("records", "from ..audits import ood", "records (rank 1) imports lm_eval_evidential.audits"),
        ("audits", "from lm_eval_evidential import modeling", "audits (rank 2) imports lm_eval_evidential.modeling"),
        ("audits", "import matplotlib", "audits imports matplotlib"),
        ("plots", "from lm_eval_evidential.harness.model import EvidentialLM", "plots (rank 3) imports"),
        ("tasks", "from lm_eval_evidential.integration.hooks import HOOKED", "tasks (rank 3) imports"),
        ("integration", "from lm_eval_evidential.harness.model import EvidentialLM", "integration (rank 4) imports"),
        ("report", "from lm_eval_evidential.training import trainer", "report (rank 6) imports"),
        (
            "training",
            "from lm_eval_evidential.cli.main import main",
            "training (rank 6) imports lm_eval_evidential.cli",
        ),
        ("surprise", "x = 1", "surprise/planted.py: in no declared layer"),
    ],
)
def test_the_checker_reports_a_planted_violation(tmp_path, layer, source, expected):
    """The checker can fail: one forbidden import planted in a copy of a layer is reported."""
    fake = tmp_path / NAME
    (fake / layer).mkdir(parents=True)
    (fake / layer / "planted.py").write_text(source + "\n")
    found = violations(fake)
    assert any(expected in v for v in found), found


def test_lower_layers_load_no_heavy_library_at_run_time():
    """Importing every metrics, records, audits and report module and the audit commands, and building
    every command's parser (each command's start-up), pulls in none of torch, lm_eval, matplotlib,
    transformers (what the static check says, confirmed in a fresh interpreter: figures import matplotlib
    only when drawn; torch alone took 4-9 s of an audit's start-up on the shared cores)."""
    code = (
        "import importlib, pkgutil, sys\n"
        "for name in ('metrics', 'records', 'audits', 'report'):\n"
        "    pkg = importlib.import_module(f'lm_eval_evidential.{name}')\n"
        "    for info in pkgutil.iter_modules(pkg.__path__):\n"
        "        importlib.import_module(f'{pkg.__name__}.{info.name}')\n"
        "for name in ('cli.main', 'cli.ood', 'cli.ksweep', 'cli.report', 'cli.calibration'):\n"
        "    importlib.import_module(f'lm_eval_evidential.{name}')\n"
        "importlib.import_module('lm_eval_evidential.cli.main').build_parser()\n"
        "print(sorted(m for m in ('torch', 'lm_eval', 'matplotlib', 'transformers') if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


#: The longest a function may be: from its ``def`` line to its last line, docstring included.
MAX_FUNCTION_LINES = 80
#: Functions over the limit that are being split (issue 31), each with the change that owns it. The list only
#: shrinks: an entry whose function is back under the limit (or gone) fails the test until it is removed.
LONG_FUNCTIONS_BEING_SPLIT = {}


def function_lengths(root: Path, folders=("lm_eval_evidential", "tools", "benchmarks")) -> dict[str, int]:
    """``{"folder/file.py:Class.function": lines}`` of every function under ``folders`` of ``root``."""
    lengths = {}

    def visit(node, path: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    lengths[f"{path}:{name}"] = child.end_lineno - child.lineno + 1
                visit(child, path, f"{name}.")
            else:
                visit(child, path, prefix)

    for folder in folders:
        for file in sorted((root / folder).rglob("*.py")):
            visit(ast.parse(file.read_text(encoding="utf-8")), file.relative_to(root).as_posix(), "")
    return lengths


def long_functions(root: Path = PACKAGE.parent, allowed=None) -> list[str]:
    """What is wrong with the function lengths under ``root``: a function over the limit that is not being split,
    or an allow-list entry that no longer needs to be there."""
    allowed = LONG_FUNCTIONS_BEING_SPLIT if allowed is None else allowed
    lengths = function_lengths(root)
    found = [
        f"{name}: {n} lines, over {MAX_FUNCTION_LINES}; split it into named steps"
        for name, n in sorted(lengths.items())
        if n > MAX_FUNCTION_LINES and name not in allowed
    ]
    found += [
        f"{name} is {lengths[name]} lines now: remove it from LONG_FUNCTIONS_BEING_SPLIT"
        if name in lengths
        else f"{name} is gone: remove it from LONG_FUNCTIONS_BEING_SPLIT"
        for name in sorted(allowed)
        if lengths.get(name, 0) <= MAX_FUNCTION_LINES
    ]
    return found


def test_no_function_is_over_80_lines():
    found = long_functions()
    assert not found, "\n".join(found)


def test_the_length_check_reports_a_long_function_and_a_stale_allowance(tmp_path):
    """The check can fail: a planted 81-line function is reported, and so is an allowance no longer needed."""
    (tmp_path / "lm_eval_evidential").mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(79))
    (tmp_path / "lm_eval_evidential" / "planted.py").write_text(
        f"class A:\n    def short(self):\n        pass\n\n\ndef f():\n{body}    return 0\n"
    )
    assert function_lengths(tmp_path) == {
        "lm_eval_evidential/planted.py:A.short": 2,
        "lm_eval_evidential/planted.py:f": 81,
    }
    allowed = {"lm_eval_evidential/planted.py:A.short": "x", "lm_eval_evidential/gone.py:g": "y"}
    assert long_functions(tmp_path, allowed) == [
        "lm_eval_evidential/planted.py:f: 81 lines, over 80; split it into named steps",
        "lm_eval_evidential/gone.py:g is gone: remove it from LONG_FUNCTIONS_BEING_SPLIT",
        "lm_eval_evidential/planted.py:A.short is 2 lines now: remove it from LONG_FUNCTIONS_BEING_SPLIT",
    ]


#: The longest a module of the package may be (issue 31): past it, a module holds more than one concept.
MAX_MODULE_LINES = 500


def long_modules(root: Path = PACKAGE.parent) -> list[str]:
    """``"path: N lines"`` for every module of the package under ``root`` over :data:`MAX_MODULE_LINES`."""
    found = []
    for file in sorted((root / "lm_eval_evidential").rglob("*.py")):
        n = len(file.read_text(encoding="utf-8").splitlines())
        if n > MAX_MODULE_LINES:
            found.append(f"{file.relative_to(root).as_posix()}: {n} lines, over {MAX_MODULE_LINES}; split it")
    return found


def test_no_module_is_over_500_lines():
    found = long_modules()
    assert not found, "\n".join(found)


def test_the_module_check_reports_a_long_module(tmp_path):
    (tmp_path / "lm_eval_evidential" / "sub").mkdir(parents=True)
    (tmp_path / "lm_eval_evidential" / "sub" / "long.py").write_text("x = 0\n" * 501)
    (tmp_path / "lm_eval_evidential" / "short.py").write_text("x = 0\n" * 500)
    assert long_modules(tmp_path) == ["lm_eval_evidential/sub/long.py: 501 lines, over 500; split it"]


#: Folders outside the package that use it as any caller does: through its public names only.
CONSUMERS = ("benchmarks", "tools")


def private_imports(root: Path = PACKAGE.parent) -> list[str]:
    """``"path imports module._name"`` for each private name a module of the package takes from another module of
    the package: imported (``from .b import _name``) or reached through an imported module or class (``b._name``,
    ``Records._name``). Modules meet only through public names (issue 31): a private name used by a sibling is a
    boundary nobody declared; give it a public name in the module that owns it, or move it where it is used. The
    scripts of :data:`CONSUMERS` are held to the same rule for the package's names."""
    files = [(file, True) for file in (root / NAME).rglob("*.py")]
    files += [(file, False) for folder in CONSUMERS for file in (root / folder).rglob("*.py")]
    found = []
    for file, inside in sorted(files):
        where = file.relative_to(root).as_posix()
        tree = ast.parse(file.read_text(encoding="utf-8"))
        bound = {}  # names this module binds to something of the package: name -> what it imported
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (
                inside if node.level else (node.module or "").startswith(NAME)  # a script's own modules: not ours
            ):
                source = "." * node.level + (node.module or "")
                for alias in node.names:
                    name = source + ("" if source.endswith(".") else ".") + alias.name
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{where} imports {name}")
                    bound[alias.asname or alias.name] = name
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == NAME:
                        bound[alias.asname or NAME] = alias.name if alias.asname else NAME
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in bound
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                found.append(f"{where} imports {bound[node.value.id]}.{node.attr}")
    return sorted(found)


def test_no_module_uses_a_private_name_of_another():
    found = private_imports()
    assert not found, "\n".join(found)


def test_the_private_import_check_reports_a_planted_one(tmp_path):
    (tmp_path / NAME / "report").mkdir(parents=True)
    (tmp_path / NAME / "report" / "a.py").write_text(
        f"from {NAME}.report.b import _hidden, shown\nfrom .c import __all__\n"
    )
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "bench_x.py").write_text(
        f"from {NAME}.testing.tiny import _render\nfrom .measure import _timer\nimport {NAME}.training.trainer as t\n"
        "t._save_final\n"
    )
    (tmp_path / NAME / "metrics").mkdir(parents=True)
    (tmp_path / NAME / "metrics" / "d.py").write_text(
        f"from {NAME}.records.container import Records\nfrom . import ranking\n"
        "def f(t):\n    return Records._from_table(t), ranking._blocks, ranking.auroc, Records.__name__\n"
    )
    assert private_imports(tmp_path) == [
        f"benchmarks/bench_x.py imports {NAME}.testing.tiny._render",
        f"benchmarks/bench_x.py imports {NAME}.training.trainer._save_final",
        f"{NAME}/metrics/d.py imports .ranking._blocks",
        f"{NAME}/metrics/d.py imports {NAME}.records.container.Records._from_table",
        f"{NAME}/report/a.py imports {NAME}.report.b._hidden",
    ]
