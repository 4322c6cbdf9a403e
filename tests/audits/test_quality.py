"""The calibration / selective / atc / orders commands and lm_eval_evidential.audits.quality, on saved records.

Records are synthetic (Records.from_rows + write_records) laid out like the harness output,
``<out>/<model_name>/records_<task>_<date_id>.parquet``. Numbers are checked against the core
functions on the same arrays and, for ECE and ATC, against brute-force loops written here.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lm_eval_evidential import plots
from lm_eval_evidential.audits import quality
from lm_eval_evidential.cli import main
from lm_eval_evidential.metrics.accuracy_estimation import atc, doc_estimate
from lm_eval_evidential.metrics.calibration import adaptive_ece, brier, ece, nll
from lm_eval_evidential.metrics.score_orders import order_audit
from lm_eval_evidential.metrics.scores import SCORES, available_scores, compute_score
from lm_eval_evidential.metrics.selective import augrc, aurc, eaurc, prr, prr_normalized, risk_at_coverage, spearman
from lm_eval_evidential.records import (
    Records,
    load_records,
    make_record,
    records_path,
    write_records,
)

RUN = "2026-11-21T20-15-03.123456"
OLD_RUN = "2026-11-20T08-00-00.000001"
REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------- synthetic records


def _records(task, n, *, seed, k=None, scale=1.5, softmax=False, all_correct=False, boost=0.0):
    """n questions with K in 3..5 (or fixed ``k``); gold agrees with the prediction more often
    when the model is confident, so the scores carry signal. ``boost`` adds evidence to each
    row's predicted class (same prediction, higher confidence under every Schur-convex score)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        ki = k or int(rng.integers(3, 6))
        z = rng.normal(size=ki) * scale
        alpha = None if softmax else np.log1p(np.exp(z)) + 1.0
        p = np.exp(z - z.max()) / np.exp(z - z.max()).sum() if softmax else alpha / alpha.sum()
        pred = int(np.argmax(p))
        if alpha is not None and boost:  # through the logit, so that alpha stays softplus(z) + 1 (method=edl)
            alpha = alpha.copy()
            alpha[pred] += boost
            z = z.copy()
            z[pred] = np.log(np.expm1(alpha[pred] - 1.0))
        right = all_correct or rng.random() < p[pred]
        gold = pred if right else int(rng.choice([j for j in range(ki) if j != pred]))
        rows.append(make_record(task=task, doc_id=i, labels=list("ABCDE"[:ki]), gold=gold, logits=z, alpha=alpha))
    return Records.from_rows(rows, task=task, meta={"method": "softmax" if softmax else "edl", "prior_weight": 1.0})


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("harness_out")
    model_dir = root / "__tmp__tiny-model"
    tasks = {
        "idt": _records("idt", 150, seed=1),
        "tgt_lo": _records("tgt_lo", 120, seed=2, k=4),
        "tgt_hi": _records("tgt_hi", 120, seed=2, k=4, boost=3.0),
        "soft": _records("soft", 90, seed=3, softmax=True),
        "allright": _records("allright", 40, seed=4, all_correct=True),
    }
    for task, rec in tasks.items():
        write_records(records_path(model_dir, task, RUN), rec)
    write_records(records_path(model_dir, "idt", OLD_RUN), _records("idt", 30, seed=9))
    return root


def cli(argv, capsys):
    """``lm-eval-evidential <argv>`` in-process: (exit status, stdout, stderr)."""
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse errors
        rc = exc.code
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def run_json(argv, capsys, tmp_path, name="rows.json"):
    path = tmp_path / name
    rc, stdout, stderr = cli([*argv, "--json", path], capsys)
    assert rc == 0, stderr
    text = path.read_text()
    assert "NaN" not in text and "Infinity" not in text  # strict JSON
    return json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}")), stdout


def _nan(x):
    return float("nan") if x is None else x


# ---------------------------------------------------------------- brute-force oracles


