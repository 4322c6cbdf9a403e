"""Shared prompt prefixes computed once: the few-shot block of a call's prompts (or the question
before the options of its permuted orders) goes through the model once, and every prompt's own
suffix runs against its keys and values.

:func:`~.prefix_plan.plan_batches` orders a call's distinct prompts into groups sharing a prefix long enough to
pay (:func:`~.prefix_plan.pays`), each cut into batches longest first, and batches the other prompts longest
first as before. The batches of a group follow each other and are run by one
:class:`SharedPrefix`, which runs the group's prefix once and keeps its keys and values until the
group ends; the others by :func:`~lm_eval_evidential.modeling.encoding.last_position_logits`.

A prefix within the prefix: the K orders of a permuted question share the instruction (every
prompt's) *and* the question before the options (theirs only). Within a group, rows sharing more
than its prefix are kept together in its batches, and each batch's distinct inner prefixes run once,
in one extra forward call against the group's prefix, before its rows run against both
(:attr:`~.prefix_plan.Batch.inner`): row i is ``[prefix][pad...][inner prefix_i][pad...][suffix_i]``.

Exactness. The suffix batch is left-padded *after* the shared prefix: row i is
``[prefix][pad...][suffix_i]`` with the attention mask zero on the pads and position ids counting
real tokens only (the prefix 0..L-1, then the suffix from L), so every real token attends to
exactly the keys, at exactly the positions, it has in the uncached left-padded batch
``[pad...][prefix][suffix_i]``; the same holds for pads before an inner prefix. The prefix's
keys and values come from a batch of one instead of being recomputed in each row (an inner
prefix's, one row per distinct one): the same arithmetic on other matrix shapes, equal to the uncached
logits within float rounding (measured ≤ 4e-7 in float32 on every family ``testing.tiny`` builds;
the tests bound it by 1e-5). The prefix's layer caches are read, never written: each layer hands
its attention ``cat(prefix expanded to the batch, the suffix's own keys)`` and keeps nothing, so
the expanded prefix exists for one layer at a time; the prefix itself (a batch of one) is held
while its group's batches run and freed when the next group's prefix is run or the call ends. A
batch's inner prefixes (one row each, every layer) are held for its suffix call only.

Fallbacks (per batch, to :func:`last_position_logits`; :func:`cache_blocker` says why): a model
whose cache layers are not transformers' plain dynamic layers (linear-attention / state-space
layers, quantised or offloaded caches), an attention implementation other than ``sdpa`` or
``eager`` (untested here), sliding-window layers whose window the padded batch would exceed
(the pads between prefix and suffix would count in the window), and transformers before 5.0
(no per-layer cache to share).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.modeling.encoding import last_position_logits, left_pad
from lm_eval_evidential.params import Options, Param

__all__ = [
    "PREFIX_CACHE",
    "cache_blocker",
    "padded_width",
    "SharedPrefix",
    "suffix_inputs",
    "prefix_cached_logits",
]

#: ``--model_args prefix_cache=``: whether a backend runs a prefix shared by a batch's prompts once (lm_eval's
#: model_args parser turns True/False into bools, so anything else is a typo).
PREFIX_CACHE = Param(
    Options((True, False)),
    must="True or False",
    why="True runs a prefix shared by a batch's prompts once where it pays; False runs every prompt whole",
    example="prefix_cache=False",
)


def _cache_api():
    """transformers' per-layer cache classes, or None before transformers 5."""
    try:
        from transformers.cache_utils import Cache, CacheLayerMixin, DynamicLayer, DynamicSlidingWindowLayer
    except ImportError:
        return None
    import transformers

    if int(transformers.__version__.split(".")[0]) < 5:
        return None
    return Cache, CacheLayerMixin, DynamicLayer, DynamicSlidingWindowLayer


def _config(model):
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.config


def _model_limits(model) -> tuple[str | None, int | None]:
    """``(why the model cannot share a prefix at any width, or None; its sliding window, or None)``."""
    if _cache_api() is None:
        return "transformers before 5.0 has no per-layer cache to share", None
    if _cache_argument(model) is None:
        return "the model's forward takes no cache argument ('cache' or 'past_key_values')", None
    config = _config(model)
    attention = getattr(config, "_attn_implementation", None) or "eager"
    if attention not in ("sdpa", "eager"):
        return f"attention implementation {attention!r} (the shared prefix is tested with sdpa and eager only)", None
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    layer_types = getattr(text, "layer_types", None) or ()
    if any(t not in ("full_attention", "sliding_attention") for t in layer_types):
        return f"layer types {sorted(set(layer_types))} (only attention layers share a prefix)", None
    window = getattr(text, "sliding_window", None)
    sliding = window is not None and (
        "sliding_attention" in layer_types or (not layer_types and getattr(text, "use_sliding_window", True))
    )
    return None, int(window) if sliding else None


