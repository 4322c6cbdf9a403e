"""The README, run as written: its shell blocks in order, then its Python block, on this offline machine.

Every ```bash block runs with ``bash -e -o pipefail`` in one scratch folder, top to bottom, so a
later command sees what an earlier one wrote (``ckpt/``, ``out/``), exactly as a reader who
follows the README. The only changes are the ones a machine without the hub and without a GPU
needs, each one the README's own advice:

- the hub model ``meta-llama/Meta-Llama-3-8B`` becomes the tiny Llama model built here;
- ``EVIDENTIAL_DATA_DIR`` points at the bundled sample mirror (README, "Offline mirror");
- ``lm_eval`` runs get ``--limit 8`` and ``lm-eval-evidential train`` gets ``--max-steps 2
  --max-train-docs 16`` (the defaults are the paper's 10,080 steps over the full splits).

Not run here: the blocks right after ``<!-- main-command -->`` and ``<!-- test-command -->``
(CI runs them: ``.ci/run`` and tests/test_demo.py) and blocks marked ``<!-- not run by
tests/test_readme.py: … -->`` (installs, benchmarks: they have their own commands).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
HUB_MODEL = "meta-llama/Meta-Llama-3-8B"
SKIP_MARKERS = ("<!-- main-command -->", "<!-- test-command -->", "<!-- not run by tests/test_readme.py")


def readme_blocks(text: str) -> list[tuple[str, str, bool]]:
    """``(language, code, runs)`` for every fenced block, in order; ``runs`` is False after a skip marker."""
    blocks = []
    for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text, flags=re.S | re.M):
        before = text[: m.start()].rstrip().rsplit("\n", 1)[-1]
        blocks.append((m[1], m[2], not before.startswith(SKIP_MARKERS)))
    return blocks


def _with_flags(line: str, program: str, flags: str) -> str:
    """``line`` with ``flags`` appended to a ``program`` command (before a trailing comment)."""
    if not line.lstrip().startswith(program + " "):
        return line
    command, comment = re.match(r"^(.*?)(\s+#.*)?$", line).groups()
    return f"{command} {flags}{comment or ''}"


def adapt(code: str, model: Path) -> str:
    """The README block as this machine runs it (see the module docstring)."""
    code = code.replace("\\\n", " ").replace(HUB_MODEL, str(model))
    lines = [_with_flags(line, "lm_eval", "--limit 8") for line in code.splitlines()]
    lines = [_with_flags(line, "lm-eval-evidential train", "--max-steps 2 --max-train-docs 16") for line in lines]
    return "\n".join(lines) + "\n"


def test_the_readme_is_parsed_as_ci_reads_it():
    text = README.read_text(encoding="utf-8")
    # .ci/run takes the line two below the marker; it must be the tests' command.
    lines = text.splitlines()
    i = lines.index("<!-- test-command -->")
    assert lines[i + 1] == "```bash" and "python -m pytest" in lines[i + 2]
    j = lines.index("<!-- main-command -->")
    assert lines[j + 1] == "```bash" and lines[j + 2].endswith("lm-eval-evidential demo")
    runs = [code for lang, code, run in readme_blocks(text) if run]
    assert any("lm-eval-evidential train" in c for c in runs) and any("lm-eval-evidential report" in c for c in runs)
    assert any(lang == "python" and run for lang, _, run in readme_blocks(text))


@pytest.mark.slow
def test_every_readme_command_runs_as_written_in_order(tiny_model, mirror, tmp_path):
    env = {
        **os.environ,
        "EVIDENTIAL_DATA_DIR": str(mirror),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "MPLBACKEND": "Agg",
    }
    work = tmp_path / "reader"
    work.mkdir()
    outputs = []
    for lang, code, runs in readme_blocks(README.read_text(encoding="utf-8")):
        if not runs or lang not in ("bash", "python"):
            continue
        if lang == "bash":
            cmd = ["bash", "-e", "-o", "pipefail", "-c", adapt(code, tiny_model)]
        else:
            cmd = [sys.executable, "-c", code]
        proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=1500)
        assert proc.returncode == 0, (
            f"README block failed:\n{code}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}"
        )
        assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
        outputs.append(proc.stdout + proc.stderr)
    printed = "\n".join(outputs)
    # What the README says the commands produce.
    for name in (
        "ckpt/evidential_config.json",
        "ood.json",
        "ksweep.png",
        "ksweep.json",
        "reliability.png",
        "risk_coverage.png",
        "report/report.md",
        "report/report.json",
    ):
        assert (work / name).is_file(), name
    assert list((work / "out").rglob("records_obqa_edl_*.parquet"))
    assert "refused obqa_edl vs csqa_edl" in printed and "exit status 2" in printed
    report = (work / "report" / "report.md").read_text(encoding="utf-8")
    assert "## Summary" in report and "Illustrative only" in report
