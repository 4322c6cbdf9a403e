"""The README and the docs pages, run as written: their shell and Python blocks in order, on this offline machine.

Every ```bash block runs with ``bash -e -o pipefail`` in one scratch folder, top to bottom — the
README first, then each page of :data:`DOC_PAGES` — so a later command sees what an earlier one
wrote (``ckpt/``, ``out/``), exactly as a reader who follows the README and then the docs.

The environment is the test process's own, less every variable the package reads
(``EVIDENTIAL_DATA_DIR``, ``HF_*``, ``LM_EVAL_EVIDENTIAL_*``): the README's own offline set-up block
(after ``<!-- offline-setup -->``) is the only thing that sets them, run before every block as a reader
who typed it into the same terminal. The only other changes are the ones a machine without the hub and
without a GPU needs:

- the README's blocks run exactly as written: its walk's ``MODEL`` is the demo's tiny model, built here
  at ``demo_out/tiny-llama`` as the demo's first step builds it;
- in the docs pages' blocks, the hub model ``meta-llama/Meta-Llama-3-8B`` becomes the tiny Llama model
  built here, ``lm_eval`` runs get ``--limit 8`` and ``lm-eval-evidential train`` gets ``--max-steps 2
  --max-train-docs 16`` (the pages show the paper's 10,080 steps over the full splits).

Not run here: the blocks right after ``<!-- main-command -->`` and ``<!-- test-command -->``
(CI runs them: ``.ci/run`` and tests/cli/test_demo.py) and blocks marked ``<!-- not run by
tests/contract/test_readme.py: … -->`` (installs, benchmarks, launches tested elsewhere: each says where).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
#: The docs pages whose commands run after the README's, in this order (the audits read the walk's ``out/``).
DOC_PAGES = ("usage", "tasks", "audits", "training", "scaling", "reliability", "architecture")
HUB_MODEL = "meta-llama/Meta-Llama-3-8B"
#: Blocks run elsewhere: the two set-up commands and the vLLM and laplace-torch installs (CI), the data-parallel
#: launch (tests/harness/test_data_parallel.py),
#: and blocks that say why they are not run here.
SKIP_MARKERS = (
    "<!-- main-command -->",
    "<!-- test-command -->",
    "<!-- data-parallel-command -->",
    "<!-- vllm-install -->",
    "<!-- laplace-install -->",
    "<!-- not run by tests/contract/test_readme.py",
)


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
    """A docs page's block as this machine runs it (see the module docstring); the README's run as written."""
    code = code.replace("\\\n", " ").replace(HUB_MODEL, str(model))
    lines = [_with_flags(line, "lm_eval", "--limit 8") for line in code.splitlines()]
    lines = [_with_flags(line, "lm-eval-evidential train", "--max-steps 2 --max-train-docs 16") for line in lines]
    return "\n".join(lines) + "\n"


def offline_setup(text: str) -> str:
    """The README's offline set-up block (after ``<!-- offline-setup -->``), verbatim."""
    lines = text.splitlines()
    i = lines.index("<!-- offline-setup -->")
    assert lines[i + 1] == "```bash"
    return "\n".join(lines[i + 2 : lines.index("```", i + 2)]) + "\n"


def reader_env() -> dict[str, str]:
    """This process's environment less every variable the package or the hub reads: only the README sets them."""
    drop = ("EVIDENTIAL_", "HF_", "LM_EVAL_EVIDENTIAL_", "TRANSFORMERS_", "TOKENIZERS_", "MPLBACKEND")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


def all_blocks() -> list[tuple[str, str, str]]:
    """``(where, language, code)`` of every block that runs: the README's, then each docs page's."""
    pages = [("README.md", README)] + [(f"docs/{p}.md", ROOT / "docs" / f"{p}.md") for p in DOC_PAGES]
    return [
        (where, lang, code)
        for where, path in pages
        for lang, code, runs in readme_blocks(path.read_text(encoding="utf-8"))
        if runs and lang in ("bash", "python")
    ]


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
    assert "EVIDENTIAL_DATA_DIR" in offline_setup(text)
    # Every docs page is run; a page missing from DOC_PAGES would never be.
    assert sorted(p.stem for p in (ROOT / "docs").glob("*.md")) == sorted(DOC_PAGES)
    assert any(lang == "python" for _, lang, _ in all_blocks())


def test_every_test_file_the_pages_name_exists():
    """A test the README, a docs page or a benchmark note points a reader to is where it says (tests move)."""
    pages = [README, *(ROOT / "docs").glob("*.md"), *(ROOT / "benchmarks").glob("*.md")]
    named = {
        (page.name, path)
        for page in pages
        for path in re.findall(r"\btests/[\w/]+(?:\.py)?", page.read_text(encoding="utf-8"))
    }
    assert named, "the pages name no test file"
    missing = sorted(f"{page}: {path}" for page, path in named if not (ROOT / path).exists())
    assert not missing, missing


