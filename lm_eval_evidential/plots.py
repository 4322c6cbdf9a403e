"""Every figure of the package, and the one :func:`save_figure` that writes them.

Metric functions (:mod:`lm_eval_evidential.metrics`) compute; this module draws. Figures are
bare :class:`matplotlib.figure.Figure` objects (no pyplot state, no GUI backend, nothing kept
alive between calls), written atomically as PNG and SVG with fixed metadata so the same data
gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lm_eval_evidential.audits._common import (
    check_records_by_task,
    check_scores,
    collect,
    no_alpha_reason,
    record_scores,
)
from lm_eval_evidential.metrics._validation import as_binary_labels
from lm_eval_evidential.metrics.calibration import reliability_diagram
from lm_eval_evidential.metrics.scores import SCORES, available_scores
from lm_eval_evidential.metrics.selective import risk_coverage_curve
from lm_eval_evidential.records.io import atomic_write_bytes

_FIGURE_SUFFIXES = (".png", ".svg", ".pdf")


def figure_base(path_without_suffix) -> Path:
    """``path`` without a trailing .png/.svg/.pdf, so ``fig.png`` and ``fig`` mean the same."""
    p = Path(path_without_suffix)
    return p.with_suffix("") if p.suffix.lower() in _FIGURE_SUFFIXES else p


def save_figure(fig, path_without_suffix, formats: Sequence[str] = ("png", "svg")) -> list[Path]:
    """Save a matplotlib ``Figure`` as ``<path>.<fmt>`` for each format, each atomically."""
    import matplotlib

    stem = figure_base(path_without_suffix)
    out = []
    for fmt in formats:
        path = stem.parent / f"{stem.name}.{fmt}"
        # Fixed metadata: the same data gives byte-identical SVG (no creation date inside).
        meta = {"Date": None} if fmt == "svg" else {}
        # A fixed salt for the SVG element ids, which matplotlib otherwise salts with uuid4.
        with matplotlib.rc_context({"svg.hashsalt": "lm-eval-evidential"}):
            atomic_write_bytes(path, lambda tmp, fmt=fmt, meta=meta: fig.savefig(tmp, format=fmt, dpi=150, metadata=meta))
        out.append(path)
    return out


def plot_ksweep(rows: Sequence[dict], path_without_suffix, title: str | None = None) -> list[Path]:
    """McNamara (2026) Figure 1 from :func:`~lm_eval_evidential.audits.ood.ksweep_rows` rows: AUROC and AUPR-In against K_OOD.

    Two panels, one line per score and condition (solid = OOD-only expansion, dashed =
    matched expansion). When a side's K is mixed the x-axis is the number of appended classes
    instead. Written as ``<path>.png`` and ``<path>.svg`` (atomically); returns both paths.
    Uses a bare ``matplotlib.figure.Figure``, so no pyplot state is touched.
    """
    from matplotlib.figure import Figure

    rows = list(rows)
    if not rows:
        raise ValueError("no ksweep rows to plot")
    use_k = all(r.get("k_ood") is not None for r in rows)
    xkey, xlabel = ("k_ood", "$K_{OOD}$ (evaluated classes on the OOD side)") if use_k else ("extra", "extra zero-evidence classes x")
    names = list(dict.fromkeys(r["score"] for r in rows))
    fig = Figure(figsize=(10, 4.2 + 0.25 * len(names)), layout="constrained")
    axes = fig.subplots(1, 2)
    styles = {"ood_only": ("-", "o", "OOD-only expansion"), "matched": ("--", "s", "matched expansion")}
    for ax, metric, label in zip(axes, ("auroc", "aupr_in"), ("AUROC", "AUPR-In")):
        for i, name in enumerate(names):
            for condition, (ls, marker, cond_label) in styles.items():
                sel = sorted((r for r in rows if r["score"] == name and r["condition"] == condition), key=lambda r: r["extra"])
                if sel:
                    ax.plot([r[xkey] for r in sel], [r[metric] for r in sel], linestyle=ls, marker=marker,
                            color=f"C{i % 10}", label=f"{name} ({cond_label})")  # fmt: skip
        ax.set_xlabel(xlabel)
        ax.set_ylabel(label)
        ax.set_title(f"({'ab'[metric == 'aupr_in']}) {label} as K grows")
        ax.grid(True, alpha=0.3)
        ax.xaxis.get_major_locator().set_params(integer=True)
    handles, labels = axes[0].get_legend_handles_labels()
    # Below both panels, so the legend never hides a curve.
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(names), 3), fontsize="small")
    if title:
        fig.suptitle(title)
    return save_figure(fig, path_without_suffix)


def _figure_and_axes(ax):
    """``(figure, axes)`` to draw on, importing matplotlib only now.

    Without an ``ax`` a bare :class:`matplotlib.figure.Figure` is built: it bypasses pyplot, so
    no GUI backend is selected or needed, it renders with Agg on ``savefig``, and it is not kept
    alive by pyplot's figure registry (no leak when auditing many sets).
    """
    if ax is not None:
        return ax.figure, ax
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.0, 4.5), layout="constrained")
    return fig, fig.add_subplot()


def plot_reliability_diagram(diagram: dict, ax=None, title: str | None = None):
    """Draw a reliability diagram from :func:`reliability_diagram` output; returns the Figure.

    Bars are per-bin accuracy (empty bins are left blank), dots the per-bin mean confidence,
    and the dashed diagonal is perfect calibration. Draws on ``ax`` when given, otherwise on a
    new pyplot-free Figure (see ``_figure_and_axes``). ``title`` defaults to the ECE.
    """
    missing = {"edges", "counts", "mean_confidence", "accuracy"} - set(diagram)
    if missing:
        raise ValueError(f"diagram is missing {sorted(missing)}; pass the dict returned by reliability_diagram")
    fig, ax = _figure_and_axes(ax)
    edges = np.asarray(diagram["edges"], dtype=np.float64)
    acc = np.asarray(diagram["accuracy"], dtype=np.float64)
    conf = np.asarray(diagram["mean_confidence"], dtype=np.float64)
    filled = np.asarray(diagram["counts"]) > 0
    widths = np.diff(edges)
    ax.bar(edges[:-1][filled], acc[filled], width=widths[filled], align="edge",
           edgecolor="black", linewidth=0.5, label="accuracy")
    ax.plot(0.5 * (edges[:-1] + edges[1:])[filled], conf[filled], "o", color="tab:red", markersize=4,
            label="mean confidence")
    ax.plot([0.0, 1.0], [0.0, 1.0], "--", color="gray", linewidth=1, label="perfect calibration")
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.0)
    ax.set_xlabel("confidence")
    ax.set_ylabel("accuracy")
    if title is None and "ece" in diagram:
        title = f"ECE = {float(diagram['ece']):.4f}"
    if title is not None:
        ax.set_title(title)
    ax.legend(loc="upper left", fontsize="small")
    return fig


def plot_risk_coverage(score, correct, *, ax=None, label: str | None = None, title: str | None = None,
                       show_reference: bool = True):
    """Plot the risk-coverage curve of ``score`` (legend shows its AURC); returns the Figure.

    With ``show_reference`` the oracle curve (wrong answers rejected first) and the random
    level (constant overall error rate) are drawn too; call again with the same ``ax`` and
    ``show_reference=False`` to overlay more scores. Draws on ``ax`` when given, otherwise on a
    new pyplot-free Figure (matplotlib is imported only here).
    """
    coverage, risk = risk_coverage_curve(score, correct)
    if coverage.size == 0:
        raise ValueError("cannot plot a risk-coverage curve for 0 examples")
    fig, ax = _figure_and_axes(ax)
    name = "score" if label is None else label
    ax.plot(coverage, risk, label=f"{name} (AURC {risk.mean():.4f})")
    if show_reference:
        y = as_binary_labels(correct, "correct")
        oracle_cov, oracle_risk = risk_coverage_curve(y.astype(np.float64), y)
        ax.plot(oracle_cov, oracle_risk, ":", color="black", label=f"oracle (AURC {oracle_risk.mean():.4f})")
        ax.axhline(risk[-1], linestyle="--", color="gray", linewidth=1, label="random")
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel("coverage")
    ax.set_ylabel("selective risk (error rate)")
    if title is not None:
        ax.set_title(title)
    ax.legend(loc="upper left", fontsize="small")
    return fig


def save_reliability_figure(records_by_task, path_without_suffix, n_bins: int = 15) -> list[Path]:
    """Reliability diagrams (one panel per task, equal-width bins as in ``ece``), as .png and .svg.

    A bare :class:`matplotlib.figure.Figure` (no pyplot state). Returns the two written paths.
    """
    from matplotlib.figure import Figure

    check_records_by_task(records_by_task, allow_fingerprint_mismatch=True)  # figures draw what the rows audited
    if not records_by_task:
        raise ValueError("no tasks to plot")
    n = len(records_by_task)
    ncols = min(n, 3)
    nrows = -(-n // ncols)
    fig = Figure(figsize=(4.5 * ncols, 4.2 * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, (task, r) in zip(axes, records_by_task.items()):
        diagram = collect([], reliability_diagram, r.max_prob, r.correct, n_bins)
        plot_reliability_diagram(diagram, ax=ax, title=f"{task} (n={len(r)}, ECE {diagram['ece']:.4f})")
    for ax in axes[n:]:
        ax.set_visible(False)
    return save_figure(fig, path_without_suffix)


def save_risk_coverage_figure(records, path_without_suffix, scores: Sequence[str] | None = None) -> list[Path]:
    """Risk-coverage curves of each score on one task (oracle and random for reference), .png and .svg.

    ``scores`` defaults to every score the records can give; alpha scores asked of softmax
    records raise ValueError. A bare Figure (no pyplot state). Returns the two written paths.
    """
    from matplotlib.figure import Figure

    names = check_scores(scores) or available_scores(records.has_alpha)
    bad = [n for n in names if SCORES[n].needs_alpha and not records.has_alpha]
    if bad:
        raise ValueError(no_alpha_reason(bad[0], [records.task]))
    if len(records) == 0:
        raise ValueError(f"task {records.task!r} has no records (0 examples); nothing to plot")
    values = record_scores(records, names)
    fig = Figure(figsize=(8.5, 5.0), layout="constrained")
    ax = fig.add_subplot()
    styles = ("-", "--", "-.")
    for i, name in enumerate(names):
        plot_risk_coverage(values[name], records.correct, ax=ax, label=name, show_reference=(i == 0))
        ax.get_lines()[-1 if i else 0].set_linestyle(styles[(i // 10) % len(styles)])
    ax.set_title(f"{records.task}: risk vs coverage (n={len(records)}, acc {np.mean(records.correct):.4f})")
    # Outside the axes: with a dozen scores an inside legend hides the low-coverage end.
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="x-small")
    return save_figure(fig, path_without_suffix)
