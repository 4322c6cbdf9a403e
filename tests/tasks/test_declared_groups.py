"""OpenOOD groups declared in the pair tasks' metadata (``metadata.ood_group``), read by ``ood`` and ``report``
through ``--groups-from``: the shipped groups, a user's folder, and every refusal."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lm_eval_evidential.records import records_path, write_records
from lm_eval_evidential.tasks import tasks_dir
from lm_eval_evidential.tasks.declared_groups import declared_groups, task_configs
from tests.audits.test_ood_groups import _records  # synthetic EDL records of one task
from tests.audits.test_quality import cli as _cli  # in-process: (status, stdout, stderr)

NEAR = ["arc_c_edl", "arc_e_edl", "csqa4_edl", "arc_c_k4_edl", "arc_e_k4_edl", "csqa_k4_edl"]
DATE = "2026-11-21T20-15-03.123456"


def test_the_shipped_group_declares_arc_and_csqa_near_and_mmlu_math_far():
    groups, notes = declared_groups("obqa_edl_ood", "obqa_edl", [tasks_dir()])
    assert groups == {"near": NEAR, "far": ["mmlu_math_edl"]} and notes == []
    assert declared_groups("obqa_edl_vs_mmlu_math_edl", "obqa_edl", [tasks_dir()])[0] == {"far": ["mmlu_math_edl"]}
    views, notes = declared_groups("obqa_edl_ood_views", "obqa_edl", [tasks_dir()])
    assert views == {"near": ["sciq_edl"]} and notes == [
        "obqa_edl_vs_hellaswag_edl: no metadata.ood_group, so hellaswag_edl is in no group"
    ]
    # every shipped pair says where its OOD task lies, but hellaswag (said why in its YAML)
    pairs = {c["task"]: c["metadata"] for _, c in task_configs([tasks_dir()]) if "ood_task" in c.get("metadata", {})}
    assert {t for t, m in pairs.items() if "ood_group" not in m} == {"obqa_edl_vs_hellaswag_edl"}


def _pair(folder, name, id_task, ood_task, group=None):
    meta = f"metadata:\n  id_task: {id_task}\n  ood_task: {ood_task}\n" + (f"  ood_group: {group}\n" if group else "")
    (folder / f"{name}.yaml").write_text(f"task: {name}\nclass: !function utils.OODPairTask\n{meta}")


def test_a_users_folder_and_each_refusal(tmp_path):
    _pair(tmp_path, "a_vs_b", "a", "b", "near")
    _pair(tmp_path, "a_vs_c", "a", "c")
    _pair(tmp_path, "x_vs_c", "x", "c", "far")
    _pair(tmp_path, "a_vs_d", "a", "d", "middle")
    (tmp_path / "mine.yaml").write_text("group: mine\ntask:\n  - a\n  - a_vs_b\n  - a_vs_c\n")
    (tmp_path / "none.yaml").write_text("group: none\ntask:\n  - a_vs_c\n")
    assert declared_groups("mine", "a", [tmp_path]) == (
        {"near": ["b"]},
        ["a_vs_c: no metadata.ood_group, so c is in no group"],
    )
    for name, id_task, match in (
        ("x_vs_c", "a", "pair x_vs_c compares x with c, not --id a"),
        ("a_vs_d", "a", "ood_group 'middle'; an OOD group is one of near, far"),
        ("none", "a", "declares no OOD group"),
        ("nowhere", "a", "no task or group of that name"),
    ):
        with pytest.raises(ValueError, match=match):
            declared_groups(name, id_task, [tmp_path])


def test_groups_from_gives_the_table_of_the_same_near_far(tmp_path, capsys):
    """Records named like the shipped tasks: ``--groups-from obqa_edl_ood`` is ``--near <its near> --far <its
    far>``, in ``ood`` and in ``report`` alike; ARC's mixed K is refused under assert and kept under restrict."""
    out = tmp_path / "out"
    rng = np.random.default_rng(0)
    for i, task in enumerate(["obqa_edl", *NEAR, "mmlu_math_edl"]):
        ks = rng.choice([3, 4, 5], size=30) if task in ("arc_c_edl", "arc_e_edl") else [4] * 30
        write_records(records_path(out / "m", task, DATE), _records(task, ks, 1.0 - 0.2 * i, i))
    by_name = ["--near", ",".join(NEAR), "--far", "mmlu_math_edl"]
    for policy, status in (("assert", 2), ("restrict", 0)):
        argv = ["ood", out, "--id", "obqa_edl", "--scores", "max_prob", "--k-policy", policy]
        rc, _, err = _cli([*argv, "--groups-from", "obqa_edl_ood", "--json", tmp_path / "a.json"], capsys)
        assert rc == status, err
        rc, _, _ = _cli([*argv, *by_name, "--json", tmp_path / "b.json"], capsys)
        assert rc == status
        assert json.loads((tmp_path / "a.json").read_text()) == json.loads((tmp_path / "b.json").read_text())
    rows = json.loads((tmp_path / "a.json").read_text())
    assert [r["set"] for r in rows if r["group"] == "far"] == ["mmlu_math_edl", "far"]
    fast = ["--scores", "max_prob", "--n-boot", "0", "--max-extra", "0", "--k-policy", "restrict"]
    rc, _, err = _cli(
        ["report", out, "--id", "obqa_edl", "--groups-from", "obqa_edl_ood", "--out", tmp_path / "r", *fast], capsys
    )
    assert rc == 0, err
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["ood_groups"]["groups"] == {"near": NEAR, "far": ["mmlu_math_edl"]}
    assert report["ood_groups"]["rows"] == rows
    rc, _, err = _cli(["ood", out, "--id", "obqa_edl", "--groups-from", "obqa_edl_ood", "--near", "csqa4_edl"], capsys)
    assert rc == 1 and "give --groups-from or --near/--far" in err
