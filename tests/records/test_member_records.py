"""Records of several members per question (``member_logits``): what the derived fields hold, the
round trip, the loader's identity checks, and the audits' scores on them."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy.special import softmax

from lm_eval_evidential.audits._common import record_scores
from lm_eval_evidential.metrics.scores import compute_score
from lm_eval_evidential.records import (
    Records,
    RecordsError,
    make_records,
    read_records_file,
    records_path,
    write_records,
)
from lm_eval_evidential.records.schema import META_KEY

DATE = "2026-01-01T00-00-00.000001"
KS = [4, 2, 5, 3, 4]
GOLD = [0, 1, 4, 2, 3]


def _members(m=3, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(scale=3.0, size=(m, k)) for k in KS]


def _rows(method, members, lam=1.0):
    return make_records(
        task="t",
        doc_ids=range(len(KS)),
        labels=[list("ABCDE"[:k]) for k in KS],
        gold=GOLD,
        logits=None,
        alpha=None,
        prior_weight=lam,
        optional={"member_logits": members},
        members_method=method,
    )


def _written(tmp_path, method, members, lam=1.0):
    rec = Records.from_rows(_rows(method, members, lam), task="t", meta={"method": method, "prior_weight": lam})
    return write_records(records_path(tmp_path, "t", DATE), rec)


def _oracle(z, method, lam):
    """p̄ and (EDL) the members' vacuities of one question, from the definitions (numpy/scipy)."""
    if method == "softmax":
        return softmax(z, axis=1).mean(axis=0), None
    alpha = np.logaddexp(0.0, z) + lam
    return (alpha / alpha.sum(axis=1, keepdims=True)).mean(axis=0), lam * z.shape[1] / alpha.sum(axis=1)


@pytest.mark.parametrize("method", ["softmax", "edl"])
@pytest.mark.parametrize("lam", [1.0, 0.5])
def test_round_trip_and_the_derived_fields_follow_the_predictive_distribution(tmp_path, method, lam):
    members = _members()
    rec = read_records_file(_written(tmp_path, method, members, lam))
    assert rec.has_members and rec.n_members == 3 and rec.member_logits.shape == (5, 3, 5)
    for i, z in enumerate(members):
        k = KS[i]
        mean, member_u = _oracle(z, method, lam)
        np.testing.assert_array_equal(rec.member_logits[i, :, :k], z)  # members in the order given
        assert np.isnan(rec.member_logits[i, :, k:]).all()
        assert rec[i]["member_logits"] == z.tolist()
        np.testing.assert_allclose(rec.probs[i, :k], mean, rtol=1e-12)
        np.testing.assert_allclose(softmax(rec.logits[i, :k]), mean, rtol=1e-12)  # logits = log p̄
        assert rec.pred[i] == np.argmax(mean) and rec.correct[i] == (np.argmax(mean) == GOLD[i])
        assert rec.max_prob[i] == pytest.approx(mean.max(), rel=1e-12)
        if method == "edl":
            assert rec.vacuity[i] == pytest.approx(member_u.mean(), rel=1e-12)
            np.testing.assert_allclose(rec.evidence[i, :k], rec.alpha[i, :k] - lam, rtol=1e-12)
            assert (rec.evidence[i, :k] >= -1e-12).all()
        else:
            assert rec[i]["alpha"] is None and np.isnan(rec.vacuity[i])


