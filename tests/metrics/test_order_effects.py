"""Answer-order statistics (metrics/order_effects.py) against brute-force loops, scipy and PriDe's own code path.

Oracles: Python loops over questions; the chi-square statistic by its formula with scipy's chi2
survival function; Zheng et al.'s ``debias_utils.simple`` re-written as a loop (prior = softmax of the
mean log-probability per letter over the orders, averaged over questions); rankdata + corrcoef for
Spearman and a pair loop for Kendall's tau-b. A property test over seeds: on data without a letter
prior the uniformity test fires no more often than its level.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chi2, rankdata

from lm_eval_evidential.metrics import order_effects as oe


def cyclic(k):
    return [[(j + s) % k for j in range(k)] for s in range(k)]


def fixture(n_questions=30, k=4, bias=(0.0, 0.0, 0.0, 0.0), quality=1.0, noise=1.0, seed=0):
    """Rows of a cyclic run: logit of letter j = quality of the option shown there + bias[j] + noise."""
    rng = np.random.default_rng(seed)
    question, order, gold, logits = [], [], [], []
    for q in range(n_questions):
        g = int(rng.integers(k))
        worth = rng.normal(0, 1, size=k)
        worth[g] += quality
        for o in cyclic(k):
            question.append(q)
            order.append(o)
            gold.append(o.index(g))
            logits.append(worth[o] + np.asarray(bias) + rng.normal(0, noise, size=k))
    logits = np.array(logits)
    pred = logits.argmax(axis=1)
    return np.array(question), np.array(order), np.array(gold), pred, logits


def test_slots_are_the_lexicographic_rank_within_each_question():
    rng = np.random.default_rng(1)
    question, order = [], []
    for q in rng.permutation(6):
        perms = list(itertools.permutations(range(3)))
        for i in rng.permutation(len(perms))[:4]:
            question.append(int(q))
            order.append(list(perms[i]))
    slots = oe.order_slots(question, order)
    for i, (q, o) in enumerate(zip(question, order)):
        mine = sorted(tuple(order[j]) for j in range(len(order)) if question[j] == q)
        assert slots[i] == mine.index(tuple(o))


def test_circular_accuracy_and_following_equal_a_loop_over_questions():
    question, order, gold, pred, _ = fixture(bias=(1.5, 0, 0, 0), seed=2)
    correct = pred == gold
    by_q = {q: np.flatnonzero(question == q) for q in np.unique(question)}
    assert oe.circular_accuracy(correct, question) == pytest.approx(np.mean([correct[i].all() for i in by_q.values()]))
    option = letter = 0
    for rows in by_q.values():
        chosen = {int(order[i][pred[i]]) for i in rows}
        letters = {int(pred[i]) for i in rows}
        option += len(chosen) == 1
        letter += len(letters) == 1 and len(chosen) > 1
    shares = oe.prediction_following(question, order, pred)
    assert shares["option"] == pytest.approx(option / len(by_q)) and shares["letter"] == pytest.approx(
        letter / len(by_q)
    )
    assert shares["option"] + shares["letter"] + shares["neither"] == pytest.approx(1.0)
    assert oe.accuracy_per_slot(correct, oe.order_slots(question, order)) == pytest.approx(
        [correct[[o[0] == s for o in order]].mean() for s in range(4)]
    )


def test_uniformity_is_pearsons_chi_square_summed_over_k():
    rng = np.random.default_rng(3)
    k = np.r_[np.full(60, 4), np.full(40, 3)]
    pred = np.array([rng.integers(kk) if rng.random() > 0.3 else 0 for kk in k])
    out = oe.letter_uniformity(pred, k)
    stat = 0.0
    for kk in (3, 4):
        counts = np.bincount(pred[k == kk], minlength=kk)
        expected = (k == kk).sum() / kk
        stat += ((counts - expected) ** 2 / expected).sum()
    assert out["chi2"] == pytest.approx(stat) and out["dof"] == 5
    assert out["p_value"] == pytest.approx(chi2.sf(stat, 5))
    assert set(out["by_k"]) == {3, 4}


def _pride_reference(observed):
    """Zheng et al.'s ``simple`` (debias_utils.py) for one question: normalise, mean log per letter, softmax."""
    observed = observed / observed.sum(axis=1, keepdims=True)
    mean_log = [
        sum(math.log(observed[m, j]) for m in range(len(observed))) / len(observed) for j in range(observed.shape[1])
    ]
    top = max(mean_log)
    weights = [math.exp(v - top) for v in mean_log]
    return np.array(weights) / sum(weights)


