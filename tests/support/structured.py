"""What the tests of the structures over discrete features (TAN, KDB, AODE, their average)
share besides their numpy oracles (:mod:`support.discrete_oracle`): the module's rows
registered in DuckDB, the class columns of a scoring, the test rows in SQLite, the check
of a scoring run by PostgreSQL or Spark, the files of a command-line test, and
cross-validation's folds as views to fit on by hand."""

from __future__ import annotations

import sqlite3

import duckdb
import numpy as np
import pyarrow as pa

#: The SQLite column type of each Arrow type the generated tables hold (a BOOLEAN as 0/1).
SQLITE_TYPES = {pa.int64(): "INTEGER", pa.string(): "TEXT", pa.bool_(): "INTEGER", pa.float64(): "REAL"}


def registered(train: pa.Table, test: pa.Table) -> tuple[duckdb.DuckDBPyConnection, pa.Table, pa.Table]:
    """A fresh DuckDB connection with ``train`` and ``test`` registered under those names."""
    con = duckdb.connect()
    con.register("train", train)
    con.register("test", test)
    return con, train, test


def class_scores(model, data, con, what: str) -> np.ndarray:
    """The class columns of output ``what`` (``"proba"``, ``"jll"``) of ``model`` scoring
    ``data``: a row per input row, a column per class."""
    rel = model.score(data, con=con, outputs=(what,), keep=["rid"])
    return np.array(rel.fetchall(), dtype=float)[:, -len(model.classes):]


def sqlite_input(test: pa.Table) -> sqlite3.Connection:
    """An in-memory SQLite database holding ``test`` as the table ``input``, each column
    typed by :data:`SQLITE_TYPES`."""
    lite = sqlite3.connect(":memory:")
    lite.execute(f"CREATE TABLE input ({', '.join(f'{f.name} {SQLITE_TYPES[f.type]}' for f in test.schema)})")
    bools = {f.name for f in test.schema if f.type == pa.bool_()}
    lite.executemany(f"INSERT INTO input VALUES ({', '.join('?' * test.num_columns)})",
                     [tuple(None if r[c] is None else (int(r[c]) if c in bools else r[c]) for c in test.column_names)
                      for r in test.to_pylist()])
    return lite


def assert_engine_proba(got, want: np.ndarray, classes: list, atol: float) -> None:
    """``got``, a scoring with the ``proba`` outputs and key ``rid`` that PostgreSQL (an
    Arrow table) or Spark (a DataFrame) ran: one row per row of ``want``, in key order,
    each class's probability within ``atol`` of ``want``'s."""
    table = got.toArrow() if hasattr(got, "toArrow") else got
    d = table.to_pydict()
    proba = np.array([d[f"proba_{c}"] for c in classes], dtype=float).T
    assert d["rid"] == sorted(d["rid"]) and len(d["rid"]) == len(want)
    np.testing.assert_allclose(proba, want, rtol=0, atol=atol)


def cli_files(tmp_path, train: pa.Table, kinds: dict, split: int | None = None) -> tuple[str, list[str]]:
    """``train`` written to ``all.parquet`` under ``tmp_path`` (with ``split``, also its
    first ``split`` rows to ``a.parquet`` and the rest to ``b.parquet``). Returns the path
    of a model store there and the ``sqlnb fit`` options for the label ``y`` and the
    features ``kinds`` (name -> kind)."""
    import pyarrow.parquet as pq
    if split is not None:
        pq.write_table(train.slice(0, split), tmp_path / "a.parquet")
        pq.write_table(train.slice(split), tmp_path / "b.parquet")
    pq.write_table(train, tmp_path / "all.parquet")
    feature_kinds = ",".join(f"{k}={v}" for k, v in kinds.items())
    return str(tmp_path / "m.duckdb"), ["--label", "y", "--features", ",".join(kinds), "--feature-kind", feature_kinds]


def fold_views(con, source: str = "train", folds: int = 3) -> list[tuple[str, str]]:
    """The folds :func:`sqlnb.cross_validate` deals ``source`` to (label ``y``, key ``rid``,
    seed 0) as DuckDB views: for fold i, ``fit_i`` (the other folds' rows) and ``held_i``
    (fold i's labelled rows), without the fold column. Returns the ``(fit_i, held_i)`` names."""
    from sqlglot import exp

    from sqlnb import sql
    from sqlnb.source import resolve
    from sqlnb.workflows.cv import assign_folds
    src = resolve(source, con)
    folded, fold = assign_folds(src, "y", folds, 0, ["rid"])
    with_fold = exp.select(*[sql.col(c, "src") for c in src.columns],
                           exp.alias_(fold, "fold", quoted=True)).from_(folded.from_("src"))
    con.execute("CREATE OR REPLACE TEMP TABLE folded AS " + sql.render(with_fold))
    views = []
    for i in range(folds):
        con.execute(f"CREATE OR REPLACE TEMP VIEW fit_{i} AS SELECT * EXCLUDE (fold) FROM folded WHERE fold <> {i}")
        con.execute(f"CREATE OR REPLACE TEMP VIEW held_{i} AS SELECT * EXCLUDE (fold) FROM folded "
                    f"WHERE fold = {i} AND y IS NOT NULL")
        views.append((f"fit_{i}", f"held_{i}"))
    return views


