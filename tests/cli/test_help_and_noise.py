"""What a new user reads in the terminal: help texts that render and tell the real defaults, refusals
said once, and no third-party noise that our own calls trigger."""

from __future__ import annotations

import argparse
import os
import threading
import time
import warnings

import pytest

from lm_eval_evidential.cli.main import build_parser
from lm_eval_evidential.metrics.scores import OOD_DEFAULT_SCORES


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


SUBCOMMANDS = _subcommands()


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_every_help_text_renders_with_a_description_and_real_defaults(name):
    parser = SUBCOMMANDS[name]
    text = parser.format_help()
    assert parser.description and len(parser.description) > 30, f"{name} has no description"
    for raw in ("%%", "``", "(default: None)", "default: False"):
        assert raw not in text, f"{name} --help shows {raw!r}"
    for action in parser._actions:
        help_text = (action.help or "") % {"default": action.default, "prog": parser.prog}
        assert help_text.lower().count("default") <= 1, f"{name} {action.option_strings}: default said twice"
        if action.required and action.option_strings:  # required options are not shown as optional
            assert f"[{action.option_strings[0]}" not in parser.format_usage(), (name, action.option_strings)


def test_score_defaults_in_help_are_the_ones_used():
    few = ", ".join(OOD_DEFAULT_SCORES)
    assert f"(default: {few})" in " ".join(SUBCOMMANDS["ksweep"].format_help().split())
    assert f"the --plot figure: {few}" in " ".join(SUBCOMMANDS["selective"].format_help().split())
    assert "every score the records can give" in " ".join(SUBCOMMANDS["ood"].format_help().split())


def test_train_help_marks_what_is_required_and_shows_table_7_defaults():
    text = " ".join(SUBCOMMANDS["train"].format_help().split())
    usage = " ".join(SUBCOMMANDS["train"].format_usage().split())
    assert "--output-dir OUTPUT_DIR" in usage and "[--output-dir" not in usage
    # each option's declared constraint (TrainConfig's Params) is said before its default
    assert "peak learning rate; a finite number > 0 (default: 5e-05)" in text
    assert "LoRA rank; an integer >= 1 (default: 8)" in text
    # a default help would otherwise hide: 0 (0 == False), a --x/--no-x flag's False, a help that says "saved"
    assert "an integer >= 1 (default: 20)" in text and "a finite number >= 0 (default: 0.0)" in text
    assert "on A100) (default: --no-bf16)" in text and "(default: --group-by-length)" in text
    assert "arXiv:2605.06382" in text


@pytest.mark.parametrize("name", ["ood", "report", "conformal", "temperature", "permutations", "compare", "laplace"])
def test_a_seed_option_shows_its_default_of_0(name):
    """0 == False, so a rule that skipped "no default" values by equality used to hide every seed's default."""
    text = " ".join(SUBCOMMANDS[name].format_help().split())
    seed = next(a for a in SUBCOMMANDS[name]._actions if "--seed" in a.option_strings)
    assert seed.default == 0 and text.count("(default: 0)") == 1, text


# ---- third-party noise


def test_the_peft_deprecation_warning_is_silenced_locally_and_only_it():
    from lm_eval_evidential.modeling.quiet import peft_wrapping

    before = list(warnings.filters)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with peft_wrapping():
            warnings.warn("`is_gradient_checkpointing` is deprecated and will be removed in v6.", FutureWarning)
            warnings.warn("something else", FutureWarning)
        warnings.warn("`is_gradient_checkpointing` is deprecated and will be removed in v6.", FutureWarning)
    assert [str(w.message)[:14] for w in caught] == ["something else", "`is_gradient_c"]
    assert warnings.filters == before


def test_loading_an_adapter_prints_no_future_warning(tiny_model, tiny_adapter):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from lm_eval_evidential.modeling.quiet import peft_wrapping

    base = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with peft_wrapping():
            PeftModel.from_pretrained(base, tiny_adapter)
    assert not [w for w in caught if "is_gradient_checkpointing" in str(w.message)]


def _pass_through(chunks: list[bytes], pause: float = 0.05):
    """Feed ``chunks`` through the demo's live filter over a real pipe; returns (output, seen-before-close)."""
    from lm_eval_evidential.cli.demo import pass_through

    class Sink:
        def __init__(self):
            self.data, self.lock = b"", threading.Lock()

        def write(self, b):
            with self.lock:
                self.data += b

        def flush(self):
            pass

    read_fd, write_fd = os.pipe()
    sink = Sink()
    worker = threading.Thread(target=pass_through, args=(read_fd, sink))
    worker.start()
    for chunk in chunks:
        os.write(write_fd, chunk)
        time.sleep(pause)
    seen = sink.data
    os.close(write_fd)
    worker.join(timeout=60)
    os.close(read_fd)
    return sink.data, seen


