"""The exported fitting SQL of a model built on pair counts (``sqlnb sql --fit``,
:func:`sqlnb.workflows.export.fit_sql`) past 40 features: its pair scan is
split into statements as ``sqlnb fit`` splits it off DuckDB
(:func:`sqlnb.models.naive_bayes.tan.pair_statements`: at most 780 grouping sets, on Spark
at most 64 grouping columns; within SQLite's 500-term UNION ALL limit there), and the
statements run where the export is claimed give DuckDB's pair counts: PostgreSQL at 45
features (990 pairs) and 92 (past its 4,096 grouping sets), SQLite at 33 (528 pairs),
Spark at 64."""

from __future__ import annotations

import sqlite3

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlglot import exp

import sqlnb
from sqlnb.models.naive_bayes import tan
from sqlnb.source import resolve
from sqlnb.workflows.export import fit_queries, fit_sql
from support.cli import assert_error, exit_code, run_in
from support.sqlite import sqlite_connection, sqlite_table
from test_pairscan_spam import mixed_table

KINDS = {"cat": 20, "int": 10, "bern": 7, "num": 8}  # 45 discrete features: 990 pairs


def _fitted(kinds: dict, rows: int = 240) -> tuple[pa.Table, object]:
    """``rows`` weighted rows of categorical, Bernoulli and binned columns with NULLs, and
    the TAN model DuckDB fits on them (its pair counts from the one-statement scan)."""
    table, kind = mixed_table(rows, 7, kinds)
    con = duckdb.connect()
    con.register("t", table)
    model = sqlnb.fit("t", "y", con=con, weight="w", feature_kinds=kind, features=list(kind),
                      bins="quantile:4", structure="tan")
    F = sum(kinds.values())
    assert len(model.stats.pairs.features) == F and len(model.stats.pairs.cells) == F * (F - 1) // 2
    return table, model


@pytest.fixture(scope="module")
def wide() -> tuple[pa.Table, object]:
    return _fitted(KINDS)


def _statements(model, dialect: str, table: str = "t") -> list[str]:
    """The exported fitting SQL's statements reading ``table``, as ``sqlnb sql --fit``
    prints them."""
    text = fit_sql(table, model.label, model.features, dialect, model.weight, pretty=False,
                   pairs=model.stats.pairs.features)
    return [s.strip().rstrip(";") for s in text.split(";\n\n") if s.strip()]


def _exported_pair_counts(model, statements: list[str], rows_of) -> dict:
    """{(a, b): {(class, u, v): n}} from every exported pair statement (after the
    statistics and categorical counts) run by ``rows_of``, each pair counted in exactly
    one of them."""
    tree = list(model.stats.pairs.features)
    out: dict = {}
    for text in statements[2:]:
        got = _pair_counts(rows_of(text), tree)
        assert not set(got) & set(out)
        out.update(got)
    return out


def _pairs_by_statement(trees) -> list[list[tuple[str, str]]]:
    """The (feature, feature) pairs of each GROUPING SETS statement, read off the tree:
    each set's two ``x`` columns, named by the source column their inner alias reads."""
    out = []
    for tree in trees:
        inner = tree.args["from_"].this.this
        reads = {e.alias: next(e.find_all(exp.Column)).name for e in inner.expressions if e.alias.startswith("x")}
        sets = tree.args["group"].expressions[0].expressions
        out.append([tuple(reads[c.name] for c in s.expressions if c.name.startswith("x")) for s in sets])
    return out


class _Recorder:
    """An engine of a dialect other than DuckDB's that records the pair statements sent to it."""

    def __init__(self, dialect: str = "postgres"):
        self.dialect, self.sent = dialect, []

    def execute(self, tree, params=None):
        self.sent.append(tree)
        return []


