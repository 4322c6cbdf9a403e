"""The package is found through the entry points a harness that reads them reads (lm-eval's plugin
discovery, EleutherAI/lm-evaluation-harness PR #4013 for models, #4015 for task folders), and
through the import hook on 0.4.13, which has no discovery: both paths, the first against a stand-in
of the upstream loader."""

from __future__ import annotations

import importlib
import importlib.util
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")

ROOT = Path(__file__).resolve().parents[2]


def declared(group: str) -> list[EntryPoint]:
    """The entry points pyproject.toml declares in ``group``, as an installed distribution lists them."""
    table = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["entry-points"]
    return [EntryPoint(name, value, group) for name, value in table.get(group, {}).items()]


# ------------------------------------------------------------------ a stand-in of the upstream loader
def upstream_models(entry_points, registry: dict) -> dict:
    """lm_eval.api.registry.load_plugins("lm_eval.models", …): each entry point a lazy placeholder under its
    name, unless the name is registered already; ``get_model`` then materialises it with ``ep.load()``."""
    for ep in entry_points:
        registry.setdefault(ep.name, ep)
    return registry


def upstream_task_dir(value: str) -> Path | None:
    """lm_eval.tasks.manager's resolution of an ``lm_eval.tasks`` entry point: the module part of the value
    (``module`` or ``module:attr``) found by its import spec; a package (a namespace package too) gives its
    folder, a plain module the folder that holds its file. That folder is scanned for ``*.yaml`` recursively."""
    spec = importlib.util.find_spec(value.split(":", 1)[0].strip())
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0]).resolve()
    return Path(spec.origin).resolve().parent if spec.origin else None


def test_the_model_entry_points_name_the_two_backends_and_load_the_transformers_one():
    from lm_eval_evidential import integration
    from lm_eval_evidential.harness.model import EvidentialLM

    registry = upstream_models(declared("lm_eval.models"), {})
    assert {name: ep.value for name, ep in registry.items()} == {
        integration.MODEL_NAME: integration.MODEL_TARGET,
        integration.VLLM_MODEL_NAME: integration.VLLM_MODEL_TARGET,
    }
    assert registry[integration.MODEL_NAME].load() is EvidentialLM  # what get_model materialises
    module, _, name = integration.VLLM_MODEL_TARGET.partition(":")  # importing it needs vLLM: its file names the class
    assert f"class {name}(" in Path(importlib.util.find_spec(module).origin).read_text(encoding="utf-8")


def test_the_task_entry_point_resolves_to_exactly_the_task_folder():
    from lm_eval_evidential.tasks import TASKS_DIR

    (ep,) = declared("lm_eval.tasks")
    folder = upstream_task_dir(ep.value)
    assert folder == TASKS_DIR  # this folder only: upstream scans what it resolves to recursively
    assert sorted(p.name for p in folder.rglob("*.yaml")) == sorted(p.name for p in TASKS_DIR.glob("*.yaml"))


def test_a_harness_that_discovers_the_task_folder_indexes_it_once(monkeypatch):
    """Where lm_eval's TaskManager finds our folder through the entry point, the import hook adds nothing;
    where it finds none (0.4.13), the hook adds it: the same tasks either way, indexed once."""
    import lm_eval.tasks.manager as manager

    from lm_eval_evidential.tasks import TASKS_DIR

    (ep,) = declared("lm_eval.tasks")
    hooked = manager.TaskManager()  # 0.4.13: no discovery, the hook adds the folder
    assert "obqa_edl" in hooked.all_tasks and hooked.include_path is None
    # a harness with discovery (here 0.4.13 told so) indexes the folder itself; the hook steps aside
    monkeypatch.setattr(manager, "discover_plugin_task_paths", lambda: [upstream_task_dir(ep.value)], raising=False)
    found = manager.TaskManager(include_path=str(TASKS_DIR))  # the folder once, as the harness would add it
    assert "obqa_edl" in found.all_tasks and found.include_path == str(TASKS_DIR)
    assert sorted(found.all_tasks) == sorted(hooked.all_tasks)


def test_the_import_hook_registers_what_the_entry_points_name():
    """0.4.13: the names come from the import hook (integration.hooks.on_models_imported registers MODEL_TARGET and
    VLLM_MODEL_TARGET, which the first test holds equal to the entry points)."""
    import lm_eval.models  # noqa: F401 (the hook registers on its import)
    from lm_eval.api.registry import model_registry

    from lm_eval_evidential.harness.model import EvidentialLM

    assert {ep.name for ep in declared("lm_eval.models")} <= set(model_registry.keys())
    assert model_registry.get("evidential") is EvidentialLM
