"""Values read with the type a model was fitted with, exactly.

DuckDB's casts to integers and decimals round (``TRY_CAST('1.5' AS BIGINT)`` is 2), so a
categorical column fitted as BIGINT and scored from text scored ``'1.5'`` as category 2.
Now a value the fitted type cannot hold exactly is unseen when scoring, an error when
updating, and no class when naming an integer label; ``'2.0'``, ``' 7'``, ``'07'`` and
``'1e3'`` keep the integer they equal. And the DuckDB connections sqlnb opens itself print
no progress bar (DuckDB's Python client draws one on stdout, terminal or not).
"""

from __future__ import annotations

import csv
import io
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

import sqlnb
from sqlnb.errors import SqlnbError
from sqlnb.models.decision import as_class
from support.cli import assert_error, run_process, snapshot

#: Training categories of ``c`` (BIGINT) and labels (BIGINT).
TRAIN = [(1, 1), (1, 1), (2, 2), (2, 1), (7, 2), (7, 2), (1000, 1), (1000, 2), (2, 2), (7, 1)]
#: Text scored -> the BIGINT it is read as (None: unseen, no term).
READ = {
    "1.5": None, "2.0": 2, " 7": 7, "07": 7, "1e3": 1000, "9223372036854775808": None, "x": None,
    "2": 2, "2.5": None, "-1.5": None, "1e-3": None, "1.25e1": None, "2.": 2,
}


def _write(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_NONNUMERIC if header == ("c",) else csv.QUOTE_MINIMAL)
        w.writerow(header)
        w.writerows(rows)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("types")
    _write(d / "train.csv", ("c", "y"), TRAIN)
    _write(d / "score.csv", ("c",), [(t,) for t in READ])  # quoted: ' 7' keeps its space
    _write(d / "update.csv", ("c", "y"), [(2, 1), (1.5, 2), (7, 1)])
    return d


@pytest.fixture(scope="module")
def model(files):
    return sqlnb.fit(str(files / "train.csv"), "y", feature_kinds={"c": "categorical"})


def _reference(model, values, sql_type="BIGINT"):
    """Probabilities of the values as the fitted type holds them (None: missing)."""
    arrow = {"BIGINT": pa.int64(), "DOUBLE": pa.float64()}[sql_type]
    return model.score(pa.table({"c": pa.array(values, type=arrow)}), outputs=("proba",), keep=[]).fetchall()


def test_text_is_read_as_the_integer_it_equals_and_otherwise_unseen(model, files):
    assert [(f.name, f.kind, f.sql_type) for f in model.features] == [("c", "categorical", "BIGINT")]
    got = model.score(str(files / "score.csv"), outputs=("proba",), keep=[]).fetchall()
    assert got == _reference(model, list(READ.values()))  # bit-identical, row for row


def test_a_double_input_is_read_exactly_too(model):
    values = [1.5, 2.0, 7.0, 1000.0, -0.5, 1e30, None]
    got = model.score(pa.table({"c": pa.array(values, type=pa.float64())}), outputs=("proba",), keep=[]).fetchall()
    assert got == _reference(model, [None, 2, 7, 1000, None, None, None])


def test_a_large_vocabulary_reads_text_exactly(files, tmp_path):
    # Past INLINE_MAX (100) values the lookup is a packed join, keyed by the same text.
    rows = [(v, 1 + (v * 7 % 3 == 0)) for v in range(120) for _ in range(2)]
    m = sqlnb.fit(str(_write(tmp_path / "big.csv", ("c", "y"), rows)), "y", feature_kinds={"c": "categorical"})
    got = m.score(str(_write(tmp_path / "s.csv", ("c",), [("1.5",), ("2.0",), ("119",), ("119.5",)])),
                  outputs=("proba",), keep=[]).fetchall()
    assert got == _reference(m, [None, 2, 119, None])


