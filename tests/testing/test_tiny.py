"""The offline tiny Llama/LoRA builders and the bundled sample datasets."""

from __future__ import annotations

import importlib.util
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from lm_eval_evidential.testing.tiny import sample_data_dir

REPO = Path(__file__).resolve().parents[2]
LETTERS = "ABCDE"


def _prompt(question, options):
    # Written out independently of tiny.render_prompt: the paper's Table 7 template.
    body = "".join(f"{LETTERS[i]}) {o}\n" for i, o in enumerate(options))
    return (
        "Return the label of the correct answer for the question below.\n\n"
        f"Question: {question}\nChoices:\n{body}Answer:"
    )


def _read(rel):
    path = sample_data_dir() / rel
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


# ------------------------------------------------------------------ tokenizer and model


@pytest.fixture(scope="module")
def tok(tiny_model):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model)


def _answer_ids(tok, letters=LETTERS):
    return [tok.encode(" " + c, add_special_tokens=False) for c in letters]


def test_answer_tokens_are_single_and_distinct(tok):
    ids = _answer_ids(tok)
    assert all(len(i) == 1 for i in ids), ids
    assert len({i[0] for i in ids}) == 5
    assert all(tok.convert_ids_to_tokens(i[0]) == "Ġ" + c for i, c in zip(ids, LETTERS))


def test_special_tokens(tok):
    assert None not in (tok.bos_token_id, tok.eos_token_id, tok.pad_token_id, tok.unk_token_id)
    assert tok.pad_token_id != tok.eos_token_id
    assert tok.encode("Answer:")[0] == tok.bos_token_id  # Llama-style: BOS prepended, no EOS
    assert tok.encode("Answer:")[-1] != tok.eos_token_id


@pytest.mark.parametrize(
    "rel",
    [
        "allenai/openbookqa/main/test.jsonl",
        "allenai/ai2_arc/ARC-Challenge/test.jsonl",
        "tau/commonsense_qa/default/validation.jsonl",
        "cais/mmlu/abstract_algebra/test.jsonl",
    ],
)
def test_answer_appends_exactly_one_token(tok, rel):
    ids = [i[0] for i in _answer_ids(tok)]
    for rec in _read(rel)[:15]:
        q = rec.get("question_stem", rec.get("question"))
        opts = rec["choices"]["text"] if isinstance(rec["choices"], dict) else rec["choices"]
        prompt = _prompt(q, opts)
        base = tok(prompt)["input_ids"]
        assert tok.decode(base, skip_special_tokens=True) == prompt
        for letter, tid in zip(LETTERS, ids):
            full = tok(prompt + " " + letter)["input_ids"]
            assert len(full) == len(base) + 1
            assert full == base + [tid]


def test_unseen_text_round_trips(tok):
    text = "Ünïcödé, emoji 🙂 and tabs\tsurvive: 3.14 + x^2?"
    assert tok.decode(tok.encode(text), skip_special_tokens=True) == text


def test_model_config(tiny_model, tok):
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(tiny_model)
    assert cfg.model_type == "llama"
    assert cfg.vocab_size == len(tok)
    assert cfg.tie_word_embeddings is False
    assert (cfg.bos_token_id, cfg.eos_token_id, cfg.pad_token_id) == (
        tok.bos_token_id,
        tok.eos_token_id,
        tok.pad_token_id,
    )
    assert (Path(tiny_model) / "model.safetensors").is_file()
    assert not list(Path(tiny_model).glob("*.bin"))


def _last_logits(model, tok, prompts):
    import torch

    enc = tok(prompts, return_tensors="pt", padding=True)
    with torch.no_grad():
        return model(**enc).logits[:, -1, :].float()


