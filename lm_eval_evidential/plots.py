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
    check_scores,
    check_task_mapping,
    collect,
    no_alpha_reason,
    record_scores,
)
from lm_eval_evidential.errors import InvalidValueError
from lm_eval_evidential.files import atomic_write_bytes
from lm_eval_evidential.metrics._validation import as_binary_labels
from lm_eval_evidential.metrics.calibration import reliability_diagram
from lm_eval_evidential.metrics.ksweep import phantom_options
from lm_eval_evidential.metrics.scores import OOD_DEFAULT_SCORES, computable_scores
from lm_eval_evidential.metrics.selective import risk_coverage_curve

_FIGURE_SUFFIXES = (".png", ".svg", ".pdf")

#: One colour per registered score, the same in every figure, none of them the black/grey of the
#: reference lines (oracle, random, perfect calibration) and no two alike.
SCORE_COLORS = {
    "reciprocal_vacuity": "#1f77b4",  # blue
    "max_prob": "#ff7f0e",  # orange
    "neg_norm_entropy": "#2ca02c",  # green
    "neg_entropy": "#98df8a",  # light green
    "strength": "#9467bd",  # purple
    "neg_expected_entropy": "#8c564b",  # brown
    "neg_mutual_information": "#e377c2",  # pink
    "l2_norm": "#bcbd22",  # olive
    "l1_to_uniform": "#17becf",  # cyan
    "l2_to_uniform": "#d62728",  # red
    "js_to_uniform": "#7b4173",  # plum
    "neg_energy": "#e7969c",  # rose
    "max_logit": "#6b6ecf",  # indigo
    "neg_max_prob_variance": "#ad494a",  # brick
}
_SPARE_COLORS = ("#393b79", "#637939", "#8c6d31", "#843c39")
#: The ``gid`` of reference lines (oracle, random), which legends list after the scores.
REFERENCE_GID = "reference"


def score_color(name: str, index: int = 0) -> str:
    """The colour of score ``name`` in every figure (a spare colour for a name not registered)."""
    return SCORE_COLORS.get(name) or _SPARE_COLORS[index % len(_SPARE_COLORS)]


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
            atomic_write_bytes(
                path, lambda tmp, fmt=fmt, meta=meta: fig.savefig(tmp, format=fmt, dpi=150, metadata=meta)
            )
        out.append(path)
    return out


def ksweep_figure(rows: Sequence[dict], title: str | None = None):
    """McNamara (2026) Figure 1 from :func:`~lm_eval_evidential.audits.ood.ksweep_rows` rows, as a Figure: AUROC
    and AUPR-In against the number x of options appended (the rows' ``phantom`` mode names them on the axis:
    zero-evidence options, the model's own, or options counted in vacuity's K alone).

    Two panels, one line per score and condition (solid = OOD-only expansion, where only K_OOD
    grows; dashed = matched expansion, where K_ID and K_OOD grow together). Each score keeps
    its colour (:func:`score_color`). Scores often coincide (every score reaches AUROC 1.0 once
    the OOD side has a zero-evidence option): the first score is drawn widest and each later
    one narrower on top of it, so a line under another still shows as a border around it.
    """
    from matplotlib.figure import Figure

    rows = list(rows)
    if not rows:
        raise InvalidValueError("no ksweep rows to plot")
    # x = options appended: OOD-only grows K_OOD alone, matched grows K_ID and K_OOD together,
    # so an axis of "K_OOD" would misdescribe the matched lines.
    base = rows[0].get("k_id") if rows[0].get("extra") == 0 else None
    grows = f"{base} + x" if isinstance(base, int) else "K + x"
    xkey, xlabel = "extra", f"{phantom_options(rows[0].get('phantom', 'zero'), 2)} appended, x"
    how = (
        f"solid, OOD-only: $K_{{OOD}}$ = {grows} while $K_{{ID}}$ stays;  "
        f"dashed, matched: $K_{{ID}}$ = $K_{{OOD}}$ = {grows}"
    )
    names = list(dict.fromkeys(r["score"] for r in rows))
    fig = Figure(figsize=(10, 4.2 + 0.25 * len(names)), layout="constrained")
    axes = fig.subplots(1, 2)
    styles = {"ood_only": ("-", "o", "OOD-only expansion"), "matched": ("--", "s", "matched expansion")}
    for ax, metric, label in zip(axes, ("auroc", "aupr_in"), ("AUROC", "AUPR-In")):
        for i, name in enumerate(names):
            under = len(names) - 1 - i  # how many later scores may be drawn on top of this one
            for condition, (ls, marker, cond_label) in styles.items():
                sel = sorted(
                    (r for r in rows if r["score"] == name and r["condition"] == condition), key=lambda r: r["extra"]
                )
                if sel:
                    ax.plot(
                        [r[xkey] for r in sel],
                        [r[metric] for r in sel],
                        linestyle=ls,
                        marker=marker,
                        color=score_color(name, i),
                        linewidth=1.5 + 1.2 * under,
                        markersize=5 + 2.5 * under,
                        zorder=2 + i,
                        label=f"{name} ({cond_label})",
                    )
        ax.set_xlabel(xlabel)
        ax.set_ylabel(label)
        ax.set_title(f"({'ab'[metric == 'aupr_in']}) {label} as K grows")
        ax.grid(True, alpha=0.3)
        ax.xaxis.get_major_locator().set_params(integer=True)
    handles, labels = axes[0].get_legend_handles_labels()
    # Below both panels, so the legend never hides a curve.
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(names), 3), fontsize="small")
    fig.suptitle(f"{title}\n{how}" if title else how, fontsize="medium")
    return fig


