"""The records format is one table (``RECORD_SCHEMA``): the class, the file, the rows and the docs follow it,
and adding an optional field (absent from older files) is one row in it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lm_eval_evidential.records import (
    OPTIONAL_FIELDS,
    RECORD_FIELDS,
    RECORD_SCHEMA,
    Records,
    RecordsError,
    arrow_schema,
    make_records,
    read_records_file,
    records_path,
    write_records,
)
from lm_eval_evidential.records import schema as schema_module

DATE = "2026-01-01T00-00-00.000001"


def _rows(task="t", optional=None):
    ks = [4, 2, 5, 3]
    rng = np.random.default_rng(3)
    z = [rng.normal(size=k) for k in ks]
    return make_records(
        task=task,
        doc_ids=range(len(ks)),
        labels=[list("ABCDE"[:k]) for k in ks],
        gold=[0, 1, 4, 2],
        logits=z,
        alpha=[np.logaddexp(0, x) + 1.0 for x in z],
        optional=optional,
    )


def test_the_class_the_file_and_the_docs_follow_the_table(tmp_path):
    attributes = {f.name for f in dataclasses.fields(Records)} - {"meta", "path", "producer_check"}
    assert attributes == {f.name for f in RECORD_SCHEMA}, "each field of RECORD_SCHEMA is one Records attribute"
    rec = Records.from_rows(_rows(), task="t", meta={"method": "edl"})
    path = write_records(records_path(tmp_path, "t", DATE), rec)
    written = pq.read_schema(path)
    assert written.names == list(RECORD_FIELDS) and written.remove_metadata().equals(arrow_schema())
    assert list(rec[0]) == [f.name for f in RECORD_SCHEMA] == list(_rows()[0])
    for f in RECORD_SCHEMA:  # the module's table is made from the fields
        assert f"| {f.name} " in schema_module.__doc__ and f.doc in schema_module.__doc__
    assert OPTIONAL_FIELDS == ("phantom_logits", "member_logits", "member_phantom_logits", "order")


@pytest.fixture
def phantom_field():
    """The optional row: a list of any length (the logits of options beyond K)."""
    return next(f for f in RECORD_SCHEMA if f.name == "phantom_logits")


def _read(path) -> Records:
    table = pq.read_table(path)
    return Records.from_table(table, task="t", path=path)


def test_an_optional_field_is_one_row_old_files_load_and_unchanged_runs_write_the_same_bytes(tmp_path, phantom_field):
    old = tmp_path / "old"
    # a file without the optional column, as every file written before it was added
    before = write_records(records_path(old, "t", DATE), Records.from_rows(_rows(), task="t", meta={}))
    assert "phantom_logits" not in pq.read_schema(before).names
    back = _read(before)
    assert back.phantom_logits is None and back[1]["phantom_logits"] is None
    # A run that gives no phantom values writes the file it always wrote, byte for byte.
    same = write_records(records_path(tmp_path / "new", "t", DATE), Records.from_rows(_rows(), task="t", meta={}))
    assert same.read_bytes() == before.read_bytes()
    # A run that gives them keeps them: any length per row (0 included), in the writer's Arrow type.
    phantom = [[0.5, -1.0], [], [2.0], [1.0, 2.0, 3.0]]
    rows = _rows(optional={"phantom_logits": phantom})
    assert [r["phantom_logits"] for r in rows] == phantom
    path = write_records(records_path(tmp_path / "with", "t", DATE), Records.from_rows(rows, task="t", meta={}))
    assert pq.read_schema(path).field("phantom_logits").type == pa.list_(pa.float64())
    back = _read(path)
    assert [back[i]["phantom_logits"] for i in range(len(back))] == phantom
    assert back.phantom_logits.shape == (4, 3) and np.isnan(back.phantom_logits[1]).all()


def test_an_optional_field_is_type_checked_when_present(tmp_path, phantom_field):
    rows = _rows(optional={"phantom_logits": [[1.0]] * 4})
    table = Records.from_rows(rows, task="t", meta={}).to_table()
    i = table.column_names.index("phantom_logits")
    bad = table.set_column(i, "phantom_logits", pa.array([["x"]] * 4, pa.list_(pa.string())))
    path = tmp_path / f"records_t_{DATE}.parquet"
    pq.write_table(bad, path)
    with pytest.raises(RecordsError, match="field .phantom_logits. has type list<.*string>, not the records schema"):
        _read(path)


def test_make_records_refuses_a_field_that_is_not_optional():
    with pytest.raises(ValueError, match=r"\['phantom'\] are not optional records fields"):
        _rows(optional={"phantom": [[0.0]] * 4})


def test_a_file_without_a_required_field_is_still_refused(tmp_path):
    table = Records.from_rows(_rows(), task="t", meta={"method": "edl"}).to_table().drop_columns(["vacuity"])
    path = tmp_path / f"records_t_{DATE}.parquet"
    pq.write_table(table, path)
    with pytest.raises(RecordsError, match=r"lacks the fields \['vacuity'\]"):
        read_records_file(path)
