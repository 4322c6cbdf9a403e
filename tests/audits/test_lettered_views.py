"""Every audit takes two lettered views of one run (the harness's leaderboards, with evidence); a view
against this package's own task is refused naming the template difference; a view and this package's
task on the same rows are refused as the same questions.

One run of the tiny model over lm-eval's own stock task configs (openbookqa, arc_easy, arc_challenge:
their YAML files, indexed alone) through the bundled offline mirror, and this package's obqa_edl and
arc_c_edl beside them, written as ``lm_eval --output_path`` writes them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lm_eval_evidential.cli.main import EXIT_ERROR, EXIT_OK, EXIT_REFUSED, build_parser, main

VIEWS = ["openbookqa_edl", "arc_easy_edl", "arc_challenge_edl"]
SHIPPED = ["obqa_edl", "arc_c_edl"]


@pytest.fixture(scope="module")
def run_dir(tiny_model, tiny_adapter, tmp_path_factory):
    import os

    import lm_eval
    import lm_eval.tasks

    from lm_eval_evidential.harness.model import EvidentialLM
    from lm_eval_evidential.integration.run_output import write_run_records
    from lm_eval_evidential.tasks import tasks_dir
    from lm_eval_evidential.testing.tiny import sample_data_dir

    stock_dir = Path(lm_eval.tasks.__file__).parent
    configs = tmp_path_factory.mktemp("stock_configs")
    for name in ("openbookqa/openbookqa.yaml", "arc/arc_easy.yaml", "arc/arc_challenge.yaml"):
        shutil.copy(stock_dir / name, configs / Path(name).name)
    before = os.environ.get("EVIDENTIAL_DATA_DIR")
    os.environ["EVIDENTIAL_DATA_DIR"] = str(sample_data_dir())
    try:
        manager = lm_eval.tasks.TaskManager(include_path=[str(tasks_dir()), str(configs)], include_defaults=False)
        tasks = manager.load([*VIEWS, *SHIPPED])["tasks"]
        results = lm_eval.simple_evaluate(
            model=EvidentialLM(
                pretrained=str(tiny_model), peft=str(tiny_adapter), device="cpu", dtype="float32", batch_size=8
            ),
            tasks=list(tasks.values()),
            bootstrap_iters=0,
            limit=40,
        )
        # The same views shown in every cyclic order of their options, in a folder of their own (the order audit).
        permuted_manager = lm_eval.tasks.TaskManager(
            include_path=[str(tasks_dir()), str(configs)],
            include_defaults=False,
            metadata={"permutations": "cyclic"},
        )
        permuted = lm_eval.simple_evaluate(
            model=EvidentialLM(
                pretrained=str(tiny_model), peft=str(tiny_adapter), device="cpu", dtype="float32", batch_size=8
            ),
            tasks=list(permuted_manager.load(VIEWS[:2])["tasks"].values()),
            bootstrap_iters=0,
            limit=10,
        )
    finally:
        if before is None:
            os.environ.pop("EVIDENTIAL_DATA_DIR", None)
        else:
            os.environ["EVIDENTIAL_DATA_DIR"] = before
    out = tmp_path_factory.mktemp("views_run") / "out"
    write_run_records(out / "tiny", results.records)
    write_run_records(out.parent / "orders" / "tiny", permuted.records)
    return out


def test_the_run_holds_views_and_shipped_tasks(run_dir):
    from lm_eval_evidential.records.loading import load_run

    run = load_run(run_dir, VIEWS, allow_fingerprint_mismatch=False)
    assert {run[t].meta["lettered_view"]["stock_task"] for t in VIEWS} == {t[: -len("_edl")] for t in VIEWS}


def _audits(out: Path, tmp: Path) -> dict[str, list[str]]:
    """One command per audit, comparing two (or three) lettered views of one run."""
    views = ",".join(VIEWS)
    return {
        "ood": [
            "ood",
            str(out),
            "--id",
            "openbookqa_edl",
            "--ood",
            "arc_easy_edl,arc_challenge_edl",
            "--k-policy",
            "restrict",
            "--n-boot",
            "20",
        ],  # fmt: skip
        "ksweep": [
            "ksweep",
            str(out),
            "--id",
            "openbookqa_edl",
            "--ood",
            "arc_challenge_edl",
            "--k-policy",
            "restrict",
        ],
        "report": [
            "report",
            str(out),
            "--id",
            "openbookqa_edl",
            "--ood",
            "arc_easy_edl,arc_challenge_edl",
            "--k-policy",
            "restrict",
            "--out",
            str(tmp / "report"),
        ],  # fmt: skip
        "tables": ["tables", str(out), "--id", "openbookqa_edl", "--ood", "arc_easy_edl,arc_challenge_edl"],
        "selective": ["selective", str(out), "--task", views],
        "calibration": ["calibration", str(out), "--task", views],
        "atc": ["atc", str(out), "--id", "openbookqa_edl", "--target", "arc_easy_edl,arc_challenge_edl"],
        "orders": ["orders", str(out), "--task", views],
        "conformal": [
            "conformal",
            str(out),
            "--id",
            "openbookqa_edl",
            "--ood",
            "arc_easy_edl,arc_challenge_edl",
            "--k-policy",
            "restrict",
            "--n-boot",
            "20",
        ],  # fmt: skip
        "permutations": [
            "permutations",
            str(out.parent / "orders"),  # the views' permuted run
            "--task",
            "openbookqa_edl",
            "--id",
            "openbookqa_edl",
            "--ood",
            "arc_easy_edl",
            "--k-policy",
            "restrict",
        ],
        "temperature": [
            "temperature",
            str(out),
            "--id",
            "openbookqa_edl",
            "--ood",
            "arc_easy_edl,arc_challenge_edl",
            "--k-policy",
            "restrict",
        ],  # fmt: skip
    }


def test_every_audit_command_has_a_case_here(tmp_path):
    """An audit is a subcommand that reads an lm_eval output folder; each must be run on two views below."""
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    audits = {
        name
        for name, p in sub.choices.items()
        if any(a.dest == "output_path" and not a.option_strings for a in p._actions)
    }
    missing = audits - set(_audits(tmp_path, tmp_path))
    assert not missing, f"add a two-views case for {sorted(missing)} to {__file__}"


@pytest.mark.parametrize("audit", list(_audits(Path("."), Path("."))))
def test_every_audit_compares_two_lettered_views_of_one_run(audit, run_dir, tmp_path, capsys):
    argv = _audits(run_dir, tmp_path)[audit]
    assert main(argv) == EXIT_OK, capsys.readouterr().err
    captured = capsys.readouterr()
    assert "different models or settings" not in captured.err and "fingerprint differs" not in captured.err
    said = captured.out + captured.err + "".join(p.read_text() for p in tmp_path.rglob("*.md"))
    for task in {a for arg in argv[2:] for a in arg.split(",") if a.endswith("_edl")}:
        assert task in said, f"{audit} did not name {task}"


def test_a_view_against_a_shipped_task_is_refused_naming_the_template_difference(run_dir, capsys):
    assert main(["ood", str(run_dir), "--id", "obqa_edl", "--ood", "arc_challenge_edl", "--k-policy", "restrict"]) == (
        EXIT_REFUSED
    )
    err = capsys.readouterr().err
    assert "different prompt templates" in err and "different models or settings" not in err
    assert "arc_challenge_edl is the lettered view of the stock task 'arc_challenge'" in err
    assert "obqa_edl has its own prompt template" in err
    assert "re-run the tasks together" not in err  # they were run together: re-running changes nothing


def test_a_view_and_the_shipped_task_on_its_rows_are_the_same_questions(run_dir, capsys):
    """arc_c_edl and arc_challenge_edl ask the same ARC-Challenge rows in two forms: under
    --allow-fingerprint-mismatch they would compare at an AUROC near 0.5, so they are refused."""
    argv = ["ood", str(run_dir), "--id", "arc_c_edl", "--ood", "arc_challenge_edl", "--allow-fingerprint-mismatch"]
    assert main([*argv, "--k-policy", "report"]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert "ask the same questions in two forms" in err and "allenai/ai2_arc" in err
    assert main(
        ["ood", str(run_dir), "--id", "obqa_edl", "--ood", "openbookqa_edl", "--allow-fingerprint-mismatch"]
    ) == (EXIT_ERROR)
    assert "ask the same questions in two forms" in capsys.readouterr().err