def plot_ksweep(rows: Sequence[dict], path_without_suffix, title: str | None = None) -> list[Path]:
    """:func:`ksweep_figure` written as ``<path>.png`` and ``<path>.svg`` (atomically); returns both paths.
    Uses a bare ``matplotlib.figure.Figure``, so no pyplot state is touched."""
    return save_figure(ksweep_figure(rows, title=title), path_without_suffix)


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

    Bars are per-bin accuracy, each with its number of examples above it; a hatched box spans
    the gap from the bar to the bin's mean confidence, so a bin whose examples are all wrong
    (accuracy 0, no bar) still shows as a box from 0 to its confidence. A dot marks each bin's
    accuracy at the bin's mean confidence (not at the bin's centre), as sklearn's calibration
    curve does: a calibrated bin's dot lies on the diagonal, and its distance above or below it
    is the bin's calibration error. Empty bins draw nothing. The x range is zoomed to the bins
    that hold examples (a max-probability confidence is never below 1/K), and the dashed
    diagonal is perfect calibration. Draws on ``ax`` when
    given, otherwise on a new pyplot-free Figure (see ``_figure_and_axes``). ``title`` defaults
    to the ECE.
    """
    missing = {"edges", "counts", "mean_confidence", "accuracy"} - set(diagram)
    if missing:
        raise InvalidValueError(f"diagram is missing {sorted(missing)}; pass the dict returned by reliability_diagram")
    fig, ax = _figure_and_axes(ax)
    edges = np.asarray(diagram["edges"], dtype=np.float64)
    acc = np.asarray(diagram["accuracy"], dtype=np.float64)
    conf = np.asarray(diagram["mean_confidence"], dtype=np.float64)
    counts = np.asarray(diagram["counts"])
    filled = counts > 0
    left, widths = edges[:-1][filled], np.diff(edges)[filled]
    centres = left + widths / 2
    ax.bar(
        left,
        acc[filled],
        width=widths,
        align="edge",
        color="#1f77b4",
        edgecolor="black",
        linewidth=0.5,
        label="accuracy",
    )
    ax.bar(
        left,
        conf[filled] - acc[filled],
        bottom=acc[filled],
        width=widths,
        align="edge",
        fill=False,
        edgecolor="#d62728",
        hatch="//",
        linewidth=0.8,
        label="gap to mean confidence",
    )
    ax.plot(conf[filled], acc[filled], "o", color="black", markersize=4, zorder=3, label="accuracy at mean confidence")
    tops = np.maximum(acc[filled], conf[filled])
    for x, top, n in zip(centres, tops, counts[filled]):
        ax.annotate(
            f"{int(n)}", (x, top), xytext=(0, 5), textcoords="offset points", ha="center", va="bottom", fontsize="small"
        )
    ax.plot([0.0, 1.0], [0.0, 1.0], "--", color="gray", linewidth=1, label="perfect calibration")
    x_lo, x_hi = 0.0, 1.0
    if filled.any():
        step = float(np.max(np.diff(edges)))
        x_lo, x_hi = max(0.0, left[0] - step), min(1.0, left[-1] + widths[-1] + step)
    ax.set_xlim(x_lo, x_hi)
    # Up to the diagonal's height at the right edge or the highest bar, plus room for the counts.
    ax.set_ylim(0.0, min(1.15, max(x_hi, float(tops.max()) if tops.size else 0.0) + 0.12))
    ax.set_xlabel("confidence (max E[p]), binned")
    ax.set_ylabel("accuracy in the bin (numbers: examples)")
    if title is None and "ece" in diagram:
        title = f"ECE = {float(diagram['ece']):.4f}"
    if title is not None:
        ax.set_title(title)
    ax.legend(loc="upper left", fontsize="x-small")
    return fig


def plot_risk_coverage(
    score,
    correct,
    *,
    ax=None,
    label: str | None = None,
    title: str | None = None,
    show_reference: bool = True,
    color: str | None = None,
    linestyle: str = "-",
):
    """Plot the risk-coverage curve of ``score`` (legend shows its AURC); returns the Figure.

    With ``show_reference`` the oracle curve (wrong answers rejected first) and the random
    level (constant overall error rate) are drawn too; call again with the same ``ax`` and
    ``show_reference=False`` to overlay more scores. Draws on ``ax`` when given, otherwise on a
    new pyplot-free Figure (matplotlib is imported only here).
    """
    style = {"label": label, "title": title, "show_reference": show_reference, "color": color, "linestyle": linestyle}
    return _plot_risk_coverage(*risk_coverage_curve(score, correct), correct, ax=ax, **style)


#: The most points a curve is drawn with: 1,000 buckets of 4 (:func:`thin_curve`), about the axes' width in
#: pixels at the figures' 150 dpi, so that drawing millions of examples costs what drawing a thousand does.
MAX_CURVE_POINTS = 4000


def thin_curve(x, y, max_points: int = MAX_CURVE_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """The points of the curve ``(x, y)`` (x ascending) that a line plot needs: all of them up to ``max_points``;
    beyond, the curve cut into ``max_points // 4`` runs of consecutive points and, of each run, its first, lowest,
    highest and last point in their order (M4 aggregation, Jugel et al. 2014, VLDB 7(10)): a line through them
    covers the same pixels as one through every point wherever a run is no wider than a pixel, the first and last
    points are exact, and the numbers a figure shows (AURC) are computed on the whole curve, not on these.
    """
    x, y = np.asarray(x), np.asarray(y)
    n = x.size
    if n <= max_points:
        return x, y
    edges = np.linspace(0, n, max_points // 4 + 1).astype(np.int64)
    runs = zip(edges[:-1], edges[1:])
    idx = np.concatenate([np.unique([a, a + np.argmin(y[a:b]), a + np.argmax(y[a:b]), b - 1]) for a, b in runs])
    return x[idx], y[idx]


def _plot_risk_coverage(coverage, risk, correct, *, ax, label, title, show_reference, color, linestyle):
    """:func:`plot_risk_coverage` of a computed curve (``risk_coverage_figure`` computes each score's once)."""
    if coverage.size == 0:
        raise InvalidValueError("cannot plot a risk-coverage curve for 0 examples")
    fig, ax = _figure_and_axes(ax)
    name = "score" if label is None else label
    ax.plot(*thin_curve(coverage, risk), color=color, linestyle=linestyle, label=f"{name} (AURC {risk.mean():.4f})")
    if show_reference:
        y = as_binary_labels(correct, "correct")
        oracle_cov, oracle_risk = risk_coverage_curve(y.astype(np.float64), y)
        oracle_label = f"oracle (AURC {oracle_risk.mean():.4f})"
        ax.plot(*thin_curve(oracle_cov, oracle_risk), ":", color="black", label=oracle_label, gid=REFERENCE_GID)
        ax.axhline(risk[-1], linestyle="--", color="gray", linewidth=1, label="random", gid=REFERENCE_GID)
    ax.set_xlim(0.0, 1.0)
    ax.set_xlabel("coverage")
    ax.set_ylabel("selective risk (error rate)")
    if title is not None:
        ax.set_title(title)
    ax.legend(loc="upper left", fontsize="small")
    return fig


def reliability_figure(records_by_task, n_bins: int = 15):
    """Reliability diagrams of ``{task: Records}`` (one panel per task, equal-width bins as in ``ece``), as a
    bare :class:`matplotlib.figure.Figure` (no pyplot state); one legend below the panels."""
    from matplotlib.figure import Figure

    check_task_mapping(records_by_task)  # no producer check: figures draw what the rows audited
    if not records_by_task:
        raise InvalidValueError("no tasks to plot")
    n = len(records_by_task)
    ncols = min(n, 3)
    nrows = -(-n // ncols)
    fig = Figure(figsize=(max(4.5 * ncols, 5.5), 4.0 * nrows + 0.5), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, (task, r) in zip(axes, records_by_task.items()):
        diagram = collect([], reliability_diagram, r.max_prob, r.correct, n_bins)
        plot_reliability_diagram(diagram, ax=ax, title=f"{task} (n={len(r)}, ECE {diagram['ece']:.4f})")
        ax.get_legend().remove()
    for ax in axes[n:]:
        ax.set_visible(False)
    # One legend for all panels, below them, so no legend hides a bar; two entries a row under one
    # panel, where four side by side would be wider than the figure.
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels) if ncols > 1 else 2, fontsize="small")
    return fig


def save_reliability_figure(records_by_task, path_without_suffix, n_bins: int = 15) -> list[Path]:
    """:func:`reliability_figure` written as .png and .svg; returns the two written paths."""
    return save_figure(reliability_figure(records_by_task, n_bins=n_bins), path_without_suffix)


def save_risk_coverage_figure(records, path_without_suffix, scores: Sequence[str] | None = None) -> list[Path]:
    """:func:`risk_coverage_figure` written as .png and .svg; returns the two written paths."""
    return save_figure(risk_coverage_figure(records, scores=scores), path_without_suffix)


def risk_coverage_figure(records, scores: Sequence[str] | None = None):
    """Risk-coverage curves of scores on one task (oracle and random for reference), as a Figure.

    ``scores`` defaults to the few that matter, :data:`~lm_eval_evidential.metrics.scores.OOD_DEFAULT_SCORES`
    (those the records can give); name others to see them. Scores whose curves coincide (the same
    ranking on this task, e.g. reciprocal vacuity and strength at one K) are drawn once, labelled
    ``a = b``. Each score keeps its colour (:func:`score_color`). Alpha scores asked of softmax
    records raise ValueError. The legend lists the scores first, then the references. A bare
    Figure (no pyplot state).
    """
    from matplotlib.figure import Figure

    if scores is None:
        names = computable_scores(OOD_DEFAULT_SCORES, records.has_alpha, records.has_members)[0]
    else:
        names = check_scores(scores)
    bad = computable_scores(names, records.has_alpha, records.has_members)[1]
    if bad:
        raise InvalidValueError(no_alpha_reason(bad[0], [records.task]))
    if len(records) == 0:
        raise InvalidValueError(f"task {records.task!r} has no records (0 examples); nothing to plot")
    values = record_scores(records, names)
    curves: dict[bytes, tuple[tuple, list[str]]] = {}  # identical curves share one line
    for name in names:
        curve = risk_coverage_curve(values[name], records.correct)
        curves.setdefault(curve[1].tobytes(), (curve, []))[1].append(name)
    fig = Figure(figsize=(8.5, 5.0), layout="constrained")
    ax = fig.add_subplot()
    styles = ("-", "--", "-.", ":")
    for i, (curve, group) in enumerate(curves.values()):
        style = {"label": " = ".join(group), "title": None, "color": score_color(group[0], i)}
        _plot_risk_coverage(
            *curve, records.correct, ax=ax, show_reference=(i == 0), linestyle=styles[i % len(styles)], **style
        )
    ax.set_title(f"{records.task}: risk vs coverage (n={len(records)}, acc {np.mean(records.correct):.4f})")
    ax.set_xlabel("coverage (share of questions answered, most confident first)")
    # Outside the axes: an inside legend hides the low-coverage end. Scores first, then the references.
    handles, labels = ax.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: handles[i].get_gid() == REFERENCE_GID)
    ax.legend(
        [handles[i] for i in order],
        [labels[i] for i in order],
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize="x-small",
    )
    return fig


