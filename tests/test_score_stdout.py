"""``sqlnb score`` without ``--out`` writes CSV to stdout, as ``--out -`` does (``sqlnb
--help`` says results go to stdout): the same bytes, one row per input row in the input's
order, and a reader that stops early (``| head -1``) is no error."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

import sqlnb
from support.cli import invoke, mixed_table, write_parquet


@pytest.fixture
def scored(tmp_path):
    data = write_parquet(mixed_table(300, seed=5), tmp_path / "rows.parquet")
    sqlnb.fit(data, "y").save(f"{tmp_path}/m.duckdb", "nb")
    return tmp_path, data


def test_score_without_out_writes_the_csv_of_out_dash(scored):
    tmp, data = scored
    default = invoke("score", data, "--model", f"{tmp}/m.duckdb:nb", "--keep", "id")
    dash = invoke("score", data, "--model", f"{tmp}/m.duckdb:nb", "--keep", "id", "--out", "-")
    assert default.exit_code == 0, default.stderr
    assert default.stdout == dash.stdout
    lines = default.stdout.splitlines()
    assert lines[0] == "id,proba_a,proba_b,proba_c,prediction"
    assert [int(line.split(",")[0]) for line in lines[1:]] == list(range(300))  # every row, in order


def test_score_help_names_stdout_as_the_default():
    text = invoke("score", "--help").stdout
    assert "write the rows to OUT (default: CSV on stdout)" in text
    assert "for CSV on stdout (the" in text


def test_out_and_out_table_together_are_one_error(scored):
    tmp, data = scored
    r = invoke("score", data, "--model", f"{tmp}/m.duckdb:nb", "--out", "-", "--out-table", "t")
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr == ("Error: give one of --out OUT and --out-table NAME (a table on --engine postgres|spark), "
                        "not both\n")


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("head") is None, reason="needs bash and head")
def test_score_to_stdout_into_a_closed_pipe_is_no_error(tmp_path):
    # 20,000 scored rows are ~2 MB of CSV, far more than a pipe holds: the writes after
    # `head -1` exits hit the closed pipe.
    data = write_parquet(mixed_table(20_000, seed=3), tmp_path / "big.parquet")
    sqlnb.fit(data, "y").save(f"{tmp_path}/m.duckdb", "nb")
    result = subprocess.run(["bash", "-c", 'set -o pipefail; "$@" | head -1', "bash", sys.executable, "-m", "sqlnb",
                             "score", data, "--model", "m.duckdb:nb"],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == "id,x,z,color,flag,y,proba_a,proba_b,proba_c,prediction\n"
