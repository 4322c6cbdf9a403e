"""Scores of several members per question (ensembles, MC dropout) against independent per-row numpy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.special import digamma

from lm_eval_evidential.metrics import dirichlet as D
from lm_eval_evidential.metrics import members as M
from lm_eval_evidential.metrics import scores as S

SETTINGS = settings(max_examples=50, deadline=None)
MEMBER_SCORES = [n for n, s in S.SCORES.items() if not s.needs_logits]


@st.composite
def member_batches(draw):
    """(n, M, K_max) member logits, NaN right-padded per row (every member of a row has the row's K)."""
    n_members = draw(st.integers(1, 5))
    ks = draw(st.lists(st.integers(2, 6), min_size=1, max_size=6))
    out = np.full((len(ks), n_members, max(ks)), np.nan)
    for i, k in enumerate(ks):
        values = draw(st.lists(st.floats(-20, 20, allow_nan=False), min_size=n_members * k, max_size=n_members * k))
        out[i, :, :k] = np.reshape(values, (n_members, k))
    return out


lambdas = st.sampled_from([0.5, 1.0, 2.0])


def oracle(z_row: np.ndarray, method: str, lam: float) -> dict:
    """Every member quantity of one question (z_row: (M, K), no padding), written from the definitions."""
    probs, member_h = [], []
    for z in z_row:
        if method == "softmax":
            e = np.exp(z - z.max())
            p = e / e.sum()
            member_h.append(-sum(v * np.log(v) for v in p if v > 0))
        else:
            a = np.log1p(np.exp(-np.abs(z))) + np.maximum(z, 0) + lam  # softplus + lambda
            s = a.sum()
            p = a / s
            member_h.append(float(digamma(s + 1)) - sum(ai / s * float(digamma(ai + 1)) for ai in a))
        probs.append(p)
    mean = np.mean(probs, axis=0)
    total = -sum(v * np.log(v) for v in mean if v > 0)
    aleatoric = float(np.mean(member_h))
    return {
        "mean": mean,
        "total": total,
        "aleatoric": aleatoric,
        "mi": total - aleatoric,
        "var_max": float(np.var([p.max() for p in probs])),
    }


@SETTINGS
@given(member_batches(), st.sampled_from(["softmax", "edl"]), lambdas)
def test_member_quantities_match_per_row_oracle(z, method, lam):
    k = (~np.isnan(z[:, 0, :])).sum(axis=1)
    mean = M.mixture_probs(z, method, lam)
    eh = M.expected_entropy_of_members(z, method, lam)
    mi = M.mutual_information_of_members(z, method, lam)
    var = M.max_prob_variance(z, method, lam)
    alpha = M.mixture_alpha(z, lam) if method == "edl" else None
    scores = {
        n: S.compute_score(n, probs=None, k=k, alpha=alpha, prior_weight=lam, member_logits=z)
        for n in MEMBER_SCORES
        if alpha is not None or not S.SCORES[n].needs_alpha or S.SCORES[n].members_suffice
    }
    for i in range(len(z)):
        ref = oracle(z[i, :, : k[i]], method, lam)
        np.testing.assert_allclose(mean[i, : k[i]], ref["mean"], rtol=1e-9, atol=1e-15)
        assert np.isnan(mean[i, k[i] :]).all()
        np.testing.assert_allclose(eh[i], ref["aleatoric"], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(mi[i], ref["mi"], rtol=1e-7, atol=1e-10)
        np.testing.assert_allclose(var[i], ref["var_max"], rtol=1e-9, atol=1e-15)
        assert mi[i] >= -1e-12  # concavity of H: the mixture's MI is never negative
        np.testing.assert_allclose(scores["max_prob"][i], ref["mean"].max(), rtol=1e-12)
        np.testing.assert_allclose(scores["neg_entropy"][i], -ref["total"], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(scores["neg_expected_entropy"][i], -ref["aleatoric"], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(scores["neg_mutual_information"][i], -ref["mi"], rtol=1e-7, atol=1e-10)
        np.testing.assert_allclose(scores["neg_max_prob_variance"][i], -ref["var_max"], rtol=1e-9, atol=1e-15)
    if alpha is not None:  # the summary Dirichlet: mean p̄, vacuity the members' mean vacuity, evidence >= 0
        np.testing.assert_allclose(D.expected_probs(alpha), mean, rtol=1e-12, atol=1e-15)
        member_u = np.array(
            [
                [lam * k[i] / D.edl_alpha(z[i, m : m + 1], lam)[0, : k[i]].sum() for m in range(z.shape[1])]
                for i in range(len(z))
            ]
        )
        np.testing.assert_allclose(D.vacuity(alpha, lam), member_u.mean(axis=1), rtol=1e-12)
        assert (alpha[~np.isnan(alpha)] >= lam * (1 - 1e-12)).all()
        np.testing.assert_allclose(
            S.compute_score("reciprocal_vacuity", probs=None, k=k, alpha=alpha, prior_weight=lam, member_logits=z),
            1.0 / member_u.mean(axis=1),
            rtol=1e-12,
        )


@SETTINGS
@given(member_batches(), lambdas)
def test_one_edl_member_is_the_dirichlet_score(z, lam):
    """One EDL member: the member scores are the Dirichlet ones (one computation, shared kernels)."""
    one = z[:, :1, :]
    alpha = D.edl_alpha(one[:, 0, :], lam)
    k = D.class_counts(alpha)
    for name in ("neg_expected_entropy", "neg_mutual_information", "max_prob", "neg_entropy", "reciprocal_vacuity"):
        np.testing.assert_allclose(
            S.compute_score(
                name, probs=None, k=k, alpha=M.mixture_alpha(one, lam), prior_weight=lam, member_logits=one
            ),
            S.compute_score(name, probs=None, k=k, alpha=alpha, prior_weight=lam),
            rtol=1e-12,
            atol=1e-14,
            err_msg=name,
        )
    assert (
        S.compute_score("neg_max_prob_variance", probs=None, k=k, alpha=alpha, member_logits=one, prior_weight=lam) == 0
    ).all()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.floats(-5, 5), min_size=3, max_size=3), min_size=2, max_size=4),
    st.floats(0.5, 3.0),
    st.floats(0.2, 3.0),
    st.sampled_from(["softmax", "edl"]),
)
def test_k_sensitive_flag_with_members(rows, gap, lam, method):
    """The registry's flag holds on several-member records too: an option appended to every member with less
    support than each member's weakest moves every K-sensitive score (the member scores included)."""
    z = np.array([rows])  # (1, M, 3)
    grown = np.concatenate([z, z.min(axis=2, keepdims=True) - gap], axis=2)
    # Members that agree (equal probabilities) have MI and max-prob variance 0 at every K: the flag is about
    # members that disagree.
    assume(np.ptp(M.member_probs(z), axis=1).max() > 1e-3)
    for name in MEMBER_SCORES:
        values = []
        for logits in (z, grown):
            k = np.array([logits.shape[2]])
            alpha = M.mixture_alpha(logits, lam) if method == "edl" else None
            if alpha is None and S.SCORES[name].needs_alpha and not S.SCORES[name].members_suffice:
                break
            values.append(
                S.compute_score(name, probs=None, k=k, alpha=alpha, prior_weight=lam, member_logits=logits)[0]
            )
        if len(values) < 2:
            continue
        if name == "neg_max_prob_variance" and abs(values[0]) < 1e-12:
            continue  # members of equal max probability (not of equal probabilities): a 0 that can stay 0
        moved = not np.isclose(values[0], values[1], rtol=1e-9, atol=0)
        assert moved == S.SCORES[name].k_sensitive, (name, method, values)


def test_member_inputs_refused_with_the_reason():
    z = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    k = np.array([2])
    with pytest.raises(ValueError, match="member_logits is None"):
        S.compute_score("neg_max_prob_variance", probs=np.array([[0.5, 0.5]]), k=k)
    with pytest.raises(ValueError, match="one model's answer logits"):
        S.compute_score("neg_energy", probs=None, k=k, logits=z[:, 0], member_logits=z)
    with pytest.raises(ValueError, match="not the members' predictive"):
        S.compute_score("max_prob", probs=np.array([[0.9, 0.1]]), k=k, member_logits=z)
    with pytest.raises(ValueError, match="not the summary"):
        S.compute_score("strength", probs=None, k=k, alpha=np.array([[5.0, 1.0]]), member_logits=z)
    with pytest.raises(ValueError, match="different numbers of options"):
        M.mixture_probs(np.array([[[1.0, 0.0, 2.0], [0.0, 1.0, np.nan]]]))
    with pytest.raises(ValueError, match="3-D"):
        M.mixture_probs(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="IB-EDL"):
        M.mixture_probs(z, "ib_edl")
    assert "neg_max_prob_variance" not in S.available_scores(True, has_logits=True)
    with_members = S.available_scores(False, has_logits=True, has_members=True)
    assert "neg_max_prob_variance" in with_members and "neg_energy" not in with_members
    assert "neg_mutual_information" in with_members and "strength" not in with_members
