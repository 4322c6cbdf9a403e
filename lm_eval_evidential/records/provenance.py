"""What produced a records file, and the refusal to pair records from different producers.

Every records file carries, in its metadata, the base model and the adapter — by content
(:func:`model_sha256`, :func:`adapter_sha256`) and, as information, by the path or hub id
they were loaded from — the revision, the method and its parameters (prior weight, num_noises, sigma_mult, seed),
dtype, the prompt template hash, the answer-token ids, how prompts were built (chat template
and system instruction hashes, few-shot settings), where the questions came from
(``data_origin``: hub, one mirror folder, or local files) and the package version. Two tasks'
records may only be compared when all of these agree; the task name, the run's date, the
task's own answer set / version, its data source (dataset, revision or files, content
hash: ``data_source``), a control task's summary (``control``: how its questions were
brought to the ID task's K), a lettered view's summary (``lettered_view``: its stock task,
whether and how its options were shuffled), how a permuted run was read (``order_averaged``) and
the paths are allowed to differ.

The prompt template is compared: a lettered view (``arc_challenge_edl``) and this package's
own task on the same dataset (``arc_c_edl``) ask in different words, so two views compare, and
two shipped tasks, but not one with the other; the refusal says so (:func:`template_note`).

A model is identified by what it computes with, not by where its files live: clusters copy one
checkpoint to each node's scratch disk, so the same model arrives under several paths, and a
path can be overwritten with another model. A path is compared only when the content hash
beside it is missing (records written before the hashes existed, or a model with no local
files).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import struct
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from lm_eval_evidential.errors import FingerprintMismatchError, InvalidValueError
from lm_eval_evidential.files import open_regular_file, read_regular_file

# Keys that describe the task or the run, not the producer.
TASK_KEYS = frozenset(
    {
        "task",
        "date_id",
        "answer_tokens",
        "task_version",
        "config_source",
        "data_source",
        "control",
        "lettered_view",
        "limit",
        "phantom_count",
        "permutations",
        "order_averaged",  # records.orders.ORDER_AVERAGED: how a permuted run's records were read
    }
)
# Where a producer was loaded from -> the key that identifies it by content.
LOCATION_KEYS = {"pretrained": "model_sha256", "peft": "adapter_sha256"}

_DIGEST_CHARS = 16
# Fields of the hashed JSON files that name a location, not content.
_LOCATION_FIELDS = frozenset({"_name_or_path", "name_or_path", "base_model_name_or_path"})
_TOKENIZER_FILES = frozenset(
    {
        "tokenizer.json",
        "tokenizer.model",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "added_tokens.json",
        "vocab.json",
        "vocab.txt",
        "merges.txt",
    }
)
# Per tensor of a safetensors file: this many bytes at each of these fractions of its data.
_SAMPLE_BYTES = 4096
_SAMPLE_AT = (0.0, 0.25, 0.5, 0.75, 1.0)


#: A file that marks a model folder as a stand-in (the bundled tiny model): its numbers are illustrative only.
ILLUSTRATIVE_MARKER = "lm_eval_evidential_illustrative_model.json"


def sha256_text(text: str | None) -> str | None:
    """The short content hash of a prompt setting (a chat template, a system instruction), None for none."""
    return None if text is None else hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def is_illustrative(meta: Mapping) -> bool:
    """True when the records' base model is a local folder marked with :data:`ILLUSTRATIVE_MARKER`."""
    pretrained = meta.get("pretrained") if isinstance(meta, Mapping) else None
    if not isinstance(pretrained, str) or not pretrained:
        return False
    try:
        return (Path(pretrained) / ILLUSTRATIVE_MARKER).is_file()
    except OSError:
        return False


def fingerprint(meta: Mapping) -> dict:
    """The producer keys of ``meta``: no task keys, and no location whose content hash is known."""
    out = {k: v for k, v in meta.items() if k not in TASK_KEYS}
    for location, content in LOCATION_KEYS.items():
        if out.get(content) is not None:
            out.pop(location, None)
    return out


