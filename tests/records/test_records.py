"""The records format: round trip, newest-run selection, atomic writes, bad files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lm_eval_evidential.records import (
    OPTIONAL_FIELDS,
    RECORD_FIELDS,
    Records,
    RecordsError,
    load_records,
    make_record,
    read_records_file,
    records_path,
    write_records,
)


def sample(task="obqa_edl", n=5, seed=0, method="edl", lam=1.0):
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        k = int(rng.integers(3, 6))
        z = rng.normal(size=k)
        alpha = None if method == "softmax" else (np.logaddexp(0, z) + lam).tolist()
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
    return Records.from_rows(rows, task=task, meta={"method": method, "prior_weight": lam})


def test_round_trip_keeps_every_field(tmp_path):
    rec = sample()
    path = write_records(records_path(tmp_path / "m", "obqa_edl", "2026-01-01T00-00-00.000001"), rec)
    back = load_records(tmp_path, "obqa_edl")
    assert back.path == path
    assert len(back) == len(rec)
    for a, b in zip(rec, back):
        assert set(b) == set(RECORD_FIELDS) | set(OPTIONAL_FIELDS)
        assert a == b
    assert back.alpha.dtype == np.float64 and np.isnan(back.alpha[back.k < back.k.max()][:, -1]).all()


def test_derived_fields_are_consistent():
    rec = sample(n=50, lam=0.7)
    np.testing.assert_allclose(rec.strength, np.nansum(rec.alpha, axis=1))
    np.testing.assert_allclose(rec.vacuity, 0.7 * rec.k / rec.strength)
    np.testing.assert_allclose(rec.max_prob, np.nanmax(rec.probs, axis=1))
    np.testing.assert_array_equal(rec.pred, np.nanargmax(rec.probs, axis=1))
    np.testing.assert_array_equal(rec.correct, rec.pred == rec.gold)


def test_softmax_records_have_no_evidence(tmp_path):
    rec = sample("t", method="softmax")
    write_records(records_path(tmp_path, "t", "2026-01-01T00-00-00.000001"), rec)
    back = load_records(tmp_path, "t")
    assert back[0]["alpha"] is None and back[0]["evidence"] is None and np.isnan(back.vacuity).all()


def test_newest_run_is_loaded_unless_one_is_named(tmp_path):
    old, new = "2026-01-01T00-00-00.000001", "2026-02-01T00-00-00.000001"
    write_records(records_path(tmp_path / "m", "t", old), sample("t", n=3))
    write_records(records_path(tmp_path / "m", "t", new), sample("t", n=7))
    assert len(load_records(tmp_path, "t")) == 7
    assert len(load_records(tmp_path, "t", run=old)) == 3
    with pytest.raises(FileNotFoundError, match="no run 'nope'"):
        load_records(tmp_path, "t", run="nope")
    with pytest.raises(FileNotFoundError, match="no records for task 'other'.*lm_eval --model evidential"):
        load_records(tmp_path, "other")


def test_results_json_path_is_accepted(tmp_path):
    write_records(records_path(tmp_path, "t", "2026-01-01T00-00-00.000001"), sample("t"))
    (tmp_path / "results.json").write_text("{}")
    assert len(load_records(tmp_path / "results.json", "t")) == 5


def test_truncated_and_corrupted_files_are_reported(tmp_path):
    path = write_records(records_path(tmp_path, "t", "2026-01-01T00-00-00.000001"), sample("t"))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(RecordsError, match="truncated or corrupted"):
        read_records_file(path)
    path.write_bytes(b"not parquet at all")
    with pytest.raises(RecordsError, match="truncated or corrupted"):
        read_records_file(path)


def test_other_schema_version_is_refused(tmp_path):
    import pyarrow.parquet as pq

    path = write_records(records_path(tmp_path, "t", "2026-01-01T00-00-00.000001"), sample("t"))
    table = pq.read_table(path)
    meta = json.loads(table.schema.metadata[b"lm_eval_evidential"])
    meta["schema_version"] = 99
    pq.write_table(table.replace_schema_metadata({b"lm_eval_evidential": json.dumps(meta).encode()}), path)
    with pytest.raises(RecordsError, match="schema version 99"):
        read_records_file(path)


def test_write_is_atomic_and_leaves_no_temp_file(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    target = records_path(tmp_path, "t", "2026-01-01T00-00-00.000001")
    write_records(target, sample("t", n=2))
    before = target.read_bytes()

    def crash(table, where):
        Path(where).write_bytes(b"partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(pq, "write_table", crash)
    with pytest.raises(KeyboardInterrupt):
        write_records(target, sample("t", n=9))
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


def test_duplicate_doc_ids_are_refused():
    rec = sample(n=2)
    rows = [rec[0], rec[0]]
    with pytest.raises(ValueError, match="doc_id 0 appears more than once"):
        Records.from_rows(rows, task="t")


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("logits", float("nan"), "non-finite logit nan"),
        ("logits", float("inf"), "non-finite logit inf"),
        ("alpha", float("inf"), "alpha inf is not finite"),
        ("alpha", 0.5, "alpha 0.5 is below the prior weight 1.0 .negative evidence."),
        ("gold", 7, "gold index 7 outside"),
    ],
)
def test_hand_made_records_with_impossible_values_are_refused(tmp_path, field, value, message):
    rec = sample(n=4)
    rows = list(rec)
    if field == "gold":
        rows[2]["gold"] = value
    else:
        rows[2][field] = [value, *rows[2][field][1:]]
    with pytest.raises(RecordsError, match=rf"row 2: {message}"):
        Records.from_rows(rows, task="t", meta=rec.meta)


def test_impossible_values_in_a_file_name_the_file(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = write_records(records_path(tmp_path, "t", "2026-01-01T00-00-00.000001"), sample("t", n=3))
    table = pq.read_table(path)
    vac = table.column("logits").to_pylist()
    vac[1][0] = float("nan")
    table = table.set_column(table.column_names.index("logits"), "logits", pa.array(vac, pa.list_(pa.float64())))
    pq.write_table(table, path)
    with pytest.raises(RecordsError, match=rf"{path.name}: row 1: non-finite logit nan"):
        load_records(tmp_path, "t")


def test_prior_weight_too_small_for_the_evidence_is_refused(tmp_path):
    """λ = 1e-300 with evidence 1e9: S/(λK) would overflow float64, so such records are refused
    when built and when read (a regression the loader fuzz found), never handed out with inf scores."""
    import pyarrow.parquet as pq

    from lm_eval_evidential.records.arrow import rows_to_table

    lam, z = 1e-300, np.array([1e9, 2e9, 3e9, 4e9])
    rows = [make_record(task="t", doc_id=0, labels="ABCD", gold=0, logits=z, alpha=z + lam, prior_weight=lam)]
    with pytest.raises(RecordsError, match="prior weight is too small"):
        Records.from_rows(rows, task="t", meta={"method": "edl", "prior_weight": lam})
    path = tmp_path / "records_t_2026-01-01T00-00-00.000000.parquet"
    pq.write_table(rows_to_table(rows, task="t", meta={"method": "edl", "prior_weight": lam}), path)
    with pytest.raises(RecordsError, match="prior weight is too small"):
        read_records_file(path)
    # The same evidence with the standard prior loads, and its reciprocal vacuity is finite.
    rows = [make_record(task="t", doc_id=0, labels="ABCD", gold=0, logits=z, alpha=z + 1.0, prior_weight=1.0)]
    ok = write_records(
        tmp_path / "records_t_2026-01-02T00-00-00.000000.parquet",
        Records.from_rows(rows, task="t", meta={"method": "edl", "prior_weight": 1.0}),
    )
    assert np.isfinite(1 / read_records_file(ok).vacuity).all()


# ---- the message when the records asked for are not there: its fix must be the right one


def _two_tasks(folder):
    date_id = "2026-01-01T00-00-00.000001"
    for task in ("obqa_edl", "csqa4_edl"):
        write_records(records_path(folder / "model", task, date_id), sample(task, n=3))


def test_a_mistyped_task_gets_the_nearest_recorded_names_not_a_rerun(tmp_path):
    from lm_eval_evidential.records import load_run

    _two_tasks(tmp_path)
    with pytest.raises(FileNotFoundError) as info:
        load_run(tmp_path, ["obqa_edl", "csqa4_ed"])
    message = str(info.value)
    assert "no records for task 'csqa4_ed'" in message and "did you mean 'csqa4_edl'?" in message
    assert "the tasks with records there: csqa4_edl, obqa_edl" in message
    assert "lm_eval" not in message  # re-running a task that does not exist fixes nothing


def test_a_task_not_evaluated_yet_lists_what_is_there_and_the_one_run_to_make(tmp_path):
    from lm_eval_evidential.records import load_run

    _two_tasks(tmp_path)
    with pytest.raises(FileNotFoundError) as info:
        load_run(tmp_path, ["obqa_edl", "mmlu_math_edl"])
    message = str(info.value)
    assert "the tasks with records there: csqa4_edl, obqa_edl" in message and "did you mean" not in message
    assert f"lm_eval --model evidential --tasks obqa_edl,mmlu_math_edl --output_path {tmp_path}" in message


def test_a_folder_without_records_says_so(tmp_path):
    from lm_eval_evidential.records import load_run

    (tmp_path / "results_x.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match=r"no records files \(records_<task>_<date_id>\.parquet\) under"):
        load_run(tmp_path, ["obqa_edl"])


def test_a_records_file_given_as_the_output_folder_names_the_folder_to_pass(tmp_path):
    from lm_eval_evidential.records import load_run

    _two_tasks(tmp_path)
    file = next((tmp_path / "model").glob("records_obqa_edl_*.parquet"))
    with pytest.raises(NotADirectoryError) as info:
        load_run(file, ["obqa_edl"])
    message = str(info.value)
    assert f"{file} is a records file, not a folder" in message and f"{file.parent}, works" in message
    assert "no records" not in message
    assert len(load_run(file.parent, ["obqa_edl"])["obqa_edl"]) == 3  # the folder it names does work


def _with_phantoms(n=6, seed=1):
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        k, p = int(rng.integers(3, 6)), int(rng.integers(0, 5))
        z = rng.normal(size=k)
        rows.append(
            make_record(
                task="t",
                doc_id=i,
                labels="ABCDE"[:k],
                gold=0,
                logits=z,
                alpha=(np.logaddexp(0, z) + 1.0).tolist(),
                optional={"phantom_logits": rng.normal(size=p).tolist()},
            )
        )
    return rows


def test_phantom_logits_round_trip(tmp_path):
    rows = _with_phantoms()
    rec = Records.from_rows(rows, task="t", meta={"method": "edl", "prior_weight": 1.0, "phantom_count": 4})
    write_records(records_path(tmp_path, "t", "2026-01-01T00-00-00.000001"), rec)
    back = load_records(tmp_path, "t")
    assert [r["phantom_logits"] for r in back] == [r["phantom_logits"] for r in rows]
    assert back.n_phantom.tolist() == [len(r["phantom_logits"]) for r in rows]
    assert back.phantom_logits.shape == (len(rows), max(len(r["phantom_logits"]) for r in rows))


def test_records_without_phantom_logits_still_load(tmp_path):
    """A file written before phantom logits existed (no such column) loads, with none."""
    import pyarrow.parquet as pq

    rec = sample()
    table = rec.to_table()
    assert "phantom_logits" not in table.column_names
    path = records_path(tmp_path, "obqa_edl", "2026-01-01T00-00-00.000001")
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    back = load_records(tmp_path, "obqa_edl")
    assert back.phantom_logits is None and not back.has_phantoms
    assert back[0]["phantom_logits"] is None and back.n_phantom.tolist() == [0] * len(rec)


def test_non_finite_phantom_logit_refused(tmp_path):
    import pyarrow.parquet as pq

    from lm_eval_evidential.records.arrow import rows_to_table

    rows = _with_phantoms()
    i = next(j for j, r in enumerate(rows) if r["phantom_logits"])
    rows[i]["phantom_logits"][0] = float("inf")
    path = records_path(tmp_path, "t", "2026-01-01T00-00-00.000001")
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(rows_to_table(rows, task="t", meta={"method": "edl", "prior_weight": 1.0}), path)
    with pytest.raises(RecordsError, match="non-finite phantom logit"):
        load_records(tmp_path, "t")
