"""``lm-eval-evidential eval …``: the stock lm_eval CLI with this package's hook installed.

The ``.pth`` hook already makes plain ``lm_eval`` work; this entry exists for environments
that skip ``.pth`` files (``python -S``, some launchers) and for ``accelerate launch -m
lm_eval_evidential eval …``. It differs from plain ``lm_eval`` in three ways: a ``--model
evidential`` run without ``--output_path`` is refused before any weights load (its records,
the files every audit reads, would not be written; ``--no_output_path`` runs it anyway),
expected failures are one line (a mistyped task with the nearest names), and ``--help`` says
what ``--model evidential`` is before the stock help.
"""

from __future__ import annotations

import itertools

HELP_PREAMBLE = """\
lm-eval-evidential eval: the stock lm_eval CLI with this package's plugin; every argument is lm_eval's,
and lm_eval's own help follows.

--model evidential   a causal LM (plus an optional PEFT adapter) read as a K-class evidential classifier:
                     the answer letters' logits become Dirichlet evidence, alpha = evidence + prior_weight.
  --model_args       every argument of lm_eval's hf model (pretrained=, peft=, revision=, dtype=, device=,
                     gguf_file=, …) and the evidential head's (a folder written by `lm-eval-evidential train`
                     as peft= supplies those marked *; each below with its default):
{head_args}
  --tasks            this package's tasks, e.g. obqa_edl, arc_c_edl, arc_e_edl, csqa_edl, csqa4_edl,
                     mmlu_math_edl, K-matched controls *_k4_edl, ID/OOD pairs obqa_edl_vs_<task>
                     (`lm_eval ls tasks` lists every task)
  --output_path DIR  required here: the run's records_<task>_<date_id>.parquet go beside results_*.json,
                     and every audit (ood, ksweep, report, …) reads them from DIR.
                     --no_output_path runs without keeping anything (plain lm_eval only warns)
Offline: EVIDENTIAL_DATA_DIR=DIR reads every dataset from DIR/<hub id>/<config>/<split>.jsonl instead of the hub;
the bundled samples are such a folder: {samples}
(HF_HUB_OFFLINE=1 makes a missing dataset fail at once, without the hub's retries): docs/tasks.md.
The model's arguments and the harness flags in full: docs/usage.md.
"""


def head_args_help(width: int = 110) -> str:
    """The head's --model_args as the help lists them, read off the fields (name, default, help) of
    :class:`~lm_eval_evidential.modeling.config.HeadConfig`: a new field is listed without a word written here."""
    import dataclasses
    import textwrap

    from lm_eval_evidential.modeling.config import HeadConfig
    from lm_eval_evidential.params import Options

    lines = []
    for field in dataclasses.fields(HeadConfig):
        help = field.metadata["help"]
        choices = [c for c in field.metadata["param"].accepts if isinstance(c, Options)]
        if choices:  # a choice among names: all of them, then the default
            shown, help = "|".join(choices[0].choices), f"{help}; default {field.default}"
        else:
            shown = field.default
        name = f"{field.name}={shown}" + ("*" if field.metadata["stored"] else "")
        lines += textwrap.wrap(help, width, initial_indent=f"{'':23}{name:<17} ", subsequent_indent=" " * 41)
    return "\n".join(lines)


def help_preamble() -> str:
    """What ``--model evidential`` is and takes, printed before the stock ``lm_eval run --help``."""
    from lm_eval_evidential.tasks.datasets import BUNDLED_SAMPLES

    return HELP_PREAMBLE.format(samples=BUNDLED_SAMPLES, head_args=head_args_help())


def add_parser(sub) -> None:
    from lm_eval_evidential.integration.run_output import NO_OUTPUT_PATH_FLAG

    p = sub.add_parser(
        "eval",
        help="run the stock lm_eval CLI (all its arguments), e.g. eval --model evidential --tasks obqa_edl "
        "--output_path out",
        description=(
            "The stock lm_eval CLI with this package's plugin installed; every argument after `eval` is lm_eval's "
            "(see `lm-eval-evidential eval --help`). Plain `lm_eval` works the same once the package is installed, "
            f"except that here --model evidential without --output_path is refused ({NO_OUTPUT_PATH_FLAG} allows it)."
        ),
    )
    p.set_defaults(func=lambda args: run_lm_eval([]))


