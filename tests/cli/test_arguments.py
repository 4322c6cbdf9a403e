"""The audit commands' numeric options and name choices come from the parameters' one declaration
(lm_eval_evidential.params): an option refuses exactly what the function it feeds refuses, in the same words,
says the constraint in its help, and a choice lists the declared names."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from lm_eval_evidential.audits.conformal import CALIBRATION_FRACTION
from lm_eval_evidential.audits.ood_groups import FPR95
from lm_eval_evidential.audits.ood_scores import FORCE_K
from lm_eval_evidential.cli.arguments import add_param, param_type
from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.metrics.calibration import N_BINS, ece
from lm_eval_evidential.metrics.conformal import ALPHA
from lm_eval_evidential.metrics.intervals import N_BOOT, SEED
from lm_eval_evidential.metrics.selective import COVERAGE, risk_at_coverage


def _refusal(option_type, text: str) -> str | None:
    try:
        option_type(text)
    except argparse.ArgumentTypeError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize(
    "name, param, accepted, refused",
    [
        ("n_bins", N_BINS, {"1": 1, "15": 15, "10000": 10000}, {"0": 0, "10001": 10001, "1.5": "1.5", "many": "many"}),
        ("n_boot", N_BOOT, {"0": 0, "2": 2, "100000": 100000}, {"1": 1, "-1": -1, "100001": 100001, "2.0": "2.0"}),
        ("seed", SEED, {"0": 0, "7": 7}, {"-3": -3, "0.5": "0.5", "s": "s"}),
        (
            "alpha",
            ALPHA,
            {"0.1": 0.1, "0.999": 0.999},
            {"0": 0.0, "1": 1.0, "nan": float("nan"), "inf": np.inf, "a": "a"},
        ),
        ("coverage", COVERAGE, {"1": 1.0, "0.5": 0.5}, {"0": 0.0, "1.01": 1.01}),
        ("calibration_fraction", CALIBRATION_FRACTION, {"0.5": 0.5}, {"0": 0.0, "1": 1.0, "2": 2.0}),
        ("force_k", FORCE_K, {"5": 5, "1": 1}, {"0": 0, "-2": -2, "4.0": "4.0"}),
    ],
)
def test_an_option_accepts_and_refuses_what_its_parameter_does_in_its_words(name, param, accepted, refused):
    """Integers stay integers (an integer-only parameter reads no "1.5"); a refusal is the declaration's own line
    for the value read (the text itself where it is no number of the parameter's kind)."""
    parse = param_type(name, param)
    for text, value in accepted.items():
        got = parse(text)
        assert got == value and type(got) is type(value), (text, got)
    for text, value in refused.items():
        assert not param.allows(value)
        said = _refusal(parse, text)
        assert said == param.message(name, value), (text, said)
        assert "\n" not in said and param.words() in said


def test_the_cli_and_a_python_caller_refuse_with_the_same_line():
    """``calibration --bins 0`` and ``ece(..., n_bins=0)`` say the same thing."""
    with pytest.raises(InvalidValueError) as python:
        ece(np.array([0.9, 0.2]), np.array([1, 0]), n_bins=0)
    assert _refusal(param_type("n_bins", N_BINS), "0") == str(python.value)
    with pytest.raises(InvalidValueError) as python:
        risk_at_coverage([0.9, 0.2], [1, 0], 1.5)
    assert _refusal(param_type("coverage", COVERAGE), "1.5") == str(python.value)


def test_add_param_lists_declared_names_as_choices_and_says_a_range_in_the_help(capsys):
    parser = argparse.ArgumentParser(prog="p")
    add_param(parser, "--fpr95", FPR95, default="openood", help="direction")
    add_param(parser, "--n-boot", N_BOOT, default=1000, help="replicates")
    assert parser.parse_args(["--fpr95", "odin", "--n-boot", "0"]) == argparse.Namespace(fpr95="odin", n_boot=0)
    text = parser.format_help()
    assert "{openood,odin}" in text and "0 (no interval) or an integer in 2..100000" in " ".join(text.split())
    with pytest.raises(SystemExit):
        parser.parse_args(["--n-boot", "1"])
    assert "argument --n-boot: n_boot=1 must be 0 (no interval) or an integer in 2..100000" in capsys.readouterr().err
