"""Hardening: interrupted writes, leftover temp files, empty and one-class sides, determinism.

- Interrupted runs: child processes write a 20,000-row records file (through ``write_records``,
  with a deliberately slow disk so that kills land inside the file) or a whole report folder
  (``build_report``) again and again, and are killed with SIGINT or SIGKILL at random
  moments. Whatever exists afterwards must read back completely, byte-identical to an
  uninterrupted run; leftover dot-prefixed temp files (only possible after SIGKILL) must be
  ignored by the loader. A KeyboardInterrupt inside the harness's records hook leaves no
  records file of the interrupted task.
- Empty or one-class sides, through ``lm_eval_evidential.cli.main``: every audit command
  returns an exit status with a clear message, or rows whose NaN values carry a reason;
  never a traceback.
- Determinism: the same records give byte-identical report files, figures included.
"""

from __future__ import annotations

import functools
import json
import math
import os
import random
import signal
import subprocess
import sys
import threading
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from lm_eval_evidential.cli import main
from lm_eval_evidential.metrics._validation import UndefinedMetricWarning
from lm_eval_evidential.records import (
    Records,
    RecordsError,
    find_record_files,
    load_records,
    make_record,
    read_records_file,
    records_path,
    write_records,
)

DATE = "2026-01-01T00-00-00.000001"
LETTERS = "ABCDEF"


