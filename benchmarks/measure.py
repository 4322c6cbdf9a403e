"""What every benchmark measures with, and how it writes what it measured: one timer, one peak-memory probe,
one description of the machine, one JSON record per run.

    from measure import PeakMemory, Timer, write_result   # benchmarks/ is the script's folder, so on sys.path

- :class:`Timer`: wall and CPU seconds spent in named parts, summed over calls (``part`` as a context,
  ``wrap`` around a callable, ``call`` for one step); ``sync`` makes GPU work count where it is launched.
- :class:`PeakMemory`: the peak memory added between ``reset`` and ``read`` (CUDA's allocator peak on a
  GPU; the kernel's VmHWM on Linux, reset through ``/proc/self/clear_refs``; else a sampling thread).
- :func:`peak_rss_mb`: the process's peak resident set so far (``ru_maxrss``, which only grows).
- :func:`machine`: CPUs, memory, GPU, versions and the load average, read when the run ends.
- :func:`write_result`: ``benchmarks/results/<benchmark>.json`` (or ``--json PATH``), the record that
  ``benchmarks/results_table.py`` turns into the table of ``benchmarks/README.md``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def _no_sync() -> None:
    return None


class Timer:
    """Wall and CPU seconds spent in named parts, summed over every call of a part, in first-seen order.

    ``cpu_clock`` is ``time.process_time`` (this process, every thread) unless a benchmark needs one
    thread's own (``time.thread_time``: the forward pass on the calling thread, our work apart from it).
    CPU seconds are the figure other load on the machine moves least.
    """

    def __init__(self, sync: Callable[[], None] | None = None, cpu_clock=time.process_time, enabled: bool = True):
        self.sync, self.cpu_clock, self.enabled = sync or _no_sync, cpu_clock, enabled
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}

    @contextlib.contextmanager
    def part(self, name: str) -> Iterator[None]:
        if not self.enabled:
            yield
            return
        self.sync()
        start, cpu = time.perf_counter(), self.cpu_clock()
        try:
            yield
        finally:
            self.sync()
            self.add(name, time.perf_counter() - start, self.cpu_clock() - cpu)

    def add(self, name: str, seconds: float, cpu_seconds: float = 0.0) -> None:
        if self.enabled:
            self.wall[name] = self.wall.get(name, 0.0) + seconds
            self.cpu[name] = self.cpu.get(name, 0.0) + cpu_seconds

    def wrap(self, name: str, fn: Callable) -> Callable:
        """``fn`` timed as part ``name`` on every call."""

        def timed(*args, **kwargs):
            with self.part(name):
                return fn(*args, **kwargs)

        return timed

    def call(self, name: str, fn: Callable, *args, **kwargs):
        """One step: ``fn(*args, **kwargs)`` timed as part ``name``; its result."""
        with self.part(name):
            return fn(*args, **kwargs)


def peak_rss_mb() -> float:
    """This process's peak resident set size so far (``ru_maxrss``, KiB on Linux), in MB."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class PeakMemory:
    """Peak memory (bytes) added between :meth:`reset` and :meth:`read`.

    On a CUDA device: the allocator's peak above what was allocated at ``reset``. On the CPU: the kernel's
    high-water mark (VmHWM, reset to the current RSS through ``/proc/self/clear_refs``, Linux >= 4.0);
    where that cannot be reset, a thread samples the RSS every millisecond (``method`` says which).
    """

    def __init__(self, device: Any = None):
        self.device = device
        self.method = "cuda" if self._cuda() else "VmHWM"
        self._base = 0
        self._peak = 0
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None

    def _cuda(self) -> bool:
        return getattr(self.device, "type", self.device) == "cuda"

    def reset(self) -> None:
        if self.method == "cuda":
            import torch

            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self._base = torch.cuda.memory_allocated()
            return
        self._stop_sampling()
        self._base = self._peak = _rss()
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")  # VmHWM := current RSS
            _vm_hwm()
            self.method = "VmHWM"
        except (OSError, StopIteration):
            self.method = "sampled"
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self._peak = max(self._peak, _rss())
            time.sleep(0.001)

    def _stop_sampling(self) -> None:
        if self._stop is not None:
            self._stop.set()
            self._thread.join()
            self._stop = self._thread = None

    def read(self) -> int:
        if self.method == "cuda":
            import torch

            torch.cuda.synchronize()
            return max(0, torch.cuda.max_memory_allocated() - self._base)
        if self.method == "sampled":
            self._stop_sampling()
            peak = max(self._peak, _rss())
        else:
            try:
                peak = _vm_hwm()
            except (OSError, StopIteration):
                peak = _rss()
        return max(0, peak - self._base)


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def _vm_hwm() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmHWM:"))


def _commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() or None


def machine() -> dict[str, Any]:
    """The machine as a figure needs it: CPUs, memory, accelerator, versions, and the load average now."""
    import psutil

    found: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": platform.platform(terse=True),
        "python": platform.python_version(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        found["torch"] = torch.__version__
        if torch.cuda.is_available():
            found["gpu"] = torch.cuda.get_device_name(0)
    return found


def write_result(
    benchmark: str,
    *,
    command: str,
    shape: str,
    figures: list[dict[str, Any]],
    path: Path | None = None,
    notes: str = "",
) -> Path:
    """Write one run's record (atomically) and return its path.

    ``figures``: one dict per figure, ``{"what": …, "value": number, "unit": …}`` and optionally
    ``"limit"`` (what the figure is held against). The record adds the date, the commit, the machine and
    the load average read now, at the end of the run.
    """
    for figure in figures:
        missing = {"what", "value", "unit"} - set(figure)
        if missing:
            raise ValueError(f"{benchmark}: figure {figure} lacks {sorted(missing)}")
    now = _dt.datetime.now(_dt.timezone.utc)
    record = {
        "benchmark": benchmark,
        "command": command,
        "shape": shape,
        "measured": now.strftime("%Y-%m-%d %H:%M UTC"),
        "commit": _commit(),
        "machine": machine(),
        "source": "written by the benchmark",
        "notes": notes,
        "figures": figures,
    }
    path = Path(path) if path is not None else RESULTS / f"{benchmark}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def command_line(argv: list[str] | None = None) -> str:
    """The command as typed: ``python benchmarks/<script> <args>``."""
    argv = sys.argv if argv is None else argv
    script = Path(argv[0])
    shown = f"benchmarks/{script.name}" if script.parent.resolve() == HERE else str(script)
    return " ".join(["python", shown, *argv[1:]])
