"""Tiny, offline stand-ins for the paper's Llama + LoRA setup and the other architecture
families people fine-tune (Mistral, Qwen2, Gemma 2/3, Phi-3), for tests and demos.

Nothing here downloads anything. :func:`build_tiny_model` trains a byte-level BPE tokenizer
on the spot and saves it with a randomly initialised causal LM of the chosen family
(``LlamaForCausalLM`` by default; tied or untied embeddings, output layer optionally padded
beyond the tokenizer);
:func:`build_lora_adapter` saves a PEFT LoRA adapter with the paper's configuration
(Table 7: r=8, alpha=16, dropout 0.1, targets q_proj, v_proj and lm_head, bias
"lora_only") whose B matrices are random, so that it really changes the outputs. Both
folders load with the ordinary ``AutoModelForCausalLM`` / ``AutoTokenizer`` /
``peft.PeftModel.from_pretrained`` calls, like a hub checkpoint would.

:func:`sample_data_dir` points at the bundled sample datasets (generated for this project
by ``tools/make_sample_data.py``; they only mimic the hub datasets' schemas).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from lm_eval_evidential.errors import InputNotFoundError, InvalidValueError, NotAFolderError, OutputExistsError
from lm_eval_evidential.params import Integral, Interval, Options, Param, Real
from lm_eval_evidential.records.provenance import ILLUSTRATIVE_MARKER

__all__ = ["build_tiny_model", "build_lora_adapter", "sample_data_dir", "ANSWER_LETTERS", "FAMILIES"]

ANSWER_LETTERS = ("A", "B", "C", "D", "E")

# The paper's prompt (Table 7). The tasks own the canonical renderer; this private copy only
# feeds the tokenizer's training corpus, so a drift in wording costs a few merges, nothing more.
_INSTRUCTION = "Return the label of the correct answer for the question below."

_UNK, _BOS, _EOS, _PAD = "<unk>", "<s>", "</s>", "<pad>"
_SPECIAL_TOKENS = [_UNK, _BOS, _EOS, _PAD]  # ids 0..3, Llama-2 style (unk 0, bos 1, eos 2)
_TOKENIZER_VOCAB_SIZE = 4096  # an upper bound: BPE stops earlier once no pair repeats
# Repeated so that BPE always learns the " A".." E" merges, whatever corpus it is given.
_ANSWER_LINES = [f"Answer: {letter}" for letter in ANSWER_LETTERS] * 50


def sample_data_dir() -> Path:
    """Folder of the bundled sample datasets: ``<hub id>/<config>/<split>.jsonl``.

    It is package data (``lm_eval_evidential/samples``), so the same call works from a
    source checkout and from an installed wheel.
    """
    from lm_eval_evidential.tasks.datasets import BUNDLED_SAMPLES

    path = BUNDLED_SAMPLES
    if not path.is_dir():
        raise InputNotFoundError(
            f"bundled sample data not found at {path}; reinstall lm-eval-evidential, or run "
            "`python tools/make_sample_data.py` from a source checkout to regenerate it"
        )
    return path


def render_prompt(question: str, options: list[str]) -> str:
    lines = [_INSTRUCTION, "", f"Question: {question}", "Choices:"]
    lines += [f"{ANSWER_LETTERS[i]}) {text}" for i, text in enumerate(options)]
    lines.append("Answer:")
    return "\n".join(lines)


def sample_questions() -> Iterator[tuple[str, list[str], int]]:
    """(question, options, index of the right option) for every bundled sample record."""
    for path in sorted(sample_data_dir().rglob("*.jsonl")):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                rec = json.loads(line)
                question = rec.get("question_stem", rec.get("question"))
                choices = rec["choices"]
                if isinstance(choices, dict):  # ARC / OBQA / CSQA: {"text": [...], "label": [...]}
                    options = list(choices["text"])
                    answer = list(choices["label"]).index(rec["answerKey"])
                else:  # MMLU: a plain list and an integer answer
                    options = list(choices)
                    answer = int(rec["answer"])
                yield question, options, answer


def _default_corpus() -> Iterator[str]:
    for question, options, answer in sample_questions():
        yield render_prompt(question, options) + " " + ANSWER_LETTERS[answer]


def _train_tokenizer(corpus: Iterable[str]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    # Byte-level BPE (GPT-2 / Llama-3 style): lossless round trip, no unknown bytes, and the
    # pre-tokenizer splits "Answer:" from " A", so no merge can cross that boundary.
    tok = Tokenizer(models.BPE(unk_token=_UNK))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=_TOKENIZER_VOCAB_SIZE,
        min_frequency=2,
        special_tokens=_SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )

    def texts():
        yield from corpus
        yield from _ANSWER_LINES

    tok.train_from_iterator(texts(), trainer=trainer)
    return tok


def _wrap_tokenizer(tok):
    from transformers import PreTrainedTokenizerFast

    # add_bos_token passed explicitly: transformers 5 then builds the "<s> $A" post-processor
    # itself and rebuilds it identically on load (Llama tokenizers prepend BOS, never EOS).
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=_BOS,
        eos_token=_EOS,
        unk_token=_UNK,
        pad_token=_PAD,
        add_bos_token=True,
        add_eos_token=False,
        padding_side="left",
        model_max_length=1024,
    )


def _check_tokenizer(hf_tok, prompts: list[str]) -> None:
    ids = []
    for letter in ANSWER_LETTERS:
        enc = hf_tok.encode(" " + letter, add_special_tokens=False)
        if len(enc) != 1:
            raise RuntimeError(f"answer {letter!r} encodes as {len(enc)} tokens {enc}; it must be exactly one")
        ids.append(enc[0])
    if len(set(ids)) != len(ids):
        raise RuntimeError(f"answer tokens are not distinct: {dict(zip(ANSWER_LETTERS, ids))}")
    for prompt in prompts:
        base = hf_tok.encode(prompt)
        for letter, tid in zip(ANSWER_LETTERS, ids):
            full = hf_tok.encode(prompt + " " + letter)
            if full != base + [tid]:
                raise RuntimeError(
                    f"appending ' {letter}' does not append exactly its token to the prompt "
                    f"(prompt tail {prompt[-40:]!r}); the tokenizer merges across the boundary"
                )
        if hf_tok.decode(base, skip_special_tokens=True) != prompt:
            raise RuntimeError(f"tokenizer does not round-trip the prompt {prompt[:60]!r}...")


def _fresh_dir(out_dir: Path, overwrite: bool) -> Path:
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise NotAFolderError(f"out_dir {out_dir} exists and is not a folder; pass a folder path")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not overwrite:
        raise OutputExistsError(f"out_dir {out_dir} is not empty; pass a new folder, or overwrite=True to replace it")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.", suffix=".tmp"))


def _publish(tmp: Path, out_dir: Path) -> Path:
    # Built in a sibling temp folder and renamed into place, so a crash never leaves a
    # half-written checkpoint that would later load as if it were complete.
    out_dir = Path(out_dir)
    old = None
    if out_dir.exists():
        old = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.", suffix=".old"))
        os.replace(out_dir, old / "x")
    os.replace(tmp, out_dir)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return out_dir.resolve()


# family -> (transformers config class, extra config arguments given the head size). Values a
# GGUF file does not carry (Gemma's query_pre_attn_scalar, soft-capping) keep their defaults, so
# a tiny model exported to GGUF reads back as the same model.
FAMILIES = {
    "llama": ("LlamaConfig", lambda head_dim: {}),
    "mistral": ("MistralConfig", lambda head_dim: {"sliding_window": None}),
    "qwen2": ("Qwen2Config", lambda head_dim: {}),
    "gemma2": ("Gemma2Config", lambda head_dim: {"head_dim": head_dim}),
    "gemma3": ("Gemma3TextConfig", lambda head_dim: {"head_dim": head_dim}),
    "phi3": ("Phi3Config", lambda head_dim: {}),
}


def build_tiny_model(
    out_dir,
    *,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int | None = None,
    intermediate_size: int | None = None,
    model_vocab_size: int | None = None,
    seed: int = 0,
    corpus: Iterable[str] | None = None,
    max_position_embeddings: int = 1024,
    family: str = "llama",
    tie_word_embeddings: bool = False,
    tokenizer_from=None,
    overwrite: bool = False,
) -> Path:
    """Train a tokenizer, build a random causal LM of ``family`` and save both to ``out_dir``.

    The tokenizer is a byte-level BPE trained on ``corpus`` (default: every bundled sample
    question rendered with the paper's prompt and followed by its answer letter). It encodes
    each of " A".." E" as one distinct token, appending " A" to a prompt ending in
    "Answer:" appends exactly that token, it prepends ``<s>`` like Llama's tokenizers, and
    pad (``<pad>``) differs from eos (``</s>``). These properties are checked before saving.

    ``family`` is one of :data:`FAMILIES` (llama, mistral, qwen2, gemma2, gemma3, phi3): the
    model is built from that family's transformers config class (``FAMILIES[family]``), with
    the family's own layer layout (Phi-3's fused ``qkv_proj``, Gemma's extra norms and logit
    soft-capping, Qwen2's q/k/v biases). ``tie_word_embeddings`` shares the output layer with
    the input embeddings (Llama-3.2, SmolLM, small Qwen2.5, Gemma). ``tokenizer_from``: a
    folder whose tokenizer to reuse instead of training one (saves a second per model).

    The model is float32, seeded by ``torch.manual_seed(seed)``. Its vocabulary is the
    tokenizer's, or ``model_vocab_size`` when that is larger (to emulate heads padded beyond
    the tokenizer: Llama-2/3's 32,000/128,256 rows in benchmarks, Qwen2.5's 151,936 for
    151,665 tokens; the extra rows are never produced by the tokenizer).

    Returns the resolved ``out_dir``. Raises ``FileExistsError`` if it is a non-empty folder,
    unless ``overwrite=True``.
    """
    kv = _check_shape(family, hidden_size, num_layers, num_heads, num_kv_heads)
    if intermediate_size is None:
        # Llama's SwiGLU width: about 8/3 of the hidden size, rounded up to a multiple of 8.
        intermediate_size = -(-(8 * hidden_size // 3) // 8) * 8

    tmp = _fresh_dir(out_dir, overwrite)
    try:
        hf_tok = _tokenizer(tokenizer_from, corpus)
        shape = dict(
            hidden_size=hidden_size,
            intermediate_size=intermediate_size,
            num_hidden_layers=num_layers,
            num_attention_heads=num_heads,
            num_key_value_heads=kv,
            max_position_embeddings=max_position_embeddings,
            tie_word_embeddings=tie_word_embeddings,
        )
        model = _random_model(hf_tok, family, shape, model_vocab_size, seed)
        model.save_pretrained(tmp)
        hf_tok.save_pretrained(tmp)
        (tmp / ILLUSTRATIVE_MARKER).write_text(
            json.dumps(
                {
                    "illustrative_only": True,
                    "why": "random weights and a tokenizer trained on the bundled sample "
                    "questions; its numbers say nothing about real models",
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
        return _publish(tmp, out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


#: What :func:`build_tiny_model` and :func:`build_tiny_adapter` can build, declared once.
FAMILY = Param(Options(tuple(FAMILIES)), noun="tiny model family")
POSITIVE_INT = Param(Interval(Integral, 1))
INIT_STD = Param(Interval(Real, 0, None, closed="neither"), why="a zero B makes the adapter an identity")


def _check_shape(family: str, hidden_size, num_layers, num_heads, num_kv_heads) -> int:
    """Refuse a family or shape :func:`build_tiny_model` cannot build; returns the key/value head count."""
    FAMILY.check("family", family)
    for name, value in (("hidden_size", hidden_size), ("num_layers", num_layers), ("num_heads", num_heads)):
        POSITIVE_INT.check(name, value)
    if hidden_size % num_heads:
        raise InvalidValueError(f"hidden_size ({hidden_size}) must be divisible by num_heads ({num_heads})")
    kv = num_heads if num_kv_heads is None else num_kv_heads
    if kv < 1 or num_heads % kv:
        raise InvalidValueError(f"num_kv_heads must divide num_heads ({num_heads}), got {num_kv_heads!r}")
    return kv


def _tokenizer(tokenizer_from, corpus):
    """The folder ``tokenizer_from``'s tokenizer, or a byte-level BPE trained on ``corpus`` and checked."""
    if tokenizer_from is not None:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(tokenizer_from)
    if isinstance(corpus, str):  # one text, not an iterable of characters
        corpus = [corpus]
    texts = list(_default_corpus() if corpus is None else corpus)
    if not texts:
        raise InvalidValueError("corpus is empty; pass some text, or None for the bundled sample prompts")
    hf_tok = _wrap_tokenizer(_train_tokenizer(texts))
    # Strip the answers back off to get bare prompts for the boundary check.
    prompts = [t.rsplit(" ", 1)[0] for t in texts if t.rsplit(" ", 1)[0].endswith("Answer:")][:64]
    prompts = prompts or [render_prompt("Which is heavier?", ["a feather", "a brick"])]
    _check_tokenizer(hf_tok, prompts)
    return hf_tok


