"""Every harness flag honoured or refused, one test each: --apply_chat_template (+ --system_instruction,
--fewshot_as_multiturn), --num_fewshot, --limit on pair tasks, --cache_requests (--use_cache:
test_determinism.py); and the provenance each leaves in the records."""

from __future__ import annotations

import json
import logging
import math
import shutil

import numpy as np
import pytest
import torch

from .test_model import evaluate, make_lm, our_tasks

pytestmark = pytest.mark.usefixtures("use_mirror")

CHAT_TEMPLATE = (
    "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}[assistant]\n{% endif %}"
)


@pytest.fixture(scope="module")
def chat_model(tiny_model, tmp_path_factory):
    """The tiny model with a chat template in its tokenizer."""
    from transformers import AutoTokenizer

    out = tmp_path_factory.mktemp("chat") / "model"
    shutil.copytree(tiny_model, out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out)
    return out


def _stems(mirror, split):
    path = mirror / "allenai" / "openbookqa" / "main" / f"{split}.jsonl"
    return [json.loads(line)["question_stem"] for line in path.read_text().splitlines() if line.strip()]


def test_chat_template_with_system_instruction_and_multiturn_few_shot(chat_model, mirror):
    from lm_eval_evidential.integration.evaluation import sha256_text

    results, records = evaluate(
        make_lm(chat_model),
        ["obqa_edl"],
        limit=3,
        apply_chat_template=True,
        system_instruction="Answer with a letter.",
        fewshot_as_multiturn=True,
        num_fewshot=1,
        log_samples=True,
    )
    rec = records["obqa_edl"]
    train = _stems(mirror, "train")
    for sample in results["samples"]["obqa_edl"]:
        prompt, continuation = sample["arguments"][0]
        assert prompt.startswith("[system] Answer with a letter.\n[user] ") and prompt.endswith("[assistant]\n")
        assert prompt.count("[user] ") == 2 and prompt.count("[assistant] ") == 1  # the shot is its own turn
        assert any(stem in prompt for stem in train)
        assert [a[1] for a in sample["arguments"]] == ["A", "B", "C", "D"]  # no space after the chat turn
    assert rec.labels[0] == ["A", "B", "C", "D"]
    meta = rec.meta
    assert meta["chat_template_sha256"] == sha256_text(CHAT_TEMPLATE)
    assert meta["system_instruction_sha256"] == sha256_text("Answer with a letter.")
    assert meta["fewshot_as_multiturn"] is True and meta["num_fewshot"] == 1
    assert set(meta["answer_token_ids"]) == {"A", "B", "C", "D"}


def test_chat_template_evidence_is_the_models_own_logits_on_the_rendered_prompt(chat_model):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    results, records = evaluate(make_lm(chat_model), ["obqa_edl"], limit=2, apply_chat_template=True, log_samples=True)
    tokenizer = AutoTokenizer.from_pretrained(chat_model)
    model = AutoModelForCausalLM.from_pretrained(chat_model, dtype=torch.float32).eval()
    rec = records["obqa_edl"]
    for sample in results["samples"]["obqa_edl"]:
        prompt = sample["arguments"][0][0]
        ids = tokenizer(prompt)["input_ids"]
        answer = [tokenizer(prompt + letter)["input_ids"][-1] for letter in "ABCD"]
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0, -1, answer].double().numpy()
        i = list(rec.doc_id).index(sample["doc_id"])
        np.testing.assert_allclose(rec.logits[i], logits, atol=1e-5)


def test_num_fewshot_takes_examples_from_the_training_split_with_the_same_template(tiny_model, tiny_adapter, mirror):
    results, records = evaluate(
        make_lm(tiny_model, tiny_adapter), ["obqa_edl"], limit=3, num_fewshot=2, log_samples=True
    )
    train = _stems(mirror, "train")
    for sample in results["samples"]["obqa_edl"]:
        prompt = sample["arguments"][0][0]
        *shots, question = prompt.split("Return the label of the correct answer for the question below.")[1:]
        assert len(shots) == 2 and sample["doc"]["question"] in question and question.endswith("Answer:")
        for shot in shots:  # a training question in the same template, ending with its gold letter
            assert any(stem in shot for stem in train)
            assert shot.rstrip()[-10:-1].endswith("Answer: ") and shot.rstrip()[-1] in "ABCD"
    assert results["n-shot"]["obqa_edl"] == 2 and records["obqa_edl"].meta["num_fewshot"] == 2


