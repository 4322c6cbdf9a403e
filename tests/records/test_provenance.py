"""Audit commands refuse to pair records from different producers (model, adapter, method, …)."""

from __future__ import annotations

import numpy as np

from lm_eval_evidential.cli import main
from lm_eval_evidential.records import Records, make_record, records_path, write_records
from lm_eval_evidential.records.provenance import differences

DATE = "2026-03-01T00-00-00.000001"
BASE = {
    "method": "edl",
    "prior_weight": 1.0,
    "pretrained": "base",
    "peft": "ckpt",
    "adapter_sha256": "abc",
    "dtype": "float32",
    "prompt_template_sha256": "t1",
    "answer_token_ids": {" A": 5, " B": 6, " C": 7, " D": 8},
}


def write(out, task, meta, seed, k=4, n=40):
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        z = rng.normal(size=k)
        rows.append(
            make_record(
                task=task,
                doc_id=i,
                labels="ABCDE"[:k],
                gold=int(rng.integers(k)),
                logits=z,
                alpha=np.logaddexp(0, z) + 1,
            )
        )
    write_records(records_path(out / "model", task, DATE), Records.from_rows(rows, task=task, meta=meta))


def test_differences_ignore_task_keys_and_compare_common_answer_ids():
    a = {**BASE, "task": "x", "answer_tokens": [" A", " B", " C", " D"]}
    b = {
        **BASE,
        "task": "y",
        "answer_tokens": list(" A B C D E".split(" ")),
        "answer_token_ids": {**BASE["answer_token_ids"], " E": 9},
    }
    assert differences(a, b) == {}
    assert differences(a, {**a, "seed": 3}) == {"seed": (None, 3)}


def test_ood_refuses_records_from_another_adapter(tmp_path, capsys):
    write(tmp_path, "id_t", BASE, 0)
    write(tmp_path, "ood_t", {**BASE, "adapter_sha256": "zzz", "method": "ib_edl"}, 1)
    code = main(["ood", str(tmp_path), "--id", "id_t", "--ood", "ood_t", "--n-boot", "0"])
    err = capsys.readouterr().err
    assert code == 2  # refused (cli.main's map), not an error
    assert "adapter_sha256: id_t='abc' vs ood_t='zzz'" in err and "method: id_t='edl' vs ood_t='ib_edl'" in err
    assert "--allow-fingerprint-mismatch" in err
    code = main(
        ["ood", str(tmp_path), "--id", "id_t", "--ood", "ood_t", "--n-boot", "0", "--allow-fingerprint-mismatch"]
    )
    assert code == 0
    assert "warning: fingerprint differs: adapter_sha256" in capsys.readouterr().err


def test_same_producer_is_accepted(tmp_path):
    write(tmp_path, "id_t", {**BASE, "answer_tokens": [" A", " B", " C", " D"]}, 0)
    write(tmp_path, "ood_t", {**BASE, "answer_tokens": [" A", " B", " C", " D", " E"]}, 1)
    assert main(["ksweep", str(tmp_path), "--id", "id_t", "--ood", "ood_t", "--max-extra", "2"]) == 0


def test_records_of_two_runs_are_never_mixed(tmp_path, capsys):
    old, new = "2026-01-01T00-00-00.000001", "2026-02-01T00-00-00.000001"
    for date, tasks in ((old, ("id_t", "ood_t")), (new, ("id_t",))):
        for i, task in enumerate(tasks):
            rng = np.random.default_rng(i)
            rows = [
                make_record(task=task, doc_id=j, labels="ABCD", gold=0, logits=z, alpha=np.logaddexp(0, z) + 1)
                for j, z in enumerate(rng.normal(size=(30, 4)))
            ]
            write_records(records_path(tmp_path / "m", task, date), Records.from_rows(rows, task=task, meta=BASE))
    # the newest run lacks ood_t: the newest run with BOTH is used, and the choice is said
    assert main(["ood", str(tmp_path), "--id", "id_t", "--ood", "ood_t", "--n-boot", "0"]) == 0
    assert f"using run {old} for id_t, ood_t" in capsys.readouterr().err
    # asking for a run that lacks a task is an error naming it
    assert main(["ood", str(tmp_path), "--id", "id_t", "--ood", "ood_t", "--run", new]) == 1
    assert "has no records for ['ood_t']" in capsys.readouterr().err
