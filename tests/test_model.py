"""A model is its statistics: re-estimation without data, storage round trips, NULLs."""

from __future__ import annotations

import datetime as dt
import math
import os

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sqlnb
from sqlnb.errors import SqlnbError


def mixed_table(n=400, seed=0, nulls=True):
    rng = np.random.default_rng(seed)
    y = rng.choice(["a", "b", "c"], n)
    shift = np.select([y == "a", y == "b"], [0.0, 1.5], 3.0)
    g = rng.normal(shift, 1.0)
    cnt = rng.poisson(1 + shift).astype(np.int64)
    flag = rng.random(n) < (0.2 + 0.2 * shift)
    colour = np.where(rng.random(n) < 0.5, np.where(y == "a", "red", "blue"), rng.choice(["red", "blue", "green"], n))
    day = np.array([dt.date(2026, 1, 1) + dt.timedelta(days=int(d)) for d in rng.integers(0, 4, n)])
    code = rng.integers(0, 3, n) + (y == "c")
    t = pa.table({"g": g, "cnt": cnt, "flag": flag, "colour": colour, "day": day, "code": code, "y": y})
    if nulls:
        mask = rng.random(n) < 0.1
        t = t.set_column(0, "g", pa.array(np.where(mask, None, g).tolist(), pa.float64()))
        t = t.set_column(3, "colour", pa.array(np.where(rng.random(n) < 0.1, None, colour).tolist()))
    return t


KINDS = dict(feature_kinds={"cnt": "multinomial", "day": "categorical", "code": "categorical"})


def all_scores(model, data, con):
    rel = model.score(data, con, outputs=("jll", "log_evidence", "proba", "prediction"))
    return rel.to_arrow_table().to_pydict()


def test_reestimation_reads_no_data(tmp_path):
    path = tmp_path / "train.parquet"
    pq.write_table(mixed_table(), path)
    test = mixed_table(100, seed=1)
    con = duckdb.connect()
    con.register("test_rows", test)
    model = sqlnb.fit(str(path), "y", **KINDS)
    settings = [dict(alpha=0.5), dict(estimator="map", alpha=2.0), dict(estimator="mle"),
                dict(class_prior="uniform"), dict(class_prior={"a": 0.2, "b": 0.3, "c": 0.5}),
                dict(class_prior="dirichlet", prior_alpha=3.0), dict(var_smoothing=1e-3),
                dict(unseen="bucket", alpha=0.7)]
    refits = [all_scores(sqlnb.fit(str(path), "y", **KINDS, **s), "test_rows", con) for s in settings]
    os.remove(path)  # from here on the training data does not exist
    for s, ref in zip(settings, refits):
        got = all_scores(model.with_params(**s), "test_rows", con)
        assert got == ref, s  # identical, not just close: same statistics, same arithmetic
    with pytest.raises(SqlnbError, match="no file matches"):
        sqlnb.fit(str(path), "y")


def test_save_load_round_trip_is_exact(tmp_path):
    db = tmp_path / "models.duckdb"
    con = duckdb.connect()
    con.register("train_rows", mixed_table())
    con.register("test_rows", mixed_table(100, seed=1))
    model = sqlnb.fit("train_rows", "y", con=con, alpha=0.3, **KINDS)
    model.save(db, "my model")
    back = sqlnb.load(db, "my model")
    assert back.classes == model.classes
    assert [f.to_dict() for f in back.features] == [f.to_dict() for f in model.features]
    assert back.hyper == model.hyper
    assert back.stats.features["day"].values == model.stats.features["day"].values
    assert isinstance(back.stats.features["day"].values[0], dt.date)
    assert all_scores(back, "test_rows", con) == all_scores(model, "test_rows", con)
    assert [m["name"] for m in sqlnb.list_models(db)] == ["my model"]


def test_save_refuses_to_overwrite_and_replace_is_atomic(tmp_path):
    db = tmp_path / "models.duckdb"
    t = mixed_table()
    m1 = sqlnb.fit(t, "y", **KINDS)
    m1.save(db, "m")
    m2 = sqlnb.fit(t, "y", alpha=5.0, **KINDS)
    with pytest.raises(SqlnbError, match="already exists"):
        m2.save(db, "m")
    assert sqlnb.load(db, "m").hyper.alpha == 1.0
    m2.save(db, "m", replace=True)
    assert sqlnb.load(db, "m").hyper.alpha == 5.0
    with duckdb.connect(str(db)) as c:  # the replaced model's tables are gone
        n = c.sql("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'sqlnb'").fetchall()[0][0]
    assert n == 1 + len(m2.parameter_tables())


