"""Outputs never replace what is not a regular file (lm_eval_evidential/files.py)."""

from __future__ import annotations

import errno
import os
import signal
import stat
from pathlib import Path

import pytest

from lm_eval_evidential.errors import OutputPathError, OutputWriteError
from lm_eval_evidential.files import atomic_write_text, check_output_file, write_error


def test_dev_null_is_refused_as_an_output_before_anything_is_written():
    # check only: never write there (as root, a rename over /dev/null replaced the device with a file)
    with pytest.raises(OutputPathError, match=r"--json /dev/null: it is a character device, not a regular file"):
        check_output_file("/dev/null", option="--json")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_fifo_stays_a_fifo(tmp_path):
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    with pytest.raises(OutputPathError, match=r"it is a FIFO \(named pipe\), not a regular file"):
        atomic_write_text(pipe, "{}")
    assert stat.S_ISFIFO(os.stat(pipe).st_mode) and sorted(tmp_path.iterdir()) == [pipe]
    link = tmp_path / "link"  # a link to it is followed
    link.symlink_to(pipe)
    with pytest.raises(OutputPathError, match="FIFO"):
        check_output_file(link)


def test_a_regular_file_and_a_new_path_are_written(tmp_path):
    (tmp_path / "a.json").write_text("old")
    assert atomic_write_text(tmp_path / "a.json", "new").read_text() == "new"
    assert atomic_write_text(tmp_path / "sub" / "b.json", "x").read_text() == "x"


def test_a_folder_that_takes_no_new_file_is_one_line():
    exc = write_error(FileNotFoundError(errno.ENOENT, "No such file or directory"), "/proc/x.json")
    assert isinstance(exc, OutputWriteError)
    assert "cannot write /proc/x.json: No such file or directory; nothing was replaced" in str(exc)


def test_a_link_is_written_through_to_its_target_as_cp_does(tmp_path):
    """An output that is a symbolic link replaces the link's target (atomically) and keeps the link, as `cp` and
    shell redirection do; before, the link itself was replaced by a file and its target kept the old text."""
    real = tmp_path / "real"
    real.mkdir()
    (real / "t.json").write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to("real/t.json")
    atomic_write_text(link, "new")
    assert link.is_symlink() and os.readlink(link) == "real/t.json"
    assert (real / "t.json").read_text() == "new"
    assert sorted(p.name for p in real.iterdir()) == ["t.json"]  # no temporary file left beside the target
    chain = tmp_path / "chain.json"  # a link to a link: the last target
    chain.symlink_to(link)
    atomic_write_text(chain, "newer")
    assert chain.is_symlink() and link.is_symlink() and (real / "t.json").read_text() == "newer"
    dangling = tmp_path / "dangling.json"  # a dangling link creates its target, as `>` does
    dangling.symlink_to("real/new.json")
    atomic_write_text(dangling, "created")
    assert dangling.is_symlink() and (real / "new.json").read_text() == "created"


def test_a_link_loop_and_a_link_into_a_missing_folder_are_refused(tmp_path):
    loop = tmp_path / "loop.json"
    loop.symlink_to("loop.json")
    with pytest.raises(OutputPathError, match=r"--json .*loop\.json: it is a symbolic link that leads back to itself"):
        check_output_file(loop, option="--json")
    nowhere = tmp_path / "nowhere.json"
    nowhere.symlink_to("missing/x.json")
    with pytest.raises(OutputPathError, match=r"it is a symbolic link to missing/x\.json, whose folder .*missing does"):
        atomic_write_text(nowhere, "{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loop.json", "nowhere.json"]
    assert loop.is_symlink() and nowhere.is_symlink()


def test_a_link_to_a_records_file_is_refused_by_its_target_name(tmp_path):
    link = tmp_path / "out.json"
    link.symlink_to("records_obqa_edl_2026-03-01T10-00-00.000001.parquet")  # dangling: no content to read yet
    with pytest.raises(OutputPathError, match="it is a records"):
        check_output_file(link, option="--json")


