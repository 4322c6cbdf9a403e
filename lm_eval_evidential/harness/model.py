"""``--model evidential``: a causal LM (+ optional PEFT adapter) read as a K-class evidential classifier.

Loading, devices, dtype, batch size, data parallel and PEFT come from the harness's HFLM; the
scoring is every backend's (:class:`~lm_eval_evidential.harness.scoring.EvidentialScoring`). What
this backend adds is its forward pass (:meth:`EvidentialLM.last_logits_at`): each distinct prompt
is forwarded once (a question's K requests, and identical prompts of different tasks, share it),
longest first in batches left-padded with explicit position ids so the last position is every
row's real last token, and only the last position's logits are computed (``logits_to_keep=1``) —
never full-vocabulary logits for every position. Prompts that share a prefix long enough to pay
(a few-shot block; the question before the options of permuted orders) are batched together and
the prefix is run once (:mod:`lm_eval_evidential.modeling.prefix_cache`; ``prefix_cache=False``
turns it off).
"""

from __future__ import annotations

import contextlib
import logging
import os
from functools import cached_property
from typing import Any

import torch
from lm_eval.models.huggingface import HFLM
from tqdm import tqdm

from lm_eval_evidential.errors import EvidentialInputError, InvalidValueError
from lm_eval_evidential.harness.adapter_checks import (
    ADAPTER_FIT_HINT,
    already_tied,
    check_adapter_fits,
    saved_embedding_rows,
    wraps_tied_layer,
)
from lm_eval_evidential.harness.loading_checks import check_context, check_load_args, gguf_error
from lm_eval_evidential.harness.model_args import model_arg, unknown_arg_error
from lm_eval_evidential.harness.scoring import EvidentialScoring
from lm_eval_evidential.modeling.encoding import last_position_logits, left_pad
from lm_eval_evidential.modeling.prefix_cache import PREFIX_CACHE, SharedPrefix, padded_width, suffix_inputs
from lm_eval_evidential.modeling.prefix_plan import plan_batches
from lm_eval_evidential.modeling.quiet import progress_options
from lm_eval_evidential.params import Integral, Interval, Param

logger = logging.getLogger(__name__)

#: Batches whose inputs :meth:`EvidentialLM.last_logits_at` pads together before running their forward calls: the
#: host memory of that many padded batches (token ids, mask, positions) at a time. Padding a batch right after a
#: forward pass works on caches the output layer's weights have just filled; in benchmarks/bench_throughput.py's
#: cheap shape (128k vocabulary, CPU) 960 prompts took 0.98-0.99x the CPU time padded 32 batches at a time as padded
#: one batch before each forward call (medians of 9-11 alternating runs, load 2.5-5.7), the logits bit for bit equal.
BATCHES_AHEAD = 32
# Lines a user reads in the harness's own log (lm_eval configures its namespace, honouring --verbosity).
harness_logger = logging.getLogger("lm_eval.evidential")


#: ``threads`` in --model_args: torch's CPU thread count (None: measured for a small model, see EvidentialLM).
THREADS = Param(
    None,
    Interval(Integral, 1, None),
    must="a whole number of threads >= 1",
    why="torch's CPU threads; drop it to time 1 thread against torch's default for a small model",
    example="threads=1",
)


# Launchers' world-size variables, as accelerate reads them (torchrun, MPI implementations).
_LAUNCHER_WORLD_SIZE = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")


