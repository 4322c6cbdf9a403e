"""``lm-eval-evidential conformal`` and lm_eval_evidential.audits.conformal on saved records, end to end.

Synthetic records laid out like the harness output: ``id4`` (K = 4), ``cal4`` (K = 4, a separate
calibration task), ``ood4`` (K = 4), ``ood5`` (K = 5) and ``mix`` (K in {3, 4, 5}). Rows are
checked against a hand computation from the records (sorted scores, explicit loops over options).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from lm_eval_evidential.audits.conformal import CONFORMAL_KEYS
from lm_eval_evidential.records import Records, load_records, make_record, records_path, write_records
from tests.audits.test_quality import cli as _cli  # in-process: (status, stdout, stderr)

DATE = "2026-11-21T20-15-03.123456"


def _records(task: str, ks, seed: int, temperature: float = 1.0) -> Records:
    """Gold drawn from the model's own E[p] at ``temperature`` (1: calibrated, exchangeable with ``id4``)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i, k in enumerate(ks):
        z = rng.normal(0.0, 2.0, size=int(k))
        alpha = np.logaddexp(0.0, z) + 1.0
        p = alpha ** (1 / temperature)
        gold = int(rng.choice(int(k), p=p / p.sum()))
        rows.append(make_record(task=task, doc_id=i, labels=list("ABCDE"[:k]), gold=gold, logits=z, alpha=alpha))
    return Records.from_rows(rows, task=task, meta={"method": "edl", "prior_weight": 1.0, "pretrained": "synthetic"})


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("harness_out")
    mix_k = np.random.default_rng(7).choice([3, 4, 5], size=180)
    for task, ks, seed, t in (
        ("id4", [4] * 400, 1, 1.0),
        ("cal4", [4] * 200, 2, 1.0),
        ("ood4", [4] * 160, 3, 0.3),
        ("ood5", [5] * 150, 4, 1.0),
        ("mix", mix_k, 5, 1.0),
    ):
        write_records(records_path(root / "synthetic", task, DATE), _records(task, ks, seed, t))
    return root


def _hand_row(cal: Records, test: Records, alpha: float, method: str, lam: float = 0.3, k_reg: int = 2):
    """The row's numbers by loops: the ceil((n+1)(1-alpha))-th smallest score, sets option by option (RAPS:
    APS plus lam per option at least as probable beyond the k_reg first)."""

    def score(p, y):
        if method == "lac":
            return 1 - p[y]
        aps = 1 - sum(q for q in p if q < p[y])
        return aps + (lam * max(0, sum(q >= p[y] for q in p) - k_reg) if method == "raps" else 0.0)

    cal_scores = sorted(score(cal.probs[i, : cal.k[i]], cal.gold[i]) for i in range(len(cal)))
    rank = math.ceil((len(cal) + 1) * (1 - alpha) - 1e-9)
    qhat = cal_scores[rank - 1] if rank <= len(cal) else math.inf
    covered, sizes = [], []
    for i in range(len(test)):
        p = test.probs[i, : test.k[i]]
        members = [y for y in range(test.k[i]) if score(p, y) <= qhat]
        covered.append(int(test.gold[i]) in members)
        sizes.append(len(members))
    acc = float(np.mean(test.correct))
    k = int(test.k[0])
    return {
        "qhat": qhat,
        "coverage": np.mean(covered),
        "mean_set_size": np.mean(sizes),
        "uacc": acc / np.mean(sizes) * math.sqrt(k),
        "share_empty": sizes.count(0) / len(sizes),
        "share_full": sizes.count(k) / len(sizes),
    }


@pytest.mark.parametrize("method", ["lac", "aps", "raps"])
def test_rows_equal_a_hand_computation_from_the_records(out_dir, tmp_path, capsys, method):
    path = tmp_path / "c.json"
    argv = ["conformal", out_dir, "--id", "id4", "--ood", "ood4", "--alpha", "0.1", "--method", method]
    argv += ["--raps-lambda", "0.3", "--raps-k-reg", "2"] if method == "raps" else []
    rc, out, err = _cli([*argv, "--calibration-fraction", "0.5", "--seed", "3", "--json", path], capsys)
    assert rc == 0, err
    rows = json.loads(path.read_text())
    assert [(r["set"], r["role"]) for r in rows] == [("id4", "id"), ("ood4", "ood")]
    for row in rows:
        assert tuple(k for k in row if k != "reason") == CONFORMAL_KEYS
        assert row["k"] == 4 and row["matched"] is True and row["method"] == method
    id4 = load_records(out_dir, "id4")
    order = np.random.default_rng(3).permutation(len(id4))  # the documented split
    cal_idx, test_idx = np.sort(order[:200]), np.sort(order[200:])
    from lm_eval_evidential.audits.ood import subset_records

    def part(idx):
        keep = np.zeros(len(id4), dtype=bool)
        keep[idx] = True
        return subset_records(id4, keep)

    cal, test = part(cal_idx), part(test_idx)
    for row, records in zip(rows, (test, load_records(out_dir, "ood4"))):
        want = _hand_row(cal, records, 0.1, method)
        for key, value in want.items():
            assert row[key] == pytest.approx(value, abs=1e-12), key
        assert row["n"] == len(records) and row["n_cal"] == 200
        lo, hi = row["coverage_ci"]
        assert lo <= row["coverage"] <= hi
    assert "calibration: id4 (0.5 of 400, seed 3), n = 200, K = 4" in out and "qhat" in out
    # ID test part: exchangeable with the calibration part, coverage at least about 0.9 (APS: more, its
    # scores have a point mass at 1, the full set, where the gold option is the least probable one).
    assert rows[0]["coverage"] >= 0.85