def _records(task, n, *, k=4, seed=0, shift=0.0, correct=None, flat=False, softmax=False) -> Records:
    """``n`` synthetic records; ``correct`` True/False forces every answer right/wrong, ``flat``
    gives every example the same logits (every score tied)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        z = np.zeros(k) if flat else rng.normal(shift, 1.5, size=k)
        alpha = None if softmax else np.logaddexp(0.0, z) + 1.0
        pred = int(np.argmax(z))
        gold = pred if correct is True else (pred + 1) % k if correct is False else int(rng.integers(k))
        rows.append(make_record(task=task, doc_id=i, labels=list(LETTERS[:k]), gold=gold, logits=z, alpha=alpha))
    meta = {"method": "softmax" if softmax else "edl", "prior_weight": 1.0, "pretrained": "synthetic"}
    return Records.from_rows(rows, task=task, meta=meta)


def _temp_leftovers(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.name.startswith("."))


# ----------------------------------------------------------------------------- interrupted runs

CHILD = r'''
"""Write records or a report folder again and again until killed (test_hardening.py)."""
import signal
import sys

# A test run started in the background (`pytest … &` in a non-interactive shell) hands its children
# SIGINT *ignored*, and Python then installs no KeyboardInterrupt handler: the SIGINT this test sends
# would do nothing. Ctrl-C semantics are what is tested, so they are set here explicitly.
signal.signal(signal.SIGINT, signal.default_int_handler)
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from lm_eval_evidential.records import Records, make_record, records_path, write_records

mode, out = sys.argv[1], Path(sys.argv[2])


def say(msg):
    print(msg, flush=True)


def records(task, n, k, shift, seed):
    rng = np.random.default_rng(seed)
    z = rng.normal(shift, 1.5, size=(n, k))
    gold = rng.integers(0, k, size=n)
    rows = [make_record(task=task, doc_id=i, labels="ABCD"[:k], gold=int(gold[i]), logits=z[i],
                        alpha=np.logaddexp(0.0, z[i]) + 1.0) for i in range(n)]
    return Records.from_rows(rows, task=task, meta={"method": "edl", "prior_weight": 1.0})


if mode == "records":
    def slow_write_table(table, where, **kwargs):
        # A slow disk: flushed row groups with pauses, so that a kill lands inside the file.
        say("W")
        with pq.ParquetWriter(where, table.schema) as writer:
            for start in range(0, table.num_rows, 1000):
                writer.write_table(table.slice(start, 1000))
                time.sleep(0.01)

    pq.write_table = slow_write_table
    rec = records("big", 20_000, 4, 0.0, 0)
    target = records_path(out, "big", "2026-01-01T00-00-00.000001")
    for i in range(1_000_000):
        t0 = time.perf_counter()
        say(f"T {i}")
        write_records(target, replace(rec, meta={**rec.meta, "iteration": i}))
        say(f"D {i} {time.perf_counter() - t0:.3f}")
else:
    import io
    import pathlib

    from matplotlib.figure import Figure

    from lm_eval_evidential.report import build_report

    if mode == "report":
        # A slow disk for every report file (figures, report.json, report.md): 4 KiB pieces
        # with pauses, so that a kill lands inside a file.
        def slow_bytes(where, data):
            say("F")
            with open(where, "wb") as fh:
                for start in range(0, len(data), 4096):
                    time.sleep(0.005)
                    fh.write(data[start:start + 4096])
                    fh.flush()

        real_savefig = Figure.savefig

        def slow_savefig(self, fname, **kwargs):
            buf = io.BytesIO()
            real_savefig(self, buf, **kwargs)
            slow_bytes(fname, buf.getvalue())

        Figure.savefig = slow_savefig
        pathlib.Path.write_text = lambda self, text, encoding=None, **kw: slow_bytes(
            self, text.encode(encoding or "utf-8")
        )

    id_rec, ood_rec = records("idt", 150, 4, 1.0, 1), records("oodt", 120, 4, 0.0, 2)
    ood2 = records("oodu", 90, 4, -0.5, 3)
    # Two reports with different file sets, alternately into one folder: a folder that mixes
    # files of two runs cannot equal either uninterrupted reference.
    configs = [[ood_rec], [ood_rec, ood2]]
    if mode == "reference":
        for j, oods in enumerate(configs):
            build_report(id_rec, oods, out / f"report{j}", n_boot=20, max_extra=1)
    for i in range(0 if mode == "reference" else 1_000_000):
        t0 = time.perf_counter()
        say(f"R {i}")
        build_report(id_rec, configs[i % 2], out / "report", n_boot=20, max_extra=1)
        say(f"D {i} {time.perf_counter() - t0:.3f}")
'''

N_BIG = 20_000


def _child(script: Path, mode: str, out: Path) -> subprocess.Popen:
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, str(script), mode, str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _run_and_kill(script: Path, mode: str, out: Path, sig: int, marker: str, skip: int, delay) -> dict:
    """Start a writer, let it finish one complete write, then send ``sig`` ``delay(duration)``
    seconds after the ``skip + 1``-th line starting with ``marker``. Returns what happened."""
    proc = _child(script, mode, out)
    # Generous limits: on a loaded machine (2 cores, many processes) a write may take minutes; the
    # watchdog only guards against a hung child, so it must never fire on a slow one.
    watchdog = threading.Timer(900, proc.kill)
    watchdog.start()
    done, duration, sent = 0, None, False
    try:
        for line in proc.stdout:
            if line.startswith("D "):
                done += 1
                duration = duration or float(line.split()[2])
            elif done and line.startswith(marker) and (skip := skip - 1) < 0:
                threading.Event().wait(delay(duration))
                proc.send_signal(sig)
                sent = True
                break
        _, stderr = proc.communicate(timeout=900)
    finally:
        watchdog.cancel()
    return {"sent": sent, "completed_writes": done, "returncode": proc.returncode, "stderr": stderr, "out": out}


posix_signals = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
    """Seven writers killed at random moments (a fixed seed, so a failure can be replayed)."""
    root = tmp_path_factory.mktemp("interrupted")
    script = root / "writer.py"
    script.write_text(CHILD)
    rng = random.Random(20261121)
    # After "W" (a records write began) or "F" (a report file write began): a kill inside that
    # file; after "T" (an iteration began): a share of the first iteration's duration.
    plans = [
        ("records", signal.SIGINT, "W"),
        ("records", signal.SIGKILL, "W"),
        ("records", signal.SIGKILL, "W"),
        ("records", signal.SIGKILL, "T"),
        ("report", signal.SIGINT, "F"),
        ("report", signal.SIGKILL, "F"),
        ("report", signal.SIGKILL, "F"),
    ]
    # Delays are drawn here, in order, so the schedule does not depend on thread timing.
    jobs = []
    for i, (mode, sig, marker) in enumerate(plans):
        if marker == "T":
            skip, delay = 0, functools.partial(lambda f, d: f * d, rng.random())
        else:  # the records file, or one of the 8 report files chosen at random
            skip = 0 if marker == "W" else rng.randrange(8)
            delay = functools.partial(lambda f, d: f, rng.uniform(0.0, 0.1 if marker == "W" else 0.01))
        jobs.append((mode, sig, marker, skip, delay, root / f"run{i}"))
    with ThreadPoolExecutor(len(jobs) + 1) as pool:
        ref = pool.submit(
            subprocess.run,
            [sys.executable, str(script), "reference", str(root / "reference")],
            capture_output=True,
            text=True,
            env={**os.environ, "MPLBACKEND": "Agg"},
            timeout=900,
        )
        futures = [
            pool.submit(_run_and_kill, script, mode, out, sig, marker, skip, delay)
            for mode, sig, marker, skip, delay, out in jobs
        ]
        results = [(mode, sig, f.result()) for (mode, sig, *_), f in zip(jobs, futures)]
    assert ref.result().returncode == 0, ref.result().stderr
    return [root / "reference" / f"report{j}" for j in (0, 1)], results


@posix_signals
def test_a_writer_started_with_sigint_ignored_still_takes_ctrl_c(tmp_path):
    """`pytest … &` starts every child with SIGINT ignored (POSIX, no job control); the writers must
    still stop on SIGINT with a KeyboardInterrupt, or the interrupted-run tests would wait forever."""
    script = tmp_path / "writer.py"
    script.write_text(CHILD)
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, str(script), "records", str(tmp_path / "out")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        assert proc.stdout.readline().startswith("T ")  # imports done, the first write begins
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=900)
    finally:
        proc.kill()
    assert proc.returncode != 0 and "KeyboardInterrupt" in stderr, stderr[-2000:]


@posix_signals
def test_every_writer_was_killed_after_a_complete_write(interrupted):
    _, results = interrupted
    for mode, sig, r in results:
        assert r["sent"] and r["completed_writes"] >= 1, (mode, sig, r["stderr"][-2000:])
        assert r["returncode"] != 0, (mode, sig)  # it was interrupted, not finished
        if sig == signal.SIGINT:
            assert "KeyboardInterrupt" in r["stderr"], r["stderr"][-2000:]


@posix_signals
def test_killed_records_writer_leaves_a_complete_file_and_the_loader_ignores_temp_files(interrupted):
    _, results = interrupted
    left_temp = []
    for mode, sig, r in results:
        if mode != "records":
            continue
        out = r["out"]
        target = records_path(out, "big", DATE)
        rec = read_records_file(target)  # complete: the last finished write or the one before
        assert len(rec) == N_BIG and rec.meta["iteration"] in range(r["completed_writes"] + 1)
        assert rec.doc_id.tolist() == list(range(N_BIG))
        assert find_record_files(out) == {DATE: {"big": target}}
        assert load_records(out, "big").path == target
        leftovers = _temp_leftovers(out)
        if sig == signal.SIGINT:
            assert leftovers == [], "KeyboardInterrupt must remove the temp file"
        else:
            assert all(p.name.startswith(f".{target.name}.") and p.name.endswith(".tmp") for p in leftovers), leftovers
            left_temp += leftovers
    # The kills did land inside a write: some SIGKILLed writer left its partial temp file.
    assert left_temp, "no SIGKILL landed mid-write; the test would not exercise atomicity"
    with pytest.raises(RecordsError, match="truncated or corrupted"):
        read_records_file(left_temp[0])


def _same_report_files(folder: Path, references: list[Path]) -> None:
    """``folder`` is exactly one of the uninterrupted reports, byte for byte (never a mix of two)."""
    names = sorted(p.name for p in folder.iterdir())
    matches = [ref for ref in references if sorted(p.name for p in ref.iterdir()) == names]
    assert len(matches) == 1, f"the folder's files {names} are not the file set of one complete report"
    for name in names:
        assert (folder / name).read_bytes() == (matches[0] / name).read_bytes(), (
            f"{name} differs from an uninterrupted run"
        )
    json.loads((folder / "report.json").read_text())
    for svg in folder.glob("*.svg"):
        ET.parse(svg)


@posix_signals
def test_killed_report_writer_leaves_one_complete_report(interrupted):
    references, results = interrupted
    assert len({len(list(ref.iterdir())) for ref in references}) == 2  # the two reports differ in their files
    left_temp = []
    for mode, sig, r in results:
        if mode != "report":
            continue
        folder = r["out"] / "report"
        _same_report_files(folder, references)
        # The report is built in a hidden sibling folder and swapped in whole.
        leftovers = _temp_leftovers(r["out"])
        if sig == signal.SIGINT:
            assert leftovers == []
        else:
            assert all(p.relative_to(r["out"]).parts[0].startswith(".report.") for p in leftovers), leftovers
            left_temp += leftovers
    assert left_temp, "no SIGKILL landed inside a report write; the test would not exercise atomicity"


def test_leftover_temp_files_never_shadow_the_complete_file(tmp_path, capsys):
    """Temp names from atomic_write_bytes (and stray dot files) of a newer run are not runs."""
    folder = tmp_path / "model"
    good = write_records(records_path(folder, "t", DATE), _records("t", 12, seed=1))
    newer = "2027-01-01T00-00-00.000001"
    (folder / f".records_t_{newer}.parquet.k2j3h4.tmp").write_bytes(b"PAR1 half a file")
    (folder / f".records_t_{newer}.parquet").write_bytes(b"PAR1 half a file")
    (folder / f"records_t_{newer}.parquet.tmp").write_bytes(b"PAR1 half a file")
    assert find_record_files(tmp_path) == {DATE: {"t": good}}
    assert load_records(tmp_path, "t").path == good
    assert main(["calibration", str(tmp_path), "--task", "t"]) == 0
    assert "Traceback" not in capsys.readouterr().err


def test_keyboard_interrupt_in_the_records_hook_leaves_no_records_file(tmp_path, monkeypatch):
    """Ctrl-C while the harness hook writes the second task's records: the first task's file is
    complete, the second has no file and no temp file (a half-written one never appears)."""
    import types

    import pyarrow.parquet as pq

    from lm_eval_evidential.integration.run_output import results_folder, write_run_records

    run_records = {"first": _records("first", 40, seed=1), "second": _records("second", 40, seed=2)}
    tracker = types.SimpleNamespace(
        output_path=str(tmp_path),
        date_id=DATE,
        general_config_tracker=types.SimpleNamespace(model_name_sanitized="model"),
    )
    real_write = pq.write_table
    calls = []

    def interrupted_write(table, where, **kwargs):
        calls.append(where)
        if len(calls) == 1:
            return real_write(table, where, **kwargs)
        real_write(table.slice(0, table.num_rows // 2), where, **kwargs)  # part of the file is on disk
        raise KeyboardInterrupt

    monkeypatch.setattr(pq, "write_table", interrupted_write)
    with pytest.raises(KeyboardInterrupt):
        write_run_records(results_folder(tracker), run_records)
    folder = results_folder(tracker)
    [first] = folder.iterdir()
    assert first.name.startswith("records_first_") and first.suffix == ".parquet"
    assert len(read_records_file(first)) == 40
    with pytest.raises(FileNotFoundError, match="no records for task 'second'"):
        load_records(tmp_path, "second")


def test_atomically_written_files_get_the_usual_permissions(tmp_path, capsys):
    """The temp file comes from mkstemp (mode 0600); after the rename a records file, a JSON
    table or a figure must be readable like any file the user writes (0666 minus the umask),
    e.g. by colleagues sharing the results folder or a web server serving the report."""
    umask = os.umask(0)
    os.umask(umask)
    expected = oct(0o666 & ~umask)
    written = [write_records(records_path(tmp_path / "model", "t", DATE), _records("t", 20, seed=3))]
    assert (
        main(
            [
                "calibration",
                str(tmp_path),
                "--task",
                "t",
                "--json",
                str(tmp_path / "c.json"),
                "--plot",
                str(tmp_path / "rel"),
            ]
        )
        == 0
    )
    capsys.readouterr()
    written += [tmp_path / "c.json", tmp_path / "rel.png", tmp_path / "rel.svg"]
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in written} == {p.name: expected for p in written}


# ----------------------------------------------------------------------------- empty / one-class sides


@pytest.fixture(scope="module")
def sides(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sides")
    folder = root / "model"
    for rec in (
        Records.from_rows([], task="empty", meta={"method": "edl", "prior_weight": 1.0, "pretrained": "synthetic"}),
        Records.from_rows(
            [], task="sm_empty", meta={"method": "softmax", "prior_weight": 1.0, "pretrained": "synthetic"}
        ),
        _records("id4", 60, seed=1, shift=1.0),
        _records("ood4", 50, seed=2),
        _records("ood5", 40, k=5, seed=3),
        _records("single", 1, seed=4),
        _records("right", 30, seed=5, correct=True),
        _records("wrong", 30, seed=6, correct=False),
        _records("flat", 30, seed=7, flat=True),
        _records("k1", 20, k=1, seed=8),
        # Twins (same data, another task name): a task is never compared with itself, so the
        # degenerate cases below pair each side with its twin.
        Records.from_rows([], task="empty_b", meta={"method": "edl", "prior_weight": 1.0, "pretrained": "synthetic"}),
        _records("single_b", 1, seed=4),
        _records("flat_b", 30, seed=7, flat=True),
        _records("k1_b", 20, k=1, seed=8),
    ):
        write_records(records_path(folder, rec.task, DATE), rec)
    return root


def _cli(argv, capsys):
    """``main(argv)`` must return an int (never raise); returns (status, stdout, stderr)."""
    status = main([str(a) for a in argv])
    assert isinstance(status, int)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return status, out, err


@pytest.mark.parametrize(
    "argv, status, message",
    [
        (["ood", "{o}", "--id", "empty", "--ood", "id4", "--n-boot", "0"], 1, "empty side has no examples"),
        (["ood", "{o}", "--id", "id4", "--ood", "empty", "--n-boot", "0"], 1, "empty side has no examples"),
        (["ood", "{o}", "--id", "id4", "--ood", "empty", "--k-policy", "restrict"], 1, "empty side has no examples"),
        (["ood", "{o}", "--id", "id4", "--ood", "empty", "--k-policy", "report"], 1, "empty side has no examples"),
        (["ood", "{o}", "--id", "empty", "--ood", "empty_b"], 1, "has no examples"),
        (["ood", "{o}", "--id", "id4", "--ood", "ood5", "--k-policy", "restrict"], 2, "restrict left no ood5 examples"),
        (["ood", "{o}", "--id", "id4", "--ood", "flat", "--scores", "neg_norm_entropy", "--n-boot", "0"], 0, "flat"),
        (["ood", "{o}", "--id", "k1", "--ood", "k1_b", "--scores", "neg_norm_entropy"], 1, "needs K >= 2"),
        (["ksweep", "{o}", "--id", "empty", "--ood", "id4"], 1, "empty side has no examples"),
        (["ksweep", "{o}", "--id", "id4", "--ood", "empty"], 1, "empty side has no examples"),
        (["ksweep", "{o}", "--id", "single", "--ood", "single_b"], 0, "K-sensitive"),
        (["ksweep", "{o}", "--id", "flat", "--ood", "flat_b"], 0, "reciprocal_vacuity"),
        (["report", "{o}", "--id", "id4", "--ood", "empty", "--out", "{t}/r1", "--n-boot", "0"], 1, "has no examples"),
        (["report", "{o}", "--id", "empty", "--ood", "id4", "--out", "{t}/r2", "--n-boot", "0"], 1, "has no examples"),
        (["selective", "{o}", "--task", "empty", "--plot", "{t}/rc"], 1, "has no records (0 examples)"),
        (["selective", "{o}", "--task", "k1", "--scores", "neg_norm_entropy"], 1, "neg_norm_entropy needs K >= 2"),
        (["calibration", "{o}", "--task", "nope"], 1, "no records for task 'nope'"),
    ],
)
def test_empty_and_degenerate_sides_give_an_exit_status_and_a_clear_message(
    sides, tmp_path, capsys, argv, status, message
):
    argv = [a.format(o=sides, t=tmp_path) for a in argv]
    got, out, err = _cli(argv, capsys)
    assert got == status, out + err
    assert message in (out + err)
    if argv[0] == "report" and status:
        assert not (Path(argv[argv.index("--out") + 1]) / "report.json").exists()


def _json_rows(argv, capsys, path):
    status, _, err = _cli([*argv, "--json", path], capsys)
    assert status == 0, err
    text = Path(path).read_text()
    assert "NaN" not in text and "Infinity" not in text
    return json.loads(text)


def _nan_rows_have_reasons(rows, numeric):
    """Every row with a null (NaN) in ``numeric`` has a non-empty reason; returns those rows."""
    undefined = [r for r in rows if any(r[c] is None for c in numeric)]
    for r in undefined:
        assert isinstance(r.get("reason"), str) and r["reason"].strip(), r
    for r in rows:
        for c in numeric:
            assert r[c] is None or math.isfinite(r[c])
    return undefined


def test_calibration_of_empty_single_and_one_class_tasks(sides, tmp_path, capsys):
    # sm_empty is a softmax task (another producer), so the mixed table needs the flag
    rows = _json_rows(
        ["calibration", sides, "--task", "empty,single,right,wrong,flat,k1,sm_empty", "--allow-fingerprint-mismatch"],
        capsys,
        tmp_path / "c.json",
    )
    by = {r["task"]: r for r in rows}
    nan = _nan_rows_have_reasons(rows, ("ece", "adaptive_ece", "nll", "brier", "acc"))
    assert {r["task"] for r in nan} == {"empty", "sm_empty"}
    assert "0 examples" in by["empty"]["reason"]
    assert by["right"]["acc"] == 1.0 and by["wrong"]["acc"] == 0.0 and by["single"]["acc"] in (0.0, 1.0)
    assert by["k1"]["acc"] == 1.0 and by["k1"]["ece"] == 0.0  # one option: always right, confidence 1


def test_selective_of_empty_single_and_one_class_tasks(sides, tmp_path, capsys):
    rows = _json_rows(["selective", sides, "--task", "empty,single,right,wrong,flat"], capsys, tmp_path / "s.json")
    nan = _nan_rows_have_reasons(rows, ("prr_0.5", "prr_0.75", "aurc", "spearman"))
    assert {r["task"] for r in nan} == {"empty", "single", "right", "wrong", "flat"}
    reasons = {r["task"]: r["reason"] for r in nan}
    assert "0 examples" in reasons["empty"] and "all 30 answers are correct" in reasons["right"]
    assert "all 30 answers are wrong" in reasons["wrong"]
    flat = [r for r in rows if r["task"] == "flat"]
    assert all("score is constant" in r["reason"] for r in flat)
    assert all(r["aurc"] == 1.0 for r in rows if r["task"] == "wrong")


@pytest.mark.parametrize(
    "id_task, targets", [("empty", "id4,single"), ("id4", "empty,single,flat"), ("wrong", "right"), ("right", "wrong")]
)
def test_atc_with_empty_and_one_class_sides(sides, tmp_path, capsys, id_task, targets):
    rows = _json_rows(["atc", sides, "--id", id_task, "--target", targets], capsys, tmp_path / "a.json")
    _nan_rows_have_reasons(rows, ("estimate", "abs_error"))
    for r in rows:
        if id_task == "empty":
            assert r["estimate"] is None and "no records" in r["reason"]
        elif r["target_task"] == "empty":
            assert r["estimate"] is None and r["true_acc"] is None and "0 examples" in r["reason"]
        elif r["method"] == "atc":
            assert 0.0 <= r["estimate"] <= 1.0
    if id_task == "wrong":  # every ID answer wrong: the threshold is +inf, nothing is accepted
        assert all(r["estimate"] == 0.0 for r in rows if r["method"] == "atc")


def test_orders_of_empty_and_single_tasks(sides, tmp_path, capsys):
    rows = _json_rows(
        ["orders", sides, "--task", "empty,single", "--scores", "max_prob,neg_entropy"], capsys, tmp_path / "o.json"
    )
    assert [r["task"] for r in rows] == ["empty", "single"]
    for r in rows:
        assert r["discordant_fraction"] is None and "needs at least one pair" in r["reason"]


def test_ood_with_a_single_example_side_reports_the_undefined_interval(sides, tmp_path, capsys):
    with pytest.warns(UndefinedMetricWarning, match="fewer than 2 examples per class"):
        rows = _json_rows(
            ["ood", sides, "--id", "id4", "--ood", "single", "--n-boot", "50"], capsys, tmp_path / "d.json"
        )
    for r in rows:
        assert (r["n_id"], r["n_ood"]) == (60, 1)
        assert 0.0 <= r["auroc"] <= 1.0 and r["auroc_ci"] == [None, None]
        assert all(
            v is not None and 0.0 <= v <= 1.0 for v in (r["aupr_in"], r["aupr_out"], r["fpr95"], *r["aupr_in_ci"])
        )


def test_ood_of_tied_scores_is_chance(sides, tmp_path, capsys):
    rows = _json_rows(["ood", sides, "--id", "flat", "--ood", "flat_b", "--n-boot", "20"], capsys, tmp_path / "f.json")
    for r in rows:
        assert r["auroc"] == 0.5 and r["fpr95"] == 1.0 and r["aupr_in"] == r["aupr_baseline"] == 0.5


def test_report_of_single_example_sides_is_written_with_undefined_values_marked(sides, tmp_path, capsys):
    out = tmp_path / "rep"
    with pytest.warns(UndefinedMetricWarning):
        status, _, err = _cli(
            ["report", sides, "--id", "single", "--ood", "single_b", "--out", out, "--n-boot", "0"], capsys
        )
    assert status == 0, err
    report = json.loads((out / "report.json").read_text())
    assert report["ood"]["assert"]["rows"] and report["ksweep"]["single_b"]["delong_test"]["p_value"] is None
    assert "n/a" in (out / "report.md").read_text()


# ----------------------------------------------------------------------------- determinism


def test_same_records_give_byte_identical_reports_and_json(sides, tmp_path, capsys):
    """Two runs of ``report`` (figures included: SVG element ids are salted) and of ``ood --json``
    on the same records and seed produce the same bytes."""
    for name in ("a", "b"):
        status, _, err = _cli(
            [
                "report",
                sides,
                "--id",
                "id4",
                "--ood",
                "ood4,ood5",
                "--k-policy",
                "assert,restrict",
                "--out",
                tmp_path / name,
                "--n-boot",
                "30",
                "--seed",
                "3",
                "--max-extra",
                "2",
            ],
            capsys,
        )
        assert status == 2, err  # written; ood5 (K = 5) refused under both policies, as cli.main's map says
        status, _, err = _cli(
            [
                "ood",
                sides,
                "--id",
                "id4",
                "--ood",
                "ood4",
                "--n-boot",
                "30",
                "--seed",
                "3",
                "--json",
                tmp_path / f"{name}.json",
            ],
            capsys,
        )
        assert status == 0, err
    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert any(f.endswith(".svg") for f in files) and files == sorted(p.name for p in (tmp_path / "b").iterdir())
    for f in files:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