def _blocker(limits: tuple[str | None, int | None], width: int) -> str | None:
    reason, window = limits
    if reason is None and window is not None and width > window:
        return f"a sliding window of {window} tokens, narrower than the batch ({width}: prefix, pads, suffix)"
    return reason


def padded_width(rows: Sequence[Sequence[int]], prefix_length: int, inner: Sequence[int] | None = None) -> int:
    """The width of a batch run against a shared prefix: the prefix, the inner prefixes left-padded to the
    longest, the suffixes left-padded to the longest (what a sliding window must cover).

    Examples
    --------
    >>> padded_width([[1, 2, 3, 4], [1, 2, 5]], 2), padded_width([[1, 2, 3, 4, 9], [1, 2, 5, 6, 7, 8]], 2, (4, 3))
    (4, 7)
    """
    if inner is None:
        return max(map(len, rows))
    return max(inner) + max(len(r) - n for r, n in zip(rows, inner))


def cache_blocker(model, width: int) -> str | None:
    """Why ``model`` cannot run a batch ``width`` tokens wide (prefix + padded suffix) against a
    shared prefix exactly; None when it can. Read off the config (no forward pass)."""
    return _blocker(_model_limits(model), width)


def _cache_argument(model) -> str | None:
    """The name the model's forward takes its cache by: ``cache`` (transformers 5.2x), ``past_key_values`` before
    (the vLLM environment's 5.19); an unknown name would be swallowed by ``**kwargs`` and the prefix dropped.

    Read off the transformers model itself: a PEFT wrapper's ``forward`` takes ``**kwargs`` and names neither,
    so asking the wrapper picked ``cache`` on 5.19, whose model then ran every suffix without its prefix.
    """
    import inspect

    while hasattr(model, "get_base_model") and model.get_base_model() is not model:
        model = model.get_base_model()
    known = inspect.signature(getattr(model, "forward", model)).parameters  # a plain callable: its own call
    return next((name for name in ("cache", "past_key_values") if name in known), None)


