"""Loading checkpoints into ``--model evidential``: GGUF files, tied embeddings, padded output
layers, and model_args checked before any weights load."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from ..oracles import own_logits as oracle_logits

pytestmark = pytest.mark.usefixtures("use_mirror")


def our_tasks():
    from lm_eval.tasks import TaskManager

    from lm_eval_evidential.tasks import tasks_dir

    return TaskManager(include_path=str(tasks_dir()), include_defaults=False)


def records_of(lm, task="obqa_edl", limit=4):
    import lm_eval

    results = lm_eval.simple_evaluate(model=lm, tasks=[task], limit=limit, bootstrap_iters=0, task_manager=our_tasks())
    return results.records[task]


def own_logits(model, tokenizer, records, task="obqa_edl"):
    """Each record's answer logits from ``model`` itself (:func:`tests.oracles.own_logits`)."""
    return oracle_logits(model, tokenizer, records, our_tasks().load([task])["tasks"][task])[0]


def make_lm(pretrained, **kwargs):
    from lm_eval_evidential.harness.model import EvidentialLM

    return EvidentialLM(pretrained=str(pretrained), device="cpu", dtype="float32", batch_size=4, **kwargs)


def test_gguf_file_evidence_is_softplus_of_the_gguf_models_own_logits(tiny_family, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lm_eval_evidential.testing.gguf_export import write_gguf

    folder = tiny_family("llama", tied=True)
    alone = write_gguf(folder, tmp_path / "gguf" / "model.gguf").parent  # a folder holding only the file
    rec = records_of(make_lm(alone, gguf_file="model.gguf"))
    gguf_model = AutoModelForCausalLM.from_pretrained(alone, gguf_file="model.gguf", dtype=torch.float32).eval()
    expected = own_logits(gguf_model, AutoTokenizer.from_pretrained(alone, gguf_file="model.gguf"), rec)
    np.testing.assert_allclose(rec.logits, expected, atol=1e-5)
    np.testing.assert_allclose(rec.alpha, np.logaddexp(0, expected) + 1, atol=1e-5)
    # float32 GGUF: the same model as the safetensors checkpoint it was written from
    hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    np.testing.assert_allclose(own_logits(hf, AutoTokenizer.from_pretrained(folder), rec), expected, atol=1e-5)
    assert rec.meta["gguf_file"] == "model.gguf"


def test_missing_gguf_file_is_refused_before_loading(tiny_family, monkeypatch):
    from lm_eval.models.huggingface import HFLM

    from lm_eval_evidential.harness.model import EvidentialInputError

    monkeypatch.setattr(HFLM, "__init__", lambda *a, **k: pytest.fail("weights were loaded"))
    with pytest.raises(EvidentialInputError, match="gguf_file=nope.gguf not found.*pass the folder holding the file"):
        make_lm(tiny_family("llama", tied=True), gguf_file="nope.gguf")


def test_a_full_model_passed_as_peft_is_refused_with_the_fix(tiny_model, tiny_family, monkeypatch):
    from lm_eval.models.huggingface import HFLM

    from lm_eval_evidential.harness.model import EvidentialInputError

    monkeypatch.setattr(HFLM, "__init__", lambda *a, **k: pytest.fail("weights were loaded"))
    with pytest.raises(EvidentialInputError, match="not a PEFT adapter folder.*pass it as pretrained= instead"):
        make_lm(tiny_model, peft=str(tiny_family("llama")))


def test_mistral_gguf_names_the_one_line_fix_and_the_fix_works(tiny_family, tmp_path):
    from lm_eval_evidential.harness.model import EvidentialInputError
    from lm_eval_evidential.testing.gguf_export import write_gguf

    folder = tiny_family("mistral")
    alone = write_gguf(folder, tmp_path / "mistral.gguf").parent
    with pytest.raises(EvidentialInputError, match="gguf-new-metadata --general-name Llama"):
        make_lm(alone, gguf_file="mistral.gguf")
    # the fix the message names, as written (the gguf package's console script, run as a module)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "gguf.scripts.gguf_new_metadata",
            "--general-name",
            "Llama",
            str(alone / "mistral.gguf"),
            str(alone / "llama-named.gguf"),
        ],
        check=True,
        capture_output=True,
        input=b"y\n",
    )
    from transformers import AutoModelForCausalLM, AutoTokenizer

    rec = records_of(make_lm(alone, gguf_file="llama-named.gguf"))
    hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    np.testing.assert_allclose(rec.logits, own_logits(hf, AutoTokenizer.from_pretrained(folder), rec), atol=1e-5)


def _lm_head_adapter(base, out, **lora):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32),
        LoraConfig(r=4, target_modules=["q_proj", "v_proj", "lm_head"], task_type="CAUSAL_LM", **lora),
    )
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.05)
    model.save_pretrained(out)
    return out


