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


def _records(task, ks, shift, seed) -> Records:
    rng = np.random.default_rng(seed)
    rows = []
    for i, k in enumerate(ks):
        z = rng.normal(shift, 1.5, size=int(k))
        rows.append(
            make_record(
                task=task,
                doc_id=i,
                labels=list(LETTERS[:k]),
                gold=int(rng.integers(k)),
                logits=z,
                alpha=np.logaddexp(0.0, z) + 1.0,
            )
        )
    meta = {"method": "edl", "prior_weight": 1.0, "pretrained": "synthetic-llm", "date_id": "2026-01-01T00-00-00.1"}
    return Records.from_rows(rows, task=task, meta=meta)


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