def test_adapter_loads_and_changes_logits(tiny_model, tiny_adapter, tok):
    import torch
    from peft import PeftModel
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    cfg = json.loads((Path(tiny_adapter) / "adapter_config.json").read_text())
    assert (cfg["r"], cfg["lora_alpha"], cfg["lora_dropout"]) == (8, 16, 0.1)
    assert sorted(cfg["target_modules"]) == ["lm_head", "q_proj", "v_proj"]
    assert (cfg["bias"], cfg["task_type"]) == ("lora_only", "CAUSAL_LM")

    recs = _read("allenai/openbookqa/main/test.jsonl")[:4]
    prompts = [_prompt(r["question_stem"], r["choices"]["text"]) for r in recs]
    base = AutoModelForCausalLM.from_pretrained(tiny_model).eval()
    before = _last_logits(base, tok, prompts)
    peft_model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model), tiny_adapter).eval()
    after = _last_logits(peft_model, tok, prompts)

    assert torch.isfinite(after).all()
    ids = [i[0] for i in _answer_ids(tok, "ABCD")]
    assert (after[:, ids] - before[:, ids]).abs().max() > 1e-4

    # The lm_head LoRA really came back from disk (a silent skip would leave B = 0 or random).
    saved = load_file(Path(tiny_adapter) / "adapter_model.safetensors")
    b_key = "base_model.model.lm_head.lora_B.weight"
    assert b_key in saved and saved[b_key].abs().max() > 0
    lm_head = peft_model.base_model.model.lm_head
    assert torch.equal(lm_head.lora_B["default"].weight, saved[b_key])
    assert torch.equal(lm_head.lora_A["default"].weight, saved["base_model.model.lm_head.lora_A.weight"])


def test_builders_are_seeded_and_vocab_can_be_padded(tmp_path, tok):
    from transformers import AutoConfig

    from lm_eval_evidential.testing.tiny import build_tiny_model

    kw = dict(hidden_size=32, num_layers=1, num_heads=2)
    a = build_tiny_model(tmp_path / "a", seed=7, model_vocab_size=len(tok) + 100, **kw)
    b = build_tiny_model(tmp_path / "b", seed=7, model_vocab_size=len(tok) + 100, **kw)
    c = build_tiny_model(tmp_path / "c", seed=8, model_vocab_size=len(tok) + 100, **kw)
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    assert (a / "model.safetensors").read_bytes() != (c / "model.safetensors").read_bytes()
    assert (a / "tokenizer.json").read_bytes() == (b / "tokenizer.json").read_bytes()
    assert AutoConfig.from_pretrained(a).vocab_size == len(tok) + 100

    with pytest.raises(ValueError, match="model_vocab_size"):
        build_tiny_model(tmp_path / "d", model_vocab_size=10, **kw)
    with pytest.raises(FileExistsError, match="overwrite"):
        build_tiny_model(a, **kw)
    with pytest.raises(ValueError, match="divisible"):
        build_tiny_model(tmp_path / "e", hidden_size=30, num_heads=4)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"family": "bert"}, r"unknown tiny model family 'bert'; choose one of llama, mistral, qwen2, gemma2, gemma3"),
        ({"hidden_size": 0}, r"hidden_size=0 must be an integer >= 1"),
        ({"num_layers": 1.0}, r"num_layers=1\.0 must be an integer >= 1"),
    ],
)
def test_a_shape_the_builder_cannot_build_is_refused_before_anything_is_written(tmp_path, kwargs, message):
    from lm_eval_evidential.testing.tiny import build_tiny_model

    with pytest.raises(ValueError, match=message):
        build_tiny_model(tmp_path / "m", **kwargs)
    assert not (tmp_path / "m").exists()


def test_adapter_settings_are_refused_with_their_declared_words(tiny_model, tmp_path):
    from lm_eval_evidential.testing.tiny import build_lora_adapter

    with pytest.raises(ValueError, match=r"r=0 must be an integer >= 1"):
        build_lora_adapter(tiny_model, tmp_path / "a", r=0)
    with pytest.raises(ValueError, match=r"init_std=0 must be a finite number > 0 \(a zero B makes the adapter an"):
        build_lora_adapter(tiny_model, tmp_path / "a", init_std=0)