def test_the_numbers_docs_scaling_states_are_the_codes_and_the_tests():
    """docs/scaling.md's prose gives no measured figure (those are in benchmarks/: the generated table and
    HISTORY.md); the numbers it does give are the prefix cache's threshold and the bounds its tests hold."""
    from lm_eval_evidential.modeling.prefix_plan import MIN_SAVED_TOKENS

    def constant(test_file: str, name: str) -> str:
        return re.search(rf"^{name} = (\S+)$", (ROOT / test_file).read_text(encoding="utf-8"), re.M).group(1)

    tol = constant("tests/modeling/test_prefix_cache.py", "TOL")
    assert tol == constant("tests/harness/test_model_prefix_cache.py", "TOL")
    text = " ".join((ROOT / "docs" / "scaling.md").read_text(encoding="utf-8").split())
    for sentence in (
        f"The records equal the uncached path's within {tol} in float32 (the tests' bound)",
        f"min(rows, batch size) ≥ {MIN_SAVED_TOKENS} (`MIN_SAVED_TOKENS`)",
        f"when they save ≥ {MIN_SAVED_TOKENS} token positions",
        f"logits within {constant('tests/vllm/test_vllm_backend.py', 'LOGIT_TOL')} (the tests' bound",
    ):
        assert sentence in text, f"docs/scaling.md: say {sentence}"
    assert not re.search(r"\bmeasured\b[^.]*\d", text), "a measured figure in docs/scaling.md's prose"


#: A timing figure: a duration ("7.4 s", "10.5 ms", "3 minutes"), a speed-up or ratio ("2.50×", "0.9x") or a
#: rate ("1,200 q/s", "12 questions/s"). Measured figures belong in benchmarks/ (README.md's table, HISTORY.md),
#: with their machine, load and shape; prose that quotes one gets stale silently.
TIMING_FIGURE = re.compile(
    r"(?<![\w.])\d+(?:,\d{3})*(?:\.\d+)?\s?(?:ms|µs|us|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?)(?![\w/])"
    r"|(?<![\w.])\d+(?:,\d{3})*(?:\.\d+)?\s?[×x](?!\w)"
    r"|\b(?:q|questions?|tokens?|it|steps?|docs?|prompts?|records?)/s\b",
    re.IGNORECASE,
)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("took 7.4 s on 1 thread", True),
        ("10.5 ms a step", True),
        ("in 3 minutes", True),
        ("K orders are 2.50× K calls", True),
        ("at 0.9x the bare step", True),
        ("1,200 q/s", True),
        ("12 questions/s", True),
        ("λ ≥ 1, S = Σα", False),
        ("K = 4 options, 5 classes", False),
        ("(questions x members x K)", False),
        ("a 0.481M-parameter model", False),
    ],
)
def test_the_timing_pattern(text, found):
    assert bool(TIMING_FIGURE.search(text)) is found


def docs_prose(text: str) -> list[str]:
    """The paragraphs of a page without its fenced blocks and inline code (commands, quoted log lines)."""
    text = re.sub(r"^```.*?^```$", "", text, flags=re.S | re.M)
    return [para for para in re.split(r"\n\s*\n", text) if para.strip()]


def test_the_pages_prose_quotes_no_timing_figure_of_its_own():
    """No duration, speed-up or rate in the prose of README.md and docs/, except in a paragraph that points to
    benchmarks/ for it (a paragraph, not a line: a sentence wraps over lines), and the code's own settings, each
    checked against the constant it states. (The guard used to be "measured … digit" in docs/scaling.md only,
    which missed a SmolLM2 timing quoted from an uncommitted script.)"""
    from lm_eval_evidential.modeling.quiet import LOG_PROGRESS_INTERVAL

    settings = {"docs/usage.md": f"once every {LOG_PROGRESS_INTERVAL:g} s"}  # a setting of the code, not a timing
    found = []
    for page in (README, *sorted((ROOT / "docs").glob("*.md"))):
        name = page.relative_to(ROOT).as_posix()
        for para in docs_prose(page.read_text(encoding="utf-8")):
            prose = re.sub(r"`[^`\n]*`", "", " ".join(para.split()))
            if name in settings:
                prose = prose.replace(settings[name], "")
            if "benchmarks/" not in para:
                found += [f"{name}: {hit.group(0)!r} in {prose[:100]!r}" for hit in TIMING_FIGURE.finditer(prose)]
    assert not found, "timing figures in the pages' prose (give them in benchmarks/README.md): " + "; ".join(found)
    for name, said in settings.items():
        assert said in " ".join((ROOT / name).read_text(encoding="utf-8").split()), f"{name}: say {said!r}"


