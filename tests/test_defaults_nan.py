"""NaN is missing on every scoring path, whoever wrote the data.

DuckDB answers a comparison on a Parquet column from the row-group min/max statistics,
and pyarrow's writer leaves NaN out of them: over such a file ``NULLIF(x, 'NaN')`` and
``x = 'NaN'`` were folded to "not NaN", and the NaN reached the scores (Gaussian and count
families: NULL probabilities; Bernoulli: NaN scored as present; binned: NaN in the last
bin). Every NaN test is now :func:`sqlnb.sql.is_nan` (``isnan``, evaluated per row).

The property test draws the writer (pyarrow Parquet with and without statistics,
DuckDB-written Parquet, CSV, an Arrow table, a DuckDB table), the family, the shape
(narrow: a term per column; wide: Gaussian/Bernoulli lists, multinomial/complement dot
products, a categorical vocabulary packed past ``INLINE_MAX``), a row and the columns that
are NaN in it. A row with NaN must score as the same row with NULL there (1e-12), and as
scikit-learn's model with those columns marginalised out (1e-9); the complete rows of the
same file as scikit-learn's ``predict_proba``. Then binned, TAN, ``explain``, calibrated
and decision-rule models, exported SQL run in DuckDB, and the fit-time refusal's
suggestion.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from sklearn.naive_bayes import BernoulliNB, CategoricalNB, ComplementNB, GaussianNB, MultinomialNB

import sqlnb
from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.models.calibration import calibrate
from sqlnb.models.decision import DecisionRule
from sqlnb.models.naive_bayes.families.categorical import INLINE_MAX
from sqlnb.models.naive_bayes.model import DOT_MIN
from sqlnb.models.naive_bayes.wide import WIDE_MIN
from support.hypothesis_profiles import examples

WRITERS = ("pyarrow_stats", "pyarrow_nostats", "duckdb_parquet", "csv", "arrow", "duckdb_table")
#: The paths beside the families, each with the writer DuckDB folds over and one it does
#: not (the property test crosses every writer with every family and shape).
SIDE_WRITERS = ("pyarrow_stats", "csv")
FAMILIES = ("gaussian", "bernoulli", "multinomial", "complement", "categorical")
#: Columns per (family, shape): wide is the list / dot-product / packed-vocabulary shape.
WIDTH = {"narrow": {f: 4 for f in FAMILIES},
         "wide": {"gaussian": WIDE_MIN + 4, "bernoulli": WIDE_MIN + 4, "multinomial": DOT_MIN + 2,
                  "complement": DOT_MIN + 2, "categorical": 3}}
N_TRAIN = 240
#: Values of a categorical column (codes 0..m-1 stored as DOUBLE); wide: past INLINE_MAX.
CATEGORIES = {"narrow": 4, "wide": INLINE_MAX + 20}


def write(writer: str, table: pa.Table, where, name: str = "s"):
    """``table`` as ``writer`` stores it: (data for Model.score, the connection to use)."""
    con = duckdb.connect()
    if writer == "arrow":
        return table, con
    if writer == "duckdb_table":
        con.register("arrow_in", table)
        con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM arrow_in')
        con.unregister("arrow_in")
        return name, con
    path = str(where / f"{name}_{writer}.{'csv' if writer == 'csv' else 'parquet'}")
    if writer == "pyarrow_stats":
        pq.write_table(table, path)
    elif writer == "pyarrow_nostats":
        pq.write_table(table, path, write_statistics=False)
    elif writer == "duckdb_parquet":
        con.register("arrow_in", table)
        con.execute(f"COPY arrow_in TO '{path}' (FORMAT parquet)")
        con.unregister("arrow_in")
    else:
        pcsv.write_csv(table, path)
    return path, con


def train_matrix(family: str, shape: str, seed: int = 7):
    """Training features and a 3-class label for ``family`` (no NaN, no NULL)."""
    rng = np.random.default_rng(seed)
    d = WIDTH[shape][family]
    y = np.arange(N_TRAIN) % 3
    if family == "gaussian":
        # wide: weak columns, so that hundreds of them still leave probabilities off 0 and 1
        X = rng.normal(size=(N_TRAIN, d)) * (1 + 0.3 * y[:, None]) + (0.04 if shape == "wide" else 0.6) * y[:, None]
    elif family == "bernoulli":
        p = 0.45 + (0.02 if shape == "wide" else 0.15) * (y[:, None] - 1)
        X = (rng.random((N_TRAIN, d)) < p).astype(float) * rng.uniform(0.5, 3.0, (N_TRAIN, d))
    elif family in ("multinomial", "complement"):
        X = rng.poisson(1.0 + 0.5 * y[:, None] + np.arange(d) % 3, (N_TRAIN, d)).astype(float)
    else:
        m = CATEGORIES[shape]
        X = np.stack([(rng.integers(0, m, N_TRAIN) + y * (j + 1)) % m for j in range(d)], axis=1)
        X[:m] = np.arange(m)[:, None]  # every value seen in training
        X = X.astype(float)
    return X, y


@functools.lru_cache(maxsize=None)
def models(family: str, shape: str):
    """(sqlnb model, scikit-learn model) fitted on the same rows, defaults of both."""
    X, y = train_matrix(family, shape)
    cols = {f"x{j}": X[:, j] for j in range(X.shape[1])}
    m = sqlnb.fit(pa.table({**cols, "y": y}), "y", kind=family, features=list(cols), screen=False)
    sk = {"gaussian": GaussianNB, "bernoulli": BernoulliNB, "multinomial": MultinomialNB,
          "complement": ComplementNB, "categorical": CategoricalNB}[family]()
    sk.fit(X.astype(int) if family == "categorical" else X, y)
    return m, sk


def sklearn_proba(family: str, sk, x: np.ndarray, missing: np.ndarray) -> np.ndarray:
    """scikit-learn's posterior of row ``x`` with the columns ``missing`` marginalised out
    (no term), from its fitted parameters; with none missing, its ``predict_proba``."""
    if not missing.any():
        return sk.predict_proba((x.astype(int) if family == "categorical" else x)[None, :])[0]
    keep = ~missing
    if family == "gaussian":
        terms = -0.5 * np.log(2 * np.pi * sk.var_) - 0.5 * (x - sk.theta_) ** 2 / sk.var_
        jll = np.log(sk.class_prior_) + terms[:, keep].sum(axis=1)
    elif family == "bernoulli":
        b = (x > 0).astype(float)
        flp = sk.feature_log_prob_
        neg = np.log(1 - np.exp(flp))
        jll = sk.class_log_prior_ + (b * flp + (1 - b) * neg)[:, keep].sum(axis=1)
    elif family in ("multinomial", "complement"):  # a missing count adds nothing, as a 0 count
        return sk.predict_proba(np.where(missing, 0.0, x)[None, :])[0]
    else:
        jll = sk.class_log_prior_ + sum(sk.feature_log_prob_[j][:, int(x[j])] for j in np.flatnonzero(keep))
    jll = jll - jll.max()
    return np.exp(jll) / np.exp(jll).sum()


def scored(model, data, con, **kw) -> dict:
    rel = model.score(data, con, **kw)
    return dict(zip(rel.columns, map(list, zip(*rel.fetchall()))))


def probas(model, out: dict) -> np.ndarray:
    return np.array([out[c] for c in model.proba_columns()], dtype=float).T


def scoring_table(x: np.ndarray, missing: np.ndarray, others: np.ndarray, gap) -> pa.Table:
    """Rows: ``x`` with ``gap`` (NaN or None) where ``missing``, then ``others``: complete
    rows, so that each column of the NaN file has values around its NaN in the row group
    and no NULL (DuckDB folds from the statistics of a column without NULLs)."""
    cols = {f"x{j}": pa.array([gap if missing[j] else x[j], *others[:, j]], pa.float64()) for j in range(len(x))}
    return pa.table(cols)


def nan_and_null(writer, make, where) -> tuple[dict, dict]:
    """Score ``make(NaN)`` and ``make(None)``, each as ``writer`` stores it: (NaN outputs,
    NULL outputs); ``make`` gives ``(model, table)``."""
    out = []
    for gap, name in ((math.nan, "nan"), (None, "null")):
        model, table, kw = make(gap)
        data, con = write(writer, table, where, name)
        out.append(scored(model, data, con, **kw))
    return out[0], out[1]


def assert_same_row(model, nan_out: dict, null_out: dict, what: str, row: int = 0):
    """Row ``row`` scored with NaN equals the row with NULL: probabilities (1e-12), scores,
    prediction, and any further output (reasons, expected cost)."""
    p, q = probas(model, nan_out)[row], probas(model, null_out)[row]
    assert not np.isnan(p).any(), f"{what}: NULL probabilities {p}, with NULL {q}"
    np.testing.assert_allclose(p, q, rtol=0, atol=1e-12, err_msg=what)
    for c in nan_out:
        if c in MIXED or c.startswith("x"):  # a source column passed through (exported SQL's *)
            continue
        a, b = nan_out[c][row], null_out[c][row]
        if isinstance(b, float):
            assert a is not None and a == pytest.approx(b, rel=1e-12, abs=1e-12), f"{what}: {c} {a} against {b}"
        else:
            assert a == b, f"{what}: {c} {a!r} against {b!r}"


SETTINGS = settings(max_examples=examples(40))


@SETTINGS
@given(writer=st.sampled_from(WRITERS), family=st.sampled_from(FAMILIES),
       shape=st.sampled_from(("narrow", "wide")), seed=st.integers(0, 2 ** 31 - 1), data=st.data())
def test_nan_scores_as_null_property(tmp_path_factory, writer, family, shape, seed, data):
    event(f"{writer} {family} {shape}")
    m, sk = models(family, shape)
    X, _ = train_matrix(family, shape, seed=seed)  # rows of the same distribution, other draws
    d = X.shape[1]
    nan_cols = data.draw(st.sets(st.integers(0, d - 1), min_size=1, max_size=min(d, 5)), label="NaN columns")
    missing = np.zeros(d, dtype=bool)
    missing[sorted(nan_cols)] = True
    x, others = X[0], X[1:4]
    nan_out, null_out = nan_and_null(writer, lambda gap: (m, scoring_table(x, missing, others, gap), dict(keep=[])),
                                     tmp_path_factory.mktemp("nan"))
    assert_same_row(m, nan_out, null_out, f"{writer} {family} {shape}")
    p = probas(m, nan_out)
    assert p.shape == (1 + len(others), len(m.classes))
    np.testing.assert_allclose(p[0], sklearn_proba(family, sk, x, missing), rtol=0, atol=1e-9)
    for i, row in enumerate(others):
        np.testing.assert_allclose(p[1 + i], sklearn_proba(family, sk, row, np.zeros(d, dtype=bool)),
                                   rtol=0, atol=1e-9)


# -- the paths beside the families -----------------------------------------------------------
def _mixed_train(seed: int = 3, n: int = 300) -> pa.Table:
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    return pa.table({
        "g": rng.normal(size=n) + y, "h": rng.normal(size=n) * (1 + y),
        "b": (rng.random(n) < 0.3 + 0.4 * y).astype(float),
        "c": ((rng.integers(0, 3, n) + y) % 3).astype(float),
        "y": y,
    })


MIXED = ("g", "h", "b", "c")


def _mixed_rows(gap) -> pa.Table:
    """Row i < 4: ``gap`` (NaN or None) in column ``MIXED[i]``; then two complete rows."""
    base = {"g": [0.3, 0.3, 0.3, 0.3, -1.0, 2.0], "h": [1.5, 1.5, 1.5, 1.5, 0.2, -0.7],
            "b": [1.0, 1.0, 1.0, 1.0, 0.0, 1.0], "c": [2.0, 2.0, 2.0, 2.0, 0.0, 1.0]}
    for i, col in enumerate(MIXED):
        base[col][i] = gap
    return pa.table({k: pa.array(v, pa.float64()) for k, v in base.items()})


def assert_same_rows(model, nan_out, null_out, what):
    for i, col in enumerate(MIXED):
        assert_same_row(model, nan_out, null_out, f"{what}, NaN in {col}", row=i)


@functools.lru_cache(maxsize=None)
def _mixed_model(**kw):
    kw = {"features": ("g", "h", "b"), "feature_kinds": (("b", "bernoulli"),), **kw}
    kw = {k: (dict(v) if k in ("feature_kinds", "bins") else list(v)) if isinstance(v, tuple) else v
          for k, v in kw.items()}
    return sqlnb.fit(_mixed_train(), "y", screen=False, **kw)


@pytest.mark.parametrize("writer", SIDE_WRITERS)
@pytest.mark.parametrize("bins", ["quantile:4", "mdl"])
def test_binned(tmp_path, writer, bins):
    """The reported case: a binned NaN was put in the last bin over pyarrow's Parquet."""
    m = _mixed_model(bins=bins)
    nan_out, null_out = nan_and_null(writer, lambda gap: (m, _mixed_rows(gap), dict(keep=[])), tmp_path)
    assert_same_rows(m, nan_out, null_out, f"{writer} binned {bins}")


