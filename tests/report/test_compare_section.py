"""``report --compare``: "Methods side by side" is ``compare --json`` on the same records, K-checked the same way.

The section's rows equal the command's row for row (one computation: each of the command's numbers has its
numpy / torchmetrics / scikit-learn oracle in tests/audits/test_compare.py); its takeaway names the methods an
independent reading of those rows finds best; a K-mismatched pair is refused with the remedy (exit 2, the
rest written) unless the report's K policies include ``report``, which computes it marked K-MISMATCHED.
"""

from __future__ import annotations

import json

import pytest

from lm_eval_evidential.audits.table import format_number
from lm_eval_evidential.cli import main
from tests.audits.test_compare import _write  # synthetic runs: 3 softmax members, or an EDL head

OOD = "ood4,ood5,mixed"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = {}
    for kind in ("ens", "edl"):
        root = tmp_path_factory.mktemp(kind)
        _write(root, "id4", [4] * 120, 1, 1.0, kind)
        _write(root, "ood4", [4] * 80, 2, 0.0, kind)
        _write(root, "ood5", [5] * 60, 3, 0.0, kind)
        _write(root, "mixed", [4, 5, 3] * 20, 4, 0.0, kind)
        out[kind] = root
    return out


def _compare_json(runs, tmp_path, *extra) -> tuple[int, dict]:
    path = tmp_path / "compare.json"
    argv = ["compare", str(runs["edl"]), str(runs["ens"]), "--names", "EDL,Ensemble", "--id", "id4", "--ood", OOD]
    status = main([*argv, "--n-boot", "100", "--json", str(path), *extra])
    rows = json.loads(path.read_text())
    return status, {
        t: [{k: v for k, v in r.items() if k != "table"} for r in rows if r["table"] == t]
        for t in ("calibration", "ood")
    }


def _report(runs, out, *extra) -> int:
    argv = ["report", str(runs["edl"]), "--id", "id4", "--ood", OOD, "--out", str(out), "--n-boot", "100"]
    return main([*argv, "--compare", str(runs["ens"]), "--compare-names", "EDL,Ensemble", *extra])


def test_the_section_is_compare_json_and_refuses_across_k(runs, tmp_path, capsys):
    status, want = _compare_json(runs, tmp_path)
    assert status == 2  # ood5 refused
    capsys.readouterr()
    assert _report(runs, tmp_path / "r") == 2
    err = capsys.readouterr().err
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    section = report["compare"]
    assert section["methods"] == ["EDL", "Ensemble"] and section["k_mismatched"] is False
    assert section["calibration"] == want["calibration"]
    assert section["ood"] == want["ood"]
    refused = {(r["method"], r["ood_task"]) for r in section["refused"]}
    assert refused == {("EDL", "ood5"), ("Ensemble", "ood5"), ("EDL", "mixed"), ("Ensemble", "mixed")}
    assert "refused in the comparison: Ensemble: id4 vs ood5: K_ID = [4] vs K_OOD = [5]: not compared" in err
    assert "adding report to --k-policy computes it marked K-MISMATCHED" in err

    # report.md: the rows through the one renderer, the takeaway from the summary
    md = (tmp_path / "r" / "report.md").read_text()
    body = md.split("## Methods side by side")[1].split("\n## ")[0]
    for row in section["calibration"]:
        assert f"| {row['method']} | {row['kind']} | 4 | 120 | {format_number(row['acc'])} |" in body
    for row in section["ood"]:
        assert f"{format_number(row['auroc'])} | [{format_number(row['auroc_ci'][0])}," in body
    assert "- **Refused**: Ensemble / ood5: K_ID = [4] vs K_OOD = [5]" in body
    takeaway = report["summary"]["compare"]
    assert f"**Takeaway.** {takeaway}" in body

    # the takeaway against an independent reading of compare --json's rows
    cal = want["calibration"]
    best_acc = max(cal, key=lambda r: r["acc"])
    best_nll = min(cal, key=lambda r: r["nll"])
    assert f"the highest accuracy is {best_acc['method']}'s ({format_number(best_acc['acc'])})" in takeaway
    assert f"the lowest NLL is {best_nll['method']}'s ({format_number(best_nll['nll'])})" in takeaway
    for task in ("ood4", "mixed"):
        rows = [r for r in want["ood"] if r["ood_task"] == task and r["score"] == "max_prob"]
        assert {r["method"] for r in rows} == {"EDL", "Ensemble"}
        lead, other = sorted(rows, key=lambda r: -r["auroc"])
        clause = f"{task} (max_prob AUROC): {lead['method']} leads with {format_number(lead['auroc'])}"
        assert clause in takeaway
        apart = other["auroc_ci"][1] < lead["auroc_ci"][0]
        assert ("its interval clear of every other method's" if apart else f"not separated from {other['method']}") in (
            takeaway.split(clause)[1].split(";")[0]
        )
    assert "4 method/OOD pairs across K refused" in takeaway


def test_k_policy_report_computes_the_papers_protocol_marked(runs, tmp_path, capsys):
    status, want = _compare_json(runs, tmp_path, "--k-mismatched")
    assert status == 0
    assert _report(runs, tmp_path / "r", "--k-policy", "assert,report") == 2  # the OOD section's assert refuses ood5
    section = json.loads((tmp_path / "r" / "report.json").read_text())["compare"]
    assert section["k_mismatched"] is True and section["refused"] == []
    assert section["ood"] == want["ood"]
    marked = [r for r in section["ood"] if r["ood_task"] == "ood5"]
    assert marked and all(r["protocol"].startswith("K-MISMATCHED") and r["matched"] is False for r in marked)
    md = (tmp_path / "r" / "report.md").read_text()
    assert "Rows marked K-MISMATCHED reproduce the papers' protocol" in md
    assert "the K-MISMATCHED rows (the papers' protocol) move with K and are no result" in md


def test_bad_comparisons_are_refused_before_anything_is_written(runs, tmp_path, capsys):
    base = ["report", str(runs["edl"]), "--id", "id4", "--ood", "ood4", "--out", str(tmp_path / "r"), "--n-boot", "0"]
    assert main([*base, "--compare", str(runs["ens"]), "--compare-names", "A,B,C"]) == 1
    assert "--compare-names gives 3 name(s) for 2 methods" in capsys.readouterr().err
    assert main([*base, "--compare-names", "A,B"]) == 1
    assert "--compare-names names the methods of --compare" in capsys.readouterr().err
    assert main([*base, "--compare", str(runs["edl"])]) == 1  # this run again, under its own folder name
    assert "the folders' names repeat" in capsys.readouterr().err
    _write(tmp_path / "partial", "id4", [4] * 20, 5, 1.0, "ens")  # a method's run without ood4
    assert main([*base, "--compare", str(tmp_path / "partial")]) == 1
    assert "no records for task 'ood4'" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
