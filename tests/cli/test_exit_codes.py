"""One exit-code map for every subcommand (lm_eval_evidential.cli.main.EXIT_CODES).

0 success; 1 error (bad input or usage, argparse's usage errors included); 2 refused by a K
(class count) or fingerprint (producer) check. Each audit command is run on the same synthetic
run: ``id4``/``ood4`` (K = 4), ``ood5`` (K = 5) and ``alien`` (K = 4, another adapter).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lm_eval_evidential.cli.main import EXIT_CODES, EXIT_ERROR, EXIT_OK, EXIT_REFUSED, main
from lm_eval_evidential.records import Records, make_record, records_path, write_records

RUN = "2026-11-21T20-15-03.123456"
PRODUCER = {"method": "edl", "prior_weight": 1.0, "pretrained": "synthetic", "adapter_sha256": "a1"}
REPO = Path(__file__).resolve().parents[2]


def _records(task, k, seed, meta, n=40):
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        z = rng.normal(size=k) + (1.0 if task == "id4" else 0.0)
        rows.append(
            make_record(
                task=task,
                doc_id=i,
                labels=list("ABCDE"[:k]),
                gold=int(rng.integers(k)),
                logits=z,
                alpha=np.logaddexp(0.0, z) + 1.0,
            )
        )
    return Records.from_rows(rows, task=task, meta=meta)


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("exit_codes")
    for task, k, seed, meta in (
        ("id4", 4, 1, PRODUCER),
        ("ood4", 4, 2, PRODUCER),
        ("ood5", 5, 3, PRODUCER),
        ("alien", 4, 4, {**PRODUCER, "adapter_sha256": "b2"}),
    ):
        write_records(records_path(root / "model", task, RUN), _records(task, k, seed, meta))
    return root


PAIR = ["--n-boot", "0"]
CASES = {
    "ood": [
        (["--id", "id4", "--ood", "ood4", *PAIR], EXIT_OK, "auroc"),
        (["--id", "id4", "--ood", "ood4,ood5", *PAIR], EXIT_REFUSED, "id4 {4: 40} vs ood5 {5: 40}"),
        (["--id", "id4", "--ood", "alien", *PAIR], EXIT_REFUSED, "adapter_sha256: id4='a1' vs alien='b2'"),
        (["--id", "id4", "--ood", "nope", *PAIR], EXIT_ERROR, "no records for task 'nope'"),
        (["--id", "id4", "--ood", "ood4", "--n-boot", "1"], EXIT_ERROR, "n_boot=1 must be 0"),
        (
            ["--id", "id4", "--ood", "ood4", "--n-boot", "many"],
            EXIT_ERROR,
            "n_boot='many' must be 0 (no interval) or an integer in 2..100000",
        ),
        (["--id", "id4"], EXIT_ERROR, "give the OOD task(s): --ood T1,T2"),
    ],
    "ksweep": [
        (["--id", "id4", "--ood", "ood4", "--max-extra", "1"], EXIT_OK, "K-sensitive"),
        (["--id", "id4", "--ood", "ood5"], EXIT_REFUSED, "id4 {4: 40} vs ood5 {5: 40}"),
        (["--id", "id4", "--ood", "alien"], EXIT_REFUSED, "adapter_sha256"),
        (["--id", "id4", "--ood", "nope"], EXIT_ERROR, "no records for task 'nope'"),
        (["--id", "id4", "--ood", "ood4", "--k-policy", "maybe"], EXIT_ERROR, "invalid choice: 'maybe'"),
    ],
    "report": [
        (["--id", "id4", "--ood", "ood4", "--out", "{tmp}/r0", *PAIR, "--max-extra", "1"], EXIT_OK, "wrote"),
        (
            ["--id", "id4", "--ood", "ood4,ood5", "--out", "{tmp}/r2", *PAIR, "--max-extra", "1"],
            EXIT_REFUSED,
            "refused id4 vs ood5 (k_policy assert)",
        ),
        (["--id", "id4", "--ood", "alien", "--out", "{tmp}/rf", *PAIR], EXIT_REFUSED, "adapter_sha256"),
        (["--id", "id4", "--ood", "nope", "--out", "{tmp}/r1", *PAIR], EXIT_ERROR, "no records for task 'nope'"),
    ],
    "calibration": [
        (["--task", "id4,ood5"], EXIT_OK, "adaptive_ece"),
        (["--task", "id4,alien"], EXIT_REFUSED, "adapter_sha256"),
        (["--task", "nope"], EXIT_ERROR, "no records for task 'nope'"),
        (["--task", "id4", "--bins", "0"], EXIT_ERROR, "n_bins=0 must be an integer in 1..10000"),
    ],
    "selective": [
        (["--task", "id4,ood5", "--scores", "max_prob"], EXIT_OK, "prr_0.75"),
        (["--task", "id4,alien"], EXIT_REFUSED, "adapter_sha256"),
        (["--task", "id4", "--run", "2000-01-01T00-00-00.0"], EXIT_ERROR, "no run '2000-01-01T00-00-00.0'"),
        (["--task", "id4", "--scores", "vacuity"], EXIT_ERROR, "unknown score(s) ['vacuity']"),
    ],
    "atc": [
        (["--id", "id4", "--target", "ood4"], EXIT_OK, "abs_error"),
        (["--id", "id4", "--target", "alien"], EXIT_REFUSED, "adapter_sha256"),
        (["--id", "id4", "--target", "nope"], EXIT_ERROR, "no records for task 'nope'"),
        (["--id", "id4", "--target", " , "], EXIT_ERROR, "no task names"),
    ],
    "orders": [
        (["--task", "id4", "--scores", "max_prob,l2_norm"], EXIT_OK, "order_equivalent"),
        (["--task", "id4,alien"], EXIT_REFUSED, "adapter_sha256"),
        (["--task", "nope"], EXIT_ERROR, "no records for task 'nope'"),
        (["--task", "id4", "--scores", "max_prob"], EXIT_ERROR, "at least two scores"),
    ],
}


@pytest.mark.parametrize(
    "command, argv, status, message",
    [(c, argv, status, message) for c, cases in CASES.items() for argv, status, message in cases],
    ids=[f"{c}-{EXIT_CODES[s].split()[0]}-{i}" for c, cases in CASES.items() for i, (_, s, _) in enumerate(cases)],
)
def test_audit_commands_share_one_exit_code_map(out, tmp_path, capsys, command, argv, status, message):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    got = main([command, str(out), *argv])
    captured = capsys.readouterr()
    assert got == status, captured.out + captured.err
    assert message in captured.out + captured.err
    assert "Traceback" not in captured.err


@pytest.mark.parametrize(
    "argv, message",
    [
        ([], "the following arguments are required: COMMAND"),
        (["nope"], "invalid choice: 'nope'"),
        (["train", "--task", "obqa_edl"], "the following arguments are required: --pretrained"),
        (["train", "--pretrained", "base", "--task", "obqa_edl"], "the following arguments are required: --output-dir"),
        (["demo", "--max-steps", "many"], "max_steps='many' must be an integer >= 1"),
    ],
)
def test_usage_errors_and_invalid_settings_exit_1(capsys, argv, message):
    assert main(argv) == EXIT_ERROR
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_help_exits_0_and_lists_the_map(capsys):
    assert main(["--help"]) == EXIT_OK
    text = " ".join(capsys.readouterr().out.split())
    assert "exit status: 0 success; 1 error: bad input or usage; 2 refused by a K (class count)" in text


def test_the_map_is_the_one_the_docs_document():
    page = (REPO / "docs" / "audits.md").read_text()  # the exit-status table moved there with the README's door
    for code, meaning in EXIT_CODES.items():
        assert f"| {code} | {meaning}" in page, (code, meaning)


def test_process_exit_status_is_the_map(out):
    """The real process status (console script / python -m), not only main()'s return value."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    run = lambda *argv: subprocess.run(
        [sys.executable, "-m", "lm_eval_evidential", *argv],
        capture_output=True,  # noqa: E731
        text=True,
        env=env,
        timeout=600,
    )
    refused = run("ood", str(out), "--id", "id4", "--ood", "ood5", "--n-boot", "0")
    usage = run("ood", str(out), "--id", "id4")
    assert (refused.returncode, usage.returncode) == (EXIT_REFUSED, EXIT_ERROR), refused.stderr + usage.stderr
    assert "Traceback" not in refused.stderr + usage.stderr