@pytest.mark.parametrize("writer", SIDE_WRITERS)
def test_tan_value_positions(tmp_path, writer):
    """TAN reads its tree features' value positions (Bernoulli, binned, categorical on
    numbers): NaN is no position, as NULL."""
    m = _mixed_model(features=("g", "h", "b", "c"), bins=(("g", "quantile:3"), ("h", "quantile:3")),
                     feature_kinds=(("b", "bernoulli"), ("c", "categorical")), structure="tan")
    assert m.tree(), "no tree: the test would not cross TAN's value positions"
    nan_out, null_out = nan_and_null(writer, lambda gap: (m, _mixed_rows(gap), dict(keep=[])), tmp_path)
    assert_same_rows(m, nan_out, null_out, f"{writer} TAN")


@pytest.mark.parametrize("writer,family,shape", [
    *[(w, f, "narrow") for w in SIDE_WRITERS for f in ("gaussian", "bernoulli", "multinomial")],
    ("pyarrow_stats", "multinomial", "wide")])
def test_explain(tmp_path, writer, family, shape):
    """``explain`` reasons and weights (the per-term form also for a wide model, the
    reported case: explained, its terms are not the dot product). A 260-column Bernoulli or
    Gaussian model takes ~10 s a scoring with ``explain`` and its top reasons did not
    involve the NaN columns (it passed on f6098f3): not here."""
    m, _ = models(family, shape)
    X, _ = train_matrix(family, shape, seed=11)
    d = X.shape[1]
    missing = np.zeros(d, dtype=bool)
    missing[[0, d - 1]] = True
    nan_out, null_out = nan_and_null(
        writer, lambda gap: (m, scoring_table(X[0], missing, X[1:4], gap), dict(keep=[], explain=3)), tmp_path)
    assert_same_row(m, nan_out, null_out, f"{writer} {family} {shape} explain")
    assert all(nan_out[f"reason_{i}_weight"][0] is not None for i in (1, 2, 3))


