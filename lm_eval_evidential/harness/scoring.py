"""One scoring for every backend: :class:`EvidentialScoring`, the base each evidential model inherits.

As lm-eval's ``TemplateLM`` keeps the request handling and leaves ``_loglikelihood_tokens`` to
each backend, :class:`EvidentialScoring` keeps everything between the harness's requests and
its responses, and leaves one method to each backend: :meth:`EvidentialScoring.last_logits_at`,
the last-position logits of some unique token prompts at some vocabulary ids. One call of
:meth:`~EvidentialScoring.loglikelihood` is

1. the planner (:class:`~lm_eval_evidential.harness.planning.QuestionPlanner`): requests and the
   tokenizer → one plan per question, each refused or kept before any forward pass;
2. the backend's forward: each distinct prompt once (:meth:`~EvidentialScoring.last_logits_at`);
3. the scorer (:func:`score_questions`): plans and logits → the harness's responses and each
   question's evidence (:mod:`lm_eval_evidential.integration.evidence`), the head applied once per
   group of questions with the same K.

A backend (``harness/model.py``: transformers; ``harness/vllm_model.py``: vLLM) loads the weights
and implements :meth:`~EvidentialScoring.last_logits_at` and :meth:`~EvidentialScoring.records_dtype`;
it calls :meth:`~EvidentialScoring.init_scoring` in its constructor with the head's model_args.
"""

from __future__ import annotations

import contextlib
import math
from abc import ABC, abstractmethod
from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import torch

from lm_eval_evidential.errors import EvidentialInputError, UnsupportedRequestError
from lm_eval_evidential.harness.loading_checks import local_folder, model_context
from lm_eval_evidential.harness.members import ensemble_sha256, members_from_args
from lm_eval_evidential.harness.model_args import (
    HEAD_ARGS,
    SCORING_OPTIONS,
    head_config,
    reference_head_settings,
    scoring_option,
)
from lm_eval_evidential.harness.planning import QuestionPlan, QuestionPlanner
from lm_eval_evidential.integration.evidence import EvidenceLedger, QuestionEvidence
from lm_eval_evidential.metrics.members import member_summary
from lm_eval_evidential.modeling.config import HeadConfig, head_defaults
from lm_eval_evidential.modeling.heads import apply_head_batch, sigma_logits
from lm_eval_evidential.modeling.members import ensemble_members
from lm_eval_evidential.records.provenance import adapter_sha256, model_sha256


@dataclass(frozen=True)
class PromptLogits:
    """The kept last-position logits of distinct prompts: row ``row_of[prompt]`` of ``values`` holds
    the logits at ``ids[prompt]`` (in that order, padded to one width), of ``tails`` IB-EDL's σ
    logits (the last vocabulary rows; None when not asked for). float32, on the CPU."""

    row_of: dict[str, int]
    ids: dict[str, list[int]]
    values: torch.Tensor
    tails: torch.Tensor | None


def _by_k(plans: list[QuestionPlan]) -> dict[int, list[QuestionPlan]]:
    by_k: dict[int, list[QuestionPlan]] = defaultdict(list)
    for plan in plans:
        by_k[len(plan.answer_ids)].append(plan)
    return by_k


def non_finite_cause(dtype: str, member: str | None = None) -> str:
    """What a non-finite answer logit says after its value: where (``member``) and the likely cause by ``dtype``
    (a half-precision overflow only where the forward ran in float16)."""
    where = f" in {member}" if member else ""
    if dtype == "float16":
        return f"{where} (float16 overflow?); run with dtype=bfloat16 or dtype=float32"
    return (
        f"{where}, computed in {dtype}, so no half-precision overflow: the weights give it (a damaged checkpoint or "
        "adapter, or a Laplace posterior whose scale is too wide for them: fit it again)"
    )


