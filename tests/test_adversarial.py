"""Cases found by an adversarial run: each failed before its fix.

1. A categorical column with 100,000 training values: scoring 10 rows took 66 s and 4.3 GB
   (the vocabulary was inlined as one SQL literal per value and class).
2. Labels ``A``, ``a``, ``a_2`` gave ``proba_a_2`` to class ``a``; long labels differing at
   the end collided in PostgreSQL (63-byte identifiers).
3. ``score --out FILE --replace`` killed mid-write left ``.sqlnb-*`` temporaries behind.
4. ``--source 'SELECT …; DROP TABLE sentinel'`` was embedded in the printed SQL.
"""

from __future__ import annotations

import importlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

import duckdb
import pytest

import sqlnb
from sqlnb.errors import SqlnbError
from sqlnb.models.finish import class_columns, label_text
from sqlnb.source import parse_query
from sqlnb.workflows.checks import unseen_categories
from support.cli import assert_error, invoke

nb_model = importlib.import_module("sqlnb.models.naive_bayes.model")


# -- 1. a categorical column with a large vocabulary ---------------------------------------

BIG = 100_000


def _vocabulary_model(con, n_values: int, table: str = "train", **params):
    """A categorical column ``c`` with ``n_values`` values (each on two rows, in two
    classes) and a Gaussian ``g``; three classes."""
    con.execute(f"""CREATE OR REPLACE TABLE {table} AS
        SELECT 'v' || (i % {n_values}) AS c, (i % 3)::VARCHAR AS y, (i % 7)::DOUBLE AS g
        FROM range({2 * n_values}) r(i)""")
    return sqlnb.fit(table, "y", con=con, features=["c", "g"], feature_kinds={"c": "categorical"}, **params)


@pytest.fixture(scope="module")
def big():
    con = duckdb.connect()
    model = _vocabulary_model(con, BIG)
    # 10 rows in a scrambled order: seen values, an unseen one and a NULL.
    con.execute("""CREATE TABLE batch AS SELECT i AS rid,
        CASE WHEN i = 4 THEN 'never seen' WHEN i = 6 THEN NULL ELSE 'v' || ((i * 7919) % 100000) END AS c,
        (i % 5)::DOUBLE AS g FROM range(10) r(i) ORDER BY (i * 7) % 10""")
    return con, model


def test_scoring_ten_rows_against_a_100000_value_column_takes_under_a_second(big):
    con, model = big
    assert len(model.stats.features["c"].values) == BIG
    best = float("inf")
    for _ in range(3):  # best of 3: the machine is shared; before the fix one try took 66 s
        fresh = model.with_params()  # log-parameters and lookups rebuilt, not cached
        start = time.perf_counter()
        rows = fresh.score("batch", con=con, outputs=("proba", "prediction")).fetchall()
        best = min(best, time.perf_counter() - start)
    assert best < 1.0, f"scoring 10 rows took {best:.2f} s"
    want = [r[0] for r in con.execute("SELECT rid FROM batch").fetchall()]
    assert [r[0] for r in rows] == want  # one row out per row in, in the input's order
    start = time.perf_counter()
    query = model.with_params().scoring_query(sqlnb.source.resolve("batch", con))
    assert time.perf_counter() - start < 1.0
    assert len(sqlnb.sql.render(query)) < 5_000_000  # not one literal per value and class


def test_the_unseen_value_check_is_fast_on_a_large_vocabulary(big):
    con, model = big
    seen = sqlnb.source.resolve("SELECT 'v' || (i * 3) AS c FROM range(1000) r(i)", con)
    start = time.perf_counter()
    assert unseen_categories(model, seen, con) == []
    assert time.perf_counter() - start < 1.0  # the ENUM of 100,000 values took 25 s to build
    unseen = sqlnb.source.resolve("SELECT 'nope' || i AS c FROM range(50) r(i)", con)
    lines = unseen_categories(model, unseen, con)
    assert len(lines) == 1 and "'c'" in lines[0] and "50 of 50" in lines[0]


def _both_paths(model, data, con, monkeypatch):
    """The rows scored packed (the default past INLINE_MAX) and in place (forced)."""
    packed = model.with_params().score(data, con=con).fetchall()
    monkeypatch.setattr(nb_model, "INLINE_MAX", 10**9)
    in_place = model.with_params().score(data, con=con).fetchall()
    monkeypatch.undo()
    return _same_nan(packed), _same_nan(in_place)


def _same_nan(rows):
    """Rows with NaN spelled out (NaN != NaN would fail equal rows)."""
    return [tuple("NaN" if isinstance(v, float) and v != v else v for v in r) for r in rows]


