"""The evidence of one evaluation, keyed by (task, doc): how it travels from the model to the records.

The harness's ``loglikelihood`` contract is one ``(log p, is_greedy)`` pair per request, so the
Dirichlet evidence cannot ride in the responses. It travels this one way instead:

1. :meth:`EvidentialScoring.loglikelihood <lm_eval_evidential.harness.scoring.EvidentialScoring.loglikelihood>`
   (every backend's) answers every request with ``(log E[p_j], j == argmax E[p])`` and files each question's
   answer logits and Dirichlet alpha in the model's :class:`EvidenceLedger` (``lm.evidence``)
   under the request's own ``(task_name, doc_id)``.
2. When lm_eval's ``evaluate()`` returns, :func:`lm_eval_evidential.integration.evaluation.complete`
   (run by the wrapper :mod:`lm_eval_evidential.integration.hooks` puts around ``evaluate``) takes
   the ledger — emptying it, so nothing outlives the evaluation — gathers it from every rank,
   and builds one :class:`~lm_eval_evidential.records.Records` per evaluated task. The results
   dict it returns carries them as ``results.records``.
3. ``EvaluationTracker.save_results_aggregated`` (also wrapped) writes ``results.records`` next
   to the results, before the results file that names them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class QuestionEvidence:
    """What the model computed for one question: the K answer logits, for evidential methods the
    Dirichlet alpha (None for ``method=softmax``), and the logits of the labels after the
    question's last one (" E".. after " A".." D", as many as passed the single-token rule)."""

    task: str | None
    doc_id: int | None
    continuations: tuple[str, ...]
    token_ids: tuple[int, ...]
    logits: tuple[float, ...]
    alpha: tuple[float, ...] | None
    phantom_logits: tuple[float, ...] = ()
    #: M x K: each member's answer logits (ensembles, MC dropout; None for one prediction). ``logits`` and
    #: ``alpha`` then hold what the records keep for M members (log p̄, the summary alpha).
    member_logits: tuple[tuple[float, ...], ...] | None = None
    #: M x P: each member's own phantom logits (the same P for every member; None for one prediction).
    member_phantom_logits: tuple[tuple[float, ...], ...] | None = None


class EvidenceLedger:
    """The questions one model answered since the ledger was last taken, by (task, doc_id)."""

    def __init__(self) -> None:
        self._questions: dict[tuple, QuestionEvidence] = {}

    def file(self, question: QuestionEvidence) -> None:
        self._questions[(question.task, question.doc_id)] = question

    def get(self, task: str, doc_id: int) -> QuestionEvidence | None:
        return self._questions.get((task, doc_id))

    def take(self) -> dict[tuple, QuestionEvidence]:
        """Every filed question, leaving the ledger empty."""
        taken, self._questions = self._questions, {}
        return taken

    def __len__(self) -> int:
        return len(self._questions)
