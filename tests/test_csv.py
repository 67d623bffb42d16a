"""CSV files read as they hold their values, and identifiers left out of tiny CSVs.

1. DuckDB's CSV sniffer types a column from its first 20,480 rows: a column of integers
   there is BIGINT, and a later ``1.5`` would be read as 2, silently (duckdb/duckdb#25824),
   at fit, score and evaluate alike. Such a column is read as DOUBLE
   (:func:`sqlnb.source._fractions`).
2. A column named like an identifier whose values all differ is left out of a CSV of
   fewer than ``screening.MIN_ROWS`` rows too.

Values that do not cast to a fitted column's type, and files with a byte-order mark, are in
tests/test_csv_values.py.
"""

from __future__ import annotations

import warnings

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sqlnb
from sqlnb.errors import ScreeningWarning
from sqlnb.source import Files, resolve
from support.cli import invoke

ROWS = 30_000
#: Past DuckDB's sniffing sample (20,480 rows).
AT = 25_000


def _table(x: list) -> pa.Table:
    rng = np.random.default_rng(41)
    y = np.where(rng.random(ROWS) < 0.5, "a", "b")
    return pa.table({"x": pa.array(x, pa.float64()), "z": pa.array(rng.normal(size=ROWS) + (y == "a")),
                     "y": pa.array(y.tolist())})


@pytest.fixture(scope="module")
def late_fraction(tmp_path_factory) -> tuple[str, str, pa.Table]:
    """A CSV whose column ``x`` holds integers, and 1.5 on row AT only; its Parquet twin."""
    d = tmp_path_factory.mktemp("late_fraction")
    x = [float(i % 7) for i in range(ROWS)]
    x[AT] = 1.5
    table = _table(x)
    csv_path, pq_path = str(d / "late.csv"), str(d / "late.parquet")
    with open(csv_path, "w") as f:
        f.write("x,z,y\n")
        for xi, zi, yi in zip(x, table["z"].to_pylist(), table["y"].to_pylist()):
            f.write(f"{xi:g},{zi!r},{yi}\n")
    pq.write_table(table, pq_path)
    return csv_path, pq_path, table


def test_a_fraction_past_the_sniffing_sample_is_read_as_the_file_holds_it(late_fraction):
    csv_path, _, _ = late_fraction
    con = duckdb.connect()
    src = resolve(csv_path, con)
    assert src.columns["x"] == "DOUBLE"
    values = [r[0] for r in con.sql(f"SELECT x FROM {src.from_().sql('duckdb')}").fetchall()]
    assert values[AT] == 1.5 and values[AT + 1] == float((AT + 1) % 7)
    # A column the caller typed keeps that type, and the file's integers stay integers.
    assert resolve(Files(csv_path, types={"x": "BIGINT"}), con).columns["x"] == "BIGINT"
    ints = csv_path.replace("late.csv", "ints.csv")
    with open(ints, "w") as f:
        f.write("count\n" + "".join(f"{i % 7}\n" for i in range(ROWS)))
    assert resolve(ints, con).columns == {"count": "BIGINT"}


def test_the_fit_learns_the_files_values(late_fraction, tmp_path):
    """1.5 is a category of its own, not one more 2 (a Gaussian fit read 1.5 already at
    6a739ab: DuckDB pushes its CAST(x AS DOUBLE) into the reader)."""
    csv_path, pq_path, _ = late_fraction
    kinds = {"x": "categorical"}
    from_csv = sqlnb.fit(csv_path, "y", feature_kinds=kinds, screen=False)
    from_parquet = sqlnb.fit(pq_path, "y", feature_kinds=kinds, screen=False)
    b = np.array(from_parquet.predict_proba(pq_path).fetchnumpy()["proba_a"])
    a = np.array(from_csv.predict_proba(pq_path).fetchnumpy()["proba_a"])
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)
    # The command line reads it so too.
    db = tmp_path / "m.duckdb"
    assert invoke("fit", csv_path, "--label", "y", "--feature-kind", "x=categorical",
                  "--model", f"{db}:m").exit_code == 0
    c = np.array(sqlnb.load(str(db), "m").predict_proba(pq_path).fetchnumpy()["proba_a"])
    np.testing.assert_allclose(c, b, rtol=0, atol=1e-12)