@pytest.mark.parametrize("unseen", ["missing", "bucket"])
def test_a_packed_lookup_gives_the_in_place_probabilities_row_for_row(monkeypatch, unseen):
    con = duckdb.connect()
    model = _vocabulary_model(con, 3 * nb_model.INLINE_MAX, unseen=unseen)
    con.execute("""CREATE TABLE batch AS SELECT i AS rid,
        CASE WHEN i % 11 = 0 THEN 'never seen' WHEN i % 13 = 0 THEN NULL ELSE 'v' || (i % 350) END AS c,
        (i % 9)::DOUBLE AS g FROM range(5000) r(i) ORDER BY hash(i)""")
    packed, in_place = _both_paths(model, "batch", con, monkeypatch)
    assert packed == in_place  # the same doubles, to the last bit, and the same order
    assert [r[0] for r in packed] == [r[0] for r in con.execute("SELECT rid FROM batch").fetchall()]


def test_a_packed_lookup_reads_values_with_the_fitted_type(monkeypatch):
    con = duckdb.connect()
    con.execute("""CREATE TABLE train AS SELECT (i % 400)::BIGINT AS code, (i % 2 = 0) AS y
        FROM range(1600) r(i)""")
    model = sqlnb.fit("train", "y", con=con, feature_kinds={"code": "categorical"})
    assert len(model.stats.features["code"].values) > nb_model.INLINE_MAX
    # Text '07' is the BIGINT 7; 'x' does not cast (missing); a DOUBLE NaN is missing.
    for data in ("SELECT * FROM (VALUES ('07'), ('x'), (NULL), ('399'), ('400')) t(code)",
                 "SELECT * FROM (VALUES (7.0), ('nan'::DOUBLE), (3.5), (NULL)) t(code)"):
        packed, in_place = _both_paths(model, data, con, monkeypatch)
        assert packed == in_place
    seven = model.score("SELECT '07' AS code", con=con, outputs=("jll",), keep=[]).fetchall()
    assert seven == model.score("SELECT 7::BIGINT AS code", con=con, outputs=("jll",), keep=[]).fetchall()


def test_exported_sql_of_a_large_vocabulary(big):
    con, model = big
    with pytest.raises(SqlnbError, match=r"categorical column 'c' has 100,000 training values; SQL for postgres"):
        model.to_sql("postgres")
    # The DuckDB export is self-contained (packed) and scores like model.score.
    exported = model.to_sql("duckdb", source="batch", con=con)
    assert con.sql(exported).fetchall() == model.score("batch", con=con, outputs=("prediction", "proba")).fetchall()
    blind = con.sql(model.to_sql("duckdb", source="batch"))  # columns unknown: passed through with *
    ids = [r[blind.columns.index("rid")] for r in blind.fetchall()]
    assert ids == [r[0] for r in con.execute("SELECT rid FROM batch").fetchall()]


# -- 4. a source query is exactly one SELECT -----------------------------------------------

@pytest.fixture
def small(tmp_path):
    """A model saved in model.duckdb (which also holds tables ``base`` and ``sentinel``)."""
    db = tmp_path / "model.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE base AS SELECT i::DOUBLE AS x, (i % 2)::VARCHAR AS y FROM range(20) r(i)")
    con.execute("CREATE TABLE sentinel AS SELECT 1 AS still_here")
    sqlnb.fit("base", "y", con=con).save(con, "m")
    return con, db


TWO_STATEMENTS = "SELECT * FROM base; DROP TABLE sentinel"


def _sentinel_stands(con) -> bool:
    return con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'sentinel'").fetchall() == [(1,)]


def test_sql_source_with_a_second_statement_is_one_error_line(small):
    con, db = small
    con.close()
    for dialect in ("duckdb", "postgres"):
        result = invoke("sql", "--model", f"{db}:m", "--dialect", dialect, "--source", TWO_STATEMENTS)
        assert_error(result, "the source query must be exactly one SELECT", "2 statements", "DROP TABLE sentinel")
    # Not a query's first word: a table name, quoted, never a statement.
    result = invoke("sql", "--model", f"{db}:m", "--source", "DROP TABLE sentinel")
    assert result.exit_code == 0 and 'FROM "DROP TABLE sentinel" AS "src"' in result.stdout
    assert invoke("sql", "--model", f"{db}:m", "--source", "SELECT * FROM base;").exit_code == 0
    assert _sentinel_stands(duckdb.connect(str(db)))


