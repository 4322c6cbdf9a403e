"""``lm-eval-evidential laplace``: a Laplace-LoRA posterior fitted by laplace-torch, scored by --model evidential.

Oracle: laplace-torch's own sampling predictive (``Laplace.predictive_samples(pred_type="nn")``),
on a posterior the test fits itself through the library (same adapter, same training questions,
the prior precision the command chose), at the same seed: each member of the records equals the
library's sample of the same index, question by question (one unpadded prompt each), <= 1e-5.
Needs laplace-torch (docs/training.md installs it; .ci/run runs the tests marked laplace where it is); the
refusals without it run everywhere.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time

import numpy as np
import pytest
import torch

from lm_eval_evidential.errors import EvidentialInputError
from tests.harness.test_model import evaluate, make_lm, task_docs

DOCS = 8


@pytest.fixture(scope="module")
def softmax_adapter(tiny_model, tmp_path_factory):
    """A q_proj/v_proj LoRA adapter marked as trained with the softmax objective."""
    from lm_eval_evidential.testing.tiny import build_lora_adapter

    folder = build_lora_adapter(
        tiny_model,
        tmp_path_factory.mktemp("map") / "adapter",
        seed=3,
        init_std=0.1,
        target_modules=("q_proj", "v_proj"),
    )
    (folder / "evidential_config.json").write_text(json.dumps({"method": "softmax"}), encoding="utf-8")
    return folder


def _library_laplace(base, adapter, tasks, structure, prior_precision):
    """The test's own fit: laplace-torch on the adapter's LoRA weights over the first DOCS training questions."""
    laplace = pytest.importorskip("laplace")
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lm_eval_evidential.training.data import LeftPadCollator, encode_examples, training_docs

    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    model = PeftModel.from_pretrained(model, str(adapter), is_trainable=True)
    for name, param in model.named_parameters():
        param.requires_grad_(".lora_" in name)

    class Answers(torch.nn.Module):  # the K answer logits at the last position, by transformers directly
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, batch):
            mask = batch["attention_mask"]
            positions = batch.get("position_ids", (mask.cumsum(1) - 1).clamp(min=0))
            out = self.inner(input_ids=batch["input_ids"], attention_mask=mask, position_ids=positions).logits[:, -1]
            return out.gather(1, batch["answer_ids"])

    task = tasks["obqa_edl"]
    tok = AutoTokenizer.from_pretrained(base)
    examples, _ = encode_examples(task, training_docs(task)[:DOCS], tok)
    loader = torch.utils.data.DataLoader(examples, batch_size=1, collate_fn=LeftPadCollator(0))  # no padding
    la = laplace.Laplace(
        Answers(model),
        "classification",
        subset_of_weights="all",
        hessian_structure=structure,
        dict_key_x="input_ids",
        dict_key_y="target",
    )
    la.fit(loader)
    la.prior_precision = prior_precision
    return la, tok


@pytest.mark.laplace
@pytest.mark.parametrize("structure", ["diag", "kron"])
def test_members_equal_the_librarys_own_samples(tiny_model, softmax_adapter, tasks, tmp_path, structure, monkeypatch):
    pytest.importorskip("laplace")
    from lm_eval_evidential.testing.tiny import sample_data_dir
    from lm_eval_evidential.training.laplace import LaplaceSettings, fit_laplace

    monkeypatch.setenv("EVIDENTIAL_DATA_DIR", str(sample_data_dir()))
    settings = LaplaceSettings(structure=structure, samples=3, seed=11, max_train_docs=DOCS, marglik_steps=3)
    out = fit_laplace(tiny_model, softmax_adapter, tasks["obqa_edl"], tmp_path / "laplace", settings)
    config = json.loads((out / "laplace_config.json").read_text())
    assert config["structure"] == structure and config["n_data"] == DOCS and config["prior_precision"] > 0
    rec = evaluate(make_lm(tiny_model, out), ["obqa_edl"], limit=4)[1]["obqa_edl"]
    assert rec.meta["members"]["source"] == "laplace" and rec.n_members == 3

    la, tok = _library_laplace(tiny_model, softmax_adapter, tasks, structure, config["prior_precision"])
    task, docs = task_docs("obqa_edl")
    for i in range(len(rec)):
        doc = docs[rec.doc_id[i]]
        prompt = task.doc_to_text(doc)
        ids = tok(prompt)["input_ids"]
        answer = [tok(prompt + " " + x)["input_ids"][-1] for x in doc["letters"]]
        batch = {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long)}
        batch["answer_ids"] = torch.tensor([answer])
        want = la.predictive_samples(batch, pred_type="nn", n_samples=3, generator=torch.Generator().manual_seed(11))
        got = torch.softmax(torch.from_numpy(rec.member_logits[i, :, : rec.k[i]]), dim=-1)
        np.testing.assert_allclose(got.numpy(), want[:, 0].double().numpy(), atol=1e-5, rtol=0)
        np.testing.assert_allclose(rec.probs[i, : rec.k[i]], want[:, 0].double().mean(0).numpy(), atol=1e-5)
        # The oracle tells posteriors apart: the library's samples under another prior precision are not these.
        la.prior_precision = config["prior_precision"] * 4
        other = la.predictive_samples(batch, pred_type="nn", n_samples=3, generator=torch.Generator().manual_seed(11))
        la.prior_precision = config["prior_precision"]
        assert np.abs(got.numpy() - other[:, 0].double().numpy()).max() > 1e-3


def test_refusals(tiny_model, tiny_adapter, softmax_adapter, tasks, tmp_path, monkeypatch):
    from lm_eval_evidential.training.laplace import LaplaceSettings, fit_laplace

    edl = tmp_path / "edl"
    shutil.copytree(tiny_adapter, edl)
    (edl / "evidential_config.json").write_text(json.dumps({"method": "edl"}), encoding="utf-8")
    with pytest.raises(EvidentialInputError, match="method=edl: Laplace-LoRA's posterior is over the categorical"):
        fit_laplace(tiny_model, edl, tasks["obqa_edl"], tmp_path / "out")
    with pytest.raises(EvidentialInputError, match="no adapter_config.json"):
        fit_laplace(tiny_model, tmp_path, tasks["obqa_edl"], tmp_path / "out")
    with pytest.raises(ValueError, match=r"samples=1 must be an integer in 2\.\.1000 \(the posterior is scored by"):
        LaplaceSettings(samples=1)
    with pytest.raises(ValueError, match="unknown GGN structure 'full'; choose one of kron, diag"):
        LaplaceSettings(structure="full")
    with pytest.raises(ValueError, match=r"prior_precision=0 must be a finite number > 0 \(.*\); e\.g\."):
        LaplaceSettings(prior_precision=0)
    with pytest.raises(ValueError, match=r"seed=-9223372036854775809 must be an integer in -9223372036854775808\."):
        LaplaceSettings(seed=-(2**63) - 1)
    with pytest.raises(ValueError, match="marglik_steps=True must be an integer >= 1"):
        LaplaceSettings(marglik_steps=True)
    monkeypatch.setitem(sys.modules, "laplace", None)  # laplace-torch not installed
    with pytest.raises(EvidentialInputError, match=r"laplace-torch, which is not installed; install it with pip"):
        fit_laplace(tiny_model, softmax_adapter, tasks["obqa_edl"], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_fit_and_model_args_take_the_same_sample_counts():
    """The fit's ``samples`` and ``laplace_samples`` in --model_args are checked against one declared range."""
    from lm_eval_evidential.harness.model_args import SCORING_OPTIONS
    from lm_eval_evidential.modeling.config import MAX_MEMBERS
    from lm_eval_evidential.training.laplace import WEIGHT_SAMPLES

    scored = SCORING_OPTIONS["laplace_samples"][1]
    counts = [-1, 0, 1, 2, 3, MAX_MEMBERS - 1, MAX_MEMBERS, MAX_MEMBERS + 1, 2.0, True]
    assert [WEIGHT_SAMPLES.allows(n) for n in counts] == [scored.allows(n) for n in counts]
    assert [n for n in counts if WEIGHT_SAMPLES.allows(n)] == [2, 3, MAX_MEMBERS - 1, MAX_MEMBERS]
    assert scored.allows(None) and not WEIGHT_SAMPLES.allows(None)  # model_args: None keeps the saved number


