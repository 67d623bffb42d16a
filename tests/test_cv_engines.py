"""``cross_validate`` / ``sqlnb cv`` on PostgreSQL and Spark: folds, statistics and scoring
run on the engine, and every figure equals DuckDB's on the same folds.

Folds come from the portable hash of an integer key (``key=["id"]``, ``--key id``), so the
same rows form the same folds on every engine (tested row by row). For naive Bayes on
mixed columns (Gaussian, categorical, Bernoulli; three classes, NULLs), multinomial
counts, and LDA, each fold's accuracy and log loss on each engine equal DuckDB's within
1e-9, and the refitted best model scores as DuckDB's does. The CLI runs as a separate
process per engine. Without a key, or for logistic regression, an engine refuses with one
line.

Each engine is started by the tests (a throw-away PostgreSQL server, a local Spark
session); without one they are skipped with the reason, except on CI (``CI`` set), where
that is a failure.
"""

from __future__ import annotations

import json

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from sqlglot import exp

import sqlnb
from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.workflows import compare
from sqlnb.workflows.cv import assign_folds
from support.cli import mixed_table, write_parquet
from support.engines import SPARK_ENV, close_to, postgres_engine, run_sqlnb, spark_engine
from support.engines import unavailable as _unavailable

TOL = 1e-9


def _counts(n: int = 240, seed: int = 7) -> pa.Table:
    """Word counts whose rates depend on the class (multinomial naive Bayes)."""
    r = np.random.default_rng(seed)
    y = r.integers(0, 2, n)
    rates = np.array([[3.0, 1.0, 0.5, 2.0], [0.5, 2.0, 3.0, 1.0]])[y]
    cols = {f"w{j}": pa.array(r.poisson(rates[:, j]), pa.int64()) for j in range(4)}
    return pa.table({"id": pa.array(np.arange(n) * 7 - 300, pa.int64()), **cols,  # negative ids too
                     "y": np.array(["ham", "spam"])[y].tolist()})


def _dense(n: int = 210, seed: int = 9) -> pa.Table:
    r = np.random.default_rng(seed)
    y = r.integers(0, 3, n)
    return pa.table({"id": pa.array(np.arange(n), pa.int32()), "x": r.normal(y, 1.0), "z": r.normal(-y, 2.0),
                     "y": pa.array(y, pa.int64())})


#: case -> (table, cross_validate arguments besides data, label and con)
CASES = {
    "mixed": (mixed_table(300, seed=5), {"folds": 3, "grid": {"alpha": [0.5, 1.0], "var_smoothing": [1e-9, 1e-3]},
                                         "exclude": ["id"]}),
    "counts": (_counts(), {"folds": 4, "kind": "multinomial", "grid": {"alpha": [0.1, 1.0]}, "exclude": ["id"],
                           "scoring": "log_loss"}),
    "lda": (_dense(), {"model": "lda", "folds": 3, "grid": {"shrinkage": [0.0, 0.3]}, "exclude": ["id"]}),
}


@pytest.fixture(scope="module")
def expected():
    """``{case: CVResult in DuckDB}``, each table registered as ``t_<case>``."""
    con = duckdb.connect()
    out = {}
    for case, (table, args) in CASES.items():
        con.register(f"t_{case}", table)
        out[case] = sqlnb.cross_validate(f"t_{case}", "y", con=con, key=["id"], **args)
    yield out
    con.close()


def _close(a, b, where: str) -> None:
    close_to(a, b, where, TOL)


def _same_best_model(got, want, case: str, where: str) -> None:
    """Both best models give the same probabilities on the case's rows (scored in DuckDB)."""
    con = duckdb.connect()
    con.register("rows", CASES[case][0])
    def probas(m):
        rel = m.score("rows", con=con, outputs=("proba",))
        return np.array(rel.select(*[c for c in rel.columns if c.startswith("proba_")]).fetchall(), dtype=float)
    a, b = probas(got), probas(want)
    assert a.shape == b.shape and np.allclose(a, b, rtol=0, atol=TOL, equal_nan=True), where


