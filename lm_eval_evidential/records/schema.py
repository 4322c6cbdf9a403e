"""Per-example evidence records: the format, one row of :data:`RECORD_SCHEMA` per field.

The rest of the records package is made from this table: the Arrow types and column readers
(:mod:`~lm_eval_evidential.records.arrow`), the derived fields (:mod:`~lm_eval_evidential.records.make`),
the :class:`~lm_eval_evidential.records.container.Records` container and the checks of every value
(:mod:`~lm_eval_evidential.records.validation`). Writing and naming records files is
:mod:`lm_eval_evidential.records.parquet`; finding and loading a run is :mod:`lm_eval_evidential.records.loading`.

Format (schema version 1). One Apache Parquet file per task and run, written next to the
harness's ``results_<date_id>.json`` as ``records_<task>_<date_id>.parquet``, atomically
(temp file + rename). One row per (task, doc), with the fields of :data:`RECORD_SCHEMA` (the
table below is made from it).

The file's schema metadata key ``lm_eval_evidential`` holds JSON: schema_version, task,
method, prior_weight, the IB-EDL settings, date_id and the producing package version.
Parquet is columnar, typed, readable by pandas/polars/duckdb and never pickles.
"""

from __future__ import annotations

from dataclasses import dataclass

SCHEMA_VERSION = 1
META_KEY = b"lm_eval_evidential"


@dataclass(frozen=True)
class RecordField:
    """One field of the records format: its name, Arrow type, what it holds, and how it is checked.

    ``arrow`` is the type the writer uses; a reader accepts any width of the same kind (any
    integer for ``int32``/``int64``, any float for ``float64``). ``per_option`` lists hold one
    value per answer option (length K; other lists may have any length; for a list of lists,
    each inner list); ``nullable`` lists
    are null for ``method=softmax`` records (no Dirichlet). An ``optional`` field may be absent
    from a file: it is written only when a run gives it and read as None when absent, so files
    written before it was added still load, and files of runs without it stay byte for byte
    what they were. Lists of floats are read NaN right-padded (NaN is never a value in them).
    """

    name: str
    arrow: str
    doc: str
    per_option: bool = False
    nullable: bool = False
    optional: bool = False

    @property
    def is_list(self) -> bool:
        return self.arrow.startswith("list<")

    @property
    def is_matrix(self) -> bool:
        """A list of lists (one list per member): read as an (n, M, K_max) array."""
        return self.arrow.startswith("list<list<")

    @property
    def item(self) -> str:
        """The type of one value: the list's (or list of lists') item type, or the field's own type."""
        return self.arrow.removeprefix("list<").removeprefix("list<").removesuffix(">").removesuffix(">")


#: The records format, one row per field in file order. Everything else is made from it: the
#: module table, ``RECORD_FIELDS``, the row mappings (``records[i]``, :func:`make_records`), the
#: type and null checks of a file, the columns read, the Arrow schema and the writer. A field
#: that older files lack is one more row with ``optional=True`` (and its ``Records`` attribute).
RECORD_SCHEMA = (
    RecordField("task", "string", "harness task name"),
    RecordField("doc_id", "int64", "the harness's doc_id (position in the task's evaluated docs)"),
    RecordField("k", "int32", "number of options of *this* question"),
    RecordField("labels", "list<string>", 'the answer labels shown, e.g. ["A","B","C"]', per_option=True),
    RecordField("gold", "int32", "index of the correct label"),
    RecordField(
        "logits",
        "list<float64>",
        "last-position logits at the answer tokens (for models that only expose log-likelihoods, e.g. "
        "``--model hf``: those); with M > 1 members: log p̄, the log of their predictive distribution "
        "(so softmax(logits) = p̄)",
        per_option=True,
    ),
    RecordField(
        "evidence",
        "list<float64>",
        "e (null for method=softmax, where it is undefined); with M > 1 EDL members: α - λ of the summary α",
        per_option=True,
        nullable=True,
    ),
    RecordField(
        "alpha",
        "list<float64>",
        "Dirichlet α = e + λ (null for method=softmax); with M > 1 EDL members the summary α = p̄ / mean_m(1/S_m) "
        "(mean p̄, vacuity the members' mean vacuity)",
        per_option=True,
        nullable=True,
    ),
    RecordField("strength", "float64", "S = Σα (NaN for softmax); with M > 1 EDL members 1 / mean_m(1/S_m)"),
    RecordField("vacuity", "float64", "λK/S (NaN for softmax); with M > 1 EDL members the mean of theirs"),
    RecordField("max_prob", "float64", "max E[p] (α/S, or the softmax of the logits for softmax; p̄ for M > 1)"),
    RecordField("pred", "int32", "argmax E[p] (first index on ties)"),
    RecordField("correct", "bool", "pred == gold"),
    RecordField(
        "phantom_logits",
        "list<float64>",
        'logits of the labels after the question\'s last one (" E".." H" after " A".." D": the '
        "``phantom_count`` model_arg, default 4, of them that are single tokens), from the same forward pass; "
        "absent for ``--model hf`` and in files written before they were kept",
        optional=True,
    ),
    RecordField(
        "member_logits",
        "list<list<float64>>",
        "M × K: the answer logits of each of the M members that scored the question (ensemble members in "
        "the sorted order of their folder names, MC-dropout passes in draw order); p̄ is the mean of their "
        "softmax (softmax members, Lakshminarayanan et al. 2017) or of their Dirichlet means α_m/S_m (EDL "
        "members; metrics.members); absent for runs of one prediction per question",
        per_option=True,
        optional=True,
    ),
    RecordField(
        "member_phantom_logits",
        "list<list<float64>>",
        "M × P: each member's own phantom logits (the labels after the question's last one, as "
        "``phantom_logits``, from that member's forward pass; every member the same P), which "
        "``ksweep --phantom model`` and ``--force-k`` append to each member before the mixture is formed; "
        "``phantom_logits`` is then empty; absent for runs of one prediction per question and in member "
        "files written before they were kept",
        optional=True,
    ),
    RecordField(
        "order",
        "list<int32>",
        "permuted evaluation (``metadata.permutations``): the option indices of the unpermuted question in the "
        "order shown (``order[j]`` is the option at letter j; ``gold`` and everything else are as shown); one "
        "record per (question, order), ``doc_id`` the question's; absent for an unpermuted run",
        per_option=True,
        optional=True,
    ),
)
#: The fields every records file has, in file order.
RECORD_FIELDS = tuple(f.name for f in RECORD_SCHEMA if not f.optional)
#: The fields a file may lack (read as None).
OPTIONAL_FIELDS = tuple(f.name for f in RECORD_SCHEMA if f.optional)
#: Each field of :data:`RECORD_SCHEMA` by its name.
FIELD_BY_NAME = {f.name: f for f in RECORD_SCHEMA}


def _schema_table() -> str:
    """The module's field table (Markdown), from :data:`RECORD_SCHEMA`."""
    rows = [("field", "type", "meaning"), *((f.name, f.arrow, f.doc) for f in RECORD_SCHEMA)]
    width = [max(len(r[i]) for r in rows) for i in range(3)]

    def line(row) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(row, width)) + " |"

    return "\n".join([line(rows[0]), "|" + "|".join("-" * (w + 2) for w in width) + "|", *map(line, rows[1:])])


__doc__ = f"{__doc__}\n{_schema_table()}\n"


#: The methods records can come from (``modeling.config.METHODS``; this layer cannot import it).
RECORD_METHODS = ("edl", "ib_edl", "softmax")
