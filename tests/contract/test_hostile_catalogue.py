"""The hostile-input catalogue: bad inputs and faults in ONE table, each through a real entry point.

Every row is ``(entry point, id, input, expected outcome)``. Entry points:

- ``loader``: :func:`lm_eval_evidential.records.read_records_file` on a crafted records file;
- ``cli``: ``lm_eval_evidential.cli.main.main(argv)`` in-process (the ``lm-eval-evidential``
  commands) on a copy of a synthetic run folder;
- ``model``: ``EvidentialLM.create_from_arg_string(model_args)``, what stock ``lm_eval --model
  evidential --model_args …`` calls; a refusal must come before any weights load unless the row
  says otherwise (a spy on the model loader checks it);
- ``dataset``: loading a task from a crafted offline mirror, as ``lm_eval --tasks`` does;
- ``eval``: ``lm-eval-evidential eval …`` in-process (the stock CLI behind our error handling),
  over this package's tasks and a user's ``--include_path``;
- ``train``: ``lm-eval-evidential train …`` in-process;
- ``vllm``: what ``--model evidential-vllm`` checks before its engine starts (the KV cache against the
  device's memory, ``max_model_len`` against the model's context), on SmolLM2's footprint and a stand-in
  for the device, since vLLM is not in this environment (tests/vllm runs these refusals on a real engine);
- ``subprocess``: a command (``lm-eval-evidential …`` or the stock ``lm_eval`` CLI) in a child
  process under a real fault: ``RLIMIT_FSIZE``, or a read-only folder (root's permission-override
  capabilities dropped).

Outcomes: ``Refused`` (that exception class, message matching), ``Exit`` (that status, one
``error:`` line matching, never a traceback), ``Warned`` (a logged warning matching), ``Accepted``.
Every ``cli``, ``eval``, ``train`` and ``subprocess`` row also checks the file system: the inputs
are byte-identical afterwards and nothing was written except the paths the row allows (a refusal
writes nothing); ``loader`` and ``model`` rows check that reading changed and added no file.
docs/reliability.md says what the table promises (`pytest --collect-only` lists the cases).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lm_eval_evidential.records import (
    META_KEY,
    Records,
    RecordsError,
    make_record,
    make_records,
    read_records_file,
    records_path,
    write_records,
)

DATE = "2026-03-01T10-00-00.000001"
LETTERS = "ABCDE"


# ----------------------------------------------------------------------------- outcomes


@dataclass(frozen=True)
class Refused:
    """The entry point raises ``exc`` with a message matching ``match`` (a regex)."""

    exc: type | tuple
    match: str
    before_weights: bool = True  # model rows: raised before the model's weights were loaded


@dataclass(frozen=True)
class Exit:
    """A command returns ``status``; its output matches ``match``; it wrote only ``writes`` (globs)."""

    status: int
    match: str
    writes: tuple[str, ...] = ()
    check: Callable | None = None  # check(ctx) after the command


@dataclass(frozen=True)
class Cmd:
    """A command line (``{out}``, ``{tmp}``, ``{rec}``, ``{folder}``, ``{model}`` … filled in).

    And what to prepare first.
    """

    argv: list
    prepare: Callable | None = None


@dataclass(frozen=True)
class Child:
    """A command run by a child process (as the console script runs it) under a real fault: a
    file-size limit of ``fsize`` bytes (``RLIMIT_FSIZE``) and/or the folder ``read_only`` made
    read-only (for root too: the child runs without the capabilities that override permissions)."""

    argv: list
    fsize: int | None = None
    read_only: str | None = None
    prepare: Callable | None = None
    unreadable: str | None = None  # a file made unreadable (mode 000) for the child, root included


@dataclass(frozen=True)
class Warned:
    """Accepted, with a logged warning matching ``match``; ``check(result, ctx)`` holds."""

    match: str
    check: Callable | None = None


@dataclass(frozen=True)
class Accepted:
    """Accepted; ``check(result, ctx)`` holds."""

    check: Callable | None = None


@dataclass
class Ctx:
    """One case's world: a private copy of the run folder and a scratch folder."""

    tmp: Path
    out: Path  # the --output_path folder (a copy of the synthetic run)
    model: Path | None = None
    adapter: Path | None = None
    mirror: Path | None = None
    extra: dict = field(default_factory=dict)

    @property
    def folder(self) -> Path:
        return self.out / "synthetic-llm"

    def rec(self, task: str = "id4") -> Path:
        return records_path(self.folder, task, DATE)

    def fmt(self, text: str) -> str:
        text = text.replace("{other_adapter}", str(self.extra.get("other_adapter")))
        text = text.replace("{checkpoint}", str(self.extra.get("checkpoint")))
        text = text.replace("{other_model}", str(self.extra.get("other_model")))
        return text.format(
            out=self.out, tmp=self.tmp, rec=self.rec(), folder=self.folder, model=self.model, adapter=self.adapter
        )


# ----------------------------------------------------------------------------- the synthetic run


def _records(task, n, k, shift, seed, *, softmax=False, producer="synthetic-llm") -> Records:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        z = rng.normal(shift, 1.5, size=k)
        alpha = None if softmax else np.logaddexp(0.0, z) + 1.0
        rows.append(
            make_record(task=task, doc_id=i, labels=list(LETTERS[:k]), gold=int(rng.integers(k)), logits=z, alpha=alpha)
        )
    meta = {"method": "softmax" if softmax else "edl", "prior_weight": 1.0, "pretrained": producer}
    return Records.from_rows(rows, task=task, meta=meta)


@pytest.fixture(scope="module")
def run_template(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile_run")
    folder = root / "synthetic-llm"
    for rec in (
        _records("id4", 60, 4, 1.0, 1),
        _records("ood4", 50, 4, 0.0, 2),
        _records("ood5", 40, 5, 0.0, 3),
        _records("sm4", 30, 4, 0.0, 4, softmax=True),
        _records("alien4", 30, 4, 0.0, 5, producer="another-llm"),
    ):
        write_records(records_path(folder, rec.task, DATE), rec)
    return root


@pytest.fixture
def ctx(run_template, tmp_path) -> Ctx:
    out = tmp_path / "out"
    shutil.copytree(run_template, out)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    return Ctx(tmp=scratch, out=out)


# ----------------------------------------------------------------------------- inputs: records files


def edited(
    task: str = "id4",
    *,
    column: str | None = None,
    row: int = 0,
    value=None,
    meta: dict | None = None,
    drop: str | None = None,
):
    """A records file of ``task`` with one cell, the metadata or a column changed (written with pyarrow)."""

    def make(ctx: Ctx) -> Path:
        path = ctx.rec(task)
        table = pq.read_table(path)
        if column is not None:
            values = table.column(column).to_pylist()
            values[row] = value(values[row]) if callable(value) else value
            index = table.schema.get_field_index(column)
            table = table.set_column(
                index, table.schema.field(index), pa.array(values, type=table.schema.field(index).type)
            )
        if drop is not None:
            table = table.drop_columns([drop])
        if meta is not None:
            old = json.loads(table.schema.metadata[META_KEY])
            table = table.replace_schema_metadata({META_KEY: json.dumps({**old, **meta}).encode()})
        pq.write_table(table, path)
        return path

    return make


def k_as_text(ctx: Ctx) -> Path:
    path = ctx.rec()
    table = pq.read_table(path)
    index = table.schema.get_field_index("k")
    table = table.set_column(index, "k", pa.array([str(x) for x in table.column("k").to_pylist()]))
    pq.write_table(table, path)
    return path


def raw_bytes(transform: Callable[[bytes], bytes], task: str = "id4"):
    def make(ctx: Ctx) -> Path:
        path = ctx.rec(task)
        path.write_bytes(transform(path.read_bytes()))
        return path

    return make


def foreign_parquet(ctx: Ctx) -> Path:
    """A Parquet file of the same columns written by someone else: no records metadata."""
    path = ctx.rec()
    pq.write_table(pq.read_table(path).replace_schema_metadata(None), path)
    return path


def bump(i: int, by: float):
    return lambda values: [v + by if j == i else v for j, v in enumerate(values)]


# ----------------------------------------------------------------------------- inputs: datasets


def arc_row(qid, labels, key, texts=None, **extra):
    texts = texts or [f"option {x}" for x in labels]
    return {
        "id": qid,
        "question": "Which one is it?",
        "choices": {"text": texts, "label": labels},
        "answerKey": key,
        **extra,
    }


ARC = "allenai/ai2_arc/ARC-Challenge/test.jsonl"
GOOD = arc_row("ok-1", ["A", "B", "C", "D"], "B")


def mirror_lines(*lines: str | bytes, rel: str = ARC):
    """Replace one mirror file by these raw lines (str: JSON text; bytes: raw bytes)."""

    def make(ctx: Ctx) -> None:
        path = ctx.mirror / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"".join(x if isinstance(x, bytes) else x.encode() for x in lines))

    return make


def mirror_rows(*rows, rel: str = ARC):
    return mirror_lines(*(json.dumps(r) + "\n" for r in rows), rel=rel)


def mirror_removed(rel: str = ARC):
    def make(ctx: Ctx) -> None:
        (ctx.mirror / rel).unlink()

    return make


def mirror_emptied(ctx: Ctx) -> None:
    shutil.rmtree(ctx.mirror)
    ctx.mirror.mkdir()


def previous_report(ctx: Ctx) -> None:
    """A report of id4 vs ood4 AND ood5 in {tmp}/old_report: its ood5 files must not survive a rewrite."""
    from lm_eval_evidential.cli.main import main

    assert (
        main(
            [
                "report",
                str(ctx.out),
                "--id",
                "id4",
                "--ood",
                "ood4,ood5",
                "--k-policy",
                "report",
                "--n-boot",
                "0",
                "--max-extra",
                "1",
                "--out",
                str(ctx.tmp / "old_report"),
            ]
        )
        == 0
    )
    assert list((ctx.tmp / "old_report").glob("*ood5*"))


def killed_report_left_its_temp_folder(ctx: Ctx) -> None:
    """A previous report, and the hidden folder a report killed while building leaves beside it."""
    previous_report(ctx)
    stale = ctx.tmp / ".old_report.k1ll3d.tmp"
    stale.mkdir()
    (stale / "report.md").write_text("half of a report")


#: The refusal of a calibration task whose K differs from --id's, worded alike by conformal and temperature.
_CALIBRATION_K_REFUSAL = (
    r"refused calibration ood5 vs id4: K mismatch between the calibration and the evaluated records: ood5 \{5: 40\} "
    r"vs id4 \{4: 60\} \(K: number of examples\)\. Remedy: calibrate on questions with id4's K = 4: a "
    r"--calibration-task whose questions all have that K, or --calibration-fraction F \(a share of id4 itself\); "
    r"or --k-policy report computes it anyway"
)


def unmatched_json(ctx: Ctx) -> None:
    rows = json.loads((ctx.tmp / "t.json").read_text())
    assert rows and not any(r["matched"] for r in rows), rows


def _link(ctx: Ctx, name: str, target: str | None = None) -> None:
    (ctx.tmp / name).symlink_to(target or name)


def _link_to_a_file(ctx: Ctx) -> None:
    (ctx.tmp / "real").mkdir()
    (ctx.tmp / "real" / "t.json").write_text("old")
    _link(ctx, "link.json", "real/t.json")


def _written_through(ctx: Ctx) -> None:
    link = ctx.tmp / "link.json"
    assert link.is_symlink() and os.readlink(link) == "real/t.json"
    assert json.loads((ctx.tmp / "real" / "t.json").read_text())[0]["task"] == "id4"
    assert sorted(p.name for p in (ctx.tmp / "real").iterdir()) == ["t.json"]


#: ``laplace`` on the tiny model with the adapter {tmp}/sm (:func:`_softmax_copy`), into {tmp}/lap.
_LAPLACE_FIT = ["laplace", "--pretrained", "{model}", "--peft", "{tmp}/sm", "--task", "obqa_edl", "--output-dir"]
_LAPLACE_FIT += ["{tmp}/lap"]


def _softmax_copy(ctx: Ctx, adapter) -> None:
    """A copy of ``adapter`` at {tmp}/sm marked as trained with --method softmax (what laplace fits)."""
    shutil.copytree(adapter, ctx.tmp / "sm")
    (ctx.tmp / "sm" / "evidential_config.json").write_text(json.dumps({"method": "softmax"}))


def _another_method(ctx: Ctx) -> None:
    """{tmp}/other: the run's folder with other predictions on id4 (another method's run of the same tasks)."""
    shutil.copytree(ctx.out, ctx.tmp / "other")
    write_records(records_path(ctx.tmp / "other" / "synthetic-llm", "id4", DATE), _records("id4", 60, 4, 0.5, 11))


def _another_method_on_fewer_questions(ctx: Ctx) -> None:
    """{tmp}/other: another method's run of the same tasks, its id4 evaluated on its first 40 questions (--limit 40)."""
    _another_method(ctx)
    write_records(records_path(ctx.tmp / "other" / "synthetic-llm", "id4", DATE), _records("id4", 40, 4, 0.5, 12))


def _run_copy(ctx: Ctx) -> None:
    shutil.copytree(ctx.out, ctx.tmp / "copy")


def only_the_new_report(ctx: Ctx) -> None:
    folder = ctx.tmp / "old_report"
    report = json.loads((folder / "report.json").read_text())
    assert report["ood_tasks"] == ["ood4"]
    figures = {name for names in report["figures"].values() for name in names}
    assert sorted(p.name for p in folder.iterdir()) == sorted({"report.md", "appendix.md", "report.json", *figures})
    assert not list(ctx.tmp.glob(".old_report*")), "temporary folders left behind"


# ----------------------------------------------------------------------------- inputs: a user's tasks (--include_path)


def obqa_renamed(name: str):
    """A task YAML in {tmp}/tasks: the shipped obqa_edl under the task name ``name`` (``../``, absolute, NUL …)."""

    def make(ctx: Ctx) -> None:
        from lm_eval_evidential.tasks import tasks_dir

        folder = ctx.tmp / "tasks"
        folder.mkdir(exist_ok=True)
        (folder / "renamed.yaml").write_text(f"include: {tasks_dir() / 'obqa_edl.yaml'}\ntask: {json.dumps(name)}\n")

    return make


def records_of(name: str):
    """After the run: one records file, inside the output folder, holding the task's real name."""

    def check(ctx: Ctx) -> None:
        [path] = (ctx.tmp / "o").rglob("records_*.parquet")
        assert path.resolve().parent.parent == (ctx.tmp / "o").resolve(), path
        assert read_records_file(path).task == name

    return check


