"""Figures read at a glance: counts on reliability bars, zero-accuracy bins visible, the few scores that
matter in distinct colours, axis labels that say what grows."""

from __future__ import annotations

import matplotlib.colors as mcolors
import numpy as np
import pytest
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from lm_eval_evidential import plots
from lm_eval_evidential.metrics.calibration import reliability_diagram
from lm_eval_evidential.metrics.scores import OOD_DEFAULT_SCORES, SCORES
from lm_eval_evidential.records import Records, make_record


def _records(n=60, k=4, seed=0, task="t") -> Records:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        z = rng.normal(0.0, 1.5, size=k)
        rows.append(
            make_record(
                task=task,
                doc_id=i,
                labels=list("ABCD"[:k]),
                gold=int(rng.integers(k)),
                logits=z,
                alpha=np.logaddexp(0.0, z) + 1.0,
            )
        )
    return Records.from_rows(rows, task=task, meta={"method": "edl", "prior_weight": 1.0})


def test_reliability_bars_carry_their_counts_and_zero_accuracy_bins_stay_visible():
    conf = np.array([0.31, 0.32, 0.33, 0.55, 0.56, 0.91])
    correct = np.array([False, False, False, True, False, True])  # the 0.3 bin: 3 examples, accuracy 0
    diagram = reliability_diagram(conf, correct, n_bins=10)
    fig = plots.plot_reliability_diagram(diagram)
    ax = fig.axes[0]
    assert sorted(t.get_text() for t in ax.texts) == sorted(str(int(n)) for n in diagram["counts"] if n > 0)
    # Something with height > 0 is drawn over the zero-accuracy bin [0.3, 0.4): the gap box to its confidence.
    boxes = [p for p in ax.patches if isinstance(p, Rectangle) and np.isclose(p.get_x(), 0.3) and p.get_height() > 0]
    assert boxes and max(b.get_y() + b.get_height() for b in boxes) == np.float64(diagram["mean_confidence"][3])
    # Zoomed to the bins that hold examples (one empty bin of margin each side), not [0, 1].
    assert ax.get_xlim() == (0.2, 1.0) or np.allclose(ax.get_xlim(), (0.2, 1.0))
    assert "confidence" in ax.get_xlabel() and "examples" in ax.get_ylabel()


def test_reliability_figure_has_one_legend_for_all_panels(tmp_path):
    recs = {"a": _records(seed=1), "b": _records(seed=2)}
    paths = plots.save_reliability_figure(recs, tmp_path / "rel")
    assert [p.suffix for p in paths] == [".png", ".svg"]
    svg = paths[1].read_text()
    assert svg.count("gap to mean confidence") == 1


def test_every_score_has_its_own_colour_unlike_the_reference_lines():
    assert set(plots.SCORE_COLORS) == set(SCORES)
    rgb = [mcolors.to_rgb(c) for c in plots.SCORE_COLORS.values()]
    assert len(set(rgb)) == len(rgb)
    for r, g, b in rgb:  # no grey or black (the oracle, random and perfect-calibration lines)
        assert max(r, g, b) - min(r, g, b) > 0.15


def test_risk_coverage_defaults_to_the_few_scores_and_merges_identical_curves(tmp_path, monkeypatch):
    rec = _records(n=80)
    drawn: list[Figure] = []
    real_save = plots.save_figure
    monkeypatch.setattr(plots, "save_figure", lambda fig, path: drawn.append(fig) or real_save(fig, path))
    plots.save_risk_coverage_figure(rec, tmp_path / "rc")
    labels = [t.get_text() for t in drawn[-1].axes[0].get_legend().get_texts()]
    scores = [lab.split(" (AURC")[0] for lab in labels if not lab.startswith(("oracle", "random"))]
    assert scores == list(OOD_DEFAULT_SCORES)
    colours = {line.get_label().split(" (AURC")[0]: line.get_color() for line in drawn[-1].axes[0].lines}
    assert all(colours[s] == plots.SCORE_COLORS[s] for s in scores)
    # With one K, strength ranks exactly like reciprocal vacuity: one line, both names.
    plots.save_risk_coverage_figure(rec, tmp_path / "rc2", scores=["reciprocal_vacuity", "strength", "max_prob"])
    labels = [t.get_text() for t in drawn[-1].axes[0].get_legend().get_texts()]
    assert any(lab.startswith("reciprocal_vacuity = strength (AURC") for lab in labels)
    assert not any(lab.startswith("strength (AURC") for lab in labels)


