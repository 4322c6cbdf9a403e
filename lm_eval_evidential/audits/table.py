"""What a row of an audit table is, and the one renderer of audit tables (plain text and Markdown).

An audit's row is a frozen dataclass (:class:`AuditRow`) whose fields declare their column once, in
``field(metadata=...)`` as peft's ``LoraConfig`` declares its help: the JSON key (the field's name),
the header a document shows and how the value is written (:data:`FORMATS`). The CLI prints a row type's
columns with :func:`rows_text` (headers are the JSON keys, 4 decimals, NaN as ``nan``); the report
writes them with :func:`rows_markdown` (headers for a reader, 3 decimals, NaN as ``n/a``). A row
is the dict it replaces (``row["auroc"]``, ``dict(row)``, ``{**row}``, JSON), so a row read back from
``report.json`` renders the same as one just computed.

A column that comes once per parameter of the audit (PRR at each rejection cap, the risk at the coverage asked)
is one :func:`per_parameter` field: its value is ``((parameter, value), ...)`` and the row's dict has one key
per pair (``prr_0.5``, ``risk_at_0.8``), where the field stands; its columns are named by those keys.

A cell that writes several values (a value and its interval, before → after, kept / n, min / median / max, a
group's mean row in bold) is one :func:`combined` column: its parts are columns, each written by its own
format, and :data:`JOINS` puts their cells together; a table declares it once beside its other columns.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from lm_eval_evidential.metrics.cardinality import format_k


class Column(NamedTuple):
    """One column of an audit table: the row's key, the header a document shows, how its value is written
    (``digits``: the Markdown decimals where a column needs more than the medium's).

    A :func:`combined` column has ``parts`` (columns, each written by its own format) and its ``format`` names
    the :data:`JOINS` entry that puts their cells together (or is that join, where one table alone needs it).
    A part's ``key`` may be a path into nested mappings (``("auroc", "max_prob", "auroc")``); a part the row
    lacks is left out of the cell.
    """

    key: str | tuple[str, ...]
    header: str
    format: str | Callable[[list[str], list, Style], str] = "value"
    digits: int | None = None
    parts: tuple[Column, ...] = ()


def column(
    header: str,
    format: str = "value",
    *,
    digits: int | None = None,
    default: Any = dataclasses.MISSING,
    omit_none: bool = False,
) -> Any:
    """A row field that is a table column: ``header`` for documents, ``format`` one of :data:`FORMATS`
    (``omit_none``: the row has no such key where the value is None, as a ``reason``)."""
    if format not in FORMATS:
        raise KeyError(f"unknown column format {format!r}; one of {', '.join(FORMATS)}")
    metadata = {"header": header, "format": format, "digits": digits, **({"omit_none": True} if omit_none else {})}
    return dataclasses.field(default=None if omit_none else default, metadata=metadata)


def per_parameter(key: str, header: str, format: str = "value", *, digits: int | None = None) -> Any:
    """A row field that is one column per parameter: its value is ``((parameter, value), ...)``, the row's keys
    ``key.format(parameter)`` (``"prr_{}"``: ``prr_0.5``), their headers ``header.format(parameter)``."""
    if format not in FORMATS:
        raise KeyError(f"unknown column format {format!r}; one of {', '.join(FORMATS)}")
    return dataclasses.field(metadata={"header": header, "format": format, "digits": digits, "key": key})


def _parameter(template: str, key: str) -> int | float | None:
    """The parameter ``key`` names under a :func:`per_parameter` ``template`` (``"prr_{}"``, ``"prr_0.5"``: 0.5),
    or None when it names none (``prr_normalized``)."""
    prefix, _, suffix = template.partition("{}")
    middle = key[len(prefix) : len(key) - len(suffix)] if key.startswith(prefix) and key.endswith(suffix) else ""
    for number in (int, float):
        try:
            value = number(middle)
        except ValueError:
            continue
        return value if template.format(value) == key else None
    return None


def combined(key: str, header: str, join: str | Callable, *parts: Column) -> Column:
    """A column whose cell writes several values: each of ``parts`` by its own format, put together by the
    :data:`JOINS` entry ``join`` (``estimate``: ``0.612 [0.48, 0.74]``; ``arrow``: ``0.41 → 0.38``; ...), or
    by ``join(cells, values, style)`` itself where one table alone writes its cell so."""
    if not callable(join) and join not in JOINS:
        raise KeyError(f"unknown cell join {join!r}; one of {', '.join(JOINS)}")
    return Column(key, header, join, parts=tuple(parts))


def k_column(header: str = "K") -> Any:
    """A row's class count K (an int, or ``{K: n}`` where its questions have several), as every audit writes it."""
    return column(header, "k")


def matched_column() -> Any:
    """Whether a row compares records of one K (the K check's verdict), as every audit writes it."""
    return column("K matched", "matched")


def reason_field() -> Any:
    """A row's ``reason``: why a number of it is NaN; the key is absent (not None) when every number is defined,
    as :func:`~lm_eval_evidential.audits._common.finish_row` leaves it."""
    return column("reason", omit_none=True)


def declared(base: type, *names: str) -> list[tuple]:
    """The fields ``names`` of the row type ``base`` (default: all), their columns as declared there, as
    :func:`row_type` takes them: a row that restates another's numbers declares none of their columns again."""
    fields = {f.name: f for f in dataclasses.fields(base)}
    return [
        (f.name, f.type, dataclasses.field(default=f.default, metadata=f.metadata))
        for f in (fields[n] for n in names or fields)
    ]


def row_type(name: str, module: str, fields: Sequence[tuple]) -> type:
    """A frozen row type of ``fields`` (each ``(name, type, column(...))``, or from :func:`declared`), keyword-only
    so that its field order is free; defined in ``module``."""
    cls = dataclasses.make_dataclass(name, list(fields), bases=(AuditRow,), frozen=True, eq=False, kw_only=True)
    cls.__module__ = module  # pickle finds the class there (make_dataclass's module= is Python 3.12+)
    return cls


def row_with(name: str, base: type, module: str, *, before=(), after=()) -> type:
    """A row type that is ``base``'s fields, their columns as declared there, with the fields ``before`` first
    and ``after`` last: a row that labels or annotates ``base``'s row."""
    return row_type(name, module, [*before, *declared(base), *after])


class AuditRow(dict):
    """Base of the audit rows: frozen dataclasses that are the dict of their fields, in field order.

    Subclasses are ``@dataclass(frozen=True, eq=False)`` with :func:`column` fields. A row is a ``dict``
    (``row["auroc"]``, ``tuple(row)``, ``json.dumps(row)``, ``row == {...}`` work as on the dicts the audits
    returned before), read-only: a field is an attribute (``row.auroc``) and neither can be changed.
    """

    def __post_init__(self) -> None:
        omitted, templates = self._omitted(), self._templates()
        for k in self.field_names():
            v = getattr(self, k)
            if k in templates:
                dict.update(self, ((templates[k].format(p), x) for p, x in v))
            elif not (k in omitted and v is None):
                dict.__setitem__(self, k, v)

    def _frozen(self, *args, **kwargs):
        raise TypeError(f"{type(self).__name__} rows are read-only; build a new row (dataclasses.replace)")

    __setitem__ = __delitem__ = __ior__ = update = pop = popitem = setdefault = clear = _frozen

    def __reduce__(self):  # pickle and copy rebuild the row from its fields, not item by item
        return type(self).of, (dict(self),)

    @classmethod
    @functools.cache
    def field_names(cls) -> tuple[str, ...]:
        """The row's keys, in order: its JSON keys."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def of(cls, row: Mapping):
        """The typed row of a dict an audit built (keys: the fields, a :func:`per_parameter` field's keys each
        named for its parameter; an absent ``reason`` is None)."""
        templates = cls._templates()
        fields = {k: v for k, v in row.items() if k in cls.field_names()}
        for name, template in templates.items():
            named = ((_parameter(template, k), v) for k, v in row.items())
            fields[name] = tuple((p, v) for p, v in named if p is not None)
        return cls(**fields)

    @classmethod
    @functools.cache
    def _omitted(cls) -> frozenset[str]:
        return frozenset(f.name for f in dataclasses.fields(cls) if f.metadata.get("omit_none"))

    @classmethod
    @functools.cache
    def _templates(cls) -> dict[str, str]:
        """``{field: key template}`` of the :func:`per_parameter` fields."""
        return {f.name: f.metadata["key"] for f in dataclasses.fields(cls) if f.metadata.get("key")}

    @classmethod
    def combined(cls, header: str, join: str | Callable, *keys: str | Column) -> Column:
        """A :func:`combined` column of this row's fields ``keys`` (or columns given), each part written as its
        field declares, put together by ``join``; named by its first part's key."""
        parts = [k if isinstance(k, Column) else cls.columns(k)[0] for k in keys]
        return combined(parts[0].key, header, join, *parts)

    @classmethod
    def written(cls, key: str, value, style: Style | None = None) -> str:
        """``value`` as this row type's column ``key`` writes it in ``style`` (default Markdown): a sentence that
        quotes a table's quantity writes it as the table does, from the one declaration.

        >>> from lm_eval_evidential.audits.ood import KSweepRow
        >>> KSweepRow.written("auroc", 0.61234), KSweepRow.written("delta_auroc", 0.25)
        ('0.612', '+0.250')
        >>> KSweepRow.written("auroc", float("nan")), KSweepRow.written("auroc", 0.61234, TEXT)
        ('n/a', '0.6123')
        """
        return _write(value, cls.columns(key)[0], MARKDOWN if style is None else style)

    @classmethod
    def columns(cls, *keys: str | Column) -> tuple[Column, ...]:
        """The columns ``keys`` (default: every field that is one column), in that order, as the fields declare
        them; a :func:`per_parameter` field's column is named by its key (``prr_0.5``); a column given (a
        :meth:`combined` one) stands as it is."""
        declared = {
            f.name: Column(
                f.name, f.metadata.get("header", f.name), f.metadata.get("format", "value"), f.metadata.get("digits")
            )
            for f in dataclasses.fields(cls)
        }
        templates = cls._templates()
        for key in keys:
            for name, template in templates.items() if isinstance(key, str) else ():
                parameter = _parameter(template, key)
                if parameter is not None:
                    header = declared[name].header.format(parameter)
                    declared[key] = declared[name]._replace(key=key, header=header)
        unknown = [k for k in keys if isinstance(k, str) and (k not in declared or k in templates)]
        if unknown:
            raise KeyError(f"{cls.__name__} has no column {', '.join(unknown)}")
        if not keys:
            return tuple(c for k, c in declared.items() if k not in templates)
        return tuple(k if isinstance(k, Column) else declared[k] for k in keys)


#: What a cell of a value that does not apply to its row reads in a document.
NOT_APPLICABLE = "—"


class Style(NamedTuple):
    """How one medium writes numbers: decimals, and what an undefined (NaN) or missing (None) value reads;
    ``p_digits``: the significant digits of a p-value (decimals would write p = 8.4e-06 as 0.000)."""

    digits: int
    nan: str
    none: str
    markdown: bool
    p_digits: int


TEXT = Style(digits=4, nan="nan", none="", markdown=False, p_digits=3)
MARKDOWN = Style(digits=3, nan="n/a", none="n/a", markdown=True, p_digits=2)


def format_number(v, digits: int = 3, signed: bool = False, nan: str = "n/a") -> str:
    """``v`` with ``digits`` decimals (``signed``: always a sign); ``nan`` for None or NaN, yes/no for a bool.

    >>> format_number(-1e-17, signed=True), format_number(0.12345), format_number(float("nan")), format_number(True)
    ('+0.000', '0.123', 'n/a', 'yes')
    """
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return nan
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        v = v if round(v, digits) else 0.0  # no "-0.000" for a tiny negative
        return f"{v:+.{digits}f}" if signed else f"{v:.{digits}f}"
    return str(v)


def format_p(p, style: Style = MARKDOWN) -> str:
    """A p-value to the style's significant digits (:data:`MARKDOWN`: 2, :data:`TEXT`: 3); its ``nan`` when
    undefined. The one writing of p-values: a ``"p"`` column, and the prose that quotes one.

    >>> format_p(8.4123e-06), format_p(0.04567, TEXT), format_p(float("nan")), format_p(None, TEXT)
    ('8.4e-06', '0.0457', 'n/a', 'nan')
    """
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return style.nan
    return f"{p:.{style.p_digits}g}"


def format_ci(v, digits: int = 3, nan: str = "n/a") -> str:
    """An interval ``[lo, hi]``, or ``nan`` when it is missing or undefined."""
    if not v or all(x is None or x != x for x in v):
        return nan
    return f"[{format_number(v[0], digits, nan=nan)}, {format_number(v[1], digits, nan=nan)}]"


def _value(v, style: Style) -> str:
    """A value by its type: floats to the style's decimals, a pair of floats as an interval, the rest as text."""
    if isinstance(v, float):  # a tiny negative prints as 0.0000, never -0.0000
        return style.nan if math.isnan(v) else f"{v if round(v, style.digits) else 0.0:.{style.digits}f}"
    if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, float) for x in v):
        return f"[{_value(v[0], style)}, {_value(v[1], style)}]"
    if isinstance(v, bool) and style.markdown:
        return "yes" if v else "no"
    return style.none if v is None else str(v)


