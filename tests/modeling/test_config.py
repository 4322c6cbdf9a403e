"""HeadConfig is the one declaration of the head's settings: every field is a ``--model_args``
argument of every backend, listed by ``lm-eval-evidential eval --help`` and in docs/usage.md,
constrained by its own ``param``. The tests walk the dataclass's fields, never a list of names,
so a field added to HeadConfig and missing anywhere fails here."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import torch

from lm_eval_evidential.errors import EvidentialInputError, InvalidValueError
from lm_eval_evidential.harness.model_args import SCORING_ARGS, head_config
from lm_eval_evidential.harness.scoring import EvidentialScoring
from lm_eval_evidential.modeling.config import HEAD_KEYS, HeadConfig
from lm_eval_evidential.params import Interval, Options, Param

FIELDS = dataclasses.fields(HeadConfig)
USAGE = Path(__file__).resolve().parents[2] / "docs" / "usage.md"


def other_value(field: dataclasses.Field):
    """A value the field's constraint accepts that is not its default, read off the declaration."""
    (constraint,) = field.metadata["param"].accepts
    if isinstance(constraint, Options):
        return next(c for c in constraint.choices if c != field.default)
    assert isinstance(constraint, Interval), f"{field.name}: teach other_value its constraint"
    return field.default + (1 if isinstance(field.default, int) else 0.5)


class Scoring(EvidentialScoring):
    """The scoring both backends inherit (tests/harness/test_scoring.py), without a model."""

    def last_logits_at(self, prompts, ids, disable_tqdm=False):
        raise AssertionError("no forward here")

    def records_dtype(self):
        return "float32"


def test_every_field_declares_help_a_constraint_and_whether_it_is_stored():
    for field in FIELDS:
        assert isinstance(field.metadata["param"], Param) and field.metadata["help"], field.name
        assert isinstance(field.metadata["stored"], bool), field.name
        assert field.metadata["param"].allows(field.default), field.name
        assert field.metadata["param"].example.startswith(f"{field.name}="), field.name
    assert set(HEAD_KEYS) == {f.name for f in FIELDS if f.metadata["stored"]} and "seed" not in HEAD_KEYS


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
def test_every_field_is_a_model_arg_the_backends_take_from_a_string(field):
    value = other_value(field)
    model_args = {field.name: str(value), "pretrained_only_arg": 1}
    scoring = Scoring()
    scoring.init_scoring(model_args, pretrained="unused", peft=None, revision="main")
    assert getattr(scoring.head, field.name) == value
    assert model_args == {"pretrained_only_arg": 1}  # taken out: never passed on to from_pretrained
    assert field.name in SCORING_ARGS  # so a misspelling of it is answered with its name


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
def test_every_field_is_listed_with_its_default_by_the_cli_and_the_usage_docs(field):
    from lm_eval_evidential.cli.eval import help_preamble

    text = " ".join(help_preamble().split())
    (constraint,) = field.metadata["param"].accepts
    shown = "|".join(constraint.choices) if isinstance(constraint, Options) else field.default
    said = " ".join(field.metadata["help"].split()) + (f"; default {field.default}" if field.default != shown else "")
    assert f"{field.name}={shown}" in text and said in text
    default = f"{field.default:g}" if isinstance(field.default, float) else str(field.default)
    assert re.search(rf"^\| `{field.name}` \| `?{re.escape(default)}`? \|", USAGE.read_text(), re.M), field.name


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
def test_every_field_refuses_a_bad_value_by_its_declared_words(field):
    bad = "nope" if isinstance(field.default, str) else float("-inf")
    with pytest.raises(InvalidValueError) as raised:
        HeadConfig(**{field.name: bad})
    assert str(raised.value) == field.metadata["param"].message(field.name, bad)
    with pytest.raises(EvidentialInputError, match=rf"{field.name}=(-inf|'nope')"):
        head_config({field.name: bad})


def test_the_head_words_users_read():
    with pytest.raises(InvalidValueError, match=r"^unknown method='edll'; choose one of edl, ib_edl, softmax; "):
        HeadConfig(method="edll")
    with pytest.raises(InvalidValueError, match=r"^prior_weight=inf must be a finite number > 0 \(the Dirichlet"):
        HeadConfig(prior_weight=float("inf"))
    with pytest.raises(EvidentialInputError, match=r"num_noises=2\.5 in --model_args is not an integer; e\.g\. "):
        head_config({"num_noises": 2.5})  # lm_eval parses "2.5" into a float
    with pytest.raises(InvalidValueError, match=r"num_noises=True must be an integer >= 1"):
        HeadConfig(num_noises=True)
    assert HeadConfig(num_noises=torch.tensor(3).item()).num_noises == 3
