"""``--model evidential`` with the prefix cache (modeling/prefix_cache.py): the same evidence and
responses with it on and off (EDL, IB-EDL, softmax; phantom letters; "(A)" labels; K cyclic orders
sharing their question), ``prefix_cache=False`` never shares, and the cache's tensors live on the
model's device with one host copy per call."""

from __future__ import annotations

import pytest
import torch

from lm_eval_evidential.modeling.prefix_cache import SharedPrefix

from .test_model import make_lm

TOL = 1e-5

SHOTS = "".join(
    f"Question: which of these is item {i} of the list?\nA) one\nB) two\nC) three\nD) four\nAnswer: {'ABCD'[i % 4]}\n\n"
    for i in range(5)
)


class Req:
    def __init__(self, doc_id, context, cont, task="fewshot"):
        self.args = (context, cont)
        self.task_name, self.doc_id, self.doc = task, doc_id, {}


def _requests():
    letters = [" A", " B", " C", " D"]
    labels = [" (A)", " (B)", " (C)", " (D)"]
    reqs = []
    for doc_id in range(7):  # a shared 5-shot block, then questions of different lengths
        context = f"{SHOTS}Question: is {'very ' * doc_id}this one?\nA) yes\nB) no\nC) maybe\nD) never\nAnswer:"
        reqs += [Req(doc_id, context, c) for c in letters]
        reqs += [Req(doc_id, context, c, task="labels") for c in labels]
    # K cyclic orders of one question: they share the text before the options
    options = ["red", "green", "blue", "black"]
    for k in range(4):
        shown = options[k:] + options[:k]
        body = "".join(f"{x}) {o}\n" for x, o in zip("ABCD", shown))
        context = f"{SHOTS}Question: which colour is the sky at night, in the text?\n{body}Answer:"
        reqs += [Req(100 + k, context, c, task="orders") for c in letters]
    return reqs


def _evidence(lm, requests):
    responses = lm.loglikelihood(requests, disable_tqdm=True)
    return responses, lm.evidence.take()


@pytest.mark.parametrize("method", ["edl", "ib_edl", "softmax"])
def test_evidential_files_the_same_evidence_with_the_cache_on_and_off(tiny_model, tiny_adapter, method, monkeypatch):
    cached_calls, prefix_runs, inner_rows = [], [], []
    real_logits, real_run = SharedPrefix.logits, SharedPrefix._run

    def counted(self, rows, prefix_length, inner=None, suffix=None):
        cached_calls.append((len(rows), prefix_length))
        inner_rows.extend(tuple(r[:n]) for r, n in zip(rows, inner or ()) if n > prefix_length)
        return real_logits(self, rows, prefix_length, inner, suffix)

    def run(self, ids):
        prefix_runs.append(tuple(ids))
        return real_run(self, ids)

    monkeypatch.setattr(SharedPrefix, "logits", counted)
    monkeypatch.setattr(SharedPrefix, "_run", run)
    requests = _requests()
    on = make_lm(tiny_model, tiny_adapter, method=method, batch_size=6)
    responses_on, evidence_on = _evidence(on, requests)
    assert cached_calls and all(prefix > 30 for _, prefix in cached_calls)
    assert len(prefix_runs) == len(set(prefix_runs)) < len(cached_calls)  # a group's prefix runs once
    # the K orders of the permuted question share it before its options: a prefix within the 5-shot prefix
    question = on.tok_encode(f"{SHOTS}Question: which colour is the sky at night, in the text?\n")
    assert sum(list(stem[: len(question) - 1]) == question[:-1] for stem in inner_rows) == 4
    off = make_lm(tiny_model, tiny_adapter, method=method, batch_size=6, prefix_cache=False)
    calls = len(cached_calls)
    responses_off, evidence_off = _evidence(off, requests)
    assert len(cached_calls) == calls  # prefix_cache=False never runs a shared prefix
    assert evidence_on.keys() == evidence_off.keys() and len(evidence_on) == 7 * 2 + 4
    for key, a in evidence_on.items():
        b = evidence_off[key]
        assert (a.token_ids, a.continuations) == (b.token_ids, b.continuations)
        assert len(a.phantom_logits) == len(b.phantom_logits)
        torch.testing.assert_close(torch.tensor(a.logits), torch.tensor(b.logits), rtol=0, atol=TOL)
        torch.testing.assert_close(torch.tensor(a.phantom_logits), torch.tensor(b.phantom_logits), rtol=0, atol=TOL)
        if a.alpha is not None:
            torch.testing.assert_close(torch.tensor(a.alpha), torch.tensor(b.alpha), rtol=0, atol=TOL)
    assert any(e.phantom_logits for e in evidence_on.values())
    for (lp_a, greedy_a), (lp_b, greedy_b) in zip(responses_on, responses_off):
        assert abs(lp_a - lp_b) <= TOL and greedy_a == greedy_b


