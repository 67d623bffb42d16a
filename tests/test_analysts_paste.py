"""SQL that pastes anywhere: ``sqlnb sql`` prints a SELECT that is a
CTE's body, a subquery or a view's query exactly as printed (no trailing ``;`` unless
``--semicolon``), with ``--key`` and DATA together; pasted into ``WITH s AS (...) SELECT
...`` it runs in DuckDB, SQLite and PostgreSQL and gives ``sqlnb score``'s rows."""

from __future__ import annotations

import sqlite3

import duckdb
import pyarrow.parquet as pq
import pytest

from support.cli import invoke, mixed_table
from support.engines import close_to, postgres_engine

CLASSES = ("a", "b", "c")
#: What the tests select from the CTE (double quotes are identifiers in all three engines).
OUTER = ('WITH s AS ({printed}) SELECT "id", "prediction", "proba_a", "proba_b", "proba_c" '
         'FROM s ORDER BY "id"')
#: A join back to the source table by key.
JOIN = ('WITH s AS ({printed}) SELECT r."id", r."y", s."prediction" FROM "rows" AS r '
        'JOIN s ON s."id" = r."id" ORDER BY r."id"')


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A model fitted by the CLI, the rows to score as table ``rows`` of a DuckDB file
    (shuffled, so that only the key gives their order), and ``sqlnb score``'s rows."""
    d = tmp_path_factory.mktemp("paste")
    train = mixed_table(300, seed=5)
    rows = mixed_table(120, seed=6)
    rows = rows.take(list(reversed(range(rows.num_rows))))
    pq.write_table(train, d / "train.parquet")
    db = d / "data.duckdb"
    with duckdb.connect(str(db)) as con:
        con.register("r", rows)
        con.execute('CREATE TABLE "rows" AS SELECT * FROM r')
    model = f"{d}/m.duckdb:nb"
    done = invoke("fit", d / "train.parquet", "--label", "y", "--exclude", "id", "--model", model)
    assert done.exit_code == 0, done.stderr
    scored = d / "scored.parquet"
    done = invoke("score", f"{db}:rows", "--model", model, "--key", "id", "--out", scored)
    assert done.exit_code == 0, done.stderr
    want = pq.read_table(scored).to_pylist()
    assert [r["id"] for r in want] == list(range(120))
    return {"dir": d, "db": db, "model": model, "rows": rows, "want": want}


def _printed(fitted, dialect: str, *extra: str) -> str:
    r = invoke("sql", f"{fitted['db']}:rows", "--model", fitted["model"], "--key", "id", "--dialect", dialect, *extra)
    assert r.exit_code == 0, r.stderr
    return r.stdout


def _same_as_score(got: list[tuple], want: list[dict], where: str) -> None:
    assert [g[0] for g in got] == [w["id"] for w in want], where
    assert [g[1] for g in got] == [w["prediction"] for w in want], where
    for g, w in zip(got, want):
        for j, c in enumerate(CLASSES):
            close_to(g[2 + j], w[f"proba_{c}"], f"{where} id {w['id']} proba_{c}")


def test_the_select_ends_without_a_semicolon_unless_asked(fitted):
    printed = _printed(fitted, "duckdb")
    assert not printed.rstrip().endswith(";") and printed.lstrip().upper().startswith("SELECT")
    assert _printed(fitted, "duckdb", "--semicolon").rstrip().endswith(";")
    compact = invoke("sql", "--model", fitted["model"], "--source", "rows", "--compact")
    assert compact.exit_code == 0 and not compact.stdout.rstrip().endswith(";")


def test_pasted_into_a_cte_in_duckdb_equals_score(fitted):
    printed = _printed(fitted, "duckdb")
    with duckdb.connect(str(fitted["db"]), read_only=True) as con:
        got = con.execute(OUTER.format(printed=printed)).fetchall()
        joined = con.execute(JOIN.format(printed=printed)).fetchall()
        # a view's query and a subquery, as printed
        inside = con.execute(f'SELECT count(*) FROM ({printed}) AS t').fetchall()
    _same_as_score(got, fitted["want"], "duckdb")
    assert [(j[0], j[2]) for j in joined] == [(w["id"], w["prediction"]) for w in fitted["want"]]
    assert [j[1] for j in joined] == [w["y"] for w in fitted["want"]] and inside == [(120,)]


def test_pasted_into_a_cte_in_sqlite_equals_score(fitted):
    lite = sqlite3.connect(":memory:")
    lite.execute('CREATE TABLE "rows" (id INTEGER, x REAL, z REAL, color TEXT, flag INTEGER, y TEXT)')
    lite.executemany('INSERT INTO "rows" VALUES (?, ?, ?, ?, ?, ?)',
                     [(r["id"], r["x"], r["z"], r["color"], None if r["flag"] is None else int(r["flag"]), r["y"])
                      for r in fitted["rows"].to_pylist()])
    printed = _printed(fitted, "sqlite")
    lite.execute(f'CREATE VIEW scored AS {printed}')
    got = lite.execute(OUTER.format(printed=printed)).fetchall()
    _same_as_score(got, fitted["want"], "sqlite")
    joined = lite.execute(JOIN.format(printed=printed)).fetchall()
    assert [j[2] for j in joined] == [w["prediction"] for w in fitted["want"]]
    assert lite.execute('SELECT count(*) FROM scored').fetchall() == [(120,)]


@pytest.mark.postgres  # a throw-away PostgreSQL server
def test_pasted_into_a_cte_in_postgres_equals_score(fitted):
    printed = _printed(fitted, "postgres")
    with postgres_engine({"rows": fitted["rows"]}) as engine:
        with engine.con.cursor() as cur:
            cur.execute(OUTER.format(printed=printed))
            got = cur.fetchall()
            cur.execute(JOIN.format(printed=printed))
            joined = cur.fetchall()
            cur.execute(f"CREATE VIEW scored AS {printed}")
            cur.execute("SELECT count(*) FROM scored")
            counted = cur.fetchall()
        engine.con.rollback()
    _same_as_score(got, fitted["want"], "postgres")
    assert [j[2] for j in joined] == [w["prediction"] for w in fitted["want"]] and counted == [(120,)]
