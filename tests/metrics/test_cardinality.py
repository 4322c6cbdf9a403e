"""K audit: cardinality policies, their error message, and the K sweep (McNamara 2026, Table 1)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lm_eval_evidential.metrics import cardinality as KA
from lm_eval_evidential.metrics import dirichlet as D
from lm_eval_evidential.metrics.detection import aupr_in, auroc
from lm_eval_evidential.metrics.scores import OOD_DEFAULT_SCORES, compute_score

SETTINGS = settings(max_examples=40, deadline=None)

OBQA = np.full(500, 4)
ARC_C = np.r_[np.full(4, 3), np.full(1165, 4), np.full(3, 5)]
ROW_KEYS = [
    "condition",
    "extra",
    "k_id",
    "k_ood",
    "score",
    "auroc",
    "aupr_in",
    "delta_auroc",
    "delta_aupr",
    "phantom",
    "phantom_evidence_id",
    "phantom_evidence_ood",
    "invariant_evidence_id",
    "invariant_evidence_ood",
]


# ---------------------------------------------------------------- check_cardinality


def test_k_histogram():
    assert KA.k_histogram(ARC_C) == {3: 4, 4: 1165, 5: 3}
    assert all(type(k) is int and type(v) is int for k, v in KA.k_histogram(ARC_C).items())


def test_assert_policy_error_message():
    with pytest.raises(KA.CardinalityMismatchError) as err:
        KA.check_cardinality(OBQA, ARC_C, id_name="obqa_edl", ood_name="arc_c_edl")
    msg = str(err.value)
    assert "obqa_edl {4: 500} vs arc_c_edl {3: 4, 4: 1165, 5: 3}" in msg
    # ARC has K = 4 questions: restrict helps, and the count it would keep is given.
    for remedy in (
        "k_policy=restrict compares only the 1165 of 1172 arc_c_edl questions with K = 4",
        "k_policy=report",
        "matched: false",
    ):
        assert remedy in msg
    assert "control task" not in msg  # a control is for a set without K = 4 questions, not for ARC
    assert msg.count("Proposition 1") == 1
    assert isinstance(err.value, ValueError)
    e = err.value
    assert (e.policy, e.hist_id, e.hist_ood) == ("assert", {4: 500}, {3: 4, 4: 1165, 5: 3})
    assert str(e) == f"{e.summary}. {KA.MISMATCH_REASON} {e.remedy()}"
    # Where the OOD task has shipped controls, the remedy names them next to restrict.
    assert "; or compare with its K-matched control arc_c_k4_edl;" in e.remedy(["arc_c_k4_edl"])


@pytest.mark.parametrize("policy", ["assert", "restrict"])
def test_refusal_without_questions_of_the_id_k_names_a_control_not_restrict(policy):
    with pytest.raises(KA.CardinalityMismatchError) as err:
        KA.check_cardinality(
            OBQA,
            np.full(9, 5),
            policy=policy,
            id_name="obqa_edl",
            ood_name="csqa_edl",
            controls=["csqa4_edl", "csqa_k4_edl"],
        )
    remedy = err.value.remedy()
    assert "restrict" not in remedy  # it would leave nothing
    assert "no csqa_edl question has K = 4, so compare obqa_edl with csqa4_edl or csqa_k4_edl instead" in remedy
    assert "k_policy=report" in remedy and remedy in str(err.value)
    with pytest.raises(KA.CardinalityMismatchError) as err:
        KA.check_cardinality(OBQA, np.full(9, 5), policy=policy, ood_name="other")
    assert "with a K-matched control task (questions with K = 4) instead" in err.value.remedy()


def test_refusal_of_a_mixed_id_side_never_suggests_restrict():
    with pytest.raises(KA.CardinalityMismatchError) as err:
        KA.check_cardinality(ARC_C, OBQA, policy="restrict", id_name="arc_c_edl")
    assert "k_policy=restrict compares" not in err.value.remedy()
    assert "arc_c_edl mixes several K" in err.value.remedy()


def test_assert_policy_passes_when_matched():
    c = KA.check_cardinality(OBQA, np.full(7, 4))
    assert c.matched and c.k_id == c.k_ood == 4 and c.policy == "assert"
    assert c.keep_id.all() and c.keep_ood.all() and c.n_dropped_id == c.n_dropped_ood == 0
    with pytest.raises(KA.CardinalityMismatchError, match=r"ID \{4: 500\} vs OOD \{5: 2\}"):
        KA.check_cardinality(OBQA, np.full(2, 5))  # single K per side, but different


def test_restrict_policy_drops_off_k_examples():
    c = KA.check_cardinality(OBQA, ARC_C, policy="restrict")
    assert c.matched and c.k_id == c.k_ood == 4
    assert c.n_dropped_id == 0 and c.n_dropped_ood == 7 and c.keep_ood.sum() == 1165
    assert (ARC_C[c.keep_ood] == 4).all() and c.keep_id.all()
    with pytest.raises(KA.CardinalityMismatchError, match=r"ID side is mixed.*\{3: 4, 4: 1165, 5: 3\} vs"):
        KA.check_cardinality(ARC_C, OBQA, policy="restrict")
    with pytest.raises(KA.CardinalityMismatchError, match="left no OOD examples with K = 4"):
        KA.check_cardinality(OBQA, np.full(3, 5), policy="restrict")


def test_report_policy_keeps_everything():
    c = KA.check_cardinality(OBQA, ARC_C, policy="report")
    assert not c.matched and c.k_id == 4 and c.k_ood is None
    assert c.keep_id.all() and c.keep_ood.all() and c.n_dropped_ood == 0
    assert KA.check_cardinality(OBQA, OBQA[:3], policy="report").matched


def test_policy_and_input_validation():
    assert KA.POLICIES == ("assert", "restrict", "report")
    with pytest.raises(ValueError, match="unknown k_policy 'ignore'.*assert, restrict, report"):
        KA.check_cardinality(OBQA, OBQA, policy="ignore")
    with pytest.raises(ValueError, match="no examples"):
        KA.check_cardinality(OBQA, np.array([], dtype=int))
    with pytest.raises(ValueError, match=">= 1"):
        KA.check_cardinality(OBQA, np.array([4, 0]))
    with pytest.raises(ValueError, match="integer"):
        KA.check_cardinality(OBQA, np.array([4.0, 4.0]))


# ---------------------------------------------------------------- ksweep


def synthetic_alphas(seed=0, n_id=400, n_ood=600, k=4):
    rng = np.random.default_rng(seed)
    return D.edl_alpha(rng.normal(0.6, 2, (n_id, k))), D.edl_alpha(rng.normal(0.3, 2, (n_ood, k)))


def test_ksweep_rows_shape_and_keys():
    a_id, a_ood = synthetic_alphas()
    rows = KA.ksweep(a_id, a_ood, max_extra=3)
    assert len(rows) == 2 * 4 * len(OOD_DEFAULT_SCORES)
    assert all(list(r) == ROW_KEYS for r in rows)
    for r in rows:
        assert r["k_id"] == 4 + (r["extra"] if r["condition"] == "matched" else 0)
        assert r["k_ood"] == 4 + r["extra"]
        if r["extra"] == 0:
            assert r["delta_auroc"] == 0.0 and r["delta_aupr"] == 0.0


def test_ksweep_values_equal_direct_computation():
    a_id, a_ood = synthetic_alphas(1)
    rows = KA.ksweep(a_id, a_ood, max_extra=2, scores=("max_prob",))
    grown, k = D.expand_classes(a_ood, 2)
    s_id = compute_score("max_prob", probs=None, k=D.class_counts(a_id), alpha=a_id)
    s_ood = compute_score("max_prob", probs=None, k=k, alpha=grown)
    y = np.r_[np.ones(len(s_id)), np.zeros(len(s_ood))]
    row = next(r for r in rows if r["condition"] == "ood_only" and r["extra"] == 2)
    assert row["auroc"] == auroc(y, np.r_[s_id, s_ood]) and row["aupr_in"] == aupr_in(y, np.r_[s_id, s_ood])


def test_matched_expansion_leaves_vacuity_metrics_bit_identical():
    a_id, a_ood = synthetic_alphas(2)
    rows = KA.ksweep(a_id, a_ood, max_extra=4, scores=("reciprocal_vacuity", "strength", "max_prob"))
    base = {r["score"]: r for r in rows if r["extra"] == 0}
    for r in rows:
        if r["condition"] == "matched" and r["score"] in ("reciprocal_vacuity", "strength"):
            assert r["auroc"] == base[r["score"]]["auroc"] and r["aupr_in"] == base[r["score"]]["aupr_in"]
    moved = [r for r in rows if r["condition"] == "matched" and r["score"] == "max_prob" and r["extra"] > 0]
    assert all(r["delta_auroc"] != 0.0 for r in moved)  # max E[p] is not rank-preserved by expansion


# grid logits keep S away from values within a float ulp of each other
grid_logits = st.lists(st.integers(-40, 40).map(lambda v: v / 4), min_size=4, max_size=4)


@SETTINGS
@given(
    st.lists(grid_logits, min_size=1, max_size=25),
    st.lists(grid_logits, min_size=1, max_size=25),
    st.sampled_from([1.0, 0.5, 2.0]),
)
def test_vacuity_under_expansion_properties(id_rows, ood_rows, lam):
    a_id, a_ood = D.edl_alpha(np.array(id_rows), lam), D.edl_alpha(np.array(ood_rows), lam)
    rows = KA.ksweep(a_id, a_ood, prior_weight=lam, max_extra=3, scores=("reciprocal_vacuity",))
    base = rows[0]
    ood_only = [r for r in rows if r["condition"] == "ood_only"]
    for r in rows:
        if r["condition"] == "matched":  # ranks preserved exactly
            assert r["auroc"] == base["auroc"] and r["aupr_in"] == base["aupr_in"]
    for prev, cur in zip(ood_only, ood_only[1:]):  # OOD-only expansion never lowers AUROC
        assert cur["auroc"] >= prev["auroc"]
    # and the mechanism: each OOD score can only fall
    grown, k = D.expand_classes(a_ood, 1, lam)
    assert (1 / D.vacuity(grown, lam) <= 1 / D.vacuity(a_ood, lam)).all()


def test_classify_k_sensitivity():
    a_id, a_ood = synthetic_alphas(3)
    rows = KA.ksweep(a_id, a_ood, max_extra=2)
    assert KA.classify_k_sensitivity(rows) == {s: "K-sensitive" for s in OOD_DEFAULT_SCORES}
    matched_only = [r for r in rows if r["condition"] == "matched"]
    assert KA.classify_k_sensitivity(matched_only)["reciprocal_vacuity"] == "K-invariant"
    assert KA.classify_k_sensitivity(matched_only)["max_prob"] == "K-sensitive"
    # Perfectly separated sides: OOD-only expansion cannot raise AUROC/AUPR above 1 either.
    sep_id = D.edl_alpha(np.full((5, 4), 6.0) + np.arange(5)[:, None])
    sep_ood = D.edl_alpha(np.full((5, 4), -6.0) + np.arange(5)[:, None] / 10)
    sep = KA.classify_k_sensitivity(KA.ksweep(sep_id, sep_ood, scores=("reciprocal_vacuity",)))
    assert sep == {"reciprocal_vacuity": "K-invariant"}
    with pytest.raises(ValueError, match="NaN delta"):
        KA.classify_k_sensitivity([{**rows[0], "delta_auroc": float("nan")}])
    for atol in (-1e-12, float("nan"), float("inf"), True):
        with pytest.raises(
            ValueError, match=r"atol=.* must be a finite number >= 0 \(the largest move of a K-invariant"
        ):
            KA.classify_k_sensitivity(rows, atol=atol)


@pytest.mark.parametrize("extra", [-1, 1.0, True, "1"])
def test_expand_classes_and_the_phantom_scores_refuse_an_extra_that_is_not_a_count(extra):
    """One declaration (dirichlet.EXTRA) for the options appended, by expand_classes and by the K sweep's scores."""
    alpha = synthetic_alphas(2)[0][:2]
    for call in (lambda: D.expand_classes(alpha, extra), lambda: KA.phantom_scores(alpha, extra)):
        with pytest.raises(ValueError, match=r"extra=.* must be an integer >= 0 \(options appended to each row\)"):
            call()
    assert D.expand_classes(alpha, np.int64(1))[1].tolist() == [5, 5]


def test_ksweep_mixed_side_and_validation():
    a_id, _ = synthetic_alphas(4)
    ragged = np.full((3, 5), np.nan)
    ragged[0, :3], ragged[1, :4], ragged[2, :5] = 2.0, 1.5, 3.0
    rows = KA.ksweep(a_id, ragged, max_extra=1, scores=("reciprocal_vacuity",))
    assert all(r["k_ood"] is None and r["k_id"] in (4, 5) for r in rows)
    with pytest.raises(ValueError, match="unknown score"):
        KA.ksweep(a_id, a_id, scores=("vacuity",))
    with pytest.raises(ValueError, match="max_extra"):
        KA.ksweep(a_id, a_id, max_extra=-1)
    with pytest.raises(ValueError, match="both sides"):
        KA.ksweep(a_id, a_id[:0])
