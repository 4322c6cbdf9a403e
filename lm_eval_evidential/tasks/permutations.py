"""Permuted evaluation: each question shown under several orders of its options (the order audit's data).

``metadata.permutations`` (a task's YAML, or ``--metadata '{"permutations": "cyclic"}'``) asks any
task this package scores (the shipped ``*_edl`` tasks, the K-matched controls, the lettered views
of stock tasks, and through them the ID/OOD pairs) to show every question under several orders:

- ``"cyclic"``: the K cyclic shifts, ``order_s[j] = (j + s) mod K`` for s = 0..K-1, so each option
  visits each letter once (MMBench's CircularEval, Liu et al. 2023);
- ``"random:N"``: N distinct orders, the identity first and N-1 permutations drawn by a generator
  seeded by ``sha256(f"{permutation_seed}:{question}")`` (``metadata.permutation_seed``, default 0),
  the same on every run and machine; all K! where N > K!;
- ``"all"``: all K! orders in lexicographic order (the identity first).

An order lists the question's options as the task shows them without permutations (indices into
the unpermuted doc's ``options``): ``order[j]`` is the option shown at letter j, the gold follows
its option, and nothing else of the prompt moves. Each (question, order) is one doc of the task,
question by question, and one record with the order in its ``order`` column; the identity order's
doc is the unpermuted doc itself. With ``--num_fewshot``, every order of a question is shown after the
few-shot examples its unpermuted prompt has (the sampler's draws are replayed question by question, see
``EvidentialMCQATask.fewshot_context``), so the orders differ in their options only. Absent, the task's
docs are exactly what they always were.

Refused, naming the task and the doc: a question with one option (no other order exists), and
more than :data:`MAX_ORDERS` orders of one question (``"all"`` at K = 7 and beyond, or N above it).
Refused, naming the task and the key: a metadata key that is a near miss of ``permutations`` or
``permutation_seed`` (``permutation``, ``Permutations``, ``permutation-seed``): as written, the run
would quietly be another than the one asked for (:func:`check_metadata`).
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import logging
import math
import re
from collections.abc import Mapping, Sequence

from lm_eval_evidential.errors import DatasetError
from lm_eval_evidential.params import Integral, Interval, Param
from lm_eval_evidential.records.validation import order_count
from lm_eval_evidential.tasks.datasets import metadata_value

logger = logging.getLogger(__name__)

#: The metadata key that asks for permuted evaluation (the issue's fixed interface).
METADATA_KEY = "permutations"
#: The metadata key of the seed of ``random:N``'s orders.
SEED_KEY = "permutation_seed"
#: The most orders of one question a run may ask for (6! = 720: "all" up to K = 6).
MAX_ORDERS = 720
#: The doc fields a permuted doc adds: its order, and the position of its question among the unpermuted docs.
ORDER_FIELD = "permutation"
QUESTION_FIELD = "question_id"
_RANDOM = re.compile(r"random:(\d+)")
_FORMS = "'cyclic' (the K cyclic shifts), 'random:N' (N seeded orders, N >= 2) or 'all' (all K! orders)"


class PermutationError(DatasetError):
    """A permutation setting, or a question, that permuted evaluation cannot serve; the message says why."""


def parse_spec(spec, *, task: str) -> tuple[str, int | None]:
    """``("cyclic" | "random" | "all", N or None)`` from a ``metadata.permutations`` value.

    Examples
    --------
    >>> parse_spec("cyclic", task="t"), parse_spec("random:5", task="t"), parse_spec("all", task="t")
    (('cyclic', None), ('random', 5), ('all', None))
    """
    text = spec.strip().lower() if isinstance(spec, str) else None
    if text in ("cyclic", "all"):
        return text, None
    match = _RANDOM.fullmatch(text or "")
    if match and 2 <= int(match.group(1)) <= MAX_ORDERS:
        return "random", int(match.group(1))
    if match:
        raise PermutationError(
            f"task {task!r}: metadata.permutations {spec!r} asks for {int(match.group(1))} orders per question; give "
            f"N from 2 to {MAX_ORDERS} (the bound on orders of one question)"
        )
    raise PermutationError(f"task {task!r}: metadata.permutations must be {_FORMS}, got {spec!r}")


def canonical_spec(spec, *, task: str) -> str:
    """The spec as records store it: ``cyclic``, ``all`` or ``random:N`` (``" Cyclic "`` is ``cyclic``).

    Examples
    --------
    >>> canonical_spec(" Random:05 ", task="t")
    'random:5'
    """
    kind, n = parse_spec(spec, task=task)
    return kind if n is None else f"{kind}:{n}"


def check_metadata(meta: Mapping, *, task: str) -> None:
    """Refuse a key of ``meta`` (a task's metadata, ``--metadata`` merged in) that is a near miss of
    :data:`METADATA_KEY` or :data:`SEED_KEY`: lm-eval passes every key on, so a typo would evaluate
    the task without permutations (or at seed 0), with exit status 0. A seed where nothing is drawn
    (no permutations, or ``cyclic``/``all``) is a logged warning.

    Examples
    --------
    >>> check_metadata({"version": 1.0, "permutations": "cyclic"}, task="t")
    >>> check_metadata({"permutation": "cyclic"}, task="t")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lm_eval_evidential.tasks.permutations.PermutationError: task 't': metadata key 'permutation' is not one ...
    """
    keys = (METADATA_KEY, SEED_KEY)
    spec = meta.get(METADATA_KEY)
    if SEED_KEY in meta and (spec is None or parse_spec(spec, task=task)[0] != "random"):
        logger.warning(
            "task %r: metadata.%s=%r draws nothing %s",
            task,
            SEED_KEY,
            meta[SEED_KEY],
            "without metadata.permutations (the options are shown in their own order); the records do not depend on it"
            if spec is None
            else f"under permutations {spec!r} (only 'random:N' draws its orders); the orders do not depend on it, "
            "though the records' metadata keep it as given",
        )
    for key in meta:
        if not isinstance(key, str) or key in keys:
            continue
        close = difflib.get_close_matches(key.strip().lower().replace("-", "_"), keys, n=1, cutoff=0.85)
        if close:
            raise PermutationError(
                f"task {task!r}: metadata key {key!r} is not one this package reads, so as written it would be "
                f'ignored; did you mean {close[0]!r}? (e.g. --metadata \'{{"{close[0]}": '
                f"{_example(close[0])}}}')"
            )


def _example(key: str) -> str:
    """An example value of a permutation metadata key, as JSON."""
    return '"cyclic"' if key == METADATA_KEY else "1"


def orders_for(
    kind: str, n: int | None, k: int, *, question: str = "", seed: int = 0, task: str = "", where: str = ""
) -> list[list[int]]:
    """The orders one question of K options is shown in (the identity first; see the module docstring).

    Examples
    --------
    >>> orders_for("cyclic", None, 3)
    [[0, 1, 2], [1, 2, 0], [2, 0, 1]]
    >>> len(orders_for("all", None, 4)), orders_for("random", 3, 4, question="q")[0]
    (24, [0, 1, 2, 3])
    """
    if k < 2:
        raise PermutationError(
            f"task {task!r}{where}: K = {k}: a question with one option has no other order to show; drop the "
            "question or evaluate the task without metadata.permutations"
        )
    count = order_count(kind, n, k)
    if count > MAX_ORDERS:
        raise PermutationError(
            f"task {task!r}{where}: permutations {kind!r} gives {count} orders for its K = {k} options "
            f"({k}! = {math.factorial(k)}), more than the bound of {MAX_ORDERS} orders per question; use 'cyclic' "
            "(K orders) or 'random:N'"
        )
    identity = list(range(k))
    if kind == "cyclic":
        return [[(j + s) % k for j in range(k)] for s in range(k)]
    if kind == "all" or count == math.factorial(k):
        return [list(p) for p in itertools.permutations(identity)]
    import numpy as np

    digest = hashlib.sha256(f"{seed}:{question}".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
    seen, out = {tuple(identity)}, [identity]
    while len(out) < count:
        order = rng.permutation(k).tolist()
        if tuple(order) not in seen:
            seen.add(tuple(order))
            out.append(order)
    return out


def permuted_doc(doc: dict, order: Sequence[int], question_id: int) -> dict:
    """``doc`` with its options shown in ``order``: options moved, the gold following its option.

    The letters, the question and every other field stay; a lettered view's ``order`` (the stock
    positions shown) is composed with ``order``. ``permutation`` and ``question_id`` are added.

    Examples
    --------
    >>> doc = {"question": "q", "options": ["a", "b", "c"], "letters": ["A", "B", "C"], "gold": 2, "k": 3}
    >>> moved = permuted_doc(doc, [2, 0, 1], 7)
    >>> moved["options"], moved["gold"], moved["permutation"], moved["question_id"]
    (['c', 'a', 'b'], 0, [2, 0, 1], 7)
    """
    order = [int(i) for i in order]
    out = {**doc, "options": [doc["options"][i] for i in order], "gold": order.index(int(doc["gold"]))}
    if isinstance(doc.get("order"), list):  # a lettered view's stock positions, in the order now shown
        out["order"] = [doc["order"][i] for i in order]
    out[ORDER_FIELD] = order
    out[QUESTION_FIELD] = int(question_id)
    return out


#: ``metadata.permutation_seed``: any integer (it is hashed with each question's id).
PERMUTATION_SEED = Param(Interval(Integral), example="0")


def permute_docs(docs: Sequence[dict], spec, *, task: str, seed=0) -> list[dict]:
    """Every doc of ``docs`` under every order of ``spec``, question by question (identity first)."""
    kind, n = parse_spec(spec, task=task)
    metadata_value(task, "permutation_seed", seed, PERMUTATION_SEED, PermutationError)
    out = []
    for position, doc in enumerate(docs):
        where = f" doc {doc.get('source_id', position)!r}"
        orders = orders_for(
            kind, n, len(doc["options"]), question=str(doc.get("question", "")), seed=seed, task=task, where=where
        )
        out.extend(permuted_doc(doc, order, position) for order in orders)
    return out
