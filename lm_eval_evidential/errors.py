"""Every exception and warning this package raises on purpose, in one place (the bottom layer).

Two base classes decide what a failure is:

- :class:`EvidentialError`: an *expected* error. The user's input or environment is wrong (a
  missing file, a bad argument, a dataset row that cannot be scored, a folder that cannot be
  written); the message says what, where, and how to fix it. A command prints it as one
  ``error:`` line and exits 1, never with a traceback.
- :class:`RefusalError` (an :class:`EvidentialError` too): a valid request the package declines
  because its answer would mislead, such as comparing records of different class counts K or of
  different producers. One ``refused:`` line, exit status 2.

Anything else that escapes (a plain ``ValueError``, ``OSError``, ``KeyError``, …) is a bug and
keeps its traceback. Each concrete class is also the builtin exception it has always been
(``RecordsError`` is a ``ValueError``, ``MirrorFileNotFound`` a ``FileNotFoundError``), so
``except ValueError`` in user code and in lm_eval keeps working. The classes are importable from
the modules that raise them as well (``lm_eval_evidential.records.RecordsError``, …).
:class:`~lm_eval_evidential.metrics.cardinality.CardinalityMismatchError` is defined beside the
K check whose remedy it explains, on :class:`RefusalError`.

This module imports nothing but the standard library, so every layer may raise these.
"""

from __future__ import annotations

import os
import sys

__all__ = [
    "EvidentialError",
    "RefusalError",
    "one_line",
    "install_one_line_errors",
    "InvalidValueError",
    "InputNotFoundError",
    "NotAFolderError",
    "OutputExistsError",
    "UnsupportedRequestError",
    "RecordsError",
    "OutputPathError",
    "OutputWriteError",
    "InputFileError",
    "FingerprintMismatchError",
    "OrderMismatchError",
    "QuestionMismatchError",
    "SameRunTwiceError",
    "PermutedRecordsError",
    "EvidentialInputError",
    "AnswerTokenError",
    "DatasetError",
    "MirrorFileNotFound",
    "HarnessVersionError",
    "CheckpointError",
    "UndefinedMetricWarning",
]


# ------------------------------------------------------------------------------ the two bases
class EvidentialError(Exception):
    """An expected error: the input or the environment is wrong, and the message says how to fix it."""


class RefusalError(EvidentialError):
    """A valid request the package declines because its answer would mislead (exit status 2)."""


def one_line(exc: EvidentialError) -> str:
    """The one line an expected error prints as: ``refused: …`` for a refusal, else ``error: …``.

    Examples
    --------
    >>> one_line(InvalidValueError("n_boot must be 0 or >= 2, got 1"))
    'error: n_boot must be 0 or >= 2, got 1'
    >>> one_line(FingerprintMismatchError("adapter_sha256: id='a1' vs ood='b2'"))
    "refused: adapter_sha256: id='a1' vs ood='b2'"
    """
    kind = "refused" if isinstance(exc, RefusalError) else "error"
    return f"{kind}: {exc}"


def install_one_line_errors(explain=None) -> None:
    """Under plain ``lm_eval`` (no command of ours to catch it), an uncaught :class:`EvidentialError`
    prints as its :func:`one_line`; any other exception is a bug and keeps the interpreter's traceback,
    unless an ``explain(exc)`` given here names it as an expected condition (its one ``error:`` line).

    Installed when this package's model or task is built (never merely because lm_eval was imported);
    ``LM_EVAL_EVIDENTIAL_TRACEBACK=1`` shows the traceback for ours too. Idempotent; each ``explain``
    is added once.
    """
    if explain is not None and explain not in _EXPLAINERS:
        _EXPLAINERS.append(explain)
    previous = sys.excepthook
    if getattr(previous, "_evidential_patched", False):
        return

    def excepthook(exc_type, exc, tb):
        if os.environ.get("LM_EVAL_EVIDENTIAL_TRACEBACK"):
            return previous(exc_type, exc, tb)
        if isinstance(exc, EvidentialError):
            print(one_line(exc), file=sys.stderr)
            return
        for explain_one in _EXPLAINERS:
            text = explain_one(exc)
            if text is not None:
                print(f"error: {text}", file=sys.stderr)
                return
        previous(exc_type, exc, tb)

    excepthook._evidential_patched = True
    sys.excepthook = excepthook