def _random_model(hf_tok, family: str, shape: dict, model_vocab_size, seed: int):
    """A float32 ``family`` model of ``shape`` with random weights seeded by ``seed``, its vocabulary the
    tokenizer's or ``model_vocab_size`` (not smaller)."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    tok_vocab = len(hf_tok)
    if model_vocab_size is not None and model_vocab_size < tok_vocab:
        raise InvalidValueError(
            f"model_vocab_size ({model_vocab_size}) is smaller than the tokenizer's vocabulary "
            f"({tok_vocab}); pass a larger value or None"
        )
    config_class, family_args = FAMILIES[family]
    config = getattr(transformers, config_class)(
        **family_args(shape["hidden_size"] // shape["num_attention_heads"]),
        vocab_size=max(tok_vocab, model_vocab_size or 0),
        **shape,
        bos_token_id=hf_tok.bos_token_id,
        eos_token_id=hf_tok.eos_token_id,
        pad_token_id=hf_tok.pad_token_id,
    )
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config).to(torch.float32).eval()


def build_lora_adapter(
    base_dir,
    out_dir,
    *,
    r: int = 8,
    alpha: int = 16,
    dropout: float = 0.1,
    seed: int = 0,
    init_std: float = 0.02,
    save_embedding_layers: bool = False,
    target_modules: Iterable[str] = ("q_proj", "v_proj", "lm_head"),
    bias: str = "lora_only",
    overwrite: bool = False,
) -> Path:
    """Save a LoRA adapter for the model in ``base_dir`` with the paper's configuration.

    ``peft.LoraConfig(r, lora_alpha=alpha, lora_dropout=dropout,
    target_modules=["q_proj", "v_proj", "lm_head"], bias="lora_only", task_type="CAUSAL_LM")``.
    A fresh LoRA is an identity (B = 0), so every B matrix is re-drawn from
    Normal(0, ``init_std``) with a generator seeded by ``seed``; A keeps PEFT's own
    initialisation under ``torch.manual_seed(seed)``.

    ``save_embedding_layers=False`` keeps the adapter small: with ``lm_head`` targeted, PEFT's
    default ("auto") would also copy the unchanged base ``lm_head`` weight (vocab x hidden)
    into the adapter file and warn. Pass True to get that default layout.
    (``bias="lora_only"`` is inert here: Llama's q_proj/v_proj have no bias.)

    ``target_modules`` and ``bias`` change that configuration (``("q_proj", "v_proj")`` and
    ``"none"``: an adapter vLLM serves as LoRA, see ``harness/adapters.py``).

    Returns the resolved ``out_dir``.
    """
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from lm_eval_evidential.modeling.quiet import peft_wrapping

    base_dir = Path(base_dir)
    if not (base_dir / "config.json").is_file():
        raise InputNotFoundError(f"no config.json in base_dir {base_dir}; pass a folder written by build_tiny_model")
    POSITIVE_INT.check("r", r)
    INIT_STD.check("init_std", init_std)

    tmp = _fresh_dir(out_dir, overwrite)
    try:
        base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
        config = LoraConfig(
            r=r,
            lora_alpha=alpha,
            lora_dropout=dropout,
            target_modules=list(target_modules),
            bias=bias,
            task_type="CAUSAL_LM",
        )
        torch.manual_seed(seed)
        with peft_wrapping():
            model = get_peft_model(base, config)
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, param in model.named_parameters():
                if "lora_B" in name:
                    param.copy_(torch.normal(0.0, init_std, size=tuple(param.shape), generator=gen))
        model.save_pretrained(tmp, save_embedding_layers=save_embedding_layers)
        return _publish(tmp, out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
