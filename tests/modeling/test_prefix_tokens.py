"""Texts sharing a few-shot block, tokenised with the block once: always the tokenizer's own ids.

Every tokenizer family here is trained on the spot (a few hundred tokens, well under a second each). The oracle
is the tokenizer's ``encode_batch`` on every whole text; the texts are built to be hostile at and around the cut
(whitespace runs, digits, contractions, non-ASCII, combining marks, special-token text, the few-shot delimiter
inside the questions, a text that is the shared block itself).
"""

from __future__ import annotations

import functools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lm_eval_evidential.modeling import prefix_tokens
from lm_eval_evidential.modeling.prefix_tokens import cut_rule, encode_shared_prefixes, find_cut, text_groups

SPECIALS = ["<s>", "</s>", "[CLS]", "[SEP]", "<unk>"]
PIECES = [
    "Question", "Answer", ":", " ", "  ", "\n", "\n\n", " \n", "\t", "\r\n", "'s", "'ll", "don't", "7", "123",
    "4567", "é", "e\u0301", "ü", "日本", "🙂", "Q", "x", "A)", " A", "\u00a0", "İ", "<s>", "[SEP]", "a b",
]  # fmt: skip


def _corpus() -> list[str]:
    from lm_eval_evidential.testing.tiny import sample_questions

    shots = []
    for question, options, answer in list(sample_questions())[:60]:
        lines = [f"Question: {question}", *(f"{'ABCDE'[i]}) {o}" for i, o in enumerate(options)), "Answer:"]
        shots.append("\n".join(lines) + " " + "ABCDE"[answer])
    return ["\n\n".join(shots[i : i + 5]) for i in range(0, 60, 5)] + ["".join(PIECES) * 3, " ".join(PIECES) * 3]


def _template(tok, single: str):
    from tokenizers import processors

    names = [w for w in single.split() if w != "$A"]
    return processors.TemplateProcessing(single=single, special_tokens=[(n, tok.token_to_id(n)) for n in names])


@functools.cache
def build(family: str):
    """A 🤗 tokenizers ``Tokenizer`` of ``family``, trained on few-shot prompts."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    bytes_only = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    bpe_trainer = trainers.BpeTrainer(
        vocab_size=500, special_tokens=SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    trainer = bpe_trainer
    if family == "gpt2":  # byte-level BPE, GPT-2's regex, BOS prepended (SmolLM2, Llama-style test tokenizer)
        tok.pre_tokenizer = byte_level
    elif family == "llama3":  # Llama-3: a Split regex, then bytes; NFC as Qwen2 has, and a non-ASCII Replace
        tok.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Replace("\u00a0", " ")])
        split = pre_tokenizers.Split(Regex(prefix_tokens.LLAMA3_REGEX), behavior="isolated")
        tok.pre_tokenizer = pre_tokenizers.Sequence([split, bytes_only])
    elif family == "qwen2":
        tok.normalizer = normalizers.NFC()
        split = pre_tokenizers.Split(Regex(prefix_tokens.QWEN2_REGEX), behavior="isolated")
        tok.pre_tokenizer = pre_tokenizers.Sequence([split, bytes_only])
    elif family in {"digits", "digit_runs"}:  # digits split off (one by one, or runs) before GPT-2's regex
        digits = pre_tokenizers.Digits(individual_digits=family == "digits")
        tok.pre_tokenizer = pre_tokenizers.Sequence([digits, byte_level])
    elif family == "metaspace_bpe":  # SentencePiece-style BPE with a Metaspace that splits
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first", split=True)
        trainer = trainers.BpeTrainer(vocab_size=500, special_tokens=SPECIALS)
    elif family == "unigram":  # T5-like: NFKC, words, "▁" before each
        tok = Tokenizer(models.Unigram())
        tok.normalizer = normalizers.NFKC()
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace(prepend_scheme="always")]
        )
        trainer = trainers.UnigramTrainer(vocab_size=300, special_tokens=SPECIALS, unk_token="<unk>")
    elif family == "bert":  # WordPiece, BERT's normalizer and pre-tokenizer, [CLS] … [SEP]
        tok = Tokenizer(models.WordPiece(unk_token="<unk>"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        trainer = trainers.WordPieceTrainer(vocab_size=400, special_tokens=SPECIALS)
    elif family == "cleaned":  # BERT's cleaning makes line breaks spaces: GPT-2's regex then joins " Question"
        tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=False, lowercase=False)
        tok.pre_tokenizer = byte_level
    elif family in {"legacy", "lstrip"}:
        if family == "legacy":  # Llama-2's legacy SentencePiece: "▁" prepended, one BPE over the whole text
            tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
            trainer = trainers.BpeTrainer(vocab_size=500, special_tokens=SPECIALS)
        else:
            tok.pre_tokenizer = byte_level
    else:
        raise ValueError(family)
    tok.train_from_iterator(_corpus(), trainer=trainer)
    if family == "bert":
        tok.post_processor = processors.BertProcessing(
            ("[SEP]", tok.token_to_id("[SEP]")), ("[CLS]", tok.token_to_id("[CLS]"))
        )
    elif family == "unigram":
        tok.post_processor = _template(tok, "$A </s>")
    elif family == "llama3":
        tok.post_processor = processors.Sequence([processors.ByteLevel(trim_offsets=False), _template(tok, "<s> $A")])
    elif family != "qwen2":
        tok.post_processor = _template(tok, "<s> $A")
    if family == "lstrip":  # RoBERTa's <mask>: an added token that eats the whitespace before it
        from tokenizers import AddedToken

        tok.add_special_tokens([AddedToken("Question", lstrip=True)])
    return tok


CUT_FAMILIES = ["gpt2", "llama3", "qwen2", "digits", "digit_runs", "metaspace_bpe", "unigram", "bert"]
WHOLE_FAMILIES = ["legacy", "lstrip", "cleaned"]


def oracle(tok, texts, special):
    return [e.ids for e in tok.encode_batch(texts, add_special_tokens=special)]


class Counting:
    """``tok`` with the characters it was given to tokenise counted."""

    def __init__(self, tok):
        self._tok, self.chars, self.calls = tok, 0, 0

    def encode_batch_fast(self, texts, add_special_tokens):
        self.chars += sum(map(len, texts))
        self.calls += 1
        return self._tok.encode_batch_fast(texts, add_special_tokens=add_special_tokens)

    def __getattr__(self, name):
        return getattr(self._tok, name)


def few_shot_prompts(n: int, shots: int = 5) -> list[str]:
    """lm-eval's shape: one fixed block of ``shots`` answered questions, then each question."""
    from lm_eval_evidential.testing.tiny import render_prompt, sample_questions

    questions = list(sample_questions())
    block = "\n\n".join(render_prompt(q, o) + " " + "ABCDE"[a] for q, o, a in questions[:shots])
    return [block + "\n\n" + render_prompt(q, o) for q, o, _ in questions[shots : shots + n]]