def _returned_cache(out):
    """The cache a forward returned, under either name (see :func:`_cache_argument`)."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


def _no_positions(device) -> torch.Tensor:
    """``logits_to_keep`` for a call whose keys and values are wanted and whose logits are not (a prefix's run):
    no position goes through the output layer. With a large vocabulary and a small model that layer is most of
    a call (the 128k-row head of ``benchmarks/bench_throughput.py --shapes cheap``: one such call costs about
    what a batch of 8 does, as it reads every row of the head); the keys and values are the same as with ``1``.
    transformers reads a 1-D tensor as the positions to keep (``slice_logits_to_keep``)."""
    return torch.empty(0, dtype=torch.long, device=device)


@functools.cache
def _shared_layer_class():
    Cache, CacheLayerMixin, DynamicLayer, DynamicSlidingWindowLayer = _cache_api()

    class SharedPrefixLayer(CacheLayerMixin):
        """One layer's prefix keys and values (batch of one), read by every row and never written.

        ``inner``, set for one forward call: the batch's inner prefixes' keys and values (one row each)
        and, per row, which one it reads; its attention sees ``[prefix][its inner prefix][own keys]``.
        ``captured``, where not None: the keys and values the call computed, kept (the inner prefixes' run).
        """

        is_compileable = False
        is_croppable = False

        def __init__(self, layer) -> None:
            super().__init__()
            self.keys, self.values = layer.keys, layer.values
            self.is_sliding = layer.is_sliding
            self.device = layer.keys.device
            self.is_initialized = True
            self.inner = None  # (keys, values, row -> inner prefix index), for one forward call
            self.captured = None

        def lazy_initialization(self, key_states, value_states) -> None:  # initialised from the prefix
            pass

        def update(self, key_states, value_states, *args, **kwargs):
            rows = key_states.shape[0]
            keys, values = [self.keys.expand(rows, -1, -1, -1)], [self.values.expand(rows, -1, -1, -1)]
            if self.inner is not None:
                inner_keys, inner_values, index = self.inner
                keys.append(inner_keys.index_select(0, index))
                values.append(inner_values.index_select(0, index))
            if self.captured is not None:
                self.captured = (key_states, value_states)
            return torch.cat([*keys, key_states], dim=-2), torch.cat([*values, value_states], dim=-2)

        def get_seq_length(self) -> int:
            return self.keys.shape[-2] + (self.inner[0].shape[-2] if self.inner is not None else 0)

        def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
            # As a dynamic layer's: every key from position 0 (a sliding layer's too, the window not yet reached)
            return self.get_seq_length() + query_length, 0

        def get_max_length(self) -> int:
            return -1

    return Cache, (DynamicLayer, DynamicSlidingWindowLayer), SharedPrefixLayer


class SharedPrefix:
    """The keys and values of the last shared prefix run on ``model``, kept while consecutive batches
    share it (a group of :func:`~.prefix_plan.plan_batches`) and freed when another prefix comes or :meth:`clear`
    is called: one prefix's layers (a batch of one) at a time. Everything stays on ``model.device``:
    nothing is read back.

    The caller has checked :func:`cache_blocker`; a model that builds other cache layers than
    transformers' dynamic ones is run without the shared prefix instead (:meth:`logits`).
    """

    def __init__(self, model, pad_token_id) -> None:
        self.model, self.pad_token_id = model, pad_token_id
        self.ids: list[int] | None = None  # the prefix whose layers are held
        self.cache = None  # its transformers Cache of SharedPrefixLayer, or None: the model's layers cannot be shared
        self.runs = 0  # prefixes run so far (one per group)
        self._limits = None  # _model_limits, read on first use
        self._cache_argument = _cache_argument(model)  # read once: the model does not change, batches do
        self.device = model.device  # read once too: a PEFT model's device is a chain of __getattr__ misses

    def clear(self) -> None:
        self.ids = self.cache = None

    def blocker(self, width: int) -> str | None:
        """:func:`cache_blocker` of the model, its config read once per :class:`SharedPrefix` (one call's batches)."""
        if self._limits is None:
            self._limits = _model_limits(self.model)
        return _blocker(self._limits, width)

    def _run(self, ids: list[int]) -> None:
        self.clear()
        Cache, plain_layers, SharedPrefixLayer = _shared_layer_class()
        device = self.device
        prefix = torch.tensor([ids], dtype=torch.long).to(device, non_blocking=True)
        out = self.model(
            input_ids=prefix,
            attention_mask=torch.ones_like(prefix),
            position_ids=torch.arange(len(ids), device=device)[None, :],
            use_cache=True,
            logits_to_keep=_no_positions(device),
        )
        layers = _returned_cache(out).layers
        if all(type(layer) in plain_layers for layer in layers):
            self.cache = Cache(layers=[SharedPrefixLayer(layer) for layer in layers])
        self.ids = ids
        self.runs += 1

    def logits(
        self,
        rows: Sequence[Sequence[int]],
        prefix_length: int,
        inner: Sequence[int] | None = None,
        suffix: dict[str, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """Last-position logits (B, V) of ``rows``, whose first ``prefix_length`` tokens are the same,
        against that prefix's keys and values (run now unless they are the ones held); equal to
        ``last_position_logits`` of the left-padded rows within float rounding (module docstring).

        ``inner`` (:attr:`~.prefix_plan.Batch.inner`): row j's first ``inner[j]`` tokens, where longer than the
        prefix, are an inner prefix shared with other rows; each distinct one runs once, in one call for
        the batch against the prefix, and its rows run against both. ``suffix``: :func:`suffix_inputs` of the
        same arguments where the caller built them already (on the host, before the forward calls)."""
        if prefix_length < 1 or any(len(r) <= prefix_length for r in rows):
            raise InvalidValueError(f"every row must be longer than the shared prefix ({prefix_length} tokens)")
        inner = [prefix_length] * len(rows) if inner is None else list(inner)
        if len(inner) != len(rows) or any(not prefix_length <= n < len(r) for n, r in zip(inner, rows)):
            raise InvalidValueError("every row's inner prefix must be at least the shared prefix and shorter than it")
        ids = list(rows[0][:prefix_length])
        if self.ids != ids:
            self._run(ids)
        device = self.device
        if self.cache is None:
            padded = left_pad(rows, self.pad_token_id)
            return last_position_logits(self.model, **{k: v.to(device, non_blocking=True) for k, v in padded.items()})
        layers = self.cache.layers
        try:
            inner_mask = self._run_inner(rows, prefix_length, inner)
            if suffix is None:
                suffix = suffix_inputs(rows, prefix_length, inner, self.pad_token_id)
            suffix = {k: v.to(device, non_blocking=True) for k, v in suffix.items()}
            mask = suffix["attention_mask"]
            before = mask.new_ones((mask.shape[0], prefix_length))
            mask = torch.cat([before, mask] if inner_mask is None else [before, inner_mask, mask], dim=1)
            logits = self.model(
                input_ids=suffix["input_ids"],
                attention_mask=mask,
                position_ids=suffix["position_ids"],
                **{self._cache_argument: self.cache},
                use_cache=True,
                logits_to_keep=1,
            ).logits
        finally:
            for layer in layers:
                layer.inner = layer.captured = None  # the inner prefixes live for this batch only
        return logits[:, -1, :]

    def _run_inner(self, rows: Sequence[Sequence[int]], prefix_length: int, inner: list[int]) -> torch.Tensor | None:
        """Run the batch's distinct inner prefixes (tokens ``prefix_length:inner[j]``) once, left-padded after the
        prefix, and hand each layer's keys and values to the suffix call (``layer.inner``); the attention mask
        of their span for every row (zero where a row has none), or None where no row has one."""
        stems: dict[tuple[int, ...], int] = {}
        index = []
        for row, n in zip(rows, inner):
            stem = tuple(row[prefix_length:n])
            index.append(stems.setdefault(stem, len(stems)) if stem else -1)
        if not stems:
            return None
        device = self.device
        padded = left_pad(list(stems), self.pad_token_id)
        padded["position_ids"] = padded["position_ids"] + prefix_length
        padded = {k: v.to(device, non_blocking=True) for k, v in padded.items()}
        mask = padded["attention_mask"]
        layers = self.cache.layers
        for layer in layers:
            layer.captured = ()
        self.model(
            input_ids=padded["input_ids"],
            attention_mask=torch.cat([mask.new_ones((mask.shape[0], prefix_length)), mask], dim=1),
            position_ids=padded["position_ids"],
            **{self._cache_argument: self.cache},
            use_cache=True,
            logits_to_keep=_no_positions(device),
        )
        has = torch.tensor([i >= 0 for i in index])
        rows_index = torch.tensor([max(i, 0) for i in index], dtype=torch.long).to(device, non_blocking=True)
        for layer in layers:
            layer.inner = (*layer.captured, rows_index)
            layer.captured = None
        # a row without an inner prefix reads the first one's keys, all masked out
        return mask.index_select(0, rows_index) * has.to(device, non_blocking=True)[:, None]


def suffix_inputs(
    rows: Sequence[Sequence[int]], prefix_length: int, inner: Sequence[int] | None, pad_token_id
) -> dict[str, torch.Tensor]:
    """The host-side inputs of a batch's suffix call (:meth:`SharedPrefix.logits`): each row after its inner
    prefix (``inner``; None: after the shared ``prefix_length`` tokens) left-padded, its position ids counting on
    from there. On the CPU; nothing here needs the model, so a caller can build them ahead of the forward calls.

    Examples
    --------
    >>> out = suffix_inputs([[1, 2, 3, 4], [1, 2, 5]], 2, None, 0)
    >>> out["input_ids"].tolist(), out["attention_mask"].tolist(), out["position_ids"].tolist()
    ([[3, 4], [0, 5]], [[1, 1], [0, 1]], [[2, 3], [2, 2]])
    """
    inner = [prefix_length] * len(rows) if inner is None else list(inner)
    suffix = left_pad([r[n:] for r, n in zip(rows, inner)], pad_token_id)
    offset = torch.tensor(inner, dtype=torch.long)[:, None]
    suffix["position_ids"] = suffix["position_ids"] + offset  # after the prefix and the row's inner prefix
    return suffix


def prefix_cached_logits(model, rows: Sequence[Sequence[int]], prefix_length: int, pad_token_id) -> torch.Tensor:
    """:meth:`SharedPrefix.logits` of one batch: its prefix run once for its rows, then freed."""
    return SharedPrefix(model, pad_token_id).logits(rows, prefix_length)