def assert_cv_accuracy_is_fold_fits(con, structures: list[str], discrete: dict, fit,
                                    alphas: list | None = None) -> None:
    """:func:`sqlnb.cross_validate` of ``train`` over ``structures`` (and with ``alphas``
    each of them too; 3 folds, key ``rid``, the features ``discrete``): each grid point's
    accuracy on fold i is, within 1e-12, that of ``fit(fit_i, structure)`` (with
    ``alphas``, ``fit(fit_i, structure, alpha=a)``) predicting ``held_i`` (:func:`fold_views`)."""
    import sqlnb
    grid = {"structure": structures} if alphas is None else {"structure": structures, "alpha": alphas}
    r = sqlnb.cross_validate("train", "y", con=con, folds=3, key=["rid"], grid=grid,
                             features=list(discrete), feature_kinds=discrete)
    points = ([{"structure": s} for s in structures] if alphas is None
              else [{"structure": s, "alpha": a} for s in structures for a in alphas])
    assert sorted(map(repr, (res["params"] for res in r.results))) == sorted(map(repr, points))
    if alphas is None:
        assert [res["params"] for res in r.results] == points
    for i, (fit_i, held_i) in enumerate(fold_views(con)):
        for res in r.results:
            params = dict(res["params"])
            rows = fit(fit_i, params.pop("structure"), **params).score(held_i, con=con, outputs=("prediction",),
                                                                        keep=["y"]).fetchall()
            accuracy = sum(a == b for a, b in rows) / len(rows)
            assert abs(res["accuracy"][i] - accuracy) < 1e-12


# -- the rows of the TAN, KDB and averaged-structure tests -----------------------------------
CLASSES = ["k0", "k1", "k2"]


def tan_table(n: int, seed: int, unseen: bool = False) -> pa.Table:
    """Correlated discrete features (so the tree is not trivial) with NULLs: ``a`` follows
    the class, ``b`` mostly copies ``a``, ``e`` follows ``b``, ``flag`` follows ``e``;
    ``noise`` is independent; ``g`` is Gaussian. With ``unseen``, some values never seen
    in training."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    a = np.where(rng.random(n) < 0.6, y, rng.integers(0, 4, n))
    b = np.where(rng.random(n) < 0.7, a, rng.integers(0, 4, n))
    e = np.where(rng.random(n) < 0.75, (b + 1) % 3, rng.integers(0, 3, n))
    flag = rng.random(n) < np.where(e == 0, 0.85, 0.2)
    noise = rng.integers(0, 3, n)
    g = rng.normal(y * 0.7, 1.0)

    def nulls(p=0.1):
        return rng.random(n) < p

    a_txt = np.array([f"a{v}" for v in a], dtype=object)
    b_int = b.astype(np.int64) * 10
    if unseen:
        a_txt[rng.random(n) < 0.15] = "a_new"
        b_int[rng.random(n) < 0.15] = 999
    return pa.table({
        "rid": pa.array(np.arange(n), pa.int64()),
        "a": pa.array(a_txt.tolist(), pa.string(), mask=nulls()),
        "b": pa.array(b_int, pa.int64(), mask=nulls()),
        "e": pa.array([f"e{v}" for v in e], pa.string(), mask=nulls()),
        "flag": pa.array(flag, pa.bool_(), mask=nulls()),
        "noise": pa.array([f"n{v}" for v in noise], pa.string(), mask=nulls(0.2)),
        "g": pa.array(g, pa.float64(), mask=nulls()),
        "y": pa.array([CLASSES[v] for v in y], pa.string(), mask=nulls(0.03)),
    })


DISCRETE = {"a": "categorical", "b": "categorical", "e": "categorical", "flag": "bernoulli",
            "noise": "categorical"}


def kdb_table(n: int, seed: int, unseen: bool = False) -> pa.Table:
    """TAN's generated table (correlated discrete features, NULLs, a Gaussian ``g``) with
    rare values: ``a`` takes ``a_rare`` in two rows, ``e`` takes ``e9`` in one."""
    t = tan_table(n, seed, unseen)
    a, e = t["a"].to_pylist(), t["e"].to_pylist()
    a[5] = a[17] = "a_rare"
    e[11] = "e9"
    t = t.set_column(t.column_names.index("a"), "a", pa.array(a, pa.string()))
    return t.set_column(t.column_names.index("e"), "e", pa.array(e, pa.string()))


def tan_data() -> tuple[duckdb.DuckDBPyConnection, pa.Table, pa.Table]:
    """TAN's training rows (800) and test rows with unseen values (300), registered."""
    return registered(tan_table(800, 1), tan_table(300, 2, unseen=True))


def probabilities(model, data, con) -> np.ndarray:
    """The ``proba`` class columns of ``model`` scoring ``data`` (:func:`class_scores`)."""
    return class_scores(model, data, con, "proba")


def moving_table(n: int, seed: int, follows: str) -> pa.Table:
    """``x``, ``u`` and ``v`` follow the class; ``w`` copies ``follows`` (u or v) in 40 %
    of the rows and ``x`` in 30 %."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    x = np.where(rng.random(n) < 0.9, y, 1 - y)
    u = np.where(rng.random(n) < 0.7, y, rng.integers(0, 3, n))
    v = np.where(rng.random(n) < 0.7, y, rng.integers(0, 3, n))
    r = rng.random(n)
    w = np.where(r < 0.4, u if follows == "u" else v, np.where(r < 0.7, x, rng.integers(0, 3, n)))
    return pa.table({"x": [f"x{i}" for i in x], "u": [f"u{i}" for i in u], "v": [f"v{i}" for i in v],
                     "w": [f"w{i}" for i in w], "y": y.tolist()})