def test_a_decimal_category_is_not_rounded(tmp_path):
    con = sqlnb.connect()
    rel = con.sql("SELECT CAST(c AS DECIMAL(10, 2)) AS c, y FROM (VALUES (1.00, 1), (1.01, 2), (2.50, 1), (1.01, 1)) "
                  "AS t(c, y)")
    m = sqlnb.fit(rel, "y", feature_kinds={"c": "categorical"}, con=con)
    got = m.score(str(_write(tmp_path / "d.csv", ("c",), [("1.005",), ("1.010",), ("2.5",), ("1",)])),
                  outputs=("proba",), keep=[]).fetchall()
    ref = con.sql("SELECT CAST(c AS DECIMAL(10, 2)) AS c FROM (VALUES (NULL), (1.01), (2.50), (1.00)) AS t(c)")
    assert got == m.score(ref, con=con, outputs=("proba",), keep=[]).fetchall()


def test_an_update_with_a_value_the_type_cannot_hold_is_an_error(model, files, tmp_path):
    with pytest.raises(SqlnbError) as e:
        sqlnb.update(model, str(files / "update.csv"))
    assert "column 'c'" in str(e.value) and "1.5" in str(e.value) and "BIGINT" in str(e.value)
    # A value the type holds is its category: 5.0 is 5.
    updated = sqlnb.update(model, str(_write(tmp_path / "u.csv", ("c", "y"), [(5.0, 1), (2.0, 2)])))
    assert updated.stats.features["c"].values == [1, 2, 5, 7, 1000]


def test_a_label_that_is_no_integer_names_no_class():
    assert as_class("2.0", [1, 2], "BIGINT", "the threshold class") == 1
    with pytest.raises(SqlnbError, match="'1.5' is not a class"):
        as_class("1.5", [1, 2], "BIGINT", "the threshold class")


def test_the_command_line_reads_a_csv_the_same_way(files, tmp_path):
    store = tmp_path / "m.duckdb"
    m = f"{store}:nb"
    fit = run_process("fit", files / "train.csv", "--label", "y", "--feature-kind", "c=categorical", "--model", m)
    assert (fit.returncode, fit.stderr) == (0, ""), fit.stderr
    score = run_process("score", files / "score.csv", "--model", m, "--out", "-")
    assert score.returncode == 0, score.stderr
    rows = list(csv.DictReader(io.StringIO(score.stdout)))
    reference = _reference(sqlnb.load(str(store), "nb"), list(READ.values()))
    assert [r["c"] for r in rows] == list(READ)
    assert [(float(r["proba_1"]), float(r["proba_2"])) for r in rows] == reference
    before = snapshot(store)
    assert_error(run_process("update", files / "update.csv", "--model", m), "column 'c'", "1.5", "BIGINT")
    assert_error(run_process("decide", "--model", m, "--threshold", "1.5=0.3"), "'1.5' is not a class")
    assert snapshot(store) == before  # nothing written


#: A process that fits with DuckDB's progress-bar delay cut to 0 on a connection whose bar
#: is on, as the fit starts reading the source (the engine's ``resolve``: after sqlnb set
#: the connection up), so every query of the fit draws a bar if and only if the bar is on,
#: however fast the machine. (Setting ``progress_bar_time`` also turns the bar on in
#: DuckDB, hence the test of ``enable_progress_bar`` first.)
_FIT = textwrap.dedent("""
    import sys
    import duckdb
    import sqlnb
    import sqlnb.engines.duckdb as engine

    reading = engine.resolve
    def resolve(data, con):
        if con.execute("SELECT current_setting('enable_progress_bar')").fetchone()[0]:
            con.execute("SET progress_bar_time = 0")
        return reading(data, con)
    engine.resolve = resolve

    data = "SELECT range % 3 AS y, hash(range) % 1000 AS x FROM range(300000)"
    con = duckdb.connect() if sys.argv[1] == "own" else None
    model = sqlnb.fit(data, "y", con=con)
    print("rows", model.stats.n_rows)
""")


def _fit_process(con: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _FIT, con], capture_output=True, text=True, timeout=120)


def test_sqlnb_connections_print_no_progress_bar():
    result = _fit_process("sqlnb")
    assert result.returncode == 0, result.stderr
    assert (result.stdout, result.stderr) == ("rows 300000\n", "")


def test_a_connection_passed_in_keeps_its_own_progress_bar():
    result = _fit_process("own")
    assert result.returncode == 0, result.stderr
    assert "100%" in result.stdout and result.stdout.endswith("rows 300000\n") and result.stderr == ""