def test_answer_tokens_survive_any_corpus(tmp_path):
    from transformers import AutoTokenizer

    from lm_eval_evidential.testing.tiny import build_tiny_model

    out = build_tiny_model(
        tmp_path / "m", corpus="a tiny corpus without letters", hidden_size=16, num_layers=1, num_heads=2
    )
    ids = _answer_ids(AutoTokenizer.from_pretrained(out))
    assert all(len(i) == 1 for i in ids) and len({i[0] for i in ids}) == 5


# ------------------------------------------------------------------ bundled sample data

OBQA = {"train": 240, "validation": 60, "test": 120}
ARC = ["ARC-Challenge", "ARC-Easy"]
CSQA = {"validation": 100, "train": 40}
MMLU = ["abstract_algebra", "college_mathematics", "high_school_mathematics"]


def _is_str_list(x, n=None):
    return (
        isinstance(x, list)
        and all(isinstance(s, str) and s.strip() == s and s for s in x)
        and (n is None or len(x) == n)
    )


def test_sample_dir_is_package_data():
    import lm_eval_evidential

    assert sample_data_dir() == Path(lm_eval_evidential.__file__).resolve().parent / "samples"
    readme = (sample_data_dir() / "README.md").read_text()
    assert "tools/make_sample_data.py" in readme


def test_sample_readme_table_lists_every_file_with_its_record_count():
    """The bundled README's table (`file` | records) is the truth about the files: every .jsonl is
    listed, with its exact number of lines, and no listed file is missing."""
    import re

    listed = {
        m[1]: int(m[2])
        for m in re.finditer(
            r"^\| `([^`]+\.jsonl)` \| *(\d+) *\|$", (sample_data_dir() / "README.md").read_text(), re.M
        )
    }
    present = {
        str(p.relative_to(sample_data_dir())): sum(1 for line in p.read_text().splitlines() if line.strip())
        for p in sample_data_dir().rglob("*.jsonl")
    }
    assert listed and listed == present


@pytest.mark.parametrize("split", OBQA)
def test_openbookqa_schema(split):
    recs = _read(f"allenai/openbookqa/main/{split}.jsonl")
    assert len(recs) == OBQA[split]
    for r in recs:
        assert list(r) == ["id", "question_stem", "choices", "answerKey"]
        assert isinstance(r["id"], str) and isinstance(r["question_stem"], str) and r["question_stem"]
        assert list(r["choices"]) == ["text", "label"]
        assert r["choices"]["label"] == ["A", "B", "C", "D"]
        assert _is_str_list(r["choices"]["text"], 4) and len(set(r["choices"]["text"])) == 4
        assert r["answerKey"] in r["choices"]["label"]
    assert len({r["id"] for r in recs}) == len(recs)


def test_openbookqa_splits_do_not_overlap():
    def keys(split):
        return {
            (r["question_stem"], r["choices"]["text"][LETTERS.index(r["answerKey"])])
            for r in _read(f"allenai/openbookqa/main/{split}.jsonl")
        }

    assert not keys("train") & keys("test") and not keys("train") & keys("validation")
    assert not keys("validation") & keys("test")


@pytest.mark.parametrize("config", ARC)
def test_arc_schema(config):
    recs = _read(f"allenai/ai2_arc/{config}/test.jsonl")
    assert len(recs) == 80
    shapes = Counter()
    for r in recs:
        assert list(r) == ["id", "question", "choices", "answerKey"]
        assert isinstance(r["id"], str) and isinstance(r["question"], str) and r["question"]
        assert list(r["choices"]) == ["text", "label"]
        labels, texts = r["choices"]["label"], r["choices"]["text"]
        k = len(labels)
        assert _is_str_list(texts, k) and len(set(texts)) == k and 3 <= k <= 5
        numeric = labels == [str(i + 1) for i in range(k)]
        assert numeric or labels == list(LETTERS[:k])
        assert isinstance(r["answerKey"], str) and r["answerKey"] in labels
        shapes[(k, numeric)] += 1
    assert shapes[(4, False)] > 40  # mostly four lettered options, as in the real ARC
    assert sum(v for (k, _), v in shapes.items() if k == 3) >= 3
    assert sum(v for (k, _), v in shapes.items() if k == 5) >= 3
    assert sum(v for (_, num), v in shapes.items() if num) >= 3