@pytest.mark.parametrize("writer", SIDE_WRITERS)
@pytest.mark.parametrize("method", ["temperature", "platt", "isotonic"])
def test_calibrated(tmp_path, writer, method):
    """A calibrated model scores NaN as NULL; and a calibrator fitted on held-out rows
    with NaN equals the one fitted on the same rows with NULL."""
    m = _mixed_model()
    held = _mixed_train(seed=5, n=120)
    g = held.column("g").to_numpy(zero_copy_only=False).copy()
    g[::7] = math.nan
    cals = []
    for gap, name in ((math.nan, "held_nan"), (None, "held_null")):
        data, con = write(writer, held.set_column(0, "g", pa.array([gap if math.isnan(v) else v for v in g],
                                                                 pa.float64())), tmp_path, name)
        cals.append(calibrate(m, data, method, con=con))
    assert dataclasses.replace(cals[0].calibration, source="") == dataclasses.replace(cals[1].calibration, source="")
    nan_out, null_out = nan_and_null(writer, lambda gap: (cals[0], _mixed_rows(gap), dict(keep=[])), tmp_path)
    assert_same_rows(cals[0], nan_out, null_out, f"{writer} {method}")


@pytest.mark.parametrize("writer", SIDE_WRITERS)
@pytest.mark.parametrize("rule", [dict(costs={(0, 1): 5.0}), dict(threshold="1=0.3"), dict(reject=0.2)])
def test_decision_rule(tmp_path, writer, rule):
    m = copy.copy(_mixed_model())
    m.decision = DecisionRule.for_model(m, **rule)
    nan_out, null_out = nan_and_null(writer, lambda gap: (m, _mixed_rows(gap), dict(keep=[])), tmp_path)
    assert_same_rows(m, nan_out, null_out, f"{writer} {rule}")
    assert "expected_cost" in nan_out