def _interval(v, style: Style) -> str:
    return format_ci(v, style.digits, style.nan) if style.markdown else _value(v, style)


#: How a column's value is written, by the name a :func:`column` gives:
#:
#: - ``value``: by type, numbers to the medium's decimals; ``signed``: a number with its sign; ``delta``: a
#:   signed move from a base row, empty on the base row itself (None);
#: - ``p``: a p-value, to the medium's significant digits (:func:`format_p`); ``interval``: ``[lo, hi]``;
#:   ``k``: a class count or its histogram (``format_k``; none: ``—`` in Markdown);
#: - ``optional``: a value some rows have by design (the others' None: ``—`` in Markdown);
#: - ``matched``: a K match, yes/NO, a mismatch stressed in Markdown; ``condition``: a K sweep's side,
#:   ``OOD-only`` in Markdown; ``dropped``: ``{"id": a, "ood": b}``, ``a/b`` in Markdown;
#: - ``shares``: ``{size: share}`` as ``size:share`` pairs (2 decimals); ``temperature``: a fitted T, or the
#:   records' own probabilities (None: ``records``, ``—`` in Markdown).
FORMATS = {
    "value": _value,
    "signed": lambda v, s: format_number(v, s.digits, signed=True, nan=s.nan) if isinstance(v, float) else _value(v, s),
    "delta": lambda v, s: "" if v is None else FORMATS["signed"](v, s),
    "interval": _interval,
    "p": lambda v, s: format_p(v, s) if isinstance(v, float) else _value(v, s),
    "k": lambda v, s: (
        format_k(v) if isinstance(v, (int, dict)) else NOT_APPLICABLE if v is None and s.markdown else _value(v, s)
    ),
    "optional": lambda v, s: NOT_APPLICABLE if v is None and s.markdown else _value(v, s),
    "matched": lambda v, s: (
        ("yes" if v else "**NO**") if s.markdown else ("yes" if v else "NO") if isinstance(v, bool) else _value(v, s)
    ),
    "shares": lambda v, s: " ".join(f"{k}:{x:.2f}" for k, x in v.items()) if isinstance(v, Mapping) else _value(v, s),
    "temperature": lambda v, s: (NOT_APPLICABLE if s.markdown else "records") if v is None else _value(v, s),
    "condition": lambda v, s: {"ood_only": "OOD-only"}.get(v, v) if s.markdown else _value(v, s),
    "dropped": lambda v, s: f"{v['id']}/{v['ood']}" if s.markdown and isinstance(v, Mapping) else _value(v, s),
}


