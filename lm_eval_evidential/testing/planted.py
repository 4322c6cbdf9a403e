"""A data set that plants a letter prior: training questions whose gold is always at one letter.

The answer-order audit (``lm-eval-evidential permutations``) must find a letter prior where one
exists. :func:`write_planted_mirror` writes an offline mirror (``EVIDENTIAL_DATA_DIR``) that is the
bundled sample mirror except that every OBQA *training* question has its gold moved to one letter
(swapped with the option shown there); the evaluated test split is unchanged. An adapter trained on
it with the package's own trainer (``lm-eval-evidential train obqa_edl`` with that mirror) learns
the letter as evidence, honestly, from data: the fixture of the order audit's tests.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.testing.tiny import sample_data_dir

__all__ = ["OBQA_TRAIN", "write_planted_mirror"]

#: The sample mirror's OBQA training split, relative to the mirror root.
OBQA_TRAIN = Path("allenai") / "openbookqa" / "main" / "train.jsonl"


def _moved(row: dict, letter: str) -> dict:
    """``row`` (OBQA hub schema) with its gold option swapped into the place of ``letter``'s option."""
    labels, texts = list(row["choices"]["label"]), list(row["choices"]["text"])
    if letter not in labels:
        return row
    gold, target = labels.index(row["answerKey"]), labels.index(letter)
    texts[gold], texts[target] = texts[target], texts[gold]
    return {**row, "choices": {"text": texts, "label": labels}, "answerKey": letter}


def write_planted_mirror(root: str | Path, letter: str = "A") -> Path:
    """A copy of the sample mirror at ``root`` whose OBQA training questions all have their gold at ``letter``.

    Returns ``root``. The test, validation and every other split are the sample mirror's own.

    >>> import tempfile, json
    >>> root = write_planted_mirror(Path(tempfile.mkdtemp()) / "data")
    >>> rows = [json.loads(line) for line in (root / OBQA_TRAIN).read_text().splitlines()]
    >>> {r["answerKey"] for r in rows}
    {'A'}
    """
    if not (isinstance(letter, str) and len(letter) == 1 and letter.isupper()):
        raise InvalidValueError(f"letter must be one capital letter such as 'A', got {letter!r}")
    root = Path(root)
    shutil.copytree(sample_data_dir(), root)
    path = root / OBQA_TRAIN
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    path.write_text("".join(json.dumps(_moved(r, letter)) + "\n" for r in rows), encoding="utf-8")
    return root
