"""Explanations (``explain=K``, ``sqlnb score --explain K``): the reasons per row.

The oracle is numpy over the model's own parameters: every feature's term per class
(naive Bayes: its log-likelihood, 0 when missing; LDA and logistic regression:
``(x − centre)·w``), the predicted class and the runner-up, and the contributions
``term(p) − term(r)``. Checked per row, within 1e-9:

* the identity Σ_f contribution_f + base(p) − base(r) = jll_p − jll_r, with every
  feature asked for (K = number of features) and the jll columns of the same SELECT;
* the reasons are the features in decreasing contribution (ties: model order), with the
  oracle's contributions as weights;
* in DuckDB, in the SQL exported to SQLite, and once each on PostgreSQL and Spark.
"""

from __future__ import annotations

import math
import sqlite3

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import sqlnb
from sqlnb.errors import SqlnbError
from sqlnb.models.decision import DecisionRule
from sqlnb.models.explain import MAX_REASONS, reason_columns
from sqlnb.models.finish import class_columns
from support.cli import assert_error, csv_rows, invoke, run_process, write_parquet
from support.engines import postgres_engine, spark_engine
from support.sqlite import sqlite_connection, sqlite_table

TOL = 1e-9
HOSTILE = 'a"; DROP TABLE t; --'
QUOTED = "it's colour \\'"  # a quote and a backslash: string literals in every dialect


def _data(n: int = 60) -> pa.Table:
    """Three classes; a Gaussian and a categorical column with NULLs, a Bernoulli (boolean)
    one with NULLs, a second Gaussian under a hostile name, and a count column."""
    rng = np.random.RandomState(11)
    k = np.arange(n) % 3
    x1 = rng.normal(k * 1.2, 1.0 + 0.2 * k)
    colour = np.array(["red", "green", "blue", "grey"])[(k + rng.randint(0, 3, n)) % 4].astype(object)
    flag = (rng.rand(n) < 0.25 + 0.25 * k).astype(object)
    colour[[3, 20]] = None
    flag[[7, 20]] = None
    return pa.table({
        "id": np.arange(n),
        "x1": pa.array([None if i in (4, 20, 33) else float(v) for i, v in enumerate(x1)], pa.float64()),
        QUOTED: pa.array(colour.tolist(), pa.string()),
        "flag": pa.array(flag.tolist(), pa.bool_()),
        HOSTILE: rng.normal(-k * 0.7, 1.5),
        "y": np.array(["a", "b", "c"])[k],
    })


def _dense_data(n: int = 60) -> pa.Table:
    """Complete numeric rows (LDA and logistic regression), two of them incomplete."""
    rng = np.random.RandomState(5)
    k = np.arange(n) % 3
    return pa.table({
        "id": np.arange(n),
        "u": pa.array([None if i == 9 else float(v) for i, v in enumerate(rng.normal(k, 1.0))], pa.float64()),
        "v": rng.normal(-k * 0.5, 2.0) + 100.0,
        HOSTILE: rng.normal(k * 0.3, 1.0),
        "member": pa.array((rng.rand(n) < 0.3 + 0.2 * k).tolist(), pa.bool_()),
        "y": np.array(["a", "b", "c"])[k],
    })


DATA = {"mixed": _data(), "dense": _dense_data()}
NB_KINDS = {"flag": "bernoulli"}


@pytest.fixture(scope="module")
def duck():
    """DuckDB with :data:`DATA` registered."""
    with duckdb.connect() as con:
        for name, table in DATA.items():
            con.register(name, table)
        yield con


@pytest.fixture(scope="module")
def models(duck):
    """Naive Bayes (mixed families, NULLs), logistic regression (3 and 2 classes) and LDA;
    the dense ones fitted on the complete rows."""
    complete = "SELECT * FROM dense WHERE u IS NOT NULL"
    two = "SELECT * FROM dense WHERE u IS NOT NULL AND y <> 'c'"
    return {
        "naive_bayes": (sqlnb.fit("mixed", "y", con=duck, exclude=["id"], feature_kinds=NB_KINDS), "mixed"),
        "logistic": (sqlnb.fit(complete, "y", con=duck, model="logistic", exclude=["id"]), "dense"),
        "logistic2": (sqlnb.fit(two, "y", con=duck, model="logistic", exclude=["id"]), "dense"),
        "lda": (sqlnb.fit(complete, "y", con=duck, model="lda", exclude=["id"]), "dense"),
    }


