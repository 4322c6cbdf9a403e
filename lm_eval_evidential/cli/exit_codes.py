"""The exit status of every command, and how a failure is said: one module, used by each subcommand.

====  ======================================================================================
0     success: the table, files or report were produced
1     error: bad input or usage (an unknown option or score, a missing argument or task,
      missing, truncated or corrupted records, an unwritable output path): an
      :class:`~lm_eval_evidential.errors.EvidentialError`. The message says what and how to
      fix it; no traceback (``-v`` adds one)
2     refused: a comparison the audit will not make (a
      :class:`~lm_eval_evidential.errors.RefusalError`). A class-count (K) mismatch
      (``CardinalityMismatchError`` under ``--k-policy assert``, or ``restrict`` leaving a side
      empty), records of different producers (``FingerprintMismatchError``, unless
      ``--allow-fingerprint-mismatch``), or a permuted run given to an audit that counts
      records as examples (``PermutedRecordsError``, unless ``--average-orders``). Commands
      that compare several pairs (``ood``, ``report``, ``compare``) still write every accepted
      pair and exit 2 if any pair was refused
====  ======================================================================================

Any other exception is a bug: it is not caught, so it shows its traceback and Python's status.
argparse's own status for a usage error is 2; here a usage error is an error (1), so that 2
always means a refusal a script can act on.
"""

from __future__ import annotations

import sys

from lm_eval_evidential.errors import EvidentialError, RefusalError, one_line

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_REFUSED = 2
#: The exit-code map of every subcommand (see the module docstring).
EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_ERROR: "error: bad input or usage",
    EXIT_REFUSED: "refused by a K (class count), fingerprint (producer) or answer-order check",
}
EPILOG = "exit status: " + "; ".join(f"{code} {meaning}" for code, meaning in EXIT_CODES.items())


def exit_status(exc: EvidentialError) -> int:
    """:data:`EXIT_REFUSED` for a refusal, :data:`EXIT_ERROR` for any other expected error."""
    return EXIT_REFUSED if isinstance(exc, RefusalError) else EXIT_ERROR


def fail(command: str, exc: EvidentialError) -> int:
    """Say ``exc`` as the one line ``lm-eval-evidential <command>: error|refused: …``; its exit status."""
    print(f"lm-eval-evidential {command}: {one_line(exc)}", file=sys.stderr)
    return exit_status(exc)