@pytest.mark.parametrize("family,padding", [("llama", 0), ("qwen2", 45)])
def test_lm_head_adapter_on_tied_embeddings_loads_and_stays_tied(family, padding, tiny_family, tmp_path):
    """--model hf cannot load these (transformers' tie_weights on the PEFT-wrapped head); ours can.
    The Qwen2 one also has an output layer padded 45 rows beyond its tokenizer: never resized."""
    from lm_eval.models.huggingface import HFLM
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = tiny_family(family, tied=True, padding=padding)
    adapter = _lm_head_adapter(base, tmp_path / "adapter")
    with pytest.raises((KeyError, RuntimeError)):  # the stock harness, unchanged (docs/training.md: checkpoint matrix)
        HFLM(pretrained=str(base), peft=str(adapter), device="cpu", dtype="float32")
    lm = make_lm(base, peft=str(adapter))
    inner = lm.model.get_base_model()
    assert inner.get_output_embeddings().base_layer.weight is inner.get_input_embeddings().weight
    assert inner.get_input_embeddings().weight.shape[0] == len(AutoTokenizer.from_pretrained(base)) + padding
    rec = records_of(lm)
    reference = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32), adapter)
    np.testing.assert_allclose(
        rec.logits, own_logits(reference.eval(), AutoTokenizer.from_pretrained(base), rec), atol=1e-5
    )


# ------------------------------------------------------------------ IB-EDL reference checkpoints
def _reference_run(base, work_dir, vib: dict | None):
    """A work dir in the IB-EDL reference code's layout (sandylaker/ib-edl, tools/evidential_ft.py):
    Trainer checkpoints ``checkpoint-N`` holding a PEFT LoRA adapter saved with PEFT's defaults
    (q_proj, v_proj, lm_head, bias lora_only: the base lm_head/embeddings are saved along), the
    tokenizer and trainer state, and the run's mmengine config dumped beside them as YAML."""
    import json

    import yaml
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32),
        LoraConfig(
            r=8,
            lora_alpha=16,
            lora_dropout=0.1,
            target_modules=["q_proj", "v_proj", "lm_head"],
            bias="lora_only",
            task_type="CAUSAL_LM",
        ),
    )
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.05)
    ckpt = work_dir / "checkpoint-10080"
    model.save_pretrained(ckpt)  # save_embedding_layers="auto", as the reference's Trainer leaves it
    AutoTokenizer.from_pretrained(base).save_pretrained(ckpt)
    (ckpt / "trainer_state.json").write_text(json.dumps({"global_step": 10080}))
    config = {
        "model": {"model_name_or_path": str(base), "peft_cfg": {"type": "LoraConfig", "r": 8}},
        "train_cfg": {"max_steps": 10080, "learning_rate": 5e-05},
        "edl_loss_cfg": {"bayesian_loss": {"type": "ss"}, "reg_weight_cfg": {"final_reg_weight": 0.0 if vib else 1.0}},
        **({"vib": vib} if vib else {}),
    }
    (work_dir / "ib_obqa_llama3_8b_1123_1400_07.yaml").write_text(yaml.safe_dump(config))
    return ckpt


def test_ib_edl_reference_checkpoint_loads_with_peft_alone(tiny_model, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ckpt = _reference_run(tiny_model, tmp_path / "work", {"num_noises": 7, "beta": 1e-05, "sigma_mult": 0.5})
    lm = make_lm(tiny_model, peft=str(ckpt))
    assert (lm.head.method, lm.head.num_noises, lm.head.sigma_mult) == ("ib_edl", 7, 0.5)
    rec = records_of(lm)
    reference = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32), ckpt
    ).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    z = own_logits(reference, tokenizer, rec)
    np.testing.assert_allclose(rec.logits, z, atol=1e-5)
    # IB-EDL's noisy head, not EDL's (its exact values against the model's own logits: the checkpoint matrix)
    assert np.all(rec.alpha >= 1.0) and not np.allclose(rec.alpha, np.logaddexp(0, z) + 1)
    # standard EDL and the softmax baseline are read off the same layout
    edl = _reference_run(tiny_model, tmp_path / "edl", None)
    assert make_lm(tiny_model, peft=str(edl)).head.method == "edl"


def test_reference_checkpoint_without_its_run_config_one_line_conversion(tiny_model, tmp_path):
    import shutil

    ckpt = _reference_run(tiny_model, tmp_path / "work", {"num_noises": 20, "beta": 1e-05, "sigma_mult": 0.0})
    copied = shutil.copytree(ckpt, tmp_path / "copied" / "checkpoint-10080")  # the adapter alone, without the work dir
    assert make_lm(tiny_model, peft=str(copied)).head.method == "edl"  # nothing says otherwise
    # docs/training.md's one line, run as written
    page = (Path(__file__).resolve().parents[2] / "docs" / "training.md").read_text(encoding="utf-8")
    (line,) = [x for x in page.splitlines() if x.startswith('echo \'{"method": "ib_edl"')]
    subprocess.run(["sh", "-c", line], cwd=copied.parent, check=True)
    assert make_lm(tiny_model, peft=str(copied)).head.method == "ib_edl"