@pytest.mark.parametrize("family", CUT_FAMILIES + WHOLE_FAMILIES)
@pytest.mark.parametrize("special", [True, False])
def test_few_shot_prompts_are_cut_where_the_pipeline_allows_and_keep_their_ids(family, special):
    tok = build(family)
    texts = few_shot_prompts(12)
    counting = Counting(tok)
    assert encode_shared_prefixes(counting, texts, add_special_tokens=special) == oracle(tok, texts, special)
    whole = sum(map(len, texts))
    if family in WHOLE_FAMILIES:
        assert cut_rule(tok) is None
        assert counting.chars == whole
    else:
        assert cut_rule(tok) is not None
        assert counting.chars < 0.4 * whole  # the block once, then only each question (and the last shot's tail)


block_pieces = st.lists(st.sampled_from(PIECES), min_size=1, max_size=10).map("".join)


@st.composite
def prompt_sets(draw):
    """Texts sharing a block of shots (joined by a delimiter that also occurs in the questions), each with its own
    question; sometimes one text is the block itself, or the block cut short."""
    delimiter = draw(st.sampled_from(["\n\n", "\n", " ", "\n\n\n", "\n \n"]))
    shot = draw(st.sampled_from(["Question:{}\nAnswer:{}", "Question: {}\nAnswer: {}", "{}\n{}"]))
    shots = draw(st.lists(block_pieces.map(lambda s: shot.format(s, s[:3])), min_size=1, max_size=4))
    block = delimiter.join(shots) + delimiter
    questions = draw(st.lists(block_pieces, min_size=1, max_size=5))
    texts = [block + draw(st.sampled_from(["", "Question:", "Q", " "])) + q for q in questions]
    if draw(st.booleans()):
        texts.append(block)
    if draw(st.booleans()):
        texts.append(block[: draw(st.integers(0, len(block)))])
    return draw(st.permutations(texts))


@pytest.mark.parametrize("family", CUT_FAMILIES + WHOLE_FAMILIES)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=prompt_sets(), special=st.booleans(), min_shared=st.sampled_from([1, 4, 16]))
def test_ids_equal_the_whole_texts_ids(family, texts, special, min_shared):
    tok = build(family)
    counting = Counting(tok)
    got = encode_shared_prefixes(counting, texts, add_special_tokens=special, min_shared=min_shared, min_saved=-99)
    assert got == oracle(tok, texts, special)
    assert counting.calls <= 2  # no group's check failed (a third call would tokenise it whole)


