"""The one registry of per-example confidence / OOD scores.

Every score is oriented **higher = more in-distribution / more confident**, so it plugs
straight into :mod:`lm_eval_evidential.metrics.detection` (ID = positive = 1). ``p`` below is the
predictive distribution passed as ``probs``: ``E[p] = alpha / S`` for EDL records, the softmax
for ``method=softmax`` records. Natural logs throughout. ``lambda`` is the prior weight.

==========================  ====================================  =====  ============================================
name                        formula                               alpha  K-sensitive in theory? (why)
==========================  ====================================  =====  ============================================
``reciprocal_vacuity``      ``S / (lambda K)`` (= 1 / vacuity)    yes    yes: K in the formula; a zero-evidence class
                                                                         lowers it unless all evidence is 0
``max_prob``                ``max_i p_i``                         no     yes: range ``[1/K, 1]``
``neg_entropy``             ``-H(p) = sum_i p_i log p_i``         no     yes: range ``[-log K, 0]``
``neg_norm_entropy``        ``-H(p) / log K`` (K >= 2)            no     yes, less: range ``[-1, 0]`` for every K,
                                                                         but the distribution still moves with K
``strength``                ``S = sum_i alpha_i``                 yes    yes: ``S >= lambda K``
``neg_expected_entropy``    ``-E_Dir[H(p)]`` (aleatoric);         yes*   yes: ``E_Dir[H]`` grows with K
                            members: ``-(1/M) sum_m h_m``
``neg_mutual_information``  ``-(H(E[p]) - E_Dir[H(p)])``;         yes*   yes: MI of a flat Dirichlet grows with K
                            members: ``-(H(p̄) - (1/M) sum_m h_m)``
``neg_max_prob_variance``   ``-Var_m[max_i p_{m,i}]``             M      yes: each member's max prob moves with K
``l2_norm``                 ``||p||_2``                           no     yes: range ``[1/sqrt(K), 1]``
``l1_to_uniform``           ``sum_i |p_i - 1/K|``                 no     yes: range ``[0, 2 (1 - 1/K)]``
``l2_to_uniform``           ``||p - 1/K||_2``                     no     yes: range ``[0, sqrt(1 - 1/K)]``
``js_to_uniform``           ``JS(p, U_K) = H(m) - H(p)/2          no     yes: range ``[0, JS(vertex, U_K)]``
                            - log(K)/2``, ``m = (p + U_K) / 2``
``neg_energy``              ``logsumexp_i z_i`` (= -energy)         no     yes: every appended option adds ``e^{z}``
``max_logit``               ``max_i z_i``                         no     no: an appended option changes it only by
                                                                         becoming the top option itself
==========================  ====================================  =====  ============================================

"alpha" = needs Dirichlet alpha (absent for ``method=softmax`` records). ``neg_mutual_information``
is epistemic (MI = H(E[p]) - E_Dir[H(p)]). "yes*" = needs alpha, or the members of records
scored by several members (ensembles, MC dropout); "M" = needs those members.

Records of ``M`` members (``member_logits``): ``p`` is their predictive distribution ``p̄``, the
mean of the members' probabilities (:mod:`lm_eval_evidential.metrics.members`), so ``max_prob``
is the max probability of the mean and ``neg_entropy`` minus the predictive entropy of the mean
(total uncertainty); ``h_m`` is a member's entropy ``H(p_m)`` (softmax members) or its
``E_Dir(alpha_m)[H(p)]`` (EDL members), so ``neg_expected_entropy`` is minus the expected entropy
(aleatoric) and ``neg_mutual_information`` minus the mutual information (BALD, epistemic; Houlsby
et al. 2011, Depeweg et al. 2018). With one EDL member they are the Dirichlet versions above, by
the same kernels. The logit scores read one model's answer logits and are refused on such records.

The last four follow Maaz et al. (2023, §2.3, the ATC score functions): distance to the uniform
vector ``U_K`` is a *confidence* (farther from uniform = more confident), so they are used
unsigned. Maaz et al. name the Jensen-Shannon *distance* ``sqrt(JS)``; we report the divergence,
which is order-isomorphic to it, so every rank-based metric (AUROC, AUPR, FPR95) is identical.
``l2_norm`` and ``l2_to_uniform`` are order-isomorphic on the simplex for a fixed K (Maaz et al.
2023, Theorem 2); across rows of different K they are not.

"K-sensitive in theory" means the score's range or value depends on K itself, so comparing
sets with different K confounds the score with the class count (McNamara 2026, §3). The
registry's ``k_sensitive`` flag states it as a property: appending an option that gets no
more support than the row's least-supported one (logit, hence evidence, at most the lowest
real one) changes a K-sensitive score and leaves a K-insensitive one unchanged.

``neg_energy`` and ``max_logit`` read the answer logits ``z`` (records always keep them), not
``p`` or alpha: the energy score of Liu et al. (2020) and the maximum logit of Hendrycks et al.
(2022), oriented higher = more ID. They are computed only when asked for by name
(``available_scores(..., has_logits=True)``). Which ones
move on actual data is measured by :func:`lm_eval_evidential.metrics.ksweep.ksweep`.
References
----------
.. [1] Sensoy, M., Kaplan, L. and Kandemir, M. (2018). Evidential deep learning to quantify
       classification uncertainty. *NeurIPS*, 3183-3193 (vacuity, strength).
.. [2] Maaz, M., Qiao, R., Zhou, Y. and Zhang, R. (2023). On orderings of probability vectors
       and unsupervised performance estimation. arXiv:2306.10160, section 2.3 (the distances to
       the uniform vector).
.. [3] McNamara, C. (2026). Rethinking vacuity for OOD detection in evidential deep learning.
       arXiv:2605.06382, section 3 (why K-sensitive scores confound OOD detection).
.. [4] Liu, W., Wang, X., Owens, J. and Li, Y. (2020). Energy-based out-of-distribution
       detection. *NeurIPS* (the energy score, -logsumexp of the logits).
.. [5] Hendrycks, D., Basart, S., Mazeika, M. et al. (2022). Scaling out-of-distribution
       detection for real-world settings. *ICML* (the maximum logit).
"""

