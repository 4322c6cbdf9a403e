"""Files, the package's bottom layer beside :mod:`lm_eval_evidential.errors`: the one atomic writer,
JSON output, bounded reads of regular files, and the checks of output paths.

Every file this package writes goes through :func:`atomic_write_bytes` (temp file in the same
folder, fsync, rename): a reader never sees a partial file, an interrupted write leaves the
old file intact. A folder of files written together (a report) goes through
:func:`atomic_folder`: built beside its destination and swapped in whole. Outputs never
replace data: :func:`check_output_file` refuses a folder, a records or other Parquet file and a
harness results file, and :func:`atomic_write_bytes` itself refuses to replace a folder or a
Parquet file with anything but records. An output that is a symbolic link is written through to
its target, as ``cp`` and shell redirection do (:func:`output_target`): the target is replaced
atomically and the link stays. Reading, writing and naming records files is
:mod:`lm_eval_evidential.records.parquet`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import shutil
import signal
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from lm_eval_evidential.errors import InputFileError, OutputPathError, OutputWriteError

#: The records file-name pattern (:func:`lm_eval_evidential.records.parquet.records_path`): an input, never an output.
RECORDS_FILE_RE = re.compile(r"^records_(?P<task>.+)_(?P<date_id>\d{4}-\d{2}-\d{2}T[\d\-.]+)\.parquet$")
#: The harness's own results file (``results_<date_id>.json``), never an output of ours.
RESULTS_FILE_RE = re.compile(r"^results_.+\.json$")
_PARQUET_MAGIC = b"PAR1"


def _is_parquet(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == _PARQUET_MAGIC
    except OSError:
        return False


def output_target(path, option: str = "output") -> Path:
    """Where an output at ``path`` lands: ``path`` itself, or, where it is a symbolic link, the file or folder
    the link leads to, so that the target is replaced (atomically, beside it) and the link stays — what ``cp``
    and shell redirection (``>``) do. A dangling link creates its target if the target's folder exists.

    Refused (:class:`OutputPathError`): a link that leads back to itself, and a dangling link into a
    folder that does not exist (redirection fails there too).

    Examples
    --------
    >>> import os, tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> (d / "real.json").write_text("{}")
    2
    >>> os.symlink("real.json", d / "link.json")
    >>> output_target(d / "link.json") == (d / "real.json").resolve()
    True
    """
    path = Path(path)
    if not path.is_symlink():
        return path
    try:
        return Path(os.path.realpath(path, strict=True))
    except FileNotFoundError:
        target = Path(os.path.realpath(path))
        if target.parent.is_dir():
            return target
        raise OutputPathError(
            f"{option} {path}: it is a symbolic link to {os.readlink(path)}, whose folder {target.parent} does not "
            "exist; create that folder, point the link elsewhere, or name another file"
        ) from None
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise OutputPathError(
            f"{option} {path}: it is a symbolic link that leads back to itself (a loop); remove the link or point "
            "it at a real file"
        ) from None


def _check_no_file_above(path: Path, option: str) -> None:
    """A path under an existing file cannot be created (``notes.txt/out.json``): said before any work."""
    blocking = next((parent for parent in path.parents if parent.exists() and not parent.is_dir()), None)
    if blocking is not None:
        raise OutputPathError(f"{option} {path}: {blocking} is a file, not a folder; name a path inside a folder")


def check_output_file(path, *, option: str = "output") -> Path:
    """``path`` if a command may write a file there, else :class:`OutputPathError` naming the fix.

    Refused: an existing folder; a path under a file; a records file (by name or, for any
    existing file, by content, through links too: every Parquet file); a harness
    ``results_*.json`` file. These are every input of the audit commands (records, and the
    results file that names them), so an input is never an output.
    """
    p = Path(path)
    if p.is_dir():
        raise OutputPathError(f"{option} {p}: it is a folder; name a file")
    _check_no_file_above(p, option)
    target = output_target(p, option)
    _check_regular_target(p, option)
    if RECORDS_FILE_RE.match(p.name) or RECORDS_FILE_RE.match(target.name) or (p.is_file() and _is_parquet(p)):
        raise OutputPathError(
            f"{option} {p}: it is a records (Parquet) file; outputs never replace records — name another file"
        )
    if RESULTS_FILE_RE.match(p.name) and p.exists():
        raise OutputPathError(
            f"{option} {p}: it is a harness results file; outputs never replace it — name another file"
        )
    return p


def _check_regular_target(path: Path, option: str = "output") -> None:
    """Refuse an existing output that is not a regular file (``/dev/null``, a FIFO, a socket): an output is
    written beside it and renamed over it, which would replace the device or pipe itself with a file."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return  # absent (or a dangling link): a new file is written there
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        raise OutputPathError(
            f"{option} {path}: it is {_kind(mode)}, not a regular file; outputs are written whole beside it and "
            f"renamed into place, which would replace it — name a file (or leave {option} out to write none)"
        )