def shared_chars(groups) -> int:
    return sum((len(members) - 1) * shared for members, shared in groups)


@settings(max_examples=300, deadline=None)
@given(texts=st.lists(st.text(st.sampled_from("ab\n "), max_size=8), max_size=10), min_shared=st.integers(1, 4))
def test_groups_share_their_prefix_and_at_least_as_much_as_runs_of_neighbours(texts, min_shared):
    import os

    grouped = text_groups(texts, min_shared)
    seen = [i for members, _ in grouped for i in members]
    assert len(seen) == len(set(seen))
    for members, shared in grouped:
        assert len(members) >= 2 and shared >= min_shared
        assert len(os.path.commonprefix([texts[i] for i in members])) == shared
    # the oracle: sorted texts cut wherever neighbours share fewer than min_shared characters, each run one group
    order = sorted(range(len(texts)), key=texts.__getitem__)
    runs, run = [], order[:1]
    for a, b in zip(order, order[1:]):
        if len(os.path.commonprefix([texts[a], texts[b]])) >= min_shared:
            run.append(b)
        else:
            runs.append(run)
            run = [b]
    runs.append(run)
    flat = [(r, len(os.path.commonprefix([texts[i] for i in r]))) for r in runs if len(r) > 1]
    assert shared_chars(grouped) >= shared_chars(flat)


def test_a_component_in_another_versions_form_is_tokenised_whole():
    # tokenizers before 0.15 wrote Metaspace with add_prefix_space, not prepend_scheme: not a known form
    tok = build("unigram")

    class OldState:
        def __init__(self, component, drop):
            self.state = json.loads(component.__getstate__())
            for stage in self.state.get("pretokenizers", []):
                stage.pop(drop, None)

        def __getstate__(self):
            return json.dumps(self.state).encode()

    class Old:
        model, normalizer, post_processor = tok.model, tok.normalizer, tok.post_processor
        pre_tokenizer = OldState(tok.pre_tokenizer, "prepend_scheme")
        get_added_tokens_decoder = tok.get_added_tokens_decoder

    assert cut_rule(tok) is not None and cut_rule(Old()) is None


def test_two_blocks_behind_one_instruction_are_two_groups():
    # lm-eval's few-shot prompts of two blocks that share only the instruction before them
    texts = few_shot_prompts(6)
    other = [t.replace("\n\nQuestion:", "\n\nQuestion: (another block)", 1) for t in texts]
    groups = text_groups(texts + other)
    assert sorted(sorted(m) for m, _ in groups) == [list(range(6)), list(range(6, 12))]
    tok = build("gpt2")
    counting = Counting(tok)
    assert encode_shared_prefixes(counting, texts + other) == oracle(tok, texts + other, True)
    assert counting.chars < 0.4 * sum(len(t) for t in texts + other)


@pytest.mark.parametrize(
    ("prefix", "rule", "cut"),
    [
        ("ab\n\nQuestion", "newline", 4),  # before the letter after the last line break
        ("ab\n\nQ", "newline", 4),  # the letter is shared text too
        ("ab\n\n", "newline", None),  # a cut at the end would let the text after it join the line break
        ("x\nQ y\n1", "newline", 2),  # a digit after a line break is no cut
        ("x\nQ y\né", "newline", 2),  # nor a non-ASCII letter
        ("Answer: B\n\nQuestion: w", "space", 20),  # one space between ASCII and a letter
        ("a  b", "space", None),  # a run of spaces is no cut
        ("é b ", "space", None),
    ],
)
def test_find_cut(prefix, rule, cut):
    assert find_cut(prefix, rule) == cut


@pytest.mark.slow
@pytest.mark.parametrize("shots", [5, 25])
def test_smollm2s_tokenizer_cuts_few_shot_prompts_and_keeps_their_ids(shots):
    # the real tokenizer (fetched on first use: lm_eval_evidential/testing/smollm2.py), 40 questions behind one block
    from transformers import AutoTokenizer

    from lm_eval_evidential.testing.smollm2 import smollm2_checkpoint

    tok = AutoTokenizer.from_pretrained(smollm2_checkpoint()).backend_tokenizer
    assert cut_rule(tok) is not None
    texts = few_shot_prompts(40, shots)
    texts += [t.replace("\n\nQuestion:", "\n\nQuestion:\n\n 12'll \u00a0é", 1) for t in texts[:5]]
    for special in (True, False):
        counting = Counting(tok)
        assert encode_shared_prefixes(counting, texts, add_special_tokens=special) == oracle(tok, texts, special)
        assert counting.calls == 2 and counting.chars < 0.3 * sum(map(len, texts))
