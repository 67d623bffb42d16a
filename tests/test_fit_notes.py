"""What ``sqlnb fit`` says on stderr about rows and columns it does not learn from: a
column NULL in every row of a small file is left out as in a large one (it changes no
probability), and rows with a NULL label are counted in a ``note:`` line."""

from __future__ import annotations

import pyarrow.csv as pacsv

import sqlnb
from support.cli import invoke

ROWS = "".join(f"{20 + i % 9},,{'red' if i % 3 else 'blue'},{'ab'[i % 2]}\n" for i in range(11))


def test_a_column_null_in_every_row_of_a_small_file_is_left_out_with_a_note(tmp_path):
    path = tmp_path / "small.csv"
    path.write_text("age,empty,color,y\n" + ROWS)  # 11 rows: fewer than screening's 20
    r = invoke("fit", path, "--label", "y", "--model", f"{tmp_path}/m.duckdb:nb")
    assert r.exit_code == 0, r.stderr
    assert r.stderr == ("note: left out column 'empty': constant (NULL in every row), which changes no probability "
                        "(keep it with --keep-columns empty, keep_columns=['empty'] in Python, or list the features)\n")
    model = sqlnb.load(f"{tmp_path}/m.duckdb", "nb")
    assert [f.name for f in model.features] == ["age", "color"]
    assert model.report["screened"] == [{"column": "empty",
                                         "reason": "constant (NULL in every row), which changes no probability"}]
    # Kept, it adds no term to any class: the same probabilities to the last bit.
    kept = sqlnb.fit(str(path), "y", keep_columns=["empty"])
    assert "empty" in [f.name for f in kept.features]
    rows = pacsv.read_csv(path)
    assert kept.predict_proba(rows).to_arrow_table() == model.predict_proba(rows).to_arrow_table()


def test_a_float_column_null_in_every_row_of_a_small_source_is_left_out():
    import pyarrow as pa
    table = pa.table({"x": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "nothing": pa.array([None] * 6, pa.float64()),
                      "y": ["a", "b"] * 3})
    model = sqlnb.fit(table, "y")
    assert [f.name for f in model.features] == ["x"]
    assert model.report["screened"][0]["column"] == "nothing"


def test_rows_with_a_null_label_are_counted_on_stderr_at_fit(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("x,y\n" + "".join(f"{i % 7},{'' if i % 10 == 0 else 'ab'[i % 2]}\n" for i in range(100)))
    r = invoke("fit", path, "--label", "y", "--model", f"{tmp_path}/m.duckdb:m")
    assert r.exit_code == 0, r.stderr
    assert r.stderr == "note: 10 rows with a NULL label ('y') were left out of the fit\n"
    path.write_text("x,y\n" + "".join(f"{i % 7},{'ab'[i % 2]}\n" for i in range(100)) + "3,\n")
    r = invoke("fit", path, "--label", "y", "--model", f"{tmp_path}/m.duckdb:m", "--replace")
    assert r.exit_code == 0 and r.stderr == "note: 1 row with a NULL label ('y') was left out of the fit\n"
    path.write_text("x,y\n" + "".join(f"{i % 7},{'ab'[i % 2]}\n" for i in range(100)))
    r = invoke("fit", path, "--label", "y", "--model", f"{tmp_path}/m.duckdb:m", "--replace")
    assert r.exit_code == 0 and r.stderr == ""


def test_a_note_in_python_points_at_the_callers_line(tmp_path):
    """In Python a note is a warning attributed to the line that called sqlnb (this file),
    not to the package's own wrappers (``sqlnb/sql/build.py``, ``sqlnb/workflows/auto.py``),
    from a plain fit, ``fit(auto=True)`` and an update."""
    import warnings

    path = tmp_path / "small.csv"
    path.write_text("age,empty,color,y\n" + ROWS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = sqlnb.fit(str(path), "y")
        sqlnb.fit(str(path), "y", auto=True, budget=1)
        sqlnb.update(sqlnb.fit(str(path), "y", model="weighted"), str(path))
    kinds = {type(w.message).__name__ for w in caught}
    assert {"ScreeningWarning", "UpdateKeepsWeights"} <= kinds, kinds
    assert model.report["screened"] and caught
    assert {w.filename for w in caught} == {__file__}, {(w.filename, str(w.message)[:60]) for w in caught}