_WRITE_FIXES = {
    errno.EACCES: "choose an output folder you can write to, or change its permissions",
    errno.EPERM: "choose an output folder you can write to, or change its permissions",
    errno.EROFS: "the file system is read-only: choose an output folder on a writable one",
    errno.EFBIG: "the file exceeds this process's file-size limit (`ulimit -f`): raise the limit or write elsewhere",
    errno.ENOSPC: "the disk is full: free some space or choose an output folder on another disk",
    errno.EDQUOT: "the disk quota is used up: free some space or choose an output folder on another disk",
    # the folder exists but takes no new file (a virtual file system such as /proc), or vanished while writing
    errno.ENOENT: "the folder takes no new files (a virtual file system such as /proc?) or vanished: choose another",
}


def check_writable_folder(path) -> Path:
    """Refuse, before any work, an output path whose folder cannot be written (probed with a temporary file).

    ``path`` may not exist yet: the nearest existing folder above it is probed, where it would be created.
    Raises :class:`OutputWriteError` (via :func:`write_error`) naming the folder and the fix.
    """
    folder = Path(path).expanduser().absolute()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise OutputPathError(f"cannot write under {folder}: it is a file, not a folder; choose another output path")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise write_error(exc, folder) from exc
    return folder


def write_error(exc: OSError, path) -> OSError:
    """``exc``, raised while writing ``path``, as an :class:`OutputWriteError` naming the path and the
    fix when it is a condition the user can fix (permissions, file-size limit, full disk), else ``exc``.
    Libraries that drop the errno (pyarrow: ``… [errno 27] File too large``) are read by their message."""
    code = exc.errno
    if code is None:
        found = re.search(r"\[errno (\d+)\]", str(exc), re.IGNORECASE)
        code = int(found[1]) if found else None
    if isinstance(exc, (OutputWriteError, InputFileError)) or code not in _WRITE_FIXES:
        return exc
    return OutputWriteError(
        code, f"cannot write {path}: {os.strerror(code)}; nothing was replaced — {_WRITE_FIXES[code]}", str(path)
    )


def _umask() -> int:
    """The process's umask, read without setting it where Linux shows it (``os.umask`` can only read it by
    setting it: for that instant another thread would create its files with no bits masked)."""
    with contextlib.suppress(OSError, ValueError, StopIteration):
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            return int(next(line for line in fh if line.startswith("Umask:")).split()[1], 8)
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def usual_mode(bits: int) -> int:
    """``bits`` (0o666 for a file, 0o777 for a folder or a program) less the umask: the mode ``open()`` or
    ``mkdir`` gives what it creates, which every file this package writes gets (a temporary one is made
    0600 or 0700, and safetensors writes 0600), so results can be shared as the user's other files are."""
    return bits & ~_umask()


