"""Prompts that share a long text prefix (a few-shot block), tokenised with that prefix once.

lm-eval's ``first_n`` few-shot samplers give every question of a task the same block (MMLU 5-shot,
ARC 25-shot), so a batch of 120 ARC prompts repeats about 1,800 tokens of the same text 120 times.
:func:`encode_shared_prefixes` returns exactly the ids of a 🤗 tokenizers ``Tokenizer``'s
``encode_batch_fast(texts)`` while tokenising the shared part once per group of prompts:

    ids(text_i) = ids(text_0)[:k] + ids_without_special_tokens(text_i[c:]) + right special tokens

at a cut ``c`` inside the shared text, where ``k`` is the number of ids ``text_0``'s pieces before
``c`` make. Why that is exact, for the pipelines :func:`cut_rule` accepts (everything else is
tokenised whole), is in docs/scaling.md ("Tokenising a shared few-shot block once"). In short: the
tokenizer's model (BPE, WordPiece, Unigram) runs on each pre-token alone, so it suffices that every
stage before it (added-token extraction, normalizer, pre-tokenizer) puts a piece boundary at ``c``
whatever follows the shared text, decides the pieces before ``c`` from the shared text alone, and
cuts the text after ``c`` as it cuts that text on its own. The cut is chosen where the accepted
stages cannot join the characters on either side of it: a line break followed by an ASCII letter
for byte-level pre-tokenizers (GPT-2's regex and the Llama-3/Qwen2 ``Split`` regexes), a single
space between an ASCII character and an ASCII letter for whitespace-splitting ones (Metaspace,
BERT, Whitespace).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

__all__ = ["MIN_SAVED_CHARS", "MIN_SHARED_CHARS", "cut_rule", "encode_shared_prefixes", "find_cut", "text_groups"]

#: Prompts are grouped where neighbours (in sorted order) share at least this many characters, and a group is
#: cut when that leaves at least MIN_SAVED_CHARS characters untokenised: (prompts - 1) x cut - the first prompt's
#: text after the cut, which is tokenised twice (benchmarks/bench_prefix_tokens.py --sweep: below it, the
#: bookkeeping costs what it saves).
MIN_SHARED_CHARS, MIN_SAVED_CHARS = 64, 200

# The Split regexes whose alternatives cannot match a line break followed by a letter and look ahead at
# most one character, with no look-behind or anchor (docs/scaling.md): GPT-2's (also ByteLevel's own),
# Llama-3's (= tiktoken's cl100k) and Qwen2's.
GPT2_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)
QWEN2_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
    r"|\s+(?!\S)|\s+"
)
KNOWN_SPLIT_REGEXES = frozenset({GPT2_REGEX, LLAMA3_REGEX, QWEN2_REGEX})

#: The cut rules: "newline" cuts before an ASCII letter that follows a line break; "space" cuts at a
#: single space between an ASCII non-space and an ASCII letter.
NEWLINE, SPACE = "newline", "space"

_ASCII_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_ASCII_GRAPHIC = frozenset(chr(i) for i in range(33, 127))


def _state(component) -> dict | None:
    return None if component is None else json.loads(component.__getstate__())


def _normalizer_ok(state: dict | None, rule: str) -> bool:
    """Normalizers that map each character alone and leave the cut's characters (a line break or a space, ASCII
    letters and signs) as they are: Unicode forms (those characters are starters that compose with nothing
    before them), lowercasing, accent stripping, BERT's (not under the line-break rule where it cleans text:
    it makes the line break a space), and Replace of one non-ASCII character."""
    if state is None:
        return True
    kind = state["type"]
    if kind == "Sequence":
        return all(_normalizer_ok(s, rule) for s in state["normalizers"])
    if kind in {"NFC", "NFD", "NFKC", "NFKD", "Lowercase", "StripAccents"}:
        return True
    if kind == "BertNormalizer":
        return rule == SPACE or not state["clean_text"]
    if kind == "Replace":
        pattern = state["pattern"].get("String", "")
        return len(pattern) == 1 and ord(pattern) > 127
    return False  # Prepend (Llama-2's legacy "▁"), Strip, Precompiled, regex Replace, …: not shown local


def _byte_level_ok(state: dict, *, regex: bool) -> bool:
    return state["type"] == "ByteLevel" and not state["add_prefix_space"] and bool(state["use_regex"]) == regex


def _pre_tokenizer_rule(state: dict | None) -> str | None:
    """The cut rule under which this pre-tokenizer puts a boundary at the cut whatever follows, or None."""
    if state is None:
        return None  # one piece for the whole text: the model could merge across any cut (Llama-2 legacy)
    kind = state["type"]
    if _byte_level_ok(state, regex=True):
        return NEWLINE
    if kind == "Metaspace":
        return SPACE if state.get("split", True) else None
    if kind in {"BertPreTokenizer", "Whitespace", "WhitespaceSplit"}:
        return SPACE
    if kind != "Sequence":
        return None
    stages = state["pretokenizers"]
    kinds = [s["type"] for s in stages]
    # Llama-3, Qwen2: a known regex splits, ByteLevel only maps bytes
    if (
        kinds == ["Split", "ByteLevel"]
        and stages[0]["pattern"].get("Regex") in KNOWN_SPLIT_REGEXES
        and stages[0]["behavior"] == "Isolated"
        and not stages[0]["invert"]
        and _byte_level_ok(stages[1], regex=False)
    ):
        return NEWLINE
    # digits split off first (StarCoder-like): no boundary between two non-digits, then GPT-2's regex
    if kinds == ["Digits", "ByteLevel"] and _byte_level_ok(stages[1], regex=True):
        return NEWLINE
    # T5-like: words, then "▁" prepended to each (always, or never: "first" would depend on the cut)
    if kinds == ["WhitespaceSplit", "Metaspace"] and stages[1]["prepend_scheme"] in {"always", "never"}:
        return SPACE
    return None


def _right_special_count(state: dict | None) -> int | None:
    """How many special ids the post-processor appends after a single text's ids, or None if unknown."""
    if state is None:
        return 0
    kind = state["type"]
    if kind == "ByteLevel":
        return 0
    if kind in {"BertProcessing", "RobertaProcessing"}:
        return 1
    if kind == "Sequence":
        counts = [_right_special_count(s) for s in state["processors"]]
        return None if None in counts else sum(counts)
    if kind == "TemplateProcessing":
        single = state["single"]
        at = [i for i, piece in enumerate(single) if "Sequence" in piece]
        if len(at) != 1:
            return None
        special = state["special_tokens"]
        try:
            return sum(len(special[piece["SpecialToken"]["id"]]["ids"]) for piece in single[at[0] + 1 :])
        except KeyError:
            return None
    return None