from __future__ import annotations

import numpy as np

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.params import validate_params

from ._batches import PRIOR_WEIGHT, check_padded, masked_sum, probs_of
from .members import members_of, mixture_probs_of

# The kernels and their table live in .score_functions; both stay importable from here.
from .score_functions import SCORES, ScoreSpec

__all__ = [
    "ScoreSpec",
    "SCORES",
    "OOD_DEFAULT_SCORES",
    "compute_score",
    "available_scores",
    "computable_scores",
    "no_alpha_reason",
    "check_score_names",
]

OOD_DEFAULT_SCORES = ("reciprocal_vacuity", "max_prob", "neg_norm_entropy")


def available_scores(has_alpha: bool, has_logits: bool = False, has_members: bool = False) -> list[str]:
    r"""Registered score names computable from records with (``True``) or without Dirichlet alpha.

    Parameters
    ----------
    has_alpha : bool
        Whether Dirichlet alpha is available (False for ``method=softmax`` records, which have
        no evidence, so vacuity and strength are undefined).
    has_logits : bool, default=False
        Whether the answer logits are passed too (the logit scores ``neg_energy``, ``max_logit``).
    has_members : bool, default=False
        Whether the records were scored by several members (``member_logits``): the member
        scores come in, the logit scores go (they read one model's logits).

    Returns
    -------
    list of str
        In registry order.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.scores import available_scores
    >>> available_scores(False)
    ['max_prob', 'neg_entropy', 'neg_norm_entropy', 'l2_norm', 'l1_to_uniform', 'l2_to_uniform', 'js_to_uniform']
    >>> [n for n in available_scores(False, has_members=True) if n not in available_scores(False)]
    ['neg_expected_entropy', 'neg_mutual_information', 'neg_max_prob_variance']
    """
    wanted = [
        n
        for n, s in SCORES.items()
        if (has_logits and not has_members or not s.needs_logits) and (has_members or not s.needs_members)
    ]
    return computable_scores(wanted, has_alpha, has_members)[0]


def computable_scores(names, has_alpha: bool, has_members: bool = False) -> tuple[list[str], list[str]]:
    r"""Which of ``names`` a set of records can give: the one rule for every audit, plot and task.

    A score that needs Dirichlet alpha (vacuity, strength, mutual information) cannot be computed
    from ``method=softmax`` records, which have no evidence, unless it is one the members of
    several-member records give (``members_suffice``); every other score can.

    Parameters
    ----------
    names : iterable of str
        Registered score names (checked by the caller).
    has_alpha : bool
        Whether every record set in question has Dirichlet alpha.
    has_members : bool, default=False
        Whether every record set in question keeps its members' logits.

    Returns
    -------
    (computable, needing_alpha) : tuple of list of str
        ``names`` split in their order; say why the second list is missing with :func:`no_alpha_reason`.

    Examples
    --------
    >>> computable_scores(["reciprocal_vacuity", "max_prob"], has_alpha=False)
    (['max_prob'], ['reciprocal_vacuity'])
    >>> computable_scores(["reciprocal_vacuity", "max_prob"], has_alpha=True)
    (['reciprocal_vacuity', 'max_prob'], [])
    >>> computable_scores(["neg_mutual_information", "strength"], has_alpha=False, has_members=True)
    (['neg_mutual_information'], ['strength'])
    """
    names = list(names)
    if has_alpha:
        return names, []

    def lacks(n: str) -> bool:
        return SCORES[n].needs_alpha and not (has_members and SCORES[n].members_suffice)

    return [n for n in names if not lacks(n)], [n for n in names if lacks(n)]