# -- the oracle --------------------------------------------------------------------------------
def _terms(model, table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """``(base (K,), terms (n, F, K))`` in numpy: what each feature adds to each class score."""
    d = table.to_pydict()
    n, K = table.num_rows, len(model.classes)
    terms = np.zeros((n, len(model.feature_names), K))
    if model.kind == "naive_bayes":
        params = model.log_parameters()
        for j, f in enumerate(model.features):
            p = params[f.name]
            for i, x in enumerate(d[f.name]):
                if x is None or (isinstance(x, float) and math.isnan(x)):
                    continue
                if f.kind == "gaussian":
                    mean, var = p
                    terms[i, j] = -0.5 * np.log(2 * np.pi * var) - (x - mean) ** 2 / (2 * var)
                elif f.kind == "categorical":
                    values, flp, _ = p
                    if x in values:
                        terms[i, j] = flp[:, values.index(x)]
                elif f.kind == "bernoulli":
                    flp, neg = p
                    terms[i, j] = flp if float(x) > f.threshold else neg
                else:
                    raise AssertionError(f.kind)
        return np.asarray(params["prior"], dtype=float), terms
    if model.kind == "lda":
        fit = model.fitted()
        centre, coef, base = fit["centre"], fit["coef"], fit["intercept"]
    else:
        centre, coef, base = model.centre, model.coef, model.intercept
    for j, name in enumerate(model.feature_names):
        x = np.array([np.nan if v is None else float(v) for v in d[name]])
        terms[:, j, :] = (x - centre[j])[:, None] * coef[None, :, j]
    return np.asarray(base, dtype=float), terms


def _check(model, table: pa.Table, got: dict, k: int, where: str) -> int:
    """Compare the reasons and weights of ``got`` (columns by name, rows in ``table``'s
    order) with the oracle; with every feature asked for, check the identity on the jll
    columns of the same SELECT. Returns how many rows had reasons."""
    base, terms = _terms(model, table)
    names = model.feature_names
    jll_cols = class_columns("jll_", model.classes)
    assert got["id"] == table.column("id").to_pylist(), f"{where}: rows out of order or missing"
    explained = 0
    for i in range(table.num_rows):
        row = terms[i]
        jll = base + row.sum(axis=0)
        reasons = [got[f"reason_{r}"][i] for r in range(1, k + 1)]
        weights = [got[f"reason_{r}_weight"][i] for r in range(1, k + 1)]
        if np.any(np.isnan(jll)):  # an incomplete row of a dense model: no prediction, no reasons
            assert got["prediction"][i] is None and set(reasons) == {None} and set(weights) == {None}, (where, i)
            continue
        explained += 1
        p = int(np.argmax(jll))
        rest = np.where(np.arange(len(jll)) == p, -np.inf, jll)
        r = int(np.argmax(rest))
        assert got["prediction"][i] == model.classes[p], (where, i)
        contrib = row[:, p] - row[:, r]
        order = sorted(range(len(names)), key=lambda j: (-contrib[j], j))
        want = [names[j] for j in order[:k]]
        # Names in the oracle's order, except where two contributions differ by rounding only.
        for a, b, w in zip(reasons, want, weights):
            assert a == b or abs(contrib[names.index(a)] - contrib[names.index(b)]) < TOL, (where, i, reasons, want)
            assert abs(w - contrib[names.index(a)]) < TOL, (where, i, a, w, contrib)
        assert all(w1 >= w2 - TOL for w1, w2 in zip(weights, weights[1:])), (where, i, weights)
        if k == len(names) and jll_cols[0] in got:
            sql_jll = np.array([got[c][i] for c in jll_cols], dtype=float)
            identity = sum(weights) + base[p] - base[r]
            assert abs(identity - (sql_jll[p] - sql_jll[r])) < TOL, (where, i, identity, sql_jll)
            assert set(reasons) == set(names), (where, i)
    return explained


def _duckdb_rows(model, duck, data: str, k: int) -> dict:
    rel = model.score(data, con=duck, outputs=("jll", "prediction"), keep=["id"], explain=k)
    return rel.to_arrow_table().to_pydict()


def _sqlite_rows(model, data: str, k: int) -> dict:
    db = sqlite_connection()
    sqlite_table(db, data, DATA[data])
    cur = db.execute(model.to_sql("sqlite", source=data, outputs=("jll", "prediction"), key="id", explain=k))
    names = [c[0] for c in cur.description]
    rows = cur.fetchall()
    return {n: [r[j] for r in rows] for j, n in enumerate(names)}


# -- DuckDB and SQLite ---------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["naive_bayes", "logistic", "logistic2", "lda"])
def test_identity_and_reasons_with_every_feature(models, duck, kind):
    model, data = models[kind]
    k = len(model.feature_names)
    n = DATA[data].num_rows
    base, _ = _terms(model, DATA[data][:1])
    bases = [duck.sql("SELECT " + sqlnb.sql.render(t.base, "duckdb")).fetchall()[0][0] for t in model.feature_terms()]
    np.testing.assert_allclose(bases, base, rtol=0, atol=TOL)  # what the identity adds to the contributions
    for where, got in [("duckdb", _duckdb_rows(model, duck, data, k)), ("sqlite", _sqlite_rows(model, data, k))]:
        assert len(got["id"]) == n, where
        explained = _check(model, DATA[data], got, k, f"{where} {kind}")
        assert explained == (n if data == "mixed" else n - 1), where


@pytest.mark.parametrize("kind", ["naive_bayes", "logistic"])
def test_top_two_reasons_and_output_columns(models, duck, kind):
    model, data = models[kind]
    rel = model.score(data, con=duck, outputs=("proba", "prediction"), explain=2)
    outputs = model.proba_columns() + ["prediction"] + reason_columns(2)
    assert rel.columns == DATA[data].column_names + outputs  # no helper column comes out
    got = rel.to_arrow_table().to_pydict()
    _check(model, DATA[data], got, 2, kind)
    # The weights are nats of log-odds of the prediction against the runner-up: the top
    # reason is positive on every explained row here.
    assert all(w is None or w > 0 for w in got["reason_1_weight"])


def test_hostile_feature_names_are_names(models, duck):
    model, data = models["naive_bayes"]
    got = _duckdb_rows(model, duck, data, len(model.feature_names))
    reasons = got["reason_1"] + got["reason_2"] + got["reason_3"] + got["reason_4"]
    assert HOSTILE in reasons and QUOTED in reasons
    assert set(reasons) == set(model.feature_names)


def test_text_bag_is_one_feature(duck):
    """A token bag (a text column) is one feature: its term is the whole bag's."""
    duck.register("mails", pa.table({
        "id": [1, 2, 3, 4, 5, 6],
        "body": ["cheap pills now", "meeting at noon", "cheap cheap offer", "lunch at noon", None, "noon offer"],
        "x": [2.0, 1.0, 3.0, 0.5, 2.5, 1.5], "y": ["spam", "ham", "spam", "ham", "spam", "ham"]}))
    model = sqlnb.fit("mails", "y", con=duck, exclude=["id"], text=["body"])
    rel = model.score("mails", con=duck, outputs=("jll", "prediction"), keep=["id"], explain=2)
    got = rel.to_arrow_table().to_pydict()
    assert got["id"] == [1, 2, 3, 4, 5, 6]
    base = model.log_parameters()["prior"]
    for i in range(6):
        jll = [got[c][i] for c in class_columns("jll_", model.classes)]
        p = model.classes.index(got["prediction"][i])
        r = 1 - p
        assert abs(got["reason_1_weight"][i] + got["reason_2_weight"][i] + base[p] - base[r]
                   - (jll[p] - jll[r])) < TOL
        assert {got["reason_1"][i], got["reason_2"][i]} == {"body", "x"}
    assert got["reason_2_weight"][4] == 0.0 or got["reason_1_weight"][4] == 0.0  # NULL text: no term


@pytest.mark.parametrize("kind", ["multinomial", "complement"])
def test_dot_product_shape_still_gives_one_term_per_feature(duck, kind):
    """Eight count columns or more are one dot product per class in DuckDB's scoring SELECT;
    the explanations still see each column. (Complement naive Bayes has no prior term.)"""
    rng = np.random.RandomState(3)
    k = np.arange(40) % 2
    t = pa.table({"id": np.arange(40), **{f"w{j}": rng.poisson(1 + 2 * (k == j % 2)) for j in range(9)},
                  "y": np.array(["no", "yes"])[k]})
    duck.register("counts", t)
    model = sqlnb.fit("counts", "y", con=duck, exclude=["id"], kind=kind)
    assert "list_dot_product" in model.to_sql("duckdb", explain=9).lower()
    got = _duckdb_rows(model, duck, "counts", 9)
    base = model.log_parameters()["prior"] if kind == "multinomial" else np.zeros(2)
    flp = np.array([model.log_parameters()[f"w{j}"] for j in range(9)])  # (F, K)
    X = np.column_stack([t.column(f"w{j}").to_numpy() for j in range(9)])
    for i in range(40):
        p = model.classes.index(got["prediction"][i])
        contrib = X[i] * (flp[:, p] - flp[:, 1 - p])
        weights = [got[f"reason_{r}_weight"][i] for r in range(1, 10)]
        names = [got[f"reason_{r}"][i] for r in range(1, 10)]
        assert [abs(w - contrib[int(n[1:])]) < TOL for w, n in zip(weights, names)] == [True] * 9
        assert weights == sorted(weights, reverse=True) and sorted(names) == [f"w{j}" for j in range(9)]
        jll = [got[c][i] for c in class_columns("jll_", model.classes)]
        assert abs(sum(weights) + base[p] - base[1 - p] - (jll[p] - jll[1 - p])) < TOL


def test_runner_up_ties_go_to_the_first_class(duck):
    """Uniform prior and a feature the classes model alike: every score ties; the
    prediction is the first class, the runner-up the second, every contribution 0."""
    t = pa.table({"x": [1.0, 2.0, 1.0, 2.0, 1.0, 2.0], "y": ["a", "a", "b", "b", "c", "c"]})
    duck.register("tied", t)
    model = sqlnb.fit("tied", "y", con=duck, class_prior="uniform")
    got = model.score("tied", con=duck, explain=1).to_arrow_table().to_pydict()
    assert got["prediction"] == ["a"] * 6
    assert got["reason_1"] == ["x"] * 6 and got["reason_1_weight"] == [0.0] * 6


@pytest.mark.parametrize(("k", "message"), [
    (0, "at least 1"), (-2, "at least 1"), (5, "has 4 features; give at most 4"), (1.5, "whole number"),
    ("2", "whole number"), (True, "whole number"),
])
def test_bad_number_of_reasons(models, duck, k, message):
    model, data = models["naive_bayes"]
    with pytest.raises(SqlnbError, match=message):
        model.score(data, con=duck, explain=k)
    with pytest.raises(SqlnbError, match=message):
        model.to_sql("sqlite", explain=k)


def test_qda_has_no_explanations(duck):
    model = sqlnb.fit("SELECT * FROM dense WHERE u IS NOT NULL", "y", con=duck, model="qda", exclude=["id"])
    with pytest.raises(SqlnbError, match="not defined for QDA: its score is a quadratic form"):
        model.score("dense", con=duck, explain=1)
    with pytest.raises(SqlnbError, match="not defined for QDA"):
        model.to_sql("sqlite", explain=1)


@pytest.mark.slow  # 11-90 s a run under load (measured durations)
def test_most_reasons_run_in_sqlite_and_more_are_refused(duck):
    """K = MAX_REASONS makes the longest chain of CTEs: SQLite runs it (nested subqueries
    overflowed its parser from about 20 reasons on) and gives DuckDB's reasons."""
    F = MAX_REASONS + 1
    rng = np.random.RandomState(2)
    t = pa.table({"id": np.arange(12), **{f"x{j}": rng.normal(np.arange(12) % 2 * (j % 4) * 0.3, 1.0)
                                           for j in range(F)}, "y": np.array(["a", "b"])[np.arange(12) % 2]})
    duck.register("wide", t)
    model = sqlnb.fit("wide", "y", con=duck, exclude=["id"], screen=False)
    with pytest.raises(SqlnbError, match=f"past the limit of {MAX_REASONS}"):
        model.to_sql("duckdb", explain=F)
    db = sqlite_connection()
    sqlite_table(db, "wide", t)
    cur = db.execute(model.to_sql("sqlite", source="wide", outputs=("prediction",), key="id", explain=MAX_REASONS))
    names = [c[0] for c in cur.description]
    got = [[row[names.index(c)] for c in reason_columns(MAX_REASONS)] for row in cur.fetchall()]
    want = model.score("wide", con=duck, outputs=("prediction",), keep=[], explain=MAX_REASONS).fetchall()
    for g, w in zip(got, want, strict=True):
        assert g[:MAX_REASONS] == list(w[1:MAX_REASONS + 1])
        np.testing.assert_allclose(g[MAX_REASONS:], w[MAX_REASONS + 1:], rtol=0, atol=TOL)


def test_source_column_named_like_a_reason_is_refused(models, duck):
    model, _ = models["logistic"]
    duck.execute('CREATE TEMP TABLE clash AS SELECT *, 1 AS "reason_1" FROM dense')
    with pytest.raises(SqlnbError, match="already has a column named 'reason_1'"):
        model.score("clash", con=duck, explain=1)
    model.score("clash", con=duck, explain=1, keep=["id"]).fetchall()  # left out: fine


# -- CLI -------------------------------------------------------------------------------------------
def test_cli_score_and_sql_explain(models, tmp_path):
    model, data = models["naive_bayes"]
    pq = write_parquet(DATA[data], tmp_path / "mixed.parquet")
    model.save(str(tmp_path / "m.duckdb"), "nb")
    where = f"{tmp_path / 'm.duckdb'}:nb"
    out = tmp_path / "scored.parquet"
    res = invoke("score", pq, "--model", where, "--out", out, "--explain", "4", "--no-proba")
    assert res.exit_code == 0, res.output
    got = duckdb.sql(f"SELECT * FROM '{out}'").to_arrow_table()
    assert got.column_names == DATA[data].column_names + ["prediction"] + reason_columns(4)
    _check(model, DATA[data], got.to_pydict(), 4, "cli")
    res = invoke("sql", "--model", where, "--dialect", "sqlite", "--explain", "2")
    assert res.exit_code == 0 and '"reason_2_weight"' in res.output, res.output
    assert_error(invoke("score", pq, "--model", where, "--out", tmp_path / "x.parquet", "--explain", "0"),
                 "at least 1")
    assert not (tmp_path / "x.parquet").exists()
    with duckdb.connect(str(tmp_path / "m.duckdb")) as con:  # a table the SQL would read, next to the model
        con.execute('CREATE TABLE clash AS SELECT 1 AS "reason_2"')
    assert_error(invoke("sql", "--model", where, "--source", "clash", "--explain", "2"),
                 "already has a column named 'reason_2'")


# -- PostgreSQL and Spark ---------------------------------------------------------------------------
def _on_engine(engine, models, rows) -> None:
    """Naive Bayes and logistic regression scored on ``engine`` with every reason;
    ``rows`` turns its result into columns by name."""
    for kind in ("naive_bayes", "logistic"):
        model, data = models[kind]
        k = len(model.feature_names)
        got = model.score(data, con=engine, outputs=("jll", "prediction"), keep=["id"], key="id", explain=k)
        _check(model, DATA[data], rows(got), k, f"{engine.dialect} {kind}")


@pytest.mark.postgres
def test_postgres_explanations(models):
    with postgres_engine(DATA) as engine:
        _on_engine(engine, models, lambda t: t.to_pydict())


@pytest.mark.spark
def test_spark_explanations(models):
    def rows(df):
        collected = [r.asDict() for r in df.collect()]
        return {c: [r[c] for r in collected] for c in df.columns}
    with spark_engine(DATA) as engine:
        _on_engine(engine, models, rows)


def _three_classes(n: int = 240, seed: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    return pa.table({
        "a": rng.normal(y, 1.0), "b": rng.normal(-y, 1.5),
        "c": pa.array(np.array(["r", "g", "u"])[(y + (rng.random(n) < 0.4)) % 3].tolist()),
        "y": pa.array(np.array(["p", "q", "s"])[y].tolist()),
    })


def _check_reasons(rows: list[dict], classes: list[str], log_prior: dict, k: int) -> int:
    """Every row's reasons explain its ``prediction`` d against the runner-up r (the
    highest-scored other class): with every feature a reason, the weights plus the prior
    difference are jll_d − jll_r. Returns the rows whose prediction is not the argmax."""
    flipped = 0
    for row in rows:
        jll = [float(row[f"jll_{c}"]) for c in classes]
        if not row["prediction"]:
            assert all(row[f"reason_{i}"] in ("", None) for i in range(1, k + 1)), row
            continue
        d = classes.index(row["prediction"])
        flipped += d != int(np.argmax(jll))
        r = max((i for i in range(len(classes)) if i != d), key=lambda i: (jll[i], -i))
        weights = sum(float(row[f"reason_{i}_weight"]) for i in range(1, k + 1))
        assert weights + log_prior[classes[d]] - log_prior[classes[r]] == pytest.approx(jll[d] - jll[r], abs=1e-9)
    return flipped


def test_cli_explain_under_costs_explains_the_prediction(tmp_path):
    t = _three_classes()
    import pyarrow.csv as pcsv
    pcsv.write_csv(t, tmp_path / "train.csv")
    (tmp_path / "costs.csv").write_text("actual,predicted,cost\nq,p,8\ns,p,8\n")
    model = f"{tmp_path}/m.duckdb:nb"
    assert invoke("fit", tmp_path / "train.csv", "--label", "y", "--model", model).exit_code == 0
    r = run_process("score", tmp_path / "train.csv", "--model", model, "--costs", tmp_path / "costs.csv",
                    "--explain", "3", "--outputs", "jll,prediction", "--out", "-", module=True)
    assert r.returncode == 0, r.stderr
    counts = dict(zip(*np.unique(t["y"].to_numpy(zero_copy_only=False), return_counts=True)))
    log_prior = {c: math.log(n / len(t)) for c, n in counts.items()}
    rows = csv_rows(r.stdout)
    assert _check_reasons(rows, ["p", "q", "s"], log_prior, 3) >= 10  # the rule flips rows, all explained


def test_explain_under_threshold_and_reject_in_duckdb_and_sqlite():
    rng = np.random.default_rng(5)
    n = 200
    y = rng.integers(0, 2, n)
    t = pa.table({"id": np.arange(n), "a": rng.normal(y, 1.0), "b": rng.normal(0.5 * y, 1.0),
                  "y": pa.array(np.array(["neg", "pos"])[y].tolist())})
    m = sqlnb.fit(t, "y", features=["a", "b"])
    m.decision = DecisionRule.for_model(m, threshold="pos=0.2", reject=0.45)
    log_prior = {c: math.log(int((t["y"].to_numpy(zero_copy_only=False) == c).sum()) / n) for c in m.classes}
    con = duckdb.connect()
    con.register("t", t)
    got = m.score("t", con, outputs=("jll", "prediction"), keep=["id"], explain=2).to_arrow_table().to_pylist()
    flipped = _check_reasons(got, list(m.classes), log_prior, 2)
    assert flipped >= 5 and any(g["prediction"] is None for g in got)
    # Without `prediction` among the outputs the reasons are the same: the rule's class.
    alone = m.score("t", con, outputs=("jll",), keep=["id"], explain=2).to_arrow_table().to_pylist()
    assert [[a[f"reason_{i}"] for i in (1, 2)] for a in alone] == [[g[f"reason_{i}"] for i in (1, 2)] for g in got]
    # The exported SQL explains the same in SQLite.
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE src (id INTEGER, a REAL, b REAL)")
    db.executemany("INSERT INTO src VALUES (?, ?, ?)", [(int(i), float(a), float(b)) for i, a, b in
                                                         zip(t["id"].to_pylist(), t["a"].to_pylist(), t["b"].to_pylist())])
    cur = db.execute(m.to_sql("sqlite", source="src", outputs=("jll", "prediction"), key="id", explain=2))
    cols = [c[0] for c in cur.description]
    lite = [dict(zip(cols, row)) for row in cur.fetchall()]
    assert [r["prediction"] for r in lite] == [g["prediction"] for g in got]
    assert [r["reason_1"] for r in lite] == [g["reason_1"] for g in got]