class EvidentialLM(EvidentialScoring, HFLM):
    """See the module docstring. Extra model_args: the head's, one per field of
    :class:`~lm_eval_evidential.modeling.config.HeadConfig` (its help says each), and the
    scoring's options (:data:`~lm_eval_evidential.harness.model_args.SCORING_OPTIONS`:
    ``phantom_count``, 4: the logits of up to that many labels after each question's last one,
    " E".." H" after " A".." D", kept in the records from the same forward pass). When ``peft``
    is a folder written by ``lm-eval-evidential train`` (it holds ``evidential_config.json``),
    the stored head settings default to the values trained with; model_args given explicitly win.
    ``prefix_cache`` (True): run a prefix shared by a batch's prompts once where it pays
    (:mod:`lm_eval_evidential.modeling.prefix_cache`); False runs every prompt whole.
    ``threads`` (None): the CPU threads torch runs on; by default a model under 200M parameters on the
    CPU is timed on 1 thread and on torch's default and runs on the faster, as training does
    (:mod:`lm_eval_evidential.modeling.threads`; a count set in ``LM_EVAL_EVIDENTIAL_THREADS`` or
    ``OMP_NUM_THREADS`` is kept), said in the log; ``threads=N`` sets N without timing."""

    def __init__(self, pretrained: Any = None, prefix_cache: bool = True, threads: Any = None, **kwargs) -> None:
        from lm_eval_evidential.integration.error_lines import install_one_line_errors
        from lm_eval_evidential.integration.hooks import check_harness

        install_one_line_errors()  # plain lm_eval: an expected error of ours is one line, from here on
        check_harness()  # before gigabytes of weights load
        check_load_args(pretrained, kwargs)
        self.prefix_cache = PREFIX_CACHE.check("prefix_cache", prefix_cache)
        threads = model_arg("threads", threads, THREADS)
        # Validate the head before loading gigabytes of weights.
        self.init_scoring(
            kwargs,  # the scoring's model_args taken out, HFLM's left
            pretrained=pretrained,
            peft=kwargs.get("peft"),
            revision=kwargs.get("revision", "main"),
            gguf_file=kwargs.get("gguf_file"),
        )
        self._max_length_arg = kwargs.get("max_length")
        try:
            super().__init__(pretrained=pretrained, **kwargs)
        except TypeError as exc:
            raise unknown_arg_error(exc) from exc
        except RuntimeError as exc:
            if self._peft_path and ("size mismatch" in str(exc) or "shape" in str(exc)):
                raise EvidentialInputError(
                    f"the adapter peft={self._peft_path} does not fit the base model pretrained={pretrained}: "
                    f"{str(exc).splitlines()[0]} … — {ADAPTER_FIT_HINT}"
                ) from exc
            raise
        self.model.eval()
        if isinstance(pretrained, str) and not kwargs.get("tp_plan"):
            self._rank, self._world_size = self._global_rank()
        self._pick_threads(threads)

    def _pick_threads(self, threads: int | None) -> None:
        """Set torch's CPU thread count: ``threads`` where given, else the faster of 1 and torch's default for a
        small model on the CPU (:func:`~lm_eval_evidential.modeling.threads.pick_threads_for`), timed on a forward
        pass of a batch of up to 4 prompts of 48 tokens (one timed run after a warm-up on each count: a count
        that stalls stops at its first run). SmolLM2-135M ran about 10x slower on torch's 2 threads than on 1 on
        2 shared cores (modeling/threads.py); only this backend does this, ``--model hf`` keeps torch's default."""
        from lm_eval_evidential.modeling.threads import pick_threads_for

        if threads is not None:
            torch.set_num_threads(threads)
            harness_logger.info("%d CPU thread%s (threads=%d in --model_args)", threads, "s" * (threads != 1), threads)
            return
        rows = min(self.batch_size, 4) if isinstance(self.batch_size, int) else 4
        vocab = self.model.get_input_embeddings().weight.shape[0]
        batch = [[(7 * i + 3 * r + 5) % vocab for i in range(48)] for r in range(rows)]
        inputs: dict = {}  # built on the first timed pass only: a model on a GPU is never timed, nothing is copied

        def forward():
            if not inputs:
                inputs.update({k: v.to(self.device) for k, v in left_pad(batch, 0).items()})
            return last_position_logits(self.model, **inputs)

        said = pick_threads_for(self.model, forward, repeats=1)
        if said:
            harness_logger.info("%s", said)

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
        members = getattr(self, "members", None)
        for adapter in members.paths if members is not None and members.source == "ensemble" else ():
            check_adapter_fits(adapter, self._config, pretrained)
        check_adapter_fits(getattr(self, "_peft_path", None), self._config, pretrained)

    def _create_model(
        self, pretrained, *args, peft=None, delta=None, revision="main", gguf_file=None, **kwargs
    ) -> None:
        if peft and delta:
            raise InvalidValueError("Cannot use both 'peft' and 'delta' options at the same time.")
        try:
            super()._create_model(pretrained, *args, revision=revision, gguf_file=gguf_file, delta=delta, **kwargs)
        except NotImplementedError as exc:
            raise gguf_error(gguf_file, exc) if gguf_file else exc  # noqa: B904 (exc itself, or our message for it)
        if not peft:
            return
        from peft import PeftModel

        from lm_eval_evidential.modeling.quiet import peft_wrapping

        # Not HFLM's resize to len(tokenizer): an output layer padded beyond the tokenizer
        # (Qwen2.5: 151,936 rows for 151,665 tokens) would be cut and an lm_head adapter no
        # longer fit. Only an adapter that saved resized embeddings (added tokens) resizes, to its rows.
        ensemble = self.members is not None and self.members.source == "ensemble"
        adapters = list(self.members.paths) if ensemble else [peft]
        rows = saved_embedding_rows(adapters[0])
        if rows is not None and rows != self._model.get_input_embeddings().weight.shape[0]:
            self._model.resize_token_embeddings(rows)
        with peft_wrapping():
            self._model = PeftModel.from_pretrained(self._model, adapters[0], revision=revision)
        if ensemble:
            # The base loads once, and so does one adapter slot; each member's LoRA weights (checked to share one
            # LoRA configuration) are copied into it for its pass. Not PEFT's named adapters (load_adapter,
            # set_adapter): PEFT refuses a second adapter when bias is not "none", and the paper's configuration
            # trains bias="lora_only" (training/config.py).
            from peft.utils import load_peft_weights

            self._member_weights = [load_peft_weights(str(path), device="cpu") for path in adapters]
        if self.members is not None and self.members.source == "laplace":
            # The posterior's weight samples, drawn once as laplace-torch draws them (modeling/laplace.py); each
            # member pass copies θ_MAP + δ_m into the adapter's LoRA weights, which hold θ_MAP (checked) between.
            from lm_eval_evidential.modeling.laplace import check_mean_fits, sample_deltas

            posterior = self.members.posterior  # read and checked with the model_args (harness/members.py)
            params = check_mean_fits(posterior, self._model, peft)
            self._laplace = (posterior, params, sample_deltas(posterior, self.members.samples, self.members.seed))
        if self.members is not None and self.members.source == "mc_dropout":
            from lm_eval_evidential.modeling.members import seeded_dropout

            self._dropout_stack = contextlib.ExitStack()  # SeededDropout stays in place for the model's life
            self._dropout_rows = self._dropout_stack.enter_context(seeded_dropout(self._model))
        if wraps_tied_layer(self._model):
            # from_pretrained tied the base already. HFLM then calls model.tie_weights(), and
            # transformers cannot re-tie a layer PEFT has wrapped (KeyError: "attribute 'weight'
            # already exists"), which is what breaks --model hf on tied-embedding bases
            # (Llama-3.2, SmolLM, Qwen2.5, Gemma) with an lm_head adapter. The tie still holds.
            self._model.tie_weights = already_tied

    # ------------------------------------------------------------------ forward
    def _last_logits(
        self,
        batch: list[list[int]],
        prefix_length: int = 0,
        shared: SharedPrefix | None = None,
        inner: tuple[int, ...] | None = None,
        inputs: tuple[bool, dict[str, torch.Tensor]] | None = None,
    ) -> torch.Tensor:
        """Last-position logits (B, V) of left-padded ``batch``, independent of padding; its first
        ``prefix_length`` tokens, the same in every row, run once where the model allows
        (:func:`~lm_eval_evidential.modeling.prefix_cache.cache_blocker`) — once for the batches of a
        group when they pass the same ``shared`` (it holds the last prefix run) — and the rows' inner
        prefixes (``inner``, :attr:`~lm_eval_evidential.modeling.prefix_plan.Batch.inner`) once for
        the batch. In an MC-dropout pass
        each row's masks are seeded by its own tokens (modeling/members.py) and cover its whole prompt,
        so no prefix is shared there. ``inputs``: :meth:`_batch_inputs` of the same arguments, where the
        caller built them ahead (it then passes their ``shared`` too)."""
        with torch.inference_mode():
            if inputs is None:
                if prefix_length and shared is None:
                    shared = SharedPrefix(self.model, self.tokenizer.pad_token_id)
                inputs = self._batch_inputs(batch, prefix_length, shared, inner)
            against_prefix, host = inputs
            if against_prefix:
                return shared.logits(batch, prefix_length, inner, host)
            # non_blocking: a blocking host-to-device copy synchronises the device's stream after it (torch),
            # and the host would wait there for the previous batch to finish
            on_device = {k: v.to(self.device, non_blocking=True) for k, v in host.items()}
            with self._dropout_batch(batch):
                return last_position_logits(self.model, **on_device)

    def _batch_inputs(
        self, batch: list[list[int]], prefix_length: int, shared: SharedPrefix | None, inner: tuple[int, ...] | None
    ) -> tuple[bool, dict[str, torch.Tensor]]:
        """What :meth:`_last_logits` feeds the model for ``batch``, built on the host and needing no forward pass:
        ``(True, the suffix's inputs)`` where it runs against its shared prefix
        (:func:`~lm_eval_evidential.modeling.prefix_cache.suffix_inputs`), else ``(False, the whole rows
        left-padded)``. ``shared``: the prefix held for the batch's group, where ``prefix_length`` is not 0."""
        if prefix_length and getattr(self, "_mc_sample", None) is None:
            blocker = shared.blocker(padded_width(batch, prefix_length, inner))
            if blocker is None:
                return True, suffix_inputs(batch, prefix_length, inner, self.tokenizer.pad_token_id)
            reason = blocker.partition(" (")[0]  # said once per reason, whatever the batch's width
            if reason not in self._cache_blockers_seen:
                self._cache_blockers_seen.add(reason)
                harness_logger.info("prefix cache not used for a batch: %s; it runs uncached", blocker)
        return False, left_pad(batch, self.tokenizer.pad_token_id)

    @cached_property
    def _cache_blockers_seen(self) -> set[str]:
        """Why batches ran without their shared prefix, each said once in the log."""
        return set()

    def _dropout_batch(self, batch: list[list[int]]) -> contextlib.AbstractContextManager:
        """In MC-dropout pass m, the batch's rows for the seeded dropout: each keyed by its prompt's token ids."""
        sample = getattr(self, "_mc_sample", None)
        if sample is None:
            return contextlib.nullcontext()
        from lm_eval_evidential.modeling.members import dropout_rows

        keys = [",".join(map(str, ids)) for ids in batch]
        return dropout_rows(self._dropout_rows, keys, [len(ids) for ids in batch], self.head.seed, sample)

    @contextlib.contextmanager
    def member_pass(self, index: int):
        """Member ``index``: the ensemble member's LoRA weights copied into the adapter slot, Laplace weight sample
        ``index`` copied into the adapter's LoRA weights (θ_MAP put back after), or MC-dropout pass ``index``."""
        if self.members.source == "ensemble":
            from peft.utils import set_peft_model_state_dict

            loaded = set_peft_model_state_dict(self.model, self._member_weights[index])
            unexpected = getattr(loaded, "unexpected_keys", ())
            if unexpected:  # a member whose weights do not all land in the slot: never scored with half of them
                raise EvidentialInputError(
                    f"ensemble member {self.members.names[index]}: weights {unexpected[:3]} fit no LoRA layer of the "
                    "first member's configuration; put members of one training run in the folder"
                )
            yield
            return
        if self.members.source == "laplace":
            from lm_eval_evidential.modeling.laplace import member_weights

            posterior, params, deltas = self._laplace
            with torch.no_grad():
                for name, value in member_weights(posterior, deltas, index).items():
                    params[name].copy_(value)
            try:
                yield
            finally:
                with torch.no_grad():
                    for name, value in member_weights(posterior, torch.zeros_like(deltas[:1]), 0).items():
                        params[name].copy_(value)
            return
        self._mc_sample = index
        try:
            yield
        finally:
            self._mc_sample = None

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

    def last_logits_at(self, prompts: list[list[int]], ids: torch.Tensor, disable_tqdm: bool = False) -> torch.Tensor:
        """:meth:`EvidentialScoring.last_logits_at`: in batches of ``batch_size``, planned by
        :func:`~lm_eval_evidential.modeling.prefix_plan.plan_batches`: prompts sharing a prefix that
        pays in consecutive batches, longest first (their prefix run once for all of them and freed
        after the group), every other prompt longest first.

        Only the logits at ``ids`` are kept (memory O(prompts · ids), not O(prompts · V)); they stay
        on the model's device until every batch has been launched and come to the CPU in one copy,
        so the host never waits for the device between batches.
        """
        if not prompts:
            return torch.empty((0, ids.shape[1] if ids.dim() == 2 else 0))
        batch_size = self.batch_size
        if batch_size == "auto" or batch_size is None:
            batch_size = self._auto_batch_size(max(prompts, key=len))
        batches = plan_batches(prompts, int(batch_size), reuse=self.prefix_cache)
        order = [i for batch in batches for i in batch.rows]
        index = ids[order]
        wanted = None  # index, negative ids counted from the output layer's last row, on the device: made once
        kept = []
        bar = tqdm(
            total=len(order), desc="evidential: prompts", disable=disable_tqdm or self.rank != 0, **progress_options()
        )
        start = 0
        shared = SharedPrefix(self.model, self.tokenizer.pad_token_id)  # a group's prefix, run once for its batches
        for first in range(0, len(batches), BATCHES_AHEAD):
            window = [([prompts[i] for i in b.rows], b) for b in batches[first : first + BATCHES_AHEAD]]
            # the window's inputs padded in one go, then its forward calls one after another: the host work of a
            # batch no longer runs between two forward passes that have just pushed it out of the CPU's caches
            inputs = [self._batch_inputs(rows, b.prefix_length, shared, b.inner) for rows, b in window]
            for (rows, batch), ready in zip(window, inputs):
                logits = self._last_logits(rows, batch.prefix_length, shared, batch.inner, ready)
                if wanted is None:  # the output layer's width is known from the first batch's logits
                    wanted = (index % logits.shape[1]).to(logits.device, non_blocking=True)
                kept.append(logits.gather(1, wanted[start : start + len(rows)]))
                start += len(rows)
                bar.update(len(rows))
        shared.clear()
        bar.close()
        values = torch.cat(kept).float().cpu()
        return values[torch.argsort(torch.tensor(order))]  # back to the order asked for

    def records_dtype(self) -> str:
        return str(self.model.dtype).removeprefix("torch.")