def no_alpha_reason(names, tasks=()) -> str:
    r"""Why the alpha scores ``names`` are missing for the ``method=softmax`` records of ``tasks``: one wording.

    Parameters
    ----------
    names : str or sequence of str
        The scores that need Dirichlet alpha (the second list of :func:`computable_scores`).
    tasks : sequence of str, optional
        The tasks whose records have no alpha; none: "these records".

    Returns
    -------
    str
        One sentence naming the scores, the tasks, why, and the scores that can be given instead.

    Examples
    --------
    >>> no_alpha_reason("vacuity", ["obqa_edl"])[:78]
    "score 'vacuity' needs Dirichlet alpha, but the records of obqa_edl are method="
    """
    names = [names] if isinstance(names, str) else list(names)
    subject = f"score {names[0]!r} needs" if len(names) == 1 else f"scores {names} need"
    whose = f"the records of {', '.join(tasks)} are" if tasks else "these records are"
    return (
        f"{subject} Dirichlet alpha, but {whose} method=softmax (no evidence, so vacuity and strength are "
        f"undefined); use one of {', '.join(available_scores(False))}"
    )


def score_hint(name) -> str | None:
    """The registered score an unknown name most likely means, said with why; None when none is near.

    Every score is oriented higher = more in-distribution, so an uncertainty is registered as its
    negation or reciprocal (``vacuity`` -> ``reciprocal_vacuity``, ``entropy`` -> ``neg_entropy``).

    Examples
    --------
    >>> score_hint("vacuity")
    'vacuity is reciprocal_vacuity here (scores are oriented higher = more in-distribution: 1 / vacuity)'
    >>> score_hint("entropy")
    'entropy is neg_entropy here (scores are oriented higher = more in-distribution: -entropy)'
    >>> score_hint("maxprob")
    "did you mean 'max_prob'?"
    """
    import difflib

    if not isinstance(name, str):
        return None
    key = name.strip().lower().replace("-", "_")
    why = "scores are oriented higher = more in-distribution"
    if f"reciprocal_{key}" in SCORES:
        return f"{name} is reciprocal_{key} here ({why}: 1 / {key})"
    if f"neg_{key}" in SCORES:
        return f"{name} is neg_{key} here ({why}: -{key})"
    close = difflib.get_close_matches(key, list(SCORES), n=1, cutoff=0.75)
    return f"did you mean {close[0]!r}?" if close else None


def check_score_names(names) -> list[str]:
    r"""The one validator of score names: registered names, duplicates dropped, order kept.

    Every function that takes score names (the metrics here, the audits, the CLI's
    ``--scores``) validates them with this function, so the message is the same everywhere.

    Parameters
    ----------
    names : str or iterable of str
        One name or several.

    Returns
    -------
    list of str

    Raises
    ------
    ValueError
        For an unknown name (the message lists the valid ones) or no names at all.

    Examples
    --------
    >>> from lm_eval_evidential.metrics.scores import check_score_names
    >>> check_score_names(["max_prob", "reciprocal_vacuity", "max_prob"])
    ['max_prob', 'reciprocal_vacuity']
    >>> check_score_names("vacuity")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lm_eval_evidential.errors.InvalidValueError: unknown score(s) ['vacuity']; vacuity is reciprocal_vacuity here ...
    """
    names = [names] if isinstance(names, str) else list(names)
    unknown = [name for name in names if name not in SCORES]
    if unknown:
        hints = "".join(f"{hint}; " for name in unknown if (hint := score_hint(name)))
        raise InvalidValueError(f"unknown score(s) {unknown}; {hints}valid scores are: {', '.join(SCORES)}")
    if not names:
        raise InvalidValueError(f"no score names given; valid scores are: {', '.join(SCORES)}")
    return list(dict.fromkeys(names))