def differences(a: Mapping, b: Mapping) -> dict[str, tuple]:
    """``{key: (value_a, value_b)}`` for every producer key whose values differ.

    Answer-token ids are compared on the labels both sides use (a 4-option task's
    " A".." D" against the same labels of a 5-option task).
    """
    fa, fb = fingerprint(a), fingerprint(b)
    out = {}
    for key in sorted(set(fa) | set(fb)):
        va, vb = fa.get(key), fb.get(key)
        if key == "answer_token_ids" and isinstance(va, Mapping) and isinstance(vb, Mapping):
            common = set(va) & set(vb)
            va, vb = {k: va[k] for k in sorted(common)}, {k: vb[k] for k in sorted(common)}
        if va != vb:
            out[key] = (va, vb)
    return out


@dataclasses.dataclass(frozen=True, eq=False)
class ProducerCheck:
    """The mark of records checked together to come from one producer (:func:`checked_together`).

    Records that carry the same mark are not checked again by the audits they are given (the
    check runs once, where the records enter, as scikit-learn skips nested parameter
    validation); ``warnings`` lists the differences the user allowed (empty when none). The
    mark holds for the metadata that was checked: records given other metadata (e.g.
    ``dataclasses.replace(records, meta=...)``) are checked again.
    """

    warnings: tuple[str, ...] = ()
    metas: tuple[Mapping, ...] = ()

    def covers(self, records) -> bool:
        """Whether ``records`` carry this mark and the metadata it was given for."""
        return records.producer_check is self and any(records.meta is meta for meta in self.metas)


def check_same_producer(records: Sequence, *, allow: bool = False) -> list[str]:
    """Raise :class:`FingerprintMismatchError` listing the differences, unless ``allow``.

    With ``allow=True`` the differences are returned as warning lines instead. Records already
    checked together (one :class:`ProducerCheck` mark: :func:`checked_together`,
    :func:`~lm_eval_evidential.records.loading.load_run`, ``build_report``) pass without a
    second check, with whatever the user allowed then.
    """
    if len(records) < 2:
        return []
    first = records[0]
    if first.producer_check is not None and all(first.producer_check.covers(r) for r in records):
        return []
    lines, templates, producer = [], [], False
    for other in records[1:]:
        for key, (va, vb) in differences(first.meta, other.meta).items():
            lines.append(f"{key}: {first.task}={va!r} vs {other.task}={vb!r}")
            if key == TEMPLATE_KEY:
                templates.append(template_note(first, other))
            else:
                producer = True
    if lines and not allow:
        if producer:
            head = "these records were produced by different models or settings, so their scores are not comparable"
            remedy = (
                "re-run the tasks together in one lm_eval run, or pass --allow-fingerprint-mismatch to compare anyway"
            )
        else:  # one run, one model: only the prompts differ, and re-running would not change that
            head = "these records were scored with different prompt templates, so their scores are not comparable"
            remedy = "compare tasks asked in one template, or pass --allow-fingerprint-mismatch to compare anyway"
        raise FingerprintMismatchError(
            f"{head}:\n  " + "\n  ".join(lines + list(dict.fromkeys(templates))) + f"\n{remedy}"
        )
    return lines


#: The producer key that holds the task's prompt template (its hash).
TEMPLATE_KEY = "prompt_template_sha256"


def _view_of(records) -> str | None:
    """The stock task a lettered view's records show, None for any other task's records."""
    view = records.meta.get("lettered_view") if isinstance(records.meta, Mapping) else None
    return view.get("stock_task") if isinstance(view, Mapping) else None


def template_note(a, b) -> str:
    """Why two tasks' prompt templates differ, and which tasks compare: a lettered view (the view
    prompt of every ``<stock task>_edl``) against a task with its own template says so by name.

    Examples
    --------
    >>> from types import SimpleNamespace as R
    >>> view = R(task="arc_challenge_edl", meta={"lettered_view": {"stock_task": "arc_challenge"}})
    >>> print(template_note(R(task="obqa_edl", meta={}), view))
    arc_challenge_edl is the lettered view of the stock task 'arc_challenge' (the view prompt), obqa_edl has its own \
prompt template: compare lettered views with lettered views (<stock task>_edl on both sides), or obqa_edl with tasks \
in its template
    """
    views = [(r, _view_of(r)) for r in (a, b)]
    if sum(stock is not None for _, stock in views) != 1:
        return f"{a.task} and {b.task} are asked in different prompt templates ({TEMPLATE_KEY} differs)"
    (view, stock), (own, _) = sorted(views, key=lambda pair: pair[1] is None)
    return (
        f"{view.task} is the lettered view of the stock task {stock!r} (the view prompt), {own.task} has its own "
        f"prompt template: compare lettered views with lettered views (<stock task>_edl on both sides), or "
        f"{own.task} with tasks in its template"
    )


