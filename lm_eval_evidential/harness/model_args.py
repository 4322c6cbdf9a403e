"""The backends' own ``--model_args``: the head's and the scoring's options, declared once, parsed and checked.

Each option's accepted values are a :class:`~lm_eval_evidential.params.Param`; a value given as text or a
float is parsed as lm_eval's parser leaves it (:func:`model_arg`), and a bad one is refused in one line
naming it and an example (:class:`~lm_eval_evidential.errors.EvidentialInputError`). The head's settings
may also come from an IB-EDL reference run's config beside the adapter (:func:`reference_head_settings`).
"""

from __future__ import annotations

import dataclasses
import logging
import typing
from pathlib import Path

from lm_eval_evidential.errors import EvidentialInputError, InvalidValueError
from lm_eval_evidential.modeling.config import MAX_MEMBERS, HeadConfig
from lm_eval_evidential.modeling.encoding import PHANTOM_COUNT
from lm_eval_evidential.modeling.laplace import WEIGHT_SAMPLE_RANGE
from lm_eval_evidential.params import Integral, Interval, Param, declared_params

logger = logging.getLogger(__name__)


def said(name: str, value, *, cli: bool = False) -> str:
    """A setting as the user typed it, for a refusal: ``pretrained=X`` in --model_args, ``--pretrained X`` as a
    command's option (``cli``: ``lm-eval-evidential laplace``)."""
    return f"--{name.replace('_', '-')} {value}" if cli else f"{name}={value}"


#: The words for each type a head setting may have, as a refusal of a --model_args string says them.
_TYPE_WORDS = {int: "an integer", float: "a number", str: "a name"}


def _head_arg_types() -> dict[str, type]:
    """Each field of :class:`HeadConfig` with the type its --model_args string is parsed as (its annotation)."""
    hints = typing.get_type_hints(HeadConfig)
    types = {f.name: hints[f.name] for f in dataclasses.fields(HeadConfig)}
    odd = {name: kind for name, kind in types.items() if kind not in _TYPE_WORDS}
    if odd:  # a new head field of another type needs its parsing here first
        raise TypeError(f"HeadConfig fields of a type --model_args cannot parse: {odd}")
    return types


#: --model_args of the head: the fields of :class:`HeadConfig`, each with the type it is parsed as.
HEAD_ARGS = _head_arg_types()


#: The scoring's --model_args besides the head's, every backend's: name -> (default, its declared Param).
#: ``EvidentialScoring.init_scoring`` sets each as an attribute of the model; a new one is one line here.
SCORING_OPTIONS = {
    "phantom_count": (
        PHANTOM_COUNT,
        Param(
            Interval(Integral, 0, 26),
            must="a whole number from 0 to 26",
            why=f"the labels after a question's last one whose logits the records keep; default {PHANTOM_COUNT}",
            example="phantom_count=4",
        ),
    ),
    "mc_samples": (  # MC dropout passes (harness/members.py)
        None,
        Param(
            None,
            Interval(Integral, 2, MAX_MEMBERS),
            must=f"an integer number of passes from 2 to {MAX_MEMBERS}",
            why="MC dropout, one forward pass of every question each; drop mc_samples for one deterministic pass",
            example="mc_samples=10",
        ),
    ),
    "laplace_samples": (  # Laplace-LoRA weight samples (harness/members.py)
        None,
        Param(
            None,
            WEIGHT_SAMPLE_RANGE,
            must=f"an integer number of weight samples from {WEIGHT_SAMPLE_RANGE.low} to {WEIGHT_SAMPLE_RANGE.high}",
            why="a Laplace posterior, one forward pass of every question each; drop laplace_samples for the number "
            "saved with it",
            example="laplace_samples=10",
        ),
    ),
}


def model_arg(name: str, value, param: Param):
    """--model_args ``name`` checked against its declared ``param``: a whole number given as text or a float
    (lm_eval's parser gives ``4``, ``2.0``, ``2.5`` or ``'two'``) is taken as an int."""
    if not isinstance(value, (bool, type(None))):
        try:
            number = float(value)
            value = int(number) if number.is_integer() else value
        except (TypeError, ValueError, OverflowError):
            pass  # not a number: the Param names it
    if not param.allows(value):
        raise EvidentialInputError(param.message(name, value))
    return value


def scoring_option(name: str, value):
    """The scoring's option ``name`` from --model_args, checked as :func:`model_arg` against its declared Param."""
    return model_arg(name, value, SCORING_OPTIONS[name][1])


#: The --model_args every backend takes for the scoring (harness/scoring.EvidentialScoring.init_scoring).
SCORING_ARGS = (*HEAD_ARGS, *SCORING_OPTIONS)


