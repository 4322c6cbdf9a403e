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