def test_score_and_evaluate_read_the_files_values(late_fraction):
    """(Scoring read 1.5 at 6a739ab by the CAST pushed into the reader; evaluate did not.)"""
    csv_path, pq_path, _ = late_fraction
    model = sqlnb.fit(pq_path, "y", kind="gaussian", screen=False)
    a = np.array(model.predict_proba(csv_path).fetchnumpy()["proba_a"])
    b = np.array(model.predict_proba(pq_path).fetchnumpy()["proba_a"])
    assert abs(a[AT] - b[AT]) <= 1e-12
    on_csv, on_parquet = sqlnb.evaluate(model, csv_path), sqlnb.evaluate(model, pq_path)
    assert on_csv.log_loss == pytest.approx(on_parquet.log_loss, rel=1e-12, abs=0)


def test_a_categorical_integer_scored_from_text_takes_no_rounded_category(tmp_path):
    """1.5 in a column of integer categories is unseen (scored as missing), not category 2
    (``Model.read_types`` reads it as text, :func:`sqlnb.sql.read_as` casts it)."""
    rng = np.random.default_rng(2)
    c = rng.integers(1, 4, 400)
    y = np.where(rng.random(400) < 0.3 + 0.2 * c, "a", "b")
    train = tmp_path / "train.parquet"
    pq.write_table(pa.table({"c": pa.array(c, pa.int64()), "y": pa.array(y.tolist())}), train)
    model = sqlnb.fit(str(train), "y", feature_kinds={"c": "categorical"})
    scored = tmp_path / "score.csv"
    values = [str(1 + i % 3) for i in range(ROWS)]
    values[AT], values[AT + 1], values[AT + 2] = "1.5", "", "2"
    scored.write_text("c\n" + "\n".join(values) + "\n")
    p = np.array(model.predict_proba(str(scored)).fetchnumpy()["proba_a"])
    assert p[AT] == p[AT + 1] != p[AT + 2]


def test_text_past_the_sample_is_still_the_readers_error(tmp_path):
    path = tmp_path / "bad.csv"
    x = [str(i % 5) for i in range(ROWS)]
    x[AT] = "zz"
    path.write_text("x,y\n" + "".join(f"{xi},{'ab'[i % 2]}\n" for i, xi in enumerate(x)))
    result = invoke("fit", path, "--label", "y", "--kind", "gaussian", "--model", f"{tmp_path / 'm.duckdb'}:m")
    assert result.exit_code != 0
    assert f"line {AT + 2}: column 'x' holds 'zz', which is not a BIGINT" in result.output


# -- 2. an ID by its name in a tiny CSV ---------------------------------------------------
def _tiny_csv(path) -> str:
    rows = ["customer_id,region_id,visits,spend,plan,churned"]
    for i in range(12):
        rows.append(f"{1000 + 7 * i},{i % 3},{i},{10.0 + 3.5 * (i % 5)},{'ab'[i % 2]},{'yes' if i % 3 else 'no'}")
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def test_an_id_named_column_all_different_is_left_out_of_a_tiny_csv(tmp_path):
    data = _tiny_csv(tmp_path / "tiny.csv")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = sqlnb.fit(data, "churned")
    notes = [str(w.message) for w in caught if issubclass(w.category, ScreeningWarning)]
    assert notes == ["note: left out column 'customer_id': named like an ID, with a different value in each of "
                     "the 12 rows (keep it with --keep-columns customer_id, keep_columns=['customer_id'] in "
                     "Python, or list the features)"]
    # region_id repeats, and visits (all different, not named like an ID) is a small-data feature.
    assert model.feature_names == ["region_id", "visits", "spend", "plan"]
    assert sqlnb.fit(data, "churned", keep_columns=["customer_id"]).feature_names[0] == "customer_id"
    result = invoke("fit", data, "--label", "churned", "--model", f"{tmp_path / 'm.duckdb'}:m")
    assert result.exit_code == 0 and "note: left out column 'customer_id'" in result.output


def test_an_id_named_column_with_a_repeat_or_a_null_stays_in_a_tiny_table():
    ids = [1, 2, 3, 4, 5, 6, 7, 8, 9, 9]
    y = ["a", "b"] * 5
    for order_id in (ids, [*ids[:9], None]):
        table = pa.table({"order_id": pa.array(order_id, pa.int64()), "x": pa.array(np.arange(10.0)),
                          "y": pa.array(y)})
        with warnings.catch_warnings():
            warnings.simplefilter("error", ScreeningWarning)
            assert sqlnb.fit(table, "y").feature_names == ["order_id", "x"]