def test_the_install_line_is_the_docs(tmp_path):
    """The refusal's install command is docs/training.md's install block (which .ci/run runs), line for line."""
    from lm_eval_evidential.training.laplace import INSTALL
    from tests.contract.test_readme import ROOT

    text = (ROOT / "docs" / "training.md").read_text(encoding="utf-8").splitlines()
    i = text.index("<!-- laplace-install -->")
    block = text[i + 2 : text.index("```", i + 2)]
    assert " && ".join(line.split("  #")[0].strip() for line in block) == INSTALL


@pytest.mark.laplace
@pytest.mark.slow
def test_the_docs_laplace_commands_run(tiny_model, tmp_path):
    """docs/training.md's Laplace-LoRA block (train a MAP adapter, fit, score), run as test_readme runs the docs,
    the fit on DOCS training questions with 3 marginal-likelihood steps (the full sample split and 100 steps took
    over 25 minutes on a loaded 2-core machine). Its lines that read the runs of the page's blocks above (out-edl,
    which tests/contract/test_readme.py makes in the main environment) are left out here."""
    pytest.importorskip("laplace")
    import subprocess

    from tests.contract.test_readme import ROOT, _with_flags, adapt, offline_setup, reader_env, readme_blocks

    text = (ROOT / "docs" / "training.md").read_text(encoding="utf-8")
    (code,) = [c for _, c, _ in readme_blocks(text) if "lm-eval-evidential laplace " in c]
    setup = offline_setup((ROOT / "README.md").read_text(encoding="utf-8"))
    fit = f"--max-train-docs {DOCS} --marglik-steps 3"
    lines = [line for line in adapt(code, tiny_model).split("\n") if "out-edl" not in line]
    assert any("lm-eval-evidential laplace " in line for line in lines) and any("lm_eval " in line for line in lines)
    code = "\n".join(_with_flags(line, "lm-eval-evidential laplace", fit) for line in lines)
    cmd = ["bash", "-e", "-o", "pipefail", "-c", setup + code]
    proc = subprocess.run(cmd, cwd=tmp_path, env=reader_env(), capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    config = json.loads((tmp_path / "ckpt-laplace" / "laplace_config.json").read_text(encoding="utf-8"))
    assert config["structure"] == "kron" and config["prior_precision"] > 0
    from lm_eval_evidential.records import load_records

    rec = load_records(tmp_path / "out-laplace", "obqa_edl")
    assert rec.n_members == config["samples"] and rec.meta["members"]["source"] == "laplace"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("previous", [False, True], ids=["new-folder", "previous-posterior"])
def test_a_fit_stopped_by_a_signal_says_so_in_one_line_and_leaves_the_output_as_it_was(
    tiny_model, softmax_adapter, use_mirror, tmp_path, monkeypatch, capsys, signum, previous
):
    """Ctrl-C or SIGTERM during the fit (laplace-torch stood in for: the signal arrives where the fit runs): one
    line naming the signal and what the output folder holds, the shell's status for the signal, the folder as it
    was (a previous posterior byte for byte, or none), no temporary folder left, the handlers put back."""
    from lm_eval_evidential.cli.main import main
    from lm_eval_evidential.training import laplace as fit

    out = tmp_path / "lap"
    if previous:
        shutil.copytree(softmax_adapter, out)
        (out / "laplace_config.json").write_text('{"an earlier fit": true}', encoding="utf-8")
    before = {p.name: p.read_bytes() for p in out.iterdir()} if previous else None
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def fitted(*args, **kwargs):
        os.kill(os.getpid(), signum)
        time.sleep(30)  # the handler stops the sleep
        raise AssertionError("the signal did not stop the fit")

    monkeypatch.setattr(fit, "_laplace_library", lambda: None)
    monkeypatch.setattr(fit, "_fitted", fitted)
    argv = ["laplace", "--pretrained", str(tiny_model), "--peft", str(softmax_adapter), "--task", "obqa_edl"]
    status = main([*argv, "--max-train-docs", "4", "--output-dir", str(out)])
    assert status == 128 + signum
    err = capsys.readouterr().err
    line = err.strip().splitlines()[-1]  # after the progress bars of the encoding and the weights
    assert "Traceback" not in err
    held = "keeps its previous output" if previous else "was not written"
    assert line == (
        f"lm-eval-evidential laplace: stopped by {signal.Signals(signum).name} during the fit; {out} {held} (the "
        "result is written whole at the end, never in part) — run the same laplace command again to fit from the start"
    )
    assert ({p.name: p.read_bytes() for p in out.iterdir()} if out.exists() else None) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == (["lap"] if previous else [])
    assert {s: signal.getsignal(s) for s in handlers} == handlers
