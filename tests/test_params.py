"""The constraint machinery (lm_eval_evidential/params.py): what each constraint admits, against
the comparisons written out; the refusal's words; validate_params at a function's boundary."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.params import (
    Integral,
    Interval,
    Options,
    Param,
    Real,
    check_fields,
    declared_params,
    param_field,
    validate_params,
)

ENDS = st.one_of(st.none(), st.integers(-5, 5))
CLOSED = st.sampled_from(["both", "left", "right", "neither"])
VALUES = st.one_of(st.integers(-8, 8), st.floats(), st.booleans(), st.text(max_size=2))


@given(kind=st.sampled_from([Integral, Real]), low=ENDS, high=ENDS, closed=CLOSED, value=VALUES)
def test_an_interval_admits_exactly_what_its_comparisons_admit(kind, low, high, closed, value):
    numeric = not isinstance(value, (bool, str)) and (isinstance(value, int) or kind is Real)
    expected = numeric and (kind is Integral or math.isfinite(value))
    if expected and low is not None:
        expected = value >= low if closed in ("both", "left") else value > low
    if expected and high is not None:
        expected = value <= high if closed in ("both", "right") else value < high
    assert Interval(kind, low, high, closed).accepts(value) is bool(expected)


def test_numpy_scalars_are_numbers_and_bools_are_not():
    assert Interval(Integral, 0, 3).accepts(np.int64(2)) and Interval(Real, 0, 1).accepts(np.float32(0.5))
    assert not Interval(Integral, 0, 3).accepts(True) and not Interval(Real).accepts(np.nan)
    assert not Interval(Integral).accepts(2.0)  # a float is not an integer, even a whole one
    assert Options((0,)).accepts(0) and Options((0,)).accepts(np.int64(0)) and not Options(("a",)).accepts(["a"])
    zero = Options((0,))
    assert not zero.accepts(False) and not zero.accepts(0.0) and not zero.accepts(np.zeros(1))


@pytest.mark.parametrize(
    "constraint, words",
    [
        (Interval(Integral, 1, 10_000), "an integer in 1..10000"),
        (Interval(Integral, 1), "an integer >= 1"),
        (Interval(Real, 0, None, closed="neither"), "a finite number > 0"),
        (Interval(Real, 0, 1, closed="neither"), "a finite number in (0, 1)"),
        (Interval(Real, None, 1, closed="neither"), "a finite number < 1"),
        (Interval(Integral), "an integer"),
        (Options(("lac", "aps")), "one of lac, aps"),
    ],
)
def test_each_constraint_says_what_it_admits(constraint, words):
    assert str(constraint) == words


def test_a_refusal_names_the_parameter_the_value_what_it_must_be_why_and_an_example():
    n_boot = Param(Options((0,)), Interval(Integral, 2, 9), why="bootstrap replicates", example="n_boot=0")
    assert n_boot.check("n_boot", 5) == 5 and n_boot.check("n_boot", 0) == 0
    with pytest.raises(InvalidValueError, match=r"^n_boot=1 must be one of 0 or an integer in 2\.\.9 \(bootstrap "):
        n_boot.check("n_boot", 1)
    assert Param(Options(("lac",)), noun="conformal method").message("method", "x") == (
        "unknown conformal method 'x'; choose one of lac"
    )
    assert Param(Options(("lac",))).message("method", "x") == "unknown method='x'; choose one of lac"
    at_least_two = Param(None, Interval(Integral, 2), must="None or a count >= 2")
    assert at_least_two.message("k", 1) == "k=1 must be None or a count >= 2"
    assert Param(None, Interval(Integral, 2)).allows(None)


def test_validate_params_checks_every_declared_argument_defaults_included():
    @validate_params({"level": Param(Interval(Real, 0, 1, closed="neither")), "n": Param(Interval(Integral, 1))})
    def f(x, *, level=0.95, n=0):
        return x, level, n

    with pytest.raises(InvalidValueError, match=r"^n=0 must be an integer >= 1"):
        f(1)  # the default itself is checked: a wrong default is found on the first call
    assert f(1, level=0.5, n=2) == (1, 0.5, 2)
    with pytest.raises(InvalidValueError, match=r"^level=1 must be a finite number in \(0, 1\)"):
        f(1, level=1, n=2)
    assert f.__name__ == "f" and set(f.params) == {"level", "n"}


def test_a_declaration_naming_an_argument_the_function_lacks_is_refused_on_import():
    with pytest.raises(TypeError, match=r"declares parameters it does not take: \['levle'\]"):
        validate_params({"levle": Param(Interval(Real))})(lambda level: level)


def test_a_dataclass_declares_its_fields_constraints_in_their_metadata():
    @dataclass(frozen=True)
    class Settings:
        rate: float = param_field(0.1, help="a rate", param=Param(Interval(Real, 0, 1)))
        name: str = param_field("a", help="not checked")

        def __post_init__(self):
            check_fields(self)

    assert list(declared_params(Settings)) == ["rate"]
    assert Settings(rate=1).rate == 1
    with pytest.raises(InvalidValueError, match=r"^rate=2 must be a finite number in \[0, 1\]"):
        Settings(rate=2)
