"""The one run-policy object: what ``--model evidential`` runs in this process do, and what the hooks did.

lm_eval is patched once per process, so what the hooks keep between calls is the process's: one
:class:`RunPolicy`, :data:`RUN_POLICY`, in place of module globals. ``lm-eval-evidential eval``
changes its ``no_output_path`` for the one run it starts (:meth:`RunPolicy.no_output_path_as`).
"""

from __future__ import annotations

import contextlib
import sys
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class RunPolicy:
    """What this process's evidential runs do, and what the hooks have done so far."""

    #: What a ``--model evidential`` run without ``--output_path`` does: "warn" (plain ``lm_eval``: a warning
    #: before the weights load and again at the end), "refuse" (``lm-eval-evidential eval``: an
    #: :class:`~lm_eval_evidential.errors.OutputPathError` before the weights load) or "allow" (``eval`` with
    #: ``--no_output_path``: the user asked for a run that keeps nothing).
    no_output_path: str = "warn"
    #: The lm_eval modules the hooks have patched (:func:`~lm_eval_evidential.integration.hooks.check_harness`).
    hooked: set[str] = field(default_factory=set)
    #: The newest TaskManager that indexed this package's tasks (the nearest task names are its names).
    task_manager: weakref.ref | None = None
    #: Lines printed on stderr when the process ends (after the harness's results table, where they are read).
    said_at_exit: list[str] = field(default_factory=list)

    @contextlib.contextmanager
    def no_output_path_as(self, policy: str) -> Iterator[RunPolicy]:
        """Runs without ``--output_path`` do ``policy`` inside the block; the previous policy after it."""
        previous, self.no_output_path = self.no_output_path, policy
        try:
            yield self
        finally:
            self.no_output_path = previous

    def newest_task_manager(self):
        """The newest TaskManager that indexed this package's tasks, if it still exists."""
        return None if self.task_manager is None else self.task_manager()

    def say_at_exit(self, message: str) -> None:
        """Print ``message`` on stderr when the process ends: after the harness's results table, where it is read."""
        import atexit

        if not self.said_at_exit:
            atexit.register(lambda: [print(line, file=sys.stderr) for line in self.said_at_exit])
        self.said_at_exit.append(message)


#: The process's run policy (the one the hooks read).
RUN_POLICY = RunPolicy()
