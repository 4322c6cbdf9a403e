r"""Phantom options on the predictions of several members (ensembles, MC dropout, Laplace samples).

The K sweep (:mod:`.ksweep`) and the forced K of :func:`~lm_eval_evidential.audits.ood.forced_k_scores`
grow one model's prediction by ``x`` options; records of ``M`` members hold ``M`` predictions per
question, and their predictive distribution is the mixture of the members'
(:mod:`.members`). Here each **member** is grown first, and the mixture and every score are formed
over the grown options, as if the question had been scored with ``K + x`` labels by each member:

- ``model``: member ``m``'s own phantom logits (the labels after the question's last one, from
  that member's forward pass) are appended to its answer logits, so a softmax member becomes
  ``softmax(z_m, z_m^{phantom})`` and an EDL member gains ``alpha = softplus(z^{phantom}_m) + lambda``;
- ``zero``: each EDL member gains options of zero evidence (``alpha = lambda``); softmax members
  have no evidence to set to zero (refused, as for one softmax model);
- ``count``: only vacuity's K grows, on the summary Dirichlet, whose vacuity is the members' mean
  vacuity, so ``u = lambda (K + x) / S`` is the members' mean of ``lambda (K + x) / S_m``.

.. math::

    \bar p^{(x)} = \frac{1}{M} \sum_{m=1}^{M} p_m^{(x)}, \qquad
    p_m^{(x)} = \mathrm{softmax}(z_{m,1}, \dots, z_{m,K}, z_{m,K+1}, \dots, z_{m,K+x})

(softmax members; EDL members: ``alpha_m^{(x)} / S_m^{(x)}``). Growing the mixture instead (one
phantom option appended to ``p̄``) is not the same: ``p̄^{(x)}`` reweights each member by its own
phantom mass.

References
----------
.. [1] McNamara, C. (2026). Rethinking vacuity for OOD detection in evidential deep learning.
       arXiv:2605.06382 (the K sweep, Table 1; phantom options, Tables 3-6).
.. [2] Lakshminarayanan, B., Pritzel, A. and Blundell, C. (2017). Simple and scalable predictive
       uncertainty estimation using deep ensembles. *NeurIPS* (the mixture of the members).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from lm_eval_evidential.errors import InvalidValueError

from .members import Members, member_means_of, members_of, mixture_probs_of, summary_alpha_of
from .score_functions import COUNT_SCORES, SCORES
from .scores import no_alpha_reason

__all__ = ["MemberSide", "member_phantom_scores"]


class MemberSide(NamedTuple):
    """The members of one side: ``logits`` (n, M, K_max) and ``phantom_logits`` (n, M, P_max), both NaN
    right-padded (``phantom_logits`` None where no phantom is read), and their head ``method``."""

    logits: np.ndarray
    phantom_logits: np.ndarray | None
    method: str

    def n_phantom(self) -> np.ndarray:
        """Phantom logits per row (every member of a row has as many)."""
        if self.phantom_logits is None:
            return np.zeros(self.logits.shape[0], dtype=np.int64)
        return (~np.isnan(self.phantom_logits[:, 0, :])).sum(axis=1).astype(np.int64)


def _append_members(values: np.ndarray, k: np.ndarray, extra: np.ndarray, x: int) -> np.ndarray:
    """Each member's own K values followed by the first ``x`` of ``extra`` (n, M, .), NaN right-padded."""
    n, m = values.shape[:2]
    out = np.full((n, m, (int(k.max()) if n else values.shape[2]) + x), np.nan)
    out[:, :, : values.shape[2]] = values[:, :, : out.shape[2]]
    rows = np.arange(n)
    for j in range(x):
        out[rows, :, k + j] = extra[:, :, j]
    return out