def conformal_figure(rows: Sequence[dict], title: str | None = None):
    """Coverage against mean set size of conformal rows (:mod:`lm_eval_evidential.audits.conformal`), as a Figure.

    One point per evaluated set with its bootstrap intervals on both axes (where computed), labelled
    with the set's name and K; the dashed line is the target coverage 1 - alpha. A set below the line
    is under-covered, one to the right pays with larger sets. Rows of different K share the axes but
    not a meaning (set sizes compare only at equal K): their labels say their K. A bare Figure.
    """
    from matplotlib.figure import Figure

    if not rows:
        raise InvalidValueError("no conformal rows to plot")
    fig = Figure(figsize=(6.0, 4.5), layout="constrained")
    ax = fig.add_subplot()
    for i, r in enumerate(rows):
        x, y = r["mean_set_size"], r["coverage"]
        xerr = [[x - r["mean_set_size_ci"][0]], [r["mean_set_size_ci"][1] - x]]
        yerr = [[y - r["coverage_ci"][0]], [r["coverage_ci"][1] - y]]
        ok = all(v == v for v in (*r["mean_set_size_ci"], *r["coverage_ci"]))  # NaN CIs: no bars
        ax.errorbar(
            x,
            y,
            xerr=xerr if ok else None,
            yerr=yerr if ok else None,
            fmt="o",
            color=_SPARE_COLORS[i % len(_SPARE_COLORS)],
            label=f"{r['set']} ({r['role']}, K = {r['k']})",
        )
    alpha = rows[0]["alpha"]
    ax.axhline(1 - alpha, linestyle="--", color="grey", label=f"target 1 - alpha = {1 - alpha:g}")
    ax.set_xlabel("mean prediction-set size (options)")
    ax.set_ylabel("coverage (gold option in the set)")
    ax.set_title(title or f"Conformal sets ({rows[0]['method']}), calibrated on {rows[0]['calibration']}")
    ax.legend(loc="lower right", fontsize="small")
    return fig