# -- engines ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def postgres(tmp_path_factory):
    with postgres_engine({f"t_{case}": table for case, (table, _) in CASES.items()}) as engine:
        engine.tmp = tmp_path_factory.mktemp("postgres_cli")
        yield engine


@pytest.fixture(scope="module")
def spark():
    with spark_engine({f"t_{case}": table for case, (table, _) in CASES.items()}) as engine:
        yield engine


ENGINES = [pytest.param("postgres", marks=pytest.mark.postgres), pytest.param("spark", marks=pytest.mark.spark)]


@pytest.mark.parametrize("engine_name", ENGINES)
def test_rows_land_in_the_same_folds_on_every_engine(request, engine_name):
    engine = request.getfixturevalue(engine_name)
    con = duckdb.connect()
    for case, (table, args) in CASES.items():
        con.register(f"t_{case}", table)
        for seed in (0, 12345):
            want_src = sqlnb.source.resolve(f"t_{case}", con)
            got_src = engine.resolve(f"t_{case}")
            folds = args["folds"]

            def query(src, dialect):
                folded, fold = assign_folds(src, "y", folds, seed, ["id"], dialect)
                return (exp.select(sql.col("id", "src"), exp.alias_(fold, "f"))
                        .from_(folded.from_("src")).order_by(sql.col("id", "src")))
            want = [(int(i), int(f)) for i, f in con.execute(sql.render(query(want_src, "duckdb"))).fetchall()]
            got = [(int(i), int(f)) for i, f in engine.execute(query(got_src, engine.dialect))]
            assert got == want, (case, seed)
            assert {f for _, f in want} == set(range(folds))


@pytest.mark.parametrize("engine_name", ENGINES)
@pytest.mark.parametrize("case", list(CASES))
def test_cross_validation_on_an_engine_equals_duckdbs(request, expected, engine_name, case):
    engine = request.getfixturevalue(engine_name)
    want = expected[case]
    got = sqlnb.cross_validate(f"t_{case}", "y", con=engine, key=["id"], **CASES[case][1])
    assert got.fold_rows == want.fold_rows and got.best_params == want.best_params
    _close(got.results, want.results, f"{engine_name} {case}")
    assert got.scans == want.scans == {"source": 1, "statistics": 1, "scoring": 1}
    _same_best_model(got.best_model, want.best_model, case, f"{engine_name} {case}")


@pytest.mark.parametrize("engine_name", ENGINES)
def test_cross_validation_without_the_copy(request, expected, engine_name):
    engine = request.getfixturevalue(engine_name)
    got = sqlnb.cross_validate("t_mixed", "y", con=engine, key=["id"], materialize_source=False, **CASES["mixed"][1])
    assert got.scans["source"] == 2
    _close(got.results, expected["mixed"].results, f"{engine_name} without the copy")


@pytest.mark.parametrize("engine_name", ENGINES)
def test_an_engine_refuses_what_it_cannot_do_in_one_line(request, engine_name):
    engine = request.getfixturevalue(engine_name)
    with pytest.raises(SqlnbError, match="needs a key: one integer column"):
        sqlnb.cross_validate("t_mixed", "y", con=engine, folds=3)
    with pytest.raises(SqlnbError, match="needs a key: one integer column"):
        sqlnb.cross_validate("t_mixed", "y", con=engine, folds=3, key=["color"])
    with pytest.raises(SqlnbError, match="logistic regression reads the rows into Python"):
        sqlnb.cross_validate("t_lda", "y", con=engine, folds=3, key=["id"], model="logistic", exclude=["id"])


# -- the command line, one process per engine --------------------------------------------------
CLI_ARGS = ["--label", "y", "--key", "id", "--folds", "3", "--grid", "alpha=0.5,1", "--grid",
            "var_smoothing=1e-9,0.001", "--exclude", "id", "--format", "json"]


def _cli_equal(stdout: str, want, where: str) -> None:
    got = json.loads(stdout)
    assert got["fold_rows"] == want.fold_rows and got["best_params"] == want.best_params, where
    _close(got["results"], json.loads(json.dumps(want.results)), where)