def test_num_fewshot_on_a_task_without_a_training_split_is_refused_naming_the_flag(tiny_model):
    from lm_eval_evidential.harness.model import EvidentialInputError

    with pytest.raises(EvidentialInputError, match="mmlu_math_edl.*--num_fewshot"):
        evaluate(make_lm(tiny_model), ["mmlu_math_edl"], limit=2, num_fewshot=1)


def test_limit_on_a_pair_task_takes_n_per_side_and_says_so(tiny_model, tiny_adapter, caplog):
    with caplog.at_level(logging.WARNING):
        results, records = evaluate(make_lm(tiny_model, tiny_adapter), ["obqa_edl_vs_csqa4_edl"], limit=3)
    row = results["results"]["obqa_edl_vs_csqa4_edl"]
    assert row["n_id,none"] == 3 and row["n_ood,none"] == 3
    assert np.isfinite(row["auroc_reciprocal_vacuity,none"])
    assert results["n-samples"]["obqa_edl_vs_csqa4_edl"]["effective"] == 6
    assert "--limit 3 on an ID/OOD pair takes 3 per side" in caplog.text


def test_fractional_limit_on_a_pair_task_takes_that_fraction_of_each_side(tiny_model, tiny_adapter, caplog):
    with caplog.at_level(logging.WARNING):
        results, _ = evaluate(make_lm(tiny_model, tiny_adapter), ["obqa_edl_vs_csqa4_edl"], limit=0.5)
    row = results["results"]["obqa_edl_vs_csqa4_edl"]
    loaded = our_tasks().load(["obqa_edl", "csqa4_edl"])["tasks"]
    sizes = [len(loaded[name].eval_docs) for name in ("obqa_edl", "csqa4_edl")]
    assert all(n >= 3 for n in sizes)
    assert (row["n_id,none"], row["n_ood,none"]) == tuple(math.ceil(n * 0.5) for n in sizes)
    assert "--limit 0.5 on an ID/OOD pair takes 0.5 of each side" in caplog.text


@pytest.mark.parametrize("limit", [2, 0.05])
def test_pair_limit_is_per_side_from_the_request_cache_too(tiny_model, tiny_adapter, tmp_path, monkeypatch, limit):
    import lm_eval.caching.cache as request_cache

    monkeypatch.setattr(request_cache, "PATH", str(tmp_path / "requests"))
    rows = []
    for _ in range(2):  # the first run fills the cache, the second reads it
        lm, asked = make_lm(tiny_model, tiny_adapter), []
        monkeypatch.setattr(
            lm, "loglikelihood", lambda requests, f=lm.loglikelihood, **kw: asked.extend(requests) or f(requests, **kw)
        )
        results, _ = evaluate(lm, ["obqa_edl_vs_csqa4_edl"], limit=limit, cache_requests=True, log_samples=True)
        row = results["results"]["obqa_edl_vs_csqa4_edl"]
        docs = {request.doc_id for request in asked}  # only the chosen docs are forwarded
        rows.append((row["n_id,none"], row["n_ood,none"], len(results["samples"]["obqa_edl_vs_csqa4_edl"]), len(docs)))
    assert list(tmp_path.joinpath("requests").iterdir())
    assert rows[0] == rows[1] == ((2, 2, 4, 4) if limit == 2 else (6, 4, 10, 10))  # 0.05 of 120 ID and 80 OOD docs


@pytest.mark.parametrize("given", [[2, 7, 11], [11, 2, 7]])
def test_samples_keep_each_questions_own_doc_id_in_the_records(tiny_model, tiny_adapter, given, caplog):
    lm = make_lm(tiny_model, tiny_adapter)
    _, full = evaluate(lm, ["obqa_edl"], limit=12)
    with caplog.at_level(logging.WARNING):
        chosen, _ = evaluate(lm, ["obqa_edl"], limit=None, samples={"obqa_edl": given}, log_samples=True)
    records, reference = chosen.records["obqa_edl"], full["obqa_edl"]
    assert records.doc_id.tolist() == [2, 7, 11]  # lm_eval itself numbers them 0, 1, 2
    rows = [reference.doc_id.tolist().index(d) for d in (2, 7, 11)]
    np.testing.assert_allclose(records.logits, reference.logits[rows], atol=1e-5, rtol=0)  # other padding
    # Logged in dataset order; lm_eval labels the i-th with the i-th index given, and says so if unsorted.
    logged = chosen["samples"]["obqa_edl"]
    assert [s["doc_id"] for s in logged] == given
    np.testing.assert_array_equal([s["evidence"]["logits"] for s in logged], records.logits)
    assert caplog.text.count("do not name their docs") == (given != sorted(given))  # said once