@pytest.mark.slow
def test_the_census_counts_the_pages_give_are_the_census(tmp_path):
    """The counts of lm-eval's multiple-choice tasks in the README and docs/tasks.md are what
    ``lm-eval-evidential tasks --json`` counts on the installed harness, now."""
    from collections import Counter
    from importlib.metadata import version

    path = tmp_path / "census.json"
    cmd = [sys.executable, "-m", "lm_eval_evidential", "tasks", "--json", str(path)]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(path.read_text(encoding="utf-8"))
    choices = Counter(row["choices"] for row in rows)

    def noted(start: str) -> int:
        return sum(row["note"].startswith(start) for row in rows)

    assert all(row["k"] == 40 for row in rows if row["note"].startswith("40 options"))
    n, labels, a_labels = len(rows), choices["labels"], choices["(A) labels"]
    views, pairs, forty = sum(bool(row["view"]) for row in rows), noted("no question"), noted("40 options")
    said = {
        README: f"`lm-eval-evidential tasks` lists lm-eval {version('lm_eval')}'s {n:,} stock multiple-choice tasks: "
        f'{labels:,} with letter labels and {a_labels:,} with "(A)" labels run as they are, {views:,} have a '
        f"lettered view, and the {pairs:,} minimal pairs without a question and {forty:,} forty-option tasks "
        "have none.",
        ROOT / "docs" / "tasks.md": f"On lm-eval {version('lm_eval')} it lists {n:,} stock multiple-choice tasks: "
        f'{labels:,} with label choices, {a_labels:,} with "(A)"-style labels, {choices["words"]:,} with a fixed '
        f"list of words and {choices['texts']:,} with texts; {views:,} have a lettered view ({noted('gold stored'):,} "
        f"of them with the gold stored at one position, shuffled by the view); {pairs:,} are minimal pairs without "
        f"a question and {forty:,} have 40 options",
    }
    for page, sentence in said.items():
        assert sentence in " ".join(page.read_text(encoding="utf-8").split()), f"{page.name}: say {sentence}"


def test_the_readme_is_a_door():
    """A short page: what and why, install, the two commands, a walk, the tasks, links."""
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    for page in DOC_PAGES:
        assert f"(docs/{page}.md)" in text, f"the README links docs/{page}.md"
    for link in re.findall(r"\]\(((?:docs|benchmarks)/[^)#]+)", text):
        assert (ROOT / link).exists(), link


@pytest.mark.slow
def test_every_readme_command_runs_as_written_in_order(tiny_model, tmp_path):
    setup = offline_setup(README.read_text(encoding="utf-8"))
    env = reader_env()
    work = tmp_path / "reader"
    work.mkdir()
    # The walk's MODEL, demo_out/tiny-llama, as the demo's first step builds it
    # (the demo itself: tests/cli/test_demo.py).
    from lm_eval_evidential.testing.tiny import build_tiny_model

    build_tiny_model(work / "demo_out" / "tiny-llama", seed=0)
    outputs = []
    for where, lang, code in all_blocks():
        if lang == "bash":
            code = code if where == "README.md" else adapt(code, tiny_model)
            cmd = ["bash", "-e", "-o", "pipefail", "-c", setup + code]
        else:  # the reader's terminal: the set-up's variables, then Python
            cmd = ["bash", "-e", "-c", setup + 'exec "$0" -c "$1"', sys.executable, code]
        proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=1500)
        assert proc.returncode == 0, (
            f"{where} block failed:\n{code}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}"
        )
        assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
        outputs.append(proc.stdout + proc.stderr)
    printed = "\n".join(outputs)
    # What the README says the commands produce.
    for name in (
        "ckpt/evidential_config.json",
        "ood.json",
        "conformal.json",
        "conformal_sets.png",
        "openood.json",
        "temperature.json",
        "ksweep.png",
        "ksweep.json",
        "reliability.png",
        "risk_coverage.png",
        "report/report.md",
        "report/report.json",
        "compare.json",
        "report-baselines/report.md",
    ):
        assert (work / name).is_file(), name
    assert list((work / "out").rglob("records_obqa_edl_*.parquet"))
    assert "refused obqa_edl vs csqa_edl" in printed and "exit status 2" in printed
    # docs/audits.md's conformal: half of the run's obqa_edl questions calibrate (the walk's 120, or a later run's 8)
    assert re.search(r"refused calibration obqa_edl \(0\.5 of (120|8), seed 0\) vs csqa_edl", printed)
    # docs/training.md's baselines: trained members → records → compare → the report's comparison of the three
    baselines = json.loads((work / "report-baselines" / "report.json").read_text(encoding="utf-8"))["compare"]
    assert baselines["methods"] == ["EDL", "ensemble", "mc-dropout"] and baselines["refused"] == []
    assert [r["kind"] for r in baselines["calibration"]] == ["edl", "ensemble ×3 (softmax)", "mc_dropout ×10 (edl)"]
    assert "## Methods side by side" in (work / "report-baselines" / "report.md").read_text(encoding="utf-8")
    report = (work / "report" / "report.md").read_text(encoding="utf-8")
    assert "## Summary" in report and "Illustrative only" in report
    for section in ("## OOD detection by group", "## Conformal prediction sets", "## Post-hoc temperature scaling"):
        assert section in report, section  # docs/audits.md's report --near/--far: the field's audits beside OOD
