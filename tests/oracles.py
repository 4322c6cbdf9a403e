"""The model's own answer logits, computed apart from the harness: the oracle evidence is checked against."""

from __future__ import annotations

import numpy as np
import torch


def own_logits(model, tokenizer, records, task, tail: int = 0):
    """(answer logits, last ``tail`` vocabulary logits, IB-EDL noise keys) per record of ``task``.

    One unpadded prompt at a time, by transformers/peft directly: the prompt is ``task``'s own
    rendering of the record's doc, and each answer id the last token of prompt + " " + letter.
    """
    docs = list(task.eval_docs)
    answers, tails, keys = [], [], []
    for r in records:
        doc = docs[r["doc_id"]]
        prompt = task.doc_to_text(doc)
        ids = tokenizer(prompt)["input_ids"]
        answer_ids = [tokenizer(prompt + " " + x)["input_ids"][-1] for x in doc["letters"]]
        with torch.no_grad():
            full = model(torch.tensor([ids])).logits[0, -1].double()
        answers.append(full[answer_ids].numpy())
        tails.append(full[full.shape[0] - tail :].numpy() if tail else None)
        keys.append(f"{prompt}\x00{tuple(answer_ids)}")  # the question key of the IB-EDL noise (harness/model.py)
    return np.array(answers), tails, keys


def replayed_dropout_logits(model, ids, row_seed: int, keep: int = 1):
    """Last-position logits of one unpadded prompt with MC dropout's masks replayed by hand: the adapter in eval
    mode (its own dropout off), each ``lora_A``'s input multiplied by the documented mask (modeling/members.py:
    a generator seeded by ``question_seed(row_seed, layer name)``, uniform >= p kept over the prompt's tokens,
    the last ones under a layer that sees fewer, / (1 - p))."""
    from lm_eval_evidential.modeling.heads import question_seed

    handles = []
    for name, module in model.named_modules():
        if "default" not in getattr(module, "lora_A", {}):
            continue
        p = module.lora_dropout["default"].p

        def replay(mod, args, name=name, p=p):
            (x,) = args
            gen = torch.Generator().manual_seed(question_seed(row_seed, f"{name}.default"))
            draw = torch.rand((len(ids), x.shape[2]), generator=gen)
            return (x * (draw[-x.shape[1] :] >= p).float() / (1 - p),)

        handles.append(module.lora_A["default"].register_forward_pre_hook(replay))
    try:
        with torch.no_grad():
            return model(torch.tensor([ids]), logits_to_keep=keep).logits[0, -1], len(handles)
    finally:
        for h in handles:
            h.remove()