def test_export_splits_the_pair_scan_as_the_fit_does(wide):
    """The exported pair statements are the fit's off DuckDB, pair for pair (one
    statement of 990 sets on 1de9335; the fit sends 780 + 210)."""
    table, model = wide
    con = duckdb.connect()
    con.register("t", table)
    tree = [f for f in model.features if f.name in model.stats.pairs.features]
    engine = _Recorder()
    tan.collect_pairs(engine, resolve("t", con), "y", "w", tree, list(model.classes))
    exported = fit_queries("t", "y", model.features, "postgres", "w", model.stats.pairs.features)[2:]
    assert [len(p) for p in _pairs_by_statement(engine.sent)] == [tan.SETS_PER_STATEMENT, 990 - tan.SETS_PER_STATEMENT]
    assert [len(p) for p in _pairs_by_statement(exported)] == [len(p) for p in _pairs_by_statement(engine.sent)]
    assert _pairs_by_statement(exported) == _pairs_by_statement(engine.sent)
    # every statement has the whole scan's columns: k, v<j>, g<j> per tree feature, n
    for q in exported:
        assert [e.alias_or_name for e in q.expressions] == ["k", *[f"{c}{j}" for j in range(45) for c in "vg"], "n"]


def test_exported_pair_sql_in_sqlite_gives_duckdbs_counts_past_500_pairs():
    """SQLite (no GROUPING SETS: one SELECT per pair glued by UNION ALL) refused the single
    528-term statement of 1de9335 at 33 features ("too many terms in compound SELECT": its
    limit is 500); split at 500 terms, its counts equal DuckDB's exactly. (33 features, the
    fewest past the limit: at 45 building and rendering the 990 SELECTs takes ~20 s.)"""
    table, model = _fitted({"cat": 14, "int": 8, "bern": 5, "num": 6})
    db = sqlite_connection()
    sqlite_table(db, "t", table)
    statements = _statements(model, "sqlite")
    assert _exported_pair_counts(model, statements, lambda text: db.execute(text).fetchall()) == _stored_pairs(model)
    assert len(statements) == 2 + 2 and all("GROUPING SETS" not in s for s in statements)
    assert max(s.count("UNION ALL") + 1 for s in statements[2:]) <= db.getlimit(sqlite3.SQLITE_LIMIT_COMPOUND_SELECT)


@pytest.fixture(scope="module")
def postgres(wide, many):
    """One throw-away PostgreSQL server holding both tables (started by the first test
    that asks, which carries the postgres mark)."""
    from support.engines import postgres_engine
    with postgres_engine({"t": wide[0], "t92": many[0]}) as engine:
        yield engine


@pytest.fixture(scope="module")
def many() -> tuple[pa.Table, object]:
    """92 categorical features (4,186 pairs: past PostgreSQL's 4,096 grouping sets) on 24 rows."""
    return _fitted({"cat": 60, "int": 32, "bern": 0, "num": 0}, rows=24)


def _postgres_rows(engine):
    """Run exported text on PostgreSQL through the driver, as a user would."""
    def rows_of(text):
        with engine.con.cursor() as cur:
            cur.execute(text)
            return cur.fetchall()
    return rows_of


@pytest.mark.postgres  # starts a PostgreSQL server
def test_exported_pair_sql_on_postgres_gives_duckdbs_counts_at_45_features(wide, postgres):
    """The exported statements run on PostgreSQL give DuckDB's pair counts exactly (integer
    weights: sums exact in any order, so the probabilities derived from them are DuckDB's
    bit for bit). (1de9335's one statement of 990 sets ran here too: only the split fails.)"""
    table, model = wide
    statements = _statements(model, "postgres")
    assert _exported_pair_counts(model, statements, _postgres_rows(postgres)) == _stored_pairs(model)
    assert len(statements) == 2 + 2  # statistics, categorical counts, pairs in two statements


@pytest.mark.postgres  # starts a PostgreSQL server
def test_exported_pair_sql_on_postgres_past_4096_grouping_sets(many, postgres):
    """92 features: 1de9335 exported one statement of 4,186 grouping sets, which PostgreSQL
    refuses ("too many grouping sets present (maximum 4096)"); split as the fit splits it
    (six statements) its counts equal DuckDB's."""
    table, model = many
    statements = _statements(model, "postgres", "t92")
    assert _exported_pair_counts(model, statements, _postgres_rows(postgres)) == _stored_pairs(model)
    assert len(statements) == 2 + 6


SPARK64 = {"cat": 20, "int": 10, "bern": 34, "num": 0}  # 64 features; 30 categorical, none binned


