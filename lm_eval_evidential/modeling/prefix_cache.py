"""Shared prompt prefixes computed once: the few-shot block of a batch's prompts (or the question
before the options of its permuted orders) goes through the model once, and every prompt's own
suffix runs against its keys and values.

:func:`plan_batches` orders a call's distinct prompts and cuts them into batches; a batch whose
prompts share a prefix long enough to pay (:func:`pays`) is run by :func:`prefix_cached_logits`,
the others by :func:`~lm_eval_evidential.modeling.encoding.last_position_logits` as before.

Exactness. The suffix batch is left-padded *after* the shared prefix: row i is
``[prefix][pad...][suffix_i]`` with the attention mask zero on the pads and position ids counting
real tokens only (the prefix 0..L-1, then the suffix from L), so every real token attends to
exactly the keys, at exactly the positions, it has in the uncached left-padded batch
``[pad...][prefix][suffix_i]``. The prefix's keys and values come from a batch of one instead of
being recomputed in each row: the same arithmetic on other matrix shapes, equal to the uncached
logits within float rounding (measured ≤ 4e-7 in float32 on every family ``testing.tiny`` builds;
the tests bound it by 1e-5). The prefix's layer caches are read, never written: each layer hands
its attention ``cat(prefix expanded to the batch, the suffix's own keys)`` and keeps nothing, so
the expanded prefix exists for one layer at a time and is freed with its group.

Fallbacks (per batch, to :func:`last_position_logits`; :func:`cache_blocker` says why): a model
whose cache layers are not transformers' plain dynamic layers (linear-attention / state-space
layers, quantised or offloaded caches), an attention implementation other than ``sdpa`` or
``eager`` (untested here), sliding-window layers whose window the padded batch would exceed
(the pads between prefix and suffix would count in the window), and transformers before 5.0
(no per-layer cache to share).
"""

from __future__ import annotations

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
    "prefix_cached_logits",
]

#: A batch is run against a shared prefix when it saves at least this many token positions of the
#: forward: prefix length × (rows - 1). Below it the prefix's own forward call and the per-layer
#: concatenation cost more than they save (benchmarks/bench_prefix_cache.py, ``--sweep``).
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


def pays(prefix_length: int, rows: int, min_saved: int = MIN_SAVED_TOKENS) -> bool:
    """Whether running ``rows`` prompts against one shared prefix of ``prefix_length`` tokens pays.

    Examples
    --------
    >>> pays(323, 8), pays(8, 4), pays(500, 1)
    (True, False, False)
    """
    return rows > 1 and prefix_length * (rows - 1) >= min_saved


class Batch(tuple):
    """``(rows, prefix_length)``: indices into the prompts, and the shared prefix to run once (0: none)."""

    __slots__ = ()

    def __new__(cls, rows: list[int], prefix_length: int = 0):
        return super().__new__(cls, (rows, prefix_length))

    @property
    def rows(self) -> list[int]:
        return self[0]

    @property
    def prefix_length(self) -> int:
        return self[1]


def plan_batches(
    prompts: Sequence[Sequence[int]], batch_size: int, *, reuse: bool = True, min_saved: int = MIN_SAVED_TOKENS
) -> list[Batch]:
    """Cut ``prompts`` (token id lists) into batches of at most ``batch_size``.

    With ``reuse``, prompts in token order (so that prompts sharing a prefix are neighbours) are
    cut into runs of at most ``batch_size`` whose shared prefix pays (:func:`pays`, every row
    keeping at least one token of its own); each such run is one batch with its prefix length.
    Every other prompt — and every prompt without ``reuse`` — goes into plain batches, longest
    first (as few pad tokens as the lengths allow), with prefix length 0. Prefix batches come
    first, longest first too.

    Examples
    --------
    >>> shots = list(range(100, 180))  # an 80-token few-shot block
    >>> prompts = [shots + [1, 2], shots + [3], [7, 8, 9], shots + [4, 5, 6]]
    >>> plan_batches(prompts, 4)
    [([0, 1, 3], 80), ([2], 0)]
    >>> plan_batches(prompts, 4, reuse=False)
    [([3, 0, 1, 2], 0)]
    """
    if batch_size < 1:
        raise InvalidValueError(f"batch_size must be >= 1, got {batch_size}")
    batches: list[Batch] = []
    plain: list[int] = []
    if reuse:
        order = sorted(range(len(prompts)), key=lambda i: prompts[i])
        start = 0
        while start < len(order):
            run, shared = [order[start]], len(prompts[order[start]]) - 1
            best_rows, best_prefix = 1, 0  # the start of this run that saves the most tokens
            for i in order[start + 1 : start + batch_size]:
                shared = min(shared, common_prefix_length(prompts[run[-1]], prompts[i]), len(prompts[i]) - 1)
                if shared * (batch_size - 1) < min_saved:
                    break  # from here on, not even a full batch on this prefix would pay
                run.append(i)
                if pays(shared, len(run), min_saved) and shared * (len(run) - 1) >= best_prefix * (best_rows - 1):
                    best_rows, best_prefix = len(run), shared
            if best_rows > 1:
                batches.append(Batch(run[:best_rows], best_prefix))
            else:
                plain.append(order[start])
            start += best_rows
    else:
        plain = list(range(len(prompts)))
    batches.sort(key=lambda b: -max(len(prompts[i]) for i in b.rows))
    plain.sort(key=lambda i: (-len(prompts[i]), i))  # ties in the order given, as without reuse
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


