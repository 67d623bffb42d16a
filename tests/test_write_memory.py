"""Bounded memory when the CLI writes scored rows to a file (issue 20, point 4).

DuckDB's ordered COPY holds finished row groups that are ahead of the writer, bounded only
by its memory limit; the CLI gives file outputs a limit (``WRITE_MEMORY_LIMIT``) unless the
user chose one. The peak RSS itself is measured in benchmarks/README.md ("Scoring memory"),
not here; these tests check that the limit is set and that a user's own limit wins. Rows
written under a tight limit keep the input's order: tests/test_row_integrity.py at 200,000
rows in 20 row groups; the 2,000,000-row run in its own process, as it was here, is
benchmarks/row_order_2m.py.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlglot import exp

import sqlnb
from sqlnb import sql
from sqlnb.cli.app import Settings
from sqlnb.cli.io import write_out
from sqlnb.io import output
from support.cli import run_process


def _limit_seen(settings: Settings, out: str) -> str:
    """The memory limit in force on the connection ``write_out`` writes ``out`` with."""
    seen = {}

    def query(con, own_db):
        seen["limit"] = con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
        return exp.select(exp.alias_(sql.dbl(1.0), "x", quoted=True))

    write_out(settings, out, True, query)
    return seen["limit"]


def _bytes(limit: str) -> float:
    number, unit = limit.split()
    return float(number) * {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}[unit]


def test_file_outputs_get_the_write_memory_limit(tmp_path):
    assert output.WRITE_MEMORY_LIMIT == "1GB"
    got = _limit_seen(Settings(), str(tmp_path / "a.parquet"))
    assert _bytes(got) == pytest.approx(1e9, rel=0.01)  # DuckDB shows 1GB as '953.6 MiB'


def test_standard_output_gets_it_too(capsysbinary):
    got = _limit_seen(Settings(), "-")
    assert _bytes(got) == pytest.approx(1e9, rel=0.01)
    assert capsysbinary.readouterr().out.decode().splitlines() == ["x", "1.0"]


def test_a_limit_the_user_chose_is_kept(tmp_path):
    got = _limit_seen(Settings(memory_limit="3GB"), str(tmp_path / "a.parquet"))
    assert _bytes(got) == pytest.approx(3e9, rel=0.05)  # shown rounded: "2.7 GiB"


def test_a_table_output_keeps_duckdbs_default(tmp_path):
    default = _bytes(duckdb.connect().execute("SELECT current_setting('memory_limit')").fetchall()[0][0])
    got = _limit_seen(Settings(), f"{tmp_path / 'out.duckdb'}:scores")
    assert _bytes(got) == pytest.approx(default, rel=0.01)
