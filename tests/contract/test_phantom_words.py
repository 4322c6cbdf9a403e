"""Words that match the numbers: every sentence, axis label and caption that names a K-sweep phantom mode
is read back from rendered output (the figure, ``report.md``, the CLI's lines) and names the mode used."""

from __future__ import annotations

import numpy as np
import pytest

from lm_eval_evidential.audits.ood import ksweep_rows, sensitivity_lines
from lm_eval_evidential.metrics.cardinality import PHANTOM_MODES, phantom_options
from lm_eval_evidential.plots import ksweep_figure
from lm_eval_evidential.records import Records, make_record

META = {"method": "edl", "prior_weight": 1.0, "pretrained": "synthetic-llm", "phantom_count": 4}


def _records(task: str, n: int, shift: float, seed: int) -> Records:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        z = rng.normal(shift, 1.5, size=4)
        rows.append(
            make_record(
                task=task,
                doc_id=i,
                labels=list("ABCD"),
                gold=int(rng.integers(4)),
                logits=z,
                alpha=np.logaddexp(0.0, z) + 1.0,
                optional={"phantom_logits": rng.normal(shift - 1.0, 1.5, size=4)},
            )
        )
    return Records.from_rows(rows, task=task, meta=META)


@pytest.fixture(scope="module")
def pair():
    return _records("id4", 80, 1.0, 1), _records("ood4", 70, 0.0, 2)


def _others(mode: str) -> list[str]:
    return [m for m in PHANTOM_MODES if m != mode]


@pytest.mark.parametrize("mode", PHANTOM_MODES)
def test_the_figure_axis_and_the_cli_lines_name_the_mode_used(pair, mode):
    rows = ksweep_rows(*pair, max_extra=2, phantom=mode)
    fig = ksweep_figure(rows)
    labels = {ax.get_xlabel() for ax in fig.axes if ax.get_xlabel()}
    assert labels == {f"{phantom_options(mode, 2)} appended, x"}
    for other in _others(mode):
        assert phantom_options(other, 2) not in " ".join(labels)
    said = " ".join(sensitivity_lines(rows))
    assert phantom_options(mode) in said or phantom_options(mode, 2) in said
    assert not any(phantom_options(o) in said for o in _others(mode))


@pytest.mark.parametrize("mode", PHANTOM_MODES)
def test_the_report_summary_and_k_sweep_section_name_the_mode_used(pair, mode, tmp_path):
    from lm_eval_evidential.report import build_report

    build_report(pair[0], [pair[1]], tmp_path / "r", n_boot=0, max_extra=2, phantom=mode)
    md = (tmp_path / "r" / "report.md").read_text()
    summary = md.split("## Summary", 1)[1].split("\n## ", 1)[0]
    sweep = md.split("## K sweep", 1)[1].split("\n## ", 1)[0]
    assert f"one {phantom_options(mode)} appended to the OOD side" in summary  # the takeaway and the K artefact
    assert summary.count(f"one {phantom_options(mode)} appended") == 2
    written = phantom_options(mode, 2)
    assert f"{written[0].upper()}{written[1:]} (" in sweep
    for other in _others(mode):
        for words in (phantom_options(other), phantom_options(other, 2)):
            assert words not in summary and words not in sweep, (mode, words)


def test_an_ib_edl_report_says_implementation_a_is_not_computed_once_and_what_it_is(pair, tmp_path, capsys):
    """Not one screen-wide line per OOD task: one short line that says what Implementation A is."""
    import dataclasses

    from lm_eval_evidential.report import build_report

    ib = [dataclasses.replace(r, meta={**r.meta, "method": "ib_edl"}) for r in (*pair, _records("ood4b", 60, 0, 3))]
    report = build_report(ib[0], ib[1:], tmp_path / "r", n_boot=0, max_extra=1)
    (line,) = [s for s in report["skipped"] if "Implementation A" in s["section"]]
    assert "the published bug" in line["section"] and len(f"{line['section']}: {line['reason']}") <= 200
