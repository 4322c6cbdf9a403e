"""A records file cannot lie about itself: its name, metadata and columns agree in every identity, or it
is refused naming both values (issue 26, class 1). Property test over generated files (hypothesis)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lm_eval_evidential.records import META_KEY, Records, RecordsError, make_record, read_records_file, records_path
from lm_eval_evidential.records.parquet import write_records

TASKS = st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True)
DATES = st.builds(
    lambda d, h, us: f"2026-{1 + d // 28:02d}-{1 + d % 28:02d}T{h:02d}-00-00.{us:06d}",
    st.integers(0, 300),
    st.integers(0, 23),
    st.integers(0, 999_999),
)
#: The identities a file states twice or more, and how one of them is made to disagree.
FIELDS = ("name-task", "name-date", "meta-task", "meta-date", "column-task", "method", "edl-alpha")


def _file(folder: Path, task: str, date: str, method: str, lam: float, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(int(rng.integers(1, 6))):
        k = int(rng.integers(2, 6))
        z = rng.normal(0.0, 2.0, size=k)
        alpha = None if method == "softmax" else np.logaddexp(0.0, z) + lam + (method == "ib_edl") * rng.random(k)
        rows.append(
            make_record(
                task=task,
                doc_id=i,
                labels="ABCDE"[:k],
                gold=int(rng.integers(k)),
                logits=z,
                alpha=alpha,
                prior_weight=lam,
            )
        )
    meta = {"method": method, "prior_weight": lam, "date_id": date, "pretrained": "synthetic"}
    return write_records(records_path(folder, task, date), Records.from_rows(rows, task=task, meta=meta))


def _disagree(path: Path, field: str, other_task: str, other_date: str) -> Path | None:
    """``path`` with ``field`` made to disagree with the rest (None when the file cannot express it)."""
    table = pq.read_table(path)
    meta = json.loads(table.schema.metadata[META_KEY])
    if field == "name-task":
        return path.rename(records_path(path.parent, other_task, meta["date_id"]))
    if field == "name-date":
        return path.rename(records_path(path.parent, meta["task"], other_date))
    if field in ("meta-task", "meta-date", "method"):
        key, value = {"meta-task": ("task", other_task), "meta-date": ("date_id", other_date)}.get(
            field, ("method", "evidential")
        )
        table = table.replace_schema_metadata({META_KEY: json.dumps({**meta, key: value}).encode()})
    elif field == "column-task":
        tasks = table.column("task").to_pylist()
        tasks[-1] = other_task
        table = table.set_column(0, table.schema.field(0), pa.array(tasks, pa.string()))
    elif field == "edl-alpha":
        if meta["method"] != "edl":
            return None
        logits = table.column("logits").to_pylist()
        logits[0] = [logits[0][0] + 0.25, *logits[0][1:]]  # alpha, evidence and every derived column unchanged
        index = table.schema.get_field_index("logits")
        table = table.set_column(index, table.schema.field(index), pa.array(logits, table.schema.field(index).type))
    pq.write_table(table, path)
    return path


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    task=TASKS,
    other_task=TASKS,
    date=DATES,
    other_date=DATES,
    method=st.sampled_from(["edl", "ib_edl", "softmax"]),
    lam=st.sampled_from([1.0, 0.5, 2.0]),
    seed=st.integers(0, 2**16),
    field=st.sampled_from(FIELDS),
)
def test_a_file_disagreeing_in_one_identity_is_refused_a_consistent_one_accepted(
    task, other_task, date, other_date, method, lam, seed, field
):
    folder = Path(tempfile.mkdtemp())
    try:
        path = _file(folder, task, date, method, lam, seed)
        back = read_records_file(path)  # consistent: accepted, as written
        assert (back.task, back.meta["date_id"], back.method) == (task, date, method)
        if (field.endswith("task") and other_task == task) or (field.endswith("date") and other_date == date):
            return
        damaged = _disagree(path, field, other_task, other_date)
        if damaged is None:
            return
        with pytest.raises(RecordsError) as refused:
            read_records_file(damaged)
        message = str(refused.value)
        both = {
            "name-task": (other_task, task),
            "meta-task": (task, other_task),
            "column-task": (other_task, task),
            "name-date": (other_date, date),
            "meta-date": (date, other_date),
            "method": ("evidential",),
        }.get(field, ("does not follow",))
        for value in both:  # the refusal names both values that disagree
            assert value in message, (field, message)
    finally:
        shutil.rmtree(folder)