def run_lm_eval(argv: list[str]) -> int:
    """Run the stock CLI. An expected failure (an :class:`~lm_eval_evidential.errors.EvidentialError`:
    bad model_args, a dataset, task or path problem; or the stock CLI's own argument check, such as an
    unknown task) is one ``error:`` line and exit status 1, a K or fingerprint refusal one ``refused:``
    line and 2 (:mod:`lm_eval_evidential.cli.exit_codes`); so is a limit of this process under
    ``--model evidential`` (memory, recursion). Anything else is a bug and keeps its traceback
    (``LM_EVAL_EVIDENTIAL_TRACEBACK=1`` shows it for expected errors too, as for plain ``lm_eval``).

    ``--model evidential`` without ``--output_path`` is refused before any weights load, unless
    ``--no_output_path`` (this command's only own flag, removed before lm_eval parses the rest)."""
    import os
    import sys

    import lm_eval_evidential._import_hook as hook
    from lm_eval_evidential.cli.exit_codes import EXIT_ERROR, EXIT_OK, fail
    from lm_eval_evidential.errors import EvidentialError
    from lm_eval_evidential.integration.error_lines import nearest_task_names, resource_error_text
    from lm_eval_evidential.integration.policy import RUN_POLICY
    from lm_eval_evidential.integration.run_output import NO_OUTPUT_PATH_FLAG
    from lm_eval_evidential.lm_eval_compat import stock_argument_error

    hook.install()
    from lm_eval.__main__ import cli_evaluate

    if any(a in ("-h", "--help") for a in argv):
        print(help_preamble())
        if len(argv) == 1:  # the stock `lm_eval --help` lists subcommands; the arguments are run's
            argv = ["run", *argv]
    allow_no_output = NO_OUTPUT_PATH_FLAG in argv
    argv = [a for a in argv if a != NO_OUTPUT_PATH_FLAG]
    sys.argv = ["lm_eval", *argv]
    with RUN_POLICY.no_output_path_as("allow" if allow_no_output else "refuse"):
        try:
            _check_output_path(argv)
            try:
                cli_evaluate()
            except ValueError as exc:
                said = stock_argument_error(exc, hint=nearest_task_names(exc))
                if said is None:
                    raise
                raise said from exc
        except EvidentialError as exc:  # expected: one line; anything else is a bug and keeps its traceback
            if os.environ.get("LM_EVAL_EVIDENTIAL_TRACEBACK"):
                raise
            return fail("eval", exc)
        except (MemoryError, RecursionError, ImportError) as exc:  # limits of this process: one line for our model
            text = resource_error_text(exc, argv)
            if text is None or os.environ.get("LM_EVAL_EVIDENTIAL_TRACEBACK"):
                raise
            print(f"lm-eval-evidential eval: error: {text}", file=sys.stderr)
            return EXIT_ERROR
    return EXIT_OK


def _option(argv: list[str], *names: str) -> str | None:
    """The value of the first of ``names`` in ``argv`` (``--name value`` or ``--name=value``), else None."""
    given = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a in names), None)
    return next((a.split("=", 1)[1] for a in argv if a.split("=", 1)[0] in names and "=" in a), given)


def _check_output_path(argv: list[str]) -> None:
    """An --output_path nobody can write to is refused before the model loads, not after the evaluation; a
    ``--model evidential`` run without one (and without ``--config``, which may name one) is refused at once,
    before the harness indexes its tasks (``simple_evaluate``'s hook refuses it too, for every other way)."""
    from lm_eval_evidential.files import check_writable_folder
    from lm_eval_evidential.integration.command_line import names_our_model
    from lm_eval_evidential.integration.policy import RUN_POLICY
    from lm_eval_evidential.integration.run_output import no_output_path

    given = _option(argv, "--output_path", "-o")
    if given:
        check_writable_folder(given)
    elif RUN_POLICY.no_output_path == "refuse" and names_our_model(argv) and _option(argv, "--config", "-C") is None:
        no_output_path(_tasks(argv))


def _tasks(argv: list[str]) -> list[str]:
    """The task names after ``--tasks``/``-t`` (comma- or space-separated, as lm_eval takes them), for messages."""
    for i, arg in enumerate(argv):
        name, _, value = arg.partition("=")
        if name in ("--tasks", "-t"):
            values = [value] if value else list(itertools.takewhile(lambda a: not a.startswith("-"), argv[i + 1 :]))
            return [t for v in values for t in v.split(",") if t]
    return []