def test_calibration_task_and_a_different_seed(out_dir, tmp_path, capsys):
    path = tmp_path / "c.json"
    rc, out, err = _cli(
        ["conformal", out_dir, "--id", "id4", "--calibration-task", "cal4", "--alpha", "0.2", "--json", path], capsys
    )
    assert rc == 0, err
    (row,) = json.loads(path.read_text())
    assert row["set"] == "id4" and row["n"] == 400 and row["n_cal"] == 200 and row["calibration"] == "cal4"
    want = _hand_row(load_records(out_dir, "cal4"), load_records(out_dir, "id4"), 0.2, "lac")
    assert row["coverage"] == pytest.approx(want["coverage"]) and row["qhat"] == pytest.approx(want["qhat"])
    rc, _, err = _cli(["conformal", out_dir, "--id", "id4", "--calibration-task", "id4"], capsys)
    assert rc == 1 and "--calibration-task and --id both name 'id4'" in err and "Traceback" not in err


def test_a_k_mismatched_set_is_refused_with_the_remedy_and_the_rest_written(out_dir, tmp_path, capsys):
    path = tmp_path / "c.json"
    rc, out, err = _cli(
        ["conformal", out_dir, "--id", "id4", "--ood", "ood5,ood4,mix", "--n-boot", "50", "--json", path], capsys
    )
    assert rc == 2
    assert "refused calibration id4 (0.5 of 400, seed 0) vs ood5" in err and "ood5 {5: 150}" in err
    assert "why: a threshold calibrated on questions with one K carries no coverage guarantee" in err
    assert "Remedy: no ood5 question has K = 4" in err and "refused" in err and "vs mix" in err
    assert "Traceback" not in err
    assert [r["set"] for r in json.loads(path.read_text())] == ["id4", "ood4"]


def test_restrict_and_report_policies(out_dir, tmp_path, capsys):
    path = tmp_path / "c.json"
    rc, out, err = _cli(
        ["conformal", out_dir, "--id", "id4", "--ood", "mix", "--k-policy", "restrict", "--json", path], capsys
    )
    assert rc == 0, err
    mix = json.loads(path.read_text())[1]
    assert mix["k"] == 4 and mix["n_dropped"] == int((load_records(out_dir, "mix").k != 4).sum()) > 0
    rc, out, err = _cli(
        ["conformal", out_dir, "--id", "id4", "--ood", "ood5", "--k-policy", "report", "--json", path], capsys
    )
    assert rc == 0 and "note: WARNING: rows with matched = NO" in out
    ood5 = json.loads(path.read_text())[1]
    assert ood5["matched"] is False and ood5["k"] == 5 and list(ood5["coverage_by_k"]) == ["5"]


def test_bad_input_is_one_line(out_dir, capsys):
    for argv, message in (
        (["--alpha", "1.5"], "argument --alpha: alpha=1.5 must be a finite number in (0, 1)"),
        (
            ["--calibration-fraction", "1"],
            "argument --calibration-fraction: calibration_fraction=1.0 must be a finite number in (0, 1)",
        ),
        (["--calibration-fraction", "0.5", "--calibration-task", "cal4"], "not allowed with argument"),
        (["--method", "thr"], "invalid choice: 'thr'"),
        (["--raps-lambda", "0.5"], "--raps-lambda and --raps-k-reg apply to --method raps only, not lac"),
        (["--method", "raps", "--raps-lambda", "-1"], "lam=-1.0 must be a finite number >= 0 (RAPS's penalty"),
        (["--calibration-fraction", "0.001"], "leaves no calibration examples"),
        (["--ood", "nope"], "no records for task 'nope'"),
    ):
        rc, _, err = _cli(["conformal", out_dir, "--id", "id4", *argv], capsys)
        assert rc == 1, (argv, err)
        assert message in err and "Traceback" not in err, (argv, err)


def test_plot_coverage_against_set_size(out_dir, tmp_path, capsys):
    rc, _, err = _cli(
        ["conformal", out_dir, "--id", "id4", "--ood", "ood4", "--n-boot", "50", "--plot", tmp_path / "cov"], capsys
    )
    assert rc == 0, err
    png = tmp_path / "cov.png"
    assert png.read_bytes().startswith(b"\x89PNG") and (tmp_path / "cov.svg").is_file()
    assert f"wrote {png}" in err
    from lm_eval_evidential.plots import conformal_figure

    rows = [
        {"set": "a", "role": "id", "k": 4, "mean_set_size": 2.0, "mean_set_size_ci": [1.8, 2.2], "coverage": 0.9,
         "coverage_ci": [0.85, 0.95], "alpha": 0.1, "method": "lac", "calibration": "a (0.5 of 10, seed 0)"},
    ]  # fmt: skip
    ax = conformal_figure(rows).axes[0]
    assert [line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"] == [0.9]
    assert {t.get_text() for t in ax.get_legend().get_texts()} == {"a (id, K = 4)", "target 1 - alpha = 0.9"}
