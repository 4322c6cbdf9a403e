"""The report a reader finishes: ``report.md`` short enough to read (every score in ``appendix.md``), one line
for the run, one line for the K artefact, the one-sentence takeaway, and each number written one way."""

from __future__ import annotations

import re

import numpy as np
import pytest

from lm_eval_evidential.records import Records, make_record
from lm_eval_evidential.report import APPENDIX_FILE, build_report

LETTERS = "ABCDE"
#: The demo's report (nine tasks, two policies, every score) was 1,333 lines; what a reader acts on fits in this.
MAX_REPORT_LINES = 320


def _model(task, ks, evidence_of, seed=0) -> Records:
    """Records of one question per entry of ``ks`` (its K) whose evidence is ``evidence_of(rng, k)``."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, k in enumerate(ks):
        e = np.asarray(evidence_of(rng, int(k)), dtype=float)[: int(k)]
        rows.append(
            make_record(
                task=task,
                doc_id=i,
                labels=list(LETTERS[:k]),
                gold=int(rng.integers(k)),
                logits=np.log(np.expm1(np.maximum(e, 1e-9))),
                alpha=e + 1.0,
            )
        )
    meta = {"method": "edl", "prior_weight": 1.0, "pretrained": "synthetic-llm", "date_id": "2026-01-01T00-00-00.1"}
    return Records.from_rows(rows, task=task, meta=meta)


def _records(task, ks, shift, seed) -> Records:
    """Softplus evidence of normal logits around ``shift``."""
    return _model(task, ks, lambda rng, k: np.logaddexp(0.0, rng.normal(shift, 1.5, size=k)), seed)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The demo's shape: an ID task, six K-matched OOD tasks, one of K = 5 and one of mixed K, two policies."""
    out = tmp_path_factory.mktemp("report") / "rep"
    mixed = np.random.default_rng(9).choice([3, 4, 5], size=60, p=[0.1, 0.8, 0.1])
    ood = [_records(f"ood{i}", [4] * 60, 0.2 * i, 10 + i) for i in range(6)]
    ood += [_records("five", [5] * 60, 0.0, 20), _records("mixed", mixed, 0.0, 21)]
    data = build_report(
        _records("idt", [4] * 60, 1.0, 1), ood, out, k_policy=["assert", "restrict"], n_boot=50, max_extra=2
    )
    return data, (out / "report.md").read_text(encoding="utf-8"), (out / APPENDIX_FILE).read_text(encoding="utf-8")


def test_report_md_is_what_a_reader_acts_on_and_every_score_is_in_the_appendix(report):
    data, md, appendix = report
    assert len(md.splitlines()) <= MAX_REPORT_LINES, len(md.splitlines())
    assert "<details>" not in md and "## Appendix" not in md
    pairs = len(data["orders"])
    assert pairs > 100 and f"Score-order equivalence, every pair ({pairs} rows)" in appendix
    assert "| ood0 | l1_to_uniform |" in appendix and "| ood0 | l1_to_uniform |" not in md
    assert f"[{APPENDIX_FILE}]({APPENDIX_FILE})" in md


def test_one_run_is_named_once(report):
    _, md, _ = report
    (line,) = [line for line in md.splitlines() if line.startswith("- **Run")]
    assert line == "- **Run**: 2026-01-01T00-00-00.1 (all 9 tasks)"


def test_the_k_artefact_is_one_line_with_the_sweep_sections_numbers(report):
    data, md, _ = report
    summary = md.split("## Summary")[1].split("\n## ")[0]
    artefact = [line for line in summary.splitlines() if line.startswith("- **K artefact**")]
    assert len(artefact) == 1
    swept = {t: e["delong_test"] for t, e in data["ksweep"].items() if e.get("delong_test")}
    assert len(swept) == 6
    sweep_section = md.split("## K sweep")[1].split("\n## ")[0]
    for task, t in swept.items():
        said = f"{t['auroc_base']:.3f} → {t['auroc_expanded']:.3f} (Δ = {t['diff']:+.3f}, p = "
        assert f"{task} {said}" in artefact[0] and said in sweep_section
    # every signed move in the sweep section is written with the report's 3 decimals, as in the summary
    assert not re.search(r"[+-]\d\.\d{4}", sweep_section)


def test_the_takeaway_is_said_in_one_sentence_from_the_numbers(report):
    data, md, _ = report
    summary = md.split("## Summary")[1]
    (takeaway,) = [line for line in summary.splitlines() if line.startswith("**Takeaway.**")]
    valid = data["summary"]["valid"]
    at_chance = sum(lo <= 0.5 <= hi for lo, hi in (v["auroc_ci"] for v in valid))
    assert f"Of the {len(valid)} K-matched comparisons (reciprocal_vacuity AUROC): {at_chance} at chance" in takeaway
    deltas = [a["delta_auroc"] for a in data["summary"]["artefact"]]
    assert f"moves reciprocal_vacuity's AUROC by {min(deltas):+.3f} to {max(deltas):+.3f}" in takeaway
    assert takeaway.count(". ") == 0 and takeaway.endswith(".")