def _added_tokens_ok(backend) -> bool:
    """No added token can match across the cut: none strips or checks its neighbours, and none holds whitespace
    (every cut has a line break or a space on one side), after normalising where it is matched normalised."""
    normalizer = backend.normalizer
    for token in backend.get_added_tokens_decoder().values():
        if token.lstrip or token.rstrip or token.single_word:
            return False
        content = token.content
        if token.normalized and normalizer is not None:
            content = normalizer.normalize_str(content)
        if any(ch.isspace() for ch in content):
            return False
    return True


def cut_rule(backend) -> tuple[str, int] | None:
    """``(rule, right special count)`` when ``backend``'s pipeline is one whose tokens can be cut at a
    rule's cut (module docstring), else None: the texts are then tokenised whole."""
    model = backend.model
    if type(model).__name__ not in {"BPE", "WordPiece", "Unigram"}:
        return None
    if getattr(model, "dropout", None):  # random merges: not even two full calls agree
        return None
    try:
        rule = _pre_tokenizer_rule(_state(backend.pre_tokenizer))
        if rule is None or not _normalizer_ok(_state(backend.normalizer), rule) or not _added_tokens_ok(backend):
            return None
        right = _right_special_count(_state(backend.post_processor))
    except (KeyError, TypeError):  # a component serialised in another tokenizers version's form: not known
        return None
    return None if right is None else (rule, right)


def find_cut(prefix: str, rule: str) -> int | None:
    """The last cut of ``rule`` inside ``prefix``, with the characters it looks at inside ``prefix`` too; None
    where there is none."""
    if rule == NEWLINE:  # prefix[c - 1] is a line break, prefix[c] an ASCII letter
        at = prefix.rfind("\n", 0, len(prefix) - 1)
        while at >= 0:
            if prefix[at + 1] in _ASCII_LETTERS:
                return at + 1
            at = prefix.rfind("\n", 0, at)
        return None
    # prefix[c] is one space between an ASCII non-space and an ASCII letter
    at = prefix.rfind(" ", 0, len(prefix) - 1)
    while at >= 1:
        if prefix[at - 1] in _ASCII_GRAPHIC and prefix[at + 1] in _ASCII_LETTERS:
            return at
        at = prefix.rfind(" ", 0, at)
    return None