@pytest.mark.parametrize(
    "bug", [ValueError("a bug: index out of step"), OSError("a bug: read past the end"), KeyError("a bug")]
)
def test_a_bug_is_not_an_expected_error_it_keeps_its_traceback(out, capsys, monkeypatch, bug):
    """Only the package's own expected errors are one line and exit 1; a plain ValueError/OSError from
    a real bug propagates (the console script then prints its traceback), never a tidy exit 1."""
    import lm_eval_evidential.audits.ood as audits

    def broken(*args, **kwargs):
        raise bug

    monkeypatch.setattr(audits, "ood_rows", broken)
    with pytest.raises(type(bug), match="a bug"):
        main(["ood", str(out), "--id", "id4", "--ood", "ood4", "--n-boot", "0"])
    assert "error:" not in capsys.readouterr().err


def test_an_expected_error_from_the_same_place_is_one_line(out, capsys, monkeypatch):
    import lm_eval_evidential.audits.ood as audits
    from lm_eval_evidential.errors import InvalidValueError

    def refuse(*args, **kwargs):
        raise InvalidValueError("n_boot must be 0 or more, got -1")

    monkeypatch.setattr(audits, "ood_rows", refuse)
    assert main(["ood", str(out), "--id", "id4", "--ood", "ood4", "--n-boot", "0"]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert "lm-eval-evidential ood: error: n_boot must be 0 or more, got -1" in err and "Traceback" not in err


def test_a_bug_in_the_process_shows_its_traceback(out):
    """The real process: a plain ValueError from a bug prints Python's traceback, not an ``error:`` line."""
    code = (
        "import sys, lm_eval_evidential.audits.ood as audits\n"
        "def broken(*a, **k):\n    raise ValueError('a bug in ood_rows')\n"
        "audits.ood_rows = broken\n"
        "from lm_eval_evidential.cli.main import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, "-c", code, "ood", str(out), "--id", "id4", "--ood", "ood4", "--n-boot", "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode != EXIT_OK and "Traceback" in proc.stderr and "ValueError: a bug in ood_rows" in proc.stderr
    assert "error: a bug" not in proc.stderr


@pytest.mark.parametrize("raised, status", [("bug", None), ("expected", EXIT_ERROR), ("refusal", EXIT_REFUSED)])
def test_eval_catches_only_the_package_errors(monkeypatch, capsys, raised, status):
    import errno

    import lm_eval.__main__

    from lm_eval_evidential.cli.eval import run_lm_eval
    from lm_eval_evidential.errors import DatasetError, FingerprintMismatchError

    error = {
        "bug": OSError(errno.EIO, "a bug: I/O on a closed handle", "/nowhere"),
        "expected": DatasetError("task 'obqa_edl', dataset row 3: no answer options"),
        "refusal": FingerprintMismatchError("adapter_sha256: id='a1' vs ood='b2'"),
    }[raised]

    def cli_evaluate():
        raise error

    monkeypatch.setattr(lm_eval.__main__, "cli_evaluate", cli_evaluate)
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # run_lm_eval hands the stock CLI its own argv
    monkeypatch.delenv("LM_EVAL_EVIDENTIAL_TRACEBACK", raising=False)
    if status is None:
        with pytest.raises(OSError, match="a bug"):
            run_lm_eval(["--model", "evidential", "--no_output_path"])
        return
    assert run_lm_eval(["--model", "evidential", "--no_output_path"]) == status
    line = capsys.readouterr().err.strip()
    assert line == f"lm-eval-evidential eval: {'refused' if raised == 'refusal' else 'error'}: {error}"
