"""The audit subcommands' arguments: argparse types (the one comma-list parser, one task name, score lists,
bounded numbers), the options every audit shares and the help formatter that states each default once."""

from __future__ import annotations

import argparse
import re

from lm_eval_evidential.params import Integral, Interval, Options, Param, Real

#: How a help text states its option's default itself: ``(default: X)``, ``(default 4)``, ``assert (default)``,
#: ``zero (default; …)``, ``Default: …``. "the default" in another sense ("saved as the default") does not count.
_STATES_DEFAULT = re.compile(r"\(default\b|\bdefault:", re.IGNORECASE)


class HelpFormatter(argparse.HelpFormatter):
    """Every subcommand's help: an option's real default, said once.

    ``(default: X)`` is appended unless the help text already states its default, the option
    is required or positional, or it has no default (None, empty, or False for a flag that is off
    unless given). A default of 0 is a default (a seed's); a ``--x/--no-x`` flag's is said as
    the flag that holds unless the other is given.
    """

    def _get_help_string(self, action) -> str:
        text = action.help or ""
        if _STATES_DEFAULT.search(text) or action.required or not action.option_strings:
            return text
        default = action.default
        if default is None or default is argparse.SUPPRESS or (isinstance(default, (str, list, tuple)) and not default):
            return text
        if isinstance(action, argparse.BooleanOptionalAction):  # said as the flag that holds: --x or --no-x
            flag = next(o for o in action.option_strings if o.startswith("--no-") != bool(default))
            return text + f" (default: {flag})"
        if default is False:
            return text
        return text + " (default: %(default)s)"


def describe(doc: str | None) -> str:
    """A subcommand's description from its module docstring: the first paragraph after ``name``: , as
    plain text (no reST markup, first letter capitalised)."""
    text = " ".join((doc or "").split("\n\n")[0].split(": ", 1)[-1].replace("``", "").split())
    return text[:1].upper() + text[1:]


def _no_control_characters(name: str, text: str, what: str) -> str:
    import unicodedata

    if any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in name):
        raise argparse.ArgumentTypeError(
            f"{what} name {text!r} contains a control character (a newline, tab or NUL); no {what} name has one — "
            "retype it"
        )
    return name


def comma_list(what: str):
    """An argparse ``type`` for comma-separated names: ``"a, b"`` -> ``["a", "b"]`` (order kept, spaces
    around each name removed). The one parser of comma lists in the CLI; an empty list, a name given twice
    (a typo for another name, more often than not) or a name with a control character (newline, tab, NUL)
    is a usage error."""

    def parse(text: str) -> list[str]:
        given = [t.strip() for t in text.split(",") if t.strip()]
        names = list(dict.fromkeys(given))
        if not names:
            raise argparse.ArgumentTypeError(f"no {what} names in {text!r}; give one or more, separated by commas")
        if len(names) < len(given):
            twice = next(n for n in names if given.count(n) > 1)
            raise argparse.ArgumentTypeError(f"{what} {twice!r} is named twice in {text!r}; name each {what} once")
        return [_no_control_characters(name, text, what) for name in names]

    parse.__name__ = f"{what} list"  # argparse names the type in its messages
    return parse


def one_task(list_hint: str = "lists go to --ood, --target or --task"):
    """An argparse ``type`` for an option that takes ONE task: the name without surrounding spaces.

    The one parser of single task names (``--id``, ``ksweep --ood``), with :func:`comma_list` for
    lists: an empty name, a control character and a comma list (``a,b``) are usage errors; the
    comma list's message ends with ``list_hint``, what to do instead for this option.
    """

    def parse(text: str) -> str:
        name = text.strip()
        if not name:
            raise argparse.ArgumentTypeError(f"no task name in {text!r}; give one task, e.g. obqa_edl")
        _no_control_characters(name, text, "task")
        if "," in name:
            raise argparse.ArgumentTypeError(f"{text!r} is a list, this option takes one task; {list_hint}")
        return name

    parse.__name__ = "task name"  # argparse names the type in its messages
    return parse


#: ``--id`` of every audit command: one task.
task_name = one_task("give one task (lists go to --ood, --target or --task)")