def test_failed_save_leaves_database_unchanged(tmp_path, monkeypatch):
    db = tmp_path / "models.duckdb"
    t = mixed_table()
    sqlnb.fit(t, "y", **KINDS).save(db, "m")
    m2 = sqlnb.fit(t, "y", alpha=9.0, **KINDS)
    real = m2.parameter_tables()

    def broken():
        parts = dict(real)
        parts["boom"] = (pa.table({"x": [1]}), {"x": "NOT_A_TYPE"})
        return parts

    def contents():
        """Every table of the database (any schema: the model's part tables too) with its
        row count, and the catalog's rows."""
        with duckdb.connect(str(db), read_only=True) as c:
            tables = c.sql("SELECT table_schema, table_name FROM information_schema.tables "
                           "ORDER BY ALL").fetchall()
            counts = [(s, t, c.execute(f'SELECT count(*) FROM "{s}"."{t}"').fetchall()[0][0]) for s, t in tables]
            return counts, c.sql("SELECT * FROM sqlnb.models ORDER BY ALL").fetchall()

    before = contents()
    assert len(before[0]) == 1 + len(real)  # the catalog and the first model's parts
    monkeypatch.setattr(m2, "parameter_tables", broken)
    with pytest.raises(Exception):
        m2.save(db, "m", replace=True)
    # The save wrote the new model's part tables before the broken one failed: the
    # transaction must take them away again, and leave the old model as it was.
    assert contents() == before
    assert sqlnb.load(db, "m").hyper.alpha == 1.0


def test_null_feature_contributes_no_term():
    con = duckdb.connect()
    con.register("train_rows", mixed_table())
    model = sqlnb.fit("train_rows", "y", con=con, **KINDS)
    row = {"g": [0.3], "cnt": [2], "flag": [True], "colour": ["red"], "day": [dt.date(2026, 1, 2)], "code": [1]}
    full = all_scores(model, pa.table(row), con)
    for name in row:
        partial = dict(row)
        partial[name] = pa.array([None], pa.table(row).schema.field(name).type)
        part = all_scores(model, pa.table(partial), con)
        # the difference is exactly that feature's term, computed by the same model
        single = {k: pa.array([None], pa.table(row).schema.field(k).type) for k in row}
        single[name] = row[name]
        only = all_scores(model, pa.table(single), con)
        for c in model.classes:
            prior = math.log(model.stats.class_n[model.classes.index(c)] / model.stats.class_n.sum())
            term = only[f"jll_{c}"][0] - prior
            assert part[f"jll_{c}"][0] == pytest.approx(full[f"jll_{c}"][0] - term, abs=1e-12)
    nothing = {k: pa.array([None], pa.table(row).schema.field(k).type) for k in row}
    out = all_scores(model, pa.table(nothing), con)
    prior = model.stats.class_n / model.stats.class_n.sum()
    np.testing.assert_allclose([out[f"proba_{c}"][0] for c in model.classes], prior, atol=1e-15)


def test_unseen_category_policies():
    con = duckdb.connect()
    con.register("train_rows", mixed_table(nulls=False))
    model = sqlnb.fit("train_rows", "y", con=con, features=["colour"])
    missing = all_scores(model, pa.table({"colour": pa.array([None], pa.string())}), con)
    unseen = all_scores(model, pa.table({"colour": ["purple"]}), con)
    assert unseen == {**missing, "colour": ["purple"]}  # default: an unseen value is missing
    bucket = model.with_params(unseen="bucket")
    out = all_scores(bucket, pa.table({"colour": ["purple"]}), con)
    n_j = 3 + 1
    for k, c in enumerate(model.classes):
        n_c = model.stats.class_n[k]
        expected = math.log(n_c / model.stats.class_n.sum()) + math.log(1.0 / (n_c + n_j))
        assert out[f"jll_{c}"][0] == pytest.approx(expected, abs=1e-12)