def test_a_query_as_data_is_exactly_one_select_everywhere(small):
    con, _ = small
    model = sqlnb.load(con, "m")
    for call in (lambda: model.score(TWO_STATEMENTS, con=con).fetchall(),
                 lambda: model.to_sql("postgres", source=TWO_STATEMENTS),
                 lambda: model.to_sql("duckdb", source=TWO_STATEMENTS, con=con),
                 lambda: sqlnb.fit(TWO_STATEMENTS, "y", con=con)):
        with pytest.raises(SqlnbError, match="exactly one SELECT"):
            call()
        assert _sentinel_stands(con)
    with pytest.raises(SqlnbError, match=r"^the source query must be one SELECT, not DROP TABLE sentinel$"):
        parse_query("DROP TABLE sentinel")
    assert len(model.score("FROM base", con=con).fetchall()) == 20  # DuckDB's FROM-first SELECT
    assert len(model.score("SELECT * FROM base;", con=con).fetchall()) == 20


# -- 2. class column names never name another class -----------------------------------------

def _check_names(prefix, labels):
    names = class_columns(prefix, labels)
    plain = [f"{prefix}{label_text(v)}" for v in labels]
    folded = [n.casefold() for n in names]
    assert len(set(folded)) == len(names), names  # one column per class, in any dialect
    for i, n in enumerate(names):
        assert len(n.encode()) <= 63, n
        assert n.startswith(prefix)
        others = {p.casefold() for j, p in enumerate(plain) if j != i}
        assert n.casefold() not in others, (labels[i], n)  # never another class's plain name
        unique = [p.casefold() for p in plain].count(plain[i].casefold()) == 1
        assert (n == plain[i]) == (unique and len(plain[i].encode()) <= 63), (labels[i], n)
    return names


def test_labels_equal_up_to_case_never_take_another_class_name():
    names = _check_names("proba_", ["A", "a", "a_2"])
    assert names[2] == "proba_a_2"  # a_2 keeps its own name; A and a get hashed ones
    assert names[0].startswith("proba_A_") and names[1].startswith("proba_a_") and "proba_a_2" not in names[:2]
    # Plain labels keep today's names (stored models, README outputs).
    assert class_columns("proba_", ["no", "yes"]) == ["proba_no", "proba_yes"]
    assert class_columns("proba_", [0, 1, 2]) == ["proba_0", "proba_1", "proba_2"]
    assert class_columns("log_proba_", [False, True]) == ["log_proba_false", "log_proba_true"]


def test_class_names_hold_for_random_labels():
    rng = random.Random(14)
    for _ in range(300):
        labels = sorted({"".join(rng.choice("aAbB_2é") for _ in range(rng.randint(0, 4)))
                         for _ in range(rng.randint(1, 8))})
        for prefix in ("proba_", "exp_shifted_"):
            _check_names(prefix, labels)
    # A label that is another's hashed name pushes the hash longer.
    first = class_columns("proba_", ["A", "a"])
    labels = sorted(["A", "a", first[0][len("proba_"):]])
    _check_names("proba_", labels)


def test_long_labels_differing_at_the_end_get_distinct_postgres_columns():
    con = duckdb.connect()
    stem = "a very long class label that goes on and on past what postgres keeps "
    con.execute(f"""CREATE TABLE t AS SELECT i::DOUBLE AS x,
        CASE WHEN i % 3 = 0 THEN '{stem}one' WHEN i % 3 = 1 THEN '{stem}two' ELSE 'A' END AS y
        FROM range(30) r(i)""")
    model = sqlnb.fit("t", "y", con=con)
    names = _check_names("proba_", model.classes)
    exported = model.to_sql("postgres", outputs=("proba",))
    aliases = re.findall(r'AS "((?:jll|exp_shifted|proba)_[^"]*)"', exported)
    assert {n for n in aliases if n.startswith("proba_")} == set(names)
    assert len({a.encode()[:63] for a in aliases}) == len(set(aliases))  # distinct after PostgreSQL's cut


def test_scored_columns_hold_their_own_class_and_show_the_map(small, tmp_path):
    con = duckdb.connect(str(tmp_path / "cases.duckdb"))
    con.execute("""CREATE TABLE t AS SELECT (i % 3) * 10.0 + (i % 7) * 0.1 AS x,
        (['A', 'a', 'a_2'])[i % 3 + 1] AS y FROM range(60) r(i)""")
    model = sqlnb.fit("t", "y", con=con)
    model.save(con, "cases")
    columns = dict(zip(model.classes, class_columns("proba_", model.classes)))
    scored = model.score("SELECT 20.0 AS x", con=con, outputs=("proba", "prediction"), keep=[])
    row = dict(zip(scored.columns, scored.fetchall()[0]))
    assert row["prediction"] == "a_2" and row["proba_a_2"] == row[columns["a_2"]] > 0.99  # class a_2's
    con.close()
    shown = invoke("show", "--model", f"{tmp_path}/cases.duckdb:cases", "--format", "json")
    assert {c["label"]: c["column"] for c in json.loads(shown.stdout)["classes"]} == columns
    text = invoke("show", "--model", f"{tmp_path}/cases.duckdb:cases").stdout
    for label, column in columns.items():
        assert re.search(rf"^{re.escape(label)}\s+{re.escape(column)}\s", text, re.M), text
    # A model with plain labels shows the classes as before (no column column).
    _, db = small
    assert "column" not in invoke("show", "--model", f"{db}:m").stdout.split("feature")[0]