def test_spark_split_stays_within_its_64_grouping_columns():
    """Spark refuses GROUPING SETS over more than 64 columns (k and the features; the fold
    too in cross-validation): past 63 features the fit (refused on 1de9335 at 64:
    GROUPING_SIZE_LIMIT_EXCEEDED) and the export pair two blocks of at most 31 features a
    statement, the same pairs in the same statements; up to 63, one block, as before."""
    table, model = _fitted(SPARK64, rows=24)
    con = duckdb.connect()
    con.register("t", table)
    tree = [f for f in model.features if f.name in model.stats.pairs.features]
    for group, keys in ((None, 1), (exp.column("w", "src"), 2)):
        engine = _Recorder("spark")
        tan.collect_pairs(engine, resolve("t", con), "y", "w", tree, list(model.classes), group)
        runtime = _pairs_by_statement(engine.sent)
        assert max(len({f for pair in p for f in pair}) for p in runtime) + keys <= 64  # Spark's limit
        assert sorted(pair for p in runtime for pair in p) == sorted(model.stats.pairs.cells)
    exported = _pairs_by_statement(fit_queries("t", "y", model.features, "spark", "w", model.stats.pairs.features)[2:])
    engine = _Recorder("spark")
    tan.collect_pairs(engine, resolve("t", con), "y", "w", tree, list(model.classes))
    assert exported == _pairs_by_statement(engine.sent) and len(exported) == 7
    assert tan.pair_statements(63, tan.SETS_PER_STATEMENT, "spark") == tan.pair_statements(63, tan.SETS_PER_STATEMENT)


@pytest.mark.spark  # starts a Spark session
def test_exported_pair_sql_on_spark_past_its_64_grouping_columns():
    """The exported statements at 64 features run on Spark (1de9335's: refused,
    GROUPING_SIZE_LIMIT_EXCEEDED) and give DuckDB's pair counts; the fit sends the same
    statements (previous test). 32-65 s here, most of it Spark's (running only the widest
    statement took 35 s too)."""
    from support.engines import spark_engine
    table, model = _fitted(SPARK64, rows=24)
    statements = _statements(model, "spark")
    with spark_engine({"t": table}) as engine:
        exported = _exported_pair_counts(model, statements, lambda text: [tuple(r) for r in engine.spark.sql(text).collect()])
    assert exported == _stored_pairs(model)


# -- sql --fit ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tan_model(tmp_path_factory):
    """Three categorical columns and a numeric one, binned by MDL: all four tree features."""
    d = tmp_path_factory.mktemp("tan")
    rng = np.random.default_rng(1)
    n = 300
    k = rng.integers(0, 3, n)
    a = np.array(list("pqr"))[(k + rng.integers(0, 2, n)) % 3]
    b = np.where(rng.random(n) < 0.8, a, np.array(list("pqr"))[rng.integers(0, 3, n)])
    c = np.array(list("uv"))[(k > 0).astype(int) ^ (rng.random(n) < 0.2)]
    x = rng.normal(2.0 * k, 1.0)
    t = np.array(["good day", "bad day sir", "good good", "meh"])[rng.integers(0, 4, n)]
    table = pa.table({"a": pa.array(a.tolist(), mask=rng.random(n) < 0.05), "b": b, "c": c, "x": x, "t": t,
                      "w": rng.uniform(0.5, 2.0, n), "y": np.array(["A", "B", "C"])[k]})
    pq.write_table(table, d / "train.parquet")
    r = run_in(d, "fit", "train.parquet", "-y", "y", "--structure", "tan", "--features", "a,b,c,x", "--bins", "mdl",
             "--model", "m.duckdb:tan")
    assert exit_code(r) == 0, r.stderr
    return d, table


def _pair_counts(rows, tree: list) -> dict:
    """{(a, b): {(class, u, v): n}} from the pair statement's rows (k, v0, g0, ..., n)."""
    out: dict = {}
    for r in rows:
        on = [j for j in range(len(tree)) if r[2 + 2 * j] == 0]
        assert len(on) == 2
        u, v = r[1 + 2 * on[0]], r[1 + 2 * on[1]]
        if u is None or v is None:
            continue
        out.setdefault((tree[on[0]], tree[on[1]]), {})[(r[0], u, v)] = float(r[-1])
    return out


def _stored_pairs(model) -> dict:
    out = {}
    for key, cell in model.stats.pairs.cells.items():
        out[key] = {(model.classes[i], cell.values_a[u], cell.values_b[v]): float(cell.counts[i, u, v])
                    for i, u, v in zip(*np.nonzero(cell.counts))}
    return out


