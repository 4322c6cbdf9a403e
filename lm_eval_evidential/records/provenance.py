"""What produced a records file, and the refusal to pair records from different producers.

Every records file carries, in its metadata, the base model id and revision, the adapter and
its content hash, the method and its parameters (prior weight, num_noises, sigma_mult, seed),
dtype, the prompt template hash, the answer-token ids, how prompts were built (chat template
and system instruction hashes, few-shot settings), where the questions came from
(``data_origin``: hub, one mirror folder, or local files) and the package version. Two tasks'
records may only be compared when all of these agree; the task name, the run's date, the
task's own answer set / version, its data source (dataset, revision or files, content
hash: ``data_source``) and a control task's summary (``control``: how its questions were
brought to the ID task's K) are allowed to differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# Keys that describe the task or the run, not the producer.
TASK_KEYS = frozenset({"task", "date_id", "answer_tokens", "task_version", "config_source", "data_source", "control"})


class FingerprintMismatchError(ValueError):
    """Records produced by different models/settings were about to be compared."""


def fingerprint(meta: Mapping) -> dict:
    return {k: v for k, v in meta.items() if k not in TASK_KEYS}


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


def check_same_producer(records: Sequence, *, allow: bool = False) -> list[str]:
    """Raise :class:`FingerprintMismatchError` listing the differences, unless ``allow``.

    With ``allow=True`` the differences are returned as warning lines instead.
    """
    if len(records) < 2:
        return []
    first = records[0]
    lines = []
    for other in records[1:]:
        for key, (va, vb) in differences(first.meta, other.meta).items():
            lines.append(f"{key}: {first.task}={va!r} vs {other.task}={vb!r}")
    if lines and not allow:
        raise FingerprintMismatchError(
            "these records were produced by different models or settings, so their scores are not comparable:\n  "
            + "\n  ".join(lines)
            + "\nre-run the tasks together in one lm_eval run, or pass --allow-fingerprint-mismatch to compare anyway"
        )
    return lines
