"""The audits' typed rows and their one table renderer (lm_eval_evidential.audits.table)."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import pickle

import pytest

from lm_eval_evidential.audits.ood import OOD_ROW_KEYS, OODRow
from lm_eval_evidential.audits.table import FORMATS, Column, column, rows_markdown, rows_text
from lm_eval_evidential.files import write_json

NAN = float("nan")


def _ood_row(**change) -> OODRow:
    row = {
        "id_task": "obqa_edl",
        "ood_task": "csqa_edl",
        "score": "max_prob",
        "k_id": 4,
        "k_ood": {4: 3, 5: 9},
        "n_id": 12,
        "n_ood": 12,
        "n_dropped": {"id": 0, "ood": 2},
        "matched": False,
        "auroc": 0.61234,
        "auroc_ci": [0.5, 0.72349],
        "aupr_in": -1e-9,
        "aupr_in_ci": [NAN, NAN],
        "aupr_out": NAN,
        "fpr95": 0.25,
        "aupr_baseline": 0.5,
        "forced_k": None,
        "phantom": None,
    }
    return OODRow(**{**row, **change})


def test_every_field_of_a_row_declares_its_column_once():
    for f in dataclasses.fields(OODRow):
        assert f.metadata["header"] and f.metadata["format"] in FORMATS, f.name
    assert OODRow.columns("auroc", "score") == (Column("auroc", "AUROC", "value"), Column("score", "score", "value"))
    assert [c.key for c in OODRow.columns()] == list(OOD_ROW_KEYS)
    with pytest.raises(KeyError, match="no column nope"):
        OODRow.columns("nope")


def test_a_row_reads_as_the_dict_it_replaces_and_is_frozen(tmp_path):
    row = _ood_row()
    assert tuple(row) == OOD_ROW_KEYS and row["auroc"] == row.auroc and len(row) == len(OOD_ROW_KEYS)
    assert {**row}["n_dropped"] == {"id": 0, "ood": 2} and "score" in row and "nope" not in row
    with pytest.raises(KeyError):
        row["nope"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.auroc = 0.0  # type: ignore[misc]
    with pytest.raises(TypeError, match="read-only"):
        row["auroc"] = 0.0
    with pytest.raises(TypeError, match="read-only"):
        row.update(auroc=0.0)
    assert row == dict(row) and json.loads(json.dumps(row))["score"] == "max_prob"
    assert copy.deepcopy(row) == row and type(pickle.loads(pickle.dumps(row))) is OODRow
    write_json(tmp_path / "rows.json", [row])
    back = json.loads((tmp_path / "rows.json").read_text())
    assert list(back[0]) == list(OOD_ROW_KEYS) and back[0]["aupr_out"] is None and back[0]["k_ood"] == {"4": 3, "5": 9}


def test_text_table_writes_4_decimals_nan_and_intervals():
    text = rows_text([_ood_row()], OODRow.columns("score", "auroc", "auroc_ci", "aupr_in", "aupr_in_ci", "aupr_out"))
    header, rule, line = text.splitlines()
    assert header.split() == ["score", "auroc", "auroc_ci", "aupr_in", "aupr_in_ci", "aupr_out"]
    assert set(rule.replace(" ", "")) == {"-"}
    # a tiny negative is 0.0000, never -0.0000; NaN reads nan
    assert " ".join(line.split()) == "max_prob 0.6123 [0.5000, 0.7235] 0.0000 [nan, nan] nan"


def test_markdown_table_writes_headers_3_decimals_and_the_report_formats():
    lines = rows_markdown(
        [_ood_row()], OODRow.columns("k_ood", "n_dropped", "matched", "auroc_ci", "aupr_in_ci", "aupr_out")
    )
    assert lines[0] == "| K_OOD | dropped ID/OOD | K matched | 95% CI (DeLong) | 95% CI (bootstrap) | AUPR-Out |"
    assert lines[2] == "| {4: 3, 5: 9} | 0/2 | **NO** | [0.500, 0.723] | n/a | n/a |" and lines[3] == ""
    assert rows_markdown([_ood_row(matched=True)], OODRow.columns("matched"))[2] == "| yes |"


def test_a_row_read_back_from_json_renders_as_the_row_itself(tmp_path):
    row = _ood_row(aupr_out=0.3)
    write_json(tmp_path / "r.json", [row])
    (back,) = json.loads((tmp_path / "r.json").read_text())
    back["k_ood"] = {int(k): n for k, n in back["k_ood"].items()}  # JSON keys are strings
    back["aupr_in_ci"] = [NAN if x is None else x for x in back["aupr_in_ci"]]
    columns = OODRow.columns()
    assert rows_markdown([back], columns) == rows_markdown([row], columns)
    assert rows_text([back], columns[:-2]) == rows_text([row], columns[:-2])


def test_signed_columns_carry_their_sign_in_both_media():
    column = Column("delta", "Δ", "signed")
    rows = [{"delta": 0.01234}, {"delta": -0.5}, {"delta": -1e-12}, {"delta": NAN}]
    assert [r.split()[0] for r in rows_text(rows, [column]).splitlines()[2:]] == [
        "+0.0123",
        "-0.5000",
        "+0.0000",
        "nan",
    ]
    assert [line.strip("| ") for line in rows_markdown(rows, [column])[2:-1]] == ["+0.012", "-0.500", "+0.000", "n/a"]
    assert math.isnan(rows[3]["delta"])


def test_a_reason_is_a_key_only_where_a_number_is_undefined(tmp_path):
    from lm_eval_evidential.audits.quality import ATC_KEYS, ATCRow

    row = {"id_task": "a", "target_task": "b", "score": "max_prob", "estimate": 0.5, "true_acc": 0.6}
    defined = ATCRow.of({**row, "abs_error": 0.1, "method": "atc"})
    undefined = ATCRow.of({**row, "abs_error": NAN, "method": "doc", "reason": "no threshold"})
    assert tuple(defined) == ATC_KEYS and "reason" not in defined and defined.get("reason") is None
    assert tuple(undefined) == (*ATC_KEYS, "reason") and undefined["reason"] == "no threshold"
    write_json(tmp_path / "rows.json", [defined, undefined])
    assert [list(r) for r in json.loads((tmp_path / "rows.json").read_text())] == [
        list(ATC_KEYS),
        [*ATC_KEYS, "reason"],
    ]
    assert rows_markdown([defined, undefined], ATCRow.columns("method", "abs_error"))[2:4] == [
        "| atc | 0.100 |",
        "| doc | n/a |",
    ]


def test_a_column_per_parameter_is_one_field_whose_keys_name_the_parameter(tmp_path):
    from lm_eval_evidential.audits.quality import SelectiveRow, selective_keys

    row = {"task": "t", "score": "max_prob", "prr_0.5": 0.25, "prr_0.75": NAN, "prr_normalized": 0.125}
    row |= {"aurc": 0.5, "eaurc": 0.0625, "augrc": 0.1, "risk_at_0.6": 0.3, "spearman": -0.2, "reason": "few"}
    typed = SelectiveRow.of(row)
    assert typed.prr[0] == (0.5, 0.25) and math.isnan(typed.prr[1][1]) and typed.risk_at == ((0.6, 0.3),)
    assert list(typed) == [*selective_keys(0.6), "reason"] and typed["prr_normalized"] == 0.125
    assert copy.deepcopy(typed) == typed and pickle.loads(pickle.dumps(typed)).risk_at == ((0.6, 0.3),)
    write_json(tmp_path / "rows.json", [typed])
    assert list(json.loads((tmp_path / "rows.json").read_text())[0]) == list(row)
    columns = SelectiveRow.columns("prr_0.75", "prr_normalized", "risk_at_0.6", "risk_at_1")
    assert [(c.key, c.header) for c in columns] == [
        ("prr_0.75", "PRR@0.75"),
        ("prr_normalized", "PRR (polygraph)"),
        ("risk_at_0.6", "risk@0.6 coverage"),
        ("risk_at_1", "risk@1 coverage"),
    ]
    assert rows_text([typed], columns[:3]).splitlines()[2].split() == ["nan", "0.1250", "0.3000"]
    assert "prr" not in [c.key for c in SelectiveRow.columns()]  # the field is its parameters' columns
    for bad in ("prr", "risk_at", "risk_at_x", "prr_0.50"):
        with pytest.raises(KeyError, match="no column"):
            SelectiveRow.columns(bad)


def test_k_match_set_size_shares_and_a_fitted_temperature_read_alike_in_both_media():
    rows = [
        {"matched": True, "by_size": {1: 0.5, 2: 1.0}, "t": None},
        {"matched": False, "by_size": {3: 0.12345}, "t": 1.23456},
    ]
    columns = [Column("matched", "K matched", "matched"), Column("by_size", "by size", "shares")]
    columns.append(Column("t", "T", "temperature"))
    assert [line.split() for line in rows_text(rows, columns).splitlines()[2:]] == [
        ["yes", "1:0.50", "2:1.00", "records"],
        ["NO", "3:0.12", "1.2346"],
    ]
    assert rows_markdown(rows, columns)[2:4] == ["| yes | 1:0.50 2:1.00 | — |", "| **NO** | 3:0.12 | 1.235 |"]


def test_a_group_rows_metrics_are_its_fields_in_order():  # METRIC_KEYS restates GroupRow's metric fields
    from lm_eval_evidential.audits.ood_groups import GROUP_ROW_KEYS, METRIC_KEYS

    assert GROUP_ROW_KEYS[GROUP_ROW_KEYS.index("id_acc") :][: len(METRIC_KEYS)] == METRIC_KEYS


def test_a_methods_ood_row_is_the_ood_row_it_labels_with_its_columns_as_declared_there():
    from lm_eval_evidential.audits.compare import MethodOODRow

    row = MethodOODRow(method="edl", protocol="K-matched", **_ood_row())
    assert list(row) == ["method", "protocol", *OOD_ROW_KEYS] and row.auroc == 0.61234
    assert type(pickle.loads(pickle.dumps(row))) is MethodOODRow and copy.deepcopy(row) == row
    assert MethodOODRow.columns("k_ood", "auroc_ci") == OODRow.columns("k_ood", "auroc_ci")
    assert rows_markdown([row], MethodOODRow.columns("method", "matched"))[2] == "| edl | **NO** |"


def test_every_row_type_declares_each_of_its_columns_once_in_its_fields():
    import importlib

    from lm_eval_evidential.audits.table import AuditRow

    for module in ("compare", "conformal", "ood_groups", "paper_tables", "permutations", "quality", "temperature"):
        importlib.import_module(f"lm_eval_evidential.audits.{module}")
    importlib.import_module("lm_eval_evidential.report.types")  # the controls' rows
    found, todo = set(), list(AuditRow.__subclasses__())
    while todo:
        cls = todo.pop()
        found.add(cls.__name__)
        todo += cls.__subclasses__()
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls
        for f in dataclasses.fields(cls):
            assert f.metadata.get("header") and f.metadata.get("format") in FORMATS, (cls.__name__, f.name)
    assert {"OODRow", "SelectiveRow", "ConformalRow", "TemperatureRow", "GroupRow", "MethodOODRow"} <= found
    assert {"ScoreSpreadRow", "PermutationOODRow", "DeLongTest", "ControlRow", "MethodCalibrationRow"} <= found
    assert {"ForcedKRow", "Table1Row", "ImplementationRow", "ValidComparison"} <= found


def test_a_row_that_quotes_another_rows_numbers_takes_their_declarations():
    from lm_eval_evidential.audits.ood import KSweepRow
    from lm_eval_evidential.audits.paper_tables import Table1Row
    from lm_eval_evidential.audits.table import declared, row_type
    from lm_eval_evidential.report.types import ValidComparison

    quoted = ("ood_task", "n_id", "n_ood", "score", "auroc", "auroc_ci", "aupr_in", "aupr_in_ci")
    assert ValidComparison.columns(*quoted) == OODRow.columns(*quoted)
    assert Table1Row.columns(*KSweepRow.field_names()) == KSweepRow.columns()
    assert Table1Row.field_names() == (*KSweepRow.field_names(), "published")
    Pair = row_type("Pair", __name__, [*declared(OODRow, "score", "auroc"), ("note", str, column("note"))])
    assert Pair.field_names() == ("score", "auroc", "note") and Pair.columns("auroc") == OODRow.columns("auroc")
    with pytest.raises(TypeError):  # keyword-only: a field order of another row never shifts positional meaning
        Pair("max_prob", 0.5, "x")


def test_a_combined_cell_writes_each_part_by_its_own_format_and_joins_them():
    from lm_eval_evidential.audits.table import combined

    row = _ood_row()
    estimate = OODRow.combined("AUROC [CI]", "estimate", "auroc", "auroc_ci")
    assert estimate == Column("auroc", "AUROC [CI]", "estimate", parts=OODRow.columns("auroc", "auroc_ci"))
    assert rows_markdown([row], [estimate, OODRow.combined("AUPR-In [CI]", "estimate", "aupr_in", "aupr_in_ci")])[
        2
    ] == ("| 0.612 [0.500, 0.723] | 0.000 n/a |")
    spread = OODRow.combined("min / max", "range", "auroc", Column("fpr95", "", digits=1), "aupr_out")
    assert rows_markdown([row], [spread])[2] == "| 0.612 / 0.2 / n/a |"  # each part its own decimals
    pair = OODRow.combined("ID → OOD", "arrow", "id_task", "ood_task")
    assert rows_markdown([row], [pair])[2] == "| obqa_edl → csqa_edl |"
    with pytest.raises(KeyError, match="unknown cell join"):
        combined("x", "x", "nope", Column("x", "x"))


def test_a_combined_cell_leaves_out_the_parts_its_row_lacks_and_follows_nested_keys():
    before_after = OODRow.combined("AUROC", "arrow", "auroc", Column("auroc_at_t", "AUROC"))
    assert rows_markdown([{"auroc": 0.5, "auroc_at_t": 0.25}], [before_after])[2] == "| 0.500 → 0.250 |"
    assert rows_markdown([{"auroc": 0.5}], [before_after])[2] == "| 0.500 |"  # no after: before alone
    assert rows_markdown([{"auroc": None, "auroc_at_t": None}], [before_after])[2] == "| — |"  # not applicable
    kept = Column("n_kept", "kept / n", "of", parts=(Column("n_kept", ""), Column("n", "")))
    assert [line for line in rows_markdown([{"n_kept": 3, "n": 9}, {"n_kept": None, "n": 9}], [kept])[2:4]] == [
        "| 3 / 9 |",
        "| — |",
    ]
    nested = Column(
        "auroc",
        "AUROC max_prob",
        "estimate",
        parts=(Column(("auroc", "max_prob", "auroc"), ""), Column(("auroc", "max_prob", "auroc_ci"), "", "interval")),
    )
    rows = [{"auroc": {"max_prob": {"auroc": 0.75, "auroc_ci": [0.5, 1.0]}}}, {"auroc": {}}]
    assert rows_markdown(rows, [nested])[2:4] == ["| 0.750 [0.500, 1.000] |", "| n/a |"]  # no part: n/a


def test_a_groups_mean_row_is_named_in_bold_in_markdown_only():
    from lm_eval_evidential.audits.ood_groups import GroupRow

    label = GroupRow.combined("set", "mean", "set", "group", "n_sets")
    rows = [{"set": "arc_c_edl", "group": "near", "n_sets": 1}, {"set": "near", "group": "near", "n_sets": 2}]
    assert rows_markdown(rows, [label])[2:4] == ["| arc_c_edl |", "| **near (mean of 2)** |"]
    assert rows_text(rows, [label]).splitlines()[2:] == ["arc_c_edl", "near     "]
    # a set without one K (a group's mean over sets of several): not applicable in a document, empty in the CLI
    assert rows_markdown([{"k_ood": None}], GroupRow.columns("k_ood"))[2] == "| — |"
    assert rows_text([{"k_ood": None}], GroupRow.columns("k_ood")).splitlines()[2] == "     "


@pytest.mark.parametrize("key", ["auroc", "delta_auroc", "extra"])
@pytest.mark.parametrize("value", [0.61234, -1e-17, 0.25, float("nan"), None, 3])
def test_a_sentence_writes_a_quantity_as_its_table_column_does(key, value):
    """``written`` is the table's own cell: a sentence quoting a ΔAUROC gets its sign, an AUROC its decimals."""
    from lm_eval_evidential.audits.ood import KSweepRow
    from lm_eval_evidential.audits.table import TEXT

    row = {"score": "s", key: value}
    markdown_cell = rows_markdown([row], KSweepRow.columns(key))[2].strip("| ")
    text_cell = rows_text([row], KSweepRow.columns(key)).splitlines()[-1].strip()
    assert KSweepRow.written(key, value) == markdown_cell
    assert KSweepRow.written(key, value, TEXT) == text_cell


def test_a_p_value_is_written_to_significant_digits_in_its_column_and_in_prose():
    """One writing of p-values: the DeLong table's p column and every sentence that quotes it (decimals would
    write p = 8.4e-06 as 0.000); z as its column declares it, in the table's medium."""
    from lm_eval_evidential.audits.ood import DeLongTest
    from lm_eval_evidential.audits.table import TEXT
    from lm_eval_evidential.cli.ksweep import delong_line
    from lm_eval_evidential.report.sections import delong_text

    assert [DeLongTest.written("p_value", 8.4123e-06, style) for style in (None, TEXT)] == ["8.4e-06", "8.41e-06"]
    assert [DeLongTest.written("p_value", math.nan, style) for style in (None, TEXT)] == ["n/a", "nan"]
    test = {"score": "max_prob", "extra": 1, "auroc_base": 0.61, "auroc_expanded": 0.7, "diff": 0.09}
    test |= {"z": 2.345678, "p_value": 0.0123456}
    assert delong_line(test).endswith("(diff +0.0900, z 2.3457, p 0.0123)")
    assert delong_text(0.61, 0.7, 0.09, 0.0123456).endswith("(Δ = +0.090, p = 0.012)")
