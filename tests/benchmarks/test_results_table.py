"""benchmarks/README.md's table is what benchmarks/results_table.py makes of the committed records, and the
shared measuring module writes records that table reads (benchmarks/measure.py)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def table():
    return _module("results_table")


@pytest.fixture(scope="module")
def measure():
    return _module("measure")


def test_the_readme_table_is_the_records_table(table):
    records = table.load_records()
    assert {r["benchmark"] for r in records} >= {"bench_audit", "bench_throughput", "bench_train"}
    readme = table.README.read_text(encoding="utf-8")
    assert table.readme_table(readme) == table.render(records), "run python benchmarks/results_table.py --write"
    proc = subprocess.run([sys.executable, str(BENCH / "results_table.py"), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_every_record_says_command_shape_machine_load_and_when(table):
    for r in table.load_records():
        assert r["command"].startswith("python benchmarks/"), r["benchmark"]
        script = r["command"].split()[1]
        assert (ROOT / script).is_file(), script
        assert r["shape"] and r["measured"][:4].isdigit() and r["source"]
        assert table._load(r) != "not recorded", r["benchmark"]
        assert r["figures"] and all(isinstance(f["value"], int | float) for f in r["figures"])


def test_the_readme_says_which_scripts_write_their_records(table):
    """A script that writes its record calls measure.write_result; the README names each script on the side it is."""
    text = " ".join(table.README.read_text(encoding="utf-8").split())
    writing = text.split("Writing their own records")[1].split("Printing only")[0]
    printing = text.split("Printing only")[1].split("## ")[0]
    for script in sorted(BENCH.glob("*.py")):
        if script.name in ("measure.py", "results_table.py"):
            continue
        writes = "write_result(" in script.read_text(encoding="utf-8")
        assert f"`{script.name}`" in (writing if writes else printing), script.name


def test_a_changed_record_is_caught(table, tmp_path):
    records = table.load_records()
    readme = table.README.read_text(encoding="utf-8")
    records[0]["figures"][0]["value"] += 1
    assert table.readme_table(readme) != table.render(records)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"benchmark": "x", "command": "python benchmarks/x.py"}))
    with pytest.raises(ValueError, match="bad.json: no shape"):
        table.load_records(tmp_path)


def test_a_written_record_renders_with_the_machine_and_its_load(measure, table, tmp_path):
    timer = measure.Timer()
    with timer.part("sleep"):
        time.sleep(0.02)
    timer.call("sleep", time.sleep, 0.02)
    assert timer.wall["sleep"] >= 0.04 and timer.cpu["sleep"] < timer.wall["sleep"]
    probe = measure.PeakMemory()
    probe.reset()
    block = bytearray(64 * 2**20)
    block[::4096] = b"x" * len(block[::4096])  # touch every page: resident, not just reserved
    added = probe.read()
    del block
    assert added >= 32 * 2**20, (probe.method, added)
    figures = [{"what": "sleep", "value": round(timer.wall["sleep"], 3), "unit": "s"}]
    path = measure.write_result(
        "bench_x",
        command="python benchmarks/bench_x.py",
        shape="two sleeps",
        figures=figures,
        path=tmp_path / "bench_x.json",
    )
    record = json.loads(path.read_text())
    assert record["machine"]["cpus"] >= 1 and len(record["machine"]["load_average"]) == 3
    rendered = table.render(table.load_records(tmp_path))
    assert "`bench_x`" in rendered and "two sleeps" in rendered and "| sleep |" in rendered
    with pytest.raises(ValueError, match="lacks"):
        measure.write_result("bench_x", command="c", shape="s", figures=[{"what": "w"}], path=tmp_path / "y.json")