def ood_groups_figure(rows: Sequence[dict], refused: Sequence[tuple[str, str]] = (), title: str | None = None):
    """AUROC and FPR@95 of the OpenOOD layout (:func:`lm_eval_evidential.audits.ood_groups.group_rows`) as bars,
    one panel each, a Figure.

    Per score (one colour each): a bar per OOD set and a hatched bar for its group's mean row, the sets of
    one group side by side and the groups apart; a set compared across K (``matched: false``) is drawn
    unfilled and named so, a refused set (``refused``: ``(group, set)``) has no bar and its label says
    "refused". The dashed line marks AUROC 0.5 (chance). Values as the rows hold them (x100 with ``percent``).
    """
    from matplotlib.figure import Figure

    if not rows:
        raise InvalidValueError("no OpenOOD rows to plot")
    scores = list(dict.fromkeys(r["score"] for r in rows))
    groups = list(dict.fromkeys([*(r["group"] for r in rows), *(g for g, _ in refused)]))
    slots: list[tuple[str, str, bool]] = []  # (group, set, is_mean) in drawing order
    for g in groups:
        sets = list(dict.fromkeys(r["set"] for r in rows if r["group"] == g and r["set"] != g))
        sets += [s for gg, s in refused if gg == g and s not in sets]
        slots += [(g, s, False) for s in sets] + [(g, g, True)]
    x, pos = [], 0.0
    for i, slot in enumerate(slots):
        x.append(pos)
        pos += 1.0 + (0.6 if slot[2] and i + 1 < len(slots) else 0.0)  # a gap after each group's mean
    by_slot = {(r["group"], r["set"], r["score"]): r for r in rows}
    refused_sets = {(g, s) for g, s in refused}
    scale = rows[0].get("scale", 1.0)
    fig = Figure(figsize=(max(6.0, 0.55 * len(slots) * max(len(scores), 1) + 2.0), 6.5), layout="constrained")
    width = 0.8 / max(len(scores), 1)
    fpr_label = f"FPR@95 ({rows[0].get('fpr95_positive', 'openood')})"
    for panel, (key, label) in enumerate((("auroc", "AUROC (ID positive)"), ("fpr95", fpr_label))):
        ax = fig.add_subplot(2, 1, panel + 1)
        labelled: set[str] = set()
        for j, score in enumerate(scores):
            offset = (j - (len(scores) - 1) / 2) * width
            for xi, (g, s, is_mean) in zip(x, slots):
                r = by_slot.get((g, s, score))
                if r is None or r[key] is None or r[key] != r[key]:
                    continue
                ax.bar(
                    xi + offset,
                    r[key],
                    width,
                    color=score_color(score, j) if r["matched"] else "none",
                    edgecolor="black" if is_mean else score_color(score, j),
                    hatch="//" if is_mean else None,
                    label=None if score in labelled else score,
                )
                labelled.add(score)
        if key == "auroc":
            ax.axhline(0.5 * scale, linestyle="--", color="grey", gid=REFERENCE_GID)
        ax.set_ylabel(label + (" x100" if scale != 1 else ""))
        ax.set_xticks(x)
        ax.set_xticklabels(
            [
                f"{s}\n(refused)"
                if (g, s) in refused_sets
                else f"{g} mean"
                if is_mean
                else s + ("" if all(r["matched"] for r in rows if r["set"] == s) else "\n(K not matched)")
                for g, s, is_mean in slots
            ],
            rotation=30,
            ha="right",
            fontsize="small",
        )
        if panel == 0:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="x-small")
    fig.suptitle(title or "OOD detection per set and group mean (hatched: mean over the K-matched sets)")
    return fig