def _ece_brute(conf, correct, n_bins):
    """ECE by scanning each bin's interval [b/n, (b+1)/n) (last bin closed) over all examples."""
    total = 0.0
    for b in range(n_bins):
        lo, hi = b / n_bins, (b + 1) / n_bins
        members = [i for i, c in enumerate(conf) if lo <= c < hi or (b == n_bins - 1 and c == 1.0)]
        if members:
            acc = sum(bool(correct[i]) for i in members) / len(members)
            mean_conf = sum(conf[i] for i in members) / len(members)
            total += len(members) / len(conf) * abs(acc - mean_conf)
    return total


def _row_probs(rec):
    return [[a / sum(row) for a in row] for row in (rec[i]["alpha"] for i in range(len(rec)))]


def _brute_score(name, rec):
    probs = _row_probs(rec)
    if name == "max_prob":
        return [max(p) for p in probs]
    if name == "neg_entropy":
        return [sum(x * math.log(x) for x in p if x > 0) for p in probs]
    if name == "reciprocal_vacuity":
        return [sum(rec[i]["alpha"]) / (1.0 * rec[i]["k"]) for i in range(len(rec))]
    raise KeyError(name)


def _atc_brute(id_scores, id_correct, target_scores):
    """Maaz et al. (2023), Eqs. 2-3 for accuracy: t minimises |P_ID(s >= t) - acc| over observed scores
    and +inf (larger t on ties); estimate = P_target(s >= t)."""
    n = len(id_scores)
    acc = sum(id_correct) / n
    best = None
    for t in sorted(set(id_scores)) + [math.inf]:
        gap = abs(sum(s >= t for s in id_scores) / n - acc)
        if best is None or gap <= best[0] + 1e-15:
            best = (gap, t)
    t = best[1]
    return sum(s >= t for s in target_scores) / len(target_scores)


# ---------------------------------------------------------------- calibration


def test_calibration_rows_keys_and_values_equal_core(out, capsys, tmp_path):
    rows, stdout = run_json(
        ["calibration", out, "--task", "idt,soft", "--allow-fingerprint-mismatch", "--bins", "10"], capsys, tmp_path
    )
    assert [r["task"] for r in rows] == ["idt", "soft"]
    for row in rows:
        assert tuple(row) == quality.CALIBRATION_KEYS
        rec = load_records(out, row["task"])
        assert row["ece"] == ece(rec.max_prob, rec.correct, 10)
        assert row["adaptive_ece"] == adaptive_ece(rec.max_prob, rec.correct, 10)
        assert row["nll"] == nll(rec.probs, rec.gold)
        assert row["brier"] == brier(rec.probs, rec.gold)
        assert row["acc"] == np.mean(rec.correct)
        assert row["task"] in stdout
    assert "adaptive_ece" in stdout.splitlines()[0]


@pytest.mark.parametrize("bins", [15, 7])
def test_calibration_ece_matches_brute_force_through_the_cli(out, capsys, tmp_path, bins):
    rows, _ = run_json(["calibration", out, "--task", "idt", "--bins", bins], capsys, tmp_path)
    rec = load_records(out, "idt")
    conf = [float(c) for c in rec.max_prob]
    assert rows[0]["ece"] == pytest.approx(_ece_brute(conf, rec.correct, bins), abs=1e-12)
    assert rows[0]["ece"] > 0.0
    # The stored confidence is the predicted class's E[p] = alpha / S.
    assert conf == pytest.approx([max(p) for p in _row_probs(rec)], abs=1e-15)


def test_calibration_plot_writes_png_and_svg(out, capsys, tmp_path):
    rc, _, stderr = cli(
        [
            "calibration",
            out,
            "--task",
            "idt,soft,allright",
            "--allow-fingerprint-mismatch",
            "--plot",
            tmp_path / "rel.png",
        ],
        capsys,
    )
    assert rc == 0, stderr
    png, svg = tmp_path / "rel.png", tmp_path / "rel.svg"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert svg.read_text().lstrip().startswith("<?xml") and "</svg>" in svg.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rel.png", "rel.svg"]  # no temp files left
    assert str(png) in stderr


