"""The optional ``order`` column of a permuted run: written, read back as ints, and checked when loaded.

Oracles: the rows written by hand; every refusal is one file edited in one way (a non-permutation, a
(question, order) twice, the orders of a question disagreeing on its gold option or its K, a row
without an order).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lm_eval_evidential.records import (
    Records,
    RecordsError,
    make_records,
    read_records_file,
    records_path,
    write_records,
)

DATE = "2026-01-01T00-00-00.000001"
META = {"method": "edl", "prior_weight": 1.0}


def _cyclic_rows(golds=(2, 0), ks=(3, 4), seed=0):
    """Every cyclic shift of each question; the gold follows its option."""
    rng = np.random.default_rng(seed)
    doc_ids, labels, gold, logits, orders = [], [], [], [], []
    for q, (g, k) in enumerate(zip(golds, ks)):
        for s in range(k):
            order = [(j + s) % k for j in range(k)]
            doc_ids.append(q)
            labels.append(list("ABCD"[:k]))
            gold.append(order.index(g))
            logits.append(rng.normal(size=k))
            orders.append(order)
    rows = make_records(
        task="t",
        doc_ids=doc_ids,
        labels=labels,
        gold=gold,
        logits=logits,
        alpha=[np.logaddexp(0, z) + 1.0 for z in logits],
        optional={"order": orders},
    )
    return rows, orders


def _write_table(table, tmp_path):
    path = tmp_path / f"records_t_{DATE}.parquet"
    pq.write_table(table, path)
    return path


def test_orders_round_trip_as_ints_with_the_identity_first(tmp_path):
    rows, orders = _cyclic_rows()
    rec = Records.from_rows(rows, task="t", meta=META)
    path = write_records(records_path(tmp_path, "t", DATE), rec)
    assert pq.read_schema(path).field("order").type == pa.list_(pa.int32())
    back = read_records_file(path)
    assert back.order.dtype == np.int64 and back.order.shape == (7, 4)
    assert back.order[0].tolist() == [0, 1, 2, -1]  # -1 pads a 3-option question
    got = [back[i]["order"] for i in range(len(back))]
    assert got == sorted(orders, key=lambda o: (len(o), o)) and all(type(x) is int for o in got for x in o)
    assert [back.order_of(i) for i in (0, 3)] == [[0, 1, 2], [0, 1, 2, 3]]
    assert list(back.doc_id) == [0, 0, 0, 1, 1, 1, 1]
    # the gold follows its option: order[gold] is the same option in every order of a question
    assert {back.order_of(i)[back.gold[i]] for i in range(3)} == {2}


def test_an_unpermuted_file_has_no_order_column_and_reads_the_identity(tmp_path):
    rows, _ = _cyclic_rows()
    plain = [{**r, "order": None} for r in rows if r["order"] == list(range(r["k"]))]
    rec = Records.from_rows(plain, task="t", meta=META)
    path = write_records(records_path(tmp_path, "t", DATE), rec)
    assert "order" not in pq.read_schema(path).names
    back = read_records_file(path)
    assert back.order is None and back[0]["order"] is None and back.order_of(1) == [0, 1, 2, 3]


def _edited(tmp_path, edit):
    rows, _ = _cyclic_rows()
    table = Records.from_rows(rows, task="t", meta=META).to_table()
    column = table.column("order").to_pylist()
    gold = table.column("gold").to_pylist()
    edit(column, gold)
    table = table.set_column(table.column_names.index("order"), "order", pa.array(column, pa.list_(pa.int32())))
    table = table.set_column(table.column_names.index("gold"), "gold", pa.array(gold, pa.int32()))
    return _write_table(table, tmp_path)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda o, g: o.__setitem__(1, [1, 1, 0]), r"row 1: order \[1, 1, 0\] is not a permutation"),
        (lambda o, g: o.__setitem__(1, [0, 1, 2]), r"doc_id 0 in order \[0, 1, 2\] appears more than once"),
        (lambda o, g: o.__setitem__(1, [1, 0, 2]), r"doc_id 0: its orders disagree on the gold option"),
        (lambda o, g: o.__setitem__(2, None), r"field 'order' is missing in some rows"),
    ],
)
def test_a_broken_order_is_refused_with_the_row(tmp_path, edit, message):
    # an edit that leaves `correct` consistent: only the order (and so the gold option it implies) changes
    with pytest.raises(RecordsError, match=message):
        read_records_file(_edited(tmp_path, edit))


def test_orders_of_one_question_must_agree_on_k():
    first, _ = _cyclic_rows(golds=(2,), ks=(3,))
    other, _ = _cyclic_rows(golds=(1,), ks=(4,))
    with pytest.raises(RecordsError, match="doc_id 0: its orders disagree on the K"):
        Records.from_rows(first + other, task="t", meta=META)


def test_a_record_written_twice_is_refused_when_written():
    rows, _ = _cyclic_rows()
    with pytest.raises(ValueError, match=r"doc_id 0 in order \[1, 2, 0\] appears more than once"):
        Records.from_rows(rows + [rows[1]], task="t", meta=META)
