"""Per-example evidence records: the format (:mod:`.schema`: the field table; :mod:`.arrow`: its Arrow
types), the derived fields (:mod:`.make`), the :class:`Records` container (:mod:`.container`) and the
checks of its values (:mod:`.validation`), files (:mod:`.parquet`), the one loader (:mod:`.loading`)
and who produced them (:mod:`.provenance`).

The names below are the public API.
"""

from lm_eval_evidential.errors import RecordsError
from lm_eval_evidential.files import RECORDS_FILE_RE
from lm_eval_evidential.records.arrow import arrow_schema
from lm_eval_evidential.records.container import Records
from lm_eval_evidential.records.loading import (
    Run,
    find_record_files,
    load_records,
    load_run,
)
from lm_eval_evidential.records.make import make_record, make_records, predictive_probs, record_probs
from lm_eval_evidential.records.parquet import read_records_file, records_path, write_records
from lm_eval_evidential.records.provenance import (
    FingerprintMismatchError,
    ProducerCheck,
    check_same_producer,
    checked_together,
)
from lm_eval_evidential.records.schema import (
    META_KEY,
    OPTIONAL_FIELDS,
    RECORD_FIELDS,
    RECORD_SCHEMA,
    SCHEMA_VERSION,
    RecordField,
)

__all__ = [
    "FingerprintMismatchError",
    "META_KEY",
    "OPTIONAL_FIELDS",
    "RECORD_FIELDS",
    "RECORD_SCHEMA",
    "RecordField",
    "RECORDS_FILE_RE",
    "SCHEMA_VERSION",
    "Records",
    "RecordsError",
    "Run",
    "arrow_schema",
    "check_same_producer",
    "checked_together",
    "ProducerCheck",
    "predictive_probs",
    "find_record_files",
    "load_records",
    "load_run",
    "make_record",
    "make_records",
    "read_records_file",
    "record_probs",
    "records_path",
    "write_records",
]