def head_config(settings: dict) -> HeadConfig:
    """The head from ``settings`` (strings or numbers from --model_args or an adapter's metadata),
    each bad value named with an example; HeadConfig's own range checks as EvidentialInputError."""
    params = declared_params(HeadConfig)
    typed = {}
    for name, value in settings.items():
        cast = HEAD_ARGS[name]
        try:
            number = float(value) if cast is int and not isinstance(value, bool) else None
            if number is not None and not number.is_integer():
                raise ValueError(value)
            typed[name] = cast(number if number is not None else value)
        except (TypeError, ValueError, OverflowError):
            raise EvidentialInputError(
                f"{name}={value!r} in --model_args is not {_TYPE_WORDS[cast]}; e.g. {params[name].example}"
            ) from None
    try:
        return HeadConfig(**typed)
    except ValueError as exc:
        raise EvidentialInputError(f"--model_args: {exc}") from None


def unknown_arg_error(exc: TypeError) -> Exception:
    """A model_arg that nothing on the way to the model's constructor knows, named with the nearest known one."""
    import difflib
    import inspect
    import re

    from lm_eval.models.huggingface import HFLM

    found = re.search(r"unexpected keyword argument '([^']+)'", str(exc))
    if not found:
        return exc
    known = (set(inspect.signature(HFLM.__init__).parameters) | set(SCORING_ARGS) | {"prefix_cache", "threads"}) - {
        "self",
        "kwargs",
    }
    near = difflib.get_close_matches(found[1], sorted(known), n=1)
    hint = f"did you mean {near[0]}=? Check" if near else "check"
    return EvidentialInputError(
        f"--model_args: unknown argument {found[1]!r} (passed on to the model's from_pretrained, which does not "
        "take it); "
        f"{hint} its spelling against the arguments of --model evidential and --model hf"
    )


#: The largest YAML file beside an adapter read as a possible IB-EDL run config (theirs are a few KiB).
REFERENCE_CONFIG_MAX_BYTES = 1 << 20


def reference_head_settings(adapter_dir) -> dict | None:
    """Head settings of a checkpoint written by the IB-EDL reference code (Li et al. 2025), else None.

    Its ``tools/evidential_ft.py`` (``baseline_ft.py`` for the softmax baseline) trains with
    transformers' Trainer in a work dir: the adapters are ordinary PEFT folders
    ``<work_dir>/checkpoint-N``, and the run's config is dumped beside them as
    ``<config name>_<timestamp>.yaml``. That config names the method: a ``vib`` section is
    IB-EDL (``num_noises``, ``sigma_mult``), ``edl_loss_cfg`` without it standard EDL, neither
    the softmax (MAP) baseline. Several dumped configs that disagree are an error.
    """
    import yaml

    if adapter_dir is None or not (Path(str(adapter_dir)) / "adapter_config.json").is_file():
        return None
    found: dict[str, dict] = {}
    from lm_eval_evidential.errors import InputFileError
    from lm_eval_evidential.files import read_regular_file

    for path in sorted(Path(str(adapter_dir)).resolve().parent.glob("*.yaml")):
        try:  # only regular files, and no more than a run config can be: a FIFO or a huge file never blocks
            cfg = yaml.safe_load(read_regular_file(path, what="YAML file", max_bytes=REFERENCE_CONFIG_MAX_BYTES))
        except InputFileError as exc:
            logger.warning("skipped %s while looking for the IB-EDL run config beside the adapter: %s", path.name, exc)
            continue
        except (OSError, UnicodeDecodeError, RecursionError, yaml.YAMLError):
            continue
        if not (isinstance(cfg, dict) and isinstance(cfg.get("model"), dict) and "train_cfg" in cfg):
            continue  # not a reference run config
        vib = cfg.get("vib")
        if isinstance(vib, dict):  # a setting the run config leaves out: the head's own default
            settings = {
                "method": "ib_edl",
                "num_noises": int(vib.get("num_noises", HeadConfig.num_noises)),
                "sigma_mult": float(vib.get("sigma_mult", HeadConfig.sigma_mult) or 0.0),
            }
        else:
            settings = {"method": "edl" if "edl_loss_cfg" in cfg else "softmax"}
        found[path.name] = settings
    if not found:
        return None
    if len({tuple(sorted(v.items())) for v in found.values()}) > 1:
        raise InvalidValueError(
            f"peft={adapter_dir}: the IB-EDL run configs beside it disagree ({found}); pass method= (and "
            "num_noises=, sigma_mult=) in --model_args"
        )
    return next(iter(found.values()))
