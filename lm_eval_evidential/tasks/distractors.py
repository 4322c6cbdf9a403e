"""K-matched controls of an OOD task: its questions brought to the ID task's K by removing wrong options only
(never padding), every question that has enough of them kept; :func:`control_tasks` lists the shipped controls."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lm_eval_evidential.params import Integral, Interval, Param, validate_params
from lm_eval_evidential.tasks.datasets import Converted

REMOVAL_RULE = (
    "wrong options removed in ascending order of sha256(f'{seed}:{question_id}:{label}') until the target K "
    "remain; the gold answer always kept; kept options re-lettered A.. in their original order; questions "
    "with fewer options than the target K excluded (never padded)"
)


#: A control's settings (its YAML's ``metadata.target_k`` and ``metadata.removal_seed``), declared once.
TARGET_K = Param(Interval(Integral, 2), why="the options each question keeps", example="4")
REMOVAL_SEED = Param(Interval(Integral, 0), why="which wrong options go", example="0")


@dataclass(frozen=True)
class Exclusion:
    """A question a control cannot use, and why: counted in the control's summary, never dropped silently."""

    source_id: str
    reason: str


def removal_order(question_id: str, labels: Sequence[str], *, seed: int = 0) -> list[int]:
    """Option indices in the order a distractor-removal control removes them.

    Option ``i`` is ranked by ``sha256(f"{seed}:{question_id}:{labels[i]}")`` (its original
    label, e.g. ``"C"`` or ARC's ``"3"``), smallest digest first. The order depends on the seed,
    the question's id and its labels only: not on the gold answer, the option texts, the row's
    position in the file, the Python process (unlike ``hash``) or the machine.

    Examples
    --------
    >>> removal_order("q1", ["A", "B", "C", "D", "E"]) == removal_order("q1", ["A", "B", "C", "D", "E"])
    True
    >>> sorted(removal_order("q1", ["A", "B", "C"]))
    [0, 1, 2]
    """
    digests = [hashlib.sha256(f"{seed}:{question_id}:{label}".encode()).hexdigest() for label in labels]
    return sorted(range(len(labels)), key=digests.__getitem__)


def remove_distractors(converted: Converted, *, k: int, seed: int = 0) -> Converted | Exclusion:
    """Bring one converted question to exactly ``k`` options by removing wrong ones.

    With K options and gold g: K = k keeps the question as it is; K > k removes the first
    K - k wrong options in :func:`removal_order` (the gold is never a candidate) and keeps the
    rest in their original order (:func:`~.datasets.normalise` re-letters them A..); K < k gives an
    :class:`Exclusion`, since a question cannot gain options without inventing one.

    The removal depends on the gold only in that the gold is kept: the removed set is the
    first K - k options of the gold-free order, skipping g. A question whose answer key is not
    among its labels, or whose labels repeat, is returned unchanged so that :func:`~.datasets.normalise`
    refuses it with its usual message.

    Examples
    --------
    >>> q = ("q1", "Which?", ["w", "x", "y", "z", "v"], ["A", "B", "C", "D", "E"], "E")
    >>> _, _, options, labels, key = remove_distractors(q, k=4)
    >>> len(options), options[labels.index(key)]
    (4, 'v')
    >>> remove_distractors(("q2", "Which?", ["x", "y", "z"], ["A", "B", "C"], "A"), k=4).reason
    'K=3 < 4: fewer options than the target K (never padded)'
    """
    source_id, question, options, labels, key = converted
    n = len(options)
    if n < k:
        return Exclusion(str(source_id), f"K={n} < {k}: fewer options than the target K (never padded)")
    names = [str(x) for x in labels]
    if n == k or len(names) != n or len(set(names)) != n or str(key) not in names:
        return converted
    gold = names.index(str(key))
    candidates = [i for i in removal_order(str(source_id), names, seed=seed) if i != gold]
    removed = set(candidates[: n - k])
    keep = [i for i in range(n) if i not in removed]
    return source_id, question, [options[i] for i in keep], [labels[i] for i in keep], key


class DistractorRemoval:
    """A converter: ``convert``'s questions brought to ``k`` options by :func:`remove_distractors`.

    The converter of a distractor-removal control task. It counts what it does; excluded
    questions are kept in :attr:`excluded` with their reason and :meth:`summary` gives the
    counts and the rule (for the log line and the records' metadata).
    """

    @validate_params({"k": TARGET_K, "seed": REMOVAL_SEED})
    def __init__(self, convert: Callable[[dict, int], Converted | None], *, k: int, seed: int = 0) -> None:
        self.convert, self.k, self.seed = convert, k, seed
        self.n_questions = 0
        self.n_reduced = 0
        self.excluded: list[Exclusion] = []

    def __call__(self, row: dict, index: int) -> Converted | None:
        converted = self.convert(row, index)
        if converted is None:
            return None
        self.n_questions += 1
        out = remove_distractors(converted, k=self.k, seed=self.seed)
        if isinstance(out, Exclusion):
            self.excluded.append(out)
            return None
        self.n_reduced += len(out[2]) < len(converted[2])
        return out

    def summary(self) -> dict:
        reasons: dict[str, int] = {}
        for exclusion in self.excluded:
            reasons[exclusion.reason] = reasons.get(exclusion.reason, 0) + 1
        return {
            "method": "distractor_removal",
            "target_k": self.k,
            "seed": self.seed,
            "rule": REMOVAL_RULE,
            "n_questions": self.n_questions,
            "n_kept": self.n_questions - len(self.excluded),
            "n_reduced": self.n_reduced,
            "n_excluded": len(self.excluded),
            "excluded": reasons,
        }


def control_tasks(tasks_dir: str | os.PathLike) -> dict[str, list[dict]]:
    """``{OOD task: [{"task": control task, "control": what it does}, …]}`` from the task YAMLs.

    A control declares ``metadata.control_of`` (the task it controls) and ``metadata.control``
    (one line on what it keeps and drops). Read from the YAML files themselves, so the report
    and messages name exactly the controls that ship.
    """
    from .declared_groups import task_configs

    out: dict[str, list[dict]] = {}
    for _, config in task_configs([tasks_dir]):
        meta = config.get("metadata") or {}
        if isinstance(meta, dict) and meta.get("control_of") and config.get("task"):
            out.setdefault(meta["control_of"], []).append({"task": config["task"], "control": meta.get("control", "")})
    return out