def test_run_selects_an_older_run(out, capsys, tmp_path):
    rows, _ = run_json(["calibration", out, "--task", "idt", "--run", OLD_RUN], capsys, tmp_path)
    old = load_records(out, "idt", run=OLD_RUN)
    assert len(old) == 30
    assert rows[0]["acc"] == np.mean(old.correct)
    newest, _ = run_json(["calibration", out, "--task", "idt"], capsys, tmp_path, "new.json")
    assert newest[0]["acc"] == np.mean(load_records(out, "idt", run=RUN).correct)


# ---------------------------------------------------------------- selective


def test_selective_rows_equal_core_and_default_scores(out, capsys, tmp_path):
    rows, stdout = run_json(["selective", out, "--task", "idt,soft", "--allow-fingerprint-mismatch"], capsys, tmp_path)
    by_task = {}
    for row in rows:
        assert tuple(row) == quality.SELECTIVE_KEYS, row  # no NaN here, so no reason key
        by_task.setdefault(row["task"], []).append(row["score"])
    assert by_task == {"idt": available_scores(True), "soft": available_scores(False)}
    for row in rows:
        rec = load_records(out, row["task"])
        alpha = rec.alpha if rec.has_alpha else None
        s = compute_score(row["score"], probs=rec.probs, k=rec.k, alpha=alpha)
        assert row["prr_0.5"] == pytest.approx(prr(s, rec.correct, 0.5), abs=1e-12)
        assert row["prr_0.75"] == pytest.approx(prr(s, rec.correct, 0.75), abs=1e-12)
        assert row["aurc"] == pytest.approx(aurc(s, rec.correct), abs=1e-12)
        assert row["spearman"] == pytest.approx(spearman(s, rec.correct), abs=1e-12)
        assert row["prr_normalized"] == pytest.approx(prr_normalized(s, rec.correct), abs=1e-12)
        assert row["eaurc"] == pytest.approx(eaurc(s, rec.correct), abs=1e-12)
        assert row["augrc"] == pytest.approx(augrc(s, rec.correct), abs=1e-12)
        assert row["risk_at_0.8"] == pytest.approx(risk_at_coverage(s, rec.correct, 0.8), abs=1e-12)
    # max_prob is informative on this data: better than random.
    mp = next(r for r in rows if r["task"] == "idt" and r["score"] == "max_prob")
    assert mp["prr_0.5"] > 0 and mp["spearman"] > 0
    assert "prr_0.75" in stdout.splitlines()[0]


def test_selective_nan_becomes_null_with_a_reason(out, capsys, tmp_path):
    rows, stdout = run_json(
        ["selective", out, "--task", "allright,soft", "--allow-fingerprint-mismatch", "--scores", "max_prob,strength"],
        capsys,
        tmp_path,
    )
    allright = [r for r in rows if r["task"] == "allright"]
    for row in allright:  # every answer right: nothing to rank
        assert tuple(row) == (*quality.SELECTIVE_KEYS, "reason")
        assert row["prr_0.5"] is None and row["prr_0.75"] is None and row["spearman"] is None
        assert row["aurc"] == 0.0
        assert "all 40 answers are correct" in row["reason"]
    soft_strength = next(r for r in rows if r["task"] == "soft" and r["score"] == "strength")
    assert soft_strength["aurc"] is None and "needs Dirichlet alpha" in soft_strength["reason"]
    soft_max = next(r for r in rows if r["task"] == "soft" and r["score"] == "max_prob")
    assert "reason" not in soft_max and soft_max["aurc"] is not None
    assert "note: allright / max_prob: prr is undefined" in stdout