def test_demo_streams_the_harness_output_live_without_gits_complaint():
    chunks = [
        b"INFO Building contexts\n",
        b"fatal: not a ",
        b"git repository (or any of the parent directories): .git\n",
        b"\r 50%|#####",
        b"     |",
        b"\r100%|##########|\n",
        b"Saving results\n",
        b"progress 7%",
    ]
    out, seen = _pass_through(chunks)
    assert out == b"INFO Building contexts\n\r 50%|#####     |\r100%|##########|\nSaving results\nprogress 7%"
    assert seen.endswith(b"progress 7%")  # a progress bar shows before its line ends
    assert b"fatal" not in out
    # A noise line split anywhere still goes; a line that merely mentions it stays.
    out, _ = _pass_through([b"f", b"atal: not a git repository\n", b"note: fatal: not a git repository\n"], pause=0.02)
    assert out == b"note: fatal: not a git repository\n"


def test_signed_numbers_never_print_as_minus_zero():
    from lm_eval_evidential.audits.ood import _signed
    from lm_eval_evidential.cli.printing import format_table
    from lm_eval_evidential.report.format import format_number as _num

    assert _num(-1e-17, signed=True) == "+0.000" and _num(-0.0004) == "0.000" and _num(-0.0006) == "-0.001"
    assert _signed(-3e-12) == "+0.0000" and _signed(-0.5) == "-0.5000"
    assert "-0.0000" not in format_table([{"d": -2e-16}], ["d"]) and "0.0000" in format_table([{"d": -2e-16}], ["d"])


def test_which_run_was_read_is_said_truthfully(tmp_path, capsys):
    import numpy as np

    from lm_eval_evidential.records import Records, make_record, records_path, write_records
    from lm_eval_evidential.records.loading import load_run

    def recs(task):
        rows = [
            make_record(
                task=task, doc_id=i, labels=list("ABCD"), gold=0, logits=np.arange(4.0), alpha=np.arange(4.0) + 1
            )
            for i in range(3)
        ]
        return Records.from_rows(rows, task=task, meta={"method": "ib_edl", "prior_weight": 1.0})

    old, new, newest = "2026-01-01T00-00-00.000001", "2026-02-01T00-00-00.000001", "2026-03-01T00-00-00.000001"
    for date, tasks in ((old, ("a", "b")), (new, ("a",)), (newest, ("a",))):
        for task in tasks:
            write_records(records_path(tmp_path / "m", task, date), recs(task))
    assert load_run(tmp_path, ["a", "b"]).describe() == (
        f"using run {old} for a, b (the only one of the 3 runs here with records for all of them)"
    )
    assert (
        load_run(tmp_path, ["a"])
        .describe()
        .startswith(f"using run {newest} for a (the newest of the 3 runs here with records for all of them;")
    )


# ---- progress bars written to a file


def test_progress_options_slow_our_bars_down_only_off_a_terminal(monkeypatch):
    import io

    from lm_eval_evidential.modeling.quiet import LOG_PROGRESS_INTERVAL, progress_options

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.delenv("TQDM_MININTERVAL", raising=False)
    assert progress_options(io.StringIO()) == {"mininterval": LOG_PROGRESS_INTERVAL}
    assert progress_options(Terminal()) == {}
    monkeypatch.setenv("TQDM_MININTERVAL", "5")  # tqdm's own setting wins
    assert progress_options(io.StringIO()) == {}


def test_the_evidential_bar_in_a_log_file_is_one_line_per_interval(tiny_model, monkeypatch):
    """60 prompts, one per (fake) second, into a file: tqdm's default (an update every 0.1 s) would write
    60 lines; ours writes one per LOG_PROGRESS_INTERVAL (30 s), plus the first and the last."""
    import io
    import itertools
    import sys

    import torch
    import tqdm.std

    from lm_eval_evidential.harness.model import EvidentialLM

    monkeypatch.delenv("TQDM_MININTERVAL", raising=False)
    lm = EvidentialLM(pretrained=str(tiny_model), device="cpu", batch_size=1)
    clock = itertools.count(1000.0, 1.0)
    monkeypatch.setattr(tqdm.std, "time", lambda: next(clock))
    monkeypatch.setattr(tqdm.std.tqdm, "monitor_interval", 0)
    log = io.StringIO()
    monkeypatch.setattr(sys, "stderr", log)
    prompts = [[5, 6, 7 + i] for i in range(60)]
    lm.last_logits_at(prompts, torch.tensor([[10, 11]] * len(prompts)), False)
    redraws = [line for line in log.getvalue().replace("\r", "\n").splitlines() if "evidential: prompts" in line]
    assert redraws[-1].startswith("evidential: prompts: 100%")
    assert 2 <= len(redraws) <= 5, redraws