def test_a_folder_output_through_a_link_is_swapped_at_its_target(tmp_path):
    from lm_eval_evidential.files import atomic_folder

    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "old.md").write_text("old")
    link = tmp_path / "out"
    link.symlink_to("real")
    with atomic_folder(link, replaceable=lambda p: (p / "old.md").is_file()) as staging:
        (staging / "new.md").write_text("new")
    assert link.is_symlink() and sorted(p.name for p in (tmp_path / "real").iterdir()) == ["new.md"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "real"]


def _previous_output(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.md").write_text("old")
    return out


def _signal_between_the_renames(monkeypatch, out, signum):
    """``os.replace`` that sends ``signum`` to this process right after it moves ``out`` aside (the first rename)."""
    real, aside = os.replace, out.resolve()

    def replace(src, dst):
        real(src, dst)
        if Path(src).resolve() == aside:
            os.kill(os.getpid(), signum)

    monkeypatch.setattr(os, "replace", replace)


def _sigterm_exits(number, frame):
    raise SystemExit(128 + number)


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="POSIX signals")
@pytest.mark.parametrize(
    ("signum", "handler", "raised"),
    [(signal.SIGINT, signal.default_int_handler, KeyboardInterrupt), (signal.SIGTERM, _sigterm_exits, SystemExit)],
)
def test_a_signal_between_the_two_renames_is_held_until_the_new_folder_is_in_place(
    tmp_path, monkeypatch, signum, handler, raised
):
    from lm_eval_evidential.files import atomic_folder

    out = _previous_output(tmp_path)
    previous = signal.signal(signum, handler)
    try:
        _signal_between_the_renames(monkeypatch, out, signum)
        with pytest.raises(raised), atomic_folder(out, replaceable=lambda p: (p / "old.md").is_file()) as staging:
            (staging / "new.md").write_text("new")
    finally:
        signal.signal(signum, previous)
    # the signal still stops the command, once the output is whole: the new folder, nothing left beside it
    assert sorted(p.name for p in out.iterdir()) == ["new.md"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_previous_output_left_aside_by_a_kill_between_the_renames_is_put_back(tmp_path):
    from lm_eval_evidential.files import atomic_folder

    out = _previous_output(tmp_path)
    os.replace(out, tmp_path / ".out.k2j3h4.old")  # SIGKILL after the first rename: out is absent
    (tmp_path / ".out.x9y8z7.tmp").mkdir()  # and the new folder half written
    with pytest.raises(RuntimeError), atomic_folder(out, replaceable=lambda p: (p / "old.md").is_file()):
        raise RuntimeError("the next run fails too")
    assert (out / "old.md").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_a_folder_swapped_in_has_the_usual_modes_under_the_umask(tmp_path, umask):
    """What ``laplace`` writes (safetensors makes its files 0600, mkdtemp 0700) is readable as the user's other
    files are: 0666 / 0777 less the umask, as ``open()`` and ``mkdir`` give."""
    import tempfile

    import torch

    from lm_eval_evidential.files import atomic_folder, usual_mode
    from lm_eval_evidential.modeling.laplace import LAPLACE_CONFIG, LAPLACE_POSTERIOR, save_posterior

    previous = os.umask(umask)
    try:
        assert usual_mode(0o666) == 0o666 & ~umask  # read without setting it
        with atomic_folder(tmp_path / "posterior", replaceable=lambda p: False) as staging:
            save_posterior(staging, {"structure": "diag"}, {"scale": torch.ones(3)})
            inner = Path(tempfile.mkdtemp(dir=staging))
            (inner / "tool.sh").write_text("#!/bin/sh\n")
            os.chmod(inner / "tool.sh", 0o700)
    finally:
        os.umask(previous)
    out = tmp_path / "posterior"
    modes = {p.relative_to(out).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in (out, *out.rglob("*"))}
    assert modes == {
        ".": 0o777 & ~umask,
        LAPLACE_POSTERIOR: 0o666 & ~umask,
        LAPLACE_CONFIG: 0o666 & ~umask,
        inner.name: 0o777 & ~umask,
        f"{inner.name}/tool.sh": 0o766 & ~umask,  # a program keeps its execute bit (the owner's, here)
    }
