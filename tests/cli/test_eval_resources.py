"""``lm-eval-evidential eval`` under --model evidential ends a limit of the process (out of memory, e.g. under
``ulimit -v``; input nested too deeply) with one ``error:`` line; stock models keep lm_eval's own traceback
(issue 26, class 6). The real ``ulimit -v`` run is in the catalogue's notes: where memory runs out decides
which of these the process meets, so the conditions are raised here directly."""

from __future__ import annotations

import pytest

from lm_eval_evidential.cli.eval import run_lm_eval

ARGV = ["--tasks", "obqa_edl", "--output_path", "unused", "--model"]
FAULTS = [
    (MemoryError(), r"error: out of memory: .*`ulimit -v`.* \(MemoryError\)$"),
    (
        ImportError("libtorch_cpu.so: failed to map segment from shared object"),
        r"error: out of memory: .*\(ImportError: libtorch_cpu\.so: failed to map segment from shared object\)$",
    ),
    (RecursionError("maximum recursion depth exceeded"), r"error: an input is nested too deeply to read: .*flatten it"),
]


@pytest.fixture
def failing(monkeypatch):
    import lm_eval.__main__

    def install(exc):
        def cli_evaluate():
            raise exc

        monkeypatch.setattr(lm_eval.__main__, "cli_evaluate", cli_evaluate)
        monkeypatch.delenv("LM_EVAL_EVIDENTIAL_TRACEBACK", raising=False)

    return install


@pytest.mark.parametrize("exc, match", FAULTS, ids=["memory", "unmappable-library", "recursion"])
def test_evidential_gets_one_error_line(exc, match, failing, capsys):
    import re

    failing(exc)
    assert run_lm_eval([*ARGV, "evidential"]) == 1
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert len(lines) == 1 and re.search(match, lines[0]), err
    assert "Traceback" not in err


@pytest.mark.parametrize("exc", [f[0] for f in FAULTS], ids=["memory", "unmappable-library", "recursion"])
def test_stock_models_keep_the_traceback(exc, failing):
    failing(exc)
    with pytest.raises(type(exc)):
        run_lm_eval([*ARGV, "hf"])


def test_a_missing_module_stays_a_bug(failing):
    failing(ImportError("No module named 'nowhere'"))
    with pytest.raises(ImportError, match="nowhere"):
        run_lm_eval([*ARGV, "evidential"])


@pytest.mark.parametrize("model, one_line", [("evidential", True), ("hf", False)])
def test_plain_lm_eval_says_it_in_one_line_for_evidential_only(model, one_line, monkeypatch, capsys):
    import sys

    from lm_eval_evidential.integration.error_lines import install_one_line_errors

    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    monkeypatch.setattr(sys, "argv", ["lm_eval", "--model", model, "--tasks", "obqa_edl"])
    monkeypatch.delenv("LM_EVAL_EVIDENTIAL_TRACEBACK", raising=False)
    install_one_line_errors()
    try:
        raise MemoryError
    except MemoryError as exc:
        sys.excepthook(type(exc), exc, exc.__traceback__)
    err = capsys.readouterr().err
    assert ("error: out of memory" in err and "Traceback" not in err) == one_line, err
    assert one_line or "Traceback" in err