def checked_together(records: Sequence, *, allow: bool = False) -> tuple[list, list[str]]:
    """``records`` checked once to come from one producer, and the differences ``allow`` let through.

    Raises :class:`FingerprintMismatchError` on a difference unless ``allow`` (the user's
    ``--allow-fingerprint-mismatch``). Returns copies of the records (same arrays) that share
    one :class:`ProducerCheck` mark, so every audit they are given, and every subset of them,
    skips the check; records of another check, or none, are checked when paired with them.
    """
    warnings = check_same_producer(records, allow=allow)
    mark = ProducerCheck(tuple(warnings), tuple(r.meta for r in records))
    return [dataclasses.replace(r, producer_check=mark) for r in records], warnings


def same_questions(a: Mapping | None, b: Mapping | None) -> bool:
    """Whether two records' ``data_source`` say they hold the same questions.

    The same docs (one content hash: a records file copied under another name), or the same rows
    of one dataset shown in two forms (``rows_sha256``: this package's ``arc_c_edl`` and the
    lettered view ``arc_challenge_edl``, whose docs, origin and keys differ).

    Examples
    --------
    >>> shipped = {"dataset": "allenai/ai2_arc", "sha256": "aa", "rows_sha256": "r1"}
    >>> view = {"dataset": "allenai/ai2_arc", "sha256": "bb", "rows_sha256": "r1", "stock_task": "arc_challenge"}
    >>> same_questions(shipped, view), same_questions(shipped, {**view, "rows_sha256": "r2"})
    (True, False)
    """
    if not isinstance(a, Mapping) or not isinstance(b, Mapping) or not a.get("sha256"):
        return False
    if a == b:
        return True
    return a.get("rows_sha256") is not None and a.get("rows_sha256") == b.get("rows_sha256")


def merge_run_metas(task: str, metas: Iterable[Mapping]) -> dict:
    """The metadata of one task's records from the metadata of each of its documents.

    Under data parallel the documents were scored by several processes, possibly on several
    nodes that loaded the same model from different paths. Their producer keys must agree
    (else ``ValueError`` naming each difference); a location that differs is kept as the
    sorted list of its values, as information.

    Examples
    --------
    >>> a = {"pretrained": "/n0/m", "model_sha256": "ab", "method": "edl"}
    >>> merge_run_metas("t", [a, {**a, "pretrained": "/n1/m"}])["pretrained"]
    ['/n0/m', '/n1/m']
    >>> merge_run_metas("t", [a, {**a, "model_sha256": "cd"}])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lm_eval_evidential.errors.InvalidValueError: task 't': documents of one run were ...: model_sha256: 'ab' vs 'cd'
    """
    distinct = {json.dumps(dict(m), sort_keys=True, default=str): m for m in metas}
    if not distinct:
        return {}
    first, *others = distinct.values()
    lines = [f"{key}: {va!r} vs {vb!r}" for other in others for key, (va, vb) in differences(first, other).items()]
    if lines:
        raise InvalidValueError(
            f"task {task!r}: documents of one run were scored by different models or settings: " + "; ".join(lines)
        )
    merged = dict(first)
    for key in LOCATION_KEYS:
        values = sorted({str(m[key]) for m in distinct.values() if m.get(key) is not None})
        if len(values) > 1:
            merged[key] = values
    return merged


# ---------------------------------------------------------------------- identity by content
#: The largest JSON file of a model folder that is hashed by content (tokenizer.json is tens of MB).
_JSON_MAX_BYTES = 1 << 30


#: Adapter config fields PEFT keeps as sets and writes as lists in the set's order, which varies between
#: processes (string hashing is salted): hashed sorted, so one adapter has one identity.
_SET_FIELDS = ("target_modules", "exclude_modules")