def check_simplex(p, mask) -> None:
    # Loose tolerance: probabilities from float16/float32 model outputs are accepted; the
    # check exists to catch logits or alphas passed as ``probs``.
    if p.shape[0] == 0:
        return
    outside = mask & ((p < -1e-6) | (p > 1 + 1e-6))
    sums = masked_sum(p, mask)
    off = np.abs(sums - 1.0) > 1e-3
    if outside.any() or off.any():
        i = int(np.flatnonzero(outside.any(axis=1) | off)[0])
        raise InvalidValueError(
            f"probs row {i} is not a probability vector (values {p[i].tolist()}, sum {sums[i]!r}); pass "
            "E[p] = alpha / S or softmax probabilities, not logits or concentrations"
        )


@validate_params({"prior_weight": PRIOR_WEIGHT})
def compute_score(
    name: str, *, probs, k, alpha=None, prior_weight: float = 1.0, logits=None, member_logits=None
) -> np.ndarray:
    r"""Score ``name`` per example; higher = more in-distribution / more confident.

    The formula of each name is in the table of this module's docstring, e.g.

    .. math::

        \mathrm{reciprocal\_vacuity} = \frac{S}{\lambda K}, \qquad
        \mathrm{max\_prob} = \max_i p_i .

    Parameters
    ----------
    name : str
        A key of :data:`SCORES`.
    probs : array-like of shape (n_samples, K_max) or None
        The predictive distribution, NaN right-padded beyond each row's own K. With ``alpha``
        given it must be ``alpha / S``; pass None to have it derived from ``alpha``.
    k : array-like of int, shape (n_samples,)
        Per-example class count; must match the non-NaN count of each row.
    alpha : array-like of shape (n_samples, K_max), optional
        Dirichlet concentrations (needed by the alpha-based scores).
    prior_weight : float > 0, default=1.0
        The prior weight ``lambda``.
    logits : array-like of shape (n_samples, K_max), optional
        The answer logits, NaN right-padded like ``probs`` (needed by the logit scores).
    member_logits : array-like of shape (n_samples, n_members, K_max), optional
        The answer logits of every member of several-member records (ensembles, MC dropout):
        EDL members when ``alpha`` is given (it must be their summary, whose mean is ``p̄``),
        softmax members otherwise. ``probs`` is then their predictive distribution ``p̄``
        (derived when None); needed by ``neg_max_prob_variance``.

    Returns
    -------
    ndarray of shape (n_samples,)

    Raises
    ------
    ValueError
        For an unknown name, for an alpha-based score when ``alpha`` is None (and no members give
        it), for a logit score when ``logits`` is None or members are given, and for a member
        score without ``member_logits``.

    Examples
    --------
    >>> import numpy as np
    >>> from lm_eval_evidential.metrics.scores import compute_score
    >>> alpha = np.array([[3.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, np.nan]])
    >>> k = np.array([4, 3])
    >>> compute_score("reciprocal_vacuity", probs=None, k=k, alpha=alpha).tolist()  # S / K
    [1.5, 2.0]
    >>> compute_score("max_prob", probs=None, k=k, alpha=alpha).round(4).tolist()
    [0.5, 0.3333]
    """
    spec = SCORES[check_score_names(name)[0]]
    lam = float(prior_weight)
    _check_score_inputs(spec, name, alpha, member_logits)
    if member_logits is not None:
        return _member_score(spec, probs, k, alpha, lam, member_logits)
    if spec.needs_logits:
        return _logit_score(spec, name, logits, k, lam)
    a, p, k_rows, mask = _validated_probs(probs, alpha)
    _check_k_per_row(k, k_rows, p.shape[0])
    return spec.fn(p, k_rows, mask, a, lam, None)


def _check_score_inputs(spec, name: str, alpha, member_logits) -> None:
    """Refuse inputs that cannot give score ``name``: no alpha for an alpha score, one model's logits for members'
    records, or a member score on one prediction per question."""
    if alpha is None and spec.needs_alpha and not (member_logits is not None and spec.members_suffice):
        raise InvalidValueError(no_alpha_reason(name))
    if member_logits is not None and spec.needs_logits:
        raise InvalidValueError(
            f"score {name!r} reads one model's answer logits, but these records were scored by several "
            "members (their logits column is log p̄); use max_prob, neg_entropy or a member score"
        )
    if member_logits is None and spec.needs_members:
        raise InvalidValueError(
            f"score {name!r} is the spread over the members of records scored by several members (ensembles, "
            "MC dropout), but member_logits is None; these records have one prediction per question"
        )