def cache_blocker(model, width: int) -> str | None:
    """Why ``model`` cannot run a batch ``width`` tokens wide (prefix + padded suffix) against a
    shared prefix exactly; None when it can. Read off the config (no forward pass)."""
    if _cache_api() is None:
        return "transformers before 5.0 has no per-layer cache to share"
    config = _config(model)
    attention = getattr(config, "_attn_implementation", None) or "eager"
    if attention not in ("sdpa", "eager"):
        return f"attention implementation {attention!r} (the shared prefix is tested with sdpa and eager only)"
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    layer_types = getattr(text, "layer_types", None) or ()
    if any(t not in ("full_attention", "sliding_attention") for t in layer_types):
        return f"layer types {sorted(set(layer_types))} (only attention layers share a prefix)"
    window = getattr(text, "sliding_window", None)
    sliding = window is not None and (
        "sliding_attention" in layer_types or (not layer_types and getattr(text, "use_sliding_window", True))
    )
    if sliding and width > int(window):
        return f"a sliding window of {window} tokens, narrower than the batch ({width}: prefix, pads, suffix)"
    return None


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


def prefix_cached_logits(model, rows: Sequence[Sequence[int]], prefix_length: int, pad_token_id) -> torch.Tensor:
    """Last-position logits (B, V) of ``rows``, whose first ``prefix_length`` tokens are the same,
    with the prefix run once; equal to ``last_position_logits`` of the left-padded rows within
    float rounding (module docstring). Everything stays on ``model.device``: nothing is read back.

    The caller has checked :func:`cache_blocker`; a cache layer of another kind than transformers'
    dynamic ones (a model that builds its own) is run without the shared prefix instead.
    """
    device = model.device
    if prefix_length < 1 or any(len(r) <= prefix_length for r in rows):
        raise InvalidValueError(f"every row must be longer than the shared prefix ({prefix_length} tokens)")
    Cache, plain_layers, SharedPrefixLayer = _shared_layer_class()
    prefix = torch.tensor([list(rows[0][:prefix_length])], dtype=torch.long).to(device)
    out = model(
        input_ids=prefix,
        attention_mask=torch.ones_like(prefix),
        position_ids=torch.arange(prefix_length, device=device)[None, :],
        use_cache=True,
        logits_to_keep=1,
    )
    cached = out.cache
    if not all(type(layer) in plain_layers for layer in cached.layers):
        del out, cached
        padded = left_pad(rows, pad_token_id)
        return last_position_logits(model, **{k: v.to(device) for k, v in padded.items()})
    shared = Cache(layers=[SharedPrefixLayer(layer) for layer in cached.layers])
    del out, cached
    suffix = {k: v.to(device) for k, v in left_pad([r[prefix_length:] for r in rows], pad_token_id).items()}
    mask = suffix["attention_mask"]
    mask = torch.cat([mask.new_ones((mask.shape[0], prefix_length)), mask], dim=1)
    logits = model(
        input_ids=suffix["input_ids"],
        attention_mask=mask,
        position_ids=suffix["position_ids"] + prefix_length,
        cache=shared,
        use_cache=True,
        logits_to_keep=1,
    ).logits
    return logits[:, -1, :]
