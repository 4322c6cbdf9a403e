"""The K-controlled OOD audit (lm_eval_evidential.audits.ood / .report) and its CLI commands, end to end.

Synthetic records written like the harness does (``<out>/<model>/records_<task>_<date_id>.parquet``):
``id4`` (K = 4, more evidence), ``ood4`` (K = 4), ``ood5`` (K = 5) and ``mix`` (K in {3, 4, 5}).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score, roc_curve

from lm_eval_evidential.audits.ood import (
    KSWEEP_ROW_KEYS,
    OOD_ROW_KEYS,
    CardinalityMismatchError,
    ksweep_delong,
    ksweep_rows,
    ood_rows,
    resolve_scores,
)
from lm_eval_evidential.cli import main
from lm_eval_evidential.metrics.scores import available_scores, compute_score
from lm_eval_evidential.plots import plot_ksweep
from lm_eval_evidential.records import (
    FingerprintMismatchError,
    Records,
    checked_together,
    load_records,
    make_record,
    records_path,
    write_records,
)

DATE = "2026-11-21T20-15-03.123456"
LETTERS = "ABCDE"
N_BOOT = 200


def _records(task: str, ks, shift: float, seed: int, *, softmax: bool = False) -> Records:
    rng = np.random.default_rng(seed)
    rows = []
    for i, k in enumerate(ks):
        z = rng.normal(shift, 1.5, size=int(k))
        alpha = None if softmax else np.logaddexp(0.0, z) + 1.0
        rows.append(
            make_record(task=task, doc_id=i, labels=list(LETTERS[:k]), gold=int(rng.integers(k)), logits=z, alpha=alpha)
        )
    meta = {"method": "softmax" if softmax else "edl", "prior_weight": 1.0, "pretrained": "synthetic-llm"}
    return Records.from_rows(rows, task=task, meta=meta)


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("harness_out")
    folder = root / "synthetic-llm"
    mix_k = np.random.default_rng(7).choice([3, 4, 5], size=180)
    for task, ks, shift, seed in (
        ("id4", [4] * 240, 1.0, 1),
        ("ood4", [4] * 160, 0.0, 2),
        ("ood5", [5] * 150, 0.0, 3),
        ("mix", mix_k, 0.0, 4),
    ):
        write_records(records_path(folder, task, DATE), _records(task, ks, shift, seed))
    return root


@pytest.fixture(scope="module")
def recs(out_dir) -> dict[str, Records]:
    return {t: load_records(out_dir, t) for t in ("id4", "ood4", "ood5", "mix")}


# ---- ood_rows ----


def test_ood_rows_have_exactly_the_specified_keys(recs):
    rows = ood_rows(recs["id4"], recs["ood4"], n_boot=N_BOOT)
    assert [r["score"] for r in rows] == available_scores(True)
    for r in rows:
        assert tuple(r) == OOD_ROW_KEYS
        assert (r["id_task"], r["ood_task"], r["k_id"], r["k_ood"]) == ("id4", "ood4", 4, 4)
        assert (r["n_id"], r["n_ood"], r["n_dropped"], r["matched"]) == (240, 160, {"id": 0, "ood": 0}, True)


def _sklearn_row(y, s):
    fpr, tpr, _ = roc_curve(y, s, drop_intermediate=False)
    return {
        "auroc": roc_auc_score(y, s),
        "aupr_in": average_precision_score(y, s),
        "aupr_out": average_precision_score(1 - y, -s),
        "fpr95": fpr[np.argmax(tpr >= 0.95)],
        "aupr_baseline": y.mean(),
    }


@pytest.mark.parametrize("ood, policy", [("ood4", "assert"), ("mix", "report"), ("mix", "restrict")])
def test_ood_metrics_agree_with_sklearn(recs, ood, policy):
    id_r, ood_r = recs["id4"], recs["ood4" if ood == "ood4" else ood]
    rows = {r["score"]: r for r in ood_rows(id_r, ood_r, k_policy=policy, n_boot=0)}
    keep = ood_r.k == 4 if policy == "restrict" else np.ones(len(ood_r), dtype=bool)
    y = np.r_[np.ones(len(id_r)), np.zeros(int(keep.sum()))].astype(int)
    # Reciprocal vacuity and max prob straight from the stored columns, independently of the score registry.
    direct = {
        "reciprocal_vacuity": np.r_[1 / id_r.vacuity, 1 / ood_r.vacuity[keep]],
        "max_prob": np.r_[id_r.max_prob, ood_r.max_prob[keep]],
    }
    for name, row in rows.items():
        s = direct.get(name)
        if s is None:
            s = np.r_[
                compute_score(name, probs=None, k=id_r.k, alpha=id_r.alpha),
                compute_score(name, probs=None, k=ood_r.k[keep], alpha=ood_r.alpha[keep]),
            ]
        for key, want in _sklearn_row(y, s).items():
            assert row[key] == pytest.approx(want, abs=1e-9), (name, key)


def test_confidence_intervals_contain_the_estimate(recs):
    for r in ood_rows(recs["id4"], recs["ood4"], n_boot=N_BOOT, seed=3):
        lo, hi = r["auroc_ci"]
        assert lo < r["auroc"] < hi
        lo, hi = r["aupr_in_ci"]
        assert lo <= r["aupr_in"] <= hi and hi - lo > 0
    # Same seed, same interval; n_boot=0 skips the bootstrap.
    a = ood_rows(recs["id4"], recs["ood4"], scores=["max_prob"], n_boot=50, seed=5)
    b = ood_rows(recs["id4"], recs["ood4"], scores=["max_prob"], n_boot=50, seed=5)
    assert a == b
    assert all(np.isnan(ood_rows(recs["id4"], recs["ood4"], scores=["max_prob"], n_boot=0)[0]["aupr_in_ci"]))


def test_assert_policy_refuses_a_k_mismatch_with_both_histograms(recs):
    with pytest.raises(CardinalityMismatchError, match=r"id4 \{4: 240\} vs ood5 \{5: 150\}"):
        ood_rows(recs["id4"], recs["ood5"])
    with pytest.raises(CardinalityMismatchError, match=r"mix \{3: \d+, 4: \d+, 5: \d+\}"):
        ood_rows(recs["id4"], recs["mix"])


def test_restrict_drops_other_k_and_reports_the_counts(recs):
    mix = recs["mix"]
    n4 = int((mix.k == 4).sum())
    rows = ood_rows(recs["id4"], mix, k_policy="restrict", scores=["reciprocal_vacuity"], n_boot=0)
    (r,) = rows
    assert (r["k_id"], r["k_ood"], r["n_ood"], r["matched"]) == (4, 4, n4, True)
    assert r["n_dropped"] == {"id": 0, "ood": len(mix) - n4}
    with pytest.raises(CardinalityMismatchError, match="left no ood5 examples"):
        ood_rows(recs["id4"], recs["ood5"], k_policy="restrict")


def test_report_policy_marks_mismatched_rows(recs):
    for name, matched in (("ood4", True), ("ood5", False), ("mix", False)):
        rows = ood_rows(recs["id4"], recs[name], k_policy="report", n_boot=0)
        assert {r["matched"] for r in rows} == {matched}
        assert all(r["n_dropped"] == {"id": 0, "ood": 0} for r in rows)
    mixed = ood_rows(recs["id4"], recs["mix"], k_policy="report", scores=["max_prob"], n_boot=0)[0]
    assert mixed["k_ood"] == {int(k): int((recs["mix"].k == k).sum()) for k in (3, 4, 5)}


def test_score_selection_is_validated(recs):
    with pytest.raises(ValueError, match="unknown score"):
        ood_rows(recs["id4"], recs["ood4"], scores=["vacuum"])
    sm = _records("sm4", [4] * 30, 0.0, 9, softmax=True)
    # Python callers get the CLI's producer rule: edl vs softmax records are refused ...
    for audit in (ood_rows, ksweep_rows, ksweep_delong):
        with pytest.raises(FingerprintMismatchError, match="method: id4='edl' vs sm4='softmax'"):
            audit(recs["id4"], sm)
    # ... unless asked for explicitly, once, where the records enter (then no audit checks again).
    with pytest.raises(FingerprintMismatchError, match="method: id4='edl' vs sm4='softmax'"):
        checked_together([recs["id4"], sm])
    (id4, sm_allowed), allowed = checked_together([recs["id4"], sm], allow=True)
    assert allowed == ["method: id4='edl' vs sm4='softmax'"]
    rows = ood_rows(id4, sm_allowed, n_boot=0)
    assert [r["score"] for r in rows] == available_scores(False)
    with pytest.raises(ValueError, match="method=softmax"):
        ood_rows(id4, sm_allowed, scores=["reciprocal_vacuity"])
    with pytest.raises(ValueError, match="no alpha"):
        ksweep_rows(id4, sm_allowed)
    # The mark covers the records checked together, with the metadata they were checked with:
    # records not checked with them, or given other metadata since, are checked again.
    assert ood_rows(id4, recs["ood4"], n_boot=0)  # unmarked, same producer: checked, and passes
    for other in (sm, dataclasses.replace(sm_allowed, meta={**sm.meta, "pretrained": "another-llm"})):
        with pytest.raises(FingerprintMismatchError, match="method: id4='edl' vs sm4='softmax'"):
            ood_rows(id4, other, n_boot=0)


# ---- K sweep ----


def test_ksweep_matched_vacuity_is_exactly_unchanged_and_ood_only_inflates(recs):
    rows = ksweep_rows(recs["id4"], recs["ood4"], max_extra=4, scores=["reciprocal_vacuity", "strength", "max_prob"])
    assert all(tuple(r) == KSWEEP_ROW_KEYS for r in rows)
    for name in ("reciprocal_vacuity", "strength"):
        matched = [r for r in rows if r["score"] == name and r["condition"] == "matched"]
        assert [r["k_id"] for r in matched] == [4, 5, 6, 7, 8] == [r["k_ood"] for r in matched]
        assert all(r["delta_auroc"] == 0.0 and r["delta_aupr"] == 0.0 for r in matched)
    ood_only = sorted(
        (r for r in rows if r["score"] == "reciprocal_vacuity" and r["condition"] == "ood_only"),
        key=lambda r: r["extra"],
    )
    aucs = [r["auroc"] for r in ood_only]
    assert [r["k_ood"] for r in ood_only] == [4, 5, 6, 7, 8] and {r["k_id"] for r in ood_only} == {4}
    assert all(b >= a for a, b in zip(aucs, aucs[1:])) and aucs[-1] > aucs[0]
    assert {r["sensitivity"] for r in rows if r["score"] == "reciprocal_vacuity"} == {"K-sensitive"}
    # x = 0 of the sweep is the ordinary OOD AUROC.
    base = ood_rows(recs["id4"], recs["ood4"], scores=["reciprocal_vacuity"], n_boot=0)[0]
    assert aucs[0] == base["auroc"]


def test_ksweep_checks_k_first(recs):
    with pytest.raises(CardinalityMismatchError):
        ksweep_rows(recs["id4"], recs["ood5"])
    rows = ksweep_rows(recs["id4"], recs["mix"], k_policy="restrict", max_extra=1, scores=["reciprocal_vacuity"])
    assert {(r["k_id"], r["k_ood"]) for r in rows if r["extra"] == 0} == {(4, 4)}


def test_ksweep_delong_compares_x1_with_x0_on_the_same_examples(recs):
    id_r, ood_r = recs["id4"], recs["ood4"]
    t = ksweep_delong(id_r, ood_r)
    y = np.r_[np.ones(len(id_r)), np.zeros(len(ood_r))]
    s_ood_x1 = (ood_r.strength + 1.0) / 5.0  # one appended class with alpha = lambda = 1
    assert t["auroc_base"] == pytest.approx(roc_auc_score(y, np.r_[1 / id_r.vacuity, 1 / ood_r.vacuity]), abs=1e-12)
    assert t["auroc_expanded"] == pytest.approx(roc_auc_score(y, np.r_[1 / id_r.vacuity, s_ood_x1]), abs=1e-12)
    assert t["diff"] > 0 and t["z"] > 0 and 0 <= t["p_value"] < 0.05


def test_plot_ksweep_writes_valid_png_and_svg(recs, tmp_path):
    rows = ksweep_rows(recs["id4"], recs["ood4"], max_extra=2)
    paths = plot_ksweep(rows, tmp_path / "fig1.png", title="id4 → ood4")
    assert [p.name for p in paths] == ["fig1.png", "fig1.svg"]
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert ET.parse(paths[1]).getroot().tag.endswith("svg")
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


# ---- CLI ----


def test_cli_ood_refuses_every_mismatched_task_and_still_writes_the_rest(out_dir, tmp_path, capsys):
    out_json = tmp_path / "ood.json"
    rc = main(["ood", str(out_dir), "--id", "id4", "--ood", "ood5,ood4,mix", "--n-boot", "20", "--json", str(out_json)])
    err = capsys.readouterr().err
    assert rc == 2
    assert "Traceback" not in err
    assert "id4 {4: 240} vs ood5 {5: 150}" in err
    assert "refused id4 vs mix" in err and "mix {3:" in err
    rows = json.loads(out_json.read_text())
    assert {r["ood_task"] for r in rows} == {"ood4"}
    assert all(list(r) == list(OOD_ROW_KEYS) for r in rows)


def test_cli_ood_says_which_score_it_is_at_when_a_run_is_long(out_dir, capsys, monkeypatch):
    import lm_eval_evidential.cli.ood as ood_command

    assert main(["ood", str(out_dir), "--id", "id4", "--ood", "ood4", "--n-boot", "20"]) == 0
    err = capsys.readouterr().err
    assert "ood [" not in err  # a short run: no progress lines
    # but its first line comes before the records are read (the run's description follows their reading)
    first, read = err.splitlines()[:2]
    assert first == "ood: reading the records of id4, ood4" and read.startswith("using run "), err
    monkeypatch.setattr(ood_command, "PROGRESS_EVERY", 0.0)  # every step is "long"
    assert main(["ood", str(out_dir), "--id", "id4", "--ood", "ood4", "--n-boot", "20"]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("ood [")]
    names = resolve_scores(None, load_records(out_dir, "id4"), load_records(out_dir, "ood4"))
    assert [line.split("]: ", 1)[1] for line in lines] == [
        f"ood4: score {i + 1}/{len(names)}, {name}" for i, name in enumerate(names)
    ]


def test_cli_ood_policies_and_errors(out_dir, tmp_path, capsys):
    out_json = tmp_path / "r.json"
    rc = main(
        [
            "ood",
            str(out_dir),
            "--id",
            "id4",
            "--ood",
            "mix",
            "--k-policy",
            "restrict",
            "--scores",
            "reciprocal_vacuity,max_prob",
            "--n-boot",
            "0",
            "--json",
            str(out_json),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0 and "reciprocal_vacuity" in out
    rows = json.loads(out_json.read_text())
    assert [r["score"] for r in rows] == ["reciprocal_vacuity", "max_prob"]
    assert rows[0]["n_dropped"]["ood"] > 0 and rows[0]["aupr_in_ci"] == [None, None]

    rc = main(["ood", str(out_dir), "--id", "id4", "--ood", "ood5", "--k-policy", "report", "--n-boot", "0"])
    assert rc == 0 and "WARNING" in capsys.readouterr().out

    rc = main(["ood", str(out_dir), "--id", "id4", "--ood", "nope"])
    err = capsys.readouterr().err
    assert rc == 1 and "no records for task 'nope'" in err and "Traceback" not in err


def test_subprocess_ood_refusal(out_dir):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lm_eval_evidential",
            "ood",
            str(out_dir),
            "--id",
            "id4",
            "--ood",
            "ood5",
            "--n-boot",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert proc.returncode == 2, proc.stderr
    assert "id4 {4: 240} vs ood5 {5: 150}" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_ksweep_table_json_and_plot(out_dir, tmp_path, capsys):
    rc = main(
        [
            "ksweep",
            str(out_dir),
            "--id",
            "id4",
            "--ood",
            "ood4",
            "--max-extra",
            "3",
            "--json",
            str(tmp_path / "k.json"),
            "--plot",
            str(tmp_path / "k"),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert re.search(
        r"reciprocal_vacuity: K-sensitive \((1 zero-evidence option|[2-3] zero-evidence options) appended to "
        r"the OOD side only moves? AUROC by \+0\.\d{4}",
        out,
    )
    assert "appended to both sides, they leave it exactly unchanged" in out and "classes" not in out.split("\n\n")[-1]
    assert "DeLong test" in out
    data = json.loads((tmp_path / "k.json").read_text())
    assert {r["condition"] for r in data["rows"]} == {"ood_only", "matched"}
    assert data["delong_test"]["score"] == "reciprocal_vacuity"
    assert (tmp_path / "k.png").stat().st_size > 0 and (tmp_path / "k.svg").stat().st_size > 0

    rc = main(["ksweep", str(out_dir), "--id", "id4", "--ood", "ood5"])
    assert rc == 2 and "ood5 {5: 150}" in capsys.readouterr().err


def test_cli_report_folder(out_dir, recs, tmp_path, capsys):
    rep = tmp_path / "rep"
    rc = main(
        [
            "report",
            str(out_dir),
            "--id",
            "id4",
            "--ood",
            "ood4,ood5,mix",
            "--out",
            str(rep),
            "--n-boot",
            "20",
            "--max-extra",
            "2",
            "--k-policy",
            "assert,report",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2, err  # written, but two pairs were refused under assert (cli.main's map)
    assert "Traceback" not in err
    names = {p.name for p in rep.iterdir()}
    assert {
        "report.md",
        "report.json",
        "ksweep_id4_vs_ood4.png",
        "ksweep_id4_vs_ood4.svg",
        "reliability.png",
        "reliability.svg",
        "risk_coverage_id4.png",
        "risk_coverage_id4.svg",
    } <= names
    assert not [n for n in names if n.endswith(".tmp")]
    md = (rep / "report.md").read_text()
    assert "Refused: id4 vs ood5" in md and "id4 {4: 240} vs ood5 {5: 150}" in md and "Refused: id4 vs mix" in md
    # The remedy fits each refusal: mix has K = 4 questions (restrict), ood5 has none (a control task).
    n4 = int((recs["mix"].k == 4).sum())
    assert f"k_policy=restrict compares only the {n4} of 180 mix questions with K = 4" in md
    assert "no ood5 question has K = 4, so compare id4 with a K-matched control task" in md
    assert "restrict compares only" not in md.split("Refused: id4 vs ood5")[1].split("\n")[0]
    # Printed once per pair on the terminal, not once per policy, and without the long explanation.
    assert err.count("refused id4 vs ood5") == 1 and "Proposition 1" not in err
    assert "synthetic-llm" in md and "prior weight λ = 1.0" in md and DATE in md
    for heading in (
        "## Class counts (K)",
        "### k_policy = assert",
        "### k_policy = report",
        "## K sweep",
        "## Calibration",
        "## Selective prediction",
        "## Accuracy estimation",
        "## Score-order equivalence",
    ):
        assert heading in md
    assert "**NO**" in md  # the report-policy table flags the mismatched rows
    data = json.loads((rep / "report.json").read_text())
    assert data["k_histograms"]["ood5"] == {"5": 150}
    assert {r["ood_task"] for r in data["ood"]["assert"]["refused"]} == {"ood5", "mix"}
    assert {r["ood_task"] for r in data["ood"]["assert"]["rows"]} == {"ood4"}
    assert {r["matched"] for r in data["ood"]["report"]["rows"] if r["ood_task"] != "ood4"} == {False}
    assert "refused" in data["ksweep"]["ood5"] and data["ksweep"]["ood4"]["rows"]
    assert {r["task"] for r in data["calibration"]} == {"id4", "ood4", "ood5", "mix"}
    assert {r["target_task"] for r in data["atc"]} == {"ood4"}  # mismatched targets are refused under assert
    assert data["selective"] and data["orders"]


def test_report_opens_with_a_summary_of_valid_comparisons_refusals_and_the_k_artefact(out_dir, tmp_path):
    rep = tmp_path / "rep"
    assert (
        main(
            [
                "report",
                str(out_dir),
                "--id",
                "id4",
                "--ood",
                "ood4,ood5,mix",
                "--out",
                str(rep),
                "--n-boot",
                "20",
                "--max-extra",
                "2",
                "--k-policy",
                "assert,restrict",
            ]
        )
        == 2
    )  # written; a pair refused
    md = (rep / "report.md").read_text()
    data = json.loads((rep / "report.json").read_text())
    summary = data["summary"]
    assert md.index("## Summary") < md.index("## Class counts (K)") and "## Appendix" not in md
    assert "Illustrative only" not in md and summary["illustrative"] is False  # synthetic, not the tiny model
    # Valid = K-matched: ood4 under assert, mix under restrict (its K = 4 questions); ood5 never.
    valid = {v["ood_task"]: v for v in summary["valid"]}
    assert {t: v["policy"] for t, v in valid.items()} == {"ood4": "assert", "mix": "restrict"}
    row = next(
        r for r in data["ood"]["assert"]["rows"] if r["ood_task"] == "ood4" and r["score"] == "reciprocal_vacuity"
    )
    assert valid["ood4"]["auroc"] == row["auroc"] and valid["ood4"]["aupr_in_ci"] == row["aupr_in_ci"]
    assert valid["mix"]["n_dropped_ood"] == 180 - valid["mix"]["n_ood"] > 0
    assert [(r["ood_task"], r["policies"]) for r in summary["refused"]] == [("ood5", ["assert", "restrict"])]
    head = md.split("## Class counts")[0]
    assert f"| id4 → ood4 | 4 | assert | 240 / 160 | {row['auroc']:.3f} [{row['auroc_ci'][0]:.3f}, " in head
    assert "**Refused**: id4 → ood5 (k_policy assert, restrict)" in head and "control task" in head
    # The artefact line is the K sweep's own numbers.
    sweep = {
        (r["condition"], r["extra"]): r for r in data["ksweep"]["ood4"]["rows"] if r["score"] == "reciprocal_vacuity"
    }
    (art,) = summary["artefact"]
    assert (
        art["auroc_one_extra"] == sweep[("ood_only", 1)]["auroc"]
        and art["delta_auroc"] == sweep[("ood_only", 1)]["delta_auroc"]
    )
    assert art["matched_delta_auroc"] == 0.0
    assert f"{sweep[('ood_only', 0)]['auroc']:.3f} → {sweep[('ood_only', 1)]['auroc']:.3f}" in head
    # The summary's artefact numbers are the K-sweep section's, written the same way.
    test = data["ksweep"]["ood4"]["delong_test"]
    said = f"{test['auroc_base']:.3f} → {test['auroc_expanded']:.3f} (Δ = {test['diff']:+.3f}, p = "
    assert said in head and said in md.split("## K sweep")[1].split("\n## ")[0]
    assert "**Takeaway.** " in head and "moves reciprocal_vacuity's AUROC by" in head
    # report.md shows the few scores that matter; every score is in appendix.md beside it, linked.
    appendix = (rep / "appendix.md").read_text()
    assert "| ood4 | l2_norm |" not in md and "| ood4 | l2_norm |" in appendix
    assert "[appendix.md](appendix.md)" in md and "[report.md](report.md)" in appendix
    assert "-0.000" not in md + appendix


def test_report_refuses_a_task_compared_with_itself(out_dir, tmp_path, capsys):
    assert (
        main(["report", str(out_dir), "--id", "id4", "--ood", "ood4,id4", "--out", str(tmp_path / "r")]) == 1
    )  # an error in what was asked, not a K refusal
    err = capsys.readouterr().err
    assert "--id and --ood both name 'id4'" in err and "Traceback" not in err
    assert main(["ood", str(out_dir), "--id", "id4", "--ood", "id4"]) == 1
    assert "comparing a task with itself" in capsys.readouterr().err


def test_cli_ood_tables_fit_a_terminal_with_each_tasks_constants_said_once(out_dir, capsys):
    """One table per OOD task, its K, n, dropped counts, K-match and AUPR-In baseline in the line above: the
    table itself stays within 100 columns with every default score."""
    assert (
        main(["ood", str(out_dir), "--id", "id4", "--ood", "ood4,ood5", "--k-policy", "report", "--n-boot", "50"]) == 0
    )
    out = capsys.readouterr().out
    headings = [line for line in out.splitlines() if re.match(r"^ood[45]: K ", line)]
    assert [h.split(":")[0] for h in headings] == ["ood4", "ood5"]
    assert "(K-matched)" in headings[0] and "(K NOT matched)" in headings[1] and "AUPR-In baseline" in headings[0]
    table = [line for line in out.splitlines() if line and line not in headings and not line.startswith("WARNING")]
    assert table and max(len(line) for line in table) <= 100, max(table, key=len)