def test_labels_of_any_type_and_null_labels_skipped():
    base = mixed_table(nulls=False)
    dates = {"a": dt.date(2020, 1, 1), "b": dt.date(2021, 1, 1), "c": None}
    t = base.set_column(6, "y", pa.array([dates[v] for v in base["y"].to_pylist()], pa.date32()))
    m = sqlnb.fit(t, "y", **KINDS)
    assert m.classes == [dt.date(2020, 1, 1), dt.date(2021, 1, 1)]
    assert m.stats.null_label_rows == base["y"].to_pylist().count("c")
    con = duckdb.connect()
    out = all_scores(m, t, con)
    assert set(out["prediction"]) <= set(m.classes)
    assert "proba_2020-01-01" in out


def test_gaussian_class_without_values_uses_pooled_estimate():
    t = pa.table({"x": pa.array([1.0, 2.0, None, None, 3.0], pa.float64()), "z": [1.0, 2.0, 3.0, 4.0, 5.0],
                  "y": ["a", "a", "b", "b", "a"]})
    m = sqlnb.fit(t, "y")
    mean, var = m.log_parameters()["x"]
    assert mean[1] == pytest.approx(2.0) and var[1] == pytest.approx(2.0 / 3.0, rel=1e-6)


def test_nan_at_score_is_missing_and_never_reaches_a_score():
    rng = np.random.default_rng(3)
    n = 200
    y = rng.integers(0, 2, n)
    t = pa.table({"g": rng.normal(y, 1.0), "b": rng.random(n) < 0.3 + 0.4 * y,
                  "m": rng.poisson(1 + y).astype(float), "y": y})
    model = sqlnb.fit(t, "y", feature_kinds={"m": "multinomial"})
    con = duckdb.connect()
    nan = float("nan")
    rows = pa.table({"g": [nan, 0.5], "b": [True, None], "m": [2.0, nan]})
    same = pa.table({"g": pa.array([None, 0.5], pa.float64()), "b": [True, None],
                     "m": pa.array([2.0, None], pa.float64())})
    got, want = all_scores(model, rows, con), all_scores(model, same, con)
    for key in got:
        if key not in ("g", "m"):
            assert got[key] == want[key], key
    with pytest.raises(SqlnbError, match="NaN or infinite"):
        sqlnb.fit(pa.table({"g": [1.0, nan, 2.0], "y": [0, 1, 1]}), "y")


def test_fast_nan_gate_equals_the_guarded_query():
    """DuckDB scoring skips the per-term NaN guards and falls back to the guarded score only
    on rows whose fast score is NaN: the results must equal the exported (always guarded)
    SELECT bit for bit, whatever mix of NaN, NULL, ±inf and ordinary values a row holds."""
    rng = np.random.default_rng(11)
    n = 400
    y = rng.integers(0, 3, n)
    train = pa.table({"a": rng.normal(y, 1.0), "b": rng.normal(-y, 2.0), "c": rng.poisson(1 + y).astype(float),
                      "k": [f"v{v}" for v in rng.integers(0, 4, n)], "y": y})
    model = sqlnb.fit(train, "y", feature_kinds={"c": "multinomial"})
    specials = [float("nan"), None, float("inf"), float("-inf"), 0.5, -3.0, 1e300]
    cols = {name: [specials[i] if i < len(specials) else float(rng.normal())
                   for i in rng.integers(0, 2 * len(specials), n)] for name in ("a", "b", "c")}
    cols["c"] = [abs(v) if isinstance(v, float) and not math.isnan(v) else v for v in cols["c"]]
    test = pa.table({**{k: pa.array(v, pa.float64()) for k, v in cols.items()},
                     "k": [f"v{v}" for v in rng.integers(0, 5, n)]})
    con = duckdb.connect()
    con.register("test_rows", test)
    query = model.scoring_query(sqlnb.source.resolve("test_rows", con), outputs=("jll", "proba", "prediction"),
                                nan_gate=True)
    assert "CASE WHEN NOT ISFINITE(" in sqlnb.sql.render(query, "duckdb")  # the fast path is what score() runs
    fast = model.score("test_rows", con, outputs=("jll", "proba", "prediction")).to_arrow_table().to_pydict()
    guarded = con.sql(model.to_sql("duckdb", "test_rows", outputs=("jll", "proba", "prediction"))).to_arrow_table().to_pydict()
    assert set(fast) <= set(guarded)  # to_sql on an unresolved name also passes log_evidence through
    for key in fast:
        for u, v in zip(fast[key], guarded[key]):
            assert u == v or (isinstance(u, float) and math.isnan(u) and math.isnan(v)), key
    # a NaN Gaussian input is missing, not a NaN score
    assert not any(isinstance(v, float) and math.isnan(v) for v in fast["proba_0"])
