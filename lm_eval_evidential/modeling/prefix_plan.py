"""Which prompts share a prefix worth running once: the batch plan of the prefix cache
(:mod:`.prefix_cache` runs it).

:func:`plan_batches` orders a call's distinct prompts into groups sharing a prefix long enough to
pay (:func:`pays`), each cut into batches longest first, and batches the other prompts longest
first as before. The batches of a group follow each other, so one
:class:`~lm_eval_evidential.modeling.prefix_cache.SharedPrefix` runs the group's prefix once and
keeps its keys and values until the group ends.

A prefix within the prefix: the K orders of a permuted question share the instruction (every
prompt's) *and* the question before the options (theirs only). Within a group, rows sharing more
than its prefix are kept together in its batches, and each batch's distinct inner prefixes are named
in :attr:`Batch.inner`, to be run once against the group's prefix.

Pure bookkeeping on token ids (no model, no torch), so it is property-tested on its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from lm_eval_evidential.params import Integral, Interval, Param, validate_params

__all__ = [
    "MIN_SAVED_TOKENS",
    "Batch",
    "common_prefix_length",
    "forwarded_positions",
    "pays",
    "plan_batches",
]

#: A group of prompts is run against its shared prefix when it saves at least this many token positions
#: of the forward, prefix length × (rows - 1), and so does a full batch of it, prefix length × min(rows,
#: batch size): below that the prefix's own forward call and the per-layer concatenation cost more
#: than they save. Measured (benchmarks/bench_prefix_cache.py ``--sweep``, SmolLM2 on the CPU): up to
#: ~28 saved positions the cached batch was 0.62-1.10x the uncached one's speed, from 48 on >= 1.2x;
#: 64 errs high, as a GPU's prefix call costs a read of every weight (benchmarks/HISTORY.md).
MIN_SAVED_TOKENS = 64


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """The number of leading tokens ``a`` and ``b`` share.

    Examples
    --------
    >>> common_prefix_length([1, 5, 7, 9], [1, 5, 8])
    2
    >>> common_prefix_length([1], [2])
    0
    """
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def pays(prefix_length: int, rows: int, batch_size: int, min_saved: int = MIN_SAVED_TOKENS) -> bool:
    """Whether running a group of ``rows`` prompts, in batches of ``batch_size``, against one shared
    prefix of ``prefix_length`` tokens pays: its prefix runs once for the group, and the group and a
    full batch of it each save at least ``min_saved`` token positions (:data:`MIN_SAVED_TOKENS`).

    Examples
    --------
    >>> pays(323, 8, 32), pays(15, 480, 8), pays(8, 4, 8), pays(500, 1, 8), pays(2, 1000, 8)
    (True, True, False, False, False)
    """
    return rows > 1 and prefix_length * (rows - 1) >= min_saved and prefix_length * min(rows, batch_size) >= min_saved


class Batch(tuple):
    """``(rows, prefix_length, inner)``: indices into the prompts, the shared prefix to run once (0: none),
    and each row's inner prefix (None: none in this batch).

    Consecutive batches whose rows begin with the same ``prefix_length`` tokens are one group: its
    prefix runs once for all of them (:class:`SharedPrefix`). ``inner[j]`` is the number of leading
    tokens row j shares with other rows of its batch beyond the group's prefix (the question before
    the options of its permuted orders), ``prefix_length`` where it shares none: each distinct inner
    prefix runs once for the batch, against the group's prefix."""

    __slots__ = ()

    def __new__(cls, rows: list[int], prefix_length: int = 0, inner: tuple[int, ...] | None = None):
        return super().__new__(cls, (rows, prefix_length, inner))

    @property
    def rows(self) -> list[int]:
        return self[0]

    @property
    def prefix_length(self) -> int:
        return self[1]

    @property
    def inner(self) -> tuple[int, ...] | None:
        return self[2]


def _lcp(prompts: Sequence[Sequence[int]], order: list[int]) -> list[int]:
    """``lcp[k]``: the tokens prompt ``order[k]`` shares with ``order[k - 1]``, less its last token (every row
    keeps one of its own); ``lcp[0] = 0``."""
    return [0] + [
        min(common_prefix_length(prompts[a], prompts[b]), len(prompts[a]) - 1, len(prompts[b]) - 1)
        for a, b in zip(order, order[1:])
    ]


def _groups(
    prompts: Sequence[Sequence[int]], order: list[int], lcp: list[int], batch_size: int, min_saved: int
) -> tuple[list[tuple], list[int]]:
    """``([(first, end, prefix length), ...], plain rows)``: prompts in token order (``order``, ``lcp``) cut
    into groups ``order[first:end]`` sharing a prefix that pays, each the run from its first prompt that
    saves the most token positions."""
    groups, plain = [], []
    start, n = 0, len(order)
    while start < n:
        best_end, best_prefix, best_saved = start, 0, 0
        shared = len(prompts[order[start]]) - 1
        for end in range(start + 1, n):
            shared = min(shared, lcp[end])
            # a longer run only lowers the prefix: stop where even all the rest could not save more
            if shared * (n - 1 - start) <= best_saved or shared * batch_size < min_saved:
                break
            rows = end - start + 1
            if shared * (rows - 1) > best_saved and pays(shared, rows, batch_size, min_saved):
                best_end, best_prefix, best_saved = end, shared, shared * (rows - 1)
        if best_end > start:
            groups.append((start, best_end + 1, best_prefix))
        else:
            plain.append(order[start])
        start = best_end + 1
    return groups, plain