def _canonical_json(path: Path) -> bytes:
    data = json.loads(read_regular_file(path, what="model file", max_bytes=_JSON_MAX_BYTES))
    if isinstance(data, dict):
        data = {k: v for k, v in data.items() if k not in _LOCATION_FIELDS}
        for key in _SET_FIELDS:
            if isinstance(data.get(key), list) and all(isinstance(v, str) for v in data[key]):
                data[key] = sorted(data[key])
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def _hash_whole_file(path: Path, digest) -> None:
    with open_regular_file(path, what="model file") as fh:  # a FIFO named like a model file never blocks
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)


def _hash_safetensors(path: Path, digest) -> None:
    """The header (every tensor's name, dtype, shape and byte range) and samples of every tensor.

    The safetensors library reads tensors but does not expose their byte ranges, so the
    8-byte length + JSON header (the format's whole specification) is read here.
    """
    with open_regular_file(path, what="model weights file") as fh:
        try:
            (size,) = struct.unpack("<Q", fh.read(8))
            header = fh.read(size)
            tensors = json.loads(header)
        except (struct.error, ValueError):  # not safetensors after all: hash it whole
            fh.close()
            return _hash_whole_file(path, digest)
        digest.update(header)
        data_start = 8 + size
        for name in sorted(k for k in tensors if k != "__metadata__"):
            begin, end = tensors[name]["data_offsets"]
            length = min(_SAMPLE_BYTES, end - begin)
            for offset in sorted({int(f * (end - begin - length)) for f in _SAMPLE_AT}):
                fh.seek(data_start + begin + offset)
                digest.update(fh.read(length))


def model_sha256(folder) -> str | None:
    """Content hash of a transformers checkpoint folder, or None when it is not a local folder.

    Hashed, each under its file name: ``config.json`` and the tokenizer files (JSON ones
    canonicalised, without the fields that name a path), the safetensors index, and the
    weights — for ``*.safetensors`` the header (every tensor's name, dtype, shape and byte
    range) and five 4 KiB samples of each tensor's bytes (at 0, ¼, ½, ¾ and the end of its
    data); ``pytorch_model*.bin`` and ``*.gguf`` files whole. Sampling keeps a 70B
    checkpoint's hash to a few megabytes of reads (all of it would take minutes per process);
    any change that touches a tensor throughout — training, a merged adapter, another
    quantisation — changes its samples, while an edit confined to unsampled bytes of a tensor
    would not be seen. Trainer state (``optimizer.pt``, ``training_args.bin``, …) is not part of
    the model and is left out.
    """
    root = Path(folder) if folder else None
    if root is None or not root.is_dir():
        return None
    digest = hashlib.sha256()
    has_weights = False
    for path in sorted(p for p in root.iterdir() if p.is_file()):
        name = path.name
        is_weights = name.endswith((".safetensors", ".gguf")) or (
            name.startswith("pytorch_model") and name.endswith(".bin")
        )
        if not (is_weights or name == "config.json" or name in _TOKENIZER_FILES or name.endswith(".index.json")):
            continue
        digest.update(name.encode() + b"\0")
        if name.endswith(".safetensors"):
            _hash_safetensors(path, digest)
        elif is_weights:
            _hash_whole_file(path, digest)
        elif name.endswith(".json"):
            digest.update(_canonical_json(path))
        else:
            digest.update(path.read_bytes())
        has_weights |= is_weights
    return digest.hexdigest()[:_DIGEST_CHARS] if has_weights else None


def adapter_weights_hash(root: Path):
    """A sha256 object over an adapter folder's weight files (``adapter_model*``: names and whole bytes), or None
    when it has none: :func:`adapter_sha256` adds the config to it; an ensemble's copied-member check reads it alone."""
    files = sorted(p for p in root.iterdir() if p.is_file() and p.name.startswith("adapter_model"))
    if not files:
        return None
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + b"\0")
        _hash_whole_file(path, digest)
    return digest


def adapter_sha256(folder) -> str | None:
    """Content hash of a local PEFT adapter folder: its weight files whole and its
    ``adapter_config.json`` without ``base_model_name_or_path``. None without a local adapter."""
    root = Path(folder) if folder else None
    if root is None or not root.is_dir():
        return None
    digest = adapter_weights_hash(root)
    if digest is None:
        return None
    config = root / "adapter_config.json"
    if config.is_file():
        digest.update(b"adapter_config.json\0" + _canonical_json(config))
    return digest.hexdigest()[:_DIGEST_CHARS]