def _common_length(a: str, b: str) -> int:
    """The length of ``a`` and ``b``'s common prefix (a binary search on slice comparisons, in C)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def text_groups(texts: Sequence[str], min_shared: int = MIN_SHARED_CHARS) -> list[tuple[list[int], int]]:
    """Groups of at least two texts sharing a prefix of at least ``min_shared`` characters: (indices, the
    group's common prefix length).

    Texts sorted, so texts sharing a prefix are neighbours and a run's common prefix is the least of its
    neighbours' ones. A run either stays one group or splits where its neighbours share least (prompts of two
    few-shot blocks that share only an instruction), whichever shares more characters in all: (texts - 1) x
    common prefix, summed over the groups.
    """
    order = sorted(range(len(texts)), key=texts.__getitem__)
    common = [_common_length(texts[a], texts[b]) for a, b in zip(order, order[1:])]

    def best(lo: int, hi: int, depth: int) -> tuple[int, list[tuple[list[int], int]]]:
        """The grouping of order[lo..hi] (hi > lo) that shares most, and what it shares."""
        least = min(common[lo:hi])
        whole = ((hi - lo) * least, [(order[lo : hi + 1], least)]) if least >= min_shared else (0, [])
        if depth > 100:  # deep nesting: one group (what it saves aside, the ids are the same)
            return whole
        split, groups, start = 0, [], lo
        for end in [*(k for k in range(lo, hi) if common[k] == least), hi]:
            if end > start:
                saved, found = best(start, end, depth + 1)
                split, groups = split + saved, groups + found
            start = end + 1
        return whole if whole[0] >= split and whole[1] else (split, groups)

    groups: list[tuple[list[int], int]] = []
    start = 0
    for k in range(len(common) + 1):
        if k == len(common) or common[k] < min_shared:
            if k > start:
                groups += best(start, k, 0)[1]
            start = k + 1
    return groups


def encode_shared_prefixes(
    backend,
    texts: Sequence[str],
    *,
    add_special_tokens: bool = True,
    min_shared: int = MIN_SHARED_CHARS,
    min_saved: int = MIN_SAVED_CHARS,
) -> list[list[int]]:
    """``[e.ids for e in backend.encode_batch_fast(texts, add_special_tokens=...)]``, with each group of texts
    that share a prefix (:func:`text_groups`) tokenised up to a cut inside it once (module docstring), where
    that leaves ``min_saved`` characters untokenised.

    Two batched calls: the texts outside groups and one whole text per group, with special tokens as asked;
    the groups' texts after their cut, without. Each group's first text is checked whole against its cut
    ids; a group whose check fails (not expected under :func:`cut_rule`'s pipelines) is tokenised whole.
    """
    texts = list(texts)
    groups = text_groups(texts, min_shared)
    verdict = cut_rule(backend) if groups else None
    cut_groups = []
    if verdict is not None:
        rule, right = verdict
        for members, shared in groups:
            c = find_cut(texts[members[0]][:shared], rule)
            if c is not None and (len(members) - 1) * c - (len(texts[members[0]]) - c) >= min_saved:
                cut_groups.append((members, c))
    if not cut_groups:
        return [e.ids for e in backend.encode_batch_fast(texts, add_special_tokens=add_special_tokens)]
    right = right if add_special_tokens else 0
    grouped = {i for members, _ in cut_groups for i in members[1:]}
    whole_at = [i for i in range(len(texts)) if i not in grouped]
    out: list[list[int] | None] = [None] * len(texts)
    for i, e in zip(
        whole_at, backend.encode_batch_fast([texts[i] for i in whole_at], add_special_tokens=add_special_tokens)
    ):
        out[i] = e.ids
    tails = backend.encode_batch_fast(
        [texts[i][c:] for members, c in cut_groups for i in members], add_special_tokens=False
    )
    at = 0
    retry = []
    for members, _ in cut_groups:
        first = out[members[0]]
        tail_ids = [tails[at + j].ids for j in range(len(members))]
        at += len(members)
        head = len(first) - right - len(tail_ids[0])
        if head < 0 or first[head : len(first) - right] != tail_ids[0]:
            retry.extend(members[1:])  # the cut is not where the argument puts it: tokenise the group whole
            continue
        start, end = first[:head], first[len(first) - right :]
        for i, ids in zip(members[1:], tail_ids[1:]):
            out[i] = start + ids + end
    if retry:
        for i, e in zip(
            retry, backend.encode_batch_fast([texts[i] for i in retry], add_special_tokens=add_special_tokens)
        ):
            out[i] = e.ids
    return out