def word_choices(ctx: Ctx) -> None:
    """A stock-style task in {tmp}/tasks whose choices are words (several tokens each), on local JSON files."""
    rows = [
        {
            "q": f"Which fruit is number {i}?",
            "choices": ["red apple", "green pear", "ripe plum", "sour lime"],
            "gold": i % 4,
        }
        for i in range(3)
    ]
    (ctx.tmp / "words.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    folder = ctx.tmp / "tasks"
    folder.mkdir(exist_ok=True)
    (folder / "words.yaml").write_text(
        "task: words_mc\ndataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {ctx.tmp / 'words.jsonl'}\n"
        'test_split: test\noutput_type: multiple_choice\ndoc_to_text: "{{q}}\\nAnswer:"\n'
        'doc_to_choice: "{{choices}}"\ndoc_to_target: "{{gold}}"\nmetric_list:\n  - metric: acc\n'
    )


def _permuted_eval(metadata: str, task: str = "obqa_edl") -> Cmd:
    """``eval`` of ``task`` on 2 questions with ``--metadata`` (``cyclic_obqa_edl``: obqa_edl whose YAML asks for
    cyclic orders, in {tmp}/tasks)."""

    def prepare(ctx: Ctx) -> None:
        from lm_eval_evidential.tasks import tasks_dir

        folder = ctx.tmp / "tasks"
        folder.mkdir(exist_ok=True)
        (folder / "cyclic.yaml").write_text(
            f"include: {tasks_dir() / 'obqa_edl.yaml'}\ntask: cyclic_obqa_edl\nmetadata:\n  version: 1.0\n"
            "  answer_tokens: [' A', ' B', ' C', ' D']\n  permutations: cyclic\n"
        )

    argv = ["--model", "evidential", "--model_args", TINY, "--device", "cpu", "--limit", "2", "--output_path"]
    argv += ["{tmp}/o", "--include_path", "{tmp}/tasks", "--tasks", task, "--metadata", metadata]
    return Cmd(argv, prepare)


def permuted_as(spec: str, orders: int):
    """After the run: its records say ``spec`` and hold ``orders`` orders of each of its 2 questions."""

    def check(ctx: Ctx) -> None:
        [path] = (ctx.tmp / "o").rglob("records_*.parquet")
        records = read_records_file(path)
        assert records.meta["permutations"]["spec"] == spec, records.meta["permutations"]
        assert len(records) == 2 * orders, len(records)

    return check


def options_task(name: str, k: int):
    """An EDL task ``name`` in {tmp}/tasks whose questions have ``k`` options (local JSON, metadata.fields)."""

    def make(ctx: Ctx) -> None:
        rows = [{"id": f"q{i}", "q": f"Which is number {i}?", "options": [f"option {j}" for j in range(k)], "answer": 0}
                for i in range(2)]  # fmt: skip
        (ctx.tmp / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        folder = ctx.tmp / "tasks"
        folder.mkdir(exist_ok=True)
        tokens = ", ".join(f"' {letter}'" for letter in "ABCDEFGHIJ"[: max(k, 2)])
        (folder / f"{name}.yaml").write_text(
            f"task: {name}\nclass: !function lm_eval_evidential.tasks.evidential_task.EvidentialMCQATask\n"
            f"dataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {ctx.tmp / f'{name}.jsonl'}\n"
            f"test_split: test\nmetadata:\n  version: 1.0\n  answer_tokens: [{tokens}]\n"
            "  fields: {id: id, question: q, options: options, answer: answer}\n"
        )

    return make


def permuted_run(
    ctx: Ctx, task: str = "p4", date: str = DATE, permuted: bool = True, orders=None, spec: str = "cyclic"
) -> Path:
    """Records of ``task`` as a permuted (cyclic) run writes them, in the synthetic run's folder (``orders``:
    question 0's orders instead, under the run's setting ``spec``)."""
    rng = np.random.default_rng(9)
    rows = []
    for q in range(12):
        gold = int(rng.integers(4))
        cyclic = [[(j + shift) % 4 for j in range(4)] for shift in range(4 if permuted else 1)]
        for order in orders if orders is not None and q == 0 else cyclic:
            z = rng.normal(0, 1.5, size=4)
            rows.append(
                make_record(task=task, doc_id=q, labels=list("ABCD"), gold=order.index(gold), logits=z,
                            alpha=np.logaddexp(0.0, z) + 1.0, optional={"order": order} if permuted else None)
            )  # fmt: skip
    meta = {"method": "edl", "prior_weight": 1.0, "pretrained": "synthetic-llm"}
    if permuted:
        meta["permutations"] = {"spec": spec, "seed": 0}
    return write_records(records_path(ctx.folder, task, date), Records.from_rows(rows, task=task, meta=meta))


def permuted_question_0(orders, spec: str = "cyclic"):
    """p4's permuted records whose question 0 is shown in ``orders`` (the others in the 4 cyclic shifts)."""
    return lambda ctx: permuted_run(ctx, orders=orders, spec=spec)


def permuted_row_dropped(row: int):
    """p4's permuted records without row ``row`` (one (question, order) record)."""

    def make(ctx: Ctx) -> Path:
        path = permuted_run(ctx)
        table = pq.read_table(path)
        pq.write_table(table.take([i for i in range(table.num_rows) if i != row]), path)
        return path

    return make


def permuted_file_edited(edit):
    """A permuted run's records file of ``p4`` with its ``order`` column changed by ``edit(list of orders)``."""

    def make(ctx: Ctx) -> Path:
        path = permuted_run(ctx)
        table = pq.read_table(path)
        orders = table.column("order").to_pylist()
        edit(orders)
        i = table.column_names.index("order")
        table = table.set_column(i, "order", pa.array(orders, pa.list_(pa.int32())))
        pq.write_table(table, path)
        return path

    return make


def mixed_order_runs(ctx: Ctx) -> None:
    permuted_run(ctx)
    permuted_run(ctx, date=OTHER_DATE, permuted=False)


def stale_records_temp(ctx: Ctx) -> None:
    """The temp file an eval killed while writing records leaves (older than the harness's grace period)."""
    from lm_eval_evidential.integration.run_output import STALE_TEMP_SECONDS

    folder = ctx.tmp / "o" / str(ctx.model).replace("/", "__")
    folder.mkdir(parents=True)
    stale = folder / f".records_obqa_edl_{DATE}.parquet.k1ll3d.tmp"
    stale.write_bytes(b"PAR1 half a records file")
    old = os.path.getmtime(stale) - STALE_TEMP_SECONDS - 60
    os.utime(stale, (old, old))
    ctx.extra["stale"] = stale


def stale_gone(ctx: Ctx) -> None:
    assert not ctx.extra["stale"].exists()
    assert len(list((ctx.tmp / "o").rglob("records_obqa_edl_*.parquet"))) == 1


# ----------------------------------------------------------------------------- inputs: identities, non-files (issue 26)

OTHER_DATE = "2026-03-02T11-00-00.000002"


def with_meta(of: str = "id4", drop: tuple[str, ...] = (), **changes):
    """The records file of task ``of`` whose metadata lost ``drop`` and got ``changes`` (columns untouched)."""

    def make(ctx: Ctx) -> Path:
        path = ctx.rec(of)
        table = pq.read_table(path)
        meta = {k: v for k, v in json.loads(table.schema.metadata[META_KEY]).items() if k not in drop}
        pq.write_table(table.replace_schema_metadata({META_KEY: json.dumps({**meta, **changes}).encode()}), path)
        return path

    return make


def nested_metadata(ctx: Ctx) -> Path:
    """Metadata JSON nested 100,000 deep (json.loads raises RecursionError)."""
    path = ctx.rec()
    table = pq.read_table(path)
    raw = b'{"task": "id4", "schema_version": 1, "method": "edl", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    pq.write_table(table.replace_schema_metadata({META_KEY: raw}), path)
    return path


def copied_as(source: str, target: str, date: str = DATE):
    """The records file of ``source`` copied over ``target``'s name (and date): a file under a name not its own."""

    def make(ctx: Ctx) -> Path:
        dest = records_path(ctx.folder, target, date)
        dest.unlink(missing_ok=True)
        shutil.copy(ctx.rec(source), dest)
        return dest

    return make


def dated(date: str):
    """id4's records stamped (metadata date_id) as written by the run ``date``, under its own name."""

    def make(ctx: Ctx) -> Path:
        return with_meta(date_id=date)(ctx)

    return make


def second_run_renamed_in(ctx: Ctx) -> Path:
    """A second run's ood4 records (date_id OTHER_DATE) renamed into the first run's date."""
    rec = _records("ood4", 50, 4, 3.0, 9)
    path = ctx.rec("ood4")
    write_records(path, Records(**{**rec.__dict__, "meta": {**rec.meta, "date_id": OTHER_DATE}}))
    return path


def same_questions(ctx: Ctx) -> None:
    """id4 and ood4 both say they were evaluated on the same questions (one data_source): ood4 is id4's
    file with every stated identity (name, metadata task, task column) made ood4's."""
    source = {"dataset": "allenai/openbookqa", "configs": ["main"], "sha256": "0123456789abcdef"}
    for task in ("id4", "ood4"):
        rec = _records("id4", 60, 4, 1.0, 1)
        rows = [{**r, "task": task} for r in rec]
        write_records(ctx.rec(task), Records.from_rows(rows, task=task, meta={**rec.meta, "data_source": source}))


def as_views(template: dict[str, str], rows: dict[str, str] | None = None):
    """id4 and ood4 given the metadata of lettered views (``template``: task -> its stock task, or None for
    this package's own template) and, where ``rows`` names one, the same dataset rows in two forms."""

    def make(ctx: Ctx) -> None:
        for task, stock in template.items():
            rec = _records(task, 60, 4, 1.0 if task == "id4" else 0.0, 1 if task == "id4" else 2)
            meta = dict(rec.meta)
            if stock is not None:
                meta["lettered_view"] = {"stock_task": stock, "shuffled": False, "orders": None}
            meta["prompt_template_sha256"] = "view-prompt" if stock is not None else "own-template"
            source = {"dataset": f"hub/{task}", "configs": [None], "sha256": f"{task}-docs", "rows_sha256": None}
            if rows and task in rows:
                source = {**source, "dataset": "allenai/ai2_arc", "rows_sha256": rows[task]}
            write_records(ctx.rec(task), Records.from_rows(list(rec), task=task, meta={**meta, "data_source": source}))

    return make


def replaced_by(kind: str, task: str = "id4"):
    """The records file of ``task`` replaced by something that is not a readable regular file."""

    def make(ctx: Ctx) -> Path:
        path = ctx.rec(task)
        path.unlink()
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "folder":
            path.mkdir()
            (path / "part-0.parquet").write_bytes(b"PAR1")
        elif kind == "loop":
            path.symlink_to(path.name)
        elif kind == "dangling":
            path.symlink_to(ctx.tmp / "moved-away.parquet")
        return path

    return make


def posterior_edited(*, config=None, tensors=None, truncate=False, remove=None):
    """``prepare``: a copy of the hand posterior at ``{tmp}/lap``, its config updated by ``config``, its tensors
    edited by ``tensors(dict)``, its posterior file cut to 200 bytes (``truncate``) or the file ``remove`` gone."""

    def prepare(ctx):
        from safetensors.torch import load_file, save_file

        folder = ctx.tmp / "lap"
        shutil.copytree(ctx.extra["posterior"], folder)
        path = folder / "laplace_config.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), **(config or {})}))
        weights = folder / "laplace_posterior.safetensors"
        if tensors is not None:
            loaded = load_file(weights)
            tensors(loaded)
            save_file(loaded, weights)
        if truncate:
            weights.write_bytes(weights.read_bytes()[:200])
        if remove:
            (folder / remove).unlink()

    return prepare


def adapter_beside(kind: str):
    """A copy of the tiny adapter as ``{tmp}/work/checkpoint-1`` with ``kind`` beside it: a FIFO named
    ``run.yaml``, a YAML file larger than the lookup reads, a damaged ``adapter_config.json`` or a
    truncated ``adapter_model.safetensors``."""

    def make(ctx: Ctx) -> None:
        work = ctx.tmp / "work"
        shutil.copytree(ctx.adapter, work / "checkpoint-1")
        if kind == "fifo-yaml":
            os.mkfifo(work / "run.yaml")
        elif kind == "huge-yaml":
            with open(work / "huge.yaml", "wb") as fh:
                fh.truncate(64 * 1024 * 1024)
        elif kind == "bad-config":
            (work / "checkpoint-1" / "adapter_config.json").write_text('{"peft_type": "LORA", "r": 8,')
        elif kind == "config-not-an-object":
            (work / "checkpoint-1" / "adapter_config.json").write_text("[1, 2]")
        elif kind == "truncated-weights":
            weights = work / "checkpoint-1" / "adapter_model.safetensors"
            weights.write_bytes(weights.read_bytes()[:100])
        elif kind == "weights-cut-in-the-data":
            weights = work / "checkpoint-1" / "adapter_model.safetensors"
            weights.write_bytes(weights.read_bytes()[:-10])
        elif kind == "nested-evidential-config":
            (work / "checkpoint-1" / "evidential_config.json").write_text("[" * 100_000 + "]" * 100_000)
        elif kind == "fifo-evidential-config":
            os.mkfifo(work / "checkpoint-1" / "evidential_config.json")
        ctx.extra["checkpoint"] = work / "checkpoint-1"

    return make


def report_says_limited(ctx: Ctx) -> None:
    md = (ctx.tmp / "r" / "report.md").read_text()
    summary = md.split("## Summary", 1)[1]
    assert "A subset, evaluated with `--limit`.** id4 (--limit 100)" in summary, summary[:400]
    assert json.loads((ctx.tmp / "r" / "report.json").read_text())["summary"]["limited"] == {"id4": 100.0}


def records_keep_the_limit(ctx: Ctx) -> None:
    [path] = (ctx.tmp / "o").rglob("records_obqa_edl_*.parquet")
    assert read_records_file(path).meta["limit"] == 3


def mirror_fifo(ctx: Ctx) -> None:
    """The offline mirror's ARC-Challenge split replaced by a FIFO (nothing ever writes to it)."""
    path = ctx.mirror / ARC
    path.unlink()
    os.mkfifo(path)


def report_json_fifo(ctx: Ctx) -> None:
    """A folder that looks like a previous report, but its report.json is a FIFO."""
    (ctx.tmp / "r").mkdir()
    os.mkfifo(ctx.tmp / "r" / "report.json")


# -------------------------------------------------------------------- inputs: stock tasks behind lettered views


def stock_task(
    name: str, *rows: dict, choice: str = '"{{choices}}"', target: str = '"{{gold}}"', extra: str = "", train=()
):
    """A stock-style multiple-choice task ``name`` in {tmp}/tasks on its own JSON file (``dataset_path: json``
    and ``data_files``), asked by answer text: its lettered view is ``<name>_edl``. ``train``: rows of a
    ``train`` split beside it (``extra`` can then say ``fewshot_split: train``)."""

    def make(ctx: Ctx) -> None:
        folder = ctx.tmp / "tasks"
        folder.mkdir(exist_ok=True)
        files = ""
        for split, split_rows in (("test", rows), ("train", train)):
            if split_rows:
                data = ctx.tmp / f"{name}_{split}.jsonl"
                data.write_text("".join(json.dumps(r) + "\n" for r in split_rows))
                files += f"    {split}: {data}\n"
        (folder / f"{name}.yaml").write_text(
            f"task: {name}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n{files}test_split: test\n"
            f'output_type: multiple_choice\ndoc_to_text: "{{{{q}}}}\\nAnswer:"\ndoc_to_choice: {choice}\n'
            f"doc_to_target: {target}\nmetric_list:\n  - metric: acc\n{extra}"
        )

    return make


def stock_group(yaml: str, *tasks: Callable):
    """Stock tasks (``stock_task``) and a group YAML over them in {tmp}/tasks."""

    def make(ctx: Ctx) -> None:
        for task in tasks:
            task(ctx)
        (ctx.tmp / "tasks" / "group.yaml").write_text(yaml.replace("{tmp}", str(ctx.tmp)))

    return make


def someone_elses_json_rows(ctx: Ctx) -> None:
    """The mirror's ``json/default/test.jsonl``: rows of nobody's task, where a mirrored ``dataset_path: json``
    task would wrongly be read from."""
    stock_task("mine", QUESTION_ROW, {**QUESTION_ROW, "q": "Which one is mine?"})(ctx)
    path = ctx.mirror / "json" / "default" / "test.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"q": "Somebody else's?", "choices": ["x", "y"], "gold": 0}) + "\n")


def read_its_own_files(tasks, ctx: Ctx) -> None:
    task = tasks["mine_edl"]
    assert [d["question"] for d in task.eval_docs] == ["Which colour?", "Which one is mine?"]
    assert task._data_source["origin"] == "local files"


def shown_on_one_line(tasks, ctx: Ctx) -> None:
    [task] = tasks.values()
    prompt = task.doc_to_text(list(task.eval_docs)[0])
    assert "A) red Answer: B\nB) green" in prompt and prompt.count("\nAnswer:") == 1, prompt


def compared_side_by_side(ctx: Ctx) -> None:
    """The report refused one pair of the comparison and still wrote the rest of it."""
    section = json.loads((ctx.tmp / "r" / "report.json").read_text())["compare"]
    assert {(r["method"], r["ood_task"]) for r in section["refused"]} == {("a", "ood5"), ("b", "ood5")}
    assert {r["ood_task"] for r in section["ood"]} == {"ood4"}
    assert "## Methods side by side" in (ctx.tmp / "r" / "report.md").read_text()


def lettered_member_as_is(tasks, ctx: Ctx) -> None:
    assert sorted(tasks) == ["obqa_edl", "plain_edl"]


def before_the_weights(ctx: Ctx) -> None:
    """An ``eval`` row's check: it was refused before the model's weights started to load."""
    assert not ctx.extra["weights_loaded"], "refused only after the model started to load"


def view_of(*names: str) -> Cmd:
    return Cmd(list(names))


QUESTION_ROW = {"q": "Which colour?", "choices": ["red", "green", "blue", "pink"], "gold": 1}


# -------------------------------------------------------------------- inputs: training checkpoints (issue 36)


def trained_copy(damage: str | None = None):
    """{tmp}/t: a copy of a 2-step EDL run of the tiny model (checkpoint-1, checkpoint-2, the adapter), with
    ``damage``: an ``optimizer.pt`` cut short, no ``trainer_state.json``, an empty ``checkpoint-3``."""

    def make(ctx: Ctx) -> None:
        out = ctx.tmp / "t"
        shutil.copytree(ctx.extra["trained"], out)
        last = out / "checkpoint-2"
        if damage == "optimizer":
            data = (last / "optimizer.pt").read_bytes()
            (last / "optimizer.pt").write_bytes(data[: len(data) // 2])
        elif damage == "no-state":
            (last / "trainer_state.json").unlink()
        elif damage == "empty":
            (out / "checkpoint-3").mkdir()

    return make


def resume(*extra: str) -> list:
    return [
        "train",
        "--pretrained",
        "{model}",
        "--task",
        "obqa_edl",
        "--output-dir",
        "{tmp}/t",
        "--max-steps",
        "3",
        "--resume-from-checkpoint",
        "latest",
        *extra,
    ]


# -------------------------------------------------------------------- inputs: records that disagree with themselves


def with_phantoms(row0, phantom_count: int = 4):
    """id4's records with 4 phantom logits a row (the metadata's ``phantom_count``), row 0's made ``row0``."""

    def make(ctx: Ctx) -> Path:
        rec = _records("id4", 60, 4, 1.0, 1)
        rows = [{**r, "phantom_logits": [0.5, 0.25, 0.0, -0.5]} for r in rec]
        meta = {**rec.meta, "phantom_count": phantom_count}
        write_records(ctx.rec("id4"), Records.from_rows(rows, task="id4", meta=meta))
        return edited(column="phantom_logits", row=0, value=row0)(ctx)

    return make


def another_run_in_a_subfolder(ctx: Ctx) -> None:
    """Another run's id4 records, stamped with the same date_id, in a subfolder beside the run."""
    write_records(records_path(ctx.folder / "older", "id4", DATE), _records("id4", 60, 4, 3.0, 9))


def ood4_in_another_folder(ctx: Ctx) -> None:
    """The run's ood4 records moved into another model's folder (same date_id): two folders, one run name."""
    target = records_path(ctx.out / "other-llm", "ood4", DATE)
    target.parent.mkdir(parents=True)
    shutil.move(ctx.rec("ood4"), target)


def paper_ood(k: int, *, softmax: bool = False, id_task: str = "id4"):
    """An ``arc_c_edl`` run beside ``id_task``, both at K = ``k`` (softmax records for ``softmax``)."""

    def make(ctx: Ctx) -> None:
        for task, shift, seed in ((id_task, 1.0, 11), ("arc_c_edl", 0.0, 12)):
            write_records(ctx.rec(task), _records(task, 40, k, shift, seed, softmax=softmax))

    return make


def renamed_records(name: str):
    """ood4's records file renamed to ``name`` in its folder (a name the loader does not read)."""

    def make(ctx: Ctx) -> None:
        shutil.move(ctx.rec("ood4"), ctx.folder / name)

    return make


def phantoms_on_both(ctx: Ctx) -> None:
    """id4 and ood4 with 4 phantom logits a row (the run's phantom_count 4)."""
    for task, shift, seed in (("id4", 1.0, 1), ("ood4", 0.0, 2)):
        rec = _records(task, 40, 4, shift, seed)
        rows = [{**r, "phantom_logits": [0.5, 0.25, 0.0, -0.5]} for r in rec]
        write_records(ctx.rec(task), Records.from_rows(rows, task=task, meta={**rec.meta, "phantom_count": 4}))


def one_single_option_question(ctx: Ctx) -> None:
    """ood4 with one question of K = 1 among its 4-option ones."""
    rec = _records("ood4", 30, 4, 0.0, 2)
    rows = list(rec)
    z = np.array([0.7])
    rows[0] = make_record(task="ood4", doc_id=0, labels=["A"], gold=0, logits=z, alpha=np.logaddexp(0.0, z) + 1.0)
    write_records(ctx.rec("ood4"), Records.from_rows(rows, task="ood4", meta=rec.meta))


K1_NOTE = r"neg_norm_entropy left out: some questions have K = 1 \(ood4: 1\), where it is undefined"


# -------------------------------------------------------------------- inputs: records of several members


def _member_records(task: str, n: int, k: int, shift: float, seed: int, m: int = 3, source: str = "ensemble"):
    """Records of ``m`` softmax members per question (an ensemble's, or MC dropout's with ``source``)."""
    rng = np.random.default_rng(seed)
    members = [rng.normal(shift, 1.5, size=(1, k)) + rng.normal(0, 0.7, size=(m, k)) for _ in range(n)]
    rows = make_records(
        task=task,
        doc_ids=range(n),
        labels=[list(LETTERS[:k])] * n,
        gold=rng.integers(k, size=n).tolist(),
        logits=None,
        alpha=None,
        optional={"member_logits": members},
        members_method="softmax",
    )
    said = {"source": "ensemble", "names": [f"member_{i}" for i in range(m)]}
    if source != "ensemble":
        said = {"source": source, "samples": m, "seed": 0}
    meta = {"method": "softmax", "prior_weight": 1.0, "pretrained": "synthetic-llm", "members": said}
    return Records.from_rows(rows, task=task, meta=meta)


def member_file(*, m: int = 3, edit: Callable | None = None, meta: dict | None = None, drop: str | None = None):
    """ens4: the records of a 3-member ensemble beside the run (``m`` members a question), then its
    ``member_logits`` lists changed by ``edit(rows)``, its metadata by ``meta`` or a column dropped."""

    def make(ctx: Ctx) -> Path:
        write_records(ctx.rec("ens4"), _member_records("ens4", 30, 4, 1.0, 21, m=m))
        table = pq.read_table(ctx.rec("ens4"))
        if edit is not None:
            index = table.schema.get_field_index("member_logits")
            values = edit(table.column("member_logits").to_pylist())
            table = table.set_column(index, table.schema.field(index), pa.array(values, table.schema.field(index).type))
        pq.write_table(table, ctx.rec("ens4"))
        if meta is not None or drop is not None:
            edited("ens4", meta={**(meta or {})} if meta is not None else None, drop=drop)(ctx)
        return ctx.rec("ens4")

    return make


def in_row(row: int, change: Callable):
    """An edit of ``member_logits`` lists: row ``row``'s members changed by ``change(members)``."""
    return lambda rows: [change(members) if i == row else members for i, members in enumerate(rows)]


def member_runs(ood_source: str = "ensemble", ood_members: bool = True):
    """ens4 (ID) and ensood4 (OOD) records of one 3-member ensemble; the OOD side scored by ``ood_source``
    instead, or (``ood_members`` False) by one model."""

    def make(ctx: Ctx) -> None:
        write_records(ctx.rec("ens4"), _member_records("ens4", 40, 4, 1.0, 22))
        ood = _member_records("ensood4", 40, 4, 0.0, 23, source=ood_source)
        if not ood_members:
            ood = _records("ensood4", 40, 4, 0.0, 23, softmax=True)
        write_records(ctx.rec("ensood4"), ood)

    return make


# ----------------------------------------------------------------------------- the catalogue

L, D, C, M, E, T, S, V = "loader", "dataset", "cli", "model", "eval", "train", "subprocess", "view"
VM = "vllm"

IE = "EvidentialInputError"
TINY = "pretrained={model},dtype=float32"
EDITED = "the file was edited"

CATALOGUE = [
    # -- records files: every stored column must follow from the model outputs it was derived from
    (
        L,
        "evidence-nan-beside-valid-alpha",
        edited(column="evidence", value=lambda v: [float("nan"), *v[1:]]),
        Refused(RecordsError, r"row 0: stored evidence nan \(class 0\) does not follow from the record's alpha"),
    ),
    (
        L,
        "evidence-negative",
        edited(column="evidence", row=3, value=lambda v: [-1.0, *v[1:]]),
        Refused(RecordsError, r"row 3: stored evidence -1\.0"),
    ),
    (
        L,
        "evidence-off-by-a-little",
        edited(column="evidence", row=5, value=bump(2, 1e-6)),
        Refused(RecordsError, r"row 5: stored evidence .*\(class 2\)"),
    ),
    (
        L,
        "evidence-null-for-evidential-record",
        edited(column="evidence", row=1, value=None),
        Refused(RecordsError, r"row 1: stored evidence nan"),
    ),
    (
        L,
        "softmax-record-with-evidence",
        edited("sm4", column="evidence", row=2, value=[1.0, 1.0, 1.0, 1.0]),
        Refused(RecordsError, r"row 2: a method=softmax record has evidence values"),
    ),
    (
        L,
        "softmax-record-with-vacuity",
        edited("sm4", column="vacuity", row=0, value=0.5),
        Refused(RecordsError, r"method=softmax record has vacuity 0\.5"),
    ),
    (
        L,
        "metadata-says-softmax-for-evidential-file",
        edited(meta={"method": "softmax"}),
        Refused(RecordsError, r"softmax record has (evidence|alpha) values"),
    ),
    (
        L,
        "vacuity-edited",
        edited(column="vacuity", row=4, value=lambda v: v * 0.9),
        Refused(RecordsError, r"row 4: stored vacuity .* does not follow"),
    ),
    (
        L,
        "strength-edited",
        edited(column="strength", row=0, value=lambda v: v + 1),
        Refused(RecordsError, r"row 0: stored strength"),
    ),
    (
        L,
        "max-prob-edited",
        edited(column="max_prob", row=6, value=0.999),
        Refused(RecordsError, r"row 6: stored max_prob"),
    ),
    (
        L,
        "pred-edited",
        edited(column="pred", row=0, value=lambda v: (v + 1) % 4),
        Refused(RecordsError, r"row 0: stored pred"),
    ),
    (
        L,
        "correct-flipped",
        edited(column="correct", row=7, value=lambda v: not v),
        Refused(RecordsError, r"row 7: stored correct"),
    ),
    (
        L,
        "alpha-below-prior",
        edited(column="alpha", row=2, value=lambda v: [0.5, *v[1:]]),
        Refused(RecordsError, r"row 2: alpha 0\.5 is below the prior weight"),
    ),
    (
        L,
        "alpha-infinite",
        edited(column="alpha", row=2, value=lambda v: [float("inf"), *v[1:]]),
        Refused(RecordsError, r"row 2: alpha inf is not finite"),
    ),
    (
        L,
        "logit-nan",
        edited(column="logits", row=9, value=lambda v: [float("nan"), *v[1:]]),
        Refused(RecordsError, r"row 9: non-finite logit nan"),
    ),
    (
        L,
        "gold-out-of-range",
        edited(column="gold", row=1, value=4),
        Refused(RecordsError, r"row 1: gold index 4 outside 0\.\.3"),
    ),
    (L, "k-zero", edited(column="k", row=0, value=0), Refused(RecordsError, r"row 0 has k=0 but 4 labels")),
    (
        L,
        "labels-shorter-than-k",
        edited(column="labels", row=3, value=["A", "B", "C"]),
        Refused(RecordsError, r"row 3 has k=4 but 3 labels"),
    ),
    (
        L,
        "duplicate-doc-id",
        edited(column="doc_id", row=1, value=0),
        Refused(RecordsError, r"doc_id 0 appears more than once"),
    ),
    (
        L,
        "rows-of-another-task",
        edited(column="task", row=8, value="ood4"),
        Refused(RecordsError, r"rows of task 'ood4' in the records of 'id4'"),
    ),
    (
        L,
        "negative-prior-weight-in-metadata",
        edited(meta={"prior_weight": -1}),
        Refused(RecordsError, r"prior_weight -1 in the metadata must be a positive number"),
    ),
    (
        L,
        "schema-version-2",
        edited(meta={"schema_version": 2}),
        Refused(RecordsError, r"schema version 2, this package reads version 1"),
    ),
    (L, "column-missing", edited(drop="vacuity"), Refused(RecordsError, r"lacks the fields \['vacuity'\]")),
    # -- a permuted run's records: each order a permutation of the question's options, each (question, order) once
    (
        L,
        "order-not-a-permutation",
        permuted_file_edited(lambda o: o.__setitem__(1, [1, 1, 2, 3])),
        Refused(RecordsError, r"row 1: order \[1, 1, 2, 3\] is not a permutation of the question's 4 options"),
    ),
    (
        L,
        "order-twice-in-one-question",
        permuted_file_edited(lambda o: o.__setitem__(1, [0, 1, 2, 3])),
        Refused(RecordsError, r"doc_id 0 in order \[0, 1, 2, 3\] appears more than once"),
    ),
    (
        L,
        "order-gold-does-not-follow-its-option",
        permuted_file_edited(lambda o: o.__setitem__(1, [2, 1, 0, 3])),
        Refused(RecordsError, r"doc_id 0: its orders disagree on the gold option"),
    ),
    (
        L,
        "column-of-wrong-type",
        k_as_text,
        Refused(RecordsError, r"field 'k' has type string, not the records schema's"),
    ),
    (L, "truncated-file", raw_bytes(lambda b: b[: len(b) // 2]), Refused(RecordsError, r"truncated or corrupted")),
    (L, "empty-file", raw_bytes(lambda b: b""), Refused(RecordsError, r"truncated or corrupted")),
    (
        L,
        "foreign-parquet-without-metadata",
        foreign_parquet,
        Refused(RecordsError, r"not an lm-eval-evidential records file \(no metadata\)"),
    ),
    (
        L,
        "metadata-not-json",
        raw_bytes(lambda b: b.replace(b'"schema_version"', b'"schema_version\\x"', 1)),
        Refused(RecordsError, r"metadata is not valid JSON|truncated or corrupted"),
    ),
    (
        L,
        "json-where-parquet-belongs",
        raw_bytes(lambda b: b'[{"score": "max_prob"}]\n'),
        Refused(RecordsError, r"truncated or corrupted"),
    ),
    # -- datasets (offline mirror in the hub schema)
    (
        D,
        "missing-field",
        mirror_rows(GOOD, {"id": "q-nf", "question": "Which?", "answerKey": "A"}),
        Refused("DatasetError", r"arc_c_edl.*row 1.*does not have the expected schema.*'choices'"),
    ),
    (
        D,
        "row-is-a-list",
        mirror_lines(json.dumps(GOOD) + "\n", "[1, 2, 3]\n"),
        Refused("DatasetError", r"row 1.*got a JSON list"),
    ),
    (
        D,
        "bad-answer-key",
        mirror_rows(GOOD, arc_row("q-key", ["A", "B", "C", "D"], "F")),
        Refused("DatasetError", r"doc 'q-key'.*answer key 'F' is not among the labels"),
    ),
    (
        D,
        "lower-case-answer-key",
        mirror_rows(GOOD, arc_row("q-low", ["A", "B", "C", "D"], "b")),
        Refused("DatasetError", r"doc 'q-low'.*answer key 'b'"),
    ),
    (
        D,
        "zero-choices",
        mirror_rows(GOOD, arc_row("q-none", [], "A")),
        Refused("DatasetError", r"doc 'q-none'.*no answer options"),
    ),
    (
        D,
        "duplicate-labels",
        mirror_rows(GOOD, arc_row("q-dup", ["A", "B", "B", "D"], "A")),
        Refused("DatasetError", r"duplicate answer labels"),
    ),
    (
        D,
        "six-options-five-tokens",
        mirror_rows(GOOD, arc_row("q-six", list("ABCDEF"), "A")),
        Refused("DatasetError", r"declares only 5 answer tokens"),
    ),
    (
        D,
        "duplicate-choice-texts",
        mirror_rows(GOOD, arc_row("q-twin", list("ABCD"), "A", ["x", "x", "y", "z"])),
        Warned(
            r"arc_c_edl: 1 question\(s\) repeat an answer option's text, e.g. task 'arc_c_edl', doc 'q-twin' \(row "
            r"1\) has 'x' twice"
        ),
    ),
    (
        D,
        "truncated-jsonl",
        mirror_lines(json.dumps(GOOD) + "\n", json.dumps(arc_row("q-cut", list("ABCD"), "A"))[:40]),
        Refused("DatasetError", r"test\.jsonl:2 is not valid JSON .*ends inside this line \(truncated\?\)"),
    ),
    (
        D,
        "not-utf8",
        mirror_lines(json.dumps(GOOD) + "\n", b'{"id": "\xff\xfe"}\n'),
        Refused("DatasetError", r"test\.jsonl:2 is not UTF-8"),
    ),
    (D, "empty-split-file", mirror_lines(), Refused("DatasetError", r"split 'test' of allenai/ai2_arc .* is empty")),
    (
        D,
        "missing-split-file",
        mirror_removed(),
        Refused("DatasetError", r"arc_c_edl.*offline mirror file .*ARC-Challenge/test\.jsonl not found"),
    ),
    (D, "empty-mirror-folder", mirror_emptied, Refused("DatasetError", r"offline mirror file .* not found")),
    # -- audit commands: clear lines for expected conditions, nothing written
    (
        C,
        "output-path-missing",
        ["ood", "{tmp}/nowhere", "--id", "id4", "--ood", "ood4"],
        Exit(1, r"output path .*nowhere does not exist"),
    ),
    (
        C,
        "audit-of-a-report-folder",
        Cmd(["ood", "{tmp}/old_report", "--id", "id4", "--ood", "ood4"], previous_report),
        Exit(1, r"old_report is a report folder .*not an lm_eval output folder: pass the folder given to lm_eval"),
    ),
    (
        C,
        "task-named-by-a-prefix-of-its-name",
        ["ood", "{out}", "--id", "id", "--ood", "ood4"],
        Exit(1, r"no records for task 'id' under .*: did you mean 'id4'\?"),
    ),
    (
        C,
        "score-named-as-the-uncertainty",
        ["ood", "{out}", "--id", "id4", "--ood", "ood4", "--scores", "vacuity"],
        Exit(1, r"vacuity is reciprocal_vacuity here \(scores are oriented higher = more in-distribution"),
    ),
    (
        C,
        "task-never-evaluated",
        ["ood", "{out}", "--id", "id4", "--ood", "nope"],
        Exit(1, r"no records for task 'nope'"),
    ),
    # -- the order audit: permuted records only, one kind of run per task, orders compared only with orders
    (
        C,
        "permutations-of-an-unpermuted-run",
        ["permutations", "{out}", "--task", "id4"],
        Exit(1, r"error: the records of 'id4' have no answer orders .*permutations"),
    ),
    (
        C,
        "permutations-folder-mixes-permuted-and-unpermuted-runs",
        Cmd(["permutations", "{out}", "--task", "p4"], mixed_order_runs),
        Exit(1, r"error: .* holds runs of 'p4' evaluated in different answer orders .*--run DATE_ID"),
    ),
    (
        C,
        "permutations-permuted-id-vs-unpermuted-ood",
        Cmd(["permutations", "{out}", "--task", "p4", "--id", "p4", "--ood", "ood4"], permuted_run),
        Exit(2, r"refused: p4 was evaluated in several answer orders \(cyclic\) and ood4 in one"),
    ),
    # -- every other audit: a permuted run refused, or its orders averaged on request (one kind on both sides)
    (
        C,
        "audit-counting-examples-given-a-permuted-run",
        Cmd(["ood", "{out}", "--id", "p4", "--ood", "ood4"], permuted_run),
        Exit(
            2,
            r"refused: p4 holds a permuted run \(cyclic: 48 records of 12 questions, 4 orders each\) and `ood` "
            r"counts each record as an example.* pass --average-orders",
        ),
    ),
    (
        C,
        "averaged-orders-beside-one-order-in-a-per-task-audit",
        Cmd(["calibration", "{out}", "--task", "p4,ood4", "--average-orders"], permuted_run),
        Exit(0, r"note: p4: each question's 4 answer orders \(cyclic\) averaged into one record \(48 records -> 12"),
    ),
    (
        C,
        "averaged-orders-id-against-an-unpermuted-ood",
        Cmd(["ood", "{out}", "--id", "p4", "--ood", "ood4", "--average-orders"], permuted_run),
        Exit(2, r"refused: p4 is cyclic orders averaged and ood4 is shown in one order"),
    ),
    (
        C,
        "compare-given-a-permuted-run-names-the-cli-remedy",
        Cmd(["compare", "{out}", "--id", "p4", "--ood", "ood4", "--n-boot", "0"], permuted_run),
        Exit(
            2,
            r"refused: p4 holds a permuted run .* and `compare` counts each record as an example.* --average-orders"
            r".* an unpermuted run \(its output folder\)$",  # not --run, which compare has not
        ),
    ),
    (
        C,
        "compare-averaged-orders-id-against-an-unpermuted-ood",
        Cmd(["compare", "{out}", "--id", "p4", "--ood", "ood4", "--n-boot", "0", "--average-orders"], permuted_run),
        Exit(2, r"refused: p4 is cyclic orders averaged and ood4 is shown in one order"),
    ),
    (
        C,
        "run-not-there",
        ["ood", "{out}", "--id", "id4", "--ood", "ood4", "--run", "1999-01-01T00-00-00.0"],
        Exit(1, r"no run '1999-01-01T00-00-00\.0'"),
    ),
    (
        C,
        "unknown-score",
        ["ood", "{out}", "--id", "id4", "--ood", "ood4", "--scores", "vacuityy"],
        Exit(1, r"vacuityy"),
    ),
    # -- inputs are never outputs; nothing written outside the named output
    (
        C,
        "json-onto-the-records-file-read",
        ["ood", "{out}", "--id", "id4", "--ood", "ood4", "--json", "{rec}"],
        Exit(1, r"--json .*records_id4_.*\.parquet: it is a records \(Parquet\) file; outputs never replace records"),
    ),
    (
        C,
        "json-onto-another-records-file",
        ["calibration", "{out}", "--task", "id4", "--json", "{folder}/records_ood5_" + DATE + ".parquet"],
        Exit(1, r"it is a records \(Parquet\) file"),
    ),
    (
        C,
        "json-onto-a-renamed-parquet-file",
        Cmd(
            ["ood", "{out}", "--id", "id4", "--ood", "ood4", "--json", "{tmp}/copy.json"],
            lambda c: shutil.copy(c.rec("ood4"), c.tmp / "copy.json"),
        ),
        Exit(1, r"copy\.json: it is a records \(Parquet\) file"),
    ),
    (
        C,
        "json-onto-a-new-records-name",
        ["orders", "{out}", "--task", "id4", "--json", "{tmp}/records_x_2026-01-01T00-00-00.1.parquet"],
        Exit(1, r"it is a records \(Parquet\) file"),
    ),
    (
        C,
        "json-onto-a-results-file",
        Cmd(
            ["atc", "{out}", "--id", "id4", "--target", "ood4", "--json", "{folder}/results_" + DATE + ".json"],
            lambda c: (c.folder / f"results_{DATE}.json").write_text("{}"),
        ),
        Exit(1, r"it is a harness results file"),
    ),
    (
        C,
        "json-onto-a-folder",
        ["ood", "{out}", "--id", "id4", "--ood", "ood4", "--json", "{tmp}"],
        Exit(1, r"--json .*scratch: it is a folder; name a file"),
    ),
    (
        C,
        "json-onto-the-output-path",
        ["selective", "{out}", "--task", "id4", "--json", "{out}"],
        Exit(1, r"--json .*out: it is a folder"),
    ),
    (
        C,
        "plot-onto-a-folder",
        Cmd(
            ["ksweep", "{out}", "--id", "id4", "--ood", "ood4", "--plot", "{tmp}/fig"],
            lambda c: (c.tmp / "fig.png").mkdir(),
        ),
        Exit(1, r"--plot .*fig would write .*fig\.png: it is a folder; name a file"),
    ),
    (
        C,
        "report-out-is-a-file",
        Cmd(
            ["report", "{out}", "--id", "id4", "--ood", "ood4", "--out", "{tmp}/notes.txt"],
            lambda c: (c.tmp / "notes.txt").write_text("mine"),
        ),
        Exit(1, r"notes\.txt is a file, not a folder"),
    ),
    (
        C,
        "report-out-is-the-records-folder",
        ["report", "{out}", "--id", "id4", "--ood", "ood4", "--out", "{folder}"],
        Exit(
            1,
            r"synthetic-llm (is a folder with other files in it|holds .*records_id4_.*, a records file this report "
            r"reads)",
        ),
    ),
    (
        C,
        "report-out-is-the-output-path",
        ["report", "{out}", "--id", "id4", "--ood", "ood4", "--out", "{out}"],
        Exit(1, r"out (is a folder with other files in it|holds .*, a records file this report reads)"),
    ),
    (
        C,
        "report-out-is-someone-elses-folder",
        Cmd(
            ["report", "{out}", "--id", "id4", "--ood", "ood4", "--out", "{tmp}/docs"],
            lambda c: (c.tmp / "docs").mkdir() or (c.tmp / "docs" / "thesis.tex").write_text("mine"),
        ),
        Exit(1, r"docs is a folder with other files in it"),
    ),
    (
        C,
        "report-replaces-a-previous-report-whole",
        Cmd(
            [
                "report",
                "{out}",
                "--id",
                "id4",
                "--ood",
                "ood4",
                "--n-boot",
                "0",
                "--max-extra",
                "1",
                "--out",
                "{tmp}/old_report",
            ],
            previous_report,
        ),
        Exit(0, r"wrote", writes=("{tmp}/old_report/*",), check=only_the_new_report),
    ),
    (
        C,
        "report-removes-the-temp-folder-of-a-killed-report",
        Cmd(
            [
                "report",
                "{out}",
                "--id",
                "id4",
                "--ood",
                "ood4",
                "--n-boot",
                "0",
                "--max-extra",
                "1",
                "--out",
                "{tmp}/old_report",
            ],
            killed_report_left_its_temp_folder,
        ),
        Exit(0, r"wrote", writes=("{tmp}/old_report/*", "{tmp}/.old_report.*/*"), check=only_the_new_report),
    ),
    (
        C,
        "plot-named-after-a-records-file-leaves-it-alone",
        ["ksweep", "{out}", "--id", "id4", "--ood", "ood4", "--plot", "{folder}/records_ood4_" + DATE + ".parquet"],
        Exit(
            0,
            r"reciprocal_vacuity",
            writes=("{folder}/records_ood4_*.parquet.png", "{folder}/records_ood4_*.parquet.svg"),
        ),
    ),
    (
        C,
        "demo-out-is-someone-elses-folder",
        Cmd(
            ["demo", "--fast", "--out", "{tmp}/docs"],
            lambda c: (c.tmp / "docs").mkdir() or (c.tmp / "docs" / "thesis.tex").write_text("mine"),
        ),
        Exit(1, r"--out .*docs is a folder with other files in it; name a new or empty folder"),
    ),
    (
        C,
        "demo-out-is-a-file",
        Cmd(["demo", "--fast", "--out", "{tmp}/notes.txt"], lambda c: (c.tmp / "notes.txt").write_text("mine")),
        Exit(1, r"--out .*notes\.txt is a file, not a folder"),
    ),
    # the demo's numbers are train's and lm_eval's, refused in their declared words before anything is built
    (
        C,
        "demo-max-steps-zero",
        ["demo", "--out", "{tmp}/d", "--max-steps", "0"],
        Exit(1, r"max_steps=0 must be an integer >= 1"),
    ),
    (C, "demo-limit-zero", ["demo", "--out", "{tmp}/d", "--limit", "0"], Exit(1, r"limit=0 must be an integer >= 1")),
    (
        C,
        "json-into-a-new-subfolder",
        ["ood", "{out}", "--id", "id4", "--ood", "ood4", "--n-boot", "0", "--json", "{tmp}/a/b/ood.json"],
        Exit(0, r"auroc", writes=("{tmp}/a/b/ood.json",)),
    ),
    (
        C,
        "json-under-a-path-that-is-a-file",
        Cmd(
            ["ood", "{out}", "--id", "id4", "--ood", "ood4", "--n-boot", "0", "--json", "{tmp}/notes.txt/ood.json"],
            lambda c: (c.tmp / "notes.txt").write_text("mine"),
        ),
        Exit(1, r"--json .*notes\.txt/ood\.json: .*notes\.txt is a file, not a folder; name a path inside a folder"),
    ),
    (
        C,
        "report-out-under-a-file",
        Cmd(
            ["report", "{out}", "--id", "id4", "--ood", "ood4", "--out", "{tmp}/notes.txt/report"],
            lambda c: (c.tmp / "notes.txt").write_text("mine"),
        ),
        Exit(1, r"--out .*notes\.txt/report: .*notes\.txt is a file, not a folder"),
    ),
    (
        C,
        "report-into-a-new-nested-folder",
        [
            "report",
            "{out}",
            "--id",
            "id4",
            "--ood",
            "ood4",
            "--n-boot",
            "0",
            "--max-extra",
            "1",
            "--out",
            "{tmp}/a/b/report",
        ],
        Exit(0, r"wrote", writes=("{tmp}/a/b/report/*",)),
    ),
    # -- methods side by side (compare, report --compare): K-checked, a refused pair exits 2 after the others
    (
        C,
        "compare-a-k-mismatched-pair",
        Cmd(
            ["compare", "{out}", "{tmp}/other", "--names", "a,b", "--id", "id4", "--ood", "ood4,ood5", "--n-boot", "0"],
            _another_method,
        ),
        Exit(
            2,
            r"note: b / ood5: K_ID = \[4\] vs K_OOD = \[5\]: not compared \(the score moves with K itself\); "
            r"--k-mismatched computes it marked K-MISMATCHED, or compare a K-matched control",
        ),
    ),
    (
        C,
        "compare-methods-evaluated-on-other-questions",
        Cmd(
            ["compare", "{out}", "{tmp}/other", "--names", "a,b", "--id", "id4", "--ood", "ood4", "--n-boot", "0"],
            _another_method_on_fewer_questions,
        ),
        Exit(
            2,
            r"refused: id4: methods 'a' and 'b' were evaluated on different questions \(a: 60, b: 40; doc_id 40 only "
            r"in a's records\): .* evaluate every method on the same questions \(the same task data and --limit\)",
        ),
    ),
    (
        C,
        "report-compare-a-method-evaluated-on-other-questions",
        Cmd(
            ["report", "{out}", "--id", "id4", "--ood", "ood4", "--n-boot", "0", "--max-extra", "1", "--out", "{tmp}/r"]
            + ["--compare", "{tmp}/other", "--compare-names", "a,b"],
            _another_method_on_fewer_questions,
        ),
        Exit(2, r"refused: id4: methods 'a' and 'b' were evaluated on different questions \(a: 60, b: 40"),
    ),
    (
        C,
        "compare-fewer-names-than-folders",
        ["compare", "{out}", "{out}", "--names", "a", "--id", "id4", "--ood", "ood4"],
        Exit(1, r"error: --names gives 1 distinct name\(s\) for 2 run folders; give one each"),
    ),
    (
        C,
        "report-compare-a-k-mismatched-pair",
        Cmd(
            [
                "report",
                "{out}",
                "--id",
                "id4",
                "--ood",
                "ood4,ood5",
                "--n-boot",
                "0",
                "--max-extra",
                "1",
                "--out",
                "{tmp}/r",
                "--compare",
                "{tmp}/other",
                "--compare-names",
                "a,b",
            ],
            _another_method,
        ),
        Exit(
            2,
            r"refused in the comparison: b: id4 vs ood5: K_ID = \[4\] vs K_OOD = \[5\]: not compared .*; "
            r"adding report to --k-policy computes it marked K-MISMATCHED",
            writes=("{tmp}/r/*",),
            check=compared_side_by_side,
        ),
    ),
    (
        C,
        "report-compare-a-permuted-run",
        Cmd(
            [
                "report",
                "{out}",
                "--id",
                "id4",
                "--ood",
                "ood4",
                "--out",
                "{tmp}/r",
                "--compare",
                "{tmp}/other",
                "--compare-names",
                "a,b",
            ],
            lambda c: shutil.copytree(c.out, c.tmp / "other") and permuted_run(Ctx(c.tmp, c.tmp / "other"), "id4"),
        ),
        Exit(2, r"refused: id4 holds a permuted run \(cyclic: 48 records of 12 questions, 4 orders each\) and `rep"),
    ),  # fmt: skip
    (
        C,
        "report-compare-names-one-short",
        [
            "report",
            "{out}",
            "--id",
            "id4",
            "--ood",
            "ood4",
            "--out",
            "{tmp}/r",
            "--compare",
            "{out}",
            "--compare-names",
            "a",
        ],
        Exit(1, r"error: --compare-names gives 1 name\(s\) for 2 methods \(this run and 1 --compare folder\(s\)\)"),
    ),
    (
        C,
        "report-compare-names-without-compare",
        ["report", "{out}", "--id", "id4", "--ood", "ood4", "--out", "{tmp}/r", "--compare-names", "a,b"],
        Exit(1, r"error: --compare-names names the methods of --compare; give the folders with --compare"),
    ),
    (
        C,
        "report-compare-a-run-without-an-ood-task",
        Cmd(
            [
                "report",
                "{out}",
                "--id",
                "id4",
                "--ood",
                "ood4",
                "--out",
                "{tmp}/r",
                "--compare",
                "{tmp}/other",
                "--compare-names",
                "a,b",
            ],
            lambda c: write_records(records_path(c.tmp / "other" / "m", "id4", DATE), _records("id4", 20, 4, 1.0, 7)),
        ),
        Exit(1, r"error: no records for task 'ood4' under .*other"),
    ),  # fmt: skip
    # -- bounded work: every size-like option has a documented upper bound, refused at once above it
    (
        C,
        "ksweep-max-extra-huge",
        ["ksweep", "{out}", "--id", "id4", "--ood", "ood4", "--max-extra", "100000000"],
        Exit(1, r"max_extra=100000000 must be an integer in 0\.\.64 \(appended"),
    ),
    (
        C,
        "ksweep-max-extra-negative",
        ["ksweep", "{out}", "--id", "id4", "--ood", "ood4", "--max-extra", "-1"],
        Exit(1, r"max_extra=.* must be an integer in 0\.\.64"),
    ),
    (
        C,
        "report-max-extra-huge",
        ["report", "{out}", "--id", "id4", "--ood", "ood4", "--max-extra", "65", "--out", "{tmp}/r"],
        Exit(1, r"max_extra=.* must be an integer in 0\.\.64"),
    ),
    (
        C,
        "ood-n-boot-huge",
        ["ood", "{out}", "--id", "id4", "--ood", "ood4", "--n-boot", "1000000000"],
        Exit(1, r"n_boot=1000000000 must be 0 \(no interval\) or an integer in 2\.\.100000"),
    ),
    (
        C,
        "ood-n-boot-one",
        ["ood", "{out}", "--id", "id4", "--ood", "ood4", "--n-boot", "1"],
        Exit(1, r"n_boot=.* must be 0"),
    ),
    (
        C,
        "report-n-boot-huge",
        ["report", "{out}", "--id", "id4", "--ood", "ood4", "--n-boot", "100001", "--out", "{tmp}/r"],
        Exit(1, r"n_boot=.* must be 0 .* 2\.\.100000"),
    ),
    (
        C,
        "calibration-bins-huge",
        ["calibration", "{out}", "--task", "id4", "--bins", "1000000000"],
        Exit(1, r"n_bins=.* must be an integer in 1\.\.10000"),
    ),
    (
        C,
        "calibration-bins-zero",
        ["calibration", "{out}", "--task", "id4", "--bins", "0"],
        Exit(1, r"argument --bins: n_bins=0 must be an integer in 1\.\.10000; e\.g\. n_bins=15$"),
    ),
    (
        C,
        "ksweep-max-extra-at-the-bound",
        ["ksweep", "{out}", "--id", "id4", "--ood", "ood4", "--max-extra", "64", "--scores", "reciprocal_vacuity"],
        Exit(0, r"matched\s+64\s+68\s+68"),
    ),
    (C, "ood-level-above-one", ["ood", "{out}", "--id", "id4", "--ood", "ood4", "--level", "1.5"], Exit(1, r"level")),
    (
        C,
        "ood-level-one-refused-before-the-records-are-read",
        ["ood", "{out}", "--id", "id4", "--ood", "ood4", "--level", "1"],
        Exit(1, r"^(?![\s\S]*reading the records)[\s\S]*error: argument --level: level=1\.0 must be a finite number"),
    ),
    (
        C,
        "ood-negative-seed",
        ["ood", "{out}", "--id", "id4", "--ood", "ood4", "--seed", "-3"],
        Exit(1, r"argument --seed: seed=-3 must be an integer >= 0; e\.g\. seed=0$"),
    ),
    # -- comparisons that cannot mean anything
    (
        C,
        "ood-task-against-itself",
        ["ood", "{out}", "--id", "id4", "--ood", "id4"],
        Exit(1, r"--id and --ood both name 'id4': comparing a task with itself"),
    ),
    (
        C,
        "ksweep-task-against-itself",
        ["ksweep", "{out}", "--id", "ood4", "--ood", "ood4"],
        Exit(1, r"--id and --ood both name 'ood4'"),
    ),
    (
        C,
        "report-task-against-itself",
        ["report", "{out}", "--id", "id4", "--ood", "ood4,id4", "--n-boot", "0", "--out", "{tmp}/r"],
        Exit(1, r"--id and --ood both name 'id4'"),
    ),
    (C, "ood-empty-task-list", ["ood", "{out}", "--id", "id4", "--ood", ",,"], Exit(1, r"no task names in ',,'")),
    (
        C,
        "ood-near-names-the-id-task",
        ["ood", "{out}", "--id", "id4", "--near", "id4", "--far", "ood4"],
        Exit(1, r"--id and --near both name 'id4': comparing a task with itself gives AUROC 0\.5"),
    ),
    (
        C,
        "report-far-names-the-id-task",
        ["report", "{out}", "--id", "id4", "--near", "ood4", "--far", "id4", "--n-boot", "0", "--out", "{tmp}/r"],
        Exit(1, r"--id and --far both name 'id4'"),
    ),
    (
        C,
        "ood-task-named-twice",
        ["ood", "{out}", "--id", "id4", "--ood", "ood4, ood4"],
        Exit(1, r"task 'ood4' is named twice in 'ood4, ood4'; name each task once"),
    ),
    (
        C,
        "ood-score-named-twice",
        ["ood", "{out}", "--id", "id4", "--ood", "ood4", "--scores", "max_prob,vacuity,max_prob"],
        Exit(1, r"score 'max_prob' is named twice"),
    ),
    (
        C,
        "softmax-records-beside-evidential-refused",
        ["ksweep", "{out}", "--id", "sm4", "--ood", "ood4"],
        Exit(2, r"refused: .*different models or settings"),
    ),
    (
        C,
        "another-producer-refused",
        ["ood", "{out}", "--id", "id4", "--ood", "alien4", "--n-boot", "0"],
        Exit(2, r"(?s)refused: .*another-llm"),
    ),
    # -- model_args through stock lm_eval (EvidentialLM.create_from_arg_string): refused before any weights load
    (
        M,
        "pretrained-path-missing",
        "pretrained={tmp}/no/such/model",
        Refused(IE, r"pretrained=.*/no/such/model: no such file or folder \(the path does not exist"),
    ),
    (
        M,
        "pretrained-relative-path-missing",
        "pretrained=./no_such_model_dir",
        Refused(IE, r"pretrained=\./no_such_model_dir: no such file or folder"),
    ),
    (
        M,
        "pretrained-under-an-existing-folder",
        "pretrained={tmp}/model-v2",
        Refused(IE, r"model-v2: no such file or folder"),
    ),
    (
        M,
        "pretrained-is-a-file",
        "pretrained={rec}",
        Refused(IE, r"pretrained=.*records_id4_.*\.parquet is a file; pass the model's folder"),
    ),
    (
        M,
        "peft-path-missing",
        TINY + ",peft={tmp}/adapters/missing",
        Refused(IE, r"peft=.*adapters/missing: no such file or folder"),
    ),
    (
        M,
        "peft-empty-folder",
        Cmd(TINY + ",peft={tmp}/empty_adapter", lambda c: (c.tmp / "empty_adapter").mkdir()),
        Refused(IE, r"peft=.*empty_adapter is not a PEFT adapter folder \(no adapter_config\.json"),
    ),
    (
        M,
        "peft-of-an-interrupted-train-names-its-last-adapter-checkpoint",
        Cmd(TINY + ",peft={tmp}/work", adapter_beside("interrupted")),
        Refused(
            IE,
            r"peft=.*work is not a PEFT adapter folder .*did not finish: its last checkpoint loads as "
            r"peft=.*work/checkpoint-1, .*--resume-from-checkpoint latest",
        ),  # fmt: skip
    ),
    (
        M,
        "peft-for-another-base",
        TINY + ",peft={other_adapter}",
        Refused(
            IE,
            r"peft=.* does not fit the base model pretrained=.*: its \S+ has in_features=32, the model's has 64; "
            r"pass the base model the adapter was trained on",
        ),
    ),
    (
        M,
        "threads-zero",
        TINY + ",threads=0",
        Refused(
            IE,
            r"threads=0 must be a whole number of threads >= 1 \(torch's CPU threads; .*\); e\.g\. threads=1",
        ),
    ),
    # -- ensembles (peft=DIR of member folders) and MC dropout (mc_samples=N): refused before the weights load
    (
        M,
        "mc-samples-zero-adapter",
        TINY + ",peft={adapter},mc_samples=0",
        Refused(
            IE,
            r"mc_samples=0 must be an integer number of passes from 2 to 1000 \(MC dropout.*\); e\.g\. mc_samples=10",
        ),
    ),
    (
        M,
        "mc-samples-on-an-adapter-without-dropout",
        Cmd(TINY + ",peft={tmp}/nodrop,mc_samples=4", lambda c: _adapter_copy(c, "nodrop", lora_dropout=0.0)),
        Refused(IE, r"mc_samples=4 needs LoRA dropout between 0 and 1, but peft=.*nodrop has lora_dropout=0\.0"),
    ),
    (
        M,
        "ensemble-of-one-member-adapter",
        Cmd(TINY + ",peft={tmp}/ens", lambda c: _adapter_copy(c, "ens/member_0")),
        Refused(IE, r"peft=.*ens holds one adapter folder \(member_0\): an ensemble needs at least 2 members"),
    ),
    (
        M,
        "ensemble-members-of-another-base-adapter",
        Cmd(
            TINY + ",peft={tmp}/ens",
            lambda c: _adapter_copy(c, "ens/member_0") or _adapter_copy(c, "ens/member_1", c.extra["other_adapter"]),
        ),
        Refused(IE, r"peft=.*ens: its members were trained with different base models \(member_0: .*, member_1: .*\)"),
    ),
    (
        M,
        "ensemble-with-a-laplace-posterior-member-adapter",
        Cmd(TINY + ",peft={tmp}/ens", lambda c: _adapter_copy(c, "ens/member_0") or _laplace_copy(c, "ens/member_1")),
        Refused(
            IE,
            r"peft=.*ens: member_1 holds a Laplace posterior \(laplace_config\.json\), which an ensemble would ignore "
            r"\(each member is scored at its adapter's weights, not its posterior's samples\); pass peft=.*member_1",
        ),
    ),
    # -- Laplace-LoRA posteriors (peft=DIR holding laplace_config.json): refused before the weights load
    (
        M,
        "laplace-samples-one-adapter",
        TINY + ",peft={adapter},laplace_samples=1",
        Refused(
            IE, r"laplace_samples=1 must be an integer number of weight samples from 2 to 1000 \(a Laplace posterior"
        ),
    ),
    (
        M,
        "laplace-samples-on-an-adapter-without-a-posterior",
        TINY + ",peft={adapter},laplace_samples=4",
        Refused(IE, r"laplace_samples=4: peft=.* holds no Laplace posterior \(laplace_config\.json\); fit one"),
    ),
    (
        M,
        "mc-samples-on-a-laplace-posterior-adapter",
        Cmd(TINY + ",peft={tmp}/lap,mc_samples=3", lambda c: _laplace_copy(c, "lap")),
        Refused(IE, r"mc_samples=3 with peft=.*lap, which holds a Laplace posterior: score either its weight samples"),
    ),
    # -- a saved posterior that is damaged, foreign or of another adapter: one line naming the file, before the weights
    (
        M,
        "laplace-posterior-truncated",
        Cmd(TINY + ",peft={tmp}/lap", posterior_edited(truncate=True)),
        Refused(IE, r"lap/laplace_posterior\.safetensors: cannot be read \(.*\); fit the posterior again"),
    ),
    (
        M,
        "laplace-posterior-with-a-nan-scale",
        Cmd(TINY + ",peft={tmp}/lap", posterior_edited(tensors=lambda t: t["scale"].__setitem__(3, float("nan")))),
        Refused(IE, r"laplace_posterior\.safetensors: scale holds 1 non-finite values \(NaN or inf\); fit the"),
    ),
    (
        M,
        "laplace-posterior-with-a-negative-scale",
        Cmd(TINY + ",peft={tmp}/lap", posterior_edited(tensors=lambda t: t["scale"].mul_(-1))),
        Refused(IE, r"scale holds \d+ values <= 0 \(a scale P\^\(-1/2\) is positive\); fit the posterior again"),
    ),
    (
        M,
        "laplace-posterior-without-its-mean",
        Cmd(TINY + ",peft={tmp}/lap", posterior_edited(tensors=lambda t: t.pop("mean"))),
        Refused(IE, r"laplace_posterior\.safetensors: it holds no tensor 'mean'; fit the posterior again"),
    ),
    (
        M,
        "laplace-posterior-kron-without-its-blocks",
        Cmd(TINY + ",peft={tmp}/lap", posterior_edited(config={"structure": "kron"})),
        Refused(IE, r"it holds no square eigenvector matrix block0\.q0 for parameter 0; fit the posterior again"),
    ),
    (
        M,
        "laplace-posterior-config-without-parameters",
        Cmd(TINY + ",peft={tmp}/lap", posterior_edited(config={"parameters": None})),
        Refused(IE, r"laplace_config\.json: 'parameters' is not a list of \{name, shape\}"),
    ),
    (
        M,
        "laplace-posterior-config-of-one-sample",
        Cmd(TINY + ",peft={tmp}/lap", posterior_edited(config={"samples": 1})),
        Refused(IE, r"laplace_config\.json: samples=1 is not an integer in 2\.\.1000 \(or pass laplace_samples=N\)"),
    ),
    (
        M,
        "laplace-posterior-config-beyond-the-bound",  # the fit refuses --samples 5000; an edited file used to pass
        Cmd(TINY + ",peft={tmp}/lap", posterior_edited(config={"samples": 5000})),
        Refused(IE, r"laplace_config\.json: samples=5000 is not an integer in 2\.\.1000 \(or pass laplace_samples=N\)"),
    ),
    (
        M,
        "laplace-posterior-config-seed-beyond-torch",
        Cmd(TINY + ",peft={tmp}/lap", posterior_edited(config={"seed": 2**70})),
        Refused(
            IE, r"laplace_config\.json: seed=1180591620717411303424 is not a whole number from -9223372036854775808"
        ),
    ),
    (
        M,
        "laplace-posterior-config-of-another-format",
        Cmd(TINY + ",peft={tmp}/lap", posterior_edited(config={"format": 2})),
        Refused(IE, r"laplace_config\.json: format 2, but this package reads format 1"),
    ),
    (
        M,
        "laplace-posterior-folder-that-does-not-say-softmax",
        Cmd(TINY + ",peft={tmp}/lap", posterior_edited(remove="evidential_config.json")),
        Refused(IE, r"but method=edl; its folder does not say method=softmax \(no evidential_config\.json\), so pass"),
    ),
    (
        M,
        "laplace-posterior-of-another-adapter",
        Cmd(TINY + ",peft={tmp}/lap", posterior_edited(tensors=lambda t: t["mean"].add_(0.1))),
        Refused(IE, r"differs from the Laplace posterior's mean, so the posterior was fitted at other weights", False),
    ),
    (
        M,
        "laplace-samples-beyond-the-bound-posterior",
        Cmd(TINY + ",peft={tmp}/lap,laplace_samples=1e9", posterior_edited()),
        Refused(IE, r"laplace_samples=1000000000 must be an integer number of weight samples from 2 to 1000"),
    ),
    (
        M,
        "mc-samples-beyond-the-bound-adapter",
        TINY + ",peft={adapter},mc_samples=1e30",
        Refused(IE, r"mc_samples=1000000000000000019884624838656 must be an integer number of passes from 2 to 1000"),
    ),
    (
        M,
        "mc-samples-on-an-adapter-whose-dropout-drops-everything",
        Cmd(TINY + ",peft={tmp}/alldrop,mc_samples=4", lambda c: _adapter_copy(c, "alldrop", lora_dropout=1.0)),
        Refused(IE, r"has lora_dropout=1\.0, which drops every input \(each pass is NaN\); train with --lora-dropout"),
    ),
    (
        M,
        "mc-samples-ib-edl-names-the-value-adapter",
        TINY + ",peft={adapter},mc_samples=3,method=ib_edl",
        Refused(IE, r"mc_samples=3 with method=ib_edl: IB-EDL's alpha depends on its own noise draws"),
    ),
    (
        M,
        "ensemble-with-an-unfinished-member-adapter",
        Cmd(
            TINY + ",peft={tmp}/ens",
            lambda c: [_adapter_copy(c, f"ens/member_{i}") for i in (0, 1)] and (c.tmp / "ens/member_2").mkdir(),
        ),
        Refused(IE, r"ens: member_2 holds no adapter \(no adapter_config\.json\), so the ensemble would be scored"),
    ),
    (
        M,
        "ensemble-with-a-member-of-checkpoints-only-adapter",
        Cmd(
            TINY + ",peft={tmp}/ens",
            lambda c: [_adapter_copy(c, n) for n in ("ens/member_0", "ens/member_1", "ens/extra/checkpoint-3")],
        ),
        Refused(IE, r"ens: extra holds no adapter .* move extra out of the folder to score the 2 others"),
    ),
    (
        M,
        "ensemble-member-without-weights-adapter",
        Cmd(
            TINY + ",peft={tmp}/ens",
            lambda c: (
                [_adapter_copy(c, f"ens/member_{i}") for i in (0, 1)]
                and (c.tmp / "ens/member_1/adapter_model.safetensors").unlink()
            ),
        ),
        Refused(IE, r"peft=.*ens/member_1 holds adapter_config\.json but no weights \(adapter_model\.safetensors"),
    ),
    (
        M,
        "ensemble-of-a-member-and-its-copy-adapter",
        Cmd(TINY + ",peft={tmp}/ens", lambda c: _adapter_copy(c, "ens/member_0") or _adapter_copy(c, "ens/member_1")),
        Refused(
            IE, r"peft=.*ens: member_0 and member_1 hold the same weights \(adapter_model files sha256 [0-9a-f]+\)"
        ),
    ),
    (
        M,
        "ensemble-members-of-other-ranks-name-the-difference-adapter",
        Cmd(
            TINY + ",peft={tmp}/ens",
            lambda c: _adapter_copy(c, "ens/member_0") or _adapter_copy(c, "ens/member_1", r=4),
        ),
        Refused(IE, r"different LoRA configurations \(member_0: r=8, member_1: r=4\); an ensemble's members"),
    ),
    (
        M,
        "peft-config-with-a-text-dropout-adapter",
        Cmd(TINY + ",peft={tmp}/textdrop,mc_samples=2", lambda c: _adapter_copy(c, "textdrop", lora_dropout="0.1")),
        Refused(IE, r"textdrop/adapter_config\.json: lora_dropout='0\.1' is not a number from 0 to 1; the adapter is"),
    ),
    (
        M,
        "peft-without-weights-adapter",
        Cmd(
            TINY + ",peft={tmp}/noweights",
            lambda c: (_adapter_copy(c, "noweights"), (c.tmp / "noweights/adapter_model.safetensors").unlink()),
        ),
        Refused(IE, r"peft=.*noweights holds adapter_config\.json but no weights"),
    ),
    (
        M,
        "dtype-unknown",
        "pretrained={model},dtype=float8x",
        Refused(IE, r"dtype=float8x is not a torch dtype; use float32, bfloat16, float16 or auto"),
    ),
    (
        M,
        "method-typo",
        TINY + ",method=edll",
        Refused(IE, r"unknown method='edll'; choose one of edl, ib_edl, softmax"),
    ),
    (
        M,
        "ib-edl-zero-noises",
        TINY + ",method=ib_edl,num_noises=0",
        Refused(IE, r"num_noises=0 must be an integer >= 1"),
    ),
    (M, "zero-noises-without-ib-edl", TINY + ",num_noises=0", Refused(IE, r"num_noises=0 must be an integer >= 1")),
    (
        M,
        "fractional-noises",
        TINY + ",num_noises=2.5",
        Refused(IE, r"num_noises=2\.5 in --model_args is not an integer; e\.g\. num_noises=20"),
    ),
    (
        M,
        "negative-prior-weight",
        TINY + ",prior_weight=-1",
        Refused(IE, r"prior_weight=-1\.0 must be a finite number > 0 \(the Dirichlet prior"),
    ),
    (
        M,
        "prior-weight-not-a-number",
        TINY + ",prior_weight=abc",
        Refused(IE, r"prior_weight='abc' in --model_args is not a number"),
    ),
    (M, "infinite-prior-weight", TINY + ",prior_weight=inf", Refused(IE, r"prior_weight=inf must be a finite number")),
    (
        M,
        "negative-sigma-mult",
        TINY + ",method=ib_edl,sigma_mult=-1",
        Refused(IE, r"sigma_mult=-1\.0 must be a finite number >= 0"),
    ),
    (
        M,
        "seed-not-a-number",
        TINY + ",method=ib_edl,seed=abc",
        Refused(IE, r"seed='abc' in --model_args is not an integer"),
    ),
    (
        M,
        "max-length-beyond-context",
        TINY + ",max_length=20000",
        Refused(IE, r"max_length=20000 is above the model's context of 1024 tokens \(max_position_embeddings"),
    ),
    (
        M,
        "max-length-zero",
        TINY + ",max_length=0",
        Refused(IE, r"max_length=0 must be a positive whole number of tokens"),
    ),
    (
        M,
        "unknown-model-arg",
        TINY + ",temperatur=0.5",
        Refused(IE, r"unknown argument 'temperatur' .*it\); check its spelling", before_weights=False),
    ),
    (M, "max-length-at-the-context", TINY + ",max_length=1024", Accepted(lambda lm, ctx: lm.max_length == 1024)),
    (
        M,
        "unknown-model-arg-near-a-known-one",
        TINY + ",max_lenght=512",
        Refused(IE, r"unknown argument 'max_lenght' .*did you mean max_length=\?", before_weights=False),
    ),
    (
        M,
        "max-length-not-a-number",
        TINY + ",max_length=long",
        Refused(IE, r"max_length='long' must be a positive whole number of tokens"),
    ),
    (
        M,
        "peft-is-a-full-model",
        TINY + ",peft={model}",
        Refused(IE, r"peft=.* is not a PEFT adapter folder .*it holds a full model: pass it as pretrained= instead"),
    ),
    (
        M,
        "gguf-file-not-in-the-folder",
        "pretrained={model},gguf_file=nope.gguf",
        Refused(IE, r"gguf_file=nope\.gguf not found: transformers reads it from inside pretrained="),
    ),
    (M, "explicit-method-accepted", TINY + ",method=softmax", Accepted(lambda lm, ctx: lm.head.method == "softmax")),
    # -- `lm-eval-evidential eval`: the stock CLI, expected failures as one line and the documented status
    (
        E,
        "eval-missing-pretrained",
        [
            "--model",
            "evidential",
            "--model_args",
            "pretrained={tmp}/no/such/model",
            "--tasks",
            "obqa_edl",
            "--output_path",
            "{tmp}/o",
        ],
        Exit(1, r"(?m)^lm-eval-evidential eval: error: pretrained=.*no such file or folder"),
    ),
    (
        E,
        "eval-bad-dtype",
        [
            "--model",
            "evidential",
            "--model_args",
            "pretrained={model},dtype=float8x",
            "--tasks",
            "obqa_edl",
            "--output_path",
            "{tmp}/o",
        ],
        Exit(1, r"error: dtype=float8x is not a torch dtype"),
    ),
    (
        E,
        "eval-unknown-task",
        ["--model", "evidential", "--model_args", TINY, "--tasks", "obqa_edl_typo", "--output_path", "{tmp}/o"],
        Exit(1, r"error: .*obqa_edl_typo"),
    ),
    (
        E,
        "eval-dataset-missing-field",
        Cmd(
            [
                "--model",
                "evidential",
                "--model_args",
                TINY,
                "--device",
                "cpu",
                "--tasks",
                "arc_c_edl",
                "--limit",
                "2",
                "--output_path",
                "{tmp}/o",
            ],
            mirror_rows(GOOD, {"id": "q-nf", "question": "Which?", "answerKey": "A"}),
        ),
        Exit(1, r"error: task 'arc_c_edl', dataset row 1: record does not have the expected schema"),
    ),
    # -- the baselines' bad input through the eval command: one line, nothing written (issue 32's done list)
    (
        E,
        "eval-mc-samples-zero-adapter",
        [
            "--model",
            "evidential",
            "--model_args",
            TINY + ",peft={adapter},mc_samples=0",
            "--tasks",
            "obqa_edl",
            "--output_path",
            "{tmp}/o",
        ],
        Exit(1, r"(?m)^lm-eval-evidential eval: error: mc_samples=0 must be an integer number of passes from 2 to"),
    ),
    (
        E,
        "eval-mc-samples-on-an-adapter-without-dropout",
        Cmd(
            [
                "--model",
                "evidential",
                "--model_args",
                TINY + ",peft={tmp}/nodrop,mc_samples=4",
                "--tasks",
                "obqa_edl",
                "--output_path",
                "{tmp}/o",
            ],
            lambda c: _adapter_copy(c, "nodrop", lora_dropout=0.0),
        ),
        Exit(1, r"(?m)^lm-eval-evidential eval: error: mc_samples=4 needs LoRA dropout between 0 and 1, but .*=0\.0"),
    ),
    (
        E,
        "eval-ensemble-of-one-member-adapter",
        Cmd(
            [
                "--model",
                "evidential",
                "--model_args",
                TINY + ",peft={tmp}/ens",
                "--tasks",
                "obqa_edl",
                "--output_path",
                "{tmp}/o",
            ],
            lambda c: _adapter_copy(c, "ens/member_0"),
        ),
        Exit(1, r"(?m)^lm-eval-evidential eval: error: peft=.*ens holds one adapter folder \(member_0\): an ensemble"),
    ),
    (
        E,
        "eval-ensemble-members-of-another-base-adapter",
        Cmd(
            [
                "--model",
                "evidential",
                "--model_args",
                TINY + ",peft={tmp}/ens",
                "--tasks",
                "obqa_edl",
                "--output_path",
                "{tmp}/o",
            ],
            lambda c: _adapter_copy(c, "ens/member_0") or _adapter_copy(c, "ens/member_1", c.extra["other_adapter"]),
        ),
        Exit(1, r"(?m)^lm-eval-evidential eval: error: peft=.*ens: its members were trained with different base"),
    ),  # fmt: skip
    # -- permuted evaluation: bad settings and questions it cannot serve, one line before any forward pass
    (
        E,
        "eval-permutations-unknown-form",
        [
            "--model",
            "evidential",
            "--model_args",
            TINY,
            "--tasks",
            "obqa_edl",
            "--output_path",
            "{tmp}/o",
            "--metadata",
            '{{"permutations": "shuffle"}}',
        ],
        Exit(1, r"error: task 'obqa_edl': metadata.permutations must be 'cyclic' .* got 'shuffle'"),
    ),  # fmt: skip
    (
        E,
        "eval-permutations-key-misspelt",
        _permuted_eval('{{"permutation": "cyclic"}}'),
        Exit(
            1,
            r"error: task 'obqa_edl': metadata key 'permutation' is not one this package reads, so as written it "
            r"would be ignored; did you mean 'permutations'\?",
        ),
    ),
    (
        E,
        "eval-permutation-seed-key-misspelt",
        _permuted_eval('{{"permutations": "random:3", "Permutation-Seed": 4}}'),
        Exit(1, r"error: task 'obqa_edl': metadata key 'Permutation-Seed' .* did you mean 'permutation_seed'\?"),
    ),
    (
        E,
        "eval-permutations-random-zero",
        _permuted_eval('{{"permutations": "random:0"}}'),
        Exit(1, r"error: task 'obqa_edl': metadata.permutations 'random:0' asks for 0 orders per question; give N"),
    ),
    (
        E,
        "eval-permutations-random-negative",
        _permuted_eval('{{"permutations": "random:-1"}}'),
        Exit(1, r"error: task 'obqa_edl': metadata.permutations must be 'cyclic' .* got 'random:-1'"),
    ),
    (
        E,
        "eval-permutations-not-a-string",
        _permuted_eval('{{"permutations": 5}}'),
        Exit(1, r"error: task 'obqa_edl': metadata.permutations must be 'cyclic' .* got 5"),
    ),
    (
        E,
        "eval-permutation-seed-not-an-integer",
        _permuted_eval('{{"permutations": "random:3", "permutation_seed": 1.5}}'),
        Exit(1, r"error: task 'obqa_edl': metadata.permutation_seed=1\.5 must be an integer; e\.g\. 0"),
    ),
    (
        E,
        "eval-permutations-spec-stored-in-its-one-spelling",
        _permuted_eval('{{"permutations": " Cyclic "}}'),
        Exit(0, r"obqa_edl", writes=("{tmp}/o/*", "{tmp}/o/*/*"), check=permuted_as("cyclic", 4)),
    ),
    (
        E,
        "eval-permutations-of-the-yaml-overridden-by-metadata",
        _permuted_eval('{{"permutations": "random:3"}}', task="cyclic_obqa_edl"),
        Exit(0, r"cyclic_obqa_edl", writes=("{tmp}/o/*", "{tmp}/o/*/*"), check=permuted_as("random:3", 3)),
    ),
    (
        E,
        "eval-permutations-of-one-option",
        Cmd(
            [
                "--model",
                "evidential",
                "--model_args",
                TINY,
                "--device",
                "cpu",
                "--output_path",
                "{tmp}/o",
                "--include_path",
                "{tmp}/tasks",
                "--tasks",
                "one_option_edl",
                "--metadata",
                '{{"permutations": "cyclic"}}',
            ],
            options_task("one_option_edl", 1),
        ),  # fmt: skip
        Exit(1, r"error: task 'one_option_edl' doc 'q0': K = 1: a question with one option has no other order"),
    ),
    (
        E,
        "eval-permutations-all-orders-of-ten-options",
        Cmd(
            [
                "--model",
                "evidential",
                "--model_args",
                TINY,
                "--device",
                "cpu",
                "--output_path",
                "{tmp}/o",
                "--include_path",
                "{tmp}/tasks",
                "--tasks",
                "ten_options_edl",
                "--metadata",
                '{{"permutations": "all"}}',
            ],
            options_task("ten_options_edl", 10),
        ),  # fmt: skip
        Exit(1, r"error: task 'ten_options_edl' doc 'q0': permutations 'all' gives 3628800 orders .* bound of 720"),
    ),
    (
        E,
        "eval-k-mismatch-pair-refused",
        [
            "--model",
            "evidential",
            "--model_args",
            TINY,
            "--device",
            "cpu",
            "--tasks",
            "obqa_edl_vs_csqa_edl",
            "--output_path",
            "{tmp}/o",
        ],
        Exit(2, r"(?s)refused: .*csqa_edl"),
    ),
    # -- task names that are not file names: the records stay inside --output_path and keep the real name
    (
        E,
        "eval-task-name-with-dot-dot",
        Cmd(
            [
                "--model",
                "evidential",
                "--model_args",
                TINY,
                "--device",
                "cpu",
                "--limit",
                "3",
                "--output_path",
                "{tmp}/o",
                "--include_path",
                "{tmp}/tasks",
                "--tasks",
                "../../escape",
            ],
            obqa_renamed("../../escape"),
        ),
        Exit(0, r"escape", writes=("{tmp}/o/*/*",), check=records_of("../../escape")),
    ),
    (
        E,
        "eval-task-name-absolute",
        Cmd(
            [
                "--model",
                "evidential",
                "--model_args",
                TINY,
                "--device",
                "cpu",
                "--limit",
                "3",
                "--output_path",
                "{tmp}/o",
                "--include_path",
                "{tmp}/tasks",
                "--tasks",
                "/tmp/escape",
            ],
            obqa_renamed("/tmp/escape"),
        ),
        Exit(0, r"escape", writes=("{tmp}/o/*/*",), check=records_of("/tmp/escape")),
    ),
    (
        E,
        "eval-task-name-with-nul",
        Cmd(
            [
                "--model",
                "evidential",
                "--model_args",
                TINY,
                "--device",
                "cpu",
                "--limit",
                "3",
                "--output_path",
                "{tmp}/o",
                "--include_path",
                "{tmp}/tasks",
                "--tasks",
                "nul\x00name",
            ],
            obqa_renamed("nul\x00name"),
        ),
        Exit(0, r"name", writes=("{tmp}/o/*/*",), check=records_of("nul\x00name")),
    ),
    (
        E,
        "eval-multi-token-choices",
        Cmd(
            [
                "--model",
                "evidential",
                "--model_args",
                TINY,
                "--device",
                "cpu",
                "--limit",
                "3",
                "--output_path",
                "{tmp}/o",
                "--include_path",
                "{tmp}/tasks",
                "--tasks",
                "words_mc",
            ],
            word_choices,
        ),
        Exit(
            1,
            r"(?m)^lm-eval-evidential eval: error: .*choice ' ?red apple' is \d+ tokens .*every choice must be a "
            r"single token",
        ),
    ),
    (
        E,
        "eval-removes-a-stale-records-temp-file",
        Cmd(
            [
                "--model",
                "evidential",
                "--model_args",
                TINY,
                "--device",
                "cpu",
                "--limit",
                "3",
                "--output_path",
                "{tmp}/o",
                "--tasks",
                "obqa_edl",
            ],
            stale_records_temp,
        ),
        Exit(0, r"obqa_edl", writes=("{tmp}/o/*/*",), check=stale_gone),
    ),
    # -- `lm-eval-evidential train`: refused before training, one line
    (
        T,
        "train-max-length-beyond-context",
        [
            "train",
            "--pretrained",
            "{model}",
            "--task",
            "obqa_edl",
            "--output-dir",
            "{tmp}/t",
            "--max-steps",
            "1",
            "--max-length",
            "20000",
        ],
        Exit(1, r"(?m)^lm-eval-evidential train: error: max_length=20000 is above the model's context of 1024 tokens"),
    ),
    (
        T,
        "train-output-dir-is-a-file",
        Cmd(
            [
                "train",
                "--pretrained",
                "{model}",
                "--task",
                "obqa_edl",
                "--output-dir",
                "{tmp}/notes.txt",
                "--max-steps",
                "1",
                "--overwrite-output-dir",
            ],
            lambda c: (c.tmp / "notes.txt").write_text("mine"),
        ),
        Exit(1, r"--output-dir .*notes\.txt is a file, not a folder"),
    ),
    (
        T,
        "train-output-dir-not-empty",
        Cmd(
            [
                "train",
                "--pretrained",
                "{model}",
                "--task",
                "obqa_edl",
                "--output-dir",
                "{tmp}/docs",
                "--max-steps",
                "1",
            ],
            lambda c: (c.tmp / "docs").mkdir() or (c.tmp / "docs" / "thesis.tex").write_text("mine"),
        ),
        Exit(1, r"output folder .*docs is not empty; pass --overwrite-output-dir"),
    ),
    # -- real faults in a child process: a read-only output folder, a file-size limit (nothing half-written, one line)
    (
        S,
        "report-into-a-read-only-folder",
        Child(
            ["report", "{out}", "--id", "id4", "--ood", "ood4", "--n-boot", "0", "--out", "{tmp}/ro/report"],
            read_only="{tmp}/ro",
        ),
        Exit(
            1,
            r"(?m)^lm-eval-evidential report: error: cannot write .*ro/report: Permission denied; nothing was "
            r"replaced — choose an output folder you can write to",
        ),
    ),
    (
        S,
        "report-under-a-file-size-limit",
        Child(["report", "{out}", "--id", "id4", "--ood", "ood4", "--n-boot", "0", "--out", "{tmp}/r"], fsize=16_384),
        Exit(
            1,
            r"(?m)^lm-eval-evidential report: error: cannot write .*: File too large; nothing was replaced — the "
            r"file exceeds this process's file-size limit",
        ),
    ),
    (
        S,
        "eval-into-a-read-only-output-folder",
        Child(
            [
                "eval",
                "--model",
                "evidential",
                "--model_args",
                TINY,
                "--device",
                "cpu",
                "--tasks",
                "obqa_edl",
                "--limit",
                "4",
                "--output_path",
                "{tmp}/ro/o",
            ],
            read_only="{tmp}/ro",
        ),
        Exit(1, r"(?m)^lm-eval-evidential eval: error: cannot write .*/ro: Permission denied"),
    ),
    (
        S,
        "eval-under-a-file-size-limit",
        Child(
            [
                "eval",
                "--model",
                "evidential",
                "--model_args",
                TINY,
                "--device",
                "cpu",
                "--tasks",
                "obqa_edl",
                "--limit",
                "4",
                "--output_path",
                "{tmp}/o",
            ],
            fsize=4096,
        ),
        Exit(1, r"(?m)^lm-eval-evidential eval: error: cannot write .*records_obqa_edl_.*\.parquet: File too large"),
    ),
    (
        S,
        "stock-lm-eval-under-a-file-size-limit",
        Child(
            [
                "lm_eval",
                "--model",
                "evidential",
                "--model_args",
                TINY,
                "--device",
                "cpu",
                "--tasks",
                "obqa_edl",
                "--limit",
                "4",
                "--output_path",
                "{tmp}/o",
            ],
            fsize=4096,
        ),
        Exit(1, r"(?m)^error: cannot write .*records_obqa_edl_.*\.parquet: File too large"),
    ),
    (
        C,
        "k-mismatch-refused",
        ["ood", "{out}", "--id", "id4", "--ood", "ood5", "--n-boot", "0"],
        Exit(2, r"refused id4 vs ood5"),
    ),
    # -- lm-eval-evidential laplace: settings the weight samples could not use, refused before anything is read
    (
        C,
        "laplace-fit-seed-beyond-torch",
        ["laplace", "--pretrained", "{tmp}/m", "--peft", "{tmp}/a", "--task", "obqa_edl", "--output-dir", "{tmp}/o"]
        + ["--seed", str(2**70)],
        Exit(1, r"error: argument --seed: seed=1180591620717411303424 must be an integer in -9223372036854775808\.\."),
    ),
    (
        C,
        "laplace-fit-infinite-prior-precision",
        ["laplace", "--pretrained", "{tmp}/m", "--peft", "{tmp}/a", "--task", "obqa_edl", "--output-dir", "{tmp}/o"]
        + ["--prior-precision", "inf"],
        Exit(1, r"error: argument --prior-precision: prior_precision=inf must be a finite number > 0 \(an isotropic"),
    ),
    (
        C,
        "laplace-fit-samples-beyond-the-bound",
        ["laplace", "--pretrained", "{tmp}/m", "--peft", "{tmp}/a", "--task", "obqa_edl", "--output-dir", "{tmp}/o"]
        + ["--samples", "5000"],
        Exit(1, r"error: argument --samples: samples=5000 must be an integer in 2\.\.1000 \(the posterior is scored"),
    ),
    (
        C,
        "laplace-fit-peft-missing",
        ["laplace", "--pretrained", "{tmp}/m", "--peft", "{tmp}/a", "--task", "obqa_edl", "--output-dir", "{tmp}/o"],
        Exit(1, r"error: --peft .*/a: no such folder; pass the folder of a trained adapter"),
    ),
    # -- lm-eval-evidential laplace: the base model and the output folder, checked before the task and the weights load
    (
        T,
        "laplace-fit-adapter-of-another-base",
        Cmd(_LAPLACE_FIT, lambda c: _softmax_copy(c, c.extra["other_adapter"])),
        Exit(1, r"error: the adapter --peft .*sm does not fit the base model --pretrained .*: its \S+ has in_featu"),
    ),
    (
        T,
        "laplace-fit-pretrained-missing-adapter",
        Cmd([*_LAPLACE_FIT[:2], "{tmp}/nosuch", *_LAPLACE_FIT[3:]], lambda c: _softmax_copy(c, c.adapter)),
        Exit(1, r"error: --pretrained .*nosuch: no such file or folder"),
    ),
    (
        T,
        "laplace-fit-pretrained-a-file-adapter",
        Cmd(
            [*_LAPLACE_FIT[:2], "{tmp}/weights.bin", *_LAPLACE_FIT[3:]],
            lambda c: _softmax_copy(c, c.adapter) or (c.tmp / "weights.bin").write_bytes(b"\0"),
        ),
        Exit(
            1,
            r"error: --pretrained .*weights\.bin is a file; pass the model's folder \(config\.json, weights, "
            r"tokenizer\)(?!, or, for a GGUF)",  # laplace takes no gguf_file
        ),
    ),
    (
        S,
        "laplace-fit-into-a-read-only-folder-adapter",
        Child(
            [*_LAPLACE_FIT[:-1], "{tmp}/ro/lap"],
            read_only="{tmp}/ro",
            prepare=lambda c: _softmax_copy(c, c.adapter) or (c.tmp / "ro").mkdir(),
        ),
        Exit(1, r"cannot write .*ro: Permission denied"),
    ),
    # -- methods side by side: one run given as two methods ties every row (it used to name a leader among equals)
    (
        C,
        "compare-one-run-given-twice",
        Cmd(["compare", "{out}", "{tmp}/copy", "--id", "id4", "--ood", "ood4", "--names", "A,B"], _run_copy),
        Exit(2, r"refused: methods 'A' and 'B' hold the same predictions on id4 \(the same run given twice, or a copy"),
    ),
    (
        C,
        "report-compare-given-its-own-run",
        ["report", "{out}", "--id", "id4", "--ood", "ood4", "--n-boot", "0", "--max-extra", "1", "--compare", "{out}"]
        + ["--compare-names", "A,B", "--out", "{tmp}/r"],
        Exit(2, r"refused: methods 'A' and 'B' hold the same predictions on id4"),
    ),
    # -- issue 34: conformal sets and the selective coverage
    (
        C,
        "conformal-k-mismatch-refused",
        ["conformal", "{out}", "--id", "id4", "--ood", "ood5", "--n-boot", "0"],
        Exit(2, r"refused calibration id4 \(0\.5 of \d+, seed 0\) vs ood5: K mismatch"),
    ),
    (
        C,
        "conformal-alpha-zero",
        ["conformal", "{out}", "--id", "id4", "--alpha", "0"],
        Exit(1, r"argument --alpha: alpha=0\.0 must be a finite number in \(0, 1\) \(a miscoverage rate\)"),
    ),
    (
        C,
        "conformal-calibrated-on-the-test-task",
        ["conformal", "{out}", "--id", "id4", "--calibration-task", "id4"],
        Exit(1, r"--calibration-task and --id both name 'id4'"),
    ),
    (
        C,
        "conformal-fraction-leaves-no-calibration",
        ["conformal", "{out}", "--id", "id4", "--calibration-fraction", "0.0001"],
        Exit(1, r"leaves no calibration examples"),
    ),
    (
        C,
        "conformal-unknown-method",
        ["conformal", "{out}", "--id", "id4", "--method", "rapss"],
        Exit(1, r"argument --method: invalid choice: 'rapss'"),
    ),
    (
        C,
        "json-onto-a-fifo",
        Cmd(["calibration", "{out}", "--task", "id4", "--json", "{tmp}/pipe"], lambda c: os.mkfifo(c.tmp / "pipe")),
        Exit(1, r"error: --json .*/pipe: it is a FIFO \(named pipe\), not a regular file; outputs are written whole"),
    ),
    # -- an output that is a symbolic link is written through to its target, as cp and `>` do (the link stays)
    (
        C,
        "json-onto-a-link-writes-through-to-its-target",
        Cmd(["calibration", "{out}", "--task", "id4", "--json", "{tmp}/link.json"], _link_to_a_file),
        Exit(0, r"wrote", writes=("{tmp}/link.json", "{tmp}/real/t.json"), check=_written_through),
    ),
    (
        C,
        "json-onto-a-link-loop",
        Cmd(["calibration", "{out}", "--task", "id4", "--json", "{tmp}/loop.json"], lambda c: _link(c, "loop.json")),
        Exit(1, r"error: --json .*loop\.json: it is a symbolic link that leads back to itself \(a loop\)"),
    ),
    (
        C,
        "json-onto-a-dangling-link-into-a-missing-folder",
        Cmd(["calibration", "{out}", "--task", "id4", "--json", "{tmp}/x.json"], lambda c: _link(c, "x.json", "no/x")),
        Exit(1, r"error: --json .*x\.json: it is a symbolic link to no/x, whose folder .*/no does not exist"),
    ),
    (
        C,
        "conformal-json-onto-the-records-file-read",
        ["conformal", "{out}", "--id", "id4", "--json", "{rec}"],
        Exit(1, r"it is a records \(Parquet\) file"),
    ),
    (
        C,
        "ood-groups-k-mismatch-refused",
        ["ood", "{out}", "--id", "id4", "--near", "ood4", "--far", "ood5", "--n-boot", "0"],
        Exit(2, r"refused id4 vs ood5: K mismatch"),
    ),
    (
        C,
        "ood-groups-beside-ood",
        ["ood", "{out}", "--id", "id4", "--ood", "ood4", "--near", "ood4"],
        Exit(1, r"--ood and --near/--far are two layouts of the ood table"),
    ),
    (
        C,
        "temperature-k-mismatch-refused",
        ["temperature", "{out}", "--id", "id4", "--ood", "ood5"],
        Exit(2, r"refused id4 vs ood5: K mismatch"),
    ),
    (
        C,
        "temperature-fitted-on-the-test-task",
        ["temperature", "{out}", "--id", "id4", "--calibration-task", "id4"],
        Exit(1, r"--calibration-task and --id both name 'id4'"),
    ),
    # -- one K rule for the audits calibrated on held-out records (temperature fitted like conformal calibrates)
    (
        C,
        "temperature-calibration-task-of-another-k-refused",
        ["temperature", "{out}", "--id", "id4", "--calibration-task", "ood5", "--json", "{tmp}/t.json"],
        Exit(2, _CALIBRATION_K_REFUSAL + r"(?s:.*)\nwhy: a temperature fitted on questions with one K is not"),
    ),
    (
        C,
        "conformal-calibration-task-of-another-k-refused",
        ["conformal", "{out}", "--id", "id4", "--calibration-task", "ood5", "--n-boot", "0", "--json", "{tmp}/c.json"],
        Exit(2, _CALIBRATION_K_REFUSAL),
    ),
    (
        C,
        "temperature-calibration-task-of-another-k-on-request-marked",
        ["temperature", "{out}", "--id", "id4", "--calibration-task", "ood5", "--k-policy", "report"]
        + ["--json", "{tmp}/t.json"],
        Exit(
            0, r"WARNING: K not matched \(--k-policy report\) for id4", writes=("{tmp}/t.json",), check=unmatched_json
        ),
    ),
    (
        C,
        "selective-coverage-zero",
        ["selective", "{out}", "--task", "id4", "--coverage", "0"],
        Exit(
            1, r"argument --coverage: coverage=0\.0 must be a finite number in \(0, 1\] \(the share of examples kept\)"
        ),
    ),
    # -- issue 26, class 1: every identity a records file states agrees with every other
    (
        L,
        "name-says-another-task",
        copied_as("id4", "ood4"),
        Refused(RecordsError, r"file name says task 'ood4', its metadata says 'id4'"),
    ),
    (
        L,
        "metadata-says-another-task",
        with_meta(task="ood4"),
        Refused(RecordsError, r"file name says task 'id4', its metadata says 'ood4'"),
    ),
    (L, "metadata-task-missing", with_meta(drop=("task",)), Refused(RecordsError, r"metadata names no task")),
    (L, "metadata-task-not-text", with_meta(task=7), Refused(RecordsError, r"metadata names no task \(got 7\)")),
    (
        L,
        "name-says-another-run",
        dated(OTHER_DATE),
        Refused(RecordsError, r"file name says run '" + DATE + "', its metadata says run '" + OTHER_DATE),
    ),
    (
        L,
        "renamed-into-another-run",
        second_run_renamed_in,
        Refused(RecordsError, r"says run '" + OTHER_DATE + "'; a file of another run was renamed"),
    ),
    (L, "own-run-accepted", dated(DATE), Accepted(lambda r, c: r.meta["date_id"] == DATE and r.task == "id4")),
    (
        L,
        "method-unknown",
        with_meta(method="evidential"),
        Refused(RecordsError, r"names method 'evidential', not one of edl, ib_edl, softmax"),
    ),
    (L, "method-missing", with_meta(drop=("method",)), Refused(RecordsError, r"metadata names no method")),
    (L, "method-not-text", with_meta(method=["edl"]), Refused(RecordsError, r"names method \['edl'\]")),
    (
        L,
        "edl-alpha-not-softplus-of-logits",
        edited(column="logits", row=2, value=bump(1, 0.5)),
        Refused(
            RecordsError,
            r"row 2: stored alpha .* \(class 1\) does not follow from the record's logit .*softplus\(logit\) \+ "
            r"prior_weight",
        ),
    ),
    (L, "edl-alpha-under-another-prior", with_meta(prior_weight=0.5), Refused(RecordsError, r"does not follow")),
    (L, "ib-edl-alpha-free-above-the-prior", with_meta(method="ib_edl"), Accepted(lambda r, c: r.method == "ib_edl")),
    (L, "softmax-named-edl", with_meta("sm4", method="edl"), Refused(RecordsError, r"alpha nan is not finite")),
    (L, "metadata-nested-too-deep", nested_metadata, Refused(RecordsError, r"nested too deeply")),
    (
        C,
        "audit-of-a-file-copied-under-another-task",
        Cmd(["ood", "{out}", "--id", "id4", "--ood", "ood4", "--n-boot", "0"], copied_as("id4", "ood4")),
        Exit(1, r"file name says task 'ood4', its metadata says 'id4'"),
    ),
    (
        C,
        "audit-of-a-second-run-renamed-in",
        Cmd(["ood", "{out}", "--id", "id4", "--ood", "ood4", "--n-boot", "0"], second_run_renamed_in),
        Exit(1, r"a file of another run was renamed into this one"),
    ),
    (
        C,
        "ood-on-the-same-questions",
        Cmd(["ood", "{out}", "--id", "id4", "--ood", "ood4", "--n-boot", "0"], same_questions),
        Exit(1, r"--id id4 and --ood ood4 were evaluated on the same questions .*AUROC 0\.5"),
    ),
    (
        C,
        "compare-a-task-with-itself",
        ["compare", "{out}", "--id", "id4", "--ood", "ood4,id4", "--n-boot", "0"],
        Exit(1, r"error: --id and --ood both name 'id4': comparing a task with itself"),
    ),
    (
        C,
        "compare-on-the-same-questions",
        Cmd(["compare", "{out}", "--id", "id4", "--ood", "ood4", "--n-boot", "0"], same_questions),
        Exit(1, r"--id id4 and --ood ood4 were evaluated on the same questions .*AUROC 0\.5"),
    ),
    (
        C,
        "atc-on-the-same-questions",
        Cmd(["atc", "{out}", "--id", "id4", "--target", "ood4"], same_questions),
        Exit(1, r"--id id4 and --target ood4 were evaluated on the same questions .*perfect accuracy estimate"),
    ),
    (
        C,
        "ksweep-on-the-same-questions",
        Cmd(["ksweep", "{out}", "--id", "id4", "--ood", "ood4"], same_questions),
        Exit(1, r"evaluated on the same questions"),
    ),
    (
        C,
        "report-on-the-same-questions",
        Cmd(["report", "{out}", "--id", "id4", "--ood", "ood4", "--out", "{tmp}/r"], same_questions),
        Exit(1, r"evaluated on the same questions"),
    ),
    (
        C,
        "two-lettered-views-of-one-run-compare",
        Cmd(["ood", "{out}", "--id", "id4", "--ood", "ood4", "--n-boot", "0"], as_views({"id4": "a", "ood4": "b"})),
        Exit(0, r"reciprocal_vacuity"),
    ),
    (
        C,
        "a-view-against-a-task-of-its-own-template",
        Cmd(["ood", "{out}", "--id", "id4", "--ood", "ood4", "--n-boot", "0"], as_views({"id4": None, "ood4": "b"})),
        Exit(2, r"(?s)different prompt templates.*ood4 is the lettered view of the stock task 'b'"),
    ),
    (
        C,
        "a-view-and-its-shipped-task-on-the-same-rows",
        Cmd(
            ["ood", "{out}", "--id", "id4", "--ood", "ood4", "--allow-fingerprint-mismatch", "--n-boot", "0"],
            as_views({"id4": None, "ood4": "arc_challenge"}, rows={"id4": "r1", "ood4": "r1"}),
        ),
        Exit(1, r"--id id4 and --ood ood4 ask the same questions in two forms"),
    ),
    (
        C,
        "tables-on-the-same-rows-in-two-forms",
        Cmd(
            ["tables", "{out}", "--id", "id4", "--ood", "ood4", "--allow-fingerprint-mismatch"],
            as_views({"id4": None, "ood4": "arc_challenge"}, rows={"id4": "r1", "ood4": "r1"}),
        ),
        Exit(1, r"ask the same questions in two forms"),
    ),
    # -- class 2: one parser for task names, one self-comparison rule
    (C, "id-empty", ["ood", "{out}", "--id", "", "--ood", "ood4"], Exit(1, r"--id: .*no task name in ''")),
    (C, "id-only-spaces", ["ksweep", "{out}", "--id", "  ", "--ood", "ood4"], Exit(1, r"no task name in '  '")),
    (
        C,
        "id-with-a-leading-space-is-the-task",
        ["ood", "{out}", "--id", " id4", "--ood", "id4"],
        Exit(1, r"--id and --ood both name 'id4'"),
    ),
    (
        C,
        "id-with-a-newline",
        ["ood", "{out}", "--id", "id4\nood4", "--ood", "ood5"],
        Exit(1, r"task name 'id4\\nood4' contains a control character"),
    ),
    (
        C,
        "id-a-comma-list",
        ["ood", "{out}", "--id", "id4,ood5", "--ood", "ood4"],
        Exit(1, r"'id4,ood5' is a list, this option takes one task"),
    ),
    (
        C,
        "ksweep-ood-a-comma-list",
        ["ksweep", "{out}", "--id", "id4", "--ood", "ood4,ood5"],
        Exit(1, r"'ood4,ood5' is a list, this option takes one task; ksweep sweeps one OOD task: run it once per task"),
    ),
    (
        C,
        "atc-id-a-comma-list",
        ["atc", "{out}", "--id", "id4,ood4", "--target", "ood5"],
        Exit(1, r"'id4,ood4' is a list"),
    ),
    (
        C,
        "atc-target-is-the-id-task",
        ["atc", "{out}", "--id", "id4", "--target", "ood4,id4"],
        Exit(1, r"--id and --target both name 'id4'.*perfect accuracy estimate"),
    ),
    (C, "atc-id-empty", ["atc", "{out}", "--id", "", "--target", "ood4"], Exit(1, r"no task name in ''")),
    (
        C,
        "report-ood-is-the-id-task",
        ["report", "{out}", "--id", "id4", "--ood", "id4", "--out", "{tmp}/r"],
        Exit(1, r"--id and --ood both name 'id4'"),
    ),
    (
        C,
        "ksweep-ood-is-the-id-task-with-spaces",
        ["ksweep", "{out}", "--id", "id4", "--ood", " id4 "],
        Exit(1, r"--id and --ood both name 'id4'"),
    ),
    (
        C,
        "task-list-with-a-nul",
        ["calibration", "{out}", "--task", "id4,oo\x01d4"],
        Exit(1, r"contains a control character"),
    ),
    (C, "task-list-only-commas", ["selective", "{out}", "--task", " , ,"], Exit(1, r"no task names in ' , ,'")),
    (C, "task-list-with-spaces-accepted", ["calibration", "{out}", "--task", " id4 , ood4"], Exit(0, r"id4")),
    # -- classes 3 and 4: only regular files are read; an unreadable one is named with its real cause and fix
    (
        L,
        "records-path-a-fifo",
        replaced_by("fifo"),
        Refused(OSError, r"records file .* is a FIFO \(named pipe\), not a regular file"),
    ),
    (
        L,
        "records-path-a-folder",
        replaced_by("folder"),
        Refused(OSError, r"records file .* is a folder, not a regular file"),
    ),
    (
        L,
        "records-path-a-symlink-loop",
        replaced_by("loop"),
        Refused(OSError, r"Too many levels of symbolic links: it is a symbolic link that leads back to itself"),
    ),
    (
        L,
        "records-path-a-dangling-symlink",
        replaced_by("dangling"),
        Refused(OSError, r"symbolic link to .*moved-away\.parquet, which does not exist; restore the target"),
    ),
    (
        C,
        "audit-with-a-fifo-in-the-run",
        Cmd(["ood", "{out}", "--id", "id4", "--ood", "ood4"], replaced_by("fifo", "ood4")),
        Exit(1, r"error: cannot read records file .*records_ood4_.* is a FIFO"),
    ),
    (
        C,
        "audit-with-a-folder-named-like-records",
        Cmd(["calibration", "{out}", "--task", "ood5"], replaced_by("folder", "ood5")),
        Exit(1, r"is a folder, not a regular file"),
    ),
    (
        C,
        "audit-with-a-symlink-loop-in-the-run",
        Cmd(["calibration", "{out}", "--task", "ood5"], replaced_by("loop", "ood5")),
        Exit(1, r"symbolic link that leads back to itself"),
    ),
    (
        C,
        "audit-with-a-dangling-symlink-in-the-run",
        Cmd(["calibration", "{out}", "--task", "ood5"], replaced_by("dangling", "ood5")),
        Exit(1, r"which does not exist; restore the target or remove the link"),
    ),
    (
        S,
        "audit-of-an-unreadable-records-file",
        Child(["calibration", "{out}", "--task", "ood5"], unreadable="{folder}/records_ood5_" + DATE + ".parquet"),
        Exit(1, r"Permission denied: you have no permission to read it; make it readable"),
    ),
    (
        M,
        "fifo-yaml-beside-the-adapter",
        Cmd(f"{TINY},peft={{checkpoint}}", adapter_beside("fifo-yaml")),
        Warned(r"run\.yaml .*is a FIFO \(named pipe\), not a regular file"),
    ),
    (
        M,
        "huge-yaml-beside-the-adapter",
        Cmd(f"{TINY},peft={{checkpoint}}", adapter_beside("huge-yaml")),
        Warned(r"huge\.yaml: it is 67,108,864 bytes, more than"),
    ),
    # -- class 5: damaged adapter files named before any weights load
    (
        M,
        "adapter-config-not-json",
        Cmd(f"{TINY},peft={{checkpoint}}", adapter_beside("bad-config")),
        Refused(IE, r"adapter_config\.json is not valid JSON .*the adapter is damaged"),
    ),
    (
        M,
        "adapter-config-not-an-object",
        Cmd(f"{TINY},peft={{checkpoint}}", adapter_beside("config-not-an-object")),
        Refused(IE, r"adapter_config\.json is not a JSON object"),
    ),
    (
        M,
        "adapter-weights-cut-in-the-header",
        Cmd(f"{TINY},peft={{checkpoint}}", adapter_beside("truncated-weights")),
        Refused(IE, r"adapter_model\.safetensors is not a whole safetensors file: its header says"),
    ),
    (
        M,
        "adapter-weights-cut-in-the-data",
        Cmd(f"{TINY},peft={{checkpoint}}", adapter_beside("weights-cut-in-the-data")),
        Refused(
            IE,
            r"adapter_model\.safetensors is not a whole safetensors file: its tensors need [\d,]+ bytes, the file has",
        ),
    ),
    (
        M,
        "adapter-metadata-nested-too-deep",
        Cmd(f"{TINY},peft={{checkpoint}}", adapter_beside("nested-evidential-config")),
        Refused(ValueError, r"evidential_config\.json: its JSON is nested too deeply"),
    ),
    (
        M,
        "adapter-metadata-a-fifo",
        Cmd(f"{TINY},peft={{checkpoint}}", adapter_beside("fifo-evidential-config")),
        Refused(OSError, r"evidential_config\.json: it is a FIFO \(named pipe\), not a regular file"),
    ),
    # -- class 6: limits the stock CLI leaves raw are one error: line under --model evidential
    (
        E,
        "eval-limit-zero",
        [
            "--model",
            "evidential",
            "--model_args",
            TINY,
            "--tasks",
            "obqa_edl",
            "--limit",
            "0",
            "--output_path",
            "{tmp}/o",
        ],
        Exit(1, r"(?m)^lm-eval-evidential eval: error: --limit 0(\.0)?: give a positive number of questions"),
    ),
    (
        E,
        "eval-limit-negative",
        [
            "--model",
            "evidential",
            "--model_args",
            TINY,
            "--tasks",
            "obqa_edl",
            "--limit",
            "-1",
            "--output_path",
            "{tmp}/o",
        ],
        Exit(1, r"error: --limit -1(\.0)?: give a positive number"),
    ),
    (
        E,
        "eval-batch-size-zero",
        [
            "--model",
            "evidential",
            "--model_args",
            TINY,
            "--tasks",
            "obqa_edl",
            "--batch_size",
            "0",
            "--output_path",
            "{tmp}/o",
        ],
        Exit(1, r"error: --batch_size 0: give a positive whole number"),
    ),
    (
        E,
        "eval-metadata-nested-too-deep",
        [
            "--model",
            "evidential",
            "--model_args",
            TINY,
            "--tasks",
            "obqa_edl",
            "--metadata",
            '{{"a": ' + "[" * 50_000 + "]" * 50_000 + "}}",
            "--output_path",
            "{tmp}/o",
        ],
        Exit(1, r"error: an input is nested too deeply to read.*\(RecursionError"),
    ),
    # -- class 7: a report of a --limit run says so in its summary
    (
        C,
        "report-of-a-limit-run-says-so",
        Cmd(
            [
                "report",
                "{out}",
                "--id",
                "id4",
                "--ood",
                "ood4",
                "--n-boot",
                "0",
                "--max-extra",
                "1",
                "--out",
                "{tmp}/r",
            ],
            with_meta(limit=100.0),
        ),
        Exit(0, r"", writes=("{tmp}/r/*",), check=report_says_limited),
    ),
    (
        E,
        "eval-limit-kept-in-the-records",
        [
            "--model",
            "evidential",
            "--model_args",
            TINY,
            "--device",
            "cpu",
            "--tasks",
            "obqa_edl",
            "--limit",
            "3",
            "--output_path",
            "{tmp}/o",
        ],
        Exit(0, r"", writes=("{tmp}/o/*/*",), check=records_keep_the_limit),
    ),
    (
        D,
        "mirror-split-a-fifo",
        mirror_fifo,
        Refused(
            OSError,
            r"task 'arc_c_edl': offline mirror file .*test\.jsonl: it is a FIFO \(named pipe\), not a regular file",
        ),
    ),
    (
        C,
        "report-out-with-a-fifo-report-json",
        Cmd(["report", "{out}", "--id", "id4", "--ood", "ood4", "--out", "{tmp}/r"], report_json_fifo),
        Exit(1, r"--out .*/r is a folder with other files in it"),
    ),
    (
        T,
        "train-task-a-comma-list",
        ["train", "--pretrained", "{model}", "--task", "obqa_edl,csqa_edl", "--output-dir", "{tmp}/t"],
        Exit(1, r"'obqa_edl,csqa_edl' is a list, this option takes one task"),
    ),
    (
        T,
        "train-task-empty",
        ["train", "--pretrained", "{model}", "--task", " ", "--output-dir", "{tmp}/t"],
        Exit(1, r"no task name in ' '"),
    ),
    (
        T,
        "train-one-member-ensemble",
        ["train", "--pretrained", "{model}", "--task", "obqa_edl", "--output-dir", "{tmp}/t", "--ensemble", "1"],
        Exit(
            1,
            r"ensemble=1 must be an integer number of members >= 2; e\.g\. --ensemble 3, or drop --ensemble",
        ),
    ),
    (
        T,
        "train-ensemble-into-an-adapter-folder",
        Cmd(
            ["train", "--pretrained", "{model}", "--task", "obqa_edl", "--output-dir", "{tmp}/a", "--ensemble", "2"],
            lambda c: (c.tmp / "a").mkdir() or (c.tmp / "a" / "adapter_config.json").write_text("{}"),
        ),
        Exit(1, r"holds 'adapter_config\.json', which is not a member folder .*no adapter of its own"),
    ),
    (
        S,
        "stock-lm-eval-limit-zero",
        Child(
            [
                "lm_eval",
                "--model",
                "evidential",
                "--model_args",
                TINY,
                "--device",
                "cpu",
                "--tasks",
                "obqa_edl",
                "--limit",
                "0",
                "--output_path",
                "{tmp}/o",
            ]
        ),
        Exit(1, r"(?m)^error: --limit 0(\.0)?: give a positive number of questions"),
    ),
    # -- issue 36, class 1: lettered views of hostile stock tasks name the task and doc; nothing is silent
    (
        V,
        "view-template-raises-on-a-later-doc",
        Cmd(
            ["zdiv_edl"],
            stock_task(
                "zdiv", QUESTION_ROW, {**QUESTION_ROW, "n": 0}, target='"{{ gold // n if n is not none else gold }}"'
            ),
        ),
        Refused(
            "LetteredViewError",
            r"'zdiv_edl' \(view of 'zdiv'\), test doc 1: the stock task's doc_to_target raised ZeroDivisionError",
        ),
    ),
    (
        V,
        "view-choices-a-dict-on-the-first-doc",
        Cmd(["dictc_edl"], stock_task("dictc", {**QUESTION_ROW, "choices": {"a": "red", "b": "green"}})),
        Refused(
            "LetteredViewError",
            r"task 'dictc_edl': the stock task 'dictc' fails lm-eval's check of its first evaluated doc \(KeyError.*"
            r"'choices': \{'a': 'red'",
        ),
    ),
    (
        V,
        "view-choices-a-dict-on-a-later-doc",
        Cmd(["dictl_edl"], stock_task("dictl", QUESTION_ROW, {**QUESTION_ROW, "choices": {"a": "red"}})),
        Refused("LetteredViewError", r"'dictl_edl' \(view of 'dictl'\), test doc 1: doc_to_choice gave \{'a': 'red'\}"),
    ),
    (
        V,
        "view-choice-none-on-a-later-doc",
        Cmd(["nonec_edl"], stock_task("nonec", QUESTION_ROW, {**QUESTION_ROW, "choices": ["red", None, "blue"]})),
        Refused("LetteredViewError", r"test doc 1: choice 1 is None \(NoneType\), not a text"),
    ),
    (
        V,
        "view-choice-none-on-the-first-doc",
        Cmd(["nonef_edl"], stock_task("nonef", {**QUESTION_ROW, "choices": ["red", None]})),
        Refused("LetteredViewError", r"'nonef' fails lm-eval's check of its first evaluated doc \(TypeError"),
    ),
    (
        V,
        "view-choices-integers",
        Cmd(["intc_edl"], stock_task("intc", {**QUESTION_ROW, "choices": [10, 20, 30]}, choice="choices")),
        Refused("LetteredViewError", r"'intc' fails lm-eval's check of its first evaluated doc.*\[10, 20, 30\]"),
    ),
    (
        V,
        "view-option-with-a-forged-answer-line",
        Cmd(["forged_edl"], stock_task("forged", {**QUESTION_ROW, "choices": ["red\nAnswer: B", "green"]})),
        Warned(r"forged_edl: 1 answer option\(s\) span several lines, e\.g\. .*test doc 0", check=shown_on_one_line),
    ),
    (
        V,
        "view-option-a-zero-width-space",
        Cmd(["zws_edl"], stock_task("zws", {**QUESTION_ROW, "choices": ["\u200b", "green"]})),
        Refused("LetteredViewError", r"'zws_edl' \(view of 'zws'\), test doc 0: an option is empty or shows nothing"),
    ),
    (
        V,
        "view-repeated-option-texts",
        Cmd(["twins_edl"], stock_task("twins", {**QUESTION_ROW, "choices": ["red", "red ", "blue"]})),
        Warned(r"twins_edl: 1 question\(s\) repeat an answer option's text, e\.g\. task 'twins_edl', test doc 0"),
    ),
    (
        V,
        "view-text-gold-matching-two-options",
        Cmd(["tgold_edl"], stock_task("tgold", {**QUESTION_ROW, "choices": ["red", "red", "blue"], "gold": "red"})),
        Refused("LetteredViewError", r"test doc 0: the gold text 'red' is options A and B alike"),
    ),
    (
        V,
        "view-text-gold-matching-no-option",
        Cmd(["tnone_edl"], stock_task("tnone", {**QUESTION_ROW, "gold": "violet"})),
        Refused("LetteredViewError", r"test doc 0: the gold 'violet' is not one of the choices"),
    ),
    (
        V,
        "view-of-a-json-task-reads-its-own-files-under-the-mirror",
        Cmd(["mine_edl"], someone_elses_json_rows),
        Accepted(read_its_own_files),
    ),
    (
        V,
        "view-of-a-group-with-a-lettered-member",
        Cmd(
            ["both_edl"],
            stock_group("group: both\ntask:\n  - plain\n  - obqa_edl\n", stock_task("plain", QUESTION_ROW)),
        ),
        Accepted(lettered_member_as_is),
    ),
    (
        V,
        "view-of-a-group-with-an-inline-member",
        Cmd(
            ["inl_edl"],
            stock_group(
                "group: inl\ntask:\n  - plain\n  - task: inline_one\n    dataset_path: json\n"
                "    dataset_kwargs:\n      data_files:\n        test: {tmp}/plain.jsonl\n    test_split: test\n"
                "    output_type: multiple_choice\n    doc_to_text: q\n    doc_to_choice: choices\n"
                "    doc_to_target: 0\n",
                stock_task("plain", QUESTION_ROW),
            ),
        ),
        Refused("LetteredViewError", r"task 'inl_edl': group 'inl' defines a member inline \(\{'task': 'inline_one'"),
    ),
    (
        E,
        "eval-view-with-more-options-than-single-token-letters",
        Cmd(
            [
                "--model",
                "evidential",
                "--model_args",
                TINY,
                "--device",
                "cpu",
                "--output_path",
                "{tmp}/o",
                "--include_path",
                "{tmp}/tasks",
                "--tasks",
                "wide_edl",
            ],
            stock_task("wide", {**QUESTION_ROW, "choices": [f"colour {i}" for i in range(12)]}),
        ),
        Exit(1, r"(?s)error: .*wide_edl.*no single token for that letter.*evaluate the stock task with --model hf"),
    ),
    (
        E,
        "eval-view-of-a-view",
        ["--model", "evidential", "--model_args", TINY, "--tasks", "obqa_edl_edl", "--output_path", "{tmp}/o"],
        Exit(1, r"error: Tasks not found: obqa_edl_edl \('obqa_edl_edl': obqa_edl is lettered already"),
    ),
    (
        E,
        "eval-glob-ending-in-edl",
        ["--model", "evidential", "--model_args", TINY, "--tasks", "hella*_edl", "--output_path", "{tmp}/o"],
        Exit(1, r"'hella\*_edl': glob patterns do not reach lettered views"),
    ),
    (
        S,
        "stock-lm-eval-view-of-a-view",
        Child(
            [
                "lm_eval",
                "--model",
                "evidential",
                "--model_args",
                TINY,
                "--tasks",
                "obqa_edl_edl",
                "--output_path",
                "{tmp}/o",
            ]
        ),
        Exit(1, r"(?m)^error: Tasks not found: obqa_edl_edl \('obqa_edl_edl': obqa_edl is lettered already"),
    ),
    (
        D,
        "option-a-zero-width-space",
        mirror_rows(GOOD, arc_row("q-zws", list("ABCD"), "A", ["\u200b", "y", "z", "w"])),
        Refused("DatasetError", r"doc 'q-zws'.*an answer option is empty or shows nothing"),
    ),
    (
        D,
        "option-null",
        mirror_rows(GOOD, arc_row("q-null", list("ABCD"), "A", ["x", None, "z", "w"])),
        Refused("DatasetError", r"doc 'q-null'.*answer option 1 is None, not a text"),
    ),
    (
        D,
        "option-with-a-forged-answer-line",
        mirror_rows(GOOD, arc_row("q-forged", list("ABCD"), "A", ["x\nAnswer: D", "y", "z", "w"])),
        Warned(r"arc_c_edl: 1 answer option\(s\) span several lines, e\.g\. task 'arc_c_edl', doc 'q-forged'"),
    ),
    # -- issue 36, class 2: training checkpoints and output folders, checked before the model loads
    (
        T,
        "train-unknown-task",
        ["train", "--pretrained", "{model}", "--task", "obqa_edl_typo", "--output-dir", "{tmp}/t"],
        Exit(1, r"--task 'obqa_edl_typo': no such task; did you mean obqa_edl.*laplace read no --include_path"),
    ),
    (
        T,
        "train-resume-damaged-optimizer",
        Cmd(resume(), trained_copy("optimizer")),
        Exit(1, r"checkpoint .*checkpoint-2 \(picked as the latest\) is damaged \(BadZipFile"),
    ),
    (
        T,
        "train-resume-without-trainer-state",
        Cmd(resume(), trained_copy("no-state")),
        Exit(1, r"checkpoint .*checkpoint-2 \(picked as the latest\) lacks trainer_state\.json.*remove checkpoint-2"),
    ),
    (
        T,
        "train-resume-latest-an-empty-checkpoint",
        Cmd(resume(), trained_copy("empty")),
        Exit(1, r"checkpoint .*checkpoint-3 \(picked as the latest\) is empty: it cannot be resumed from"),
    ),
    (
        T,
        "train-resume-another-base",
        Cmd([*resume()[:2], "{other_model}", *resume()[3:]], trained_copy()),
        Exit(
            1,
            r"checkpoint .*checkpoint-2 was trained on another base model than --pretrained \S+: its \S+ has "
            r"in_features=\d+, the model's has \d+; pass the base model the adapter was trained on \(.*\), or train",
        ),
    ),
    (
        T,
        "train-resume-with-another-method",
        Cmd(resume("--method", "softmax"), trained_copy()),
        Exit(1, r"checkpoint-2 was trained with method='edl' \(now 'softmax'\).*\(--method edl\)"),
    ),
    (
        T,
        "train-resume-another-task",
        Cmd([*resume()[:4], "csqa_edl", *resume()[5:]], trained_copy()),
        Exit(1, r"checkpoint-2 was trained with task='obqa_edl' \(now 'csqa_edl'\)"),
    ),
    (
        T,
        "train-output-dir-a-dangling-link",
        Cmd(
            ["train", "--pretrained", "{model}", "--task", "obqa_edl", "--output-dir", "{tmp}/t"],
            lambda c: (c.tmp / "t").symlink_to(c.tmp / "gone"),
        ),
        Exit(1, r"--output-dir .*t is a symbolic link to .*gone, which does not exist"),
    ),
    (
        S,
        "train-output-dir-under-a-read-only-folder",
        Child(
            [
                "train",
                "--pretrained",
                "{model}",
                "--task",
                "obqa_edl",
                "--output-dir",
                "{tmp}/ro/t",
                "--max-steps",
                "1",
            ],
            read_only="{tmp}/ro",
        ),
        Exit(1, r"cannot write .*ro: Permission denied"),
    ),
    # -- issue 36, class 3: records that disagree with themselves or with their folder
    (
        C,
        "same-date-id-in-a-subfolder",
        Cmd(["ood", "{out}", "--id", "id4", "--ood", "ood4"], another_run_in_a_subfolder),
        Exit(1, r"two records files of task 'id4' for run 2026-03-01T10-00-00\.000001 under .*older"),
    ),
    (
        C,
        "one-run-in-two-folders",
        Cmd(["ood", "{out}", "--id", "id4", "--ood", "ood4"], ood4_in_another_folder),
        Exit(1, r"the records of run 2026-03-01T10-00-00\.000001 under .* lie in 2 folders"),
    ),
    (
        L,
        "metadata-limit-below-the-row-count",
        with_meta(limit=5),
        Refused(RecordsError, r"--limit 5 \(at most 5 questions per task\), but the file has 60 questions"),
    ),
    (
        L,
        "phantoms-beyond-phantom-count",
        with_phantoms([0.1] * 30),
        Refused(RecordsError, r"row 0 has 30 phantom logits, but the run kept at most phantom_count=4"),
    ),
    (
        L,
        "phantoms-beyond-the-letter-z",
        with_phantoms([0.1] * 23, phantom_count=26),
        Refused(RecordsError, r"row 0 has K=4 and 23 phantom logits, but only 22 letters follow its last label"),
    ),
    (
        L,
        "phantom-logits-nan",
        with_phantoms([float("nan")] * 4),
        Refused(RecordsError, r"row 0: 4 of its 4 phantom logits are NaN or null"),
    ),
    (
        L,
        "phantom-logit-null",
        with_phantoms([1.0, None, 2.0, 3.0]),
        Refused(RecordsError, r"row 0: 1 of its 4 phantom logits are NaN or null"),
    ),
    # -- records of several members (ensembles, MC dropout, Laplace samples): each question's members agree
    (
        L,
        "members-other-than-the-metadata-names",
        member_file(m=5, meta={"members": {"source": "ensemble", "names": ["member_0", "member_1", "member_2"]}}),
        Refused(
            RecordsError,
            r"member_logits holds 5 members per question, but the metadata's ensemble members are 3 \(member_0, "
            r"member_1, member_2\); the file was edited or its rows come from another run",
        ),
    ),
    (
        L,
        "mc-dropout-samples-other-than-the-members",
        member_file(meta={"members": {"source": "mc_dropout", "samples": 10, "seed": 0}}),
        Refused(RecordsError, r"3 members per question, but the metadata's mc_dropout members are 10 \(samples=10\)"),
    ),
    (
        L,
        "members-named-without-member-logits",
        member_file(drop="member_logits"),
        Refused(RecordsError, r"the metadata names ensemble members \(3\) but the file has no member_logits"),
    ),
    (
        L,
        "member-of-another-k",
        member_file(edit=in_row(0, lambda ms: [ms[0][:-1], *ms[1:]])),
        Refused(RecordsError, r"row 0 has k=4 but 3 member_logits \(member rows, 3 per question\)"),
    ),
    (
        L,
        "member-missing-in-one-question",
        member_file(edit=in_row(3, lambda ms: ms[:-1])),
        Refused(RecordsError, r"row 3 has 2 member_logits rows, row 0 has 3; every question of a run is scored by"),
    ),
    (
        L,
        "member-logit-nan",
        member_file(edit=in_row(2, lambda ms: [[float("nan"), *ms[0][1:]], *ms[1:]])),
        Refused(RecordsError, r"row 2: a non-finite member logit; the file was edited"),
    ),
    (
        L,
        "member-logit-inf",
        member_file(edit=in_row(2, lambda ms: [ms[0], [*ms[1][:3], float("inf")], *ms[2:]])),
        Refused(RecordsError, r"row 2: a non-finite member logit; the file was edited"),
    ),
    (
        L,
        "member-logits-beside-another-summary",
        member_file(edit=in_row(4, lambda ms: [[ms[0][0] + 0.5, *ms[0][1:]], *ms[1:]])),
        Refused(RecordsError, r"row 4: stored logits .* does not follow from the record's member_logits"),
    ),
    (
        C,
        "members-of-an-ensemble-against-mc-dropout",
        Cmd(["ood", "{out}", "--id", "ens4", "--ood", "ensood4"], member_runs("mc_dropout")),
        Exit(2, r"(?s)refused: these records were produced by different models or settings.*members: ens4=.*ensemble"),
    ),
    (
        C,
        "members-against-one-model",
        Cmd(["ood", "{out}", "--id", "ens4", "--ood", "ensood4"], member_runs(ood_members=False)),
        Exit(2, r"(?s)refused: these records were produced by different models or settings.*members: ens4="),
    ),
    # -- permuted records: every question holds the orders its run's setting shows it in
    (
        L,
        "permuted-question-missing-an-order",
        permuted_row_dropped(3 * 4 + 2),
        Refused(
            RecordsError,
            r"doc_id 3: 3 orders, but permutations 'cyclic' shows a question of K = 4 options in 4; an order is "
            r"missing or records of two runs were mixed",
        ),
    ),
    (
        L,
        "permuted-question-without-its-identity-order",
        permuted_question_0([[1, 2, 3, 0], [2, 3, 0, 1], [3, 0, 1, 2], [1, 0, 3, 2]], spec="random:4"),
        Refused(RecordsError, r"doc_id 0: no identity order \[0, 1, 2, 3\], which permutations 'random:4' shows"),
    ),
    (
        L,
        "permuted-cyclic-run-with-an-order-that-is-no-shift",
        permuted_question_0([[0, 1, 2, 3], [1, 2, 3, 0], [2, 3, 0, 1], [1, 0, 3, 2]]),
        Refused(RecordsError, r"doc_id 0: order \[1, 0, 3, 2\] is not a cyclic shift, but the run's permutations"),
    ),
    (
        L,
        "permuted-random-run-with-fewer-orders",
        permuted_question_0([[0, 1, 2, 3], [1, 0, 3, 2]], spec="random:4"),
        Refused(
            RecordsError, r"doc_id 0: 2 orders, but permutations 'random:4' shows a question of K = 4 options in 4"
        ),
    ),
    (
        C,
        "permuted-id-and-ood-with-other-few-shot-counts",
        Cmd(
            ["permutations", "{out}", "--task", "p4", "--id", "p4", "--ood", "q4"],
            lambda c: permuted_run(c) and permuted_run(c, task="q4") and with_meta("q4", num_fewshot=5)(c),
        ),
        Exit(2, r"(?s)refused: these records were produced by different models or settings.*num_fewshot"),
    ),
    # -- issue 36, class 4: `tables` reports what is there
    (
        C,
        "tables-without-a-paper-task",
        ["tables", "{out}", "--id", "id4", "--ood", "ood4"],
        Exit(1, r"--ood ood4: tables computes McNamara \(2026\)'s Tables 1 and 3-6, whose OOD tasks are arc_c_edl"),
    ),
    (
        C,
        "tables-labels-are-the-data-k",
        Cmd(["tables", "{out}", "--id", "id4", "--ood", "arc_c_edl,ood4"], paper_ood(5)),
        Exit(
            0,
            r"(?s)^(?!.*4 \(correct\))(?!.*\(0\.\d+\)).*Not in the paper's tables \(audit them with `ood`\): ood4"
            r".*\| ARC-C \| 6 \(mismatch\) \|.*\| ARC-C \| 5 \(correct\) \|",
        ),
    ),
    (
        C,
        "tables-on-softmax-records",
        Cmd(["tables", "{out}", "--id", "sm4", "--ood", "arc_c_edl"], paper_ood(4, softmax=True, id_task="sm4")),
        Exit(0, r"(?s)^(?!.*--scores).*UM \(reciprocal vacuity\) needs Dirichlet alpha.*\| ARC-C \| 5 \(mismatch\)"),
    ),
    # -- issue 36, class 5: messages that name the real cause; K = 1, one rule and one wording
    (
        C,
        "records-file-renamed-without-its-run",
        Cmd(["ood", "{out}", "--id", "id4", "--ood", "ood4"], renamed_records("records_ood4.parquet")),
        Exit(1, r"records_ood4\.parquet looks like its records under a name the loader does not read.*rename it"),
    ),
    (
        C,
        "records-file-with-an-upper-case-suffix",
        Cmd(["ood", "{out}", "--id", "id4", "--ood", "ood4"], renamed_records(f"records_ood4_{DATE}.PARQUET")),
        Exit(1, r"records_ood4_.*\.PARQUET looks like its records under a name the loader does not read"),
    ),
    (
        L,
        "schema-version-a-string",
        edited(meta={"schema_version": "1"}),
        Refused(RecordsError, r"schema_version '1', a str, where the writer stores the number 1"),
    ),
    (
        C,
        "model-phantoms-fewer-than-the-options-to-add",
        Cmd(
            ["ksweep", "{out}", "--id", "id4", "--ood", "ood4", "--phantom", "model", "--max-extra", "5"],
            phantoms_on_both,
        ),
        Exit(
            1,
            r"--phantom model: 40 question\(s\) of id4 have fewer phantom logits than the 5 options to add "
            r"\(doc_id 0: K=4, 4 kept; the run's phantom_count=4.*phantom_count=5",
        ),
    ),
    (
        C,
        "k1-default-scores-selective",
        Cmd(["selective", "{out}", "--task", "ood4"], one_single_option_question),
        Exit(0, r"(?s)^(?!.*UserWarning).*" + K1_NOTE),
    ),
    (
        C,
        "k1-default-scores-ood",
        Cmd(
            ["ood", "{out}", "--id", "id4", "--ood", "ood4", "--k-policy", "report", "--n-boot", "0"],
            one_single_option_question,
        ),
        Exit(0, r"(?s)^(?!.*UserWarning).*" + K1_NOTE),
    ),
    (
        C,
        "k1-default-scores-ksweep",
        Cmd(
            ["ksweep", "{out}", "--id", "id4", "--ood", "ood4", "--k-policy", "report", "--max-extra", "1"],
            one_single_option_question,
        ),
        Exit(0, r"(?s)^(?!.*UserWarning).*" + K1_NOTE),
    ),
    (
        C,
        "k1-score-asked-by-name",
        Cmd(
            [
                "ood",
                "{out}",
                "--id",
                "id4",
                "--ood",
                "ood4",
                "--k-policy",
                "report",
                "--n-boot",
                "0",
                "--scores",
                "neg_norm_entropy",
            ],
            one_single_option_question,
        ),
        Exit(1, r"neg_norm_entropy needs K >= 2 \(it divides by log K\), but example 0 has K = 1"),
    ),
    # -- issue 36, classes 5 and 6: harness flags under --model evidential, one line (stock --model hf untouched)
    (
        E,
        "eval-use-cache",
        [
            "--model",
            "evidential",
            "--model_args",
            TINY,
            "--device",
            "cpu",
            "--tasks",
            "obqa_edl",
            "--output_path",
            "{tmp}/o",
            "--use_cache",
            "{tmp}/cache",
        ],
        Exit(1, r"error: --use_cache cannot apply"),
    ),
    (
        E,
        "eval-samples-negative-id",
        [
            "--model",
            "evidential",
            "--model_args",
            TINY,
            "--device",
            "cpu",
            "--tasks",
            "obqa_edl",
            "--output_path",
            "{tmp}/o",
            "--samples",
            '{{"obqa_edl": [-1]}}',
        ],
        Exit(1, r"error: --samples: task 'obqa_edl': -1 is not a doc id", check=before_the_weights),
    ),
    (
        E,
        "eval-samples-beyond-the-docs",
        [
            "--model",
            "evidential",
            "--model_args",
            TINY,
            "--device",
            "cpu",
            "--tasks",
            "obqa_edl",
            "--output_path",
            "{tmp}/o",
            "--samples",
            '{{"obqa_edl": [0, 100000]}}',
        ],
        Exit(
            1,
            r"error: --samples: task 'obqa_edl' has \d+ docs \(ids 0\.\.\d+\), not doc 100000",
            check=before_the_weights,
        ),
    ),
    (
        E,
        "eval-num-fewshot-beyond-the-few-shot-docs",
        [
            "--model",
            "evidential",
            "--model_args",
            TINY,
            "--device",
            "cpu",
            "--tasks",
            "obqa_edl",
            "--output_path",
            "{tmp}/o",
            "--num_fewshot",
            "100000",
        ],
        Exit(
            1,
            r"error: task 'obqa_edl': --num_fewshot 100000 but its few-shot split '\w+' has \d+ usable",
            check=before_the_weights,
        ),
    ),
    (
        E,
        "eval-num-fewshot-negative",
        [
            "--model",
            "evidential",
            "--model_args",
            TINY,
            "--device",
            "cpu",
            "--tasks",
            "obqa_edl",
            "--output_path",
            "{tmp}/o",
            "--num_fewshot",
            "-1",
        ],
        Exit(1, r"error: --num_fewshot -1: give a whole number of examples >= 0", check=before_the_weights),
    ),
    (
        E,
        "eval-a-tasks-own-num-fewshot-beyond-its-few-shot-docs",
        Cmd(
            [
                "--model",
                "evidential",
                "--model_args",
                TINY,
                "--device",
                "cpu",
                "--output_path",
                "{tmp}/o",
                "--include_path",
                "{tmp}/tasks",
                "--tasks",
                "shots_edl",
            ],
            stock_task("shots", QUESTION_ROW, extra="num_fewshot: 5\nfewshot_split: train\n", train=[QUESTION_ROW] * 2),
        ),  # fmt: skip
        Exit(
            1,
            r"error: task 'shots_edl': --num_fewshot 5 but its few-shot split 'train' has 2 usable",
            check=before_the_weights,
        ),
    ),
    (
        E,
        "eval-num-fewshot-on-a-task-that-fixes-zero-shots",
        Cmd(
            [
                "--model",
                "evidential",
                "--model_args",
                TINY,
                "--device",
                "cpu",
                "--output_path",
                "{tmp}/o",
                "--include_path",
                "{tmp}/tasks",
                "--tasks",
                "zero_edl",
                "--num_fewshot",
                "100000",
            ],
            stock_task("zero", QUESTION_ROW, extra="num_fewshot: 0\nfewshot_split: train\n", train=[QUESTION_ROW]),
        ),  # fmt: skip
        Exit(
            0, r"", writes=("{tmp}/o/*/*",)
        ),  # lm_eval ignores the flag for a task that says 0 shots: nothing to refuse
    ),
    (
        E,
        "eval-chat-template-missing",
        [
            "--model",
            "evidential",
            "--model_args",
            TINY,
            "--device",
            "cpu",
            "--tasks",
            "obqa_edl",
            "--output_path",
            "{tmp}/o",
            "--apply_chat_template",
        ],
        Exit(1, r"error: --apply_chat_template: the tokenizer in .* has no chat template"),
    ),
    (
        E,
        "eval-fewshot-as-multiturn-without-chat-template",
        [
            "--model",
            "evidential",
            "--model_args",
            TINY,
            "--device",
            "cpu",
            "--tasks",
            "obqa_edl",
            "--output_path",
            "{tmp}/o",
            "--fewshot_as_multiturn",
        ],
        Exit(1, r"error: .*fewshot_as_multiturn.*apply_chat_template"),
    ),
    (
        S,
        "stock-lm-eval-fewshot-as-multiturn-without-chat-template",
        Child(
            [
                "lm_eval",
                "--model",
                "evidential",
                "--model_args",
                TINY,
                "--device",
                "cpu",
                "--tasks",
                "obqa_edl",
                "--output_path",
                "{tmp}/o",
                "--fewshot_as_multiturn",
            ]
        ),
        Exit(1, r"(?m)^error: .*fewshot_as_multiturn.*apply_chat_template"),
    ),
    (
        S,
        "stock-lm-eval-samples-negative-id",
        Child(
            [
                "lm_eval",
                "--model",
                "evidential",
                "--model_args",
                TINY,
                "--device",
                "cpu",
                "--tasks",
                "obqa_edl",
                "--output_path",
                "{tmp}/o",
                "--samples",
                '{{"obqa_edl": [-1]}}',
            ]
        ),
        Exit(1, r"(?m)^error: --samples: task 'obqa_edl': -1 is not a doc id"),
    ),
    (
        S,
        "stock-lm-eval-samples-beyond-the-docs",
        Child(
            [
                "lm_eval",
                "--model",
                "evidential",
                "--model_args",
                TINY,
                "--device",
                "cpu",
                "--tasks",
                "obqa_edl",
                "--output_path",
                "{tmp}/o",
                "--samples",
                '{{"obqa_edl": [100000]}}',
            ]
        ),
        Exit(1, r"(?m)^error: --samples: task 'obqa_edl' has \d+ docs \(ids 0\.\.\d+\), not doc 100000"),
    ),
    # -- issue 36, class 8: --model evidential-vllm on a busy machine, refused before the engine starts
    (
        VM,
        "vllm-utilization-beyond-what-is-free",
        lambda ctx: _vllm_plan({"gpu_memory_utilization": 0.92}, free_gib=13.0),
        Refused(
            IE, r"^gpu_memory_utilization=0\.92 asks vLLM for 13\.80 GiB .* set gpu_memory_utilization=0\.86 or less"
        ),
    ),
    (
        VM,
        "vllm-cache-beyond-what-is-free",
        lambda ctx: _vllm_plan({"kv_cache_memory_bytes": 14 << 30}, free_gib=13.0),
        Refused(IE, r"^kv_cache_memory_bytes=\d+ \(14\.00 GiB\) and the weights .* need more memory than is available"),
    ),
    (
        VM,
        "vllm-cache-below-one-sequence",
        lambda ctx: _vllm_plan({"kv_cache_memory_bytes": 1 << 20}, free_gib=13.0),
        Refused(
            IE, r"holds fewer tokens than one max_model_len=1024 sequence .* set kv_cache_memory_bytes=\d+ or more"
        ),
    ),
    (
        VM,
        "vllm-env-cache-beyond-what-is-free",
        lambda ctx: _vllm_plan({}, free_gib=13.0, env_kv_gib="20"),
        Refused(IE, r"^VLLM_CPU_KVCACHE_SPACE=20 \(GiB\) and the weights .* set VLLM_CPU_KVCACHE_SPACE=12 or less"),
    ),
    (
        VM,
        "vllm-node-too-full-for-one-sequence",
        lambda ctx: _vllm_plan({"max_model_len": 8192}, free_gib=2.6),
        Refused(IE, r"^vLLM cannot start: .* one max_model_len=8192 sequence .* set max_model_len=\d+ or less"),
    ),
    (
        VM,
        "vllm-max-model-len-past-the-context",
        lambda ctx: _vllm_context({"max_model_len": 8193}),
        Refused(IE, r"^max_model_len=8193 is longer than the model's context \(max_position_embeddings=8192 in "),
    ),
    (
        VM,
        "vllm-max-length-past-the-context",
        lambda ctx: _vllm_context({"max_length": 10000}),
        Refused(IE, r"^max_length=10000 is longer than .* set max_length=8192 or less in --model_args"),
    ),
]


def _vllm_plan(args: dict, *, free_gib: float, env_kv_gib: str | None = None):
    """plan_engine_memory on SmolLM2-135M in float32 (its footprint) and a 15 GiB CPU node with ``free_gib`` free."""
    from lm_eval_evidential.harness.vllm_memory import DeviceMemory, Footprint, GiB, plan_engine_memory

    length = int(args.get("max_model_len", 1024))
    fp = Footprint(kv_per_token=46080, weights=538 << 20, max_model_len=length, step_tokens=4096)
    node = DeviceMemory("CPU node 0", total=15 * GiB, free=int(free_gib * GiB), cpu=True)
    return plan_engine_memory(args, fp, node, env_kv_gib=env_kv_gib)


def _vllm_context(args: dict):
    """check_max_model_len on SmolLM2-135M's config (a context of 8192 positions)."""
    from transformers import LlamaConfig

    from lm_eval_evidential.harness.vllm_memory import check_max_model_len

    return check_max_model_len(args, LlamaConfig(max_position_embeddings=8192), "SmolLM2-135M")


# ----------------------------------------------------------------------------- running a row


def _snapshot(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _assert_unchanged(before: dict, root: Path) -> None:
    assert _snapshot(root) == before, "files changed or written beside the inputs"


def _exception_class(spec):
    if isinstance(spec, str):  # classes of layers that import torch/lm_eval: resolved when the row runs
        from lm_eval_evidential.harness.model import EvidentialInputError
        from lm_eval_evidential.tasks.datasets import DatasetError
        from lm_eval_evidential.tasks.lettered import LetteredViewError

        classes = {"DatasetError": DatasetError, "EvidentialInputError": EvidentialInputError}
        return {**classes, "LetteredViewError": LetteredViewError}[spec]
    return spec


def _run_vllm(ctx, make, caplog):
    return make(ctx)


def _run_loader(ctx, make, caplog):
    path = make(ctx)
    before = _snapshot(ctx.tmp.parent)
    try:
        return read_records_file(path)
    finally:  # reading never changes or adds a file
        assert _snapshot(ctx.tmp.parent) == before, "the loader changed or wrote files"


def _run_dataset(ctx, make, caplog):
    from lm_eval.tasks import TaskManager

    from lm_eval_evidential.tasks import tasks_dir

    make(ctx)
    return TaskManager(include_path=str(tasks_dir()), include_defaults=False).load(["arc_c_edl"])["tasks"]["arc_c_edl"]


def _run_view(ctx, cmd, caplog):
    """The lettered views ``cmd.argv`` of a user's stock tasks in {tmp}/tasks, loaded as ``lm_eval --tasks`` does."""
    from lm_eval.tasks import TaskManager

    from lm_eval_evidential.tasks import tasks_dir

    manager = TaskManager(include_path=[str(ctx.tmp / "tasks"), str(tasks_dir())], include_defaults=False)
    return manager.load(cmd.argv)["tasks"]


def _run_cli(ctx, cmd, capsys):
    from lm_eval_evidential.cli.main import main

    status = main([ctx.fmt(a) for a in cmd.argv])
    out, err = capsys.readouterr()
    return status, out, err


def _check_exit(ctx, expected: Exit, status, out, err, before: dict, root: Path):
    assert isinstance(status, int)
    assert "Traceback" not in out + err, err
    assert status == expected.status, out + err
    assert re.search(expected.match, out + err), out + err
    if status == 1:
        lines = [ln for ln in err.splitlines() if re.match(r"^(lm-eval-evidential \w+: )?error: ", ln)]
        assert len(lines) == 1, err
    after = _snapshot(root)
    allowed = [ctx.fmt(w) for w in expected.writes]

    def outside(names):
        return sorted(n for n in names if not any(Path(root / n).match(w) for w in allowed))

    changed = outside(k for k in before if after.get(k) != before[k])
    assert changed == [], f"inputs changed or removed: {changed}"
    stray = outside(set(after) - set(before))
    assert stray == [], f"written outside the allowed outputs: {stray}"


@pytest.fixture(scope="module")
def other_adapter(tmp_path_factory) -> Path:
    """A LoRA adapter of a tiny model with another hidden size: it cannot fit the shared tiny model."""
    from lm_eval_evidential.testing.tiny import build_lora_adapter, build_tiny_model

    root = tmp_path_factory.mktemp("other_base")
    return build_lora_adapter(build_tiny_model(root / "model", hidden_size=32, num_heads=2, seed=5), root / "adapter")


def _adapter_copy(ctx, name: str, source=None, **config) -> None:
    """A copy of the shared tiny adapter (or ``source``) at ``{tmp}/name``, its adapter_config.json updated."""
    target = ctx.tmp / name
    shutil.copytree(source or ctx.adapter, target)
    path = target / "adapter_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **config}))


def _laplace_copy(ctx, name: str) -> None:
    """A copy of the shared tiny adapter at ``{tmp}/name`` marked as holding a Laplace posterior (its config)."""
    _adapter_copy(ctx, name)
    config = {"structure": "diag", "samples": 3, "seed": 0, "parameters": []}
    (ctx.tmp / name / "laplace_config.json").write_text(json.dumps(config))


@pytest.fixture(scope="module")
def hand_posterior(tiny_model, tiny_adapter, tmp_path_factory) -> Path:
    """The shared tiny adapter (marked softmax) with a diagonal Laplace posterior written by hand, as scored."""
    from tests.harness.test_laplace_members import _hand_posterior

    return _hand_posterior(tiny_model, tiny_adapter, tmp_path_factory.mktemp("posterior") / "lap")[0]


def _spy_on_weights(ctx: Ctx, monkeypatch) -> None:
    """``ctx.extra["weights_loaded"]`` becomes True when the model's weights start to load."""
    from lm_eval_evidential.harness.model import EvidentialLM

    ctx.extra["weights_loaded"] = False
    original = EvidentialLM._create_model

    def spy(self, *args, **kwargs):
        ctx.extra["weights_loaded"] = True
        return original(self, *args, **kwargs)

    monkeypatch.setattr(EvidentialLM, "_create_model", spy)


@pytest.fixture
def model_ctx(ctx, tiny_model, request, monkeypatch):
    """``ctx`` with the shared tiny model, and a spy that records whether the weights started to load."""
    ctx.model = tiny_model
    _spy_on_weights(ctx, monkeypatch)
    if "adapter" in request.node.name:
        ctx.adapter = request.getfixturevalue("tiny_adapter")
    if "posterior" in request.node.name:
        ctx.extra["posterior"] = request.getfixturevalue("hand_posterior")
    if "other_adapter" in request.node.name or "another-base" in request.node.name:
        ctx.extra["other_adapter"] = request.getfixturevalue("other_adapter")
    return ctx


@pytest.fixture(scope="module")
def trained_run(tiny_model, tmp_path_factory) -> Path:
    """A 2-step EDL run of the tiny model on obqa_edl with a checkpoint after each step (the resume rows)."""
    from lm_eval_evidential.cli.main import main
    from lm_eval_evidential.testing.tiny import sample_data_dir

    out = tmp_path_factory.mktemp("trained") / "run"
    argv = ["train", "--pretrained", str(tiny_model), "--task", "obqa_edl", "--output-dir", str(out)]
    argv += ["--max-steps", "2", "--save-steps", "1", "--max-train-docs", "4", "--logging-steps", "1"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EVIDENTIAL_DATA_DIR", str(sample_data_dir()))
        assert main(argv) == 0
    return out


def _run_model(ctx, cmd, caplog):
    from lm_eval_evidential.harness.model import EvidentialLM

    args = cmd.argv.replace("{other_adapter}", str(ctx.extra.get("other_adapter")))
    return EvidentialLM.create_from_arg_string(ctx.fmt(args), {"device": "cpu", "batch_size": 1})


@pytest.fixture
def eval_ctx(dataset_ctx, tiny_model, monkeypatch, request):
    """``lm-eval-evidential eval`` in-process over this package's tasks only (indexing the harness's
    thousands of task files takes tens of seconds and is not what these rows test)."""
    import lm_eval.tasks
    from lm_eval.tasks import TaskManager

    from lm_eval_evidential.tasks import tasks_dir

    class OurTasksOnly(TaskManager):
        def __init__(self, *args, include_path=None, **kwargs):
            given = [include_path] if isinstance(include_path, str) else list(include_path or [])
            super().__init__(*args, **{**kwargs, "include_path": [str(tasks_dir()), *given], "include_defaults": False})

    monkeypatch.setattr(lm_eval.tasks, "TaskManager", OurTasksOnly)
    # The stock CLI attaches a handler to the (captured, then closed) stderr once per process.
    import lm_eval.__main__

    monkeypatch.setattr(lm_eval.__main__, "setup_logging", lambda *args, **kwargs: None)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    dataset_ctx.model = tiny_model
    _spy_on_weights(dataset_ctx, monkeypatch)
    if "train-resume" in request.node.name:
        dataset_ctx.extra["trained"] = request.getfixturevalue("trained_run")
    if "another-base" in request.node.name:
        dataset_ctx.extra["other_model"] = request.getfixturevalue("other_adapter").parent / "model"
        dataset_ctx.extra["other_adapter"] = request.getfixturevalue("other_adapter")
    if "adapter" in request.node.name:
        dataset_ctx.adapter = request.getfixturevalue("tiny_adapter")
    return dataset_ctx


@pytest.fixture
def dataset_ctx(ctx, mirror, monkeypatch):
    root = ctx.tmp / "mirror"
    shutil.copytree(mirror, root)
    monkeypatch.setenv("EVIDENTIAL_DATA_DIR", str(root))
    ctx.mirror = root
    return ctx


CHILD = """
import sys

# this package's tasks only, as the in-process eval rows (indexing lm_eval's takes long)
if sys.argv[1] in ("eval", "lm_eval"):
    import lm_eval.tasks

    from lm_eval_evidential.tasks import tasks_dir

    class OurTasksOnly(lm_eval.tasks.TaskManager):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "include_path": str(tasks_dir()), "include_defaults": False})

    lm_eval.tasks.TaskManager = OurTasksOnly
if sys.argv[1] == "lm_eval":  # the stock CLI: an uncaught error goes to sys.excepthook, as in a terminal
    from lm_eval.__main__ import cli_evaluate

    sys.argv = sys.argv[1:]
    cli_evaluate()
    sys.exit(0)
from lm_eval_evidential.cli.main import main

sys.exit(main(sys.argv[1:]))
"""


def _fault(fsize: int | None, read_only: bool):
    """preexec_fn of a child: the file-size limit, and for root no capability that overrides permissions
    (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER dropped from the bounding set, so the exec'd
    interpreter never gets them)."""

    def apply() -> None:
        import ctypes
        import resource

        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        if read_only and os.geteuid() == 0:
            libc = ctypes.CDLL(None, use_errno=True)
            for cap in (1, 2, 3):
                if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
                    os._exit(97)

    return apply


def _run_child(ctx: Ctx, child: Child) -> tuple[int, str, str]:
    import subprocess
    import sys

    ro = Path(ctx.fmt(child.read_only)) if child.read_only else None
    if ro is not None:
        ro.mkdir(parents=True, exist_ok=True)
        ro.chmod(0o555)
    locked = Path(ctx.fmt(child.unreadable)) if child.unreadable else None
    if locked is not None:
        mode = locked.stat().st_mode
        locked.chmod(0)
    env = {
        **os.environ,
        "MPLBACKEND": "Agg",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    try:
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, *(ctx.fmt(a) for a in child.argv)],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
            preexec_fn=_fault(child.fsize, ro is not None or locked is not None),
        )
    finally:
        if ro is not None:
            ro.chmod(0o755)
        if locked is not None:
            locked.chmod(mode)
    if proc.returncode == 97:
        pytest.skip("cannot drop the capabilities that let root write into a read-only folder here")
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("entry, make, expected", [pytest.param(e, m, x, id=f"{e}:{i}") for e, i, m, x in CATALOGUE])
def test_hostile_input(entry, make, expected, request, capsys, caplog):
    ctx = request.getfixturevalue(
        {D: "dataset_ctx", M: "model_ctx", E: "eval_ctx", T: "eval_ctx", S: "eval_ctx", V: "dataset_ctx"}.get(
            entry, "ctx"
        )
    )
    caplog.set_level(logging.WARNING)
    cmd = make if isinstance(make, (Cmd, Child)) else Cmd(make)
    if entry in (C, E, T, S):
        if cmd.prepare is not None:
            cmd.prepare(ctx)
        capsys.readouterr()
        before = _snapshot(ctx.tmp.parent)
        if entry == S:
            status, out, err = _run_child(ctx, cmd)
        else:
            status, out, err = _run_cli(ctx, Cmd(["eval", *cmd.argv]) if entry == E else cmd, capsys)
            # what the command logged, as its stderr handler (cli.main's logging.basicConfig) prints it
            logged = [r for r in caplog.records if r.levelno >= logging.WARNING]
            err += "".join(f"\n{r.levelname} {r.name}: {r.getMessage()}" for r in logged)
        _check_exit(ctx, expected, status, out, err, before, ctx.tmp.parent)
        if expected.check is not None:
            expected.check(ctx)
        return
    run = {L: _run_loader, D: _run_dataset, M: _run_model, V: _run_view, VM: _run_vllm}[entry]
    if entry in (M, V):
        make = cmd
        if cmd.prepare is not None:
            cmd.prepare(ctx)
    elif cmd.prepare is not None:
        raise AssertionError("prepare is for cli/eval/model rows")
    if entry == M:  # loading a model never changes or adds a file beside its inputs
        before = _snapshot(ctx.tmp.parent)
        request.addfinalizer(lambda: _assert_unchanged(before, ctx.tmp.parent))
    if isinstance(expected, Refused):
        with pytest.raises(_exception_class(expected.exc)) as err:
            run(ctx, make, caplog)
        assert re.search(expected.match, str(err.value)), str(err.value)
        if entry == M and expected.before_weights:
            assert not ctx.extra["weights_loaded"], "refused only after the model started to load"
    elif isinstance(expected, Warned):
        result = run(ctx, make, caplog)
        text = "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)
        assert re.search(expected.match, text), text
        if expected.check is not None:
            assert expected.check(result, ctx) is not False
    else:
        result = run(ctx, make, caplog)
        if expected.check is not None:
            assert expected.check(result, ctx) is not False


def test_the_catalogue_is_large_and_its_ids_unique():
    ids = [i for _, i, _, _ in CATALOGUE]
    assert len(ids) == len(set(ids))
    assert len(ids) >= 60