def test_ksweep_axis_says_what_grows(tmp_path, monkeypatch):
    from lm_eval_evidential.audits.ood import ksweep_rows

    rows = ksweep_rows(_records(seed=3), _records(seed=4, task="o"), max_extra=2)
    drawn: list[Figure] = []
    monkeypatch.setattr(plots, "save_figure", lambda fig, path: drawn.append(fig) or [])
    plots.plot_ksweep(rows, tmp_path / "k", title="t → o")
    fig = drawn[0]
    assert all(ax.get_xlabel() == "zero-evidence options appended, x" for ax in fig.axes)
    title = fig.get_suptitle()
    assert (
        "OOD-only: $K_{OOD}$ = 4 + x while $K_{ID}$ stays" in title and "matched: $K_{ID}$ = $K_{OOD}$ = 4 + x" in title
    )
    assert sorted({line.get_xdata()[-1] for line in fig.axes[0].lines}) == [2]


# ---- figures as a reader sees them: rendered, legends inside the canvas, nothing hidden


def _rendered(fig, dpi=150):
    """Draw ``fig`` as save_figure writes it (Agg, 150 dpi, constrained layout); the renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig.set_dpi(dpi)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def _ksweep_rows():
    from lm_eval_evidential.audits.ood import ksweep_rows

    return ksweep_rows(_records(seed=3), _records(seed=4, task="o"), max_extra=2)


FIGURES = {
    "reliability, one task": lambda: plots.reliability_figure({"a": _records(seed=1)}),
    "reliability, two tasks": lambda: plots.reliability_figure({"a": _records(seed=1), "b": _records(seed=2)}),
    "reliability, four tasks": lambda: plots.reliability_figure(
        {t: _records(seed=i, task=t) for i, t in enumerate("abcd")}
    ),
    "risk-coverage": lambda: plots.risk_coverage_figure(_records(n=80)),
    "risk-coverage, every score": lambda: plots.risk_coverage_figure(
        _records(n=80), scores=[n for n, spec in SCORES.items() if not spec.needs_members]
    ),
    "K sweep": lambda: plots.ksweep_figure(_ksweep_rows(), title="t → o"),
}


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_every_legend_lies_inside_the_rendered_canvas(name):
    fig = FIGURES[name]()
    renderer = _rendered(fig)
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]
    assert legends, name
    canvas = fig.bbox
    for legend in legends:
        box = legend.get_window_extent(renderer)
        assert box.x0 >= canvas.x0 - 0.5 and box.x1 <= canvas.x1 + 0.5, (name, box, canvas)
        assert box.y0 >= canvas.y0 - 0.5 and box.y1 <= canvas.y1 + 0.5, (name, box, canvas)


def test_reliability_points_sit_at_the_bins_mean_confidence_not_their_centre():
    conf = np.array([0.31, 0.32, 0.39, 0.52, 0.58, 0.91])
    correct = np.array([False, True, True, True, False, True])
    diagram = reliability_diagram(conf, correct, n_bins=10)
    ax = plots.plot_reliability_diagram(diagram).axes[0]
    (points,) = [line for line in ax.lines if line.get_label() == "accuracy at mean confidence"]
    filled = np.asarray(diagram["counts"]) > 0
    np.testing.assert_allclose(points.get_xdata(), np.asarray(diagram["mean_confidence"])[filled])
    np.testing.assert_allclose(points.get_ydata(), np.asarray(diagram["accuracy"])[filled])
    # A calibrated bin's point lies on the diagonal: accuracy 1 at mean confidence 0.91 is 0.09 above it.
    assert np.isclose(points.get_xdata()[-1], 0.91) and points.get_ydata()[-1] == 1.0


def test_risk_coverage_legend_lists_the_scores_then_oracle_and_random():
    fig = plots.risk_coverage_figure(_records(n=80), scores=["reciprocal_vacuity", "max_prob", "neg_norm_entropy"])
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert [lab.split(" (")[0] for lab in labels] == [
        "reciprocal_vacuity",
        "max_prob",
        "neg_norm_entropy",
        "oracle",
        "random",
    ]


def test_ksweep_a_line_under_another_stays_visible_as_a_wider_border():
    """Every score reaches AUROC 1.0 once the OOD side has a zero-evidence option, so the lines coincide:
    each earlier score is drawn wider (line and marker) and below the later ones."""
    fig = plots.ksweep_figure(_ksweep_rows())
    solid = [line for line in fig.axes[0].lines if line.get_linestyle() == "-"]
    by_score = {line.get_label().split(" (")[0]: line for line in solid}
    first, *rest = [by_score[s] for s in OOD_DEFAULT_SCORES]
    for later in rest:
        assert first.get_linewidth() > later.get_linewidth() and first.get_markersize() > later.get_markersize()
        assert first.get_zorder() < later.get_zorder()


def test_thin_curve_keeps_short_curves_and_each_runs_first_lowest_highest_and_last_point():
    x = np.arange(10) / 10
    y = np.sin(x)
    assert all(a is b for a, b in zip(plots.thin_curve(x, y, max_points=10), (x, y)))
    rng = np.random.default_rng(0)
    n = 100_003
    x, y = np.arange(1, n + 1) / n, np.cumsum(rng.random(n) < 0.3) / np.arange(1, n + 1)
    tx, ty = plots.thin_curve(x, y, max_points=400)
    assert tx.size <= 400 and (tx[0], ty[0], tx[-1], ty[-1]) == (x[0], y[0], x[-1], y[-1])
    assert (np.diff(tx) > 0).all() and np.isin(tx, x).all() and (y[np.searchsorted(x, tx)] == ty).all()
    edges = np.linspace(0, n, 101).astype(int)
    for lo, hi in zip(edges[:-1], edges[1:]):  # each run's extremes are among the points kept
        kept = ty[(tx >= x[lo]) & (tx <= x[hi - 1])]
        assert kept.min() == y[lo:hi].min() and kept.max() == y[lo:hi].max()


def test_a_thinned_risk_coverage_curve_draws_the_same_picture():
    """200,000 examples: every inked pixel of the figure drawn from the thinned curves lies within one pixel of
    ink in the figure drawn from every point, and the other way round (only the anti-aliased shade of the
    line's edges differs). Keeping every 50th point instead loses the low-coverage end's spikes and fails this;
    the legend's AURC is the whole curve's either way."""
    import io

    from matplotlib.image import imread

    rng = np.random.default_rng(1)
    n = 200_000
    correct = rng.random(n) < 0.7
    score = rng.normal(size=n) + correct

    def ink(thin):
        saved, plots.thin_curve = plots.thin_curve, thin
        try:
            fig = plots.plot_risk_coverage(score, correct, label="s")
        finally:
            plots.thin_curve = saved
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=150)
        return (1 - imread(io.BytesIO(buf.getvalue()))[..., :3].min(axis=2)) > 0.5

    def within_a_pixel(mask):
        grown = mask.copy()
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                grown |= np.roll(np.roll(mask, dy, 0), dx, 1)
        return grown

    every, thinned = ink(lambda x, y: (x, y)), ink(plots.thin_curve)
    assert every.shape == thinned.shape and every.sum() > 1000
    assert not (every & ~within_a_pixel(thinned)).any() and not (thinned & ~within_a_pixel(every)).any()
    assert plots.thin_curve(np.arange(n), np.arange(n))[0].size <= plots.MAX_CURVE_POINTS