def test_log_mean_stays_finite_where_the_mean_underflows(tmp_path):
    members = [np.array([[900.0, 0.0, 0.0, 0.0], [0.0, 900.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])] + _members()[1:]
    rec = read_records_file(_written(tmp_path, "softmax", members))
    assert np.isfinite(rec.logits[0, :4]).all()
    np.testing.assert_allclose(rec.probs[0, :2], [1 / 3 + 1 / 12, 1 / 3 + 1 / 12])


def test_old_files_load_unchanged_without_members(tmp_path):
    rng = np.random.default_rng(1)
    z = [rng.normal(size=k) for k in KS]
    rows = make_records(
        task="t", doc_ids=range(5), labels=[list("ABCDE"[:k]) for k in KS], gold=GOLD, logits=z, alpha=None
    )
    path = write_records(
        records_path(tmp_path, "t", DATE), Records.from_rows(rows, task="t", meta={"method": "softmax"})
    )
    assert "member_logits" not in pq.read_schema(path).names  # files of one prediction per question stay as they were
    rec = read_records_file(path)
    assert not rec.has_members and rec.n_members == 1 and rec[0]["member_logits"] is None


def _edited(path, column, fn):
    table = pq.read_table(path)
    meta = table.schema.metadata
    values = fn(table.column(column).to_pylist())
    table = table.set_column(
        table.schema.get_field_index(column), column, pa.array(values, table.schema.field(column).type)
    )
    pq.write_table(table.replace_schema_metadata(meta), path)
    return path


@pytest.mark.parametrize(
    ("method", "column", "fn", "match"),
    [
        (
            "softmax",
            "logits",
            lambda v: [[x + 0.1 for x in v[0]], *v[1:]],
            "does not follow from the record's member_logits",
        ),
        (
            "edl",
            "alpha",
            lambda v: [[x * 1.01 for x in v[0]], *v[1:]],
            "does not follow from the record's alpha",  # its evidence no longer follows; both edited: below
        ),
        ("edl", "member_logits", lambda v: [[[x + 0.5 for x in r] for r in v[0]], *v[1:]], "does not follow"),
        ("softmax", "member_logits", lambda v: [v[0][:2], *v[1:]], "row 1 has 3 member_logits rows, row 0 has 2"),
        ("softmax", "member_logits", lambda v: [None, *v[1:]], "row 0 has no member_logits"),
        ("softmax", "member_logits", lambda v: [[r[:-1] for r in v[0]], *v[1:]], "member rows"),
        ("edl", "member_logits", lambda v: [[[float("inf")] + r[1:] for r in v[0]], *v[1:]], "non-finite member"),
    ],
)
def test_loader_identity_checks(tmp_path, method, column, fn, match):
    path = _edited(_written(tmp_path, method, _members()), column, fn)
    with pytest.raises(RecordsError, match=match):
        read_records_file(path)


def test_summary_alpha_checked_against_the_members(tmp_path):
    path = _written(tmp_path, "edl", _members())
    _edited(path, "alpha", lambda v: [[x * 1.01 for x in v[0]], *v[1:]])
    _edited(path, "evidence", lambda v: [[(x + 1.0) * 1.01 - 1.0 for x in v[0]], *v[1:]])
    with pytest.raises(RecordsError, match="stored alpha .* does not follow from the record's member_logits"):
        read_records_file(path)


def test_ib_edl_records_with_members_refused(tmp_path):
    path = _written(tmp_path, "edl", _members())
    table = pq.read_table(path)
    meta = table.schema.metadata[META_KEY].decode().replace('"method": "edl"', '"method": "ib_edl"')
    pq.write_table(table.replace_schema_metadata({META_KEY: meta.encode()}), path)
    with pytest.raises(RecordsError, match="method=ib_edl records with member_logits"):
        read_records_file(path)


def test_make_records_refusals():
    members = _members()
    labels = [list("ABCDE"[:k]) for k in KS]
    common = {"task": "t", "doc_ids": range(5), "labels": labels, "gold": GOLD}
    with pytest.raises(ValueError, match="pass logits=None and alpha=None"):
        make_records(
            **common,
            logits=[m[0] for m in members],
            alpha=None,
            optional={"member_logits": members},
            members_method="softmax",
        )
    with pytest.raises(ValueError, match="members_method must be one of softmax, edl"):
        make_records(**common, logits=None, alpha=None, optional={"member_logits": members}, members_method="ib_edl")
    with pytest.raises(ValueError, match="question 0 has 2 members, question 1 has 3|the same M"):
        make_records(
            **common,
            logits=None,
            alpha=None,
            optional={"member_logits": [members[0][:2], *members[1:]]},
            members_method="softmax",
        )
    with pytest.raises(ValueError, match="question 1 has no member_logits"):
        make_records(
            **common,
            logits=None,
            alpha=None,
            optional={"member_logits": [members[0], None, *members[2:]]},
            members_method="softmax",
        )


@pytest.mark.parametrize("method", ["softmax", "edl"])
def test_audit_scores_read_the_members(tmp_path, method):
    members = _members()
    rec = read_records_file(_written(tmp_path, method, members))
    got = record_scores(rec, ["neg_mutual_information", "neg_max_prob_variance", "max_prob"])
    for i, z in enumerate(members):
        one = z[None]
        for name, values in got.items():
            alpha = None if method == "softmax" else rec.alpha[i : i + 1, : KS[i]]
            want = compute_score(name, probs=None, k=np.array([KS[i]]), alpha=alpha, member_logits=one)[0]
            assert values[i] == pytest.approx(want, rel=1e-9, abs=1e-12), name
    with pytest.raises(ValueError, match="one model's answer logits"):
        record_scores(rec, ["neg_energy"])
