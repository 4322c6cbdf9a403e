"""LoRA fine-tuning on the tiny model: data encoding, loss decrease, metadata, resume, CLI."""

from __future__ import annotations

import json

import pytest
import torch

from lm_eval_evidential.modeling.config import METADATA_FILE
from lm_eval_evidential.training import evidential_trainer, schedule
from lm_eval_evidential.training.config import PAPER_TARGET_MODULES, TrainConfig
from lm_eval_evidential.training.data import LeftPadCollator, encode_examples, training_docs
from lm_eval_evidential.training.objective import batch_loss, last_logits
from lm_eval_evidential.training.trainer import train
from tests.training.conftest import FAST


@pytest.fixture(scope="module")
def tokenizer(tiny_model):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model)


@pytest.fixture(scope="module")
def base(tiny_model):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32).eval()


def _fixed_batch(tasks, tokenizer):
    task = tasks["obqa_edl"]
    examples, _ = encode_examples(task, training_docs(task)[:4], tokenizer)
    return LeftPadCollator(tokenizer.pad_token_id)(examples)


def _loss(model, batch, config):
    with torch.no_grad():
        weight = config.kl_weight if config.method == "edl" else 0.0  # the schedule's end
        return batch_loss(
            last_logits(model, batch), batch, config, kl_weight=weight, generator=torch.Generator().manual_seed(0)
        )[0].item()


# ------------------------------------------------------------------ data
def test_a_split_the_task_lacks_is_named_with_the_splits_it_has(tasks):
    """`train`/`laplace --train-split trian` named a Python remedy (TaskManager metadata, train()) for a typo."""
    from lm_eval_evidential.errors import InvalidValueError

    with pytest.raises(
        InvalidValueError, match=r"task 'obqa_edl' has no split 'trian'; its splits are test, train, va"
    ):
        training_docs(tasks["obqa_edl"], "trian")


def test_examples_are_what_the_evaluator_scores(tasks, tokenizer):
    task = tasks["obqa_edl"]
    docs = training_docs(task)
    assert len(docs) == 240  # the sample mirror's train split, not the evaluated test split
    examples, answer_map = encode_examples(task, docs[:5], tokenizer)
    letters = {f" {c}": tokenizer.encode(f" {c}", add_special_tokens=False) for c in "ABCD"}
    assert answer_map == {k: v[0] for k, v in letters.items()} and all(len(v) == 1 for v in letters.values())
    for doc, ex in zip(docs, examples):
        prompt = task.doc_to_text(doc)
        assert ex["input_ids"] == tokenizer.encode(prompt)  # BOS included, as lm-eval's tok_encode by default
        assert ex["target"] == doc["gold"] and ex["k"] == doc["k"] == 4
        gold_ids = tokenizer.encode(prompt + " " + doc["letters"][doc["gold"]])
        assert gold_ids == ex["input_ids"] + [ex["answer_ids"][ex["target"]]]


def test_multi_token_answers_are_rejected(tasks):
    class Splitting:
        """A tokenizer that splits " A" into two tokens."""

        def __call__(self, texts):
            return {"input_ids": [[ord(ch) for ch in t] for t in texts]}

    task = tasks["obqa_edl"]
    with pytest.raises(ValueError, match="must be a single token"):
        encode_examples(task, training_docs(task)[:1], Splitting())


def test_left_padding_and_mixed_k_match_single_questions(tasks, tokenizer, base):
    obqa, csqa = tasks["obqa_edl"], tasks["csqa_edl"]
    ex4, _ = encode_examples(obqa, training_docs(obqa)[:2], tokenizer)
    ex5, _ = encode_examples(csqa, [csqa.dataset[csqa.config.validation_split][0]], tokenizer)
    rows = [ex4[0], ex5[0], ex4[1]]
    assert [r["k"] for r in rows] == [4, 5, 4]
    collate = LeftPadCollator(tokenizer.pad_token_id)
    batch = collate(rows)
    assert batch["attention_mask"][:, -1].all() and not batch["attention_mask"].all()  # left-padded
    for method in ("edl", "ib_edl", "softmax"):
        config = TrainConfig(method=method, output_dir="unused", num_noises=3, kl_anneal_steps=0)
        with torch.no_grad():
            logits = last_logits(base, batch)
            mixed = batch_loss(logits, batch, config, kl_weight=1.0, generator=torch.Generator().manual_seed(5))[
                0
            ].item()
            singles = []
            for i, row in enumerate(rows):
                one = collate([row])
                torch.testing.assert_close(last_logits(base, one)[0], logits[i], atol=1e-5, rtol=1e-5)
                if method != "ib_edl":  # ib_edl's noise differs with the batch; its masking is tested in test_losses
                    singles.append(batch_loss(last_logits(base, one), one, config, kl_weight=1.0)[0].item())
        if singles:
            assert mixed == pytest.approx(sum(singles) / len(singles), rel=1e-5)