def atomic_write_bytes(path: Path, write, *, replaces_records: bool = False) -> None:
    """Call ``write(tmp_path)`` then rename onto ``path``: readers never see a partial file.

    Refuses (:class:`OutputPathError`) to replace a folder, and a Parquet file unless
    ``replaces_records`` (only :func:`~lm_eval_evidential.records.parquet.write_records` says so). A
    symbolic link is written through to its target (:func:`output_target`). A write that fails for
    a reason the user can fix (:func:`write_error`) raises :class:`OutputWriteError`; the temp file
    is removed.
    """
    path = output_target(path)
    if path.is_dir() or (not replaces_records and path.is_file() and _is_parquet(path)):
        check_output_file(path)
    _check_regular_target(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        write(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, usual_mode(0o666))  # mkstemp makes 0600; results are meant to be shared
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise write_error(exc, path) from exc
        raise


_READ_FIXES = {
    errno.ELOOP: "it is a symbolic link that leads back to itself (a loop); point the link at the real file",
    errno.EACCES: "you have no permission to read it; make it readable (chmod u+r) or run as a user who can read it",
    errno.EPERM: "you have no permission to read it; make it readable (chmod u+r) or run as a user who can read it",
    errno.ENOTDIR: "a part of the path above it is a file, not a folder; correct the path",
    errno.ENAMETOOLONG: "the path is longer than the file system allows; use a shorter path",
}


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def read_error(exc: OSError, path, what: str = "file") -> OSError:
    """``exc``, raised while opening ``path`` to read it, as an :class:`InputFileError` naming the real
    cause (its errno) and the fix; a dangling symbolic link names its missing target."""
    path = Path(path)
    code = exc.errno
    if isinstance(exc, InputFileError):
        return exc
    if code == errno.ENOENT and path.is_symlink():
        cause = (
            f"it is a symbolic link to {os.readlink(path)}, which does not exist; restore the target or remove the link"
        )
    elif code == errno.ENOENT:
        cause = "it does not exist; check the path"
    elif code in _READ_FIXES:
        cause = _READ_FIXES[code]
    else:
        return exc
    return InputFileError(code, f"cannot read {what} {path}: {os.strerror(code)}: {cause}", str(path))


def open_regular_file(path, *, what: str = "file", max_bytes: int | None = None):
    """``path`` opened for binary reading, only if it is a regular file of at most ``max_bytes``.

    The file is opened without blocking (``O_NONBLOCK``: a FIFO has no writer to wait for) and
    checked on the open descriptor (no race with a rename), so a FIFO, device, socket or folder
    never blocks a reader or feeds it without end: :class:`InputFileError` names what it is. An
    open that fails (a symlink loop, a dangling link, no permission) names its errno and fix.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise read_error(exc, path, what) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputFileError(
                errno.EINVAL,
                f"cannot read {what} {path}: it is {_kind(info.st_mode)}, not a regular file; only regular files "
                "are read — replace it by the file itself",
                str(path),
            )
        if max_bytes is not None and info.st_size > max_bytes:
            raise InputFileError(
                errno.EFBIG,
                f"cannot read {what} {path}: it is {info.st_size:,} bytes, more than the {max_bytes:,} bytes such a "
                "file can be; it is not one — move it elsewhere",
                str(path),
            )
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular_file(path, *, what: str = "file", max_bytes: int) -> bytes:
    """The bytes of ``path`` through :func:`open_regular_file` (a regular file of at most ``max_bytes``);
    at most ``max_bytes`` are read even if the file grows meanwhile."""
    with open_regular_file(path, what=what, max_bytes=max_bytes) as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputFileError(
            errno.EFBIG, f"cannot read {what} {path}: it grew beyond {max_bytes:,} bytes while read", str(path)
        )
    return data


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically. Returns the path."""
    path = Path(path)
    atomic_write_bytes(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    return path


def _jsonable(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, Mapping):  # dicts and the audits' typed rows
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return _jsonable(value.item())
    return value


def write_json(path: str | os.PathLike, rows) -> Path:
    """Write ``rows`` as JSON atomically. NaN becomes null (JSON has no NaN); reasons stay."""
    return atomic_write_text(path, json.dumps(_jsonable(rows), indent=2, sort_keys=False) + "\n")


def check_output_folder(path, *, replaceable: Callable[[Path], bool], option: str = "output folder") -> Path:
    """``path`` (or, where it is a symbolic link, its target: :func:`output_target`) if a folder output may
    be written there (new, empty, or ``replaceable``).

    Otherwise :class:`OutputPathError`.
    """
    path = output_target(path, option)
    if path.exists() and not path.is_dir():
        raise OutputPathError(f"{option} {path} is a file, not a folder; name a new folder")
    _check_no_file_above(path, option)
    if path.is_dir() and any(path.iterdir()) and not replaceable(path):
        raise OutputPathError(
            f"{option} {path} is a folder with other files in it; name a new or empty folder "
            "(only a previous output of the same kind is replaced)"
        )
    return path


def _leftovers(path: Path) -> list[Path]:
    """Temporary siblings that :func:`atomic_folder` left for ``path`` when it was killed."""
    return [p for p in path.parent.glob(f".{path.name}.*") if p.is_dir() and p.name.endswith((".tmp", ".old"))]


def _clear_leftovers(path: Path) -> None:
    """Remove what a killed :func:`atomic_folder` left beside ``path``; a previous output it had moved aside
    (``.old``) and not yet replaced (``path`` absent: killed between its two renames) is put back first."""
    stale = _leftovers(path)
    moved_aside = sorted((p for p in stale if p.name.endswith(".old")), key=lambda p: p.stat().st_mtime)
    if moved_aside and not os.path.lexists(path):
        os.replace(moved_aside[-1], path)
        stale.remove(moved_aside[-1])
    for folder in stale:
        shutil.rmtree(folder, ignore_errors=True)


#: The signals whose Python handlers :func:`_signals_held` holds back (Ctrl-C, and what schedulers send).
_HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Hold SIGINT's and SIGTERM's Python handlers back while the block runs; then run them for what arrived.

    Python runs a signal's handler in the main thread only, between two bytecodes: swapping in a handler
    that only notes the signal keeps a KeyboardInterrupt (or a handler's SystemExit) out of the block, on
    whichever thread the operating system delivered it. Off the main thread no handler can interrupt the
    block, and handlers cannot be set there: it runs as it is. A signal whose handler was not set from Python
    (``getsignal`` None) is left alone. SIGKILL cannot be held; :func:`_clear_leftovers` repairs after it.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    previous = {}
    for signum in _HELD_SIGNALS:
        if signal.getsignal(signum) is not None:
            previous[signum] = signal.signal(signum, lambda number, frame: arrived.append(number))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(arrived):
            signal.raise_signal(signum)  # now, to the handler it would have reached


def _give_usual_modes(folder: Path) -> None:
    """Give ``folder``, each folder and each regular file in it the mode :func:`usual_mode` says (a file
    that can be run keeps its execute bits); links are left alone."""
    for item in (folder, *folder.rglob("*")):
        mode = item.lstat().st_mode
        if stat.S_ISDIR(mode):
            os.chmod(item, usual_mode(0o777))
        elif stat.S_ISREG(mode):
            os.chmod(item, usual_mode(0o666 | (mode & 0o111)))


@contextlib.contextmanager
def atomic_folder(path, *, replaceable: Callable[[Path], bool]) -> Iterator[Path]:
    """Yield a new empty folder beside ``path``; when the block succeeds, swap it in for ``path``.

    Readers see the old folder or the new one, never a mix of two runs: the new folder is
    complete before it is renamed into place, and the old one is then deleted. Between the two
    renames ``path`` is briefly absent (never half-written); SIGINT and SIGTERM are held back
    across them (:func:`_signals_held`). If the block raises (or the process is interrupted), the
    new folder is removed and ``path`` is untouched; folders left by a killed process
    (``.<name>.*.tmp`` / ``.old``) are removed by the next call, which first puts back a previous
    output that a SIGKILL between the renames left aside (:func:`_clear_leftovers`). An existing
    ``path`` is only replaced when ``replaceable(path)`` says it is a previous output (or it is
    empty); anything else is refused with :class:`OutputPathError` before any work.
    """
    path = check_output_folder(path, replaceable=replaceable)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _clear_leftovers(path)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    except OSError as exc:
        raise write_error(exc, path) from exc
    try:
        yield tmp
        _give_usual_modes(tmp)  # mkdtemp makes 0700, safetensors' files are 0600: outputs are meant to be shared
        if path.is_dir():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent))
            with _signals_held():  # a Ctrl-C between the two renames would leave no output at path
                os.replace(path, old)  # an empty folder is replaced by a rename
                try:
                    os.replace(tmp, path)
                except BaseException:
                    os.replace(old, path)  # the previous output back where it was
                    raise
                shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):
            raise write_error(exc, path) from exc
        raise
