"""The planner: loglikelihood requests and a tokenizer → one :class:`QuestionPlan` per question.

Pure of any model: it groups the harness's requests into questions (same task, doc and prompt),
tokenises the prompts, resolves each question's answer ids by the single-token rule training
uses too (:func:`~lm_eval_evidential.modeling.encoding.answer_token_ids`), "(A)"-style labels
by their shared prefix, the phantom labels' ids, and refuses a question that cannot be scored
(a choice of several tokens, a prompt over ``max_length``) before any forward pass. Each plan
carries its prompt's token ids; the backends forward them (:mod:`lm_eval_evidential.harness.scoring`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lm_eval_evidential.errors import EvidentialInputError
from lm_eval_evidential.modeling.encoding import (
    ANSWER_TOKEN_FIX,
    answer_token_ids,
    phantom_labels,
    phantom_token_ids,
    prompt_tail,
    shared_prefix_split,
)
from lm_eval_evidential.modeling.prefix_tokens import encode_shared_prefixes

# Stock lm_eval tasks whose choices are answer texts, and this package's task with the same
# questions answered by letter (named when the stock task is refused).
EDL_ALTERNATIVES = {
    "openbookqa": "obqa_edl",
    "arc_challenge": "arc_c_edl",
    "arc_easy": "arc_e_edl",
    "commonsense_qa": "csqa_edl",
    "mmlu_college_mathematics": "mmlu_math_edl",
    "mmlu_high_school_mathematics": "mmlu_math_edl",
    "mmlu_abstract_algebra": "mmlu_math_edl",
}

# A lettered task's label that is not one token for this tokenizer (" H" of a view's 8th option).
LETTERS_BEYOND_TOKENS_FIX = (
    "this tokenizer has no single token for that letter, so questions with that many options cannot be scored "
    "by this model: drop them (e.g. a process_docs that keeps questions with fewer options), or evaluate the "
    "stock task with --model hf"
)

# The differing token of "(A)"-style labels: a letter or digit or two (modeling/encoding.py: shared_prefix_split).
_LABEL_TOKEN = re.compile(r"[A-Za-z0-9]{1,2}")

#: A (prompt tail, choices) whose answer ids are checked on every whole prompt (QuestionPlanner.answer_ids_at_tail).
FULL_CHECK = object()


@dataclass(frozen=True)
class QuestionPlan:
    """The requests of one question (same task, doc and prompt), planned before any forward pass.

    ``prompt`` names the forwarded prompt (the context, or the context plus "(A)"-style labels'
    shared prefix); ``prompt_ids`` are its tokens. Questions with one prompt share one forward pass.
    """

    task: str | None
    doc_id: int | None
    prompt: str
    prompt_ids: list[int]
    continuations: tuple[str, ...]
    answer_ids: tuple[int, ...]
    copies: list[list[int]]  # per choice: the positions of its request (and of padding copies)
    where: str
    phantom_ids: tuple[int, ...] = ()  # the next labels' tokens (" E".." H" after " A".." D")


def fast_backend(tokenizer: Any):
    """The 🤗 tokenizers ``Tokenizer`` behind ``tokenizer`` where calling ``tokenizer(texts)`` is its
    ``encode_batch`` and nothing more, else None.

    That is transformers' own call of it (``TokenizersBackend`` not overriding the call or its ``_encode_plus``,
    as it does for a chat-marked or pretokenised text), with no truncation or padding set on the backend (the
    call would switch them off first) and special tokens split as the call would split them.
    """
    try:
        from transformers.tokenization_utils_base import PreTrainedTokenizerBase
        from transformers.tokenization_utils_tokenizers import TokenizersBackend
    except ImportError:  # transformers before 5
        return None
    kind = type(tokenizer)
    if not (
        isinstance(tokenizer, TokenizersBackend)
        and kind.__call__ is PreTrainedTokenizerBase.__call__
        and kind._encode_plus is TokenizersBackend._encode_plus
    ):
        return None
    backend = tokenizer.backend_tokenizer
    if not hasattr(backend, "encode_batch_fast") or backend.truncation is not None or backend.padding is not None:
        return None
    if backend.encode_special_tokens != bool(getattr(tokenizer, "split_special_tokens", False)):
        return None
    return backend


def too_long_fix(max_length: int, context: int) -> str:
    """What to do about a prompt longer than ``max_length``: raise it while the model's ``context`` allows."""
    if not context or max_length < context:
        room = f" (the model's context is {context} tokens)" if context else ""
        return f"raise max_length in --model_args{room}"
    return (
        f"it is longer than the model's context of {context} tokens too: shorten the prompt "
        "(fewer --num_fewshot examples, a shorter --system_instruction or task template)"
    )