def test_prefix_cache_takes_only_true_or_false(tiny_model):
    from lm_eval_evidential.errors import InvalidValueError

    with pytest.raises(
        InvalidValueError,
        match=r"prefix_cache='sometimes' must be True or False \(True runs a prefix .*; e\.g\. prefix_cache=False",
    ):
        make_lm(tiny_model, prefix_cache="sometimes")


def test_the_shared_prefix_lives_on_the_model_device_and_logits_come_back_once(tiny_model, monkeypatch):
    # "meta" stands for the accelerator (as in test_device.py): a stand-in model on it records what
    # it is fed, hands back a real transformers cache of meta tensors, and any host copy shows.
    from types import SimpleNamespace

    from transformers.cache_utils import Cache, DynamicLayer

    lm = make_lm(tiny_model, batch_size=6)
    device = torch.device("meta")
    config, vocab = lm.model.config, lm.model.get_output_embeddings().weight.shape[0]
    heads, dim = config.num_key_value_heads, config.hidden_size // config.num_attention_heads
    fed, copies = [], []

    class OnTheDevice:
        def __init__(self):
            self.config, self.device, self.dtype = config, device, torch.float32

        def __call__(self, input_ids, attention_mask, position_ids, use_cache, logits_to_keep, cache=None):
            fed.extend(t.device for t in (input_ids, attention_mask, position_ids))
            rows, width = input_ids.shape
            new = torch.zeros((rows, heads, width, dim), device=device)
            if cache is None and use_cache:  # the prefix: a cache of meta tensors
                layers = [DynamicLayer() for _ in range(config.num_hidden_layers)]
                for layer in layers:
                    layer.update(new, new)
                cache = Cache(layers=layers)
            elif cache is not None:  # the suffixes read every layer's prefix
                for i in range(config.num_hidden_layers):
                    keys, _ = cache.update(new, new, i)
                    assert keys.device == device and keys.shape[0] == rows
            return SimpleNamespace(cache=cache, logits=torch.zeros((rows, 1, vocab), device=device))

    real_cpu, real_to = torch.Tensor.cpu, torch.Tensor.to
    blocking = []

    def to(self, *args, **kwargs):  # every input goes to the device without waiting for its stream
        if self.device != device and device in (*args, kwargs.get("device")) and not kwargs.get("non_blocking"):
            blocking.append(self.shape)
        return real_to(self, *args, **kwargs)

    def cpu(self, *args, **kwargs):
        copies.append(self.device)
        return torch.zeros(self.shape, dtype=self.dtype) if self.device == device else real_cpu(self, *args, **kwargs)

    monkeypatch.setattr(lm, "_device", device)
    monkeypatch.setattr(lm, "_model", OnTheDevice())
    monkeypatch.setattr(torch.Tensor, "cpu", cpu)
    monkeypatch.setattr(torch.Tensor, "to", to)
    requests = _requests()
    lm.loglikelihood(requests, disable_tqdm=True)
    assert fed and set(fed) == {device}
    assert copies == [device]  # the kept logits: one copy per call, none per batch or question
    assert blocking == []


def test_a_model_that_cannot_share_its_prefix_runs_uncached_and_says_so_once(tiny_model, monkeypatch, caplog):
    import logging

    calls = []
    monkeypatch.setattr(SharedPrefix, "_run", lambda self, ids: calls.append(ids))
    requests = _requests()
    lm = make_lm(tiny_model, batch_size=3)
    # a sliding window narrower than the batches (Llama reads none; cache_blocker does): every batch falls back
    monkeypatch.setattr(lm.model.config, "sliding_window", 8, raising=False)
    with caplog.at_level(logging.INFO, logger="lm_eval.evidential"):
        responses, evidence = _evidence(lm, requests)
    said = [r.getMessage() for r in caplog.records if "prefix cache not used" in r.getMessage()]
    assert calls == [] and len(said) == 1 and "sliding window of 8 tokens" in said[0]
    off = make_lm(tiny_model, batch_size=3, prefix_cache=False)
    responses_off, evidence_off = _evidence(off, requests)
    assert responses == responses_off  # the same batches' arithmetic: byte for byte
    assert {k: v.logits for k, v in evidence.items()} == {k: v.logits for k, v in evidence_off.items()}
