"""``--model evidential``: a causal LM (+ optional PEFT adapter) read as a K-class evidential classifier.

Loading, devices, dtype, batch size, data parallel and PEFT come from the harness's HFLM.
What differs is scoring: each distinct prompt is forwarded once (a question's K requests,
and identical prompts of different tasks, share it), batches are left-padded with explicit
position ids so the last position is every row's real last token, and only the last
position's logits are computed (``logits_to_keep=1``) — never full-vocabulary logits for
every position. Each loglikelihood response is the harness's ``(log p, is_greedy)``, here
``(log E[p_j], j is the argmax)``, so the harness's own ``acc`` is the EDL accuracy; the
question's evidence goes to the model's ledger, keyed by (task, doc)
(:mod:`lm_eval_evidential.harness.evidence`).
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import torch
from lm_eval.models.huggingface import HFLM
from tqdm import tqdm

from lm_eval_evidential.errors import (
    EvidentialInputError,
    InvalidValueError,
    UnsupportedRequestError,
)
from lm_eval_evidential.harness.evidence import EvidenceLedger, QuestionEvidence
from lm_eval_evidential.harness.loading_checks import (  # noqa: F401 (model_context, _local_folder: re-exported)
    _ADAPTER_FIT_HINT,
    _already_tied,
    _gguf_error,
    _local_folder,
    _unknown_arg_error,
    _wraps_tied_layer,
    check_adapter_files,
    check_adapter_fits,
    check_context,
    check_load_args,
    check_phantom_count,
    head_config,
    model_context,
    reference_head_settings,
    saved_embedding_rows,
)
from lm_eval_evidential.modeling.config import head_defaults
from lm_eval_evidential.modeling.encoding import (
    ANSWER_TOKEN_FIX,
    PHANTOM_COUNT,
    answer_token_ids,
    last_position_logits,
    left_pad,
    phantom_labels,
    phantom_token_ids,
    prompt_tail,
)
from lm_eval_evidential.modeling.heads import apply_head_batch, sigma_logits
from lm_eval_evidential.modeling.quiet import progress_options
from lm_eval_evidential.records.provenance import adapter_sha256, model_sha256

logger = logging.getLogger(__name__)
# Lines a user reads in the harness's own log (lm_eval configures its namespace, honouring --verbosity).
harness_logger = logging.getLogger("lm_eval.evidential")


# Launchers' world-size variables, as accelerate reads them (torchrun, MPI implementations).
_LAUNCHER_WORLD_SIZE = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")


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

# The differing token of "(A)"-style labels: a letter or digit or two (harness/lettered.py: shared_prefix_split).
_LABEL_TOKEN = re.compile(r"[A-Za-z0-9]{1,2}")

# A (prompt tail, choices) whose answer ids are checked on every whole prompt (EvidentialLM._answer_ids_at_tail).
_FULL_CHECK = object()


@dataclass(frozen=True)
class _Question:
    """The requests of one question (same task, doc and prompt), planned before any forward pass."""

    task: str | None
    doc_id: int | None
    context: str
    continuations: tuple[str, ...]
    answer_ids: tuple[int, ...]
    copies: list[list[int]]  # per choice: the positions of its request (and of padding copies)
    where: str
    phantom_ids: tuple[int, ...] = ()  # the next labels' tokens (" E".." H" after " A".." D")


class EvidentialLM(HFLM):
    """See the module docstring. Extra model_args: ``method`` (edl | ib_edl | softmax),
    ``prior_weight`` (λ, default 1), ``num_noises`` (20), ``sigma_mult`` (0), ``seed`` (0),
    ``phantom_count`` (4: the logits of up to that many labels after each question's last one,
    " E".." H" after " A".." D", kept in the records from the same forward pass). When ``peft``
    is a folder written by ``lm-eval-evidential train`` (it holds ``evidential_config.json``),
    the first four default to the values trained with; model_args given explicitly win."""

    def __init__(
        self,
        pretrained: Any = None,
        method: str | None = None,
        prior_weight: float | None = None,
        num_noises: int | None = None,
        sigma_mult: float | None = None,
        seed: int | None = None,
        phantom_count: int = PHANTOM_COUNT,
        **kwargs,
    ) -> None:
        from lm_eval_evidential.harness.plugin import check_harness, install_one_line_errors

        install_one_line_errors()  # plain lm_eval: an expected error of ours is one line, from here on
        check_harness()  # before gigabytes of weights load
        check_load_args(pretrained, kwargs)
        # None = not given: the adapter's metadata, then HeadConfig's defaults, fill it in.
        given = {"method": method, "prior_weight": prior_weight, "num_noises": num_noises, "sigma_mult": sigma_mult}
        stored = head_defaults(kwargs.get("peft")) or reference_head_settings(kwargs.get("peft")) or {}
        settings = {**stored, **{k: v for k, v in given.items() if v is not None}}
        # Validate the head before loading gigabytes of weights.
        self.head = head_config({**settings, **({} if seed is None else {"seed": seed})})
        self.phantom_count = check_phantom_count(phantom_count)
        self._max_length_arg = kwargs.get("max_length")
        self._pretrained_name = str(pretrained)
        self._peft_path = kwargs.get("peft")
        self._gguf_file = kwargs.get("gguf_file")
        self._revision = kwargs.get("revision", "main")
        self.evidence = EvidenceLedger()
        try:
            super().__init__(pretrained=pretrained, **kwargs)
        except TypeError as exc:
            raise _unknown_arg_error(exc) from exc
        except RuntimeError as exc:
            if self._peft_path and ("size mismatch" in str(exc) or "shape" in str(exc)):
                raise EvidentialInputError(
                    f"the adapter peft={self._peft_path} does not fit the base model pretrained={pretrained}: "
                    f"{str(exc).splitlines()[0]} … — {_ADAPTER_FIT_HINT}"
                ) from exc
            raise
        self.model.eval()
        if isinstance(pretrained, str) and not kwargs.get("tp_plan"):
            self._rank, self._world_size = self._global_rank()

    def _global_rank(self) -> tuple[int, int]:
        """(rank, world size) by the GLOBAL process index, for sharding the docs.

        HFLM sets them only when it sees more than one GPU, and then to the node-local index
        (``accelerator.local_process_index``): on 2 nodes x 2 GPUs two processes would each be
        rank 0 and rank 1 and half the docs never be scored. CPU processes it leaves at rank 0 of
        1. Tensor-parallel runs (``tp_plan``) and a model object passed in are one logical model
        and never come here.
        """
        accelerator = getattr(self, "accelerator", None)
        if accelerator is not None and accelerator.num_processes > 1:
            harness_logger.info(
                "data parallel: rank %d of %d (node-local rank %d)",
                accelerator.process_index,
                accelerator.num_processes,
                accelerator.local_process_index,
            )
            return accelerator.process_index, accelerator.num_processes
        sizes = {name: int(os.environ.get(name) or 1) for name in _LAUNCHER_WORLD_SIZE}
        name, launched = max(sizes.items(), key=lambda item: item[1])
        if launched > 1:
            raise EvidentialInputError(
                f"this process was launched as one of {launched} ({name}={launched}), but accelerate runs it "
                "alone: without a GPU it joins processes only when ACCELERATE_USE_CPU=1 is set, so the "
                f"{launched} processes would each score every document — relaunch with ACCELERATE_USE_CPU=1 "
                "(CPU), or launch one process per GPU"
            )
        return self._rank, self._world_size

    def _get_config(self, pretrained, *args, **kwargs) -> None:
        # The config loads before the tokenizer and the weights: a max_length beyond its context, and an
        # adapter of another base model, are refused here.
        super()._get_config(pretrained, *args, **kwargs)
        check_context(getattr(self, "_max_length_arg", None), self._config)
        check_adapter_fits(getattr(self, "_peft_path", None), self._config, pretrained)

    @cached_property
    def _identity(self) -> dict:
        """The model and the adapter by content (records/provenance.py), hashed once per process."""
        return {
            "model_sha256": model_sha256(_local_folder(self._pretrained_name, self._revision)),
            "adapter_sha256": adapter_sha256(_local_folder(self._peft_path, self._revision)),
        }

    def _create_model(
        self, pretrained, *args, peft=None, delta=None, revision="main", gguf_file=None, **kwargs
    ) -> None:
        if peft and delta:
            raise InvalidValueError("Cannot use both 'peft' and 'delta' options at the same time.")
        try:
            super()._create_model(pretrained, *args, revision=revision, gguf_file=gguf_file, delta=delta, **kwargs)
        except NotImplementedError as exc:
            raise _gguf_error(gguf_file, exc) if gguf_file else exc  # noqa: B904 (exc itself, or our message for it)
        if not peft:
            return
        from peft import PeftModel

        from lm_eval_evidential.modeling.quiet import peft_wrapping

        # Not HFLM's resize to len(tokenizer): an output layer padded beyond the tokenizer
        # (Qwen2.5: 151,936 rows for 151,665 tokens) would be cut and an lm_head adapter no
        # longer fit. Only an adapter that saved resized embeddings (added tokens) resizes, to its rows.
        rows = saved_embedding_rows(peft)
        if rows is not None and rows != self._model.get_input_embeddings().weight.shape[0]:
            self._model.resize_token_embeddings(rows)
        with peft_wrapping():
            self._model = PeftModel.from_pretrained(self._model, peft, revision=revision)
        if _wraps_tied_layer(self._model):
            # from_pretrained tied the base already. HFLM then calls model.tie_weights(), and
            # transformers cannot re-tie a layer PEFT has wrapped (KeyError: "attribute 'weight'
            # already exists"), which is what breaks --model hf on tied-embedding bases
            # (Llama-3.2, SmolLM, Qwen2.5, Gemma) with an lm_head adapter. The tie still holds.
            self._model.tie_weights = _already_tied

    @classmethod
    def create_from_arg_string(cls, arg_string: str, additional_config: dict | None = None):
        from lm_eval.utils import simple_parse_args_string

        return cls.create_from_arg_obj(simple_parse_args_string(arg_string), additional_config)

    @classmethod
    def create_from_arg_obj(cls, arg_dict: dict, additional_config: dict | None = None):
        # The CLI passes its own --device/--batch_size as additional_config; a value given
        # explicitly in --model_args wins instead of raising "multiple values for keyword".
        extra = {k: v for k, v in (additional_config or {}).items() if v is not None and k not in arg_dict}
        return cls(**arg_dict, **extra)

    # ------------------------------------------------------------------ tokenisation
    def _answer_ids(self, context: str, context_ids: list[int], continuations, task, where: str) -> tuple[int, ...]:
        """The answer ids by the rule training uses too (``modeling.encoding.answer_token_ids``)."""
        # a shipped task with the same questions, and the stock task's lettered view (harness/lettered.py)
        lettered = task is not None and str(task).endswith("_edl")  # lettered already: no view of a view
        views = [v for v in (EDL_ALTERNATIVES.get(str(task)), task and not lettered and f"{task}_edl") if v]
        fix = (
            f"use {' or '.join(views)}, the same questions with lettered options (docs/tasks.md: Lettered views)"
            if views
            else LETTERS_BEYOND_TOKENS_FIX
            if lettered
            else ANSWER_TOKEN_FIX
        )
        wholes = [self.tok_encode(context + cont) for cont in continuations]
        return tuple(answer_token_ids(context_ids, wholes, continuations, where, fix=fix))

    def _encode_prompts(self, contexts: list[str]) -> list[list[int]]:
        """``tok_encode(context)`` of every context, by one batched tokenizer call per special-token setting.

        The same ids as the harness's ``tok_encode``, string by string: its special-token rule
        (``add_bos_token``; none added to a string that already starts with the BOS text) is
        applied per string, then the strings of each setting are encoded together.
        """
        from lm_eval_evidential.harness.lm_eval_compat import has_bos_prefix, tokenizer_kwargs

        bos_text = self.tokenizer.decode(self.prefix_token_id)
        default = tokenizer_kwargs(self.add_bos_token)
        groups: dict[bool, list[int]] = defaultdict(list)
        for i, context in enumerate(contexts):
            groups[has_bos_prefix(context, bos_text)].append(i)
        out: list[list[int]] = [[] for _ in contexts]
        for starts_with_bos, members in groups.items():
            kwargs = {"add_special_tokens": False} if starts_with_bos else default
            for i, ids in zip(members, self.tokenizer([contexts[i] for i in members], **kwargs)["input_ids"]):
                out[i] = list(ids)
        return out

    def _answer_ids_at_tail(
        self, context: str, context_ids: list[int], continuations, task, where: str
    ) -> tuple[int, ...]:
        """:meth:`_answer_ids` (``encode(prompt + choice)`` is the prompt's ids plus one token), resolved
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
            return self._answer_ids(context, context_ids, continuations, task, where)
        key = (tail, continuations)
        known = self._tail_answers.get(key)
        if known is None:
            known = self._tail_answers[key] = self._tail_check(tail, continuations)
        if known is _FULL_CHECK:
            return self._answer_ids(context, context_ids, continuations, task, where)
        tail_ids, answer_ids, verified = known
        if len(context_ids) <= len(tail_ids) or context_ids[len(context_ids) - len(tail_ids) :] != tail_ids:
            return self._answer_ids(context, context_ids, continuations, task, where)
        if not verified:
            full = self._answer_ids(context, context_ids, continuations, task, where)
            self._tail_answers[key] = (tail_ids, answer_ids, True) if full == answer_ids else _FULL_CHECK
            return full
        return answer_ids

    def _phantom_ids(self, context: str, context_ids: list[int], continuations, answer_ids) -> tuple[int, ...]:
        """The tokens of the labels after the question's last one (:func:`phantom_labels`) that pass the
        single-token rule after this prompt (:func:`phantom_token_ids`); () when there are none.

        Resolved like the answers (:meth:`_answer_ids_at_tail`): in full on the first prompt with a
        given tail, and reused for every later prompt that ends in the tail's own tokens when the
        check on the tail alone agrees; otherwise in full on each prompt (``phantom_count`` more
        tokenisations of that prompt).
        """
        phantoms = phantom_labels(continuations, self.phantom_count)
        if not phantoms:
            return ()
        tail = prompt_tail(context)
        known = self._tail_phantoms.get((tail, phantoms, answer_ids)) if tail is not None else None
        if known is not None:
            tail_ids, ids = known
            if len(context_ids) > len(tail_ids) and context_ids[len(context_ids) - len(tail_ids) :] == tail_ids:
                return ids
        ids = phantom_token_ids(context_ids, [self.tok_encode(context + p) for p in phantoms], answer_ids)
        if tail is not None and known is None:
            encoded = self.tokenizer([tail, *(tail + p for p in phantoms)], add_special_tokens=False)["input_ids"]
            if phantom_token_ids(encoded[0], encoded[1:], answer_ids) == ids:
                self._tail_phantoms[(tail, phantoms, answer_ids)] = (list(encoded[0]), ids)
        return ids

    @cached_property
    def _tail_phantoms(self) -> dict:
        """(tail, phantom labels, answer ids) -> (tail ids, phantom ids), checked on a whole prompt."""
        return {}

    @cached_property
    def _tail_answers(self) -> dict:
        """(tail, choices) -> (tail ids, answer ids, checked on a whole prompt) or _FULL_CHECK; this tokenizer's."""
        return {}

    def _tail_check(self, tail: str, continuations) -> tuple[list[int], tuple[int, ...], bool] | object:
        """The answer-id check on ``tail`` alone (no special tokens): one batched tokenizer call."""
        encoded = self.tokenizer([tail, *(tail + c for c in continuations)], add_special_tokens=False)["input_ids"]
        tail_ids, wholes = list(encoded[0]), [list(w) for w in encoded[1:]]
        n = len(tail_ids)
        if not all(len(w) == n + 1 and w[:n] == tail_ids for w in wholes) or len({w[-1] for w in wholes}) != len(
            wholes
        ):
            return _FULL_CHECK
        return tail_ids, tuple(w[-1] for w in wholes), False

    # ------------------------------------------------------------------ forward
    def _last_logits(self, batch: list[list[int]]) -> torch.Tensor:
        """Last-position logits (B, V) of left-padded ``batch``, independent of padding."""
        padded = left_pad(batch, self.tokenizer.pad_token_id)
        with torch.inference_mode():
            return last_position_logits(self.model, **{k: v.to(self.device) for k, v in padded.items()})

    def _auto_batch_size(self, longest: list[int]) -> int:
        from accelerate.utils import find_executable_batch_size

        @find_executable_batch_size(starting_batch_size=self.max_batch_size)
        def probe(batch_size: int) -> int:
            self._last_logits([longest] * batch_size)
            return batch_size

        try:
            size = probe()
        except RuntimeError as exc:
            if "No executable batch size found" not in str(exc):
                raise
            size = 1
        logger.info("batch_size=auto: using %d", size)
        return size

    # ------------------------------------------------------------------ the harness API
    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        """The harness's contract: one ``(log p, is_greedy)`` per request, here ``(log E[p_j], j is argmax)``.

        The K requests of one question (same task, doc and prompt) are scored together; the
        question's answer logits and alpha are filed in :attr:`evidence` under (task, doc_id),
        the path by which they reach the records (:mod:`lm_eval_evidential.harness.evidence`).
        Every question is checked (single-token, distinct answers; prompt length) before any
        forward pass.
        """
        plans = self._plan(requests)
        needed: dict[str, dict[int, None]] = defaultdict(dict)  # a prompt's answer ids, first seen first
        for plan in plans:
            needed[plan.context].update(dict.fromkeys(plan.answer_ids + plan.phantom_ids))
        tail_k = max((len(p.answer_ids) for p in plans), default=0) if self.head.needs_sigma else 0
        answer_order = {c: list(v) for c, v in needed.items()}
        prompts = {c: self._context_ids[c] for c in answer_order}  # a "(A)" prompt is forwarded with its prefix only
        row_of, values, tails = self._forward_unique(prompts, answer_order, tail_k, disable_tqdm)
        kept = values.tolist()  # phantom logits are read per question (their number varies)

        results: list[Any] = [None] * len(requests)
        # The head runs once per group of questions with the same K (not once per question);
        # each question's result is bit-identical to it scored alone (apply_head_batch).
        by_k: dict[int, list[_Question]] = defaultdict(list)
        for plan in plans:
            by_k[len(plan.answer_ids)].append(plan)
        for k, group in by_k.items():
            rows = torch.tensor([row_of[p.context] for p in group], dtype=torch.long)
            columns = torch.tensor(
                [[answer_order[p.context].index(a) for a in p.answer_ids] for p in group], dtype=torch.long
            )
            z = values[rows[:, None], columns]
            finite = torch.isfinite(z).all(dim=1)
            if not bool(finite.all()):
                row = int((~finite).nonzero()[0, 0])
                bad = z[row][~torch.isfinite(z[row])][0].item()
                raise EvidentialInputError(
                    f"{group[row].where}: non-finite answer logit {bad!r} (float16 overflow?); run with "
                    "dtype=bfloat16 or dtype=float32"
                )
            sigma = sigma_logits(tails[rows], k) if self.head.needs_sigma else None
            keys = [f"{p.context}\x00{p.answer_ids}" for p in group] if self.head.needs_sigma else None
            out = apply_head_batch(self.head, z, sigma_logits=sigma, keys=keys)
            logits = out.logits.tolist()
            alpha = None if out.alpha is None else out.alpha.tolist()
            log_probs = torch.log(out.probs).tolist()
            preds = torch.argmax(out.probs, dim=1).tolist()
            for i, plan in enumerate(group):
                row = kept[row_of[plan.context]]
                phantom = [row[answer_order[plan.context].index(a)] for a in plan.phantom_ids]
                finite = next((j for j, v in enumerate(phantom) if not math.isfinite(v)), len(phantom))
                self.evidence.file(
                    QuestionEvidence(
                        task=plan.task,
                        doc_id=plan.doc_id,
                        continuations=plan.continuations,
                        token_ids=plan.answer_ids,
                        logits=tuple(logits[i]),
                        alpha=None if alpha is None else tuple(alpha[i]),
                        phantom_logits=tuple(phantom[:finite]),  # up to a float16 overflow, like the answers
                    )
                )
                for j, copies in enumerate(plan.copies):
                    for c in copies:
                        results[c] = (log_probs[i][j], j == preds[i])
        return results

    def _too_long_fix(self, max_length: int) -> str:
        """What to do about a prompt longer than ``max_length``: raise it while the model's context allows."""
        context = model_context(self._config)
        if not context or max_length < context:
            room = f" (the model's context is {context} tokens)" if context else ""
            return f"raise max_length in --model_args{room}"
        return (
            f"it is longer than the model's context of {context} tokens too: shorten the prompt "
            "(fewer --num_fewshot examples, a shorter --system_instruction or task template)"
        )

    def _plan(self, requests) -> list[_Question]:
        """Group requests into questions and check each one; nothing is forwarded yet.

        The K choices of one (task, doc) share one prompt. Under data parallel the harness pads
        a shorter rank by repeating its last request object: copies of one request share its
        response (distinct requests still collide). Prompts are tokenised together (one batched
        tokenizer call, :meth:`_encode_prompts`), answer ids resolved per prompt tail
        (:meth:`_answer_ids_at_tail`).
        """
        grouped: dict[tuple, dict[int, list[int]]] = defaultdict(dict)
        for i, req in enumerate(requests):
            context, _ = req.args
            key = (getattr(req, "task_name", None), getattr(req, "doc_id", None), context)
            grouped[key].setdefault(id(req), []).append(i)
        contexts = list(dict.fromkeys(context for _, _, context in grouped))
        self._context_ids: dict[str, list[int]] = dict(zip(contexts, self._encode_prompts(contexts)))
        plans = []
        max_length = self.max_length  # resolved from the model config on every access
        for task, doc_id, context in grouped:
            where = f"task {task!r} doc {doc_id}"
            if len(self._context_ids[context]) > max_length:
                raise EvidentialInputError(
                    f"{where}: prompt is {len(self._context_ids[context])} tokens, longer than "
                    f"max_length={max_length}; "
                    f"{self._too_long_fix(max_length)} (the evidential model never truncates a question)"
                )
        for (task, doc_id, context), options in grouped.items():
            copies = list(options.values())
            where = f"task {task!r} doc {doc_id}"
            continuations = tuple(requests[c[0]].args[1] for c in copies)
            prefix, answer_ids = self._split_answers(context, self._context_ids[context], continuations, task, where)
            if prefix:  # "(A)"-style labels: the prompt is scored with their shared prefix, as its own context
                ids = self._context_ids[context] + prefix
                context = f"{context}\x00prefix{tuple(prefix)}"
                self._context_ids[context] = ids
                if len(ids) > max_length:
                    raise EvidentialInputError(
                        f"{where}: prompt and the labels' shared prefix are {len(ids)} tokens, longer than "
                        f"max_length={max_length}; {self._too_long_fix(max_length)}"
                    )
                phantom_ids = ()  # phantom labels follow single-token letters only
            else:
                phantom_ids = self._phantom_ids(context, self._context_ids[context], continuations, answer_ids)
            plans.append(_Question(task, doc_id, context, continuations, answer_ids, copies, where, phantom_ids))
        return plans

    def _split_answers(self, context, context_ids, continuations, task, where) -> tuple[list[int], tuple[int, ...]]:
        """``(prefix ids, answer ids)``: single-token choices (no prefix), else "(A)"-style labels.

        Labels that share a token prefix and differ in exactly one token, a letter or digit
        (:func:`~lm_eval_evidential.harness.lettered.shared_prefix_split`), are read at that token,
        after the prompt plus the prefix; anything else is refused with the single-token message.
        """
        from lm_eval_evidential.harness.lettered import shared_prefix_split

        try:
            return [], self._answer_ids_at_tail(context, context_ids, continuations, task, where)
        except EvidentialInputError as error:
            wholes = [self.tok_encode(context + c) for c in continuations]
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
            return split[0], tuple(split[1])

    def records_meta(self) -> dict:
        """What produced this model's records: base model, adapter (and its content hash), head settings, dtype."""
        ib_edl = self.head.method == "ib_edl"
        return {
            "method": self.head.method,
            "prior_weight": self.head.prior_weight,
            "num_noises": self.head.num_noises if ib_edl else None,
            "sigma_mult": self.head.sigma_mult if ib_edl else None,
            "seed": self.head.seed if ib_edl else None,
            "phantom_count": self.phantom_count,
            "pretrained": self._pretrained_name,
            "gguf_file": self._gguf_file,
            "peft": None if self._peft_path is None else str(self._peft_path),
            "dtype": self._records_dtype(),
            "revision": self._revision,
            **self._identity,
        }

    def _records_dtype(self) -> str:
        return str(self.model.dtype).removeprefix("torch.")

    def set_cache_hook(self, cache_hook) -> None:
        # lm_eval's response cache (--use_cache) is keyed by the request text only: it would
        # return numbers computed with other model settings (method, adapter, prior weight)
        # and it cannot hold the evidence the records need.
        if getattr(cache_hook, "dbdict", None) is not None:
            raise EvidentialInputError(
                "--use_cache cannot apply to --model evidential: lm_eval's response cache is keyed by the prompt "
                "only, so it would return numbers computed with other model settings (method, adapter, prior "
                "weight) and it cannot hold the evidence the records need; drop --use_cache"
            )
        super().set_cache_hook(cache_hook)

    def _forward_unique(
        self, context_ids: dict[str, list[int]], needed: dict[str, list[int]], tail_k: int, disable_tqdm: bool
    ) -> tuple[dict[str, int], torch.Tensor, torch.Tensor | None]:
        """Forward each distinct prompt once, longest first (length buckets).

        Returns each prompt's row, the last-position logits at its answer ids (``needed``, in that
        order; float32 on the CPU, (prompts, max K)) and, for IB-EDL's σ, the last ``tail_k``
        vocabulary logits: memory is O(prompts · K), not O(prompts · V). The kept logits stay on
        the model's device until every batch has been launched and come to the CPU in one copy,
        so the host never waits for the device between batches.
        """
        order = sorted(context_ids, key=lambda c: -len(context_ids[c]))
        if not order:
            return {}, torch.empty((0, 0)), None
        batch_size = self.batch_size
        if batch_size == "auto" or batch_size is None:
            batch_size = self._auto_batch_size(context_ids[order[0]])
        batch_size = int(batch_size)
        width = max(len(needed[c]) for c in order)
        index = torch.tensor([needed[c] + needed[c][:1] * (width - len(needed[c])) for c in order], dtype=torch.long)
        kept, kept_tails = [], []
        bar = tqdm(
            total=len(order), desc="evidential: prompts", disable=disable_tqdm or self.rank != 0, **progress_options()
        )
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            logits = self._last_logits([context_ids[c] for c in chunk])
            kept.append(logits.gather(1, index[start : start + len(chunk)].to(logits.device)))
            if tail_k:
                kept_tails.append(sigma_logits(logits, tail_k).contiguous())  # a copy: not a view of (B, V)
            bar.update(len(chunk))
        bar.close()
        values = torch.cat(kept).float().cpu()
        tails = torch.cat(kept_tails).float().cpu() if tail_k else None
        return {c: i for i, c in enumerate(order)}, values, tails

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        raise UnsupportedRequestError(
            "the evidential model scores multiple-choice tasks only; use --model hf for perplexity"
        )

    def generate_until(self, requests, disable_tqdm: bool = False):
        raise UnsupportedRequestError(
            "the evidential model scores multiple-choice tasks only; use --model hf for generation"
        )