#: How a :func:`combined` column puts its parts' cells together (``cells``: the parts the row has, written;
#: ``values``: theirs, as they are):
#:
#: - ``estimate``: a value and its interval, ``0.612 [0.480, 0.740]``;
#: - ``range``: ``min / median / max``; ``of``: ``kept / n`` (— when the first is missing);
#: - ``arrow``: ``from → to`` (an ID task and its OOD task; before → after, or before alone where the row has
#:   no after; — when the first is missing);
#: - ``published``: ours, then the published value in brackets where there is one, ``0.612 (0.653)``;
#: - ``mean``: a set's name, or a group's mean row in bold, parts ``(set, group, n_sets)``.
JOINS = {
    "estimate": lambda cells, values, s: " ".join(cells),
    "range": lambda cells, values, s: " / ".join(cells),
    "of": lambda cells, values, s: NOT_APPLICABLE if values[0] is None else " / ".join(cells),
    "arrow": lambda cells, values, s: NOT_APPLICABLE if values[0] is None else " → ".join(cells),
    "published": lambda cells, values, s: cells[0] + "".join(f" ({c})" for c in cells[1:]),
    "mean": lambda cells, values, s: (
        f"**{cells[0]} (mean of {cells[2]})**" if s.markdown and values[0] == values[1] else cells[0]
    ),
}

