"""Outputs never replace what is not a regular file (lm_eval_evidential/files.py)."""

from __future__ import annotations

import errno
import os
import stat

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