@pytest.mark.postgres
def test_cli_cv_on_postgres(postgres, expected):
    run = run_sqlnb(["--engine", "postgres", "--dsn", postgres.dsn, "cv", "t_mixed", *CLI_ARGS,
                "--refit", "--model", "best"])
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    _cli_equal(run.stdout, expected["mixed"], "postgres cli")
    _same_best_model(sqlnb.load(postgres, "best"), expected["mixed"].best_model, "mixed", "postgres cli")
    no_key = run_sqlnb(["--engine", "postgres", "--dsn", postgres.dsn, "cv", "t_mixed", "--label", "y"])
    assert no_key.returncode != 0 and no_key.stderr.startswith("Error: cross-validation on postgres needs a key")
    assert len(no_key.stderr.strip().splitlines()) == 1, no_key.stderr


@pytest.mark.spark
def test_cli_cv_on_spark(tmp_path, expected):
    """DATA is a Parquet file that Spark reads."""
    try:
        import pyspark  # noqa: F401
    except ImportError as e:
        _unavailable("Spark", e)
    path = write_parquet(CASES["mixed"][0], tmp_path / "mixed.parquet")
    run = run_sqlnb(["--engine", "spark", "cv", path, *CLI_ARGS], SPARK_ENV, tmp_path)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    _cli_equal(run.stdout, expected["mixed"], "spark cli")


# -- learning curves (sqlnb compare) -------------------------------------------------------------
#: Training sizes and repeats of the learning curves compared below (mixed columns: naive
#: Bayes on them as they are, LDA and QDA on the one-hot indicators of ``color``).
CURVES = {"sizes": [12, 40, 150], "repeats": 2, "seed": 3}


def _curves(con) -> list[dict]:
    train, test_src, options = compare.encode(con, "t_mixed", "t_mixed", "y", exclude=["id", "x"])
    # "id" is the key: the encoded sources keep it as a column, not as a feature.
    return compare.learning_curves(train, test_src, "y", con=con, models=["naive_bayes", "lda", "qda"],
                                   options=options, key="id", **CURVES)


@pytest.fixture(scope="module")
def expected_curves():
    con = duckdb.connect()
    con.register("t_mixed", CASES["mixed"][0])
    return _curves(con)


@pytest.mark.parametrize("engine_name", ENGINES)
def test_learning_curves_on_an_engine_equal_duckdbs(request, expected_curves, engine_name):
    engine = request.getfixturevalue(engine_name)
    got = _curves(engine)
    assert len(got) == 3 * 3 * 2 and sum(r["error"] is not None for r in got) > 8
    _close(got, expected_curves, f"{engine_name} learning curves")
    with pytest.raises(SqlnbError, match="need a key: one integer column"):
        compare.learning_curves("t_mixed", "t_mixed", "y", con=engine, sizes=[20], exclude=["id"])
    with pytest.raises(SqlnbError, match="logistic regression is fitted in Python"):
        compare.learning_curves("t_lda", "t_lda", "y", con=engine, sizes=[20], models=["logistic"], key="id")


@pytest.mark.postgres
def test_cli_compare_on_postgres(postgres, expected_curves):
    """Without --test, a quarter of the rows by the key's hash are the test rows; the
    naive Bayes column equals DuckDB's on the same split, and logistic regression is
    left out with a note."""
    args = ["--label", "y", "--key", "id", "--exclude", "id,x", "--sizes", "20,60", "--repeats", "2",
            "--format", "json"]
    run = run_sqlnb(["--engine", "postgres", "--dsn", postgres.dsn, "compare", "t_mixed", *args])
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    assert "logistic regression is fitted in Python" in run.stderr
    got = json.loads(run.stdout)
    assert {r["model"] for r in got} == {"naive_bayes", "lda", "qda"}
    path = write_parquet(CASES["mixed"][0], postgres.tmp / "mixed.parquet")
    want = run_sqlnb(["compare", path, *args, "--models", "naive_bayes,lda,qda"])
    assert want.returncode == 0, want.stderr
    _close(got, json.loads(want.stdout), "postgres compare cli")