# ------------------------------------------------------------------ training
@pytest.fixture(scope="module")
def trained(tiny_model, tasks, tmp_path_factory):
    """One short run per method: 12 full-batch steps on 4 docs (the fixed batch of the loss checks).

    The runs share the loaded task.
    """
    out = {}
    for method in ("edl", "ib_edl", "softmax"):
        config = TrainConfig(
            method=method,
            output_dir=str(tmp_path_factory.mktemp(method) / "run"),
            max_steps=12,
            kl_anneal_steps=0,
            sigma_mult=0.25,
            **FAST,
        )
        out[method] = (train(tiny_model, tasks["obqa_edl"], config), config)
    return out


@pytest.mark.parametrize("method", ["edl", "ib_edl", "softmax"])
def test_training_reduces_the_loss(method, trained, tasks, tokenizer, base, tiny_model):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    out, config = trained[method]
    batch = _fixed_batch(tasks, tokenizer)
    before = _loss(base, batch, config)
    tuned = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32), out).eval()
    after = _loss(tuned, batch, config)
    assert after < 0.85 * before, (method, before, after)


def test_output_folder_and_metadata(trained, tiny_model):
    out, config = trained["ib_edl"]
    assert (out / "adapter_config.json").is_file() and (out / "adapter_model.safetensors").is_file()
    assert not (out / ".final.tmp").exists() and not (out / "training_args.bin").exists()
    meta = json.loads((out / METADATA_FILE).read_text())
    assert meta["method"] == "ib_edl" and meta["steps"] == 12 and meta["num_noises"] == 5
    assert meta["sigma_mult"] == 0.25 and meta["beta"] == config.beta and meta["kl_weight"] is None
    assert meta["base_model"] == str(tiny_model) and meta["task"] == "obqa_edl" and meta["k_values"] == [4]
    assert sorted(meta["answer_tokens"]) == [" A", " B", " C", " D"] and meta["num_train_docs"] == 4
    # The final checkpoint (the paper evaluates checkpoint-10080) carries the same metadata.
    ckpt = json.loads((out / "checkpoint-12" / METADATA_FILE).read_text())
    assert ckpt == meta
    # Adapters stay small: the unchanged base lm_head / embeddings are not copied in.
    from safetensors import safe_open

    with safe_open(str(out / "checkpoint-12" / "adapter_model.safetensors"), "pt") as fh:
        assert all("lora_" in key for key in fh.keys())


def test_evidential_lm_takes_its_defaults_from_the_adapter(trained, tiny_model, tasks):
    from lm_eval_evidential.harness.model import EvidentialLM

    out, _ = trained["ib_edl"]
    common = {"pretrained": str(tiny_model), "peft": str(out), "device": "cpu", "dtype": "float32"}
    lm = EvidentialLM(**common)
    assert (lm.head.method, lm.head.num_noises, lm.head.sigma_mult, lm.head.prior_weight) == ("ib_edl", 5, 0.25, 1.0)
    lm = EvidentialLM(**common, method="edl", num_noises=9)
    assert (lm.head.method, lm.head.num_noises, lm.head.sigma_mult) == ("edl", 9, 0.25)
    # Training saw the very logits the evaluator scores: same prompt, answer ids and last position.
    task = tasks["obqa_edl"]
    doc = training_docs(task)[0]
    context = task.fewshot_context(doc, 0)
    scored = lm.loglikelihood(
        task.construct_requests(doc=doc, ctx=context, metadata=("obqa_edl", 0, 1)), disable_tqdm=True
    )
    (example,), _ = encode_examples(task, [doc], lm.tokenizer)
    batch = LeftPadCollator(lm.tokenizer.pad_token_id)([example])
    with torch.no_grad():
        z = last_logits(lm.model, batch)[0, example["answer_ids"]]
    assert all(len(r) == 2 for r in scored)  # the harness's (log p, is_greedy) contract
    question = lm.evidence.get("obqa_edl", 0)
    torch.testing.assert_close(torch.tensor(question.logits, dtype=z.dtype), z, atol=1e-5, rtol=1e-5)
    # Validation still happens before any weights load.
    with pytest.raises(ValueError, match="unknown method"):
        EvidentialLM(**common, method="nope")