_ABSENT = object()


def _get(row: Mapping, key: str | tuple[str | int, ...]):
    """``row[key]``, following a path of keys into nested mappings (an int: a place in a sequence);
    :data:`_ABSENT` where the row lacks it."""
    for k in (key,) if isinstance(key, str) else key:
        if isinstance(row, Mapping) and k in row:
            row = row[k]
        elif isinstance(k, int) and isinstance(row, (list, tuple)) and -len(row) <= k < len(row):
            row = row[k]
        else:
            return _ABSENT
    return row


def _write(value, column: Column, style: Style) -> str:
    style = style._replace(digits=column.digits) if column.digits and style.markdown else style
    return FORMATS[column.format](value, style)


def _cell(row: Mapping, column: Column, style: Style) -> str:
    if not column.parts:
        value = _get(row, column.key)
        return _write(None if value is _ABSENT else value, column, style)
    present = [(p, v) for p in column.parts if (v := _get(row, p.key)) is not _ABSENT]
    if not present:
        return style.none
    join = column.format if callable(column.format) else JOINS[column.format]
    return join([_write(v, p, style) for p, v in present], [v for _, v in present], style)


def cells(rows: Sequence[Mapping], columns: Sequence[Column], style: Style) -> list[list[str]]:
    """Each row's cells: ``row[column.key]`` written by the column's format in ``style`` (a :func:`combined`
    column's parts each by its own, put together by its join)."""
    return [[_cell(r, c, style) for c in columns] for r in rows]