def test_cache_requests_never_reuses_prompts_of_other_data(tiny_model, mirror, tmp_path, monkeypatch):
    import lm_eval.caching.cache as request_cache

    monkeypatch.setattr(request_cache, "PATH", str(tmp_path / "requests"))
    first, _ = evaluate(make_lm(tiny_model), ["obqa_edl"], limit=2, cache_requests=True, log_samples=True)
    other = tmp_path / "other_mirror"
    shutil.copytree(mirror, other)
    path = other / "allenai" / "openbookqa" / "main" / "test.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows[0]["question_stem"] = "Which of these is a changed question?"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.setenv("EVIDENTIAL_DATA_DIR", str(other))
    second, records = evaluate(make_lm(tiny_model), ["obqa_edl"], limit=2, cache_requests=True, log_samples=True)
    prompts = {s["doc_id"]: s["arguments"][0][0] for s in second["samples"]["obqa_edl"]}
    assert "Which of these is a changed question?" in prompts[0]
    assert records["obqa_edl"].meta["data_source"]["origin"] == f"mirror {other.resolve()}"


def test_records_say_where_the_questions_came_from_and_audits_refuse_other_prompting(tiny_model, mirror):
    from dataclasses import replace

    from lm_eval_evidential.records.provenance import FingerprintMismatchError, check_same_producer

    _, records = evaluate(make_lm(tiny_model), ["obqa_edl", "csqa4_edl"], limit=2)
    obqa, csqa4 = records["obqa_edl"], records["csqa4_edl"]
    source = obqa.meta["data_source"]
    assert source["origin"] == f"mirror {mirror.resolve()}" and len(source["sha256"]) == 16
    assert source["dataset"] == "allenai/openbookqa" and source["configs"] == ["main"]
    assert obqa.meta["chat_template_sha256"] is None and obqa.meta["num_fewshot"] == 0
    assert check_same_producer([obqa, csqa4]) == []  # different datasets, same producer
    for key, value in (
        ("chat_template_sha256", "0123456789abcdef"),
        ("num_fewshot", 5),
        ("data_origin", "hub"),
        ("system_instruction_sha256", "fedcba9876543210"),
    ):
        other = replace(csqa4, meta={**csqa4.meta, key: value})
        with pytest.raises(FingerprintMismatchError, match=key):
            check_same_producer([obqa, other])


def test_a_pair_reports_aupr_out_and_fpr95_per_score_as_ood_does(tiny_model, tiny_adapter):
    from sklearn.metrics import average_precision_score

    from lm_eval_evidential.audits.ood import ood_rows

    results, records = evaluate(make_lm(tiny_model, tiny_adapter), ["obqa_edl", "csqa4_edl", "obqa_edl_vs_csqa4_edl"])
    row = results["results"]["obqa_edl_vs_csqa4_edl"]
    id_rec, ood_rec = records["obqa_edl"], records["csqa4_edl"]  # the pair's two sides, scored alone
    [want] = ood_rows(id_rec, ood_rec, scores=["reciprocal_vacuity"], k_policy="report", n_boot=0)
    assert row["fpr95_reciprocal_vacuity,none"] == pytest.approx(want["fpr95"], abs=1e-12)
    # reciprocal vacuity by its closed form, S / (lambda K) with lambda = 1, from the records' alpha
    s_id, s_ood = (np.array([np.nansum(r["alpha"]) / r["k"] for r in rec]) for rec in (id_rec, ood_rec))
    y_ood = np.r_[np.zeros(len(s_id)), np.ones(len(s_ood))]  # AUPR-Out: OOD positive, ranked by low confidence
    oracle = average_precision_score(y_ood, -np.r_[s_id, s_ood])
    assert row["aupr_out_reciprocal_vacuity,none"] == pytest.approx(oracle, abs=1e-12)
    assert 0.0 <= row["fpr95_reciprocal_vacuity,none"] <= 1.0