def test_pride_prior_and_predictions_follow_the_papers_estimator():
    question, order, gold, pred, logits = fixture(n_questions=8, bias=(2.0, 0.5, 0, 0), seed=4)
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    stacked = np.stack([probs[question == q] for q in range(8)])
    expected = np.mean([_pride_reference(stacked[q]) for q in range(8)], axis=0)
    prior = oe.pride_prior(stacked)
    np.testing.assert_allclose(prior, expected, atol=1e-12)
    assert prior.argmax() == 0  # the planted letter
    debiased = oe.pride_predictions(probs, prior)
    np.testing.assert_array_equal(debiased, np.argmax(np.log(probs) - np.log(prior), axis=1))
    assert oe.balanced_questions(question, order, np.full(len(question), 4)).tolist() == list(range(8))


def test_spread_and_rank_correlation_equal_numpy_and_pairwise_loops():
    question, order, _, _, logits = fixture(n_questions=25, seed=5)
    values = logits.max(axis=1)
    slots = oe.order_slots(question, order)
    ranges = [np.ptp(values[question == q]) for q in range(25)]
    stds = [np.std(values[question == q]) for q in range(25)]
    spread = oe.order_spread(values, question)
    assert spread["mean_range"] == pytest.approx(np.mean(ranges)) and spread["max_range"] == pytest.approx(max(ranges))
    assert spread["median_range"] == pytest.approx(np.median(ranges)) and spread["mean_std"] == pytest.approx(
        np.mean(stds)
    )

    def kendall_b(a, b):
        concordant = discordant = ties_a = ties_b = 0
        for i, j in itertools.combinations(range(len(a)), 2):
            da, db = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
            concordant += da * db > 0
            discordant += da * db < 0
            ties_a += da == 0 and db != 0
            ties_b += db == 0 and da != 0
        return (concordant - discordant) / math.sqrt(
            (concordant + discordant + ties_a) * (concordant + discordant + ties_b)
        )

    rho, tau = [], []
    base = values[slots == 0]  # question order 0..24 in both (rows are question-major)
    for s in range(1, 4):
        other = values[slots == s]
        rho.append(np.corrcoef(rankdata(base), rankdata(other))[0, 1])
        tau.append(kendall_b(base, other))
    out = oe.rank_correlation_to_identity(values, question, slots)
    assert out["spearman_min"] == pytest.approx(min(rho)) and out["spearman_median"] == pytest.approx(np.median(rho))
    assert out["kendall_min"] == pytest.approx(min(tau)) and out["kendall_median"] == pytest.approx(np.median(tau))
    ids, mean = oe.order_average(values, question)
    np.testing.assert_allclose(mean, [values[question == q].mean() for q in ids])


LEVEL = 0.05
REPEATS = 200


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_without_a_letter_prior_the_uniformity_test_fires_no_more_often_than_its_level(seed):
    rng = np.random.default_rng(seed)
    fired = 0
    for _ in range(REPEATS):
        question, order, gold, pred, _ = fixture(
            n_questions=20,
            quality=float(rng.uniform(0, 2)),
            noise=float(rng.uniform(0.1, 3)),
            seed=int(rng.integers(2**31)),
        )
        fired += oe.letter_uniformity(pred, np.full(len(pred), 4))["p_value"] < LEVEL
    # the rate's binomial standard error at the level, three of them: a test that fires too often fails here
    assert fired / REPEATS <= LEVEL + 3 * math.sqrt(LEVEL * (1 - LEVEL) / REPEATS)


def test_with_a_letter_prior_the_uniformity_test_fires():
    question, order, gold, pred, _ = fixture(n_questions=40, bias=(1.5, 0, 0, 0), seed=6)
    assert oe.letter_uniformity(pred, np.full(len(pred), 4))["p_value"] < 1e-6
