"""The checked-in reference SQL (``sql/``) is what the builders render, and runs in DuckDB.

PostgreSQL, Spark and SQLite run the same files in tests/test_engines.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sqlnb import sql
from sqlnb.reference import COMMAND, example_data, example_model, reference_files

ROOT = Path(__file__).resolve().parents[1] / "sql"


def test_reference_sql_is_up_to_date():
    files = reference_files()
    stale = [rel for rel, text in files.items()
             if not (ROOT / rel).exists() or (ROOT / rel).read_text() != text]
    assert not stale, (
        f"sql/ is out of date ({', '.join(stale)} differ from what the builders render). "
        f"If the change is intended, regenerate from the repository root with `{COMMAND}` "
        "and review the diff."
    )


def test_every_dialect_has_reference_files():
    for dialect in sql.DIALECTS:
        assert (ROOT / dialect / "score.sql").exists() and (ROOT / dialect / "fit.sql").exists()


@pytest.fixture(scope="module")
def example():
    model, con = example_model()
    con.register("input", example_data().drop_columns(["species"]))
    return model, con


def _proba(model, rel):
    d = rel.to_arrow_table().to_pydict()
    return d["prediction"], np.array([d[c] for c in model.proba_columns()], dtype=float).T


def test_duckdb_reference_score_and_macro_match_model_score(example):
    model, con = example
    pred, proba = _proba(model, model.score("input", con=con, outputs=("proba", "prediction")))
    got_pred, got = _proba(model, con.sql((ROOT / "duckdb" / "score.sql").read_text()))
    assert got_pred == pred
    np.testing.assert_allclose(got, proba, rtol=0, atol=1e-12)
    con.execute((ROOT / "duckdb" / "macros.sql").read_text())
    macro_pred, macro = _proba(model, con.sql("""SELECT * FROM "score_example"('input')"""))
    assert macro_pred == pred
    np.testing.assert_allclose(macro, proba, rtol=0, atol=1e-12)


def test_duckdb_reference_fit_gives_the_model_statistics(example):
    model, con = example
    rows = {r[0]: r for r in con.sql((ROOT / "duckdb" / "fit.sql").read_text()).fetchall()}
    for k, c in enumerate(model.classes):
        r = rows[c]
        assert r[1] == model.stats.class_rows[k]
        height = model.stats.features["height"]
        assert r[2] == height.rows[k] and r[3] == pytest.approx(height.rows_mean[k], rel=1e-15)
        colour = model.stats.features["colour"]
        assert {v: n for v, n in r[5].items() if v is not None} == {
            v: n for v, n in zip(colour.values, colour.counts[k]) if n}


def test_rendering_refuses_what_a_dialect_cannot_run():
    from sqlglot import exp

    from sqlnb.errors import SqlnbError
    from sqlnb.workflows.export import fit_queries
    model, _ = example_model()
    with pytest.raises(SqlnbError, match="sqlite has no VAR_POP"):
        sql.render(exp.select(exp.VariancePop(this=sql.col("x"))), "sqlite")
    with pytest.raises(SqlnbError, match="postgres has no ARG_MAX"):
        sql.render(exp.select(exp.ArgMax(this=sql.col("x"), expression=sql.col("y"))), "postgres")
    duck_fit = fit_queries("train", "species", model.features, "duckdb")[0]  # uses histogram()
    with pytest.raises(SqlnbError, match="no HISTOGRAM"):
        sql.render(duck_fit, "spark")


def _awkward_doubles() -> list[float]:
    """Doubles whose shortest repr takes every form: plain, exponent, subnormal, signed zero."""
    rng = np.random.default_rng(7)
    values = list(rng.uniform(-10, 10, 300)) + list(rng.lognormal(0, 60, 300)) + list(-rng.lognormal(0, 60, 300))
    return [float(v) for v in values] + [0.0, -0.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
                                         1e22, 1e-7, 123456789012345.0, 0.1, -2.5]


def _bits(values) -> list[bytes]:
    import struct
    return [struct.pack("<d", v) for v in values]


def test_double_literals_read_back_as_the_same_doubles_in_duckdb():
    # DuckDB spells sql.dbl's literals with an exponent (0.5e0), not as a cast of a DECIMAL.
    import duckdb
    from sqlglot import exp

    values = _awkward_doubles()
    text = sql.render(exp.select(*[sql.dbl(v) for v in values]), "duckdb")
    assert "CAST(" not in text and "0.1e0" in text
    con = duckdb.connect()
    row = con.execute(text).fetchone()
    assert _bits(row) == _bits(values)
    types = con.execute(f"SELECT {', '.join(f'typeof(c{i})' for i in range(3))} FROM ("
                        f"{sql.render(exp.select(*[exp.alias_(sql.dbl(v), f'c{i}') for i, v in enumerate([0.5, -3.0, 1e300])]), 'duckdb')})").fetchone()
    assert set(types) == {"DOUBLE"}


def test_rendering_for_any_dialect_leaves_the_callers_tree_as_it_was():
    # sql.render rewrites a copy, and only when a rewrite applies; the test for "applies"
    # must not itself change the tree (it once set GREATEST's NULL handling for SQLite and
    # dropped a CTE's MATERIALIZED for Spark in the caller's own tree, and re-parented the
    # argument of isnan for PostgreSQL).
    from sqlglot import exp

    def tree():
        scores = exp.select(sql.greatest([sql.col("a"), sql.col("b")]).as_("m"),
                            exp.IsNan(this=sql.col("a")).as_("n"), exp.Exp(this=sql.col("b")).as_("e")).from_("t")
        return exp.select("*").from_("s").with_("s", as_=scores, materialized=True)

    def parents_ok(t) -> bool:
        return all(child.parent is node for node in t.walk() for child in node.iter_expressions())

    for dialect in sql.DIALECTS:
        t = tree()
        before = sql.render(t, "duckdb")
        sql.render(t, dialect)
        assert sql.render(t, "duckdb") == before, dialect
        assert t == tree() and parents_ok(t), dialect