def test_selective_plot_one_file_per_task(out, capsys, tmp_path):
    rc, _, stderr = cli(
        [
            "selective",
            out,
            "--task",
            "idt,soft",
            "--allow-fingerprint-mismatch",
            "--scores",
            "max_prob,neg_entropy",
            "--plot",
            tmp_path / "rc.svg",
        ],
        capsys,
    )
    assert rc == 0, stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rc-idt.png", "rc-idt.svg", "rc-soft.png", "rc-soft.svg"]


# ---------------------------------------------------------------- ATC / DoC


def test_atc_rows_keys_values_and_doc_only_for_max_prob(out, capsys, tmp_path):
    rows, stdout = run_json(["atc", out, "--id", "idt", "--target", "tgt_lo"], capsys, tmp_path)
    idr = load_records(out, "idt")
    names = available_scores(True)
    pairs = [(r["target_task"], r["score"], r["method"]) for r in rows]
    expected = []
    for target in ("tgt_lo",):
        for name in names:
            expected.append((target, name, "atc"))
            if name in quality.PROBABILITY_SCORES:
                expected.append((target, name, "doc"))
    assert pairs == expected
    assert quality.PROBABILITY_SCORES == ("max_prob",)
    for row in rows:
        assert tuple(row) == quality.ATC_KEYS
        assert row["id_task"] == "idt"
        tgt = load_records(out, row["target_task"])
        s_id = compute_score(row["score"], probs=None, k=idr.k, alpha=idr.alpha)
        s_t = compute_score(row["score"], probs=None, k=tgt.k, alpha=tgt.alpha)
        core = atc if row["method"] == "atc" else doc_estimate
        assert row["estimate"] == pytest.approx(core(s_id, idr.correct, s_t), abs=1e-12)
        assert row["true_acc"] == np.mean(tgt.correct)
        assert row["abs_error"] == pytest.approx(abs(row["estimate"] - row["true_acc"]), abs=1e-15)
    # On the ID task itself (the API; the command refuses it), ATC with distinct scores recovers the ID accuracy
    # exactly, DoC too.
    for row in quality.atc_rows(idr, [idr], scores=["max_prob", "reciprocal_vacuity"]):
        assert row["estimate"] == pytest.approx(np.mean(idr.correct), abs=1e-12)
    # K differs between idt (3..5) and tgt_lo (4): the command says the estimate is confounded.
    assert "note: idt has K in [3, 4, 5], tgt_lo has K in [4]" in stdout


@pytest.mark.parametrize("name", ["max_prob", "neg_entropy", "reciprocal_vacuity"])
def test_atc_matches_brute_force_through_the_cli(out, capsys, tmp_path, name):
    rows, _ = run_json(["atc", out, "--id", "idt", "--target", "tgt_lo,tgt_hi", "--scores", name], capsys, tmp_path)
    idr = load_records(out, "idt")
    id_scores = _brute_score(name, idr)
    for row in rows:
        tgt = load_records(out, row["target_task"])
        t_scores = _brute_score(name, tgt)
        if row["method"] == "atc":
            assert row["estimate"] == pytest.approx(_atc_brute(id_scores, list(idr.correct), t_scores), abs=1e-12)
        else:
            want = sum(idr.correct) / len(idr) - (sum(id_scores) / len(id_scores) - sum(t_scores) / len(t_scores))
            assert name == "max_prob" and row["estimate"] == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("name", ["max_logit", "neg_energy"])
def test_atc_of_a_logit_score_matches_brute_force_through_the_cli(out, capsys, tmp_path, name):
    # the logit scores read the answer logits, which the ATC path once never passed ("logits is None", exit 1)
    rows, _ = run_json(["atc", out, "--id", "idt", "--target", "tgt_lo", "--scores", name], capsys, tmp_path)

    def brute(rec):
        zs = [[float(v) for v in rec[i]["logits"]] for i in range(len(rec))]
        if name == "max_logit":
            return [max(z) for z in zs]
        return [math.log(sum(math.exp(v) for v in z)) for z in zs]

    idr, tgt = load_records(out, "idt"), load_records(out, "tgt_lo")
    (row,) = [r for r in rows if r["method"] == "atc"]
    assert row["estimate"] == pytest.approx(_atc_brute(brute(idr), list(idr.correct), brute(tgt)), abs=1e-12)


