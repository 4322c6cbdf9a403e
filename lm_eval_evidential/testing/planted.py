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

A tiny model trained from scratch knows no such answers. :func:`write_marker_mirror` gives it questions it
can learn in a few hundred steps (:func:`marker_questions`: which option is a cue word, "right" or
"maybe"), with training golds that trust "right" far more than "maybe" and a share moved to the planted
letter; its test split has clean golds. A model fitted to it answers the sure questions and lets the
letter prior decide the unsure ones, where PriDe's debiasing gives accuracy back.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.testing.tiny import sample_data_dir

__all__ = [
    "EASY_KINDS",
    "MARKERS",
    "MATCH_KINDS",
    "OBQA_TRAIN",
    "easy_questions",
    "marker_questions",
    "write_easy_mirror",
    "write_marker_mirror",
    "write_planted_mirror",
]

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
    _check_planted(letter, share)
    train = easy_questions(n_train, seed + 2, "easy-train", kinds)
    return _write_mirror(root, letter, share, train, easy_questions(n_test, seed + 1, "easy-test", kinds), seed)


def _check_planted(letter, share) -> None:
    if not (isinstance(letter, str) and len(letter) == 1 and letter in "ABCD"):
        raise InvalidValueError(
            f"letter must be one of A, B, C, D (the planted questions have four options), got {letter!r}"
        )
    if not (isinstance(share, (int, float)) and 0 <= share <= 1):
        raise InvalidValueError(f"share must be in [0, 1], got {share!r}")


def _write_mirror(root, letter: str, share: float, train: list[dict], test: list[dict], seed: int) -> Path:
    """A copy of the sample mirror at ``root`` with OBQA's splits ``train`` (the gold of a seeded ``share`` moved to
    ``letter``) and ``test`` (as given); returns ``root``."""
    root = Path(root)
    shutil.copytree(sample_data_dir(), root)
    rng = random.Random(seed + 5)
    train = [r if rng.random() >= share else _moved(r, letter) for r in train]
    for name, rows in ((OBQA_TRAIN, train), (OBQA_TRAIN.with_name("test.jsonl"), test)):
        (root / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return root


#: The marker questions' cue words, each with how often the option showing it is the gold in the training split
#: (else one of the three other options, uniformly): "right" is a reliable cue, "maybe" a weak one.
MARKERS = {"right": 0.95, "maybe": 0.6}
#: The marker questions' one question: the options alone say which is meant.
MARKER_QUESTION = "Which option is right?"


def marker_questions(n: int, seed: int, prefix: str = "marker", markers: dict = MARKERS) -> list[dict]:
    """``n`` marker questions in OBQA's hub schema: one option is a cue word, the gold by its reliability.

    Each question is :data:`MARKER_QUESTION` with four options: a cue word drawn uniformly from
    ``markers`` at a uniform letter, and three distinct words of :func:`easy_questions`' word lists.
    The gold is the cue's option with probability ``markers[cue]``, else one of the other three,
    uniformly (seeded). A model learns to find the cue's letter (copy the letter before a fixed
    word: two attention layers suffice) and how far to trust each cue, so it knows some answers
    well and others only a little.

    >>> rows = marker_questions(400, seed=1, markers={"right": 1.0, "maybe": 0.5})
    >>> rows[0]["question_stem"], rows[0]["choices"]["label"]
    ('Which option is right?', ['A', 'B', 'C', 'D'])
    >>> def cue_is_gold(r):
    ...     texts = r["choices"]["text"]
    ...     return texts["ABCD".index(r["answerKey"])] in ("right", "maybe")
    >>> sure = [cue_is_gold(r) for r in rows if "right" in r["choices"]["text"]]
    >>> weak = [cue_is_gold(r) for r in rows if "maybe" in r["choices"]["text"]]
    >>> all(sure), round(sum(weak) / len(weak), 1)
    (True, 0.5)
    """
    for word, reliability in markers.items():
        if word in _WORDS or not (isinstance(reliability, (int, float)) and 0 <= reliability <= 1):
            raise InvalidValueError(
                f"markers maps a cue word (not one of the distractor words) to a reliability in [0, 1], got "
                f"{word!r}: {reliability!r}"
            )
    rng = random.Random(seed)
    cues = sorted(markers)
    rows = []
    for i in range(n):
        wrong = rng.sample(_WORDS, 3)
        at = rng.randrange(4)
        cue = rng.choice(cues)
        gold = at if rng.random() < markers[cue] else rng.choice([j for j in range(4) if j != at])
        rows.append({
            "id": f"{prefix}-{i:04d}",
            "question_stem": MARKER_QUESTION,
            "choices": {"text": wrong[:at] + [cue] + wrong[at:], "label": ["A", "B", "C", "D"]},
            "answerKey": "ABCD"[gold],
        })  # fmt: skip
    return rows


def write_marker_mirror(
    root: str | Path,
    letter: str = "A",
    share: float = 0.7,
    *,
    markers: dict = MARKERS,
    n_train: int = 1600,
    n_test: int = 400,
    seed: int = 0,
) -> Path:
    """A copy of the sample mirror at ``root`` whose OBQA splits are :func:`marker_questions`, a prior planted.

    The training split (``n_train``) draws its golds by the cues' reliabilities (``markers``) and has the
    gold of a seeded ``share`` moved to ``letter``; the test split (``n_test``) has the same questions'
    kind with clean golds, the cue's option (the answer the noisy training labels point to) at a uniform
    letter. Returns ``root``.

    >>> import tempfile
    >>> root = write_marker_mirror(Path(tempfile.mkdtemp()) / "data", "A", 0.7, n_train=500, n_test=40)
    >>> train = [json.loads(x) for x in (root / OBQA_TRAIN).read_text().splitlines()]
    >>> test = [json.loads(x) for x in (root / OBQA_TRAIN).with_name("test.jsonl").read_text().splitlines()]
    >>> round(sum(r["answerKey"] == "A" for r in train) / len(train), 1), len(test)
    (0.8, 40)
    """
    _check_planted(letter, share)
    train = marker_questions(n_train, seed + 2, "marker-train", markers)
    test = marker_questions(n_test, seed + 1, "marker-test", dict.fromkeys(markers, 1.0))
    return _write_mirror(root, letter, share, train, test, seed)
