"""``--model evidential``: a causal LM (+ optional PEFT adapter) read as a K-class evidential classifier.

Loading, devices, dtype, batch size, data parallel and PEFT come from the harness's HFLM.
What differs is scoring: each distinct prompt is forwarded once (a question's K requests,
and identical prompts of different tasks, share it), batches are left-padded with explicit
position ids so the last position is every row's real last token, and only the last
position's logits are computed (``logits_to_keep=1``) — never full-vocabulary logits for
every position. Each loglikelihood response is ``(log E[p_i], is_argmax, payload)``: the
first two make the harness's ``acc`` the EDL accuracy, the payload carries the evidence.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

import torch
from lm_eval.models.huggingface import HFLM
from tqdm import tqdm

from lm_eval_evidential.modeling.config import HeadConfig, head_defaults
from lm_eval_evidential.modeling.heads import apply_head

logger = logging.getLogger(__name__)


def adapter_sha256(path) -> str | None:
    """Content hash of a local adapter's weight files (None without one, or for a hub id)."""
    import hashlib
    from pathlib import Path

    if not path or not Path(path).is_dir():
        return None
    digest = hashlib.sha256()
    files = sorted(p for p in Path(path).iterdir() if p.name.startswith("adapter_model"))
    for file in files:
        with open(file, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16] if files else None


class EvidentialInputError(ValueError):
    """A request the evidential model cannot score; the message names task, doc, value and fix."""