def test_atc_more_confident_target_gets_a_higher_estimate(out, capsys, tmp_path):
    scores = "max_prob,reciprocal_vacuity,neg_entropy,l1_to_uniform"
    rows, _ = run_json(["atc", out, "--id", "idt", "--target", "tgt_lo,tgt_hi", "--scores", scores], capsys, tmp_path)
    est = {(r["target_task"], r["score"], r["method"]): r for r in rows}
    lo, hi = load_records(out, "tgt_lo"), load_records(out, "tgt_hi")
    # Same predictions, same labels: only the confidence moved (up, for every row).
    assert np.array_equal(lo.pred, hi.pred) and np.array_equal(lo.correct, hi.correct)
    assert (hi.max_prob > lo.max_prob).all()
    for name in scores.split(","):
        assert est["tgt_hi", name, "atc"]["estimate"] > est["tgt_lo", name, "atc"]["estimate"], name
        assert est["tgt_hi", name, "atc"]["true_acc"] == est["tgt_lo", name, "atc"]["true_acc"]
    assert est["tgt_hi", "max_prob", "doc"]["estimate"] > est["tgt_lo", "max_prob", "doc"]["estimate"]


def test_atc_softmax_target_with_alpha_score_is_null_with_reason(out, capsys, tmp_path):
    # an edl ID task against softmax records is a different producer: refused unless allowed
    assert main(["atc", str(out), "--id", "idt", "--target", "soft"]) == 2
    assert "method: idt='edl' vs soft='softmax'" in capsys.readouterr().err
    rows, _ = run_json(
        [
            "atc",
            out,
            "--id",
            "idt",
            "--target",
            "soft",
            "--scores",
            "strength,max_prob",
            "--allow-fingerprint-mismatch",
        ],
        capsys,
        tmp_path,
    )
    strength = next(r for r in rows if r["score"] == "strength")
    assert strength["estimate"] is None and strength["abs_error"] is None
    assert strength["true_acc"] is not None and "soft" in strength["reason"]
    # Default scores: only those both the ID (edl) and the softmax target give.
    rows, _ = run_json(
        ["atc", out, "--id", "idt", "--target", "soft", "--allow-fingerprint-mismatch"], capsys, tmp_path, "d.json"
    )
    assert {r["score"] for r in rows} == set(available_scores(False))


# ---------------------------------------------------------------- orders


def test_orders_rows_equal_core_and_theorem2(out, capsys, tmp_path):
    rows, stdout = run_json(
        ["orders", out, "--task", "idt,tgt_lo", "--scores", "max_prob,l2_norm,l2_to_uniform"], capsys, tmp_path
    )
    assert [(r["task"], r["score_a"], r["score_b"]) for r in rows] == [
        (t, a, b)
        for t in ("idt", "tgt_lo")
        for a, b in (("max_prob", "l2_norm"), ("max_prob", "l2_to_uniform"), ("l2_norm", "l2_to_uniform"))
    ]
    for row in rows:
        assert tuple(row) == quality.ORDER_KEYS
        rec = load_records(out, row["task"])
        core = order_audit(
            {n: compute_score(n, probs=None, k=rec.k, alpha=rec.alpha) for n in (row["score_a"], row["score_b"])}
        )[0]
        assert row["discordant_fraction"] == core["discordant_fraction"]
        assert row["order_equivalent"] is core["order_equivalent"]
    got = {(r["task"], r["score_a"], r["score_b"]): r for r in rows}
    # Maaz et al. (2023), Theorem 2: l2_norm and l2_to_uniform are order-isomorphic for one fixed K ...
    assert got["tgt_lo", "l2_norm", "l2_to_uniform"]["order_equivalent"] is True
    assert got["tgt_lo", "l2_norm", "l2_to_uniform"]["discordant_fraction"] == 0.0
    # ... but not across rows of different K.
    assert got["idt", "l2_norm", "l2_to_uniform"]["discordant_fraction"] > 0.0
    assert "order_equivalent" in stdout.splitlines()[0]


