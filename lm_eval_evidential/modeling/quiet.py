"""Third-party warnings that our own calls trigger, silenced around those calls only (never globally)."""

from __future__ import annotations

import contextlib
import warnings


@contextlib.contextmanager
def peft_wrapping():
    """Around our ``peft`` calls that wrap a model (``get_peft_model``, ``PeftModel.from_pretrained``).

    peft reads ``model.is_gradient_checkpointing`` whenever it wraps a model, and transformers 5
    deprecated that property with a FutureWarning, so every train and eval printed it although
    nothing the user does can change it. Only that one message is silenced, only inside this block;
    any other warning still shows.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
        yield
