"""What evaluation and training both feed the model, computed once: answer-token ids, left
padding, last-position logits.

``--model evidential`` and ``lm-eval-evidential train`` call these same functions, so the
logits a model is trained on are exactly the logits it is later scored on: the answer ids are
read off the tokenizer the way lm-eval scores a continuation (encode(prompt + answer) minus
encode(prompt), exactly one token), rows are left-padded with position ids that count real
tokens only (a row's positions are those it has alone), and only the last position goes
through the output layer (``logits_to_keep=1``).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain

import numpy as np
import torch

from lm_eval_evidential.errors import AnswerTokenError

__all__ = [
    "AnswerTokenError",
    "PHANTOM_COUNT",
    "answer_token_ids",
    "phantom_labels",
    "phantom_token_ids",
    "prompt_tail",
    "shared_prefix_split",
    "left_pad",
    "last_position_logits",
]


#: What to do about an answer that is not one token, unless the caller knows better (a letter-answered twin task).
ANSWER_TOKEN_FIX = (
    "use a task whose choices are answer letters, e.g. the *_edl tasks (labels ' A'..' E') or your own "
    "(docs/tasks.md: Your own tasks), or a tokenizer that has them as single tokens"
)


def answer_token_ids(
    prompt_ids: Sequence[int],
    encoded: Sequence[Sequence[int]],
    answers: Sequence[str],
    where: str,
    *,
    fix: str = ANSWER_TOKEN_FIX,
) -> list[int]:
    """The token id each answer appends to the prompt: the one rule of training and evaluation.

    ``encoded[i]`` is the tokenizer's encoding of ``prompt + answers[i]``; it must be
    ``prompt_ids`` plus exactly one token, and the K tokens must differ, else
    :class:`~lm_eval_evidential.errors.AnswerTokenError` naming ``where`` (task and doc), the
    choice, its tokens and ``fix``.

    Examples
    --------
    >>> answer_token_ids([1, 5], [[1, 5, 9], [1, 5, 7]], [" A", " B"], "doc 0")
    [9, 7]
    """
    prompt_ids = list(prompt_ids)
    ids = []
    for answer, whole in zip(answers, encoded):
        whole = list(whole)
        if len(whole) != len(prompt_ids) + 1 or whole[: len(prompt_ids)] != prompt_ids:
            pieces = whole[len(prompt_ids) :] if whole[: len(prompt_ids)] == prompt_ids else whole[-3:]
            raise AnswerTokenError(
                f"{where}: choice {answer!r} is {len(pieces)} tokens {pieces} after the prompt for this tokenizer; "
                "an evidential model reads one answer token per choice, so every choice must be a single token "
                f"— {fix}"
            )
        ids.append(int(whole[-1]))
    if len(set(ids)) != len(ids):
        raise AnswerTokenError(
            f"{where}: answer labels {list(answers)} share token ids {ids}; each label must be its own token"
        )
    return ids


#: Phantom options kept per question by default: the labels after a question's last one (" E".." H"
#: after " A".." D"), as many as McNamara (2026), Table 1 appends (x <= 4).
PHANTOM_COUNT = 4

_LABEL_RUNS = ("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz", "0123456789")


def phantom_labels(labels: Sequence[str], count: int = PHANTOM_COUNT) -> tuple[str, ...]:
    """The next ``count`` labels after a question's own: ``(" E", " F")`` after ``(" A", .., " D")``.

    The labels must share one prefix and end in consecutive letters (or digits) of one run,
    A-Z, a-z or 0-9; the phantoms continue that run (never past its end). Any other labels
    (texts, gaps such as A, B, D) have no phantoms: the empty tuple.

    Examples
    --------
    >>> phantom_labels([" A", " B", " C", " D"], 2)
    (' E', ' F')
    >>> phantom_labels(["X", "Y", "Z"], 4)
    ()
    >>> phantom_labels([" yes", " no"], 4)
    ()
    """
    if not labels or count <= 0:
        return ()
    prefix, first = labels[0][:-1], labels[0][-1:]
    run = next((r for r in _LABEL_RUNS if first and first in r), None)
    if run is None:
        return ()
    start = run.index(first)
    if list(labels) != [prefix + run[start + i] for i in range(len(labels)) if start + i < len(run)]:
        return ()
    end = start + len(labels)
    return tuple(prefix + c for c in run[end : end + count])


def phantom_token_ids(
    prompt_ids: Sequence[int], encoded: Sequence[Sequence[int]], taken: Sequence[int]
) -> tuple[int, ...]:
    """The single tokens the phantom labels append to the prompt, up to the first that is not one.

    ``encoded[i]`` is the encoding of ``prompt + phantom_labels(...)[i]``; a phantom is kept while
    it is ``prompt_ids`` plus exactly one token that no answer (``taken``) nor earlier phantom has,
    the single-token rule of :func:`answer_token_ids`. Phantom j is therefore always the j-th next
    label, never a later one standing in for a label that failed.

    Examples
    --------
    >>> phantom_token_ids([1, 5], [[1, 5, 11], [1, 5, 12, 3], [1, 5, 13]], taken=[9, 10])
    (11,)
    """
    prompt_ids, seen, ids = list(prompt_ids), set(taken), []
    for whole in encoded:
        whole = list(whole)
        if len(whole) != len(prompt_ids) + 1 or whole[: len(prompt_ids)] != prompt_ids or whole[-1] in seen:
            break
        ids.append(int(whole[-1]))
        seen.add(int(whole[-1]))
    return tuple(ids)


# Longer last lines (a question rather than a template's cue such as "Answer:") are not shared
# by a task's prompts: resolving answer ids by such a tail would only add tokenisations.
MAX_TAIL_CHARS = 100


def prompt_tail(prompt: str) -> str | None:
    """The prompt from the start of its last line with text (trailing blank lines included): where
    an appended answer can change the prompt's tokens. None for a one-line prompt or a last line
    longer than ``MAX_TAIL_CHARS``.

    Examples
    --------
    >>> prompt_tail("Question: why?\\nChoices:\\nA) yes\\nAnswer:")
    'Answer:'
    >>> prompt_tail("<|im_start|>user\\nWhy?<|im_end|>\\n<|im_start|>assistant\\n")
    '<|im_start|>assistant\\n'
    >>> prompt_tail("Question? Answer:") is None
    True
    >>> prompt_tail("Read this.\\n" + "A question on the last line? " * 4) is None
    True
    """
    cut = prompt.rstrip().rfind("\n") + 1
    return prompt[cut:] if 0 < cut and len(prompt) - cut <= MAX_TAIL_CHARS else None


def shared_prefix_split(continuations_ids: list[list[int]]) -> tuple[list[int], list[int]] | None:
    """``(prefix, answer ids)`` where every choice is ``prefix + [its own token] + a shared tail``, else None.

    " (A)", " (B)" are three tokens each for most tokenizers (" (", "A", ")"): they share the
    prefix " (" and the tail ")", and differ in one token. The prefix then belongs to the
    prompt, and the choice's evidence is read at the differing token: the K-class classifier
    over answer labels is the model's next-token logits after ``prompt + prefix``. The tail is
    not scored (it is the same for every choice). None where the choices differ in more than
    one token, or in none, or share a differing token.

    Examples
    --------
    >>> shared_prefix_split([[506, 36, 12], [506, 37, 12], [506, 38, 12]])
    ([506], [36, 37, 38])
    >>> shared_prefix_split([[506, 36, 12], [506, 37, 40, 12]]) is None
    True
    """
    if len(continuations_ids) < 2 or any(not ids for ids in continuations_ids):
        return None
    n = min(len(ids) for ids in continuations_ids)
    start = 0
    while start < n and len({ids[start] for ids in continuations_ids}) == 1:
        start += 1
    tails = {tuple(ids[start + 1 :]) for ids in continuations_ids}
    answers = [ids[start] for ids in continuations_ids if len(ids) > start]
    if len(tails) != 1 or len(answers) != len(continuations_ids) or len(set(answers)) != len(answers):
        return None
    return list(continuations_ids[0][:start]), answers


def left_pad(rows: Sequence[Sequence[int]], pad_token_id: int | None) -> dict[str, torch.Tensor]:
    """``input_ids``, ``attention_mask`` and ``position_ids`` (B, width) of left-padded ``rows``.

    Positions count real tokens only, so a padded row sees the positions it has alone; the
    pad id is masked out (0 when the tokenizer has none).
    """
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    width = int(lengths.max())
    # one array for the batch, filled in one assignment from the concatenated ids (no array per row):
    # a row's real tokens are the right end of it, so row-major order of the mask is their order
    real = np.arange(width)[None, :] >= (width - lengths)[:, None]
    ids = np.full((len(rows), width), 0 if pad_token_id is None else int(pad_token_id), dtype=np.int64)
    ids[real] = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=int(lengths.sum()))
    positions = np.maximum(real.cumsum(axis=1) - 1, 0)
    return {
        "input_ids": torch.from_numpy(ids),
        "attention_mask": torch.from_numpy(real.astype(np.int64)),
        "position_ids": torch.from_numpy(positions),
    }


def last_position_logits(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor
) -> torch.Tensor:
    """Logits (B, V) at the last position of a left-padded batch; only that position is projected."""
    out = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids,
        logits_to_keep=1,
        use_cache=False,
    )
    return out.logits[:, -1, :]
