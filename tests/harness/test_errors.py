"""Bad input gets a clear error naming task, doc and value, and the fix."""

from __future__ import annotations

import json
import shutil

import pytest

from lm_eval_evidential.harness.model import EvidentialInputError
from lm_eval_evidential.tasks.datasets import DatasetError

from .test_model import evaluate, make_lm, our_tasks


def write_rows(mirror, rel, rows):
    path = mirror / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def bad_mirror(mirror, tmp_path, monkeypatch):
    root = tmp_path / "mirror"
    shutil.copytree(mirror, root)
    monkeypatch.setenv("EVIDENTIAL_DATA_DIR", str(root))
    return root


def arc_row(qid, labels, key, texts=None):
    texts = texts or [f"option {x}" for x in labels]
    return {"id": qid, "question": "Which one is it?", "choices": {"text": texts, "label": labels}, "answerKey": key}


def load(task):
    return our_tasks().load([task])["tasks"][task]


@pytest.mark.parametrize(
    "row, message",
    [
        (arc_row("q-key", ["A", "B", "C", "D"], "F"), "answer key 'F' is not among the labels"),
        (arc_row("q-dup", ["A", "B", "B", "D"], "A"), "duplicate answer labels"),
        (arc_row("q-empty", [], "A"), "no answer options"),
        (arc_row("q-blank", ["A", "B", "C"], "A", ["x", " ", "z"]), "an answer option is empty"),
        (arc_row("q-six", ["A", "B", "C", "D", "E", "F"], "A"), "declares only 5 answer tokens"),
    ],
)
def test_bad_rows_name_task_doc_and_value(bad_mirror, row, message):
    write_rows(bad_mirror, "allenai/ai2_arc/ARC-Challenge/test.jsonl", [arc_row("ok", ["A", "B", "C", "D"], "B"), row])
    with pytest.raises(DatasetError) as err:
        load("arc_c_edl")
    text = str(err.value)
    assert message in text and "arc_c_edl" in text and row["id"] in text


def test_empty_split(bad_mirror):
    write_rows(bad_mirror, "allenai/openbookqa/main/test.jsonl", [])
    with pytest.raises(DatasetError, match="obqa_edl.*split 'test'.*is empty"):
        load("obqa_edl")


def test_missing_mirror_file_says_where_it_looked(bad_mirror):
    (bad_mirror / "tau/commonsense_qa/default/validation.jsonl").unlink()
    with pytest.raises(FileNotFoundError, match="csqa_edl.*commonsense_qa/default/validation.jsonl"):
        load("csqa_edl")


def test_unknown_method_fails_before_loading(tiny_model):
    with pytest.raises(ValueError, match="unknown method='evidental'.*edl, ib_edl, softmax"):
        make_lm(tiny_model, method="evidental")


def test_prompt_longer_than_max_length(tiny_model, use_mirror):
    with pytest.raises(
        EvidentialInputError,
        match=r"obqa_edl.*doc \d+.*longer than max_length=16; raise max_length "
        r"in --model_args \(the model's context is 1024 tokens\)",
    ):
        evaluate(make_lm(tiny_model, max_length=16), ["obqa_edl"], limit=2)


def test_prompt_longer_than_the_models_context_says_to_shorten_it(tiny_model, use_mirror, tmp_path):
    import json
    import shutil

    short = tmp_path / "short_context"
    shutil.copytree(tiny_model, short)
    config = json.loads((short / "config.json").read_text())
    (short / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 16}))
    with pytest.raises(
        EvidentialInputError,
        match=r"longer than max_length=16; it is longer than the model's "
        r"context of 16 tokens too: shorten the prompt",
    ):
        evaluate(make_lm(short), ["obqa_edl"], limit=2)


def test_adapter_for_another_base_model(tiny_model, tmp_path):
    from lm_eval_evidential.testing.tiny import build_lora_adapter, build_tiny_model

    other = build_tiny_model(tmp_path / "other", hidden_size=32, num_heads=2, seed=5)
    adapter = build_lora_adapter(other, tmp_path / "other_adapter")
    with pytest.raises(EvidentialInputError, match="does not fit the base model"):
        make_lm(tiny_model, adapter)


def test_non_finite_logits_name_the_doc(tiny_model, use_mirror, monkeypatch):
    lm = make_lm(tiny_model)
    original = lm._last_logits
    monkeypatch.setattr(lm, "_last_logits", lambda batch, *prefix: original(batch, *prefix).clone().fill_(float("inf")))
    with pytest.raises(EvidentialInputError, match=r"obqa_edl.*doc \d+.*non-finite answer logit inf, computed in "):
        evaluate(lm, ["obqa_edl"], limit=2)  # float32: the cause is named as the weights, never float16
    monkeypatch.setattr(lm, "records_dtype", lambda: "float16")
    with pytest.raises(EvidentialInputError, match=r"non-finite answer logit inf \(float16 overflow\?\); .*bfloat16"):
        evaluate(lm, ["obqa_edl"], limit=2)


def test_multi_token_answer_label(tiny_model, use_mirror):
    lm = make_lm(tiny_model)

    class Req:
        args = ("Return the label. Answer:", " zebra-crossing")
        task_name, doc_id, doc = "custom", 7, {}

    with pytest.raises(
        EvidentialInputError, match=r"task 'custom' doc 7: choice ' zebra-crossing' is \d+ tokens .* single token"
    ):
        lm.loglikelihood([Req()])


def test_colliding_answer_labels(tiny_model):
    lm = make_lm(tiny_model)

    class Req:
        def __init__(self, cont):
            self.args = ("Question? Answer:", cont)
            self.task_name, self.doc_id, self.doc = "custom", 3, {}

    with pytest.raises(EvidentialInputError, match="share token ids"):
        lm.loglikelihood([Req(" A"), Req(" A")])


def test_cardinality_mismatch_refuses_before_any_forward_pass(tiny_model, use_mirror, monkeypatch):
    from lm_eval_evidential.metrics.cardinality import CardinalityMismatchError

    lm = make_lm(tiny_model)
    monkeypatch.setattr(lm, "_last_logits", lambda batch: pytest.fail("forward pass despite a K mismatch"))
    with pytest.raises(CardinalityMismatchError) as err:
        evaluate(lm, ["obqa_edl_vs_csqa_edl"])
    assert "obqa_edl {4:" in str(err.value) and "csqa_edl {5:" in str(err.value)


def test_policy_override_through_metadata_reproduces_the_artefact(tiny_model, use_mirror):
    results, _ = evaluate(make_lm(tiny_model), ["obqa_edl_vs_csqa_edl"], limit=None, metadata={"k_policy": "report"})
    row = results["results"]["obqa_edl_vs_csqa_edl"]
    assert row["k_matched,none"] == 0.0
    assert 0.0 <= row["auroc_reciprocal_vacuity,none"] <= 1.0


def test_restrict_policy_drops_other_k(tiny_model, use_mirror):
    results, _ = evaluate(make_lm(tiny_model), ["obqa_edl_vs_arc_c_edl"], limit=None)
    row = results["results"]["obqa_edl_vs_arc_c_edl"]
    assert row["k_matched,none"] == 1.0
    arc = load("arc_c_edl")
    n_k4 = sum(1 for d in arc.eval_docs if d["k"] == 4)
    assert row["n_ood,none"] == n_k4 < len(arc.eval_docs)