def _logit_score(spec, name: str, logits, k, lam: float) -> np.ndarray:
    """A logit score of validated NaN right-padded ``logits`` whose non-NaN count per row is ``k``."""
    if logits is None:
        raise InvalidValueError(f"score {name!r} reads the answer logits, but logits is None; pass logits=")
    z, k_z, _ = check_padded(logits, "logits")
    if not np.array_equal(np.asarray(k), k_z):
        raise InvalidValueError("k disagrees with the logits' non-NaN count per row; rows must be NaN right-padded")
    if not np.isfinite(z[~np.isnan(z)]).all():
        raise InvalidValueError("logits must be finite")
    return spec.fn(None, k_z, None, None, lam, z)


def _validated_probs(probs, alpha):
    """``(alpha or None, probs, K per row, mask)``, validated: ``probs`` derived from ``alpha`` when None, else a
    probability vector per row with the same K per row as ``alpha`` (both trimmed to the widest K)."""
    if alpha is None and probs is None:
        raise InvalidValueError("probs is None and no alpha was given to derive it from")
    a = None
    if alpha is not None:
        a, k_rows, mask = check_padded(alpha, "alpha", positive=True)
    if probs is None:
        return a, probs_of(a, mask), k_rows, mask  # derived from validated alpha: nothing further to check
    p, k_p, mask_p = check_padded(probs, "probs")
    check_simplex(p, mask_p)
    if (p < 0).any():  # rounding below 0 that check_simplex tolerates; entr(p < 0) is -inf
        p = np.maximum(p, 0.0)
    if alpha is None:
        return None, p, k_p, mask_p
    if p.shape[0] != a.shape[0] or not np.array_equal(k_p, k_rows):
        raise InvalidValueError(
            f"alpha (shape {a.shape}) and probs (shape {p.shape}) must describe the same examples "
            "with the same K per row"
        )
    if p.shape[1] != a.shape[1]:  # one carries extra all-NaN columns: trim both to max K
        width = int(k_rows.max()) if k_rows.size else 0
        a, p, mask = a[:, :width], p[:, :width], mask[:, :width]
    return a, p, k_rows, mask


def _check_k_per_row(k, k_rows: np.ndarray, n: int) -> None:
    """Refuse a ``k`` that is not the 1-D integer array of each of the ``n`` rows' non-NaN count ``k_rows``."""
    k_arr = np.asarray(k)
    if k_arr.ndim != 1 or k_arr.shape[0] != n or k_arr.dtype.kind not in "iu":
        raise InvalidValueError(
            f"k must be a 1-D integer array of length {n} (one class count per example), "
            f"got dtype {k_arr.dtype} and shape {k_arr.shape}"
        )
    if not np.array_equal(k_arr, k_rows):
        i = int(np.flatnonzero(k_arr != k_rows)[0])
        raise InvalidValueError(
            f"k disagrees with the scores' input at example {i}: k = {int(k_arr[i])} but the row has "
            f"{int(k_rows[i])} non-NaN values; rows must be NaN right-padded beyond their own K"
        )


def _to_width(a: np.ndarray, width: int) -> np.ndarray:
    """``a`` trimmed or NaN-padded to ``width`` columns (rows of one K may come with extra all-NaN columns)."""
    if a.shape[1] >= width:
        return a[:, :width]
    return np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=np.nan)


def _member_score(spec: ScoreSpec, probs, k, alpha, lam: float, member_logits) -> np.ndarray:
    """``spec`` on several-member records: ``p`` is the members' mean (checked against ``probs``/``alpha``)."""
    members, k_rows, mask = members_of(member_logits, "softmax" if alpha is None else "edl", lam)
    p = mixture_probs_of(members)
    k_arr = np.asarray(k)
    if k_arr.shape != k_rows.shape or not np.array_equal(k_arr, k_rows):
        raise InvalidValueError(
            "k disagrees with the member logits' non-NaN count per row; rows must be NaN right-padded"
        )
    a = None
    if alpha is not None:
        a, k_a, _ = check_padded(alpha, "alpha", positive=True)
        a = _to_width(a, p.shape[1])
        if not np.array_equal(k_a, k_rows) or not np.allclose(
            probs_of(a, mask), p, rtol=1e-9, atol=1e-12, equal_nan=True
        ):
            raise InvalidValueError(
                "alpha is not the summary of the member logits (its mean alpha / S must be the members' mean "
                "probability); pass the records' own alpha and member_logits"
            )
    if probs is not None:
        q, k_q, _ = check_padded(probs, "probs")
        if not np.array_equal(k_q, k_rows) or not np.allclose(
            _to_width(q, p.shape[1]), p, rtol=1e-9, atol=1e-12, equal_nan=True
        ):
            raise InvalidValueError(
                "probs is not the members' predictive distribution (the mean of their probabilities); pass None "
                "to have it derived from member_logits"
            )
    return spec.fn(p, k_rows, mask, a, lam, None, members)
