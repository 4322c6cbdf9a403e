"""Records built together (make_records) are, row by row, the records of each question alone."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lm_eval_evidential.records import make_record, make_records


def questions(seed, n=60):
    rng = np.random.default_rng(seed)
    ks = rng.integers(2, 11, size=n)  # K >= 8 too, where numpy's row sums pair their terms differently
    logits = [(rng.normal(size=k) * 4).tolist() for k in ks]
    return ks, logits, [int(rng.integers(k)) for k in ks]


def same(a, b):
    """Equal, NaN included (softmax records have NaN strength and vacuity)."""
    return (
        all(a[f] == b[f] or (isinstance(a[f], float) and math.isnan(a[f]) and math.isnan(b[f])) for f in a)
        and a.keys() == b.keys()
    )


@pytest.mark.parametrize("method", ["edl", "softmax"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rows_built_together_equal_each_row_alone_bit_for_bit(seed, method):
    ks, logits, gold = questions(seed)
    lam = [1.0, 0.1, 3.0][seed]
    alpha = None if method == "softmax" else [(np.logaddexp(0, z) + lam).tolist() for z in logits]
    labels = ["ABCDEFGHIJ"[:k] for k in ks]
    together = make_records(
        task="t", doc_ids=list(range(len(ks))), labels=labels, gold=gold, logits=logits, alpha=alpha, prior_weight=lam
    )
    for i, row in enumerate(together):
        alone = make_record(
            task="t",
            doc_id=i,
            labels=labels[i],
            gold=gold[i],
            logits=logits[i],
            alpha=None if alpha is None else alpha[i],
            prior_weight=lam,
        )
        assert same(row, alone)
        # and the closed forms: E[p] = alpha / S (softmax of the logits without alpha), vacuity = lam K / S
        p = np.exp(logits[i]) / np.exp(logits[i]).sum() if alpha is None else np.array(alpha[i]) / sum(alpha[i])
        assert row["pred"] == int(np.argmax(p)) and row["max_prob"] == pytest.approx(p.max(), rel=1e-12)
        if alpha is not None:
            assert row["vacuity"] == pytest.approx(lam * ks[i] / math.fsum(alpha[i]), rel=1e-12)


def test_a_row_whose_logits_do_not_match_its_labels_is_named():
    with pytest.raises(ValueError, match="t doc 7: 3 logits for 4 labels"):
        make_records(
            task="t",
            doc_ids=[6, 7],
            labels=["AB", "ABCD"],
            gold=[0, 0],
            logits=[[0.0, 1.0], [0.0, 1.0, 2.0]],
            alpha=None,
        )
