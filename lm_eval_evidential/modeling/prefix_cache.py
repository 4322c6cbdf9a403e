"""Shared prompt prefixes computed once: the few-shot block of a call's prompts (or the question
before the options of its permuted orders) goes through the model once, and every prompt's own
suffix runs against its keys and values.

:func:`plan_batches` orders a call's distinct prompts into groups sharing a prefix long enough to
pay (:func:`pays`), each cut into batches longest first, and batches the other prompts longest
first as before. The batches of a group follow each other and are run by one
:class:`SharedPrefix`, which runs the group's prefix once and keeps its keys and values until the
group ends; the others by :func:`~lm_eval_evidential.modeling.encoding.last_position_logits`.

Exactness. The suffix batch is left-padded *after* the shared prefix: row i is
``[prefix][pad...][suffix_i]`` with the attention mask zero on the pads and position ids counting
real tokens only (the prefix 0..L-1, then the suffix from L), so every real token attends to
exactly the keys, at exactly the positions, it has in the uncached left-padded batch
``[pad...][prefix][suffix_i]``. The prefix's keys and values come from a batch of one instead of
being recomputed in each row: the same arithmetic on other matrix shapes, equal to the uncached
logits within float rounding (measured ≤ 4e-7 in float32 on every family ``testing.tiny`` builds;
the tests bound it by 1e-5). The prefix's layer caches are read, never written: each layer hands
its attention ``cat(prefix expanded to the batch, the suffix's own keys)`` and keeps nothing, so
the expanded prefix exists for one layer at a time; the prefix itself (a batch of one) is held
while its group's batches run and freed when the next group's prefix is run or the call ends.

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

__all__ = [
    "MIN_SAVED_TOKENS",
    "Batch",
    "cache_blocker",
    "common_prefix_length",
    "pays",
    "plan_batches",
    "SharedPrefix",
    "prefix_cached_logits",
]

#: A group of prompts is run against its shared prefix when it saves at least this many token positions
#: of the forward, prefix length × (rows - 1), and so does a full batch of it, prefix length × min(rows,
#: batch size): below that the prefix's own forward call and the per-layer concatenation cost more
#: than they save. Measured (benchmarks/bench_prefix_cache.py ``--sweep``, SmolLM2 on the CPU): up to
#: ~28 saved positions the cached batch was 0.62-1.10x the uncached one's speed, from 48 on >= 1.2x;
#: 64 errs high, as a GPU's prefix call costs a read of every weight (benchmarks/README.md).
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
    """``(rows, prefix_length)``: indices into the prompts, and the shared prefix to run once (0: none).

    Consecutive batches whose rows begin with the same ``prefix_length`` tokens are one group: its
    prefix runs once for all of them (:class:`SharedPrefix`)."""

    __slots__ = ()

    def __new__(cls, rows: list[int], prefix_length: int = 0):
        return super().__new__(cls, (rows, prefix_length))

    @property
    def rows(self) -> list[int]:
        return self[0]

    @property
    def prefix_length(self) -> int:
        return self[1]


def _groups(prompts: Sequence[Sequence[int]], batch_size: int, min_saved: int) -> tuple[list[tuple], list[int]]:
    """``([(rows, prefix length), ...], plain rows)``: prompts in token order cut into groups sharing
    a prefix that pays, each the run from its first prompt that saves the most token positions."""
    order = sorted(range(len(prompts)), key=lambda i: prompts[i])
    # lcp[k]: tokens prompt order[k] shares with order[k - 1], less its last token (every row keeps one of its own)
    lcp = [0] + [
        min(common_prefix_length(prompts[a], prompts[b]), len(prompts[a]) - 1, len(prompts[b]) - 1)
        for a, b in zip(order, order[1:])
    ]
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
            groups.append((order[start : best_end + 1], best_prefix))
        else:
            plain.append(order[start])
        start = best_end + 1
    return groups, plain


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

    Examples
    --------
    >>> shots = list(range(100, 180))  # an 80-token few-shot block
    >>> prompts = [shots + [1, 2], shots + [3], [7, 8, 9], shots + [4, 5, 6]]
    >>> plan_batches(prompts, 2)
    [([3, 0], 80), ([1], 80), ([2], 0)]
    >>> plan_batches(prompts, 4, reuse=False)
    [([3, 0, 1, 2], 0)]
    """
    if batch_size < 1:
        raise InvalidValueError(f"batch_size must be >= 1, got {batch_size}")
    groups, plain = _groups(prompts, batch_size, min_saved) if reuse else ([], list(range(len(prompts))))

    def longest_first(rows: list[int]) -> list[int]:
        return sorted(rows, key=lambda i: (-len(prompts[i]), i))  # ties in the order given, as without reuse

    batches: list[Batch] = []
    for rows, prefix in sorted(((longest_first(r), p) for r, p in groups), key=lambda g: -len(prompts[g[0][0]])):
        batches += [Batch(rows[i : i + batch_size], prefix) for i in range(0, len(rows), batch_size)]
    plain = longest_first(plain)
    batches += [Batch(plain[i : i + batch_size]) for i in range(0, len(plain), batch_size)]
    return batches


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


