"""Issue 27, point 3: ``sqlnb compare`` on 10,000 rows peaked at 304-312 MiB (limit 300).

Traced per phase in one process (VmHWM): the imports 95 MiB, then DuckDB's queries; the
first logistic regression fit added ~40 MiB that stayed, pandas, which sqlnb never uses:
pyarrow's ``ChunkedArray.to_numpy`` imports it (to check for it) when
:func:`sqlnb.models.dense.read_rows` turned the rows into numpy. The columns are now read
from their Arrow buffers (:func:`sqlnb.models.dense.to_numpy`), the same doubles.
Checked here: that conversion against pyarrow's (chunks, slices, empty, NULLs), that a
logistic fit and the ``compare`` command leave pandas unimported, and that compare's
figures are the same with the conversion as with pyarrow's (``--threads 1``: with more
DuckDB threads the last digits of a log loss vary from run to run on any commit).
"""

from __future__ import annotations

import subprocess
import sys

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import sqlnb
from sqlnb.models import dense
from support.processes import run_cli_saying_pandas


@pytest.mark.parametrize("column", [
    pa.chunked_array([[1.5, -2.0, 3.25], [], [4.0, np.nextafter(0, 1)]]),
    pa.chunked_array([pa.array([9.0, 1.0, 2.0, 3.0, 7.0]).slice(1, 3), pa.array([5.0, 6.0]).slice(1)]),
    pa.chunked_array([pa.array([1, -2, 3], pa.int64()), pa.array([2**62], pa.int64()).slice(0)]),
    pa.chunked_array([pa.array([4, 5, 6], pa.int32()).slice(2)]),
    pa.chunked_array([], pa.float64()),
    pa.chunked_array([[1.0, None, 3.0]]),
    pa.chunked_array([["a", "b"], ["c"]]),
])
def test_to_numpy_equals_pyarrow(column):
    got, want = dense.to_numpy(column), column.to_numpy(zero_copy_only=False)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert [repr(v) for v in got.tolist()] == [repr(v) for v in want.tolist()]


def test_read_rows_gives_the_same_matrix(con):
    con.execute("CREATE TABLE t AS SELECT (i % 3)::VARCHAR AS y, i * 0.1 AS a, (i * i) % 17 AS b, "
                "i::DOUBLE / 7 AS c FROM range(5000) r(i)")
    from sqlnb.engines import as_engine
    src = as_engine(con).resolve("t")
    labels, X, _, nulls = dense.read_rows(con, src, "y", {"a": "DOUBLE", "b": "BIGINT", "c": "DOUBLE"})
    want = con.execute("SELECT a, b::DOUBLE AS b, c FROM t").fetchnumpy()
    np.testing.assert_array_equal(X, np.column_stack([want["a"], want["b"], want["c"]]))
    assert nulls == 0 and labels[:4] == ["0", "1", "2", "0"]


def _pandas_after(code: str) -> bool:
    done = subprocess.run([sys.executable, "-c", code + "\nimport sys; print('pandas' in sys.modules)"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()[-1] == "True"


def test_logistic_fit_does_not_import_pandas():
    code = ("import duckdb, sqlnb\n"
            "con = duckdb.connect()\n"
            "con.execute(\"CREATE TABLE t AS SELECT (i % 2)::VARCHAR AS y, sin(i) + (i % 2) AS a, cos(i) AS b "
            "FROM range(400) r(i)\")\n"
            "m = sqlnb.fit('t', 'y', con=con, model='logistic')\n"
            "assert m is not None")
    assert not _pandas_after(code)


@pytest.fixture(scope="module")
def adultish(tmp_path_factory):
    """600 rows of two numeric and two text columns (one-hot encoded by compare)."""
    path = tmp_path_factory.mktemp("s38compare") / "d.csv"
    duckdb.connect().execute(
        f"COPY (SELECT CASE WHEN hash(i) % 3 = 0 THEN '>50K' ELSE '<=50K' END AS income, "
        f"(i * 37) % 61 + 17 AS age, ((i * 13) % 29)::DOUBLE / 3 AS hours, "
        f"['a', 'b', 'c', 'd'][1 + (i * 7) % 4] AS work, ['x', 'y'][1 + (hash(i + 1) % 2)::BIGINT] AS sex "
        f"FROM range(600) r(i)) TO '{path}' (HEADER)")
    return path


def test_compare_does_not_import_pandas(adultish):
    done = run_cli_saying_pandas("compare", str(adultish), "--label", "income", "--sizes", "40,300", "--repeats", "2",
                                 "--models", "naive_bayes,logistic")
    assert done.stderr.strip().splitlines()[-1] == "False", done.stderr[-2000:]
    assert "| 300 |" in done.stdout


def test_compare_figures_unchanged_by_the_conversion(adultish, monkeypatch):
    """The figures (JSON, every digit) with pyarrow's conversion and with the buffers'."""
    from click.testing import CliRunner
    from sqlnb.cli import cli

    args = ["--threads", "1", "compare", str(adultish), "--label", "income", "--sizes", "40,300", "--repeats", "2",
            "--models", "logistic,naive_bayes", "--format", "json"]
    ours = CliRunner().invoke(cli, args)
    assert ours.exit_code == 0, ours.output
    monkeypatch.setattr(dense, "to_numpy", lambda column: column.to_numpy(zero_copy_only=False))
    theirs = CliRunner().invoke(cli, args)
    assert theirs.exit_code == 0, theirs.output
    assert ours.stdout == theirs.stdout and '"mean_log_loss": 0.' in ours.stdout
