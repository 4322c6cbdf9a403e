"""The report's sections on conformal sets, temperature scaling and OpenOOD's near/far groups
(:mod:`lm_eval_evidential.report.field`): each equals what its own command writes on the same records
(``conformal``, ``temperature``, ``ood --near/--far``), the group mean rows equal a hand mean over the
K-matched sets, refused sets are named, and ``report --near/--far`` refuses what ``ood`` refuses."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from lm_eval_evidential.records import records_path, write_records
from lm_eval_evidential.report import build_report
from lm_eval_evidential.report.folder import check_groups
from tests.audits.test_ood_groups import _records  # synthetic EDL records of one task
from tests.audits.test_quality import cli as _cli  # in-process: (status, stdout, stderr)

DATE = "2026-11-21T20-15-03.123456"
SCORES = "reciprocal_vacuity,max_prob"
FAST = ["--scores", SCORES, "--n-boot", "30", "--max-extra", "1", "--seed", "3"]


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("harness_out")
    for task, ks, shift, seed in (
        ("id4", [4] * 120, 1.0, 1),
        ("near_a", [4] * 50, 0.5, 2),
        ("near_b", [4] * 40, 0.3, 3),
        ("far_a", [4] * 45, -0.5, 4),
        ("far5", [5] * 40, -0.5, 5),
    ):
        write_records(records_path(root / "synthetic", task, DATE), _records(task, ks, shift, seed))
    return root


@pytest.fixture(scope="module")
def grouped(out_dir, tmp_path_factory):
    """``report --near near_a,near_b --far far_a,far5 --percent``: far5 (K = 5) is refused."""
    out = tmp_path_factory.mktemp("rep") / "report"
    from lm_eval_evidential.cli.main import main

    rc = main(
        [
            "report",
            str(out_dir),
            "--id",
            "id4",
            "--near",
            "near_a,near_b",
            "--far",
            "far_a,far5",
            "--percent",
            "--out",
            str(out),
            *FAST,
        ]
    )
    return rc, out, json.loads((out / "report.json").read_text())


def _json(argv, capsys, tmp_path):
    path = tmp_path / "rows.json"
    rc, _, err = _cli([*argv, "--json", path], capsys)
    return rc, json.loads(path.read_text()), err


def test_a_refused_set_makes_the_grouped_report_exit_2_and_is_named(grouped):
    rc, out, report = grouped
    assert rc == 2  # far5 has K = 5 against id4's 4: refused, the rest written
    md = (out / "report.md").read_text()
    assert "## OOD detection by group (OpenOOD layout)" in md
    assert "far5 (far)" in md and "mean over 1 of the 2 far sets: far5 refused (K mismatch)" in md
    assert [r["ood_task"] for r in report["ood_groups"]["refused"]] == ["far5"]
    assert report["ood_groups"]["refused"][0]["group"] == "far"
    assert "OOD positive" in md  # FPR@95's direction is named
    for name in ("ood_groups_id4", "conformal_id4"):
        assert sorted(report["figures"][name]) == [f"{name}.png", f"{name}.svg"]
        assert all((out / f).stat().st_size > 0 for f in report["figures"][name])


def test_the_group_rows_are_ood_s_rows_and_the_means_a_hand_mean(grouped, out_dir, capsys, tmp_path):
    _, _, report = grouped
    argv = ["ood", out_dir, "--id", "id4", "--near", "near_a,near_b", "--far", "far_a,far5", "--percent"]
    rc, rows, _ = _json([*argv, "--scores", SCORES], capsys, tmp_path)
    assert rc == 2
    assert report["ood_groups"]["rows"] == rows
    for group, sets in (("near", ["near_a", "near_b"]), ("far", ["far_a"])):
        for score in SCORES.split(","):
            mine = {r["set"]: r for r in rows if r["group"] == group and r["score"] == score}
            assert mine[group]["n_sets"] == len(sets)
            for key in ("fpr95", "auroc", "aupr_in", "aupr_out"):
                assert mine[group][key] == pytest.approx(np.mean([mine[s][key] for s in sets]))
            assert all(mine[s]["auroc"] > 1 for s in sets)  # --percent: x100


def test_the_conformal_section_is_the_conformal_command(grouped, out_dir, capsys, tmp_path):
    _, out, report = grouped
    sec = report["conformal"]
    for method in ("lac", "aps"):
        argv = ["conformal", out_dir, "--id", "id4", "--ood", "near_a,near_b,far_a,far5", "--method", method]
        rc, rows, err = _json([*argv, "--seed", "3", "--n-boot", "30", "--alpha", "0.1"], capsys, tmp_path)
        assert rc == 2 and "far5" in err
        mine = [r for r in sec["rows"] if r["method"] == method]
        assert [r["set"] for r in mine] == ["id4", "near_a", "near_b", "far_a"]
        for a, b in zip(mine, rows):
            assert {k: v for k, v in a.items() if k != "calibration"} == {
                k: v for k, v in b.items() if k != "calibration"
            }
    assert [r["ood_task"] for r in sec["refused"]] == ["far5"]
    assert sec["calibration"] == "id4 (0.5 of 120, seed 3)" and sec["level"] == 0.95
    lac = next(t for t in sec["thresholds"] if t["method"] == "lac")
    assert lac["rank"] == math.ceil((60 + 1) * 0.9) and lac["n"] == 60
    md = (out / "report.md").read_text()
    assert f"lac qhat = {lac['qhat']:.4g} (order statistic {lac['rank']} of 60 scores)" in md
    assert "| near_a | ood | lac | 4 | 50 |" in md and "| near_a | ood | aps |" not in md
    assert "| near_a | ood | aps |" in (out / "appendix.md").read_text()


def test_the_temperature_section_is_the_temperature_command(grouped, out_dir, capsys, tmp_path):
    _, out, report = grouped
    sec = report["temperature"]
    argv = ["temperature", out_dir, "--id", "id4", "--ood", "near_a,near_b,far_a,far5", "--seed", "3"]
    rc, rows, _ = _json(argv, capsys, tmp_path)
    assert rc == 2
    assert sec["rows"] == rows
    t = rows[-1]["temperature"]
    assert sec["temperature"] == t and f"T = {t:.4g}" in sec["line"]
    md = (out / "report.md").read_text()
    section = md.split("## Post-hoc temperature scaling")[1].split("\n## ")[0]
    before = next(r for r in rows if r["set"] == "near_a" and r["probs"] == "records")
    after = next(r for r in rows if r["set"] == "near_a" and r["probs"] == "softmax(z/T)")
    assert f"{before['ece']:.3f} → {after['ece']:.3f}" in section
    assert f"{before['auroc']:.3f} → {after['auroc']:.3f}" in section
    assert "refused by the K check" in section and "far5" in section


def test_without_groups_the_report_has_no_group_section(out_dir, tmp_path):
    from lm_eval_evidential.records import load_run

    run = load_run(out_dir, ["id4", "near_a"])
    idr, near = run.records["id4"], run.records["near_a"]
    report = build_report(idr, [near], tmp_path / "r", scores=["max_prob"], n_boot=0, max_extra=0)
    assert "ood_groups" not in report and report["conformal"]["rows"] and report["temperature"]["rows"]
    assert "## OOD detection by group" not in (tmp_path / "r" / "report.md").read_text()


def test_group_options_are_checked_before_any_work(out_dir, capsys, tmp_path):
    argv = ["report", out_dir, "--id", "id4", "--out", tmp_path / "r"]
    rc, _, err = _cli([*argv, "--ood", "near_a", "--near", "near_b"], capsys)
    assert rc == 1 and "give --ood or --near/--far" in err
    rc, _, err = _cli([*argv, "--near", "near_a", "--far", "near_a"], capsys)
    assert rc == 1 and "near_a named in both --near and --far" in err
    assert not (tmp_path / "r").exists()
    with pytest.raises(ValueError, match="not among the OOD tasks"):
        check_groups({"near": ["x"]}, ["y"])
    with pytest.raises(ValueError, match=r"^unknown fpr95 direction 'tpr'; choose one of openood, odin$"):
        build_report(None, [], tmp_path / "r", fpr95="tpr")  # refused before the records are read