class EvidentialLM(HFLM):
    """See the module docstring. Extra model_args: ``method`` (edl | ib_edl | softmax),
    ``prior_weight`` (λ, default 1), ``num_noises`` (20), ``sigma_mult`` (0), ``seed`` (0).
    When ``peft`` is a folder written by ``lm-eval-evidential train`` (it holds
    ``evidential_config.json``), the first four default to the values trained with; model_args
    given explicitly win."""

    def __init__(
        self,
        pretrained: Any = None,
        method: str | None = None,
        prior_weight: float | None = None,
        num_noises: int | None = None,
        sigma_mult: float | None = None,
        seed: int | None = None,
        **kwargs,
    ) -> None:
        # None = not given: the adapter's metadata, then HeadConfig's defaults, fill it in.
        given = {"method": method, "prior_weight": prior_weight, "num_noises": num_noises, "sigma_mult": sigma_mult}
        settings = {**head_defaults(kwargs.get("peft")), **{k: v for k, v in given.items() if v is not None}}
        casts = {"method": str, "prior_weight": float, "num_noises": int, "sigma_mult": float}
        # Validate the head before loading gigabytes of weights.
        self.head = HeadConfig(
            **{k: casts[k](v) for k, v in settings.items()}, **({} if seed is None else {"seed": int(seed)})
        )
        self._pretrained_name = str(pretrained)
        self._peft_path = kwargs.get("peft")
        self._revision = kwargs.get("revision", "main")
        self._answer_id_cache: dict[tuple, dict[str, int]] = {}
        try:
            super().__init__(pretrained=pretrained, **kwargs)
        except RuntimeError as exc:
            if self._peft_path and ("size mismatch" in str(exc) or "shape" in str(exc)):
                raise EvidentialInputError(
                    f"the adapter peft={self._peft_path} does not fit the base model pretrained={pretrained}: "
                    f"{str(exc).splitlines()[0]} … — pass the base model the adapter was trained on "
                    "(see base_model_name_or_path in its adapter_config.json)"
                ) from exc
            raise
        self.model.eval()
        # HFLM takes rank and world size from accelerate only when it sees more than one GPU,
        # so CPU processes launched with torchrun (gloo) would each score every doc. Shard
        # them like GPU processes; tensor-parallel runs (tp_plan) stay one logical model.
        accelerator = getattr(self, "accelerator", None)
        if accelerator is not None and accelerator.num_processes > 1 and self._world_size == 1 and not kwargs.get("tp_plan"):
            self._rank = accelerator.process_index
            self._world_size = accelerator.num_processes

    def _create_model(self, pretrained, *args, peft=None, delta=None, revision="main", **kwargs) -> None:
        # HFLM resizes the embeddings to len(tokenizer) whenever it loads an adapter and the two
        # differ (it assumes the adapter added tokens). An output layer padded beyond the tokenizer
        # (Qwen2: 151,936 rows for 151,665 tokens) is then cut and an adapter on lm_head (the
        # paper's) no longer fits. Grow when the tokenizer is larger; never shrink.
        if not peft:
            return super()._create_model(pretrained, *args, peft=peft, delta=delta, revision=revision, **kwargs)
        if delta:
            raise ValueError("Cannot use both 'peft' and 'delta' options at the same time.")
        super()._create_model(pretrained, *args, revision=revision, **kwargs)
        from peft import PeftModel

        if len(self.tokenizer) > self._model.get_input_embeddings().weight.shape[0]:
            self._model.resize_token_embeddings(len(self.tokenizer))
        self._model = PeftModel.from_pretrained(self._model, peft, revision=revision)

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
    def _answer_ids(self, context: str, context_ids: list[int], continuations: list[str], where: str) -> list[int]:
        ids = []
        for cont in continuations:
            whole = self.tok_encode(context + cont)
            if len(whole) != len(context_ids) + 1 or whole[: len(context_ids)] != context_ids:
                pieces = whole[len(context_ids) :] if whole[: len(context_ids)] == context_ids else whole[-3:]
                raise EvidentialInputError(
                    f"{where}: answer label {cont!r} is not a single token after the prompt for this tokenizer "
                    f"(it encodes as {len(pieces)} token(s) {pieces}); the evidential model scores single-token "
                    "labels — use the *_edl tasks, whose labels are ' A'..' E', or a tokenizer that has them"
                )
            ids.append(whole[-1])
        if len(set(ids)) != len(ids):
            raise EvidentialInputError(
                f"{where}: answer labels {continuations} share token ids {ids}; each label must be its own token"
            )
        return ids

    # ------------------------------------------------------------------ forward
    def _last_logits(self, batch: list[list[int]]) -> torch.Tensor:
        """Last-position logits (B, V) of left-padded ``batch``, independent of padding."""
        width = max(len(x) for x in batch)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        input_ids = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, ids in enumerate(batch):
            input_ids[row, width - len(ids) :] = torch.tensor(ids, dtype=torch.long)
            mask[row, width - len(ids) :] = 1
        # Positions count real tokens only, so a left-padded row sees the same positions as alone.
        position_ids = (mask.cumsum(-1) - 1).clamp(min=0)
        with torch.inference_mode():
            out = self.model(
                input_ids=input_ids.to(self.device),
                attention_mask=mask.to(self.device),
                position_ids=position_ids.to(self.device),
                logits_to_keep=1,
                use_cache=False,
            )
        return out.logits[:, -1, :]

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
    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool, dict]]:
        # Group requests into questions: the K options of one (task, doc) share one prompt.
        # Under data parallel the harness pads a shorter rank by repeating its last request
        # object: copies of one request share its response (distinct requests still collide).
        questions: dict[tuple, dict[int, list[int]]] = defaultdict(dict)
        for i, req in enumerate(requests):
            context, _ = req.args
            key = (getattr(req, "task_name", None), getattr(req, "doc_id", None), context)
            questions[key].setdefault(id(req), []).append(i)

        context_ids: dict[str, list[int]] = {}
        plans = []  # (request indices, context, answer ids, where)
        for (task, doc_id, context), options in questions.items():
            idx = list(options.values())  # per option: the positions of its copies
            where = f"task {task!r} doc {doc_id}"
            if context not in context_ids:
                ids = self.tok_encode(context)
                if len(ids) > self.max_length:
                    raise EvidentialInputError(
                        f"{where}: prompt is {len(ids)} tokens, longer than max_length={self.max_length}; "
                        "raise max_length in --model_args (the evidential model never truncates a question)"
                    )
                context_ids[context] = ids
            conts = [requests[copies[0]].args[1] for copies in idx]
            declared = getattr(requests[idx[0][0]], "doc", None)
            declared = declared.get("answer_tokens") if isinstance(declared, dict) else None
            if declared is not None:
                unknown = [c for c in conts if c not in declared]
                if unknown:
                    raise EvidentialInputError(
                        f"{where}: answer label {unknown[0]!r} is not in the task's declared answer tokens {declared}"
                    )
            answer_ids = self._answer_ids(context, context_ids[context], conts, where)
            if declared is None:
                token_ids = dict(zip(conts, answer_ids))
            else:
                if tuple(declared) not in self._answer_id_cache:
                    ids = self._answer_ids(context, context_ids[context], list(declared), where)
                    self._answer_id_cache[tuple(declared)] = dict(zip(declared, ids))
                token_ids = self._answer_id_cache[tuple(declared)]
            plans.append((idx, context, answer_ids, where, token_ids))

        needed: dict[str, set[int]] = defaultdict(set)
        for _, context, answer_ids, _, _ in plans:
            needed[context].update(answer_ids)
        tail_k = max((len(p[2]) for p in plans), default=0) if self.head.needs_sigma else 0
        kept = self._forward_unique(context_ids, {c: sorted(v) for c, v in needed.items()}, tail_k, disable_tqdm)

        results: list[Any] = [None] * len(requests)
        meta = self._payload_meta()
        for idx, context, answer_ids, where, token_ids in plans:
            columns, values, tail = kept[context]
            z = values[[columns.index(a) for a in answer_ids]]
            if not torch.isfinite(z).all():
                bad = z[~torch.isfinite(z)][0].item()
                raise EvidentialInputError(
                    f"{where}: non-finite answer logit {bad!r} (float16 overflow?); run with dtype=bfloat16 or dtype=float32"
                )
            k = len(answer_ids)
            sigma_logits = tail[tail.shape[0] - k :] if self.head.needs_sigma else None
            out = apply_head(self.head, z, sigma_logits=sigma_logits, key=f"{context}\x00{answer_ids}")
            probs = out.probs
            pred = int(torch.argmax(probs))

            for j, copies in enumerate(idx):
                payload = {
                    "logit": float(out.logits[j]),
                    "alpha": None if out.alpha is None else float(out.alpha[j]),
                    **meta,
                    "answer_token_ids": token_ids,
                }
                for i in copies:
                    results[i] = (float(torch.log(probs[j])), j == pred, dict(payload))
        return results

    def _payload_meta(self) -> dict:
        return {
            "method": self.head.method,
            "prior_weight": self.head.prior_weight,
            "num_noises": self.head.num_noises if self.head.method == "ib_edl" else None,
            "sigma_mult": self.head.sigma_mult if self.head.method == "ib_edl" else None,
            "seed": self.head.seed if self.head.method == "ib_edl" else None,
            "pretrained": self._pretrained_name,
            "peft": None if self._peft_path is None else str(self._peft_path),
            "dtype": str(self.model.dtype).removeprefix("torch."),
            "revision": self._revision,
            "adapter_sha256": adapter_sha256(self._peft_path),
        }

    def _forward_unique(
        self, context_ids: dict[str, list[int]], needed: dict[str, list[int]], tail_k: int, disable_tqdm: bool
    ) -> dict[str, tuple[list[int], torch.Tensor, torch.Tensor | None]]:
        """Forward each distinct prompt once, longest first (length buckets).

        Keeps, per prompt, only the last-position logits at its answer ids (and the last
        ``tail_k`` vocabulary logits for IB-EDL's σ): memory is O(prompts · K), not O(prompts · V).
        """
        order = sorted(context_ids, key=lambda c: -len(context_ids[c]))
        if not order:
            return {}
        batch_size = self.batch_size
        if batch_size == "auto" or batch_size is None:
            batch_size = self._auto_batch_size(context_ids[order[0]])
        batch_size = int(batch_size)
        kept: dict[str, tuple[list[int], torch.Tensor, torch.Tensor | None]] = {}
        bar = tqdm(total=len(order), desc="evidential: prompts", disable=disable_tqdm or self.rank != 0)
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            logits = self._last_logits([context_ids[c] for c in chunk])
            width = max(len(needed[c]) for c in chunk)
            index = torch.tensor([needed[c] + needed[c][:1] * (width - len(needed[c])) for c in chunk], device=logits.device)
            values = logits.gather(1, index).float().cpu()
            tails = logits[:, logits.shape[-1] - tail_k :].float().cpu() if tail_k else None
            for row, c in enumerate(chunk):
                kept[c] = (needed[c], values[row, : len(needed[c])], None if tails is None else tails[row])
            bar.update(len(chunk))
        bar.close()
        return kept

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError("the evidential model scores multiple-choice tasks only; use --model hf for perplexity")

    def generate_until(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError("the evidential model scores multiple-choice tasks only; use --model hf for generation")
