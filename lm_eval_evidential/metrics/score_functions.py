"""The score functions and their table, :data:`SCORES`: what :mod:`.scores` computes, by name.

Each entry is a :class:`ScoreSpec`: the kernel ``fn(probs, k, mask, alpha, prior_weight, logits,
members)`` on validated, NaN right-padded arrays, the inputs it needs, and whether it is
K-sensitive. The formulas, their orientation (higher = more in-distribution) and their
references are :mod:`.scores`' docstring; :func:`~lm_eval_evidential.metrics.scores.compute_score`
validates the inputs and calls these kernels.

>>> from lm_eval_evidential.metrics.score_functions import SCORES
>>> SCORES["max_prob"].needs_alpha, SCORES["reciprocal_vacuity"].needs_alpha
(False, True)

References
----------
.. [1] Sensoy, M., Kaplan, L. and Kandemir, M. (2018). Evidential deep learning to quantify
       classification uncertainty. *NeurIPS*, 3183-3193 (vacuity, strength).
.. [2] Maaz, M., Qiao, R., Zhou, Y. and Zhang, R. (2023). On orderings of probability vectors
       and unsupervised performance estimation. arXiv:2306.10160, section 2.3.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lm_eval_evidential.errors import InvalidValueError

from ._batches import entropy_of, expected_entropy_of, masked_max, masked_sum
from .members import max_prob_variance_of, mean_member_entropy_of

__all__ = ["ScoreSpec", "SCORES"]


@dataclass(frozen=True)
class ScoreSpec:
    """A registered score: ``fn(probs, k, mask, alpha, prior_weight, logits) -> (n,)`` on validated arrays.

    ``needs_alpha``/``needs_logits``/``needs_members``: the inputs it reads beyond ``probs``
    (``members_suffice``: an alpha score that the members of several-member records give without
    alpha); ``k_sensitive``: whether appending an option with no more support than the
    least-supported one changes it (module docstring).
    """

    name: str
    fn: Callable[..., np.ndarray]
    needs_alpha: bool
    description: str
    k_sensitive: bool = True
    needs_logits: bool = False
    needs_members: bool = False
    members_suffice: bool = False


def _reciprocal_vacuity(p, k, mask, alpha, lam, z=None, m=None):
    return masked_sum(alpha, mask) / (lam * k)


def _max_prob(p, k, mask, alpha, lam, z=None, m=None):
    return masked_max(p, mask)


def _neg_entropy(p, k, mask, alpha, lam, z=None, m=None):
    return -entropy_of(p, mask)


def _neg_norm_entropy(p, k, mask, alpha, lam, z=None, m=None):
    if (k < 2).any():
        i = int(np.flatnonzero(k < 2)[0])
        raise InvalidValueError(
            f"neg_norm_entropy needs K >= 2 (it divides by log K), but example {i} has K = {int(k[i])}; "
            "drop single-option examples or use neg_entropy"
        )
    return -entropy_of(p, mask) / np.log(k)


def _strength(p, k, mask, alpha, lam, z=None, m=None):
    return masked_sum(alpha, mask)


def _expected_entropy(alpha, mask, m):
    """The aleatoric term: of the members where there are members, else of the one Dirichlet."""
    return expected_entropy_of(alpha, mask) if m is None else mean_member_entropy_of(m, mask)


def _neg_expected_entropy(p, k, mask, alpha, lam, z=None, m=None):
    return -_expected_entropy(alpha, mask, m)


def _neg_mutual_information(p, k, mask, alpha, lam, z=None, m=None):
    return _expected_entropy(alpha, mask, m) - entropy_of(p, mask)


def _neg_max_prob_variance(p, k, mask, alpha, lam, z=None, m=None):
    return -max_prob_variance_of(m, mask)


def _l2_norm(p, k, mask, alpha, lam, z=None, m=None):
    return np.sqrt(masked_sum(p * p, mask))


def _l1_to_uniform(p, k, mask, alpha, lam, z=None, m=None):
    return masked_sum(np.abs(p - 1.0 / k[:, None]), mask)


def _l2_to_uniform(p, k, mask, alpha, lam, z=None, m=None):
    d = p - 1.0 / k[:, None]
    return np.sqrt(masked_sum(d * d, mask))


def _neg_energy(p, k, mask, alpha, lam, z=None, m=None):
    # logsumexp over the real options, by hand with one (n, K) temporary (scipy's makes several: on
    # millions of records that was 200 MB more than every other score); NaN padding is left out of the sum.
    if z.shape[0] == 0:
        return np.zeros(0)
    top = np.nanmax(z, axis=1)
    shifted = np.subtract(z, top[:, None])
    np.exp(shifted, out=shifted)
    return top + np.log(np.sum(shifted, axis=1, where=~np.isnan(shifted)))


def _max_logit(p, k, mask, alpha, lam, z=None, m=None):
    return np.nanmax(z, axis=1) if z.shape[0] else np.zeros(0)


def _js_to_uniform(p, k, mask, alpha, lam, z=None, m=None):
    m = 0.5 * (p + 1.0 / k[:, None])
    return entropy_of(m, mask) - 0.5 * entropy_of(p, mask) - 0.5 * np.log(k)


#: Scores in which K enters as the vacuity's numerator only: the ones the K sweep's ``phantom="count"`` changes.
COUNT_SCORES = ("reciprocal_vacuity",)

SCORES: dict[str, ScoreSpec] = {
    s.name: s
    for s in (
        ScoreSpec("reciprocal_vacuity", _reciprocal_vacuity, True, "S / (lambda K), the reciprocal of vacuity"),
        ScoreSpec("max_prob", _max_prob, False, "max_i p_i (maximum probability, L-infinity norm)"),
        ScoreSpec("neg_entropy", _neg_entropy, False, "-H(p), natural log"),
        ScoreSpec("neg_norm_entropy", _neg_norm_entropy, False, "-H(p) / log K, needs K >= 2"),
        ScoreSpec("strength", _strength, True, "Dirichlet strength S = sum_i alpha_i"),
        ScoreSpec(
            "neg_expected_entropy",
            _neg_expected_entropy,
            True,
            "-E_Dir[H(p)], or the members' mean of it / of H(p_m) (aleatoric)",
            members_suffice=True,
        ),
        ScoreSpec(
            "neg_mutual_information",
            _neg_mutual_information,
            True,
            "-(H(E[p]) - E[H]), the mutual information (epistemic; BALD for members)",
            members_suffice=True,
        ),
        ScoreSpec("l2_norm", _l2_norm, False, "||p||_2"),
        ScoreSpec("l1_to_uniform", _l1_to_uniform, False, "sum_i |p_i - 1/K| (ATC-L1, Maaz et al. 2023)"),
        ScoreSpec("l2_to_uniform", _l2_to_uniform, False, "||p - 1/K||_2 (ATC-L2, Maaz et al. 2023)"),
        ScoreSpec(
            "js_to_uniform", _js_to_uniform, False, "Jensen-Shannon divergence JS(p, U_K) (ATC-JS, Maaz et al. 2023)"
        ),
        ScoreSpec("neg_energy", _neg_energy, False, "logsumexp_i z_i, minus the energy (Liu et al. 2020)", True, True),
        ScoreSpec("max_logit", _max_logit, False, "max_i z_i, the maximum logit (Hendrycks et al. 2022)", False, True),
        ScoreSpec(
            "neg_max_prob_variance",
            _neg_max_prob_variance,
            False,
            "-Var_m[max_i p_m,i], the members' spread of their own max probability",
            needs_members=True,
        ),
    )
}
