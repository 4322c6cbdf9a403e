"""The checkpoint matrix of docs/training.md ("Which checkpoints plug in"): every
architecture family people fine-tune for MCQA x every form a fine-tuned checkpoint comes in.

Rows: tiny random-weight models built from each family's transformers config class with the
locally trained tokenizer (``tiny_family``). Columns: an adapter trained with the defaults and
evaluated with ``peft=`` alone; that adapter merged into a full checkpoint; a PEFT adapter
with ``modules_to_save=["lm_head"]``; the merged checkpoint as a float32 GGUF file
(``gguf_file=``); an IB-EDL adapter. Each cell evaluates through lm-eval and checks the
records' logits against the model's own logits computed separately (one unpadded prompt at a
time, by transformers/peft directly), and alpha against softplus of them (IB-EDL: the noisy
head recomputed from the model's own answer and σ logits).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.oracles import own_logits

pytestmark = pytest.mark.usefixtures("use_mirror")

# id -> (family, tied embeddings, output rows beyond the tokenizer)
ROWS = {
    "llama": ("llama", False, 0),  # the paper's Llama-3-8B shape
    "llama-tied": ("llama", True, 0),  # Llama-3.2-1B/3B, SmolLM
    "qwen2-tied-padded": ("qwen2", True, 45),  # small Qwen2.5: tied, 271 rows beyond the tokenizer
    "qwen2-padded": ("qwen2", False, 45),  # Qwen2.5-7B: untied, padded
    "mistral": ("mistral", False, 0),
    "gemma2": ("gemma2", True, 0),
    "gemma3": ("gemma3", True, 0),
    "phi3": ("phi3", False, 0),
}
COLUMNS = ("trained", "merged", "modules_to_save", "gguf", "ib_edl")
LIMIT = 3
STEPS = dict(
    max_steps=1, learning_rate=1e-2, warmup_steps=0, logging_steps=1, save_steps=1000, max_train_docs=4, num_noises=4
)


@pytest.fixture(scope="module")
def obqa(mirror):
    """The obqa_edl task, loaded once (training split included) for training, evaluation and the oracle."""
    from lm_eval.tasks import TaskManager

    from lm_eval_evidential.tasks import tasks_dir

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EVIDENTIAL_DATA_DIR", str(mirror))
        manager = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata={"load_all_splits": True})
        return manager.load(["obqa_edl"])["tasks"]["obqa_edl"]


@pytest.fixture(scope="module")
def built(tiny_family, obqa, tmp_path_factory):
    """Checkpoints per (row, form), built once on first use."""
    cache: dict[tuple[str, str], object] = {}
    root = tmp_path_factory.mktemp("matrix")

    def get(row: str, form: str):
        if (row, form) not in cache:
            cache[row, form] = _build(row, form, get, tiny_family(*ROWS[row]), root / row, obqa)
        return cache[row, form]

    return get


def _build(row, form, get, base, folder, task):
    from lm_eval_evidential.training.config import TrainConfig
    from lm_eval_evidential.training.trainer import train

    if form in ("trained", "ib_edl"):
        method = "edl" if form == "trained" else "ib_edl"
        return train(base, task, TrainConfig(method=method, output_dir=str(folder / form), **STEPS))
    if form == "merged":
        from transformers import AutoTokenizer

        merged = _peft_model(base, get(row, "trained")).merge_and_unload()
        merged.save_pretrained(folder / "merged")
        AutoTokenizer.from_pretrained(base).save_pretrained(folder / "merged")
        return folder / "merged"
    if form == "modules_to_save":
        return _modules_to_save_adapter(base, folder / "modules_to_save")
    if form == "gguf":
        from lm_eval_evidential.testing.gguf_export import write_gguf

        return write_gguf(get(row, "merged"), folder / "gguf" / "model.gguf")
    raise AssertionError(form)


def _peft_model(base, adapter):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    return PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32), adapter).eval()


def _modules_to_save_adapter(base, out):
    """LoRA on the attention + a full trainable copy of lm_head (PEFT's modules_to_save), perturbed."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from lm_eval_evidential.training.lora_targets import resolve_target_modules

    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    attention = tuple(t for t in resolve_target_modules(model, None)[0] if t != "lm_head")
    model = get_peft_model(
        model, LoraConfig(r=4, target_modules=list(attention), modules_to_save=["lm_head"], task_type="CAUSAL_LM")
    )
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.requires_grad:
                param.add_(0.05 * torch.randn(param.shape, generator=generator))
    model.save_pretrained(out)
    return out


def _evaluate(task, **model_args):
    import lm_eval

    from lm_eval_evidential.harness.model import EvidentialLM

    lm = EvidentialLM(device="cpu", dtype="float32", batch_size=2, **{k: str(v) for k, v in model_args.items()})
    results = lm_eval.simple_evaluate(model=lm, tasks=[task], limit=LIMIT, bootstrap_iters=0)
    return lm, results.records["obqa_edl"]


@pytest.mark.parametrize("column", COLUMNS)
@pytest.mark.parametrize("row", list(ROWS))
def test_cell(row, column, built, tiny_family, obqa):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lm_eval_evidential.harness.model import EvidentialInputError

    base = tiny_family(*ROWS[row])
    tokenizer = AutoTokenizer.from_pretrained(base)
    if column in ("trained", "modules_to_save", "ib_edl"):
        adapter = built(row, column)
        lm, rec = _evaluate(obqa, pretrained=base, peft=adapter)  # peft= alone: the method comes from the adapter
        reference = _peft_model(base, adapter)
    elif column == "merged":
        lm, rec = _evaluate(obqa, pretrained=built(row, "merged"))
        reference = AutoModelForCausalLM.from_pretrained(built(row, "merged"), dtype=torch.float32).eval()
        # merging is exact: the merged model scores what the adapter scored
        adapter_logits = own_logits(_peft_model(base, built(row, "trained")), tokenizer, rec, obqa)[0]
        np.testing.assert_allclose(rec.logits, adapter_logits, atol=1e-4)
    else:
        gguf = built(row, "gguf")
        if row == "mistral":  # transformers cannot map a Mistral-named GGUF; the error names the one-line fix
            with pytest.raises(EvidentialInputError, match="gguf-new-metadata --general-name Llama"):
                _evaluate(obqa, pretrained=gguf.parent, gguf_file=gguf.name)
            return
        lm, rec = _evaluate(obqa, pretrained=gguf.parent, gguf_file=gguf.name)
        reference = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32).eval()
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        assert rec.meta["gguf_file"] == gguf.name

    assert len(rec) == LIMIT and lm.head.method == ("ib_edl" if column == "ib_edl" else "edl")
    k = rec.logits.shape[1]
    z, tails, keys = own_logits(reference, tokenizer, rec, obqa, tail=k)
    np.testing.assert_allclose(rec.logits, z, atol=1e-5)
    if column != "ib_edl":
        np.testing.assert_allclose(rec.alpha, np.logaddexp(0.0, z) + 1.0, atol=1e-5)
        return
    from lm_eval_evidential.modeling.heads import apply_head

    # σ from the model's own last K vocabulary logits (padding rows, for the padded heads)
    for r, zi, tail, key in zip(rec, z, tails, keys):
        expected = apply_head(lm.head, torch.tensor(zi), sigma_logits=torch.tensor(tail), key=key).alpha.numpy()
        np.testing.assert_allclose(r["alpha"], expected, atol=1e-5)


@pytest.mark.parametrize("row", list(ROWS))
def test_stock_hf_model_and_the_default_adapter(row, built, tiny_family):
    """What the README says of ``--model hf``: the default adapter loads there too, except on an
    untied head padded beyond the tokenizer, which the harness cuts to the tokenizer's length."""
    from lm_eval.models.huggingface import HFLM

    args = dict(pretrained=str(tiny_family(*ROWS[row])), peft=str(built(row, "trained")), device="cpu", dtype="float32")
    if row == "qwen2-padded":
        with pytest.raises(RuntimeError, match="size mismatch"):
            HFLM(**args)
    else:
        HFLM(**args)