class QuestionPlanner:
    """Plans questions for one tokenizer, as a backend's ``tok_encode`` encodes them.

    ``tokenizer`` is a transformers tokenizer (batched ``__call__``, ``decode``); ``encode`` is the
    backend's ``tok_encode`` (its special-token rule); ``prefix_token_id`` and ``add_bos_token`` are
    the backend's own. What it learns about a tokenizer (answer ids per prompt tail) it keeps: the
    same tail is checked in full once.
    """

    def __init__(
        self,
        tokenizer: Any,
        encode: Callable[[str], list[int]],
        *,
        prefix_token_id: int | None,
        add_bos_token: bool | None,
        phantom_count: int,
    ) -> None:
        self.tokenizer = tokenizer
        self.encode = encode
        self.prefix_token_id = prefix_token_id
        self.add_bos_token = add_bos_token
        self.phantom_count = phantom_count
        #: (tail, choices) -> (tail ids, answer ids, checked on a whole prompt) or FULL_CHECK; this tokenizer's.
        self._tail_answers: dict = {}
        #: (tail, phantom labels, answer ids) -> (tail ids, phantom ids), checked on a whole prompt.
        self._tail_phantoms: dict = {}
        #: continuations -> their phantom labels (:func:`phantom_labels`).
        self._phantom_labels: dict = {}
        #: (tail, choices) -> (tail ids, "(A)" prefix ids, answer ids, checked on a whole prompt) or FULL_CHECK.
        self._tail_splits: dict = {}

    # ------------------------------------------------------------------ the plan
    def plan(self, requests, *, max_length: int, model_context: Callable[[], int]) -> list[QuestionPlan]:
        """Group requests into questions and check each one; nothing is forwarded.

        The K choices of one (task, doc) share one prompt. Under data parallel the harness pads
        a shorter rank by repeating its last request object: copies of one request share its
        response (distinct requests still collide). Prompts are tokenised together (one batched
        tokenizer call, :meth:`encode_prompts`), answer ids resolved per prompt tail
        (:meth:`answer_ids_at_tail`). ``model_context`` gives the model's context (read only to
        word a refusal).
        """
        grouped: dict[tuple, dict[int, list[int]]] = defaultdict(dict)
        continuation: dict[int, str] = {}  # each request object's choice, read once
        for i, req in enumerate(requests):
            context, choice = req.args
            key = (getattr(req, "task_name", None), getattr(req, "doc_id", None), context)
            copies = grouped[key].get(id(req))
            if copies is None:
                grouped[key][id(req)] = [i]
                continuation[id(req)] = choice
            else:
                copies.append(i)
        contexts = list(dict.fromkeys(context for _, _, context in grouped))
        context_ids: dict[str, list[int]] = dict(zip(contexts, self.encode_prompts(contexts)))
        for task, doc_id, context in grouped:
            if len(context_ids[context]) > max_length:
                raise EvidentialInputError(
                    f"task {task!r} doc {doc_id}: prompt is {len(context_ids[context])} tokens, longer than "
                    f"max_length={max_length}; "
                    f"{too_long_fix(max_length, model_context())} (the evidential model never truncates a question)"
                )
        plans = []
        for (task, doc_id, context), options in grouped.items():
            copies = list(options.values())
            where = f"task {task!r} doc {doc_id}"
            continuations = tuple(continuation[r] for r in options)
            ids = context_ids[context]
            prefix, answer_ids = self.split_answers(context, ids, continuations, task, where)
            if prefix:  # "(A)"-style labels: the prompt is scored with their shared prefix, as its own context
                ids = ids + prefix
                prompt = f"{context}\x00prefix{tuple(prefix)}"
                if len(ids) > max_length:
                    raise EvidentialInputError(
                        f"{where}: prompt and the labels' shared prefix are {len(ids)} tokens, longer than "
                        f"max_length={max_length}; {too_long_fix(max_length, model_context())}"
                    )
                phantom_ids = ()  # phantom labels follow single-token letters only
            else:
                prompt = context
                phantom_ids = self.phantom_ids(context, ids, continuations, answer_ids)
            plans.append(QuestionPlan(task, doc_id, prompt, ids, continuations, answer_ids, copies, where, phantom_ids))
        return plans

    # ------------------------------------------------------------------ tokenisation
    def encode_prompts(self, contexts: list[str]) -> list[list[int]]:
        """``tok_encode(context)`` of every context, by one batched tokenizer call per special-token setting.

        The same ids as the harness's ``tok_encode``, string by string: its special-token rule
        (``add_bos_token``; none added to a string that already starts with the BOS text) is
        applied per string, then the strings of each setting are encoded together.
        """
        from lm_eval_evidential.lm_eval_compat import has_bos_prefix, tokenizer_kwargs

        bos_text = self.tokenizer.decode(self.prefix_token_id)
        default = tokenizer_kwargs(self.add_bos_token)
        groups: dict[bool, list[int]] = defaultdict(list)
        for i, context in enumerate(contexts):
            groups[has_bos_prefix(context, bos_text)].append(i)
        out: list[list[int]] = [[] for _ in contexts]
        for starts_with_bos, members in groups.items():
            kwargs = {"add_special_tokens": False} if starts_with_bos else default
            for i, ids in zip(members, self.encode_batch([contexts[i] for i in members], **kwargs)):
                out[i] = list(ids)
        return out

    def encode_batch(self, texts: list[str], **kwargs) -> list[list[int]]:
        """``tokenizer(texts, **kwargs)["input_ids"]`` (``kwargs``: ``add_special_tokens`` or nothing).

        Where the tokenizer is transformers' wrapper of a 🤗 tokenizers ``Tokenizer`` whose call adds nothing to
        the backend's (:func:`fast_backend`), the backend's ``encode_batch_fast``: the same ids, without the
        character offsets and transformers' conversion of each text's encoding, which were about a tenth of
        the call on benchmarks/bench_throughput.py's prompts. Texts that share a long prefix (a few-shot block)
        are tokenised with it once where that is exact (:mod:`~lm_eval_evidential.modeling.prefix_tokens`).
        """
        backend = fast_backend(self.tokenizer)
        if backend is None or set(kwargs) - {"add_special_tokens"}:
            return self.tokenizer(texts, **kwargs)["input_ids"]
        return encode_shared_prefixes(backend, texts, add_special_tokens=kwargs.get("add_special_tokens", True))

    def answer_ids(self, context: str, context_ids: list[int], continuations, task, where: str) -> tuple[int, ...]:
        """The answer ids by the rule training uses too (``modeling.encoding.answer_token_ids``): the full check."""
        # a shipped task with the same questions, and the stock task's lettered view (tasks/lettered.py)
        lettered = task is not None and str(task).endswith("_edl")  # lettered already: no view of a view
        views = [v for v in (EDL_ALTERNATIVES.get(str(task)), task and not lettered and f"{task}_edl") if v]
        fix = (
            f"use {' or '.join(views)}, the same questions with lettered options (docs/tasks.md: Lettered views)"
            if views
            else LETTERS_BEYOND_TOKENS_FIX
            if lettered
            else ANSWER_TOKEN_FIX
        )
        wholes = [self.encode(context + cont) for cont in continuations]
        return tuple(answer_token_ids(context_ids, wholes, continuations, where, fix=fix))

    def answer_ids_at_tail(
        self, context: str, context_ids: list[int], continuations, task, where: str
    ) -> tuple[int, ...]:
        """:meth:`answer_ids` (``encode(prompt + choice)`` is the prompt's ids plus one token), resolved
        once per prompt tail instead of K+1 tokenisations of every prompt.

        A task's prompts end alike (``…\\nAnswer:``), and appending a choice changes the tokens at the
        prompt's end only: the tokenizer splits words and lines before it merges (byte-level BPE's
        pre-tokeniser; SentencePiece's word boundaries). So the check runs on the prompt's last line
        with text (:func:`~lm_eval_evidential.modeling.encoding.prompt_tail`) once per (tail,
        choices), and, once per tail, on the first whole prompt that has it, in full; every
        further prompt with that tail must end in the tail's own tokens (its tokenisation splits
        where the tail starts, the boundary check). Whatever is not shown that way — a one-line
        prompt, a tail whose check fails, a prompt not split at its tail, a tail whose full check
        disagrees — takes the full check, which refuses (and names the fix) exactly as before.
        """
        tail = prompt_tail(context)
        if tail is None:
            return self.answer_ids(context, context_ids, continuations, task, where)
        key = (tail, continuations)
        known = self._tail_answers.get(key)
        if known is None:
            known = self._tail_answers[key] = self.tail_check(tail, continuations)
        if known is FULL_CHECK:
            return self.answer_ids(context, context_ids, continuations, task, where)
        tail_ids, answer_ids, verified = known
        if len(context_ids) <= len(tail_ids) or context_ids[len(context_ids) - len(tail_ids) :] != tail_ids:
            return self.answer_ids(context, context_ids, continuations, task, where)
        if not verified:
            full = self.answer_ids(context, context_ids, continuations, task, where)
            self._tail_answers[key] = (tail_ids, answer_ids, True) if full == answer_ids else FULL_CHECK
            return full
        return answer_ids

    def tail_encodings(self, tail: str, endings) -> tuple[list[int], list[list[int]]]:
        """``(ids of tail, [ids of tail + ending, …])``, tokenised alone (no special tokens) in one batched call:
        what the checks on a prompt's tail (:meth:`tail_check`, :meth:`tail_split`, :meth:`phantom_ids`) read."""
        encoded = self.tokenizer([tail, *(tail + e for e in endings)], add_special_tokens=False)["input_ids"]
        return list(encoded[0]), [list(w) for w in encoded[1:]]

    def tail_check(self, tail: str, continuations) -> tuple[list[int], tuple[int, ...], bool] | object:
        """The answer-id check on ``tail`` alone (no special tokens): one batched tokenizer call."""
        tail_ids, wholes = self.tail_encodings(tail, continuations)
        n = len(tail_ids)
        if not all(len(w) == n + 1 and w[:n] == tail_ids for w in wholes) or len({w[-1] for w in wholes}) != len(
            wholes
        ):
            return FULL_CHECK
        return tail_ids, tuple(w[-1] for w in wholes), False

    def phantom_ids(self, context: str, context_ids: list[int], continuations, answer_ids) -> tuple[int, ...]:
        """The tokens of the labels after the question's last one (:func:`phantom_labels`) that pass the
        single-token rule after this prompt (:func:`phantom_token_ids`); () when there are none.

        Resolved like the answers (:meth:`answer_ids_at_tail`): in full on the first prompt with a
        given tail, and reused for every later prompt that ends in the tail's own tokens when the
        check on the tail alone agrees; otherwise in full on each prompt (``phantom_count`` more
        tokenisations of that prompt).
        """
        phantoms = self._phantom_labels.get(continuations)
        if phantoms is None:  # a task's questions share their labels: worked out once per label set
            phantoms = self._phantom_labels[continuations] = phantom_labels(continuations, self.phantom_count)
        if not phantoms:
            return ()
        tail = prompt_tail(context)
        known = self._tail_phantoms.get((tail, phantoms, answer_ids)) if tail is not None else None
        if known is not None:
            tail_ids, ids = known
            if len(context_ids) > len(tail_ids) and context_ids[len(context_ids) - len(tail_ids) :] == tail_ids:
                return ids
        ids = phantom_token_ids(context_ids, [self.encode(context + p) for p in phantoms], answer_ids)
        if tail is not None and known is None:
            tail_ids, wholes = self.tail_encodings(tail, phantoms)
            if phantom_token_ids(tail_ids, wholes, answer_ids) == ids:
                self._tail_phantoms[(tail, phantoms, answer_ids)] = (tail_ids, ids)
        return ids

    def split_answers(self, context, context_ids, continuations, task, where) -> tuple[list[int], tuple[int, ...]]:
        """``(prefix ids, answer ids)``: single-token choices (no prefix), else "(A)"-style labels.

        Labels that share a token prefix and differ in exactly one token, a letter or digit
        (:func:`~lm_eval_evidential.modeling.encoding.shared_prefix_split`), are read at that token,
        after the prompt plus the prefix; anything else is refused with the single-token message.

        The split is resolved like single-token answers (:meth:`answer_ids_at_tail`): on the
        prompt's tail alone once per (tail, choices) (:meth:`tail_split`), verified by the full path
        on the first whole prompt that ends in the tail's own tokens, and reused for every further
        such prompt, instead of 2K tokenisations of each prompt (K for the single-token check, K for
        the split). Whatever is not shown that way takes the full path, which refuses exactly as before.
        """
        tail = prompt_tail(context)
        known = None
        if tail is not None:
            known = self._tail_splits.get((tail, continuations))
            if known is None:
                known = self._tail_splits[(tail, continuations)] = self.tail_split(tail, continuations)
        at_tail = isinstance(known, tuple) and (
            len(context_ids) > len(known[0]) and context_ids[len(context_ids) - len(known[0]) :] == known[0]
        )
        if at_tail and known[3]:
            return list(known[1]), known[2]
        try:
            prefix, answer_ids = [], self.answer_ids_at_tail(context, context_ids, continuations, task, where)
        except EvidentialInputError as error:
            wholes = [self.encode(context + c) for c in continuations]
            n = len(context_ids)
            split = shared_prefix_split([w[n:] for w in wholes]) if all(w[:n] == context_ids for w in wholes) else None
            if split is not None and not all(
                _LABEL_TOKEN.fullmatch(self.tokenizer.decode([t]).strip()) for t in split[1]
            ):
                split = None  # answer texts that happen to differ in one token ("a ruler", "a clock") are not labels
            if split is None:
                head, dash, fix = str(error).partition(" — ")
                raise EvidentialInputError(
                    f"{head}, nor do the choices share a token prefix and differ in exactly one token (as ' (A)', "
                    f"' (B)' do){dash}{fix}"
                ) from None
            prefix, answer_ids = split[0], tuple(split[1])
        if at_tail:  # the first whole prompt with this tail: the tail's split holds only if it agrees
            agrees = (prefix, answer_ids) == (known[1], known[2])
            self._tail_splits[(tail, continuations)] = (*known[:3], True) if agrees else FULL_CHECK
        return prefix, answer_ids

    def tail_split(self, tail: str, continuations) -> tuple[list[int], list[int], tuple[int, ...], bool] | object:
        """The "(A)"-label split on ``tail`` alone (no special tokens), one batched tokenizer call:
        ``(tail ids, prefix ids, answer ids, False)``, or FULL_CHECK where the tail's tokens change,
        the choices do not split, or every choice is one token (:meth:`answer_ids_at_tail`'s case).
        """
        tail_ids, wholes = self.tail_encodings(tail, continuations)
        n = len(tail_ids)
        if not n or not all(w[:n] == tail_ids for w in wholes) or all(len(w) == n + 1 for w in wholes):
            return FULL_CHECK
        split = shared_prefix_split([w[n:] for w in wholes])
        return FULL_CHECK if split is None else (tail_ids, split[0], tuple(split[1]), False)