def test_resume_continues_the_step_count(tiny_model, tasks, tmp_path, monkeypatch):
    out = tmp_path / "run"
    first = TrainConfig(method="edl", output_dir=str(out), max_steps=2, **{**FAST, "save_steps": 2})
    train(tiny_model, tasks["obqa_edl"], first)
    assert (out / "checkpoint-2").is_dir()

    with pytest.raises(FileExistsError, match="is not empty; pass --overwrite-output-dir"):
        train(tiny_model, tasks["obqa_edl"], TrainConfig(method="edl", output_dir=str(out), max_steps=4, **FAST))

    calls = []
    real = schedule.kl_weight_at
    for module in (schedule, evidential_trainer):  # the printed schedule's, and the loss's
        monkeypatch.setattr(module, "kl_weight_at", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    resumed = TrainConfig(method="edl", output_dir=str(out), max_steps=4, resume_from_checkpoint="latest", **FAST)
    train(tiny_model, tasks["obqa_edl"], resumed)
    assert calls == [3, 2, 3]  # the printed schedule (last step), then only the two missing steps: global steps 2 and 3
    assert json.loads((out / METADATA_FILE).read_text())["steps"] == 4
    state = json.loads((out / "checkpoint-4" / "trainer_state.json").read_text())
    assert state["global_step"] == 4 and [h["step"] for h in state["log_history"] if "loss" in h] == [1, 2, 3, 4]


def test_resume_without_checkpoint_is_an_error(tiny_model, tasks, tmp_path):
    config = TrainConfig(output_dir=str(tmp_path / "empty"), max_steps=1, resume_from_checkpoint="latest", **FAST)
    with pytest.raises(FileNotFoundError, match="holds no checkpoint"):
        train(tiny_model, tasks["obqa_edl"], config)


# ------------------------------------------------------------------ config and CLI
def test_config_validation():
    with pytest.raises(ValueError, match=r"unknown method='mle'; choose one of edl, ib_edl, softmax"):
        TrainConfig(method="mle")
    with pytest.raises(ValueError, match=r"max_steps=0 must be an integer >= 1"):
        TrainConfig(max_steps=0)
    assert TrainConfig(target_modules="q_proj, v_proj").target_modules == ("q_proj", "v_proj")
    paper = TrainConfig()
    assert (paper.lora_r, paper.lora_alpha, paper.lora_dropout, paper.target_modules, paper.lora_bias) == (
        8,
        16,
        0.1,
        None,
        "lora_only",
    )
    assert PAPER_TARGET_MODULES == ("q_proj", "v_proj", "lm_head")
    assert (paper.learning_rate, paper.lr_scheduler_type, paper.warmup_steps, paper.weight_decay) == (
        5e-5,
        "cosine",
        20,
        0.001,
    )
    assert (paper.max_grad_norm, paper.per_device_train_batch_size, paper.seed, paper.max_steps) == (20.0, 4, 42, 10080)
    assert (paper.kl_anneal_epochs, paper.kl_anneal_steps) == (3.0, None)  # the IB-EDL reference's, not the run length


def test_cli_parses_every_option():
    from lm_eval_evidential.cli import build_parser
    from lm_eval_evidential.cli.train import config_from_args

    args = build_parser().parse_args(
        [
            "train",
            "--pretrained",
            "m",
            "--task",
            "obqa_edl",
            "--output-dir",
            "o",
            "--method",
            "ib_edl",
            "--lr",
            "1e-4",
            "--batch-size",
            "2",
            "--target-modules",
            "q_proj,lm_head",
            "--bf16",
            "--resume-from-checkpoint",
            "--beta",
            "0.5",
        ]
    )
    config = config_from_args(args)
    assert (config.method, config.learning_rate, config.per_device_train_batch_size, config.bf16) == (
        "ib_edl",
        1e-4,
        2,
        True,
    )
    assert config.target_modules == ("q_proj", "lm_head") and config.resume_from_checkpoint == "latest"
    assert config.beta == 0.5 and config.max_steps == 10080 and args.func.__module__ == "lm_eval_evidential.cli.train"


def test_cli_trains_by_task_name(tiny_model, tmp_path, monkeypatch, capsys):
    from lm_eval_evidential.cli import main
    from lm_eval_evidential.testing.tiny import sample_data_dir

    monkeypatch.setenv("EVIDENTIAL_DATA_DIR", str(sample_data_dir()))
    out = tmp_path / "cli"
    code = main(
        [
            "train",
            "--pretrained",
            str(tiny_model),
            "--task",
            "obqa_edl",
            "--method",
            "softmax",
            "--output-dir",
            str(out),
            "--max-steps",
            "1",
            "--max-train-docs",
            "4",
        ]
    )
    assert code == 0 and str(out.resolve()) in capsys.readouterr().out
    meta = json.loads((out / METADATA_FILE).read_text())
    assert meta["method"] == "softmax" and meta["steps"] == 1