@functools.cache
def _shared_layer_class():
    Cache, CacheLayerMixin, DynamicLayer, DynamicSlidingWindowLayer = _cache_api()

    class SharedPrefixLayer(CacheLayerMixin):
        """One layer's prefix keys and values (batch of one), read by every row and never written."""

        is_compileable = False
        is_croppable = False

        def __init__(self, layer) -> None:
            super().__init__()
            self.keys, self.values = layer.keys, layer.values
            self.is_sliding = layer.is_sliding
            self.device = layer.keys.device
            self.is_initialized = True

        def lazy_initialization(self, key_states, value_states) -> None:  # initialised from the prefix
            pass

        def update(self, key_states, value_states, *args, **kwargs):
            rows = key_states.shape[0]
            keys = torch.cat([self.keys.expand(rows, -1, -1, -1), key_states], dim=-2)
            values = torch.cat([self.values.expand(rows, -1, -1, -1), value_states], dim=-2)
            return keys, values

        def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
            # As a dynamic layer's: every key from position 0 (a sliding layer's too, the window not yet reached)
            return self.keys.shape[-2] + query_length, 0

        def get_seq_length(self) -> int:
            return self.keys.shape[-2]

        def get_max_length(self) -> int:
            return -1

    return Cache, (DynamicLayer, DynamicSlidingWindowLayer), SharedPrefixLayer


class SharedPrefix:
    """The keys and values of the last shared prefix run on ``model``, kept while consecutive batches
    share it (a group of :func:`plan_batches`) and freed when another prefix comes or :meth:`clear`
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
        device = self.model.device
        prefix = torch.tensor([ids], dtype=torch.long).to(device, non_blocking=True)
        out = self.model(
            input_ids=prefix,
            attention_mask=torch.ones_like(prefix),
            position_ids=torch.arange(len(ids), device=device)[None, :],
            use_cache=True,
            logits_to_keep=1,
        )
        layers = _returned_cache(out).layers
        if all(type(layer) in plain_layers for layer in layers):
            self.cache = Cache(layers=[SharedPrefixLayer(layer) for layer in layers])
        self.ids = ids
        self.runs += 1

    def logits(self, rows: Sequence[Sequence[int]], prefix_length: int) -> torch.Tensor:
        """Last-position logits (B, V) of ``rows``, whose first ``prefix_length`` tokens are the same,
        against that prefix's keys and values (run now unless they are the ones held); equal to
        ``last_position_logits`` of the left-padded rows within float rounding (module docstring)."""
        if prefix_length < 1 or any(len(r) <= prefix_length for r in rows):
            raise InvalidValueError(f"every row must be longer than the shared prefix ({prefix_length} tokens)")
        ids = list(rows[0][:prefix_length])
        if self.ids != ids:
            self._run(ids)
        device = self.model.device
        if self.cache is None:
            padded = left_pad(rows, self.pad_token_id)
            return last_position_logits(self.model, **{k: v.to(device, non_blocking=True) for k, v in padded.items()})
        suffix = left_pad([r[prefix_length:] for r in rows], self.pad_token_id)
        suffix = {k: v.to(device, non_blocking=True) for k, v in suffix.items()}
        mask = suffix["attention_mask"]
        mask = torch.cat([mask.new_ones((mask.shape[0], prefix_length)), mask], dim=1)
        logits = self.model(
            input_ids=suffix["input_ids"],
            attention_mask=mask,
            position_ids=suffix["position_ids"] + prefix_length,
            **{self._cache_argument: self.cache},
            use_cache=True,
            logits_to_keep=1,
        ).logits
        return logits[:, -1, :]


def prefix_cached_logits(model, rows: Sequence[Sequence[int]], prefix_length: int, pad_token_id) -> torch.Tensor:
    """:meth:`SharedPrefix.logits` of one batch: its prefix run once for its rows, then freed."""
    return SharedPrefix(model, pad_token_id).logits(rows, prefix_length)
