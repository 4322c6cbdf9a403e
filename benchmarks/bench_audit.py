"""Wall-time benchmark of the full OOD audit on synthetic EDL outputs.

    python benchmarks/bench_audit.py [--n 1000000] [--seed 0] [--max-extra 4] [--new-audits]

``--n`` ID and ``--n`` OOD examples with K = 4 (plus an OOD copy where 10% of the examples
have K = 5, for the cardinality-mismatch demo); every registered score; AUROC with DeLong
CI, AUPR-In/Out and FPR@95%TPR per score; the K sweep (McNamara 2026, Table 1). Each step's wall
time is printed next to its ratio to one ``sklearn.metrics.roc_auc_score`` call on the same
2n examples, measured in this run. Target: the whole audit within 60 s on 2 cores.

``--commands`` instead writes ``--n`` + ``--n`` records (K = 4, EDL) to a run folder and times the commands
as a user runs them, side by side in one run: ``lm-eval-evidential ood`` and ``report`` on the same records,
each in its own process, with the seconds until each printed its first stderr line (issue 36 class 7: the
report within 3x of ``ood``, progress within 10 s).

``--new-audits`` also times the audits of issue 34 on the same arrays (conformal LAC and APS sets
calibrated on half of the ID side and evaluated on the rest and on the OOD side, with bootstrap
CIs; temperature scaling fitted on half of the ID side and applied to both; AUGRC, E-AURC,
prr_normalized and risk@0.8; the OpenOOD-direction FPR@95) after the existing audit, and prints the
process's peak RSS after every step: the existing audit's alone (the baseline) beside the peak with the
new audits, and the ratios of both to the same run's sklearn call.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from measure import RESULTS, Timer, command_line, peak_rss_mb, write_result  # noqa: E402
from sklearn.metrics import roc_auc_score  # noqa: E402

from lm_eval_evidential.metrics import dirichlet as D  # noqa: E402
from lm_eval_evidential.metrics.cardinality import (  # noqa: E402
    CardinalityMismatchError,
    check_cardinality,
    classify_k_sensitivity,
    ksweep,
)
from lm_eval_evidential.metrics.detection import detection_report  # noqa: E402
from lm_eval_evidential.metrics.scores import SCORES, available_scores, compute_score  # noqa: E402

#: Every score one EDL prediction per question gives (member scores need an ensemble's records).
NAMES = available_scores(True, has_logits=True)


def synthetic_logits(rng, n, k, boost):
    """Answer-token logits: one 'preferred' option gets ``boost`` extra on average."""
    logits = rng.standard_normal((n, k)) * 1.5
    logits[np.arange(n), rng.integers(0, k, n)] += rng.normal(boost, 1.0, n)
    return logits


class Steps:
    """Each step's wall time (the shared :class:`measure.Timer`) and the process's peak RSS when it ends (a
    peak only grows: a step that raises it is the one that needed more memory than every step before it)."""

    def __init__(self):
        self.timer = Timer()
        self.rss = []

    def __call__(self, label, fn, *args, **kwargs):
        out = self.timer.call(label, fn, *args, **kwargs)
        self.rss.append(peak_rss_mb())
        return out

    @property
    def rows(self) -> list[tuple[str, float]]:
        return list(self.timer.wall.items())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="examples per side (default 1,000,000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-extra", type=int, default=4)
    ap.add_argument("--new-audits", action="store_true", help="also time issue 34's audits, print the peak RSS")
    ap.add_argument("--commands", action="store_true", help="time the ood and report commands on written records")
    ap.add_argument("--folder", type=Path, default=None, help="--commands: where the records go (default: a temp dir)")
    ap.add_argument(
        "--json", type=Path, default=None, help="the run's record (default: benchmarks/results/<name>.json)"
    )
    args = ap.parse_args(argv)
    if args.commands:
        return commands(args.n, args.seed, args.folder, args.json)
    run = audit(args.n, args.seed, args.max_extra, args.new_audits)
    print_timings(run)
    print_results(run)
    if args.new_audits:
        print_new_audits(run)
    figures = [
        {"what": "sklearn roc_auc_score, one call (the reference)", "value": round(run.t_sklearn, 3), "unit": "s"}
    ]
    figures += [
        {"what": label, "value": round(t, 3), "unit": "s", "note": f"{t / run.t_sklearn:.2f}x the reference"}
        for label, t in run.timer.rows
    ]
    figures.append({"what": "total", "value": round(run.total, 3), "unit": "s", "limit": "< 60 s on 2 cores, n = 1M"})
    figures.append({"what": "peak RSS", "value": round(peak_rss_mb()), "unit": "MB"})
    shape = f"{args.n:,} ID + {args.n:,} OOD synthetic EDL examples, K = 4, {len(NAMES)} scores"
    written = write_result("bench_audit", command=command_line(), shape=shape, figures=figures, path=args.json)
    print(f"\nwritten: {written}")


def all_scores(k_id, k_ood, alpha_id, alpha_ood, logits_id, logits_ood) -> dict:
    """Every score of :data:`NAMES` on the ID side then the OOD side, concatenated."""
    out = {}
    for name in NAMES:
        z_id, z_ood = (logits_id, logits_ood) if SCORES[name].needs_logits else (None, None)
        s_id = compute_score(name, probs=None, k=k_id, alpha=alpha_id, logits=z_id)
        s_ood = compute_score(name, probs=None, k=k_ood, alpha=alpha_ood, logits=z_ood)
        out[name] = np.concatenate((s_id, s_ood))
    return out


def mismatch_demo(k_id, alpha_id, alpha_mixed, k_mixed, y):
    """The K check on an OOD side where some questions have a fifth option: refused, reported, restricted."""
    try:
        check_cardinality(k_id, k_mixed, id_name="synthetic_id", ood_name="synthetic_ood_mixed")
        raise AssertionError("expected a CardinalityMismatchError")
    except CardinalityMismatchError as err:
        message = str(err)
    rv_id = compute_score("reciprocal_vacuity", probs=None, k=k_id, alpha=alpha_id)
    rv_mixed = compute_score("reciprocal_vacuity", probs=None, k=k_mixed, alpha=alpha_mixed)
    report = check_cardinality(k_id, k_mixed, policy="report")
    as_is = detection_report(y, np.concatenate((rv_id, rv_mixed)))["auroc"]
    kept = check_cardinality(k_id, k_mixed, policy="restrict")
    y_r = np.r_[np.ones(kept.keep_id.sum(), bool), np.zeros(kept.keep_ood.sum(), bool)]
    restricted = detection_report(y_r, np.concatenate((rv_id[kept.keep_id], rv_mixed[kept.keep_ood])))["auroc"]
    return message, report.matched, as_is, restricted, kept.n_dropped_ood


def audit(n: int, seed: int, max_extra: int, with_new_audits: bool) -> SimpleNamespace:
    """The timed audit on ``n`` + ``n`` synthetic examples: every step, its results and the reference call."""
    rng = np.random.default_rng(seed)
    timer = Steps()
    t_all = time.perf_counter()
    logits_id = timer("generate synthetic logits", lambda: synthetic_logits(rng, n, 4, 3.0))
    logits_ood = synthetic_logits(rng, n, 4, 2.0)
    alpha_id, alpha_ood = timer("edl_alpha (2n x 4)", lambda: (D.edl_alpha(logits_id), D.edl_alpha(logits_ood)))
    k_id, k_ood = D.class_counts(alpha_id), D.class_counts(alpha_ood)
    y = np.r_[np.ones(n, dtype=bool), np.zeros(n, dtype=bool)]
    scores = timer(f"compute {len(NAMES)} scores", all_scores, k_id, k_ood, alpha_id, alpha_ood, logits_id, logits_ood)
    t0 = time.perf_counter()
    ref_auc = roc_auc_score(y, scores["reciprocal_vacuity"])
    t_sklearn = time.perf_counter() - t0
    reports = timer(
        f"detection ({len(NAMES)} scores: AUROC+DeLong CI, AUPR-In/Out, FPR95)",
        lambda: {name: detection_report(y, s) for name, s in scores.items()},
    )
    assert abs(reports["reciprocal_vacuity"]["auroc"] - ref_auc) <= 1e-12
    sweep = timer(
        f"K sweep (x = 0..{max_extra}, 3 scores, 2 conditions)",
        lambda: ksweep(alpha_id, alpha_ood, max_extra=max_extra),
    )
    # Mismatch demo: 10% of OOD examples get a fifth option (an extra zero-evidence-ish logit).
    mixed = np.full((n, 5), np.nan)
    mixed[:, :4] = logits_ood
    five = rng.random(n) < 0.10
    mixed[five, 4] = rng.normal(-2.0, 1.0, int(five.sum()))
    alpha_mixed = D.edl_alpha(mixed)
    k_mixed = D.class_counts(alpha_mixed)
    demo = timer(
        "K check + mismatch demo (assert/report/restrict)", mismatch_demo, k_id, alpha_id, alpha_mixed, k_mixed, y
    )
    run = SimpleNamespace(n=n, timer=timer, t_sklearn=t_sklearn, reports=reports, sweep=sweep, demo=demo)
    run.sensitivity = classify_k_sensitivity(sweep)
    run.existing_peak, run.existing_steps = peak_rss_mb(), len(timer.rows)  # the existing audit alone: the baseline
    run.load_before = os.getloadavg()
    if with_new_audits:
        new_audits(timer, rng, logits_id, logits_ood, alpha_id, alpha_ood, scores, y, n)
    run.total = time.perf_counter() - t_all
    return run


def print_timings(run: SimpleNamespace) -> None:
    n, timer, t_sklearn, total = run.n, run.timer, run.t_sklearn, run.total
    print(
        f"# bench_audit: n_id = n_ood = {n:,}  |  python {platform.python_version()}, numpy {np.__version__}, "
        f"{os.cpu_count()} CPU(s)"
    )
    print(f"\nreference: sklearn roc_auc_score on the same {2 * n:,} examples (one score): {t_sklearn:.3f} s\n")
    print(f"{'step':<66}{'wall s':>9}{'x sklearn':>11}{'peak RSS MB':>13}")
    for i, ((label, t), rss) in enumerate(zip(timer.rows, timer.rss)):
        if i == run.existing_steps:
            print("-- issue 34's audits on the same arrays (--new-audits):")
        print(f"{label:<66}{t:>9.3f}{t / t_sklearn:>11.2f}{rss:>13,.0f}")
    print(f"{'TOTAL (everything above, incl. data generation)':<66}{total:>9.3f}{total / t_sklearn:>11.2f}")
    per_score = dict(timer.rows)[next(lbl for lbl, _ in timer.rows if lbl.startswith("detection"))] / len(NAMES)
    print(f"{'  per score: full detection report':<66}{per_score:>9.3f}{per_score / t_sklearn:>11.2f}")


def print_results(run: SimpleNamespace) -> None:
    print(f"\n{'score':<24}{'AUROC':>8}{'95% DeLong CI':>22}{'AUPR-In':>9}{'AUPR-Out':>9}{'FPR95':>8}")
    for name, r in run.reports.items():
        ci = f"[{r['auroc_lo']:.4f}, {r['auroc_hi']:.4f}]"
        print(f"{name:<24}{r['auroc']:>8.4f}{ci:>22}{r['aupr_in']:>9.4f}{r['aupr_out']:>9.4f}{r['fpr_at_tpr']:>8.4f}")
    print("\nK sweep (McNamara 2026, Table 1 layout), reciprocal_vacuity:")
    print(f"{'condition':<10}{'K_ID':>5}{'K_OOD':>6}{'AUROC':>8}{'dAUROC':>9}{'AUPR':>8}{'dAUPR':>9}")
    for r in run.sweep:
        if r["score"] == "reciprocal_vacuity":
            print(
                f"{r['condition']:<10}{r['k_id']:>5}{r['k_ood']:>6}{r['auroc']:>8.3f}{r['delta_auroc']:>+9.3f}"
                f"{r['aupr_in']:>8.3f}{r['delta_aupr']:>+9.3f}"
            )
    print("K sensitivity:", run.sensitivity)
    message, matched, auc_as_is, auc_restricted, dropped = run.demo
    print(f"\nmismatch demo: OOD with 10% K=5 -> assert raised CardinalityMismatchError:\n  {message[:160]}...")
    print(
        f"  report (matched={matched}): reciprocal_vacuity AUROC {auc_as_is:.4f}  |  restrict "
        f"(dropped {dropped:,} OOD): {auc_restricted:.4f}"
    )
    print(f"\ntotal {run.total:.1f} s (target < 60 s on 2 cores): {'OK' if run.total < 60 else 'OVER TARGET'}")


def print_new_audits(run: SimpleNamespace) -> None:
    rows, t_sklearn, existing_peak = run.timer.rows, run.t_sklearn, run.existing_peak
    new_time = sum(t for _, t in rows[run.existing_steps :])
    old_time = sum(t for _, t in rows[: run.existing_steps])
    peak = peak_rss_mb()
    print(
        f"existing audit alone: {old_time:.1f} s ({old_time / t_sklearn:.1f} sklearn calls), peak RSS "
        f"{existing_peak:,.0f} MB; with the new audits: +{new_time:.1f} s ({new_time / t_sklearn:.1f}; "
        f"x{new_time / old_time:.2f} the existing), peak RSS {peak:,.0f} MB (x{peak / existing_peak:.2f} the "
        f"existing peak)"
    )
    print(f"load average before the new audits: {run.load_before}; after: {os.getloadavg()}")


def new_audits(timer, rng, logits_id, logits_ood, alpha_id, alpha_ood, scores, y, n):
    """Issue 34's audits on the benchmark's arrays (gold labels drawn from the ID model's own E[p])."""
    from lm_eval_evidential.metrics import conformal as C
    from lm_eval_evidential.metrics import selective as S
    from lm_eval_evidential.metrics.calibration import brier, ece, nll
    from lm_eval_evidential.metrics.detection import fpr_at_95_tpr
    from lm_eval_evidential.metrics.temperature import fit_temperature, scaled_softmax

    p_id, p_ood = D.expected_probs(alpha_id), D.expected_probs(alpha_ood)
    gold_id = (rng.random(n)[:, None] > p_id.cumsum(axis=1)).sum(axis=1).clip(0, 3)
    gold_ood = (rng.random(n)[:, None] > p_ood.cumsum(axis=1)).sum(axis=1).clip(0, 3)
    correct_id = p_id.argmax(axis=1) == gold_id
    k4 = np.full(n, 4)
    half = n // 2

    def conformal(method):
        q = C.conformal_quantile(C.nonconformity(p_id[:half], gold_id[:half], method), 0.1)
        out = []
        evaluated = ((p_id[half:], gold_id[half:], correct_id[half:]), (p_ood, gold_ood, p_ood.argmax(1) == gold_ood))
        for p, g, c in evaluated:
            sets = C.prediction_sets(p, q, method)
            out.append((C.set_summary(sets, k4[: len(g)], g, c), C.set_summary_ci(sets, k4[: len(g)], g, c)))
        return out

    for method in C.METHODS:
        timer(f"conformal {method}: calibrate n/2, sets + summary + CIs on n/2 + n", conformal, method)

    def temperature():
        t = fit_temperature(logits_id[:half], gold_id[:half])
        for z, g in ((logits_id[half:], gold_id[half:]), (logits_ood, gold_ood)):
            p = scaled_softmax(z, t)
            ece(p.max(axis=1), p.argmax(axis=1) == g)
            nll(p, g)
            brier(p, g)
        return t

    timer("temperature: fit on n/2 (NLL, Brent), apply + ECE/NLL/Brier on n/2 + n", temperature)
    mp = scores["max_prob"][:n]
    timer(
        "selective on n: AUGRC, E-AURC, prr_normalized, risk@0.8",
        lambda: (
            S.augrc(mp, correct_id),
            S.eaurc(mp, correct_id),
            S.prr_normalized(mp, correct_id),
            S.risk_at_coverage(mp, correct_id, 0.8),
        ),
    )
    timer("OpenOOD FPR@95 (OOD positive), one score, 2n", lambda: fpr_at_95_tpr(~y, -scores["max_prob"]))


def write_synthetic_records(folder: Path, task: str, n: int, boost: float, rng) -> Path:
    """``n`` K = 4 EDL records of ``task`` in ``folder``, built column by column (rows of dicts would take
    minutes and gigabytes at 2M); the loader's own checks accept them (derived fields from the logits)."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from lm_eval_evidential.records import META_KEY, RECORD_FIELDS, SCHEMA_VERSION, arrow_schema, records_path

    k = 4
    z = synthetic_logits(rng, n, k, boost)
    alpha = D.edl_alpha(z)
    strength = alpha.sum(axis=1)
    probs = alpha / strength[:, None]
    pred = probs.argmax(axis=1)
    gold = rng.integers(0, k, n)
    offsets = pa.array(np.arange(0, k * (n + 1), k, dtype=np.int32))

    def lists(values):
        return pa.ListArray.from_arrays(offsets, pa.array(np.ascontiguousarray(values).ravel()))

    columns = {
        "task": pa.array(np.full(n, task, dtype=object)),
        "doc_id": pa.array(np.arange(n)),
        "k": pa.array(np.full(n, k)),
        "labels": lists(np.tile(np.array(list("ABCD"), dtype=object), n)),
        "gold": pa.array(gold),
        "logits": lists(z),
        "evidence": lists(alpha - 1.0),
        "alpha": lists(alpha),
        "strength": pa.array(strength),
        "vacuity": pa.array(k / strength),
        "max_prob": pa.array(probs[np.arange(n), pred]),
        "pred": pa.array(pred),
        "correct": pa.array(pred == gold),
    }
    meta = {"schema_version": SCHEMA_VERSION, "method": "edl", "prior_weight": 1.0, "pretrained": "bench", "task": task}
    schema = arrow_schema(RECORD_FIELDS).with_metadata({META_KEY: json.dumps(meta, sort_keys=True).encode()})
    table = pa.table([columns[f].cast(schema.field(f).type) for f in RECORD_FIELDS], schema=schema)
    path = records_path(folder, task, "2026-03-01T10-00-00.000001")
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def timed_command(argv: list[str]) -> tuple[float, float | None, int, str, float]:
    """(wall s, s until the first stderr line or None, exit status, last stderr line, CPU s) of one child command.

    The CPU seconds (user + system, the kernel's count for the waited-for child) are what to compare on a machine
    shared with other work, where the wall seconds carry everyone else's load."""
    import resource
    import subprocess
    import threading

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    first: list[float] = []
    lines: list[str] = []

    def read():
        for line in proc.stderr:
            if not first:
                first.append(time.perf_counter() - t0)
            lines.append(line.rstrip())

    reader = threading.Thread(target=read)
    reader.start()
    status = proc.wait()
    reader.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return time.perf_counter() - t0, (first[0] if first else None), status, (lines[-1] if lines else ""), cpu


def commands(n: int, seed: int, folder: Path | None, json_path: Path | None = None) -> None:
    import tempfile

    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(folder) if folder is not None else Path(tmp) / "out"
        t0 = time.perf_counter()
        write_synthetic_records(out / "bench", "id4", n, 3.0, rng)
        write_synthetic_records(out / "bench", "ood4", n, 2.0, rng)
        print(f"# bench_audit --commands: {n:,} + {n:,} records written in {time.perf_counter() - t0:.1f} s")
        print(f"load before: {os.getloadavg()}")
        cli = [sys.executable, "-m", "lm_eval_evidential"]
        rows = [
            ("ood", [*cli, "ood", str(out), "--id", "id4", "--ood", "ood4"]),
            ("report", [*cli, "report", str(out), "--id", "id4", "--ood", "ood4", "--out", str(Path(tmp) / "r")]),
        ]
        times, cpus, firsts = {}, {}, {}
        print(f"{'command':<10}{'wall s':>9}{'CPU s':>9}{'first stderr s':>16}{'exit':>6}  last stderr line")
        for name, argv in rows:
            wall, first, status, last, cpu = timed_command(argv)
            times[name], cpus[name], firsts[name] = wall, cpu, first
            shown = "-" if first is None else f"{first:.1f}"
            print(f"{name:<10}{wall:>9.1f}{cpu:>9.1f}{shown:>16}{status:>6}  {last[:100]}")
        ratio, cpu_ratio = times["report"] / times["ood"], cpus["report"] / cpus["ood"]
        print(f"report / ood = {ratio:.2f} wall, {cpu_ratio:.2f} CPU (target <= 3); load after: {os.getloadavg()}")
    figures = []
    for name in times:
        figures.append({"what": f"`{name}` command, wall", "value": round(times[name], 1), "unit": "s"})
        figures.append({"what": f"`{name}` command, CPU (user + system)", "value": round(cpus[name], 1), "unit": "s"})
        if firsts[name] is not None:
            figures.append(
                {"what": f"`{name}` command, first stderr line", "value": round(firsts[name], 1), "unit": "s"}
            )
    figures.append({"what": "report / ood, wall", "value": round(ratio, 2), "unit": "x", "limit": "<= 3"})
    figures.append({"what": "report / ood, CPU", "value": round(cpu_ratio, 2), "unit": "x", "limit": "<= 3"})
    shape = f"{n:,} + {n:,} records (K = 4, EDL) on disk"
    path = json_path if json_path is not None else RESULTS / "bench_audit_commands.json"
    written = write_result("bench_audit --commands", command=command_line(), shape=shape, figures=figures, path=path)
    print(f"written: {written}")


if __name__ == "__main__":
    main()