def grow_members(side: MemberSide, x: int, mode: str, lam: float) -> tuple[Members, np.ndarray, np.ndarray, float]:
    """``(members over K + x options, k, evaluated K, mean appended evidence)`` of ``side`` (module docstring).

    ``k`` is the K of the members' arrays (K + x, except for ``count``, which grows vacuity's K alone)."""
    _, k, _ = members_of(side.logits, side.method, lam)
    if x == 0 or mode == "count":
        members, _, _ = members_of(side.logits, side.method, lam)
        return members, k, k + x, -lam if x else float("nan")
    if mode == "zero":
        if side.method != "edl":
            raise InvalidValueError(
                "--phantom zero appends zero-evidence options to Dirichlet members, but these members are "
                f"method={side.method} (no evidence); use --phantom model"
            )
        members, _, _ = members_of(side.logits, "edl", lam)
        lam_extra = np.full(members.alpha.shape[:2] + (x,), lam)
        alpha = _append_members(members.alpha, k, lam_extra, x)
        mask = np.arange(alpha.shape[2]) < (k + x)[:, None]
        return Members(member_means_of(alpha, mask), alpha), k + x, k + x, 0.0
    short = np.flatnonzero(side.n_phantom() < x)
    if short.size:
        i = int(short[0])
        raise InvalidValueError(f"row {i} has {int(side.n_phantom()[i])} phantom options per member, fewer than {x}")
    zp = side.phantom_logits[:, :, :x]
    grown, _, _ = members_of(_append_members(side.logits, k, zp, x), side.method, lam)
    evidence = float(np.mean(np.logaddexp(0.0, zp))) if side.method == "edl" else float("nan")
    return grown, k + x, k + x, evidence


def member_phantom_scores(
    side: MemberSide, x: int, *, phantom: str, prior_weight: float, scores
) -> tuple[dict[str, np.ndarray], np.ndarray, float]:
    r"""``(scores, evaluated K, mean appended evidence)`` of ``side`` with ``x`` phantom options per member.

    The scores are those of :func:`~lm_eval_evidential.metrics.scores.compute_score` on the grown
    members (``p̄`` their mean, ``alpha`` their summary Dirichlet for EDL members); under ``count``
    only ``reciprocal_vacuity`` sees the grown K. E.g. for softmax members under ``model``:

    .. math::

        \bar p^{(x)} = \frac{1}{M} \sum_m \mathrm{softmax}(z_{m,1..K}, z^{phantom}_{m,1..x})

    Parameters
    ----------
    side : MemberSide
        The members' answer logits (n, M, K_max), their phantom logits (n, M, P_max; ``model`` reads
        the first ``x`` of each row, every row must have them) and their head.
    x : int >= 0
        Options to append to each member.
    phantom : {"zero", "model", "count"}
        How (module docstring); ``zero`` needs EDL members.
    prior_weight : float > 0
        The EDL prior weight ``lambda``.
    scores : iterable of str
        Registered score names; the alpha scores need EDL members.

    Returns
    -------
    scores : dict of str to ndarray of shape (n,)
    k : ndarray of shape (n,)
        The evaluated K of each row (``K + x``).
    evidence : float
        The mean evidence of the appended options (0 for ``zero``, ``-lambda`` for ``count``, the
        members' own ``softplus(z^{phantom})`` for EDL members under ``model``, NaN for softmax
        members and for ``x = 0``).

    Examples
    --------
    >>> import numpy as np
    >>> from lm_eval_evidential.metrics.member_phantoms import MemberSide, member_phantom_scores
    >>> side = MemberSide(np.log([[[3.0, 1.0], [1.0, 1.0]]]), np.log([[[4.0], [2.0]]]), "softmax")
    >>> s, k, _ = member_phantom_scores(side, 1, phantom="model", prior_weight=1.0, scores=["max_prob"])
    >>> s["max_prob"].round(4).tolist(), k.tolist()   # p̄ = mean((3, 1, 4) / 8, (1, 1, 2) / 4)
    ([0.5], [3])
    """

    no_alpha = [name for name in scores if side.method != "edl" and SCORES[name].needs_alpha]
    no_alpha = [name for name in no_alpha if not SCORES[name].members_suffice]
    if no_alpha:
        raise InvalidValueError(no_alpha_reason(no_alpha))
    members, k, k_eval, evidence = grow_members(side, x, phantom, prior_weight)
    mask = np.arange(members.probs.shape[2]) < k[:, None]
    p = mixture_probs_of(members)
    alpha = None if members.alpha is None else np.where(mask, summary_alpha_of(members, mask), np.nan)
    values = {
        name: SCORES[name].fn(p, k_eval if name in COUNT_SCORES else k, mask, alpha, prior_weight, None, members)
        for name in scores
    }
    return values, k_eval, evidence
