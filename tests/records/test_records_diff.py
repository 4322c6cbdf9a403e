"""tools/records_diff.py, the before/after check of a change that must not move a number: the same records say so
(exit 0); a planted float difference is reported with its size, a metadata change by its key, and the keys that name
the run are ignored."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("_records_diff", ROOT / "tools" / "records_diff.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _write(folder: Path, logits, meta: dict, task: str = "obqa_edl") -> Path:
    table = pa.table({"doc_id": [0, 1], "logits": pa.array(logits, pa.list_(pa.float32())), "pred": [1, 0]})
    table = table.replace_schema_metadata({b"lm_eval_evidential": json.dumps(meta).encode()})
    path = folder / "model" / f"records_{task}_2026-01-01T00-00-00.1.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return folder


def test_the_same_records_pass_and_each_planted_difference_is_named(tmp_path, capsys):
    tool = _tool()
    meta = {"date_id": "a", "adapter_sha256": "x", "method": "edl", "data_source": {"origin": "mirror /one/samples"}}
    logits = [[1.0, 2.0, 3.0, 4.0], [0.5, float("nan"), 1.5]]
    before = _write(tmp_path / "before", logits, meta)
    renamed = {**meta, "date_id": "b", "adapter_sha256": "y", "data_source": {"origin": "mirror /two/samples"}}
    same = _write(tmp_path / "same", logits, renamed)
    assert tool.main([str(before), str(same), "--paths", "/one/,/two/"]) == 0
    assert "the same records: 1 tasks" in capsys.readouterr().out
    assert tool.differences(before, same) == [  # without --paths the checkout's folder is a difference
        "obqa_edl: metadata .data_source.origin: 'mirror /one/samples' != 'mirror /two/samples'"
    ]
    moved = [[1.0, 2.0, 3.0, 4.0 + 2**-21], [0.5, float("nan"), 1.5]]  # one float32 ulp of 4.0 is 2**-21
    changed = _write(tmp_path / "changed", moved, {**meta, "method": "ib_edl"})
    assert tool.main([str(before), str(changed)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"obqa_edl: column logits: max |difference| {2**-21:.3g}",
        "obqa_edl: metadata .method: 'edl' != 'ib_edl'",
    ]
    shifted = _write(tmp_path / "shifted", [[1.0, 2.0, 3.0], [4.0, 0.5, float("nan"), 1.5]], meta)
    assert tool.differences(before, shifted) == ["obqa_edl: column logits: list lengths differ"]
    _write(tmp_path / "more", logits, meta, task="arc_c_edl")
    assert tool.differences(before, tmp_path / "more") == [
        f"arc_c_edl: only in {tmp_path / 'more'}",
        f"obqa_edl: only in {before}",
    ]
