"""Query shapes DuckDB's scoring SELECT takes for speed, checked against the plain shape.

Many count columns (multinomial, complement) are scored with one ``list_dot_product`` per
class over a list of the row's values (a tree a fraction of the size to build,
render, bind and optimise). The plain shape, one term per column and class, is what every
other dialect runs; both must give the same scores, for every row, in the same order.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import sqlnb
from sqlnb.errors import SqlnbError
from sqlnb.models.naive_bayes import model as nb_model

COLUMNS = 12


def _counts(n: int, seed: int, holes: bool = True, nan: bool = True) -> pa.Table:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    cols = {}
    for j in range(COLUMNS):
        x = rng.poisson(1.0 + (y == j % 3) * (j % 4), n).astype(float)
        values = list(x)
        if holes:  # NULL and NaN are missing: the term is left out, as in the plain shape
            values = [None if i % 11 == j % 11 else float("nan") if nan and i % 13 == j % 13 else v
                      for i, v in enumerate(values)]
        cols[f"x{j}"] = pa.array(values, type=pa.float64())
    cols["id"] = pa.array(np.arange(n))
    cols["y"] = pa.array([f"c{v}" for v in y])
    return pa.table(cols)


def _plain(monkeypatch):
    monkeypatch.setattr(nb_model, "DOT_MIN", 10**9)


def _scored(model, t: pa.Table, **kw) -> pa.Table:
    con = duckdb.connect()
    con.register("t", t)
    return model.score("t", con, **kw).to_arrow_table()


def _close(got: pa.Table, want: pa.Table, tol: float = 1e-12) -> None:
    assert got.column_names == want.column_names
    assert got.column("id").to_pylist() == want.column("id").to_pylist()  # same rows, same order
    assert got.column("prediction").to_pylist() == want.column("prediction").to_pylist()
    for name in got.column_names:
        if name.startswith(("proba_", "jll_", "log_proba_", "log_evidence")):
            g = np.array(got.column(name).to_pylist(), dtype=float)
            w = np.array(want.column(name).to_pylist(), dtype=float)
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, err_msg=name)


@pytest.mark.parametrize("kind", ["multinomial", "complement"])
def test_dot_product_scores_equal_the_plain_shape_with_missing_values(kind, monkeypatch):
    train, test = _counts(400, 1, holes=False), _counts(300, 2)
    model = sqlnb.fit(train.drop_columns(["id"]), "y", kind=kind, screen=False)
    assert "LIST_DOT_PRODUCT" in model.to_sql("duckdb")
    got = _scored(model, test)
    _plain(monkeypatch)
    assert "LIST_DOT_PRODUCT" not in model.to_sql("duckdb")
    _close(got, _scored(model, test))


def test_a_mixed_model_adds_its_other_terms_to_the_dot_product(monkeypatch):
    train, test = _counts(400, 3, holes=False), _counts(200, 4)
    rng = np.random.default_rng(5)
    train = train.append_column("g", pa.array(rng.normal(size=len(train)))).append_column(
        "cat", pa.array(rng.choice(["a", "b", "c"], len(train))))
    test = test.append_column("g", pa.array([None if i % 7 == 0 else v for i, v in enumerate(rng.normal(size=len(test)))],
                                            type=pa.float64())).append_column(
        "cat", pa.array(rng.choice(["a", "b", "z"], len(test))))
    kinds = {f"x{j}": "multinomial" for j in range(COLUMNS)} | {"g": "gaussian", "cat": "categorical"}
    model = sqlnb.fit(train.drop_columns(["id"]), "y", feature_kinds=kinds, screen=False)
    got = _scored(model, test, outputs=("jll", "log_evidence", "proba", "prediction"))
    _plain(monkeypatch)
    _close(got, _scored(model, test, outputs=("jll", "log_evidence", "proba", "prediction")))


def test_infinite_weights_keep_the_plain_terms(monkeypatch):
    # MLE (alpha 0) with a count that is zero in a class: log 0 = -inf needs the x > 0 test
    # of the plain term (0 * -inf is NaN), so those columns stay out of the dot product.
    train = _counts(60, 6, holes=False)
    zero = pa.array([0.0] * len(train))
    train = train.set_column(train.column_names.index("x0"), "x0", zero)
    model = sqlnb.fit(train.drop_columns(["id"]), "y", kind="multinomial", screen=False, alpha=0.0,
                      estimator="mle")
    test = _counts(50, 7)
    got = _scored(model, test)
    _plain(monkeypatch)
    _close(got, _scored(model, test))


def test_the_helper_list_is_never_an_output_column():
    model = sqlnb.fit(_counts(200, 8, holes=False).drop_columns(["id"]), "y", kind="multinomial", screen=False)
    test = _counts(20, 9)
    con = duckdb.connect()
    con.register("input", test)
    exported = con.sql(model.to_sql("duckdb")).columns  # source columns unknown: src.* EXCLUDE (...)
    assert "sqlnb_counts" not in exported and exported[:len(test.column_names)] == test.column_names
    assert "sqlnb_counts" not in _scored(model, test).column_names
    clash = test.append_column("sqlnb_counts", pa.array(range(len(test))))
    with pytest.raises(SqlnbError, match="sqlnb_counts"):
        _scored(model, clash)


def test_below_the_threshold_and_off_duckdb_the_plain_shape_is_used():
    model = sqlnb.fit(_counts(200, 10, holes=False).drop_columns(["id"]), "y", kind="multinomial", screen=False)
    for dialect in ("postgres", "spark", "sqlite"):
        assert "LIST_DOT_PRODUCT" not in model.to_sql(dialect).upper()
    few = sqlnb.fit(_counts(200, 10, holes=False).select(["x0", "x1", "y"]), "y", kind="multinomial", screen=False)
    assert "LIST_DOT_PRODUCT" not in few.to_sql("duckdb")


def test_cross_validation_pools_the_dot_products_and_measures_the_same(monkeypatch):
    # The pooled CV query (every fold model x grid point in one read) takes the same shape.
    from sqlnb.workflows import cv

    t = _counts(500, 11, nan=False).drop_columns(["id"])  # NULLs (missing) in training and held-out rows
    seen = []
    real = cv.scoring_select

    def spy(*args, **kw):
        seen.append(bool(kw.get("prelude")))
        return real(*args, **kw)

    monkeypatch.setattr(cv, "scoring_select", spy)
    got = cv.cross_validate(t, "y", kind="multinomial", folds=4, grid={"alpha": [0.5, 1.0]}, screen=False, refit=False)
    assert seen and all(seen)
    _plain(monkeypatch)
    seen.clear()
    want = cv.cross_validate(t, "y", kind="multinomial", folds=4, grid={"alpha": [0.5, 1.0]}, screen=False, refit=False)
    assert seen and not any(seen)
    assert len(got.results) == len(want.results) == 2
    for g, w in zip(got.results, want.results):
        assert g["accuracy"] == w["accuracy"]
        np.testing.assert_allclose(g["log_loss"], w["log_loss"], rtol=1e-12)


def test_a_double_column_is_read_without_a_cast_only_by_the_engine_that_typed_it():
    # The scored source's DOUBLE columns need no CAST where the engine that resolved them
    # runs the query; SQL for another dialect keeps every cast (its columns' types are
    # whatever that warehouse holds).
    from sqlnb.source import resolve

    train = _counts(200, 12, holes=False).drop_columns(["id"])
    model = sqlnb.fit(train, "y", kind="gaussian", screen=False)
    con = duckdb.connect()
    con.register("input", _counts(30, 13))
    own = sqlnb.sql.render(model.scoring_query(resolve("input", con), dialect="duckdb"), "duckdb")
    assert 'CAST("src"."x0" AS DOUBLE)' not in own and '"src"."x0"' in own
    for dialect in ("postgres", "spark"):
        exported = model.to_sql(dialect, source="input", con=con)
        assert "CAST(`src`.`x0` AS DOUBLE)" in exported or 'CAST("src"."x0" AS DOUBLE PRECISION)' in exported, dialect
    assert 'CAST("src"."x0" AS DOUBLE)' in model.to_sql("duckdb")  # source unknown
    # and the scores are the same either way
    want = con.sql(model.to_sql("duckdb")).to_arrow_table()
    got = con.sql(own).to_arrow_table()
    names = ["id", *model.proba_columns(), "prediction"]
    _close(got.select(names), want.select(names))


def test_the_garbage_collector_is_paused_only_inside_the_call_and_restored():
    # sqlnb pauses Python's cyclic collector while it builds and drops SQL trees
    # (sql.trees_collected_by_refcount); it must come back on, also after an error, and
    # stay off for a caller who had switched it off.
    import gc

    model = sqlnb.fit(_counts(100, 14, holes=False).drop_columns(["id"]), "y", kind="multinomial", screen=False)
    assert gc.isenabled()
    model.to_sql("duckdb")
    assert gc.isenabled()
    with pytest.raises(SqlnbError):
        sqlnb.fit(_counts(50, 15, holes=False), "no_such_label")
    assert gc.isenabled()
    gc.disable()
    try:
        model.to_sql("duckdb")
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_per_term_class_score_of_many_columns_stays_within_the_parsers_depth():
    # A chain a + b + c ... nests one level per term, and DuckDB refuses SQL nested past
    # max_expression_depth (1,000 by default): a model of 1,000 Gaussian columns scored
    # term by term could be fitted but not scored. sql.add writes long sums as
    # parenthesised runs of ADD_RUN terms (the wide models), so the depth stays
    # near ADD_RUN whatever the number of terms (up to ADD_RUN²). 1,000 columns scored term
    # by term take a minute to bind (why the wide list_dot_product shape takes over from
    # WIDE_MIN columns, and a 1,050-column model never reaches the chain); the same depth
    # question at a tenth of the scale: 130 columns, below WIDE_MIN so every term is its
    # own, on a connection whose limit is 120 levels. A plain chain needs about 147 levels
    # there and is refused; the runs need about 82.
    from sklearn.naive_bayes import GaussianNB

    from sqlnb.models.naive_bayes import wide
    from sqlnb.sql import build

    text = sqlnb.sql.render(sqlnb.sql.add([sqlnb.sql.col(f"x{j}") for j in range(1050)]), "duckdb")
    assert text.count("(") == -(-1050 // build.ADD_RUN)  # one run per 64 terms
    rng = np.random.default_rng(16)
    n, d = 60, 130
    assert build.ADD_RUN < d < wide.WIDE_MIN
    y = rng.integers(0, 2, n)
    X = rng.normal(size=(n, d)) + y[:, None] * 0.1
    t = pa.table({**{f"x{j}": X[:, j] for j in range(d)}, "y": y})
    model = sqlnb.fit(t, "y", kind="gaussian", screen=False)
    assert "LIST_DOT_PRODUCT" not in model.to_sql("duckdb").upper()  # the per-term shape
    con = duckdb.connect()
    con.execute("SET max_expression_depth TO 120")
    got = model.score(t, con, outputs=("proba", "prediction")).to_arrow_table()
    want = GaussianNB().fit(X, y)
    np.testing.assert_allclose(np.column_stack([got.column("proba_0").to_numpy(), got.column("proba_1").to_numpy()]),
                               want.predict_proba(X), rtol=0, atol=1e-9)
    assert got.column("prediction").to_pylist() == list(want.predict(X))
