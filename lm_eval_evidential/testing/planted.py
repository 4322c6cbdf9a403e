"""Data sets that plant a letter prior: training questions whose gold is at one letter (always, or in a share).

The answer-order audit (``lm-eval-evidential permutations``) must find a letter prior where one
exists. :func:`write_planted_mirror` writes an offline mirror (``EVIDENTIAL_DATA_DIR``) that is the
bundled sample mirror except that every OBQA *training* question has its gold moved to one letter
(swapped with the option shown there); the evaluated test split is unchanged. An adapter trained on
it with the package's own trainer (``lm-eval-evidential train obqa_edl`` with that mirror) learns
the letter as evidence, honestly, from data: the fixture of the order audit's tests.

PriDe (Zheng et al., ICLR 2024) can only give accuracy back where the model knows answers that its
letter prior overrides; SmolLM2-135M is at chance on the sample questions. :func:`write_easy_mirror`
therefore replaces OBQA's training and test splits with easy questions written here (category
membership, one-digit sums, capitals, opposites; :func:`easy_questions`; or, ``kinds=MATCH_KINDS``, which
option is the word the question names: matching, not knowledge) in the hub schema, and moves the gold
of a seeded ``share`` of the *training* questions only to the planted letter: an adapter trained on it
learns both the answers and a prior for the letter, and the test split's golds stay uniform over the
letters.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.testing.tiny import sample_data_dir

__all__ = ["EASY_KINDS", "MATCH_KINDS", "OBQA_TRAIN", "easy_questions", "write_easy_mirror", "write_planted_mirror"]

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


# Easy questions: the words and facts a small instruction-tuned model knows (SmolLM2-135M-Instruct).
_CATEGORIES = {
    "a fruit": ["apple", "banana", "orange", "grape", "pear", "cherry", "lemon", "mango", "peach", "plum"],
    "an animal": ["dog", "cat", "horse", "cow", "lion", "tiger", "rabbit", "sheep", "mouse", "elephant"],
    "a colour": ["red", "blue", "green", "yellow", "purple", "black", "white", "pink", "brown", "grey"],
    "a country": ["France", "Spain", "Japan", "Brazil", "Canada", "Egypt", "India", "Mexico", "Italy", "Germany"],
    "a vehicle": ["car", "bus", "train", "bicycle", "truck", "boat", "airplane", "motorcycle", "tractor", "van"],
    "a part of the body": ["hand", "foot", "nose", "ear", "elbow", "knee", "finger", "shoulder", "mouth", "eye"],
}
_CAPITALS = [
    ("France", "Paris"), ("Japan", "Tokyo"), ("Italy", "Rome"), ("Spain", "Madrid"), ("Germany", "Berlin"),
    ("England", "London"), ("Russia", "Moscow"), ("Egypt", "Cairo"), ("China", "Beijing"), ("Greece", "Athens"),
    ("Portugal", "Lisbon"), ("Austria", "Vienna"),
]  # fmt: skip
_OPPOSITES = [
    ("hot", "cold"), ("big", "small"), ("up", "down"), ("day", "night"), ("fast", "slow"), ("happy", "sad"),
    ("open", "closed"), ("wet", "dry"), ("light", "dark"), ("old", "young"), ("early", "late"), ("full", "empty"),
]  # fmt: skip


#: The kinds of easy question, drawn uniformly from the list given (a kind named twice, twice as often).
EASY_KINDS = ("category", "category", "sum", "capital", "opposite")
#: The word-matching question alone: the option that repeats a word of the question (the easiest to learn).
MATCH_KINDS = ("match",)
_WORDS = sorted({w for words in _CATEGORIES.values() for w in words})


def _easy_question(rng: random.Random, kinds=EASY_KINDS) -> tuple[str, str, list[str]]:
    """(question, right answer, three wrong answers) of a kind drawn from ``kinds``: a category, a sum, a capital,
    an opposite, or a match (which option is a word the question names)."""
    kind = rng.choice(list(kinds))
    if kind == "match":
        right = rng.choice(_WORDS)
        return f"Which option is the word {right}?", right, rng.sample([w for w in _WORDS if w != right], 3)
    if kind == "category":
        name = rng.choice(list(_CATEGORIES))
        right = rng.choice(_CATEGORIES[name])
        others = [w for other, words in _CATEGORIES.items() if other != name for w in words]
        return f"Which of these is {name}?", right, rng.sample(others, 3)
    if kind == "sum":
        a, b = rng.randint(1, 9), rng.randint(1, 9)
        wrong = rng.sample([str(x) for x in range(2, 19) if x != a + b], 3)
        return f"What is {a} + {b}?", str(a + b), wrong
    if kind == "capital":
        country, right = rng.choice(_CAPITALS)
        return f"What is the capital of {country}?", right, rng.sample([c for _, c in _CAPITALS if c != right], 3)
    word, right = rng.choice(_OPPOSITES)
    if rng.random() < 0.5:
        word, right = right, word
    wrong = rng.sample([w for pair in _OPPOSITES for w in pair if w not in (word, right)], 3)
    return f"What is the opposite of {word}?", right, wrong


def easy_questions(n: int, seed: int, prefix: str = "easy", kinds=EASY_KINDS) -> list[dict]:
    """``n`` easy questions of ``kinds`` in OBQA's hub schema, four options, the gold's letter uniform (seeded).

    >>> rows = easy_questions(200, seed=1)
    >>> rows[0]["choices"]["label"], sorted({r["answerKey"] for r in rows})
    (['A', 'B', 'C', 'D'], ['A', 'B', 'C', 'D'])
    >>> all(len(set(r["choices"]["text"])) == 4 for r in rows)
    True
    """
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        question, right, wrong = _easy_question(rng, kinds)
        at = rng.randrange(4)
        rows.append({
            "id": f"{prefix}-{i:04d}",
            "question_stem": question,
            "choices": {"text": wrong[:at] + [right] + wrong[at:], "label": ["A", "B", "C", "D"]},
            "answerKey": "ABCD"[at],
        })  # fmt: skip
    return rows


def write_easy_mirror(
    root: str | Path,
    letter: str = "A",
    share: float = 0.5,
    *,
    n_train: int = 400,
    n_test: int = 120,
    seed: int = 0,
    kinds=EASY_KINDS,
) -> Path:
    """A copy of the sample mirror at ``root`` whose OBQA splits are :func:`easy_questions`, a prior planted.

    The training split (``n_train`` questions) has the gold of a seeded ``share`` of its questions
    moved to ``letter`` (``share=0``: no prior planted); the test split (``n_test``) keeps golds
    uniform over the letters. Returns ``root``.

    >>> import tempfile
    >>> root = write_easy_mirror(Path(tempfile.mkdtemp()) / "data", "A", 0.5)
    >>> train = [json.loads(x) for x in (root / OBQA_TRAIN).read_text().splitlines()]
    >>> test = [json.loads(x) for x in (root / OBQA_TRAIN).with_name("test.jsonl").read_text().splitlines()]
    >>> round(sum(r["answerKey"] == "A" for r in train) / len(train), 2), len(test)
    (0.6, 120)
    """
    if not (isinstance(letter, str) and len(letter) == 1 and letter in "ABCD"):
        raise InvalidValueError(
            f"letter must be one of A, B, C, D (the easy questions have four options), got {letter!r}"
        )
    if not (isinstance(share, (int, float)) and 0 <= share <= 1):
        raise InvalidValueError(f"share must be in [0, 1], got {share!r}")
    root = Path(root)
    shutil.copytree(sample_data_dir(), root)
    rng = random.Random(seed + 5)
    train = [
        r if rng.random() >= share else _moved(r, letter)
        for r in easy_questions(n_train, seed + 2, "easy-train", kinds)
    ]
    test = easy_questions(n_test, seed + 1, "easy-test", kinds)
    for name, rows in ((OBQA_TRAIN, train), (OBQA_TRAIN.with_name("test.jsonl"), test)):
        (root / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return root