def test_orders_default_scores_cover_every_pair(out, capsys, tmp_path):
    rows, _ = run_json(["orders", out, "--task", "soft"], capsys, tmp_path)
    n = len(available_scores(False))
    assert len(rows) == n * (n - 1) // 2
    assert all("reason" not in r for r in rows)


# ---------------------------------------------------------------- errors and exit codes


@pytest.mark.parametrize(
    "argv, message",
    [
        (["calibration", "{out}", "--task", "nope"], "lm_eval --model evidential --tasks nope --output_path"),
        (["selective", "{out}", "--task", "idt,nope"], "no records for task 'nope'"),
        (["atc", "{out}", "--id", "nope", "--target", "idt"], "lm_eval --model evidential --tasks nope"),
        (["orders", "{out}", "--task", "idt", "--scores", "max_prob,bogus"], "unknown score(s) ['bogus']"),
        (["selective", "{out}", "--task", "idt", "--scores", "vacuity"], "valid scores are: reciprocal_vacuity"),
        (["orders", "{out}", "--task", "idt", "--scores", "max_prob"], "at least two scores"),
        (["calibration", "{out}", "--task", " , "], "no task names"),
        (["calibration", "{out}", "--task", "idt", "--run", "2000-01-01T00-00-00.0"], "no run '2000-01-01T00-00-00.0'"),
        (["calibration", "{out}/missing", "--task", "idt"], "does not exist"),
        (["atc", "{out}", "--id", "idt,soft", "--target", "idt"], "'idt,soft' is a list, this option takes one task"),
        (["calibration", "{out}", "--task", "idt", "--bins", "0"], "n_bins=0 must be an integer in 1..10000"),
        (["calibration", "{out}"], "--task"),
        (["atc", "{out}", "--id", "idt"], "--target"),
    ],
)
def test_bad_input_exits_1_with_a_clear_message(out, capsys, argv, message):
    rc, stdout, stderr = cli([a.format(out=out) for a in argv], capsys)
    assert rc == 1  # cli.main's map: 1 = error (bad input or usage), 2 = refused
    assert message in stderr
    assert "Traceback" not in stderr and stdout == ""


def test_corrupted_records_file_exits_1(tmp_path, capsys):
    bad = records_path(tmp_path / "m", "broken", RUN)
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"PAR1 not really parquet")
    rc, _, stderr = cli(["calibration", tmp_path, "--task", "broken"], capsys)
    assert rc == 1 and "truncated or corrupted" in stderr and "Traceback" not in stderr


