"""Third-party output around our own calls: warnings silenced around those calls only (never globally),
and our progress bars kept to one line per interval in a log file."""

from __future__ import annotations

import contextlib
import os
import sys
import warnings

#: Seconds between two updates of our progress bars when they go to a file, not a terminal.
LOG_PROGRESS_INTERVAL = 30.0


def progress_options(stream=None) -> dict:
    """tqdm keyword arguments for this package's progress bars (``tqdm(..., **progress_options())``).

    On a terminal, none: tqdm redraws one line in place. Written to a file (a log, CI, ``2> log``),
    every redraw is another line, hundreds for one evaluation; there the bar updates once every
    :data:`LOG_PROGRESS_INTERVAL` seconds (tqdm's ``mininterval``; the first and the last update are
    always written). A ``TQDM_MININTERVAL`` in the environment (tqdm's own setting) wins.

    >>> import io
    >>> progress_options(io.StringIO())
    {'mininterval': 30.0}
    """
    stream = sys.stderr if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    if "TQDM_MININTERVAL" in os.environ or (isatty is not None and isatty()):
        return {}
    return {"mininterval": LOG_PROGRESS_INTERVAL}


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