#: Explainers of exceptions that are expected although not ours (a limit of the process), see above.
_EXPLAINERS: list = []


# ------------------------------------------------------------------------------ generic kinds
class InvalidValueError(EvidentialError, ValueError):
    """An argument or setting has a value the package cannot use (scikit-learn's ``InvalidParameterError``)."""


class InputNotFoundError(EvidentialError, FileNotFoundError):
    """A file, folder, run or task the user named does not exist where it was looked for."""


class NotAFolderError(EvidentialError, NotADirectoryError):
    """A path that must be a folder (an output path to read runs from, an output folder) is a file."""


class OutputExistsError(EvidentialError, FileExistsError):
    """An output folder already holds files that would be overwritten; nothing was written."""


class UnsupportedRequestError(EvidentialError, NotImplementedError):
    """A request the evidential model does not serve (generation, perplexity): use another model."""


# ------------------------------------------------------------------------------ records (files)
class RecordsError(EvidentialError, ValueError):
    """A records file is missing, truncated, corrupted or of another schema version."""


class OutputPathError(EvidentialError, ValueError):
    """An output path that would destroy data (an input, a records file, a folder); nothing was written."""


class _ExplainedOSError(EvidentialError, OSError):
    """An OSError whose message (``strerror``) already names the path, the cause and the fix."""

    def __str__(self) -> str:
        return str(self.strerror)


class OutputWriteError(_ExplainedOSError):
    """A file or folder could not be written (no permission, a read-only disk, a file-size limit,
    a full disk); the message names the path and the fix, and nothing was replaced."""


class InputFileError(_ExplainedOSError):
    """An input that cannot be read as a file (a FIFO or device, a folder, a symlink loop or a dangling
    link, no read permission, larger than its bound); the message names the real cause and its fix."""


class FingerprintMismatchError(RefusalError, ValueError):
    """Records produced by different models/settings were about to be compared."""


class OrderMismatchError(RefusalError, ValueError):
    """Records shown in different answer orders (a permuted against an unpermuted run, or two permutation
    settings) were about to be compared order by order; the message names both and the fix."""


class QuestionMismatchError(RefusalError, ValueError):
    """Methods whose records of one task hold different questions (another ``--limit``, another subset) were about
    to be laid side by side; the message names the task, both methods, a question only one has, and the fix."""


class SameRunTwiceError(RefusalError, ValueError):
    """Two methods about to be laid side by side hold the same predictions (one run given twice, or a copy): a
    method compared with itself ties every row; the message names both methods, the task and the fix."""


class PermutedRecordsError(RefusalError, ValueError):
    """Records of a permuted run (one per (question, order)) given to an audit that counts each record as
    an example, so each question would count once per order; the message names the task and the remedies
    (``--average-orders``, the ``permutations`` audit, an unpermuted run)."""


# ------------------------------------------------------------------------------ model and data
class EvidentialInputError(EvidentialError, ValueError):
    """A request the evidential model cannot score; the message names task, doc, value and fix."""


class AnswerTokenError(EvidentialInputError):
    """An answer label that is not exactly one token of its own after the prompt (training and evaluation alike)."""


class DatasetError(EvidentialError, ValueError):
    """A dataset row or split cannot be used; the message names task, doc and value, and the fix."""


class MirrorFileNotFound(DatasetError, FileNotFoundError):
    """A split's file is missing from the offline mirror (a DatasetError, so one line; a FileNotFoundError too)."""


class HarnessVersionError(EvidentialError, RuntimeError):
    """The installed lm_eval is not one this plugin can hook into, or cannot be imported (a module it needs is not
    installed: the message names it and the ``pip install`` that adds it)."""


class CheckpointError(EvidentialError, ValueError):
    """A training checkpoint that cannot be resumed from (incomplete, damaged, of another base model, method
    or task); the message names the checkpoint, what is wrong and the fix."""


# ------------------------------------------------------------------------------ warnings
class UndefinedMetricWarning(UserWarning):
    """A metric is undefined on this input and was returned as NaN; the message says why."""