def _inner_groups(rows: list[int], lcp: list[int], prefix: int, batch_size: int) -> list[tuple[list[int], int]]:
    """A group's rows in token order (``lcp`` their neighbours' shared tokens) cut into runs of at most
    ``batch_size`` sharing more than the group's ``prefix``: ``[(rows, inner prefix length), ...]``, each
    the run from its first row that saves the most token positions, ``(inner - prefix) * (rows - 1)``;
    a row that shares nothing more is a run of its own (inner = ``prefix``)."""
    runs, start, n = [], 0, len(rows)
    while start < n:
        best_end, best_inner, best_saved = start, prefix, 0
        shared = lcp[start + 1] if start + 1 < n else prefix
        for end in range(start + 1, min(n, start + batch_size)):
            shared = min(shared, lcp[end])
            if shared <= prefix:
                break
            if (shared - prefix) * (end - start) > best_saved:
                best_end, best_inner, best_saved = end, shared, (shared - prefix) * (end - start)
        runs.append((rows[start : best_end + 1], best_inner))
        start = best_end + 1
    return runs


def _inner_saved(batch_runs: list[tuple[int, int]], prefix: int) -> int:
    """Token positions a batch saves by running each inner prefix once: ``(inner - prefix) * (rows - 1)``
    over its ``(inner, rows in the batch)`` runs."""
    return sum((inner - prefix) * (rows - 1) for inner, rows in batch_runs)


def forwarded_positions(prompts: Sequence[Sequence[int]], batches: Sequence[Batch]) -> int:
    """Token positions the forward calls of ``batches`` process, pads included: a group's prefix once (where
    it differs from the previous batch's), each batch's distinct inner prefixes left-padded to the longest (one
    call), and its rows after their prefixes left-padded to the longest (a plain batch: its whole prompts).

    Examples
    --------
    >>> shots = list(range(100, 180))
    >>> prompts = [shots + [1, 2], shots + [3], [7, 8, 9], shots + [4, 5, 6]]
    >>> forwarded_positions(prompts, plan_batches(prompts, 2))  # 80 once, then 2 x 3, 1 x 1 and 1 x 3
    90
    >>> forwarded_positions(prompts, plan_batches(prompts, 4, reuse=False))  # 4 x 83
    332
    """
    total, held = 0, None
    for batch in batches:
        prefix = batch.prefix_length
        if prefix and tuple(prompts[batch.rows[0]][:prefix]) != held:
            held = tuple(prompts[batch.rows[0]][:prefix])
            total += prefix
        inner = batch.inner or (prefix,) * len(batch.rows)
        stems = {tuple(prompts[i][prefix:n]) for i, n in zip(batch.rows, inner) if n > prefix}
        total += len(stems) * max(map(len, stems), default=0)
        total += len(batch.rows) * max(len(prompts[i]) - n for i, n in zip(batch.rows, inner))
    return total


def _cut(
    prompts: Sequence[Sequence[int]], runs: list[tuple[list[int], int]], prefix: int, batch_size: int, min_saved: int
) -> tuple[list[Batch], bool]:
    """``runs`` in the order given cut into batches of ``batch_size``; a batch gets its inner prefixes where they
    save ``min_saved`` token positions. ``(batches, whether any batch got them)``."""
    flat = [(i, inner) for rows, inner in runs for i in rows]
    batches, any_inner = [], False
    for start in range(0, len(flat), batch_size):
        chunk = flat[start : start + batch_size]
        counts: dict[tuple, int] = {}
        for i, inner in chunk:
            if inner > prefix:
                key = (inner, tuple(prompts[i][prefix:inner]))
                counts[key] = counts.get(key, 0) + 1
        shared = {key for key, rows in counts.items() if rows > 1}
        saved = _inner_saved([(key[0], counts[key]) for key in shared], prefix)
        rows = [i for i, _ in chunk]
        if saved >= min_saved:
            any_inner = True
            # a row whose run was cut by the batch's edge shares its inner prefix with no row here: run alone in the
            # inner prefixes' call where that forwards fewer positions than padding every suffix to its length
            only = Batch(
                rows, prefix, tuple(n if (n, tuple(prompts[i][prefix:n])) in shared else prefix for i, n in chunk)
            )
            alone = Batch(rows, prefix, tuple(n for _, n in chunk))
            fewer = forwarded_positions(prompts, [alone]) < forwarded_positions(prompts, [only])
            batches.append(alone if fewer else only)
        else:
            batches.append(Batch(rows, prefix))
    return batches, any_inner