def score_list(text: str) -> list[str]:
    """``--scores``: a comma list validated by the one score-name validator."""
    from lm_eval_evidential.metrics.scores import check_score_names

    try:
        return check_score_names(comma_list("score")(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def param_type(name: str, param: Param):
    """An argparse ``type`` for an option whose accepted values ``param`` declares where the parameter lives
    (:mod:`lm_eval_evidential.params`): the text read as an integer where the parameter takes only integers,
    else as a number, and checked by ``param``. A refusal is the parameter's own line, ``name=value must be …``,
    the words a Python caller of the same function gets (a usage error: exit status 1)."""
    kinds = {c.kind for c in param.accepts if isinstance(c, Interval)}
    kinds |= {
        Integral if isinstance(x, Integral) else Real
        for c in param.accepts
        if isinstance(c, Options)
        for x in c.choices
    }
    read = int if kinds == {Integral} else float

    def parse(text: str):
        try:
            value = read(text)
        except ValueError:
            value = text  # not a number: refused below, naming what was typed
        if not param.allows(value):
            raise argparse.ArgumentTypeError(param.message(name, value))
        return value

    parse.__name__ = "integer" if read is int else "number"  # argparse names the type in its messages
    return parse


def param_help(text: str, param: Param) -> str:
    """An option's help, ``text`` and what a value must be, in the parameter's declared words."""
    return f"{text}; {param.words()}"


def add_param(
    parser, flag: str, param: Param, *, help: str, name: str | None = None, aliases: tuple = (), **kwargs
) -> None:
    """The option ``flag`` (and its ``aliases``) of a parameter declared once as ``param``: its choices (a choice
    among names, listed by argparse) or its :func:`param_type` and its constraint said in the help
    (:func:`param_help`). ``name``: the parameter's name in the refusal (default: the flag's, ``--n-boot`` ->
    ``n_boot``)."""
    name = name or flag.lstrip("-").replace("-", "_")
    names = [c for c in param.accepts if c is not None]
    if len(names) == 1 and isinstance(names[0], Options) and all(isinstance(x, str) for x in names[0].choices):
        kwargs["choices"] = names[0].choices
    else:
        kwargs["type"], help = param_type(name, param), param_help(help, param)
    parser.add_argument(flag, *aliases, help=help, **kwargs)


def add_bootstrap(
    parser, *, n_boot_help: str, seed_help: str | None = "bootstrap seed", level: str | None = None
) -> None:
    """``--n-boot``, ``--seed`` (unless ``seed_help`` is None: the command has its own) and ``--level`` (with its
    help ``level``): the options of every audit with intervals, declared once in
    :mod:`lm_eval_evidential.metrics.intervals`."""
    from lm_eval_evidential.metrics.intervals import LEVEL, N_BOOT

    add_param(parser, "--n-boot", N_BOOT, default=1000, help=n_boot_help)
    if seed_help:
        add_seed(parser, seed_help)
    if level:
        add_param(parser, "--level", LEVEL, default=0.95, help=level)


def add_seed(parser, help: str) -> None:
    from lm_eval_evidential.metrics.intervals import SEED

    add_param(parser, "--seed", SEED, default=0, help=help)


def add_audit_parser(
    sub,
    name: str,
    doc: str | None,
    run,
    *,
    help: str,
    description: str | None = None,
    tasks: bool = False,
    id_help: str | None = None,
    k_policy: bool = False,
    scores: bool | str = False,
    json: bool = False,
):
    """The subparser of an audit command: its help and description (default: the module
    docstring's first paragraph), the output path with ``--run``/``--allow-fingerprint-mismatch``,
    and on request ``--task T[,T…]``, ``--id TASK`` (with help ``id_help``), ``--k-policy``,
    ``--scores`` (``scores`` a string: what the command uses without it) and ``--json``."""
    if description is None:
        description = describe(doc)
    p = sub.add_parser(name, help=help, description=description)
    add_output_path(p)
    if name != "permutations":  # the one audit that reads a permuted run order by order
        add_average_orders(p)
    if tasks:
        p.add_argument(
            "--task",
            dest="tasks",
            required=True,
            type=comma_list("task"),
            metavar="T[,T…]",
            help="task name(s), comma-separated, all from one run",
        )
    if id_help:
        p.add_argument("--id", dest="id_task", required=True, type=task_name, metavar="TASK", help=id_help)
    if k_policy:
        add_k_policy(p)
    if scores:
        add_scores(p, **({"default": scores} if isinstance(scores, str) else {}))
    if json:
        add_json(p)
    p.set_defaults(func=run)
    return p


def add_k_policy(parser) -> None:
    from lm_eval_evidential.metrics.cardinality import POLICIES

    parser.add_argument(
        "--k-policy",
        dest="k_policy",
        choices=POLICIES,
        default="assert",
        help="assert (default): refuse a comparison across different K; restrict: keep only examples with the ID "
        "task's K; report: compare anyway and mark the rows matched: false",
    )


def add_ood_tasks(parser, help: str = "OOD task(s), comma-separated", required: bool = True) -> None:
    parser.add_argument(
        "--ood", dest="ood_tasks", required=required, type=comma_list("task"), metavar="T1,T2", help=help
    )


def add_phantom(parser) -> None:
    from lm_eval_evidential.metrics.ksweep import PHANTOM

    add_param(
        parser,
        "--phantom",
        PHANTOM,
        default="zero",
        help="how the K sweep appends options: zero (default; zero evidence, McNamara 2026 Table 1), model (the "
        "model's own next labels ' E'.. from the records' phantom logits; EDL and softmax records), count (only "
        "vacuity's K grows: u = (K+x)/S, every other score unchanged)",
    )


def add_output_path(parser) -> None:
    parser.add_argument("output_path", help="the folder given to lm_eval --output_path")
    parser.add_argument("--run", default=None, help="a run's date_id (default: the newest run that has every task)")
    parser.add_argument(
        "--allow-fingerprint-mismatch",
        action="store_true",
        help="compare records even if they were produced by different models/settings (listed as warnings)",
    )


def add_average_orders(parser) -> None:
    parser.add_argument(
        "--average-orders",
        dest="average_orders",
        action="store_true",
        help="read a permuted run (--metadata permutations) as one record per question: the mixture of its orders' "
        "predictions, options in their unpermuted places (marked; without it such a run is refused, exit 2)",
    )


def add_json(parser) -> None:
    parser.add_argument(
        "--json", dest="json_path", default=None, metavar="FILE", help="also write the rows as a JSON list"
    )


def add_scores(parser, default: str = "every score the records can give") -> None:
    """``--scores``; ``default`` says what the command uses without it."""
    from lm_eval_evidential.metrics.scores import SCORES

    parser.add_argument(
        "--scores",
        default=None,
        type=score_list,
        metavar="A,B",
        help=f"comma-separated score names (default: {default}); one of: {', '.join(SCORES)}",
    )
