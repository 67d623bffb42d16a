"""What screening reads: a source's first rows, without DuckDB's late materialization,
and only the columns a rule could leave out.

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
from sqlnb.errors import ScreeningWarning
from sqlnb.models import screening
from support.statements import reads
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


# --------------------------------------------------------------------------------------------
# The columns screening reads.
#
# No timing here (``benchmarks/fit_floor.py --processes`` measures). Screening reads the
# first rows of the source; a column that no rule can call an identifier (a float not named
# like an ID, a BOOLEAN) can only be left out as a constant, and only when those rows are
# the whole source. So on a source larger than the sample such columns are not read at all
# (10M rows × 20 DOUBLE: the screening statement's CPU fell from 0.07–0.09 s to 0.02–0.035 s
# in a fit process, benchmarks/README.md), and on a source the sample covers whole they are
# read by a second query once the first has counted the rows: the same columns are left out
# as before. With count features stored as DOUBLE only (never IDs, constants kept) screening
# could leave nothing out and reads nothing.
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("floor39")
    con = duckdb.connect()
    big = screening.SAMPLE_ROWS + 5_000  # more rows than the screening sample
    floats = ", ".join(f"sin(i * {j + 1}.7) * 3 + (i % 3) AS x{j}" for j in range(4))
    large = write_parquet(con, d / "large.parquet", f"SELECT (i % 3)::BIGINT AS label, {floats}, "
                          f"(i * 0.5)::DOUBLE AS sample_id, 7.0::DOUBLE AS flat FROM range({big}) t(i)")
    counts = write_parquet(con, d / "counts.parquet", "SELECT ['a', 'b', 'c'][i % 3 + 1] AS label, "
                           + ", ".join(f"floor(abs(sin(i * {j + 1}.3)) * 5)::DOUBLE AS c{j}" for j in range(4))
                           + f", 2.0::DOUBLE AS flat FROM range({big}) t(i)")
    small_counts = write_parquet(con, d / "small_counts.parquet", f"SELECT * FROM '{counts}' LIMIT 3000")
    small = write_parquet(con, d / "small.parquet", f"SELECT (i % 3)::BIGINT AS label, {floats}, 7.0::DOUBLE AS flat, "
                          "(i % 2 = 0) AS even, TRUE AS always FROM range(3000) t(i)")
    mixed = write_parquet(con, d / "mixed.parquet", "SELECT ['a', 'b'][i % 2 + 1] AS label, sin(i) AS x, "
                          "'c' || i::VARCHAR AS code, i::INTEGER AS n, (i * 1.5)::DOUBLE AS ratio_id, "
                          "2.5::DOUBLE AS flat, NULL::DOUBLE AS nothing, TRUE AS always, (i % 4)::INTEGER AS grade, "
                          "i::REAL AS single FROM range(2000) t(i)")
    return {"large": large, "counts": counts, "small_counts": small_counts, "small": small, "mixed": mixed}


def _screening(seen: list[str]) -> list[str]:
    return [s for s in seen if f"LIMIT {screening.SAMPLE_ROWS}" in s]


def test_on_a_large_source_screening_reads_no_float_measurement(files, monkeypatch):
    seen = reads(monkeypatch, files["large"])
    with pytest.warns(ScreeningWarning) as said:
        m = sqlnb.fit(files["large"], "label", kind="gaussian", con=duckdb.connect())
    # the float ID is read and left out; the constant is not known to be one (the sample is
    # not the whole source) and stays, as before
    assert [str(w.message).split(":")[1].strip() for w in said] == ["left out column 'sample_id'"], [str(w.message) for w in said]
    assert [f.name for f in m.features] == ["x0", "x1", "x2", "x3", "flat"]
    scr = _screening(seen)
    assert len(scr) == 2, scr  # COUNT, MIN, MAX; then the ID's COUNT(DISTINCT)
    assert all('"sample_id"' in s for s in scr), scr
    assert not any(f'"x{j}"' in s for s in scr for j in range(4)) and not any('"flat"' in s for s in scr), scr
    # the screening sample's two reads, the shift read, the statistics scan
    assert len(seen) == 4, seen


@pytest.mark.parametrize("kind", ["multinomial", "bernoulli", "complement"])
@pytest.mark.parametrize("name", ["counts", "small_counts"])
def test_count_features_stored_as_double_are_not_screened_at_all(files, monkeypatch, kind, name):
    """A count feature is no ID by its values and a constant one is kept (it changes the
    probabilities): with only such columns, screening could leave nothing out and reads
    nothing."""
    seen = reads(monkeypatch, files[name])
    m = sqlnb.fit(files[name], "label", kind=kind, con=duckdb.connect())
    assert [f.name for f in m.features] == ["c0", "c1", "c2", "c3", "flat"]
    assert _screening(seen) == [] and len(seen) == 1, seen  # the statistics scan alone


def test_a_whole_small_source_still_screens_its_constants(files, monkeypatch):
    seen = reads(monkeypatch, files["small"])
    with pytest.warns(ScreeningWarning) as said:
        m = sqlnb.fit(files["small"], "label", con=duckdb.connect())
    # a constant float (Gaussian) is left out; a constant BOOLEAN (Bernoulli) stays: it adds
    # a class-dependent term
    assert [str(w.message).split(":")[1].strip() for w in said] == ["left out column 'flat'"], [str(w.message) for w in said]
    assert [f.name for f in m.features] == ["x0", "x1", "x2", "x3", "even", "always"]
    scr = _screening(seen)
    assert len(scr) == 2, scr  # the rows counted, then the columns that could be constants
    assert '"flat"' in scr[1] and '"x0"' in scr[1]


@pytest.mark.parametrize("name", ["large", "small", "mixed", "small_counts"])
def test_screen_leaves_out_what_reading_every_column_left_out(files, monkeypatch, name):
    """The columns left out equal those of one query reading every column (the reading
    before this change, had by calling no column constant-only)."""
    from sqlnb.source import resolve

    con = duckdb.connect()
    engine = DuckDBEngine(con)
    source = resolve(files[name], con)
    columns = [c for c in source.columns if c != "label"]
    for free in (None, columns[:2], []):
        got = screening.screen(engine, source, columns, constant_free=free)
        with monkeypatch.context() as mp:
            mp.setattr(screening, "_only_constant", lambda name, t: False)
            want = screening.screen(engine, source, columns, constant_free=free)
        assert got == want, (name, free)
