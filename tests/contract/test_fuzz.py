"""Property-based fuzzing of the records loader and of every metric on hostile input.

Two contracts, checked on random input that includes NaN, +-inf, negatives, huge and tiny
values, empty and one-class sets, duplicated doc_ids, missing columns and wrong types:

- ``read_records_file`` either returns Records whose numbers are usable (the invariants are
  listed in :func:`_check_loaded`) or raises a ValueError (normally ``RecordsError``) with a
  message; never another exception type.
- every metric either returns a finite value inside its documented range, or NaN together
  with an ``UndefinedMetricWarning`` saying why, or raises a ValueError with a message; never
  IndexError / ZeroDivisionError / FloatingPointError / TypeError, and never a numpy
  ``RuntimeWarning`` (they are turned into errors here, as ``pytest -W error`` would).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lm_eval_evidential.metrics._validation import UndefinedMetricWarning
from lm_eval_evidential.metrics.accuracy_estimation import atc
from lm_eval_evidential.metrics.calibration import adaptive_ece, ece
from lm_eval_evidential.metrics.detection import (
    aupr_in,
    aupr_out,
    auroc,
    delong_ci,
    fpr_at_95_tpr,
)
from lm_eval_evidential.metrics.scores import SCORES, compute_score
from lm_eval_evidential.metrics.selective import aurc, prr
from lm_eval_evidential.records import (
    META_KEY,
    OPTIONAL_FIELDS,
    RECORD_FIELDS,
    SCHEMA_VERSION,
    RecordsError,
    arrow_schema,
    read_records_file,
)

# FUZZ_EXAMPLES=5000 for a long hunt; the default keeps the file at a few seconds.
FUZZ = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "120")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

WEIRD = [math.nan, math.inf, -math.inf, 0.0, -0.0, -1.0, 1e308, -1e308, 5e-324, 1e-300, 1e300, 1e16]
weird_floats = st.one_of(
    st.floats(-40, 40, allow_nan=False),
    st.floats(-40, 40, allow_nan=False),  # ordinary values twice as often as the hostile ones
    st.sampled_from(WEIRD),
)


@contextmanager
def strict_numpy():
    """RuntimeWarnings (overflow, invalid value, divide by zero) raise; UndefinedMetricWarnings are recorded."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.simplefilter("error", RuntimeWarning)
        with np.errstate(divide="raise", over="raise", invalid="raise"):
            yield caught


def _undefined_warned(caught) -> bool:
    return any(issubclass(w.category, UndefinedMetricWarning) and str(w.message) for w in caught)


# ----------------------------------------------------------------------------- records loader

F64_LIST = pa.list_(pa.float64())
SCHEMA = {f.name: f.type for f in arrow_schema()}  # the writer's types, from the one records table

# (column, replacement type, converter of the python values): the "wrong types" of the fuzz.
RETYPES = {
    "k_as_float": ("k", pa.float64(), lambda v: [None if x is None else x + 0.5 for x in v]),
    "k_as_string": ("k", pa.string(), lambda v: [None if x is None else f"{x}" for x in v]),
    "doc_id_as_string": ("doc_id", pa.string(), lambda v: [f"doc{x}" for x in v]),
    "gold_as_float": ("gold", pa.float64(), lambda v: [None if x is None else x + 0.25 for x in v]),
    "gold_as_string": ("gold", pa.string(), lambda v: [f"{x}" for x in v]),
    "logits_as_strings": (
        "logits",
        pa.list_(pa.string()),
        lambda v: [None if x is None else [repr(y) for y in x] for x in v],
    ),
    "alpha_as_float": ("alpha", pa.float64(), lambda v: [None if x is None else (x[0] if x else None) for x in v]),
    "labels_as_ints": (
        "labels",
        pa.list_(pa.int64()),
        lambda v: [None if x is None else list(range(len(x))) for x in v],
    ),
    "strength_as_string": ("strength", pa.string(), lambda v: [repr(x) for x in v]),
    "correct_as_int": ("correct", pa.int64(), lambda v: [int(x) for x in v]),
    "correct_as_string": ("correct", pa.string(), lambda v: ["yes" if x else "no" for x in v]),
    "k_null": ("k", pa.int32(), lambda v: [None for _ in v]),
    "gold_null": ("gold", pa.int32(), lambda v: [None for _ in v]),
    "logits_null": ("logits", F64_LIST, lambda v: [None for _ in v]),
    "labels_null": ("labels", pa.list_(pa.string()), lambda v: [None for _ in v]),
    "vacuity_null": ("vacuity", pa.float64(), lambda v: [None for _ in v]),
}


