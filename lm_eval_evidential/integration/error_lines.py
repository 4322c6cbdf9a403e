"""The one-line errors of a ``--model evidential`` run under plain ``lm_eval``: ours
(:func:`lm_eval_evidential.errors.install_one_line_errors`), a limit of this process (memory, recursion)
and the stock CLI's own argument checks (with the nearest task names). Stock models keep lm_eval's
tracebacks."""

from __future__ import annotations

import sys

from lm_eval_evidential import errors
from lm_eval_evidential.integration.command_line import names_our_model
from lm_eval_evidential.integration.policy import RUN_POLICY


def nearest_task_names(exc: Exception) -> str:
    """For lm_eval's ``ValueError("Tasks not found: a, b")``: ``"; did you mean …"`` with the nearest
    names the newest TaskManager indexed (difflib), else ``""``."""
    import difflib

    prefix = "Tasks not found: "
    manager = RUN_POLICY.newest_task_manager()
    if not (isinstance(exc, ValueError) and str(exc).startswith(prefix)) or manager is None:
        return ""
    from lm_eval_evidential.tasks.stock import missing_view_hint

    known = list(manager.all_tasks)
    hints = []
    for name in str(exc)[len(prefix) :].split(", "):
        view_hint = missing_view_hint(name.strip())
        if view_hint is not None:
            hints.append(view_hint)
            continue
        # obqa -> obqa_edl: a shortened name is the start of the task's, too short for difflib's ratio
        close = sorted((k for k in known if k.startswith(name.strip() + "_")), key=len)[:3]
        close = close or difflib.get_close_matches(name.strip(), known, n=3, cutoff=0.7)
        hints.append(
            f"{name.strip()!r}: did you mean {' or '.join(close)}?" if close else f"{name.strip()!r}: no close name"
        )
    return f" ({'; '.join(hints)}; `lm_eval ls tasks` lists every task)"


#: The one line for a limit of this process that the stock CLI leaves as a traceback.
RESOURCE_ERRORS = {
    MemoryError: (
        "out of memory: this process may not allocate what the evaluation needs (an address-space limit, "
        "`ulimit -v`, or the machine's memory); raise the limit, or lower batch_size or max_length, or use a "
        "smaller model or dtype=bfloat16"
    ),
    RecursionError: (
        "an input is nested too deeply to read: a JSON or YAML argument or file (--metadata, --model_args, a "
        "task YAML, an adapter's JSON) nests beyond Python's recursion limit; flatten it"
    ),
}


def _out_of_address_space(exc: ImportError) -> bool:
    """A native library that could not be mapped for lack of address space (``ulimit -v``): the loader says
    ``failed to map segment from shared object`` or ``Cannot allocate memory``, not a missing module."""
    return any(text in str(exc) for text in ("failed to map segment", "Cannot allocate memory"))


def resource_error_text(exc: BaseException, argv: list[str]) -> str | None:
    """The one line for ``exc`` when it is a limit of this process (out of memory, an input nested too
    deeply) in a ``--model evidential`` run named by ``argv``; None otherwise (stock models keep lm_eval's
    own traceback; an ImportError of a missing module is a bug)."""
    if not names_our_model(argv) or not isinstance(exc, (MemoryError, RecursionError, ImportError)):
        return None
    if isinstance(exc, ImportError) and not _out_of_address_space(exc):
        return None
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return f"{RESOURCE_ERRORS[RecursionError if isinstance(exc, RecursionError) else MemoryError]} ({detail})"


def stock_argument_text(exc: BaseException, argv: list[str]) -> str | None:
    """The one line for a ``ValueError`` the stock CLI raised checking its own arguments (``Tasks not found``,
    with the nearest names and why a lettered view was not found) in a ``--model evidential`` run named
    by ``argv``; None otherwise (stock models keep lm_eval's traceback)."""
    from lm_eval_evidential.lm_eval_compat import stock_argument_error

    if not names_our_model(argv) or not isinstance(exc, ValueError):
        return None
    said = stock_argument_error(exc, hint=nearest_task_names(exc))
    return None if said is None else str(said)


def _explain(exc: BaseException) -> str | None:
    argv = sys.argv[1:]
    return resource_error_text(exc, argv) or stock_argument_text(exc, argv)


def install_one_line_errors() -> None:
    """:func:`lm_eval_evidential.errors.install_one_line_errors`, plus the one line for a limit of this
    process (:func:`resource_error_text`) and for the stock CLI's own argument checks
    (:func:`stock_argument_text`) under plain ``lm_eval --model evidential``."""
    errors.install_one_line_errors(explain=_explain)