def text_table(headers: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    """A plain-text table: the first column left-aligned, the others right-aligned, a dashed rule."""
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(headers)]

    def line(row: Sequence[str]) -> str:
        return "  ".join(x.rjust(w) if i else x.ljust(w) for i, (x, w) in enumerate(zip(row, widths)))

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(b) for b in body)])


def _md_cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown_table(headers: Sequence[str], body: Sequence[Sequence]) -> list[str]:
    """The lines of a Markdown table (a ``|`` in a cell escaped, a newline made a space), and a blank line.

    >>> markdown_table(["a", "b"], [[1, "x|y"]])
    ['| a | b |', '|---|---|', '| 1 | x\\\\|y |', '']
    """
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in body]
    return lines + [""]


def _as_columns(columns: Sequence[Column | str]) -> list[Column]:
    return [c if isinstance(c, Column) else Column(c, c) for c in columns]


def rows_text(rows: Sequence[Mapping], columns: Sequence[Column | str]) -> str:
    """The CLI's table of ``rows``: headers are the JSON keys, numbers to 4 decimals, NaN as ``nan``.

    A plain key stands for a column written by the value's type (a label that is no field of the row, as
    ``permutations``' score; the ``tasks`` census, which is no audit).
    """
    columns = _as_columns(columns)
    return text_table([c.key for c in columns], cells(rows, columns, TEXT))


def rows_markdown(rows: Sequence[Mapping], columns: Sequence[Column | str], style: Style = MARKDOWN) -> list[str]:
    """The report's table of ``rows``: the columns' headers, numbers to 3 decimals, NaN as ``n/a`` (``style``:
    a document that writes them otherwise, as the published tables' dash)."""
    columns = _as_columns(columns)
    return markdown_table([c.header for c in columns], cells(rows, columns, style))