# ---- the demo's story: which scores a real extra option moved for the model at hand, and why


def _story(id_rec, ood_rec, control):
    from lm_eval_evidential.audits.explain import real_option_sentence
    from lm_eval_evidential.audits.ood import ood_rows

    scores = ["reciprocal_vacuity", "max_prob", "neg_norm_entropy"]
    mismatched = ood_rows(id_rec, ood_rec, scores=scores, k_policy="report", n_boot=0)
    matched = ood_rows(id_rec, control, scores=scores, n_boot=0)
    return real_option_sentence(id_rec, ood_rec, control, mismatched, matched), mismatched, matched


def test_flat_evidence_loses_max_prob_not_vacuity_and_the_sentence_says_so():
    """Every letter about the same evidence e: u = λ/(e + λ) whatever K, max-prob about 1/K."""
    flat = lambda rng, k: np.full(k, rng.uniform(1.0, 3.0)) + rng.normal(0, 0.01, k)  # noqa: E731
    story, mismatched, matched = _story(
        _model("idt", [4] * 80, flat, seed=1),
        _model("five", [5] * 80, flat, seed=2),
        _model("four", [4] * 80, flat, seed=3),
    )
    auroc = {r["score"]: r["auroc"] for r in mismatched}
    assert auroc["max_prob"] == 1.0 and abs(auroc["reciprocal_vacuity"] - 0.5) < 0.15  # the oracle: the AUROC rows
    assert story.startswith("For this model, a real extra option (five, K = 5, against four, the same source at K = 4)")
    assert f"moved AUROC max_prob {next(r['auroc'] for r in matched if r['score'] == 'max_prob'):.3f} → 1.000" in story
    assert "about the same evidence (the extra option gets 100% of the others' mean evidence)" in story
    assert "falls from 1/4 to 1/5" in story and story.count(". ") == 0


def test_an_extra_option_without_evidence_moves_vacuity_and_the_sentence_says_so():
    """Fixed total evidence per question spread unevenly over four letters, the fifth letter none: S grows by λ
    alone, so u = λK/S jumps from 4/12 to 5/13 on every question while max-prob barely moves."""
    uneven = lambda rng, k: np.r_[rng.dirichlet(np.ones(4)) * 8.0, np.zeros(k - 4)]  # noqa: E731
    story, mismatched, _ = _story(
        _model("idt", [4] * 80, uneven, seed=1),
        _model("five", [5] * 80, uneven, seed=2),
        _model("four", [4] * 80, uneven, seed=3),
    )
    auroc = {r["score"]: r["auroc"] for r in mismatched}
    assert auroc["reciprocal_vacuity"] == 1.0 and auroc["max_prob"] < 0.8
    assert (
        "moved AUROC reciprocal_vacuity" in story and "the extra option gets 0% of the others' mean evidence" in story
    )
    assert "vacuity u = λK/S counts one more option" in story and "Proposition 1" in story


def test_no_story_where_it_does_not_apply():
    from lm_eval_evidential.audits.explain import real_option_sentence

    flat = lambda rng, k: np.full(k, 2.0)  # noqa: E731
    four = _model("four", [4] * 80, flat)
    assert real_option_sentence(four, _model("other", [4] * 80, flat), four, [], []) is None  # no extra option


def test_the_report_says_what_a_real_extra_option_did_to_this_model(tmp_path):
    """csqa_edl (K = 5) is refused as a comparison, but the report still says, in one sentence, which scores its
    fifth option moved against its K-matched control csqa4_edl, and why."""
    flat = lambda rng, k: np.full(k, rng.uniform(1.0, 3.0)) + rng.normal(0, 0.01, k)  # noqa: E731
    records = [
        _model(t, [k] * 80, flat, seed=s) for t, k, s in (("obqa_edl", 4, 1), ("csqa_edl", 5, 2), ("csqa4_edl", 4, 3))
    ]
    data = build_report(records[0], records[1:], tmp_path / "r", n_boot=0, max_extra=1)
    story, _, _ = _story(*records)
    assert data["k_effect"] == [story]
    md = (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    summary = md.split("## Summary")[1].split("\n## ")[0]
    assert f"- **What K does to this model**: {story}" in summary
    assert summary.index("- **Refused**: obqa_edl → csqa_edl") < summary.index("What K does")