def _softplus(z: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.logaddexp(0.0, z)


def _derived(z, a, method, lam, gold):
    """The fields make_record would store (computed leniently: inputs may be hostile)."""
    with np.errstate(all="ignore"):
        if method == "softmax" or a is None:
            e = np.exp(z - np.max(z)) if z.size else z
            p = e / e.sum() if z.size else z
            strength = vacuity = math.nan
        else:
            strength = float(np.sum(a))
            p = a / strength
            vacuity = float(np.float64(lam) * len(a) / np.float64(strength))
        pred = int(np.nanargmax(p)) if p.size and not np.isnan(p).all() else 0
        max_prob = float(p[pred]) if p.size else math.nan
    return {"strength": strength, "vacuity": vacuity, "max_prob": max_prob, "pred": pred, "correct": pred == gold}


ALL_FAULTS = ("weird_logits", "weird_alpha", "bad_gold", "bad_derived", "bad_length", "dup_doc", "weird_lambda")
ANY_FAULTS = st.sets(st.sampled_from(ALL_FAULTS), max_size=3)


@st.composite
def record_tables(draw, faults=ANY_FAULTS, retypes=True):
    """A records table spec: well-formed rows plus up to three kinds of damage.

    Damage (each drawn per table, so a third of the tables are clean): hostile logit values
    (NaN, +-inf, +-1e308, subnormals), a row whose alpha is arbitrary (maybe < lambda, 0,
    negative, non-finite), a gold index outside 0..K-1, a row whose stored strength/vacuity/
    max_prob/pred/correct disagree with its alpha, a labels list whose length is not K, a
    duplicated doc_id, a hostile prior weight; then a bad metadata blob, a dropped column or
    a column of the wrong type (see ``RETYPES``).
    """
    n = draw(st.integers(0, 6))
    faults = draw(faults)
    method = draw(st.sampled_from(["edl", "edl", "ib_edl", "softmax"]))
    lam = (
        draw(st.sampled_from([0.0, -1.0, math.nan, math.inf, 1e-300, "abc", None]))
        if "weird_lambda" in faults
        else draw(st.sampled_from([1.0, 1.0, 0.5, 2.0]))
    )
    lam_num = lam if isinstance(lam, float) and math.isfinite(lam) and lam > 0 else 1.0
    values = weird_floats if "weird_logits" in faults else st.floats(-40, 40)
    victim = draw(st.integers(0, max(n - 1, 0)))  # the row that gets the per-row damage
    rows = []
    for i in range(n):
        k = draw(st.integers(1, 6))
        z = np.array(draw(st.lists(values, min_size=k, max_size=k)), dtype=np.float64)
        gold = draw(st.integers(-1, 6) if "bad_gold" in faults and i == victim else st.integers(0, k - 1))
        if method == "softmax":
            a = None
        elif "weird_alpha" in faults and i == victim:
            a = np.array(draw(st.lists(weird_floats, min_size=k, max_size=k)), dtype=np.float64)
        else:
            a = _softplus(z) + lam_num  # what the model produces (inf for an inf logit)
        d = _derived(z, a, method, lam_num, gold)
        if "bad_derived" in faults and i == victim:
            d["strength"], d["vacuity"], d["max_prob"] = (draw(weird_floats) for _ in range(3))
            d["pred"] = draw(st.integers(-1, 6))
            d["correct"] = draw(st.booleans())
        labels = list("ABCDEF"[:k])
        if "bad_length" in faults and i == victim:
            labels = labels[:-1] if draw(st.booleans()) else [*labels, "G"]
        rows.append(
            {
                "task": "t",
                "doc_id": i,
                "k": k,
                "labels": labels,
                "gold": gold,
                "logits": z.tolist(),
                "evidence": None if a is None else (a - lam_num).tolist(),
                "alpha": None if a is None else a.tolist(),
                **d,
            }
        )
    if n >= 2 and "dup_doc" in faults:
        rows[-1]["doc_id"] = rows[0]["doc_id"]
    meta = {"schema_version": SCHEMA_VERSION, "task": "t", "method": method}
    if lam is not None:
        meta["prior_weight"] = lam
    if not retypes:
        return rows, meta, "ok", draw(st.sampled_from([[], [], ["k_as_float"], ["gold_as_float"]])), "task"
    meta_kind = draw(st.sampled_from(["ok"] * 15 + ["missing", "bad_json", "json_list", "version_2", "no_task"]))
    damage = (
        draw(st.lists(st.sampled_from(["drop", *sorted(RETYPES)]), max_size=2)) if draw(st.integers(0, 3)) == 0 else []
    )
    drop = draw(st.sampled_from(RECORD_FIELDS))
    return rows, meta, meta_kind, damage, drop


def _build_table(rows, meta, meta_kind, damage, drop) -> pa.Table:
    columns = {name: [r[name] for r in rows] for name in RECORD_FIELDS}
    types = dict(SCHEMA)
    for d in damage:
        if d == "drop":
            columns.pop(drop, None)
        elif d in RETYPES:
            col, typ, conv = RETYPES[d]
            if col in columns and types[col] == SCHEMA[col]:  # one retype per column
                columns[col], types[col] = conv(columns[col]), typ
    table = pa.table({name: pa.array(v, type=types[name]) for name, v in columns.items()})
    raw = {
        "ok": json.dumps(meta).encode(),
        "missing": None,
        "bad_json": b"{not json",
        "json_list": b"[1, 2, 3]",
        "version_2": json.dumps({**meta, "schema_version": 2}).encode(),
        "no_task": json.dumps({k: v for k, v in meta.items() if k != "task"}).encode(),
    }[meta_kind]
    return table.replace_schema_metadata(None if raw is None else {META_KEY: raw})


def _load(spec):
    """(table, Records or the exception raised, path): the table is written as Parquet, then read back."""
    table = _build_table(*spec)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "records_t_2026-01-01T00-00-00.000001.parquet"
        pq.write_table(table, path)
        try:
            with strict_numpy():
                return table, read_records_file(path), path
        except Exception as exc:  # noqa: BLE001 - classified by the tests
            return table, exc, path


def _check_loaded(rec, table) -> None:
    """What every successfully loaded Records must satisfy so that no audit sees an unusable number.

    - one entry per table row, every per-row view has exactly ``RECORD_FIELDS``;
    - ``k >= 1``; ``0 <= gold < k``; logits finite in each row's first k columns, NaN beyond;
    - evidential records: alpha finite and ``>= lambda`` (evidence >= 0, up to 1e-12 relative);
      recomputed from alpha, ``S = sum(alpha)`` is finite and ``>= lambda K``, so vacuity
      ``lambda K / S`` lies in ``(0, 1]`` and ``E[p] = alpha / S`` is a probability vector;
    - ``Records.probs`` (what calibration uses) is a probability vector on the first k columns;
    - every score the records can give is finite for every example.
    """
    n = table.num_rows
    assert len(rec) == n and rec.k.shape == (n,) and rec.logits.shape[0] == n
    assert all(set(rec[i]) == set(RECORD_FIELDS) | set(OPTIONAL_FIELDS) for i in range(n))
    if n == 0:
        return
    k = rec.k
    assert (k >= 1).all()
    real = np.arange(rec.logits.shape[1]) < k[:, None]
    assert np.isfinite(rec.logits[real]).all() and np.isnan(rec.logits[~real]).all()
    assert ((rec.gold >= 0) & (rec.gold < k)).all()
    names = [s for s, spec in SCORES.items() if (rec.has_alpha or not spec.needs_alpha) and not spec.needs_members]
    if (k < 2).any():
        names.remove("neg_norm_entropy")
    if rec.has_alpha:
        lam = rec.prior_weight
        assert math.isfinite(lam) and lam > 0
        a = rec.alpha
        assert np.isfinite(a[real]).all() and np.isnan(a[~real]).all()
        assert (a[real] >= lam * (1 - 1e-12)).all()
        with np.errstate(over="ignore"):
            s = np.nansum(a, axis=1)
        assert np.isfinite(s).all(), f"strength overflows: alpha rows {a[~np.isfinite(s)].tolist()}"
        u = lam * k / s
        assert ((u > 0) & (u <= 1 + 1e-9)).all()
    with strict_numpy():
        probs = rec.probs
        for name in names:
            v = compute_score(
                name,
                probs=None if rec.has_alpha else probs,
                k=k,
                alpha=rec.alpha if rec.has_alpha else None,
                prior_weight=rec.prior_weight,
                logits=rec.logits,
            )
            assert v.shape == (n,) and np.isfinite(v).all(), (name, v)
    assert np.isfinite(probs[real]).all() and (probs[real] >= 0).all() and (probs[real] <= 1 + 1e-12).all()
    assert np.allclose(np.nansum(probs, axis=1), 1.0, atol=1e-9)


@FUZZ
@given(record_tables())
def test_loader_returns_usable_records_or_raises_value_error(spec):
    table, got, _ = _load(spec)
    if isinstance(got, Exception):
        assert isinstance(got, ValueError), f"{type(got).__name__}: {got}"  # RecordsError is a ValueError
        assert str(got).strip(), f"{type(got).__name__} without a message"
        return
    _check_loaded(got, table)


@FUZZ
@given(record_tables())
def test_loader_errors_are_records_errors_naming_the_file(spec):
    """A bad file is reported as RecordsError with its path (the CLI prints only the message)."""
    _, got, path = _load(spec)
    if isinstance(got, Exception):
        assert isinstance(got, RecordsError), f"{type(got).__name__}: {got}"
        assert str(path) in str(got)


@FUZZ
@given(
    record_tables(
        faults=st.sampled_from([set(), {"bad_derived"}, {"dup_doc"}, {"bad_derived", "dup_doc"}]), retypes=False
    )
)
def test_loaded_records_are_self_consistent(spec):
    """Stored derived fields agree with the logits/alpha they derive from; doc_ids are unique; k is read exactly.

    A file with a mixed-up row (strength, vacuity, max_prob, pred or correct that do not
    follow from its alpha, a duplicated doc_id, a fractional k) must be refused or repaired on
    load, otherwise calibration (which reads max_prob and correct) reports numbers for rows
    that never existed.
    """
    table, rec, _ = _load(spec)
    if isinstance(rec, Exception) or len(rec) == 0:
        return  # refusing is fine here; which exception it is, is the first test's business
    written_k = [None if x is None else float(x) for x in table.column("k").to_pylist()]
    assert written_k == rec.k.astype(float).tolist(), "k was not read exactly as written"
    written_gold = [None if x is None else float(x) for x in table.column("gold").to_pylist()]
    assert written_gold == rec.gold.astype(float).tolist(), "gold was not read exactly as written"
    assert np.unique(rec.doc_id).size == len(rec), f"duplicated doc_ids {rec.doc_id.tolist()}"
    k = rec.k
    real = np.arange(rec.logits.shape[1]) < k[:, None]
    if rec.has_alpha:
        s = np.nansum(rec.alpha, axis=1)
        np.testing.assert_allclose(rec.strength, s, rtol=1e-9, err_msg="stored strength != sum(alpha)")
        np.testing.assert_allclose(
            rec.vacuity, rec.prior_weight * k / s, rtol=1e-9, err_msg="stored vacuity != lambda K / S"
        )
        p = rec.alpha / s[:, None]
    else:
        z = rec.logits - np.nanmax(rec.logits, axis=1, keepdims=True)
        p = np.exp(z) / np.nansum(np.exp(z), axis=1, keepdims=True)
    p = np.where(real, p, -np.inf)
    np.testing.assert_allclose(rec.max_prob, p.max(axis=1), rtol=1e-9, err_msg="stored max_prob != max E[p]")
    assert ((rec.pred >= 0) & (rec.pred < k)).all(), f"pred {rec.pred.tolist()} outside 0..K-1"
    np.testing.assert_allclose(
        p[np.arange(len(rec)), rec.pred], p.max(axis=1), rtol=1e-12, err_msg="pred != argmax E[p]"
    )
    assert (rec.correct == (rec.pred == rec.gold)).all(), "stored correct != (pred == gold)"


# ----------------------------------------------------------------------------- metrics


@st.composite
def labelled_scores(draw):
    """(y, score): usually equal length 0/1 labels and scores; sometimes ragged, non-binary or 2-D."""
    n = draw(st.integers(0, 25))
    kind = draw(st.sampled_from(["01"] * 5 + ["bool", "all1", "all0", "bad_label"]))
    if kind == "all1":
        y = [1] * n
    elif kind == "all0":
        y = [0] * n
    else:
        y = draw(st.lists(st.sampled_from([0, 1]), min_size=n, max_size=n))
        if kind == "bad_label" and n:
            y[draw(st.integers(0, n - 1))] = draw(st.sampled_from([2, -1, 0.5]))
    y = np.array(y, dtype=bool) if kind == "bool" else np.array(y)
    values = draw(
        st.sampled_from(
            [
                st.floats(0, 1),
                st.sampled_from([0.0, 0.5, 1.0]),
                st.floats(-1e300, 1e300),
                st.sampled_from([5e-324, 1e-300, 0.0, 1.0]),
            ]
        )
    )  # plain, heavily tied, huge-range, and subnormal scores
    m = n if draw(st.integers(0, 9)) else draw(st.integers(0, 25))
    s = np.array(draw(st.lists(values, min_size=m, max_size=m)), dtype=np.float64)
    if m and draw(st.integers(0, 3)) == 0:  # one hostile value
        s[draw(st.integers(0, m - 1))] = draw(st.sampled_from(WEIRD))
    if draw(st.integers(0, 19)) == 0:
        s = s.reshape(1, -1)
    return y, s


def _classify(fn, *args, **kwargs):
    """Run a metric under strict numpy; return ("ok", value), ("nan", None) or ("error", message)."""
    try:
        with strict_numpy() as caught:
            value = fn(*args, **kwargs)
    except ValueError as exc:
        assert str(exc).strip(), f"{fn.__name__} raised a ValueError without a message"
        return "error", str(exc)
    values = value if isinstance(value, tuple) else (value,)
    assert all(isinstance(v, float) for v in values), f"{fn.__name__} returned {value!r}"
    if any(math.isnan(v) for v in values):
        assert _undefined_warned(caught), f"{fn.__name__} returned NaN without an UndefinedMetricWarning: {value}"
    return "ok", value


def _in(v: float, lo: float, hi: float) -> bool:
    return math.isnan(v) or lo - 1e-12 <= v <= hi + 1e-12


@FUZZ
@given(labelled_scores())
def test_detection_metrics_are_bounded_nan_with_reason_or_value_errors(data):
    y, s = data
    for fn in (auroc, aupr_in, aupr_out, fpr_at_95_tpr):
        status, v = _classify(fn, y, s)
        if status == "ok":
            assert _in(v, 0.0, 1.0), (fn.__name__, v)
    status, v = _classify(delong_ci, y, s)
    if status == "ok":
        auc, lo, hi = v
        assert _in(auc, 0, 1) and _in(lo, 0, 1) and _in(hi, 0, 1)
        assert math.isnan(lo) or lo <= auc + 1e-12 <= hi + 2e-12
    # A well-formed input with both classes must give a number, not an error or NaN.
    if y.ndim == s.ndim == 1 and y.size == s.size and np.isfinite(s).all() and np.isin(y, (0, 1)).all():
        yb = y.astype(bool)
        if yb.any() and (~yb).any():
            assert not math.isnan(_classify(auroc, y, s)[1])


@FUZZ
@given(labelled_scores(), st.sampled_from([0.5, 0.75, 1.0]), st.integers(1, 20))
def test_selective_and_calibration_metrics_are_bounded_nan_with_reason_or_value_errors(data, cap, n_bins):
    score, correct = data[1], data[0]  # y plays "correct", s plays the confidence / score
    for fn, lo, hi in ((ece, 0, 1), (adaptive_ece, 0, 1)):
        status, v = _classify(fn, score, correct, n_bins)
        if status == "ok":
            assert _in(v, lo, hi), (fn.__name__, v)
    status, v = _classify(prr, score, correct, cap)
    if status == "ok":
        assert math.isnan(v) or v <= 1 + 1e-9, v
    status, v = _classify(aurc, score, correct)
    if status == "ok":
        assert _in(v, 0, 1), v
    half = score.shape[-1] // 2
    if score.ndim == 1:
        status, v = _classify(atc, score[:half], correct[:half], score[half:])
        if status == "ok":
            assert _in(v, 0, 1), v


@st.composite
def padded_batches(draw):
    """(name, probs, k, alpha, prior_weight) for compute_score: valid batches with hostile variations."""
    n = draw(st.integers(0, 6))
    ks = draw(st.lists(st.integers(1, 6), min_size=n, max_size=n))
    width = max(ks, default=draw(st.integers(0, 3)))
    alpha = np.full((n, width), np.nan)
    mode = draw(st.sampled_from(["ordinary", "ordinary", "weird", "tiny_huge"]))
    for i, k in enumerate(ks):
        if mode == "ordinary":
            vals = draw(st.lists(st.floats(1e-3, 1e3), min_size=k, max_size=k))
        elif mode == "tiny_huge":
            vals = draw(
                st.lists(st.sampled_from([5e-324, 1e-300, 1e-12, 1.0, 1e12, 1e300, 1e307]), min_size=k, max_size=k)
            )
        else:
            vals = draw(st.lists(weird_floats, min_size=k, max_size=k))
        alpha[i, :k] = vals
    if n and draw(st.integers(0, 9)) == 0:  # a NaN inside a row: not padding
        alpha[draw(st.integers(0, n - 1)), 0] = np.nan
    k = np.array(ks, dtype=np.int64)
    if n and draw(st.integers(0, 9)) == 0:
        k = k + draw(st.sampled_from([1, -1]))
    with np.errstate(all="ignore"):
        probs = alpha / np.nansum(alpha, axis=1, keepdims=True) if n else alpha
    use = draw(st.sampled_from(["alpha", "probs", "both"]))
    lam = draw(st.sampled_from([1.0, 1.0, 0.5, 0.0, -1.0, math.nan, math.inf]))
    name = draw(st.sampled_from(sorted(SCORES)))
    return name, (None if use == "alpha" else probs), k, (None if use == "probs" else alpha), lam


# Range of each score on a probability vector over K classes (alpha scores: alpha > 0 only).
def _score_bounds(name, k):
    kf = k.astype(np.float64)
    return {
        "max_prob": (1 / kf, 1.0),
        "neg_entropy": (-np.log(kf), 0.0),
        "neg_norm_entropy": (-1.0, 0.0),
        "l2_norm": (1 / np.sqrt(kf), 1.0),
        "l1_to_uniform": (0.0, 2 * (1 - 1 / kf)),
        "l2_to_uniform": (0.0, np.sqrt(1 - 1 / kf)),
        "js_to_uniform": (0.0, np.log(2)),
        "reciprocal_vacuity": (0.0, np.inf),
        "strength": (0.0, np.inf),
        "neg_expected_entropy": (-np.inf, 0.0),
        "neg_mutual_information": (-np.inf, 0.0),
    }[name]


@FUZZ
@given(padded_batches())
# Regressions the fuzz found: huge alpha overflowed alpha * psi(alpha + 1), subnormal alpha lost
# its digits there (mutual information 0.42 for K = 1), an alpha sum above the float64 range,
# zero examples (IndexError in the row max), and a tolerated -1e-308 probability (entropy inf).
@example(("neg_expected_entropy", None, np.array([1, 2]), np.array([[1e307, np.nan], [1e307, 5e-324]]), 1.0))
@example(
    (
        "neg_mutual_information",
        None,
        np.array([1, 4]),
        np.array([[5e-324] * 4, [5e-324] * 4]) * [[1, np.nan, np.nan, np.nan], [1, 1, 1, 1]],
        1.0,
    )
)
@example(("strength", None, np.array([2]), np.array([[1e308, 1e308]]), 1.0))
@example(("max_prob", None, np.zeros(0, dtype=np.int64), np.zeros((0, 0)), 1.0))
@example(("js_to_uniform", np.array([[-1e-308, 1.0]]), np.array([2]), None, 1.0))
def test_compute_score_is_finite_and_in_range_or_raises_value_error(batch):
    name, probs, k, alpha, lam = batch
    try:
        with strict_numpy():
            v = compute_score(name, probs=probs, k=k, alpha=alpha, prior_weight=lam)
    except ValueError as exc:
        assert str(exc).strip()
        return
    assert isinstance(v, np.ndarray) and v.shape == k.shape
    assert np.isfinite(v).all(), f"{name}: non-finite scores {v.tolist()} for alpha {alpha} probs {probs}"
    lo, hi = _score_bounds(name, k)
    # Given probs may be off the simplex by the rounding compute_score tolerates (1e-6 per value).
    tol = (1e-9 if probs is None else 1e-5) * np.maximum(1.0, np.abs(v))
    assert (v >= lo - tol).all() and (v <= hi + tol).all(), (name, v.tolist(), lo, hi)


@pytest.mark.parametrize("name", sorted(SCORES))
def test_compute_score_on_zero_examples_is_empty(name):
    """0 examples (shape (0, 0) or (0, K)) give an empty score array, not an IndexError."""
    for width in (0, 4):
        with strict_numpy():
            v = (
                compute_score(
                    name,
                    probs=None,
                    k=np.zeros(0, dtype=np.int64),
                    alpha=np.zeros((0, width)),
                    logits=np.zeros((0, width)),
                )
                if not SCORES[name].needs_members
                else compute_score(
                    name, probs=None, k=np.zeros(0, dtype=np.int64), alpha=None, member_logits=np.zeros((0, 2, width))
                )
            )
        assert v.shape == (0,)
        if not (SCORES[name].needs_alpha or SCORES[name].needs_logits or SCORES[name].needs_members):
            with strict_numpy():
                v = compute_score(name, probs=np.zeros((0, width)), k=np.zeros(0, dtype=np.int64))
            assert v.shape == (0,)
