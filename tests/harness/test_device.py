"""The GPU path without a GPU: the model and every tensor it is fed go where the harness's
``device=`` (or accelerate) put them, the kept logits come back to the host once per call, and
nothing in between names a device of its own."""

from __future__ import annotations

import pytest
import torch

import lm_eval_evidential.harness.model as model_module

from .test_model import make_lm

LETTERS = (" A", " B", " C", " D")


class Req:
    def __init__(self, doc_id, cont):
        self.args = (f"Question {doc_id}: which one{'?' * doc_id}\nAnswer:", cont)
        self.task_name, self.doc_id, self.doc = "custom", doc_id, {}


def test_the_model_and_its_adapter_live_on_the_harness_device(tiny_model, tiny_adapter):
    lm = make_lm(tiny_model, tiny_adapter, device="cpu")
    assert lm.device == torch.device("cpu")
    assert {p.device for p in lm.model.parameters()} == {lm.device}


@pytest.mark.parametrize("method", ["edl", "ib_edl"])
def test_inputs_go_to_the_harness_device_and_logits_come_back_once_per_call(tiny_model, monkeypatch, method):
    # "meta" stands for the accelerator: a device this CPU cannot compute on, so any tensor that
    # reached the model from anywhere but lm.device, or any host copy, shows.
    lm = make_lm(tiny_model, batch_size=2, method=method)
    device = torch.device("meta")
    monkeypatch.setattr(lm, "_device", device)
    vocab = lm.model.get_output_embeddings().weight.shape[0]
    fed, gathers, copies = [], [], []

    def forward_on_the_device(model, input_ids, attention_mask, position_ids):
        fed.extend(t.device for t in (input_ids, attention_mask, position_ids))
        assert model is lm.model
        return torch.zeros((input_ids.shape[0], vocab), device=input_ids.device)  # where the model ran

    real_gather, real_cpu = torch.Tensor.gather, torch.Tensor.cpu

    def gather(self, dim, index, *args, **kwargs):
        gathers.append((self.device, index.device))
        return real_gather(self, dim, index, *args, **kwargs)

    def cpu(self, *args, **kwargs):
        copies.append(self.device)
        return torch.zeros(self.shape, dtype=self.dtype) if self.device == device else real_cpu(self, *args, **kwargs)

    monkeypatch.setattr(model_module, "last_position_logits", forward_on_the_device)
    monkeypatch.setattr(torch.Tensor, "gather", gather)
    monkeypatch.setattr(torch.Tensor, "cpu", cpu)
    requests = [Req(doc_id, cont) for doc_id in range(5) for cont in LETTERS]
    responses = lm.loglikelihood(requests, disable_tqdm=True)

    assert len(responses) == len(requests) and len(lm.evidence) == 5
    assert len(fed) == 3 * 3 and set(fed) == {device}  # 5 prompts in batches of 2: 3 forwards of 3 tensors
    assert gathers and set(gathers) == {(device, device)}  # answer ids gathered on the device
    assert copies == [device]  # answer logits (and IB-EDL's σ logits, gathered with them): one copy, not per batch