def _answer_logits(
    group: list[QuestionPlan], logits: PromptLogits, cause: str = non_finite_cause("float16")
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(rows, z)``: the prompts' rows and the (B, K) answer logits of a group of questions with one K;
    a non-finite answer logit is refused, with ``cause`` (:func:`non_finite_cause`)."""
    rows = torch.tensor([logits.row_of[p.prompt] for p in group], dtype=torch.long)
    columns = torch.tensor([[logits.ids[p.prompt].index(a) for a in p.answer_ids] for p in group], dtype=torch.long)
    z = logits.values[rows[:, None], columns]
    finite = torch.isfinite(z).all(dim=1)
    if not bool(finite.all()):
        row = int((~finite).nonzero()[0, 0])
        bad = z[row][~torch.isfinite(z[row])][0].item()
        raise EvidentialInputError(f"{group[row].where}: non-finite answer logit {bad!r}{cause}")
    return rows, z


def score_member_questions(
    plans: list[QuestionPlan],
    logits: list[PromptLogits],
    head: HeadConfig,
    n_requests: int,
    causes: list[str] | None = None,
) -> tuple[list[tuple[float, bool] | None], list[QuestionEvidence]]:
    """:func:`score_questions` for M members (``logits[m]``: member m's forward): each request's
    ``(log p̄_j, j is the argmax of p̄)`` with p̄ the members' predictive distribution, and each question's
    member logits with what the records keep for them (:func:`~lm_eval_evidential.metrics.members.member_summary`:
    ``log p̄`` and, for EDL members, the summary alpha) and each member's own phantom logits, kept up to the
    first that is not finite in some member (every member of a question keeps the same labels)."""
    results: list[tuple[float, bool] | None] = [None] * n_requests
    evidence = []
    kept = [one.values.tolist() for one in logits]  # phantom logits are read per question (their number varies)
    for group in _by_k(plans).values():
        causes = causes or [non_finite_cause("float16")] * len(logits)
        members = np.stack(
            [_answer_logits(group, one, cause)[1].double().numpy() for one, cause in zip(logits, causes)], axis=1
        )
        log_mean, alpha = member_summary(members, head.method, head.prior_weight)
        preds = np.argmax(log_mean, axis=1)
        for i, plan in enumerate(group):
            phantom = [_phantom_logits(plan, one, values) for one, values in zip(logits, kept)]
            finite_until = min(next((j for j, v in enumerate(p) if not math.isfinite(v)), len(p)) for p in phantom)
            evidence.append(
                _evidence(
                    plan,
                    tuple(log_mean[i].tolist()),
                    None if alpha is None else tuple(alpha[i].tolist()),
                    member_logits=tuple(tuple(row) for row in members[i].tolist()),
                    member_phantom_logits=tuple(tuple(p[:finite_until]) for p in phantom),
                )
            )
            _respond(results, plan, log_mean[i].tolist(), int(preds[i]))
    return results, evidence


def _phantom_logits(plan: QuestionPlan, logits: PromptLogits, values: list) -> list[float]:
    """The logits of ``plan``'s phantom labels in one forward (``values``: ``logits.values`` as lists)."""
    row, order = values[logits.row_of[plan.prompt]], logits.ids[plan.prompt]
    return [row[order.index(a)] for a in plan.phantom_ids]


def _evidence(plan: QuestionPlan, logits: tuple, alpha: tuple | None, **more) -> QuestionEvidence:
    """What the ledger keeps of ``plan``'s question."""
    return QuestionEvidence(
        task=plan.task,
        doc_id=plan.doc_id,
        continuations=plan.continuations,
        token_ids=plan.answer_ids,
        logits=logits,
        alpha=alpha,
        **more,
    )


def _respond(results: list, plan: QuestionPlan, log_probs: list[float], pred: int) -> None:
    """Each request of ``plan`` (and its padding copies): ``(log p_j, j is the prediction)``."""
    for j, copies in enumerate(plan.copies):
        for c in copies:
            results[c] = (log_probs[j], j == pred)


def score_questions(
    plans: list[QuestionPlan], logits: PromptLogits, head: HeadConfig, n_requests: int, cause: str | None = None
) -> tuple[list[tuple[float, bool] | None], list[QuestionEvidence]]:
    """The harness's responses (one ``(log E[p_j], j is the argmax)`` per request) and each question's evidence.

    The head runs once per group of questions with the same K (not once per question); each
    question's result is bit-identical to it scored alone (``apply_head_batch``). A non-finite
    answer logit is refused (float16 overflow); phantom logits are kept up to the first non-finite one.
    """
    kept = logits.values.tolist()  # phantom logits are read per question (their number varies)
    results: list[tuple[float, bool] | None] = [None] * n_requests
    evidence = []
    for k, group in _by_k(plans).items():
        rows, z = _answer_logits(group, logits, cause or non_finite_cause("float16"))
        sigma = sigma_logits(logits.tails[rows], k) if head.needs_sigma else None
        keys = [f"{p.prompt}\x00{p.answer_ids}" for p in group] if head.needs_sigma else None
        out = apply_head_batch(head, z, sigma_logits=sigma, keys=keys)
        head_logits = out.logits.tolist()
        alpha = None if out.alpha is None else out.alpha.tolist()
        log_probs = torch.log(out.probs).tolist()
        preds = torch.argmax(out.probs, dim=1).tolist()
        for i, plan in enumerate(group):
            phantom = _phantom_logits(plan, logits, kept)
            finite_until = next((j for j, v in enumerate(phantom) if not math.isfinite(v)), len(phantom))
            alpha_row = None if alpha is None else tuple(alpha[i])
            # phantom logits up to a float16 overflow, like the answers
            evidence.append(
                _evidence(plan, tuple(head_logits[i]), alpha_row, phantom_logits=tuple(phantom[:finite_until]))
            )
            _respond(results, plan, log_probs[i], preds[i])
    return results, evidence


class EvidentialScoring(ABC):
    """The evidential scoring of lm-eval's ``loglikelihood`` requests, shared by every backend by inheritance.

    A backend is ``class MyBackend(EvidentialScoring, <an lm_eval LM>)`` that calls
    :meth:`init_scoring` and implements :meth:`last_logits_at` and :meth:`records_dtype`. What it
    must offer besides, as lm-eval's ``HFLM`` and ``VLLM`` do: ``tokenizer`` (a transformers
    tokenizer), ``tok_encode``, ``prefix_token_id``, ``add_bos_token``, ``max_length`` and the
    model's transformers config as ``_config``.
    """

    #: The name the user passes as ``--model``, in messages.
    MODEL_NAME = "evidential"

    def init_scoring(
        self, model_args: dict, *, pretrained: Any, peft: str | None, revision: str, gguf_file: str | None = None
    ) -> None:
        """Take the scoring's own model_args (:data:`~lm_eval_evidential.harness.model_args.SCORING_ARGS`)
        out of ``model_args``, leaving the backend's loading arguments: the head (a head setting not
        given: the adapter's metadata, then HeadConfig's defaults, fill it in), each of
        :data:`~lm_eval_evidential.harness.model_args.SCORING_OPTIONS` as an attribute, and what
        the records say produced them; checked before any weights load."""
        given = {name: model_args.pop(name, None) for name in HEAD_ARGS}
        paths = ensemble_members(peft)  # an ensemble's head settings are its members' (checked equal)
        trained = paths[0] if paths else peft
        stored = head_defaults(trained) or reference_head_settings(trained) or {}
        settings = {**stored, **{k: v for k, v in given.items() if v is not None}}
        self.head = head_config(settings)
        for name, (default, _) in SCORING_OPTIONS.items():
            setattr(self, name, scoring_option(name, model_args.pop(name, default)))
        self.members = members_from_args(self.mc_samples, peft, self.head.method, self.laplace_samples)
        self._pretrained_name = str(pretrained)
        self._peft_path = peft
        self._revision = revision
        self._gguf_file = gguf_file
        self.evidence = EvidenceLedger()

    # ------------------------------------------------------------------ what a backend implements
    @abstractmethod
    def last_logits_at(self, prompts: list[list[int]], ids: torch.Tensor, disable_tqdm: bool = False) -> torch.Tensor:
        """The last-position logits of each token prompt at its ids, ``(len(prompts), ids.shape[1])``.

        float32 on the CPU. ``prompts`` are distinct; row i of ``ids`` (int64) names the vocabulary ids wanted of
        prompt i, a negative id counting from the end of the output layer (−1: its last row), as
        IB-EDL's σ reads the last K rows. Each prompt's logits must not depend on the others
        (batching, padding).
        """

    def member_pass(self, index: int) -> contextlib.AbstractContextManager:
        """Within the block, the backend's forward is member ``index`` of :attr:`members` (an ensemble
        member's adapter, or MC-dropout pass ``index``). Backends that cannot score members refuse
        them when constructed; this default is never reached then."""
        raise EvidentialInputError(f"--model {self.MODEL_NAME} cannot score ensembles or MC dropout")

    @abstractmethod
    def records_dtype(self) -> str:
        """The dtype the logits were computed in, as the records name it (``float32``, ``bfloat16``, …)."""

    # ------------------------------------------------------------------ the harness API
    @cached_property
    def planner(self) -> QuestionPlanner:
        """This model's question planner (its tokenizer, its ``tok_encode``)."""
        return QuestionPlanner(
            self.tokenizer,
            self.tok_encode,
            prefix_token_id=self.prefix_token_id,
            add_bos_token=self.add_bos_token,
            phantom_count=self.phantom_count,
        )

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        """The harness's contract: one ``(log p, is_greedy)`` per request, here ``(log E[p_j], j is argmax)``.

        The K requests of one question (same task, doc and prompt) are scored together; the
        question's answer logits and alpha are filed in :attr:`evidence` under (task, doc_id),
        the path by which they reach the records (:mod:`lm_eval_evidential.integration.evidence`).
        Every question is checked (single-token, distinct answers; prompt length) before any
        forward pass.
        """
        plans = self.planner.plan(requests, max_length=self.max_length, model_context=self._model_context)
        if self.members is None:
            logits = self.prompt_logits(plans, disable_tqdm)
            cause = non_finite_cause(self.records_dtype())
            results, evidence = score_questions(plans, logits, self.head, len(requests), cause)
        else:  # ensembles, MC dropout: every distinct prompt forwarded once per member
            per_member = []
            for m in range(self.members.count):
                with self.member_pass(m):
                    per_member.append(self.prompt_logits(plans, disable_tqdm))
            causes = [non_finite_cause(self.records_dtype(), self.members.describe(m)) for m in range(len(per_member))]
            results, evidence = score_member_questions(plans, per_member, self.head, len(requests), causes)
        for question in evidence:
            self.evidence.file(question)
        return results

    def prompt_logits(self, plans: list[QuestionPlan], disable_tqdm: bool = False) -> PromptLogits:
        """Each distinct prompt of ``plans`` forwarded once: its logits at its answer and phantom ids,
        and for IB-EDL the last K vocabulary logits (K the largest of the plans); memory O(prompts · K)."""
        needed: dict[str, dict[int, None]] = defaultdict(dict)  # a prompt's answer ids, first seen first
        prompts: dict[str, list[int]] = {}
        for plan in plans:
            needed[plan.prompt].update(dict.fromkeys(plan.answer_ids + plan.phantom_ids))
            prompts.setdefault(plan.prompt, plan.prompt_ids)  # a "(A)" prompt is forwarded with its prefix only
        tail_k = max((len(p.answer_ids) for p in plans), default=0) if self.head.needs_sigma else 0
        order = {c: list(v) for c, v in needed.items()}
        if not order:
            return PromptLogits({}, {}, torch.empty((0, 0)), None)
        width = max(len(v) for v in order.values())
        tail = list(range(-tail_k, 0))
        index = torch.tensor([v + v[:1] * (width - len(v)) + tail for v in order.values()], dtype=torch.long)
        got = self.last_logits_at([prompts[c] for c in order], index, disable_tqdm)
        return PromptLogits(
            row_of={c: i for i, c in enumerate(order)},
            ids=order,
            values=got[:, :width],
            tails=got[:, width:] if tail_k else None,
        )

    def _model_context(self) -> int:
        return model_context(self._config)

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        raise UnsupportedRequestError(
            "the evidential model scores multiple-choice tasks only; use --model hf for perplexity"
        )

    def generate_until(self, requests, disable_tqdm: bool = False):
        raise UnsupportedRequestError(
            "the evidential model scores multiple-choice tasks only; use --model hf for generation"
        )

    def set_cache_hook(self, cache_hook) -> None:
        # lm_eval's response cache (--use_cache) is keyed by the request text only: it would
        # return numbers computed with other model settings (method, adapter, prior weight)
        # and it cannot hold the evidence the records need.
        if getattr(cache_hook, "dbdict", None) is not None:
            raise EvidentialInputError(
                f"--use_cache cannot apply to --model {self.MODEL_NAME}: lm_eval's response cache is keyed by the "
                "prompt only, so it would return numbers computed with other model settings (method, adapter, "
                "prior weight) and it cannot hold the evidence the records need; drop --use_cache"
            )
        super().set_cache_hook(cache_hook)

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

    # ------------------------------------------------------------------ provenance
    @cached_property
    def _identity(self) -> dict:
        """The model and the adapter by content (records/provenance.py), hashed once per process."""
        ensemble = self.members is not None and self.members.source == "ensemble"
        return {
            "model_sha256": model_sha256(local_folder(self._pretrained_name, self._revision)),
            "adapter_sha256": ensemble_sha256(self.members.paths, adapter_sha256)
            if ensemble
            else adapter_sha256(local_folder(self._peft_path, self._revision)),
        }

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
            "dtype": self.records_dtype(),
            "revision": self._revision,
            **self._identity,
            **({} if self.members is None else {"members": self.members.meta(self.head.seed)}),
        }
