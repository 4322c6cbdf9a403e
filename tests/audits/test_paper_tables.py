"""``tables``: McNamara (2026)'s Tables 1 and 3-6 from one run, each cell the audit it names, the
published values only where the setting matches."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lm_eval_evidential.audits.ood import KSWEEP_ROW_KEYS, ksweep_rows, ood_rows, subset_records
from lm_eval_evidential.audits.paper_tables import PUBLISHED, paper_tables
from lm_eval_evidential.cli import main
from lm_eval_evidential.records import Records, load_run, make_record, records_path, write_records

DATE = "2026-11-21T20-15-03.123456"
TASKS = {  # task: (K of its questions, logit shift)
    "obqa_edl": ([4] * 60, 1.0),
    "arc_c_edl": ([4] * 40 + [3, 5, 5], 0.2),
    "arc_e_edl": ([4] * 45, 0.4),
    "csqa_edl": ([5] * 50, 0.0),
    "csqa4_edl": ([4] * 40, 0.0),
    "mmlu_math_edl": ([4] * 35, -0.5),
}


def _records(task, ks, shift, seed, method):
    rng = np.random.default_rng(seed)
    rows = []
    for i, k in enumerate(ks):
        z = rng.normal(shift, 1.5, size=k)
        rows.append(
            make_record(
                task=task,
                doc_id=i,
                labels=list("ABCDE"[:k]),
                gold=0,
                logits=z,
                alpha=None if method == "softmax" else np.logaddexp(0, z) + 1.0,
                optional={"phantom_logits": rng.normal(shift - 1, 1.5, size=4)},
            )
        )
    meta = {"method": method, "prior_weight": 1.0, "pretrained": "synthetic-llm", "phantom_count": 4}
    return Records.from_rows(rows, task=task, meta=meta)


@pytest.fixture(scope="module", params=["edl", "ib_edl"])
def run_dir(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    for seed, (task, (ks, shift)) in enumerate(TASKS.items()):
        write_records(records_path(root / "m", task, DATE), _records(task, ks, shift, seed, request.param))
    return root, request.param


def test_cells_are_the_audits_they_name(run_dir):
    root, method = run_dir
    run = load_run(root, list(TASKS))
    data = paper_tables(run["obqa_edl"], {t: run[t] for t in TASKS if t != "obqa_edl"})
    arc4 = subset_records(run["arc_c_edl"], run["arc_c_edl"].k == 4)
    by = {(r["task"], r["row"]): r for r in data["B"]}
    correct = {
        r["score"]: r for r in ood_rows(run["obqa_edl"], arc4, n_boot=0, scores=["max_prob", "reciprocal_vacuity"])
    }
    assert by[("arc_c_edl", "correct")]["um_auroc"] == correct["reciprocal_vacuity"]["auroc"]
    assert by[("arc_c_edl", "correct")]["n_ood"] == 40  # the 3- and 5-option questions left out
    # Implementation B's mismatch row: vacuity's K alone, so max-prob exactly unchanged (the paper's pattern)
    assert by[("arc_c_edl", "correct")]["delta_mp_auroc"] == 0.0
    assert by[("arc_c_edl", "correct")]["delta_um_auroc"] < 0
    sweep = ksweep_rows(run["obqa_edl"], arc4, scores=["reciprocal_vacuity"], phantom="count", max_extra=1)
    x1 = next(r for r in sweep if r["condition"] == "ood_only" and r["extra"] == 1)
    assert by[("arc_c_edl", "mismatch")]["um_auroc"] == pytest.approx(x1["auroc"], abs=1e-12)
    table = 5 if method == "ib_edl" else 6
    assert data["published_tables"]["B"] == table
    assert by[("arc_c_edl", "correct")]["published"]["um_auroc"] == PUBLISHED[table][("ARC-C", "correct")][3]
    a = {(r["task"], r["row"]): r for r in data["A"]}
    if method == "ib_edl":  # the model's own " E" evidence needs IB-EDL's phantom sigma: said, not guessed
        assert "IB-EDL" in a[("arc_c_edl", "mismatch")]["reason"]
    else:
        assert np.isfinite(a[("arc_c_edl", "mismatch")]["um_auroc"]) and "reason" not in a[("arc_c_edl", "mismatch")]
    assert ("mmlu_math_edl", "mismatch") not in a  # MMLU Math is in Tables 5-6 only
    t1 = data["table1"]["arc_c_edl"]["rows"]
    assert (t1[1]["published"] is not None) == (method == "edl")


def test_cli_prints_markdown_and_json(run_dir, tmp_path, capsys):
    root, method = run_dir
    out = tmp_path / "t.json"
    ood = "arc_c_edl,arc_e_edl,csqa_edl,csqa4_edl,mmlu_math_edl"
    assert main(["tables", str(root), "--id", "obqa_edl", "--ood", ood, "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "### Table 1: obqa_edl → arc_c_edl" in text and "Implementation B (Tables 5-6)" in text
    assert f"McNamara (2026) Table {5 if method == 'ib_edl' else 6}, Llama-3-8B" in text
    assert '4 (removed "E")' in text
    assert set(json.loads(out.read_text())) >= {"table1", "A", "B", "method"}


def test_report_takes_the_phantom_mode(run_dir, tmp_path):
    root, method = run_dir
    args = ["report", str(root), "--id", "obqa_edl", "--ood", "mmlu_math_edl", "--n-boot", "0", "--max-extra", "2"]
    phantom = "model" if method == "edl" else "count"
    assert main([*args, "--out", str(tmp_path / "r"), "--phantom", phantom]) == 0
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    rows = report["ksweep"]["mmlu_math_edl"]["rows"]
    assert {r["phantom"] for r in rows} == {phantom} and report["ksweep"]["mmlu_math_edl"]["delong_test"][
        "phantom"
    ] == phantom
    text = (tmp_path / "r" / "report.md").read_text()
    assert ("model's own next labels" if phantom == "model" else "vacuity's K alone") in text
    assert "Proposition 1 (McNamara 2026)" in text
    if method == "edl":  # Implementation A beside the K-matched number
        (a, b) = [r for r in report["implementation_a"] if r["ood_task"] == "mmlu_math_edl"]
        assert a["forced_k"] == 5 and a["auroc_forced"] != a["auroc"] and "## Implementation A" in text
    else:
        (skipped,) = [s for s in report["skipped"] if s["section"].startswith("Implementation A (the published bug")]
        assert "IB-EDL records keep no sigma" in skipped["reason"]


def test_rows_are_typed_and_keep_the_key_order_tables_json_has_always_had(run_dir, tmp_path):
    from lm_eval_evidential.audits.paper_tables import ImplementationRow, Table1Row

    root, method = run_dir
    out = tmp_path / "t.json"
    ood = "arc_c_edl,arc_e_edl,csqa_edl,mmlu_math_edl"  # no csqa4_edl: CSQA's second row is undefined, with a reason
    assert main(["tables", str(root), "--id", "obqa_edl", "--ood", ood, "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    metrics = ["aupr_base", "mp_auroc", "mp_aupr", "um_auroc", "um_aupr", "n_ood", "k_ood"]
    labels = ["row", "dataset", "task", "k_label", "published"]
    deltas = [f"delta_{m}" for m in metrics[:5]]
    for implementation in ("A", "B"):
        for first, second in zip(data[implementation][::2], data[implementation][1::2]):
            assert list(first) == metrics + (["reason"] if "reason" in first else []) + labels, first
            assert list(second) == metrics + (["reason"] if "reason" in second else []) + labels + deltas, second
    assert any("reason" in r for r in data["B"])
    sweep = data["table1"]["arc_c_edl"]["rows"]
    assert list(sweep[0]) == [*KSWEEP_ROW_KEYS, "published"]
    run = load_run(root, list(TASKS))
    typed = paper_tables(run["obqa_edl"], {t: run[t] for t in ("arc_c_edl", "csqa_edl")})
    assert all(type(r) is ImplementationRow for r in typed["A"] + typed["B"])
    assert all(type(r) is Table1Row for r in typed["table1"]["arc_c_edl"]["rows"])


def test_the_tables_cells_are_ours_then_the_papers_and_the_move(run_dir, capsys):
    root, method = run_dir
    assert main(["tables", str(root), "--id", "obqa_edl", "--ood", "arc_c_edl"]) == 0
    data = paper_tables(*(lambda run: (run["obqa_edl"], {"arc_c_edl": run["arc_c_edl"]}))(load_run(root, list(TASKS))))
    text = capsys.readouterr().out.splitlines()
    first, second = data["B"]
    paper = PUBLISHED[5 if method == "ib_edl" else 6][("ARC-C", "correct")]
    header = [i for i, x in enumerate(text) if x.startswith("| Dataset")][-1]  # Implementation B's table
    line = text[header + 3]
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[:4] == ["ARC-C", "4 (correct)", str(second["n_ood"]), f"{second['aupr_base']:.3f} ({paper[0]:.3f})"]
    assert cells[4:6] == [f"{second['mp_auroc']:.3f} ({paper[1]:.3f})", f"{second['delta_mp_auroc']:+.3f}"]
    first_line = text[text.index(line) - 1]
    assert first_line.endswith("|  |") and first_line.count("|  |") == 4  # the first row of a pair has no move
