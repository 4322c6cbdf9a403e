"""Parameters declared once: each one's constraint, in words, checked at the boundary that takes it.

As scikit-learn's ``utils/_param_validation.py`` does for its estimators and functions, a
parameter's accepted values are declared once, as data (:class:`Param`, built of
:class:`Interval` and :class:`Options`), and checked where a value enters the package: by
:func:`validate_params` around a public function, by :func:`check_fields` in a settings
dataclass whose fields carry their :class:`Param` in ``field(metadata=…)`` (as peft's
``LoraConfig`` carries each field's help), or by :meth:`Param.check` where a command takes an
option before any work. The refusal is one line that names the parameter, the value and what
it must be (:class:`~lm_eval_evidential.errors.InvalidValueError`), with the same words
wherever the parameter is taken, because they are written once.

Integers are :class:`numbers.Integral` and numbers :class:`numbers.Real` (numpy's scalars
included), never a ``bool``. This module imports nothing but the standard library and
``errors``, so every layer may declare its parameters with it.

Examples
--------
>>> N_BINS = Param(Interval(Integral, 1, 100))
>>> N_BINS.check("n_bins", 10)
10
>>> N_BINS.check("n_bins", 0)
Traceback (most recent call last):
...
lm_eval_evidential.errors.InvalidValueError: n_bins=0 must be an integer in 1..100
>>> @validate_params({"level": Param(Interval(Real, 0, 1, closed="neither"), example="0.95")})
... def interval(level=0.95):
...     return level
>>> interval(level=1.5)
Traceback (most recent call last):
...
lm_eval_evidential.errors.InvalidValueError: level=1.5 must be a finite number in (0, 1); e.g. 0.95
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

from lm_eval_evidential.errors import InvalidValueError

__all__ = [
    "Integral",
    "Real",
    "Interval",
    "Options",
    "Param",
    "validate_params",
    "check_fields",
    "param_field",
    "declared_params",
]


@dataclass(frozen=True)
class Interval:
    """The integers (``kind=Integral``) or finite numbers (``kind=Real``) between ``low`` and ``high``
    (None: unbounded on that side); ``closed`` says which ends belong: both, left, right or neither."""

    kind: type
    low: float | None = None
    high: float | None = None
    closed: str = "both"

    def __post_init__(self):
        if self.kind not in (Integral, Real) or self.closed not in ("both", "left", "right", "neither"):
            raise TypeError(
                f"Interval({self.kind!r}, closed={self.closed!r}): kind Integral or Real, closed both, left, right "
                "or neither"
            )

    def accepts(self, value) -> bool:
        if isinstance(value, bool) or not isinstance(value, self.kind):
            return False
        if self.kind is Real and not math.isfinite(value):
            return False
        left, right = self.closed in ("both", "left"), self.closed in ("both", "right")
        if self.low is not None and not (value >= self.low if left else value > self.low):
            return False
        return self.high is None or (value <= self.high if right else value < self.high)

    def __str__(self) -> str:
        noun = "an integer" if self.kind is Integral else "a finite number"
        left, right = self.closed in ("both", "left"), self.closed in ("both", "right")
        if self.low is not None and self.high is not None:
            if self.kind is Integral and left and right:
                return f"{noun} in {self.low}..{self.high}"
            return f"{noun} in {'[' if left else '('}{self.low}, {self.high}{']' if right else ')'}"
        if self.low is not None:
            return f"{noun} {'>=' if left else '>'} {self.low}"
        if self.high is not None:
            return f"{noun} {'<=' if right else '<'} {self.high}"
        return noun


@dataclass(frozen=True)
class Options:
    """One of a fixed set of values (names, or a few numbers such as 0)."""

    choices: tuple

    def accepts(self, value) -> bool:
        """Equal to a choice and of its kind: 0 admits ``numpy.int64(0)``, never ``0.0`` or ``False``."""
        for choice in self.choices:
            kind = Integral if isinstance(choice, Integral) and not isinstance(choice, bool) else type(choice)
            if isinstance(value, kind) and isinstance(value, bool) == isinstance(choice, bool) and value == choice:
                return True
        return False

    def __str__(self) -> str:
        return "one of " + ", ".join(str(c) for c in self.choices)


@dataclass(frozen=True)
class Param:
    """A parameter's accepted values, declared once, and the words its refusal uses.

    ``accepts``: constraints, any of which admits a value (None in it admits None). ``must``: what
    a value must be, in words, when the constraints' own (joined by "or") read less well;
    ``why``: what the parameter is, said in brackets after; ``example``: a good value, said last.
    ``noun``: for a choice among names, what they are ("conformal method"), so a refusal reads
    "unknown conformal method 'x'; choose one of …".
    """

    accepts: tuple
    must: str = ""
    why: str = ""
    example: str = ""
    noun: str = ""

    def __init__(self, *accepts, must: str = "", why: str = "", example: str = "", noun: str = ""):
        for name, value in zip(("accepts", "must", "why", "example", "noun"), (accepts, must, why, example, noun)):
            object.__setattr__(self, name, value)

    def allows(self, value) -> bool:
        return any(value is None if c is None else c.accepts(value) for c in self.accepts)

    def words(self) -> str:
        """What a value must be, in words."""
        return self.must or " or ".join("None" if c is None else str(c) for c in self.accepts)

    def message(self, name: str, value) -> str:
        """The one line refusing ``value`` for the parameter ``name``."""
        choice = [c for c in self.accepts if c is not None]
        if not self.must and len(choice) == 1 and isinstance(choice[0], Options) and isinstance(value, str):
            said = f"unknown {self.noun} {value!r}" if self.noun else f"unknown {name}={value!r}"
            text = f"{said}; choose one of {', '.join(map(str, choice[0].choices))}"
        else:
            text = f"{name}={value!r} must be {self.words()}"
        if self.why:
            text += f" ({self.why})"
        return text + (f"; e.g. {self.example}" if self.example else "")

    def check(self, name: str, value):
        """``value`` if this parameter accepts it, else :class:`InvalidValueError` with :meth:`message`."""
        if not self.allows(value):
            raise InvalidValueError(self.message(name, value))
        return value


def validate_params(params: dict[str, Param]) -> Callable:
    """Decorate a function whose arguments ``params`` declares: each is checked on every call
    (defaults included) before the body runs. The declaration stays readable as ``fn.params``.

    A name in ``params`` that the function does not take is a bug in the declaration, found when
    the module is imported.
    """

    def decorate(fn):
        signature = inspect.signature(fn)
        unknown = set(params) - set(signature.parameters)
        if unknown:
            raise TypeError(f"{fn.__qualname__} declares parameters it does not take: {sorted(unknown)}")

        @functools.wraps(fn)
        def checked(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            for name, param in params.items():
                param.check(name, bound.arguments[name])
            return fn(*args, **kwargs)

        checked.params = params
        return checked

    return decorate


def param_field(default: Any, *, help: str, param: Param | None = None, **metadata) -> Any:
    """A dataclass field with its help and its :class:`Param` in ``metadata`` (peft's LoraConfig style)."""
    return dataclasses.field(default=default, metadata={"help": help, "param": param, **metadata})


def declared_params(cls) -> dict[str, Param]:
    """The :class:`Param` of each field of the dataclass ``cls`` that declares one, in field order."""
    return {f.name: f.metadata["param"] for f in dataclasses.fields(cls) if f.metadata.get("param") is not None}


def check_fields(instance) -> None:
    """Check each field of a dataclass instance against its declared :class:`Param` (in ``__post_init__``)."""
    for name, param in declared_params(type(instance)).items():
        param.check(name, getattr(instance, name))