def test_arc_configs_differ_from_each_other_and_from_obqa():
    stems = lambda rel, f: {r[f] for r in _read(rel)}  # noqa: E731
    c = stems("allenai/ai2_arc/ARC-Challenge/test.jsonl", "question")
    e = stems("allenai/ai2_arc/ARC-Easy/test.jsonl", "question")
    o = set().union(*(stems(f"allenai/openbookqa/main/{s}.jsonl", "question_stem") for s in OBQA))
    assert len(c & e) < 10 and not (c | e) & o


@pytest.mark.parametrize("split", CSQA)
def test_commonsense_qa_schema(split):
    recs = _read(f"tau/commonsense_qa/default/{split}.jsonl")
    assert len(recs) == CSQA[split]
    for r in recs:
        assert list(r) == ["id", "question", "question_concept", "choices", "answerKey"]
        assert re.fullmatch(r"[0-9a-f]{32}", r["id"])
        assert isinstance(r["question"], str) and isinstance(r["question_concept"], str) and r["question_concept"]
        assert list(r["choices"]) == ["label", "text"]
        assert r["choices"]["label"] == list(LETTERS)
        assert _is_str_list(r["choices"]["text"], 5) and len(set(r["choices"]["text"])) == 5
        assert r["answerKey"] in LETTERS
    share_e = sum(r["answerKey"] == "E" for r in recs) / len(recs)
    assert 0.15 <= share_e <= 0.25
    assert len({r["id"] for r in recs}) == len(recs)


@pytest.mark.parametrize("subject", MMLU)
def test_mmlu_schema(subject):
    recs = _read(f"cais/mmlu/{subject}/test.jsonl")
    assert len(recs) == 25
    for r in recs:
        assert list(r) == ["question", "subject", "choices", "answer"]
        assert r["subject"] == subject and isinstance(r["question"], str) and r["question"]
        assert _is_str_list(r["choices"], 4) and len(set(r["choices"])) == 4
        assert type(r["answer"]) is int and 0 <= r["answer"] <= 3
    assert len(Counter(r["answer"] for r in recs)) == 4


def test_mmlu_arithmetic_answers_are_right():
    # Spot-check the computed keys with an independent parse of two templates.
    from fractions import Fraction

    checked = 0
    for r in _read("cais/mmlu/high_school_mathematics/test.jsonl"):
        right = r["choices"][r["answer"]]
        if m := re.fullmatch(r"What is (\d+)% of (\d+)\?", r["question"]):
            assert Fraction(right) == Fraction(int(m[1]) * int(m[2]), 100)
            checked += 1
        elif m := re.fullmatch(
            r"What is the distance between the points \((-?\d+), (-?\d+)\) and "
            r"\((-?\d+), (-?\d+)\)\?",
            r["question"],
        ):
            x1, y1, x2, y2 = map(int, m.groups())
            assert int(right) ** 2 == (x2 - x1) ** 2 + (y2 - y1) ** 2
            checked += 1
    assert checked >= 2


def test_generator_reproduces_committed_files(tmp_path):
    spec = importlib.util.spec_from_file_location("make_sample_data", REPO / "tools" / "make_sample_data.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write_all(tmp_path)

    def listing(root):
        return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())

    assert listing(tmp_path) == listing(sample_data_dir())
    for rel in listing(tmp_path):
        assert (tmp_path / rel).read_bytes() == (sample_data_dir() / rel).read_bytes(), rel