def test_sql_fit_of_a_tan_model_prints_the_pair_scan_too(tan_model):
    d, _ = tan_model
    r = run_in(d, "sql", "--fit", "--model", "m.duckdb:tan", "--source", "train", process=True)
    assert exit_code(r) == 0, r.stderr
    # the cut points come from a pass of their own: said, on one line
    assert r.stderr.splitlines() == [line for line in r.stderr.splitlines() if line.startswith("note: ")]
    assert "cut points of binned column 'x' (mdl) are the model's" in r.stderr
    statements = [s for s in r.stdout.split(";\n") if s.strip()]
    assert len(statements) == 2  # DuckDB: statistics (histogram()), pair counts
    con = duckdb.connect()
    con.execute(f"CREATE VIEW train AS SELECT * FROM '{d}/train.parquet'")
    model = sqlnb.load(f"{d}/m.duckdb", "tan")
    tree = list(model.stats.pairs.features)
    assert set(tree) == {"a", "b", "c", "x"}
    # statistics: rows and the categorical histograms of every class, as stored
    stats = {row[0]: row for row in con.execute(statements[0]).fetchall()}
    for i, cls in enumerate(model.classes):
        assert stats[cls][1] == model.stats.class_rows[i]
    a_hist = {cls: row[2] for cls, row in stats.items()}
    a_counts = model.stats.features["a"]
    for i, cls in enumerate(model.classes):
        assert {v: float(n) for v, n in a_hist[cls].items()} == {
            v: n for v, n in zip(a_counts.values, a_counts.counts[i]) if n}
    # pair counts: exactly the stored ones, binned x by its bin numbers
    got = _pair_counts(con.execute(statements[1]).fetchall(), tree)
    assert got == _stored_pairs(model)


def test_sql_fit_of_a_tan_model_in_sqlite_without_grouping_sets(tan_model):
    d, table = tan_model
    r = run_in(d, "sql", "--fit", "--model", "m.duckdb:tan", "--source", "train", "--dialect", "sqlite")
    assert exit_code(r) == 0, r.stderr
    statements = [s for s in r.stdout.split(";\n") if s.strip()]
    assert len(statements) == 3 and "GROUPING SETS" not in r.stdout  # statistics, counts, pair counts
    db = sqlite_connection()
    sqlite_table(db, "train", table)
    model = sqlnb.load(f"{d}/m.duckdb", "tan")
    got = _pair_counts(db.execute(statements[2]).fetchall(), list(model.stats.pairs.features))
    assert got == _stored_pairs(model)


def test_sql_fit_says_what_the_statements_leave_out(tan_model):
    d, _ = tan_model
    cases = {
        "weighted": (["--features", "x,a", "--weight", "w"], "weighted Gaussian column 'x': the variances are a second pass"),
        "text": (["--features", "t", "--feature-kind", "t=multinomial"], "token bag 't': this SQL counts its documents only"),
    }
    for name, (options, note) in cases.items():
        fit = run_in(d, "fit", "train.parquet", "-y", "y", *options, "--model", f"m.duckdb:{name}")
        assert exit_code(fit) == 0, fit.stderr
        r = run_in(d, "sql", "--fit", "--model", f"m.duckdb:{name}", "--source", "train")
        assert exit_code(r) == 0 and r.stdout.startswith("SELECT"), r.stderr
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("note: ") and note in lines[0], (name, r.stderr)
    # a naive model of categorical and Gaussian columns: the statements are the whole fit, no note
    fit = run_in(d, "fit", "train.parquet", "-y", "y", "--features", "a,b,x", "--model", "m.duckdb:plain")
    assert exit_code(fit) == 0, fit.stderr
    r = run_in(d, "sql", "--fit", "--model", "m.duckdb:plain", "--source", "train")
    assert exit_code(r) == 0 and r.stderr == ""
    # LDA, QDA and logistic regression are fitted by sqlnb itself: one line saying so
    fit = run_in(d, "fit", "train.parquet", "-y", "y", "--features", "x", "--kind", "lda", "--model", "m.duckdb:lda")
    assert exit_code(fit) == 0, fit.stderr
    assert_error(run_in(d, "sql", "--fit", "--model", "m.duckdb:lda", "--source", "train"),
                 "this model is 'lda', which sqlnb fits itself")
