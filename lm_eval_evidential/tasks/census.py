"""The stock census: what each stock multiple-choice task's config says about scoring it with ``--model evidential``
(``lm-eval-evidential tasks``), read from the configs alone."""

from __future__ import annotations

import re

from lm_eval_evidential.tasks.lettered import LETTERS, stock_name, view_name

CENSUS_KEYS = ("task", "k", "choices", "as_is", "view", "note")
_LABEL = re.compile(r"[A-Za-z0-9]")
_PAREN_LABEL = re.compile(r"\(\s*[A-Za-z0-9]\s*\)")
_LITERAL_LIST = re.compile(r"\{\{\s*\[([^\[\]{}]*)\]\s*\}\}")


def census_row(name: str, cfg: dict) -> dict:
    """What a stock multiple-choice task's config says about scoring it with ``--model evidential``.

    Read from the config alone (no data, no tokenizer): ``choices`` is ``labels`` (single letters
    or digits: runs as it is), ``(A) labels`` (runs as it is: the shared prefix joins the
    prompt), ``words`` (a fixed list of words: runs where each is one token for the model's
    tokenizer, else its view) or ``texts`` (from the data: its view); ``k`` is the list's length,
    or ``per question`` where the data decide it.

    Examples
    --------
    >>> census_row("sciq", {"doc_to_choice": "{{[distractor1, distractor2, distractor3, correct_answer]}}",
    ...                     "doc_to_target": 3})["note"]
    'gold stored at one position: the view shuffles the options'
    >>> census_row("mmlu_x", {"doc_to_choice": ["A", "B", "C", "D"]})["as_is"]
    'yes'
    """
    choice, target = cfg.get("doc_to_choice"), cfg.get("doc_to_target")
    notes = []
    if isinstance(choice, list):
        k: int | str = len(choice)
        texts = [str(c).strip() for c in choice]
        if all(_LABEL.fullmatch(t) for t in texts):
            kind, as_is = "labels", "yes"
        elif all(_PAREN_LABEL.fullmatch(t) for t in texts):
            kind, as_is = "(A) labels", "yes"
        else:
            kind, as_is = "words", "if one token each"
    else:
        literal = _LITERAL_LIST.fullmatch(str(choice).strip()) if isinstance(choice, str) else None
        k = len([part for part in literal.group(1).split(",") if part.strip()]) if literal else "per question"
        kind, as_is = "texts", "no"
    view = view_name(name) if kind in ("words", "texts") else ""
    if isinstance(k, int) and k > len(LETTERS):
        view, notes = "", [f"{k} options: more than the {len(LETTERS)} letters"]
    if view and isinstance(cfg.get("doc_to_text"), str) and not cfg["doc_to_text"].strip():
        view, notes = "", ["no question: the choices are scored alone (a minimal pair)"]
    if view and ((isinstance(target, int) and not isinstance(target, bool)) or str(target).strip().isdigit()):
        notes.append("gold stored at one position: the view shuffles the options")
    return {"task": name, "k": k, "choices": kind, "as_is": as_is, "view": view, "note": "; ".join(notes)}


def census(manager, patterns: list[str] | None = None) -> list[dict]:
    """:func:`census_row` of every multiple-choice task in ``manager``'s index (those matching ``patterns``)."""
    import fnmatch

    from lm_eval.tasks._index import Kind

    rows = []
    for name in sorted(manager.task_index):
        entry = manager.task_index[name]
        cfg = entry.cfg or {}
        if entry.kind not in (Kind.TASK, Kind.PY_TASK) or cfg.get("output_type") != "multiple_choice":
            continue
        if stock_name(name) is not None:
            continue  # this package's tasks (and a user's *_edl tasks): lettered already
        if patterns and not any(fnmatch.fnmatchcase(name, p) for p in patterns):
            continue
        rows.append(census_row(name, cfg))
    return rows
