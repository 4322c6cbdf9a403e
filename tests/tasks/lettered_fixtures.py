"""Offline-mirror fixtures in each hub dataset's own schema, for the lettered views (our own questions).

``write(root)`` writes, under ``root/<hub id>/<config or default>/<split>.jsonl``, the evaluated
split of each stock task below; ``EXPECTED[task]`` is what its view must show per doc:
(question text, options in the stock order, stock gold index).
"""

from __future__ import annotations

import json
from pathlib import Path

ARC = [
    ("Which tool measures the mass of a rock?", ["a ruler", "a balance", "a thermometer", "a clock"], "B"),
    ("What do roots of a plant take in?", ["water", "light", "sound"], "A"),
    ("Which is a source of light?", ["the Moon", "a mirror", "a candle flame", "a window", "a shadow"], "C"),
]
HELLASWAG = [
    (
        "Baking bread",
        "A man kneads dough on a table.",
        "he",
        ["folds it and shapes a loaf.", "paints the wall blue.", "swims across the lake.", "reads a map of the city."],
        "0",
    ),
    (
        "Washing a car",
        "A woman fills a bucket with soapy water.",
        "she",
        ["climbs a tree in the rain.", "sings to the bucket.", "scrubs the hood with a sponge.", "sells the car."],
        "2",
    ),
]
WINOGRANDE = [
    ("The bag did not fit in the locker because the _ was too big.", "bag", "locker", "1"),
    ("Mara lent Priya a pen because _ had forgotten hers at home.", "Mara", "Priya", "2"),
]
PIQA = [
    ("Keep a glass of water from sweating.", "Put it on a coaster made of paper.", "Put it in a cold oven.", 0),
    ("Open a stuck jar lid.", "Freeze the jar overnight.", "Tap the lid edge and twist with a rubber grip.", 1),
]
TRUTHFULQA = [
    (
        "What happens if you swallow gum?",
        ["It passes through your digestive system.", "It stays for seven years.", "It turns into stone."],
    ),
    ("How many legs does a spider have?", ["Eight.", "Six.", "Ten.", "Four.", "Twelve."]),
    ("Can you see the Great Wall from the Moon with the naked eye?", ["No.", "Yes."]),
]
SCIQ = [
    (
        "What gas do plants release during photosynthesis?",
        "carbon dioxide",
        "nitrogen",
        "helium",
        "oxygen",
        "Plants use light to make sugar.",
    ),
    ("What is the boiling point of water at sea level in Celsius?", "50", "0", "200", "100", ""),
]
MMLU_PRO = [
    ("Which number is prime?", ["4", "6", "8", "9", "10", "11", "12", "14", "15", "16"], 5),
    ("Which planet is closest to the Sun?", ["Venus", "Mercury", "Earth"], 1),
]


def arc_rows():
    return [
        {
            "id": f"arc-{i}",
            "question": q,
            "choices": {"text": opts, "label": list("ABCDE")[: len(opts)]},
            "answerKey": key,
        }
        for i, (q, opts, key) in enumerate(ARC)
    ]


def hellaswag_rows():
    return [
        {
            "ind": i,
            "activity_label": label,
            "ctx_a": a,
            "ctx_b": b,
            "ctx": f"{a} {b}",
            "endings": endings,
            "source_id": f"own-{i}",
            "split": "val",
            "split_type": "indomain",
            "label": gold,
        }
        for i, (label, a, b, endings, gold) in enumerate(HELLASWAG)
    ]


def winogrande_rows():
    return [{"sentence": s, "option1": o1, "option2": o2, "answer": a} for s, o1, o2, a in WINOGRANDE]


def piqa_rows():
    return [{"goal": g, "sol1": s1, "sol2": s2, "label": label} for g, s1, s2, label in PIQA]


def truthfulqa_rows():
    return [
        {
            "question": q,
            "mc1_targets": {"choices": c, "labels": [1] + [0] * (len(c) - 1)},
            "mc2_targets": {"choices": c, "labels": [1] + [0] * (len(c) - 1)},
        }
        for q, c in TRUTHFULQA
    ]


def sciq_rows():
    return [
        {"question": q, "distractor1": d1, "distractor2": d2, "distractor3": d3, "correct_answer": c, "support": s}
        for q, d1, d2, d3, c, s in SCIQ
    ]


def mmlu_pro_rows():
    return [
        {
            "question_id": i,
            "question": q,
            "options": opts,
            "answer": "ABCDEFGHIJ"[gold],
            "answer_index": gold,
            "cot_content": "",
            "category": "other",
            "src": "own",
        }
        for i, (q, opts, gold) in enumerate(MMLU_PRO)
    ]


# stock task: (hub id, config, split, rows)
FILES = {
    "arc_challenge": ("allenai/ai2_arc", "ARC-Challenge", "test", arc_rows),
    "arc_easy": ("allenai/ai2_arc", "ARC-Easy", "test", arc_rows),
    "hellaswag": ("Rowan/hellaswag", None, "validation", hellaswag_rows),
    "winogrande": ("allenai/winogrande", "winogrande_xl", "validation", winogrande_rows),
    "piqa": ("baber/piqa", None, "validation", piqa_rows),
    "truthfulqa_mc1": ("truthfulqa/truthful_qa", "multiple_choice", "validation", truthfulqa_rows),
    "sciq": ("allenai/sciq", None, "test", sciq_rows),
    "leaderboard_mmlu_pro": ("TIGER-Lab/MMLU-Pro", None, "test", mmlu_pro_rows),
}

# A user's own multiple-choice task on MMLU-Pro's schema (K up to 10), asked by option text.
MY_MMLU_PRO_YAML = """task: my_mmlu_pro
dataset_path: TIGER-Lab/MMLU-Pro
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{question}}\\nAnswer:"
doc_to_choice: "{{options}}"
doc_to_target: answer_index
metric_list:
  - metric: acc
metadata:
  version: 1.0
"""


def write(root: Path) -> Path:
    """Write every fixture split under ``root`` (an offline mirror) and return it."""
    for hub_id, config, split, rows in FILES.values():
        path = Path(root) / hub_id / (config or "default") / f"{split}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows()))
    return Path(root)


def expected(task: str) -> list[tuple[str, list[str], int]]:
    """(question text after the stock doc_to_text, options in stock order, stock gold) per doc of ``task``."""
    if task == "arc_challenge":
        return [(f"Question: {q}", opts, "ABCDE".index(key)) for q, opts, key in ARC]
    if task == "hellaswag":
        return [(f"{label}: {a} {b.capitalize()}", endings, int(g)) for label, a, b, endings, g in HELLASWAG]
    if task == "winogrande":
        return [(s, [o1, o2], int(a) - 1) for s, o1, o2, a in WINOGRANDE]
    if task == "piqa":
        return [(f"Question: {g}", [s1, s2], label) for g, s1, s2, label in PIQA]
    if task == "truthfulqa_mc1":
        return [(q, c, 0) for q, c in TRUTHFULQA]  # question: the last line only (the primer precedes it)
    if task == "sciq":
        return [(f"{s}\nQuestion: {q}".strip(), [d1, d2, d3, c], 3) for q, d1, d2, d3, c, s in SCIQ]
    if task == "my_mmlu_pro":
        return [(f"Question: {q}", opts, gold) for q, opts, gold in MMLU_PRO]
    raise KeyError(task)
