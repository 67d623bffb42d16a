"""Reads of a source's first rows run without DuckDB's late materialization (session 41).

DuckDB 2.0 plans ``SELECT ... FROM (SELECT ... FROM src LIMIT 100000)`` as a semi-join of
the source's row numbers under the limit with a second scan of the source. For screening's
``COUNT``/``MIN``/``MAX``/``COUNT(DISTINCT)`` of the first 100,000 rows that is two scans and a
100,000-row hash join where one read of the first row groups does
(:meth:`sqlnb.engines.DuckDBEngine.first_rows`; ``benchmarks/first_rows.py``). These tests pin
which statements run with it off, that a caller's own setting is kept, and that screening
finds what it found.
"""

from __future__ import annotations

import duckdb
import pytest

import sqlnb
from sqlnb import sql
from sqlnb.engines import DuckDBEngine
from sqlnb.engines.base import first_rows
from tests.support.statements import write_parquet


def _disabled(con) -> set[str]:
    """The optimizers ``con`` skips (DuckDB reports them in an order of its own)."""
    text = con.execute("SELECT current_setting('disabled_optimizers')").fetchone()[0]
    return {n.strip() for n in text.split(",") if n.strip()}


def _recording(monkeypatch) -> list[tuple[str, set[str]]]:
    """(statement, the connection's disabled optimizers when it ran) of every DuckDBEngine statement."""
    seen: list[tuple[str, set[str]]] = []
    execute = DuckDBEngine.execute

    def run(self, tree, *args, **kwargs):
        text = sql.render(tree, "duckdb")
        if not text.upper().startswith(("SET", "SELECT CURRENT_SETTING")):
            seen.append((text, _disabled(self.con)))
        return execute(self, tree, *args, **kwargs)

    monkeypatch.setattr(DuckDBEngine, "execute", run)
    return seen


@pytest.fixture()
def data(tmp_path):
    con = duckdb.connect()
    return write_parquet(con, tmp_path / "d.parquet",
                         "SELECT i AS id, (i % 7)::DOUBLE + i / 1e6 AS x, 'v' || (i % 5) AS c, "
                         "CASE WHEN i % 3 = 0 THEN 'a' ELSE 'b' END AS y FROM range(150000) t(i)")


def test_first_rows_turns_late_materialization_off_and_puts_the_setting_back():
    con = duckdb.connect()
    engine = DuckDBEngine(con)
    assert _disabled(con) == set()
    with engine.first_rows():
        assert _disabled(con) == {"late_materialization"}
    assert _disabled(con) == set()
    con.execute("SET disabled_optimizers = 'top_n'")
    with first_rows(engine):
        assert _disabled(con) == {"top_n", "late_materialization"}
    assert _disabled(con) == {"top_n"}
    con.execute("SET disabled_optimizers = 'late_materialization,top_n'")
    with first_rows(engine):  # already off: left as it is
        assert _disabled(con) == {"late_materialization", "top_n"}
    assert _disabled(con) == {"late_materialization", "top_n"}


def test_the_setting_is_put_back_when_a_statement_fails():
    con = duckdb.connect()
    engine = DuckDBEngine(con)
    with pytest.raises(duckdb.Error):
        with engine.first_rows():
            con.execute("SELECT * FROM no_such_table")
    assert _disabled(con) == set()


def test_an_engine_without_the_hook_runs_as_before():
    class Other:
        dialect = "postgres"

    with first_rows(Other()):  # nothing to change, nothing raised
        pass


def test_the_count_read_has_no_semi_join_without_late_materialization(data):
    """Why: the plan of screening's count of the first rows, with and without the rewrite.
    If a DuckDB release stops planning the semi-join, the first assertion fails and
    DuckDBEngine.first_rows can go."""
    con = duckdb.connect()
    q = f"EXPLAIN SELECT count(*) FROM (SELECT 1 FROM read_parquet('{data}') LIMIT 100000)"
    plan = "\n".join(r[1] for r in con.execute(q).fetchall())
    assert "SEMI" in plan
    with DuckDBEngine(con).first_rows():
        plan = "\n".join(r[1] for r in con.execute(q).fetchall())
    assert "SEMI" not in plan


def test_screening_reads_run_without_it_and_the_shift_and_statistics_with_it(data, monkeypatch):
    con = duckdb.connect()
    con.execute("SET disabled_optimizers = 'top_n'")  # the caller's own setting
    seen = _recording(monkeypatch)
    with pytest.warns(sqlnb.errors.ScreeningWarning, match="'id'"):
        m = sqlnb.fit(data, "y", con=con)
    assert [f.name for f in m.features] == ["x", "c"]
    screening = [(t, d) for t, d in seen if "LIMIT 100000" in t]
    shift = [(t, d) for t, d in seen if "LIMIT 4096" in t]
    scans = [(t, d) for t, d in seen if "GROUP BY" in t and "LIMIT" not in t]
    assert len(screening) >= 2 and shift and scans  # min/max, then COUNT(DISTINCT)
    assert all(d == {"top_n", "late_materialization"} for _, d in screening)
    assert all(d == {"top_n"} for _, d in shift + scans)
    assert _disabled(con) == {"top_n"}


def test_screening_finds_what_it_found_with_late_materialization(data, monkeypatch):
    """The same columns left out, for the same reasons, whether the reads run with the
    rewrite (DuckDBEngine.first_rows made a no-op) or without it."""
    def fitted():
        with pytest.warns(sqlnb.errors.ScreeningWarning) as notes:
            m = sqlnb.fit(data, "y")
        return [f.name for f in m.features], sorted(str(w.message) for w in notes)

    without = fitted()
    monkeypatch.setattr(DuckDBEngine, "first_rows", lambda self: __import__("contextlib").nullcontext())
    assert fitted() == without


def test_the_unseen_value_check_reads_without_it(data, tmp_path, monkeypatch):
    m = sqlnb.fit(data, "y", features=["x", "c"])
    new = write_parquet(duckdb.connect(), tmp_path / "new.parquet",
                        "SELECT i::DOUBLE AS x, 'w' || (i % 3) AS c FROM range(1000) t(i)")
    from sqlnb.workflows.checks import unseen_counts

    seen = _recording(monkeypatch)
    con = duckdb.connect()
    found = unseen_counts(m, sqlnb.engines.as_engine(con).resolve(new), con)
    assert [f["column"] for f in found] == ["c"] and found[0]["unseen"] == 1000
    assert seen and all(d == {"late_materialization"} for _, d in seen)
    assert _disabled(con) == set()