def test_subprocess_python_m_calibration(out, tmp_path):
    target = tmp_path / "calib.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lm_eval_evidential",
            "calibration",
            str(out),
            "--task",
            "idt,allright",
            "--json",
            str(target),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    header, rule, *body = proc.stdout.splitlines()
    assert header.split() == list(quality.CALIBRATION_KEYS)
    assert [line.split()[0] for line in body] == ["idt", "allright"]
    rows = json.loads(target.read_text())
    assert rows == json.loads(
        json.dumps(quality.calibration_rows({t: load_records(out, t) for t in ("idt", "allright")}))
    )
    bad = subprocess.run(
        [sys.executable, "-m", "lm_eval_evidential", "calibration", str(out), "--task", "nope"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert bad.returncode == 1 and "Traceback" not in bad.stderr and "--tasks nope" in bad.stderr


# ---------------------------------------------------------------- library API


def test_quality_imports_neither_torch_nor_lm_eval():
    code = (
        "import sys, lm_eval_evidential.audits.quality; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'lm_eval', 'matplotlib')))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_empty_records_give_nan_rows_with_reasons(tmp_path):
    empty = Records.from_rows([], task="empty", meta={"method": "edl", "prior_weight": 1.0})  # full's producer
    full = _records("full", 20, seed=5)
    cal = quality.calibration_rows({"empty": empty})[0]
    assert math.isnan(cal["ece"]) and math.isnan(cal["acc"]) and "0 examples" in cal["reason"]
    sel = quality.selective_rows({"empty": empty}, scores=["max_prob"])[0]
    assert math.isnan(sel["aurc"]) and "0 examples" in sel["reason"]
    orders = quality.order_rows({"empty": empty}, scores=["max_prob", "l2_norm"])[0]
    assert math.isnan(orders["discordant_fraction"]) and orders["order_equivalent"] is False and orders["reason"]
    by_target = quality.atc_rows(full, [empty], scores=["max_prob"])
    assert [r["method"] for r in by_target] == ["atc", "doc"]
    assert all(math.isnan(r["estimate"]) and r["reason"] for r in by_target)
    from_empty_id = quality.atc_rows(empty, [full], scores=["neg_entropy"])[0]
    assert math.isnan(from_empty_id["estimate"]) and from_empty_id["true_acc"] == np.mean(full.correct)
    assert "no threshold" in from_empty_id["reason"]


def test_row_functions_reject_unknown_scores_and_bad_containers():
    rec = _records("r", 10, seed=6)
    for call in (
        lambda: quality.selective_rows({"r": rec}, scores=["nope"]),
        lambda: quality.order_rows({"r": rec}, scores=["max_prob", "nope"]),
        lambda: quality.atc_rows(rec, [rec], scores=["nope"]),
        lambda: plots.save_risk_coverage_figure(rec, "x", scores=["nope"]),
    ):
        with pytest.raises(ValueError, match="valid scores are"):
            call()
    with pytest.raises(ValueError, match="must map task name"):
        quality.calibration_rows([rec])
    assert set(SCORES) >= set(available_scores(True))


def test_figure_functions_return_both_paths_and_strip_suffix(tmp_path):
    rec = _records("r", 40, seed=7)
    paths = plots.save_reliability_figure({"r": rec, "s": _records("s", 30, seed=8)}, tmp_path / "rel.svg")
    assert paths == [tmp_path / "rel.png", tmp_path / "rel.svg"]
    paths = plots.save_risk_coverage_figure(rec, tmp_path / "sub" / "rc", scores=["max_prob", "strength"])
    assert paths == [tmp_path / "sub" / "rc.png", tmp_path / "sub" / "rc.svg"]
    assert all(p.stat().st_size > 1000 for p in paths)
    soft = _records("soft", 20, seed=9, softmax=True)
    with pytest.raises(ValueError, match="needs Dirichlet alpha"):
        plots.save_risk_coverage_figure(soft, tmp_path / "x", scores=["reciprocal_vacuity"])


def test_selective_coverage_option_names_the_risk_column(out, capsys, tmp_path):
    rows, stdout = run_json(
        ["selective", out, "--task", "idt", "--scores", "max_prob", "--coverage", "0.5"], capsys, tmp_path
    )
    (row,) = rows
    assert tuple(row) == quality.selective_keys(0.5) and "risk_at_0.5" in stdout.splitlines()[0]
    rec = load_records(out, "idt")
    assert row["risk_at_0.5"] == pytest.approx(risk_at_coverage(rec.max_prob, rec.correct, 0.5), abs=1e-12)
    rc, _, stderr = cli(["selective", out, "--task", "idt", "--coverage", "1.5"], capsys)
    assert rc == 1 and "argument --coverage: coverage=1.5 must be a finite number in (0, 1]" in stderr  # a usage error