def _group_batches(
    prompts: Sequence[Sequence[int]], runs: list[tuple[list[int], int]], prefix: int, batch_size: int, min_saved: int
) -> list[Batch] | None:
    """A group's batches with inner prefixes (its ``runs`` kept together, each longest first), where at least one
    batch's inner prefixes save ``min_saved`` token positions (they run in one extra forward call per batch);
    None where none does.

    The runs in one of two orders, whichever forwards fewer positions with its pads (:func:`forwarded_positions`;
    the first on a tie, and the first alone where it shares no inner prefix): the run with the longest prompt
    first, or the run with the longest suffix after its inner prefix first. A batch's suffixes are padded to its
    longest, and two questions of near length can have options of unequal length: on 120 questions of permuted
    obqa_edl (K = 4 cyclic orders, batch 8, SmolLM2's tokenizer) the second order cuts the pads from 7.2% of the
    positions forwarded to 1.6%."""
    length = lambda i: len(prompts[i])  # noqa: E731
    runs = [(sorted(rows, key=lambda i: (-length(i), i)), inner) for rows, inner in runs]
    by_prompt = sorted(runs, key=lambda run: (-length(run[0][0]), run[0][0]))
    by_suffix = sorted(runs, key=lambda run: (-(length(run[0][0]) - run[1]), -length(run[0][0]), run[0][0]))
    best, any_inner = _cut(prompts, by_prompt, prefix, batch_size, min_saved)
    if not any_inner:
        return None
    other, any_inner = _cut(prompts, by_suffix, prefix, batch_size, min_saved)
    if any_inner and forwarded_positions(prompts, other) < forwarded_positions(prompts, best):
        return other
    return best


#: ``batch_size`` of a plan: the prompts one forward pass takes.
BATCH_SIZE = Param(Interval(Integral, 1), why="prompts per forward pass", example="batch_size=8")


@validate_params({"batch_size": BATCH_SIZE})
def plan_batches(
    prompts: Sequence[Sequence[int]], batch_size: int, *, reuse: bool = True, min_saved: int = MIN_SAVED_TOKENS
) -> list[Batch]:
    """Cut ``prompts`` (token id lists) into batches of at most ``batch_size``.

    With ``reuse``, prompts in token order (so that prompts sharing a prefix are neighbours) are
    cut into groups whose shared prefix pays (:func:`pays`, every row keeping at least one token
    of its own), each the run that saves the most token positions from where it starts; a group's
    prompts are batched longest first (as few pads as their lengths allow) and its batches follow
    each other, so that its prefix runs once for all of them. Every other prompt — and every
    prompt without ``reuse`` — goes into plain batches, longest first, with prefix length 0.
    Groups come first, the one with the longest prompt first.

    A prefix within the prefix: where rows of a group share more than the group's prefix (the K
    orders of a permuted question share the question before its options), the group's rows are cut
    into runs of at most ``batch_size`` sharing it, kept together in its batches, and a batch whose
    runs save at least ``min_saved`` token positions gets each row's inner prefix
    (:attr:`Batch.inner`), run once per batch against the group's prefix. Where no batch of a group
    saves that much, the group is batched longest first as above.

    Examples
    --------
    >>> shots = list(range(100, 180))  # an 80-token few-shot block
    >>> prompts = [shots + [1, 2], shots + [3], [7, 8, 9], shots + [4, 5, 6]]
    >>> plan_batches(prompts, 2)
    [([3, 0], 80, None), ([1], 80, None), ([2], 0, None)]
    >>> plan_batches(prompts, 4, reuse=False)
    [([3, 0, 1, 2], 0, None)]

    Two questions behind the shots, each in two orders of its options: the question (40 tokens)
    runs once per batch, behind the shots run once.

    >>> questions = [list(range(200, 240)), list(range(300, 340))]
    >>> orders = [shots + q + tail for q in questions for tail in ([1, 2], [2, 1])]
    >>> [(b.rows, b.prefix_length, b.inner) for b in plan_batches(orders, 4)]
    [([0, 1, 2, 3], 80, (120, 120, 120, 120))]
    """

    def longest_first(rows: list[int]) -> list[int]:
        return sorted(rows, key=lambda i: (-len(prompts[i]), i))  # ties in the order given, as without reuse

    if not reuse:
        plain = longest_first(range(len(prompts)))
        return [Batch(plain[i : i + batch_size]) for i in range(0, len(plain), batch_size)]
    order = sorted(range(len(prompts)), key=lambda i: prompts[i])
    lcp = _lcp(prompts, order)
    groups, plain = _groups(prompts, order, lcp, batch_size, min_saved)
    planned = []
    for first, end, prefix in groups:
        rows = order[first:end]
        runs = _inner_groups(rows, lcp[first:end], prefix, batch_size)
        nested = _group_batches(prompts, runs, prefix, batch_size, min_saved) if len(runs) < len(rows) else None
        if nested is None:
            rows = longest_first(rows)
            nested = [Batch(rows[i : i + batch_size], prefix) for i in range(0, len(rows), batch_size)]
        planned.append((max(len(prompts[i]) for i in rows), nested))
    batches: list[Batch] = []
    for _, group in sorted(planned, key=lambda g: -g[0]):
        batches += group
    plain = longest_first(plain)
    batches += [Batch(plain[i : i + batch_size]) for i in range(0, len(plain), batch_size)]
    return batches