@pytest.mark.parametrize("writer", SIDE_WRITERS + ("duckdb_table",))
@pytest.mark.parametrize("family,shape", [(f, s) for f in FAMILIES for s in ("narrow", "wide")])
def test_exported_sql_in_duckdb(tmp_path, writer, family, shape):
    """``model.to_sql()`` run in DuckDB over a view ``input`` of what the writer stored,
    without and with the connection that resolves its columns."""
    m, sk = models(family, shape)
    X, _ = train_matrix(family, shape, seed=13)
    d = X.shape[1]
    missing = np.zeros(d, dtype=bool)
    missing[[0, d // 2]] = True
    outs = {}
    for gap, name in ((math.nan, "nan"), (None, "null")):
        data, con = write(writer, scoring_table(X[0], missing, X[1:4], gap), tmp_path, name)
        columns = "{" + ", ".join(f"'x{j}': 'DOUBLE'" for j in range(d)) + "}"
        src = {"duckdb_table": f'"{data}"', "csv": f"read_csv('{data}', columns={columns}, header=true)"}.get(
            writer, f"read_parquet('{data}')")
        con.execute(f"CREATE VIEW input AS SELECT * FROM {src}")
        for how, text in (("bare", m.to_sql("duckdb")), ("resolved", m.to_sql("duckdb", source="input", con=con))):
            rel = con.sql(text)
            outs[gap is None, how] = dict(zip(rel.columns, map(list, zip(*rel.fetchall()))))
    for how in ("bare", "resolved"):
        assert_same_row(m, outs[False, how], outs[True, how], f"{writer} {family} {shape} exported {how}")
        np.testing.assert_allclose(probas(m, outs[False, how])[0], sklearn_proba(family, sk, X[0], missing),
                                   rtol=0, atol=1e-9)


@pytest.mark.parametrize("dialect,spelling", [
    ("duckdb", "(NOT ISFINITE({x}) AND NOT ISINF({x}))"), ("spark", "ISNAN({x})"), ("trino", "IS_NAN({x})"),
    ("postgres", "({x} = CAST('NaN' AS DOUBLE PRECISION))"), ("snowflake", "({x} = CAST('nan' AS DOUBLE))")])
def test_every_nan_test_is_isnan(dialect, spelling):
    """No NULLIF on NaN in exported SQL; each dialect's NaN test as it can run it, on a
    Bernoulli column and on a categorical column of numbers with ``unseen="bucket"`` (NaN
    is missing there, not the bucket, also when joined for another dialect)."""
    m = sqlnb.fit(_mixed_train(), "y", features=["g", "h", "b", "c"], feature_kinds={"c": "categorical", "b": "bernoulli"},
                  unseen="bucket", screen=False)
    text = m.to_sql(dialect, pretty=False)
    assert "NULLIF" not in text.upper()
    for x in (sql.as_double(sql.col("b", "src")), sql.col("c", "src")):
        assert spelling.format(x=sql.render(x, dialect)) in text


def test_fit_refusal_suggests_what_works(tmp_path):
    """NaN in a categorical column at fit is refused, and the suggested source query
    (not NULLIF, which DuckDB folds away over pyarrow's statistics) makes it missing: the
    model equals the one fitted on the same rows with NULL."""
    t = _mixed_train()
    c = t.column("c").to_numpy(zero_copy_only=False).copy()
    c[::9] = math.nan
    path = str(tmp_path / "train.parquet")
    pq.write_table(t.set_column(3, "c", pa.array(c, pa.float64())), path)
    kw = dict(features=["g", "c"], feature_kinds={"c": "categorical"}, screen=False)
    with pytest.raises(SqlnbError, match="holds NaN") as e:
        sqlnb.fit(path, "y", **kw)
    message = str(e.value)
    assert "NULLIF" not in message
    fix = message.split("source query (")[1].split(") so it counts")[0]
    m = sqlnb.fit(f"SELECT * REPLACE ({fix}) FROM read_parquet('{path}')", "y", **kw)
    ref = sqlnb.fit(t.set_column(3, "c", pa.array([None if math.isnan(v) else v for v in c], pa.float64())),
                    "y", **kw)
    rows = _mixed_rows(0.5)
    np.testing.assert_allclose(probas(m, scored(m, rows, None, keep=[])), probas(ref, scored(ref, rows, None, keep=[])),
                               rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind", ["gaussian", "bernoulli", "multinomial", "complement"])
def test_fit_refuses_nan_in_pyarrow_parquet(tmp_path, kind):
    """The fit side over a pyarrow file with statistics: NaN is refused (never silently a
    value), and the source query the refusal's advice leads to fits."""
    t = _mixed_train()
    h = np.abs(t.column("h").to_numpy(zero_copy_only=False)).copy()
    h[5] = math.nan
    path = str(tmp_path / "train.parquet")
    pq.write_table(t.set_column(1, "h", pa.array(h, pa.float64())), path)
    with pytest.raises(SqlnbError, match="'h'.*NaN"):
        sqlnb.fit(path, "y", kind=kind, features=["h"], screen=False)
    # NaN as NULL as DuckDB cannot fold it away (NULLIF(h, 'NaN') and isnan(h) are folded)
    fixed = (f'SELECT * REPLACE (CASE WHEN NOT isfinite("h") AND NOT isinf("h") THEN NULL ELSE "h" END AS "h") '
             f"FROM read_parquet('{path}')")
    m = sqlnb.fit(fixed, "y", kind=kind, features=["h"], screen=False)
    assert m.stats is not None