# -- 3. a writer killed mid-write leaves nothing behind for long ---------------------------

@pytest.fixture(scope="module")
def scoring_job(tmp_path_factory):
    """A model and an input big enough that writing its scores takes seconds."""
    d = tmp_path_factory.mktemp("kill")
    con = duckdb.connect(str(d / "model.duckdb"))
    con.execute("CREATE TABLE base AS SELECT i::DOUBLE AS x, (i % 3)::DOUBLE AS z, (i % 2)::VARCHAR AS y FROM range(50) r(i)")
    sqlnb.fit("base", "y", con=con).save(con, "m")
    con.execute(f"COPY (SELECT random() * 50 AS x, (i % 3)::DOUBLE AS z FROM range(6000000) r(i)) TO '{d / 'big.parquet'}'")
    con.close()
    return d


def _temporaries(d):
    return sorted(p.name for p in d.iterdir() if p.name.startswith(".sqlnb-"))


def _start_and_kill(d, sig):
    """Run ``sqlnb score big.parquet --out out.csv --replace`` and send ``sig`` once its
    temporary file is being written; returns the finished process."""
    cmd = [sys.executable, "-m", "sqlnb", "--threads", "1", "score", str(d / "big.parquet"),
           "--model", f"{d}/model.duckdb:m", "--out", str(d / "out.csv"), "--replace"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if any((d / t).stat().st_size > 0 for t in _temporaries(d) if (d / t).exists()):
            break
        time.sleep(0.01)
    assert proc.poll() is None, ("finished before it could be killed", proc.communicate())
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def test_sigterm_mid_write_cleans_up_and_exits_143(scoring_job):
    d = scoring_job
    (d / "out.csv").write_text("old\n")
    code, out, err = _start_and_kill(d, signal.SIGTERM)
    assert code == 143, (code, err)
    assert err.strip() == "Error: terminated; nothing was written"
    assert _temporaries(d) == [] and (d / "out.csv").read_text() == "old\n"


def test_a_killed_spark_writers_temporary_directory_is_removed_too(tmp_path):
    """Spark writes a directory of part files under the same kind of name; the sweep takes
    a dead process's directory, and leaves a live one's, a link and other names."""
    from sqlnb.io.output import remove_stale_temporaries, temporary_name

    live = temporary_name("scored.parquet")  # this process: alive
    dead = live.replace(f".sqlnb-{os.getpid()}-", ".sqlnb-999999999-", 1)
    for name in (live, dead):
        (tmp_path / name).mkdir()
        (tmp_path / name / "part-00000.parquet").write_bytes(b"x")
    (tmp_path / dead.replace("scored", "linked")).symlink_to(tmp_path / live)
    assert remove_stale_temporaries(str(tmp_path)) == [str(tmp_path / dead)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live, dead.replace("scored", "linked")])


def test_a_killed_writers_temporary_is_removed_by_the_next_write(scoring_job):
    d = scoring_job
    (d / "out.csv").write_text("old\n")
    code, _, _ = _start_and_kill(d, signal.SIGKILL)
    assert code == -signal.SIGKILL
    stale = _temporaries(d)
    assert len(stale) == 1 and stale[0].endswith("-out.csv")
    # A temporary of a live process (this one) and another program's file stay.
    live = f".sqlnb-{os.getpid()}-{stale[0].split('-')[2]}-{'0' * 12}-other.csv"
    (d / live).write_text("in progress")
    (d / ".sqlnb-notes").write_text("not ours")
    small = d / "small.csv"
    small.write_text("x,z\n1.0,2.0\n")
    result = invoke("score", str(small), "--model", f"{d}/model.duckdb:m", "--out", str(d / "small-out.csv"))
    assert result.exit_code == 0, result.stderr
    assert _temporaries(d) == sorted([live, ".sqlnb-notes"])
    assert (d / "out.csv").read_text() == "old\n"
