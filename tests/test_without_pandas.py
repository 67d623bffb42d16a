"""``evaluate``, ``report``, ``compare`` and a logistic fit run without importing pandas.

pandas costs ~40 MiB of a process that sqlnb never uses, and pyarrow imports it behind
the caller's back (``ChunkedArray.to_numpy``, ``pyarrow.acero``).

``sqlnb report`` of an AODE model (``--bins mdl``) on 10,000 rows peaked at 311 MiB on a
quiet machine: besides DuckDB planning the ~1 MB scoring SELECT twice (figures, curves),
the process imported pandas (~40 MiB) twice over: loading a binned model read its cut
counts with ``ChunkedArray.to_numpy`` (which imports pandas), and ``evaluate`` grouped its
streamed rows with pyarrow's ``group_by`` (``pyarrow.acero`` imports pandas, ~0.25 CPU s
of evaluate's 3-class overhead against ``score`` at 10M rows). The cells are now grouped
in numpy (:class:`sqlnb.workflows.ranksort.Groups`) with the same sums bit for bit, and the
model's columns are read from their buffers (:mod:`sqlnb.store.arrow`).
"""

from __future__ import annotations

import subprocess
import sys

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sqlnb
from sqlnb.models import dense
from sqlnb.workflows import ranksort
from support.processes import peak_mib, run_cli_saying_pandas

LIMIT_MIB = 300
#: The numpy grouping (kept here: one test swaps ``ranksort.read_stream`` for the reference).
READ_STREAM = ranksort.read_stream


def sqlnb_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sqlnb", *args], capture_output=True, text=True, timeout=180)


def pandas_imported(*args: str) -> bool:
    """Whether ``sqlnb args`` (run to success in a fresh process) imported pandas."""
    return run_cli_saying_pandas(*args).stderr.strip().splitlines()[-1] == "True"


def write_mixed(path, rows: int, classes: int = 2, seed: int = 39) -> None:
    """``rows`` of 6 numeric and 4 text columns (adult's shape, smaller) and a label."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, rows)
    cols = {f"n{j}": np.round(rng.normal(y * (0.4 + 0.2 * j), 1.0 + j) * 10) / 10 for j in range(6)}
    for j, m in enumerate((4, 7, 9, 16)):
        v = (rng.integers(0, m, rows) + y * (j + 1)) % m
        cols[f"t{j}"] = np.char.add(f"v{j}_", v.astype(str))
    cols["label"] = np.char.add("c", y.astype(str))
    pq.write_table(pa.table(cols), path)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A 3-class Gaussian model and an AODE and a KDB(2) model on MDL bins, with their data."""
    d = tmp_path_factory.mktemp("s39def")
    small, three = d / "small.parquet", d / "three.parquet"
    write_mixed(small, 400)
    duckdb.connect().execute(
        f"COPY (SELECT (i % 3)::VARCHAR AS y, sin(i) + (i % 3) AS a, cos(i * 1.3) - (i % 3) / 2 AS b "
        f"FROM range(600) r(i)) TO '{three}' (FORMAT parquet)")
    db = str(d / "m.duckdb")
    for name, args in (("gauss3", [str(three), "--label", "y"]),
                       ("aode", [str(small), "--label", "label", "--structure", "aode", "--bins", "mdl"]),
                       ("kdb2", [str(small), "--label", "label", "--structure", "kdb:2", "--bins", "mdl"])):
        done = sqlnb_cli("fit", *args, "--model", f"{db}:{name}", "--replace")
        assert done.returncode == 0, done.stderr[-2000:]
    return {"dir": d, "db": db, "small": str(small), "three": str(three)}


def test_evaluate_of_three_classes_does_not_import_pandas(models):
    assert not pandas_imported("evaluate", models["three"], "--model", f"{models['db']}:gauss3")


@pytest.mark.parametrize("name", ["aode", "kdb2"])
def test_report_of_a_binned_model_does_not_import_pandas(models, name):
    out = str(models["dir"] / f"{name}.html")
    assert not pandas_imported("report", models["small"], "--model", f"{models['db']}:{name}", "--out", out,
                               "--replace")


def test_show_params_of_a_binned_kdb_model_does_not_import_pandas(models):
    assert not pandas_imported("show", "--model", f"{models['db']}:kdb2", "--params")


# -- the grouping: the same figures as pyarrow's group_by ---------------------------------
def reference_read_stream(reader, K: int):
    """9b1aee6's grouping (pyarrow ``group_by`` per batch, regrouped at the end) beside the
    same ranking sums."""
    import pyarrow.compute as pc

    aggregates = [(c, f, pc.CountOptions(mode="all")) if (c, f) == ("k", "count") else (c, f) for c, f in AGG]
    keys = {("k", "y", "p"): [], ("bin",): []}
    batches = list(reader)
    for batch in batches:
        table = pa.Table.from_batches([batch])
        for by, parts in keys.items():
            parts.append(table.group_by(list(by), use_threads=False).aggregate(aggregates))
    tables = []
    for by, parts in keys.items():
        grouped = pa.concat_tables(parts).group_by(list(by), use_threads=False).aggregate(
            [(f"{c}_{f}", "sum") for c, f in AGG])
        n = len(grouped)
        out = {"part": pa.array([0 if "k" in by else 1] * n, pa.int32())}
        for key in ("k", "y", "p", "bin"):
            out[key] = grouped.column(key) if key in by else pa.nulls(n, reader.schema.field(key).type)
        col = {name: grouped.column(f"{c}_{f}_sum") for name, (c, f) in zip(("n", "m", "loss", "brier", "conf", "hits"),
                                                                            AGG)}
        out |= {"n": pc.cast(col["n"], pa.int64()), "m": pc.cast(col["m"], pa.int64())}
        out |= {name: pc.cast(col[name], pa.float64()) for name in ("loss", "brier", "conf", "hits")}
        tables.append(pa.table(out))
    _, sums = READ_STREAM(Batches(batches), K)
    return pa.concat_tables(tables), sums


AGG = (("k", "count"), ("loss", "count"), ("loss", "sum"), ("brier", "sum"), ("conf", "sum"), ("hit", "sum"))


class Batches:
    def __init__(self, batches):
        self.batches, self.schema = batches, batches[0].schema

    def __iter__(self):
        return iter(self.batches)


def random_batches(rng, K: int, n: int, count: int, text: bool) -> list:
    labels = [f"c{i}" for i in range(K)] if text else list(range(K))
    label_type = pa.string() if text else pa.int64()
    out = []
    for _ in range(count):
        k = [int(v) if v >= 0 else None for v in rng.integers(-1, K, n)]
        unknown = rng.random(n) < 0.05
        y = [(f"u{rng.integers(0, 5)}" if text else 100 + int(rng.integers(0, 5))) if kk is None and u else None
             for kk, u in zip(k, unknown)]
        p = [None if rng.random() < 0.1 else labels[rng.integers(0, K)] for _ in range(n)]
        scored = rng.random(n) > 0.2
        loss = [(float(rng.exponential()) if rng.random() > 0.01 else float("nan")) if s else None for s in scored]
        conf = [float(rng.random()) if s else None for s in scored]
        cols = {"k": pa.array(k, pa.int32()), "y": pa.array(y, label_type), "p": pa.array(p, label_type),
                "loss": pa.array(loss, pa.float64()),
                "brier": pa.array([float(rng.random()) if s else None for s in scored], pa.float64()),
                "conf": pa.array(conf, pa.float64()),
                "bin": pa.array([float(np.floor(c * 15)) if c is not None else None for c in conf], pa.float64()),
                "hit": pa.array([float(rng.integers(0, 2)) if s else None for s in scored], pa.float64())}
        for c in ranksort.streamed_classes(K):
            cols[f"s{c}"] = pa.array([float(rng.normal()) if kk is not None and s else None
                                      for kk, s in zip(k, scored)], pa.float64())
        out.append(pa.RecordBatch.from_pydict(cols))
    return out


@pytest.mark.parametrize("K", [2, 3, 5])
@pytest.mark.parametrize("text", [True, False])
@pytest.mark.parametrize("n,count", [(40, 1), (700, 6), (3, 25)])
def test_numpy_grouping_equals_pyarrow_group_by_bit_for_bit(K, text, n, count):
    batches = random_batches(np.random.default_rng(K * 100 + n), K, n, count, text)
    ours, sums = ranksort.read_stream(Batches(batches), K)
    theirs, their_sums = reference_read_stream(Batches(batches), K)
    assert ours.schema == theirs.schema

    def rows(t):  # every value as repr: floats compared bit for bit (NaN equal to NaN)
        return sorted(repr(r) for r in t.to_pylist())
    assert rows(ours) == rows(theirs)
    assert len(ours) == len({repr((r["part"], r["k"], r["y"], r["p"], r["bin"])) for r in ours.to_pylist()})
    assert repr(sums) == repr(their_sums)


def test_report_page_identical_to_pyarrow_grouping(models, monkeypatch):
    """The whole HTML page of ``report`` (every figure, curve and table) with the numpy
    grouping and with 9b1aee6's pyarrow grouping."""
    from click.testing import CliRunner
    from sqlnb.cli import cli

    out = models["dir"] / "page.html"
    args = ["--threads", "1", "report", models["small"], "--model", f"{models['db']}:aode", "--out", str(out),
            "--replace"]
    got = CliRunner().invoke(cli, args)
    assert got.exit_code == 0, got.output
    ours = out.read_text()
    monkeypatch.setattr(ranksort, "read_stream", lambda reader, K, directory=None: reference_read_stream(reader, K))
    got = CliRunner().invoke(cli, args)
    assert got.exit_code == 0, got.output
    assert out.read_text() == ours and "ROC" in ours and "accuracy" in ours.lower()


def test_report_of_aode_on_10k_rows_within_300_mib(tmp_path):
    data, db = str(tmp_path / "d.parquet"), str(tmp_path / "m.duckdb")
    write_mixed(data, 10_000)
    done = sqlnb_cli("fit", data, "--label", "label", "--structure", "aode", "--bins", "mdl", "--model", f"{db}:a")
    assert done.returncode == 0, done.stderr[-2000:]
    peak = peak_mib(["report", data, "--model", f"{db}:a", "--out", str(tmp_path / "r.html")])
    assert peak <= LIMIT_MIB, f"report peaked at {peak:.0f} MiB"


@pytest.mark.parametrize("name", ["aode", "gauss3"])
def test_report_page_identical_when_scored_once(models, monkeypatch, name):
    """``report`` scores the rows once into a temporary table (curves.scored_once) that the
    figures and the curves read: the page is the one the two scoring statements gave."""
    from contextlib import nullcontext

    from click.testing import CliRunner
    from sqlnb.cli import cli, predict

    data = models["small"] if name == "aode" else models["three"]
    out = models["dir"] / f"once-{name}.html"
    args = ["report", data, "--model", f"{models['db']}:{name}", "--out", str(out), "--replace"]
    made = []
    real = predict.scored_once

    def counted(*a, **k):
        made.append(1)
        return real(*a, **k)
    monkeypatch.setattr(predict, "scored_once", counted)
    got = CliRunner().invoke(cli, args)
    assert got.exit_code == 0, got.output
    ours = out.read_text()
    assert made == [1]
    monkeypatch.setattr(predict, "scored_once", lambda *a, **k: nullcontext())  # 9b1aee6: each statement scores
    got = CliRunner().invoke(cli, args)
    assert got.exit_code == 0, got.output
    assert out.read_text() == ours and "ROC" in ours


# --------------------------------------------------------------------------------------------
# ``sqlnb compare`` and a logistic fit without pandas: 10,000 rows within 300 MiB (it peaked at
# 304-312 MiB when pandas came in).
#
# Traced per phase in one process (VmHWM): the imports 95 MiB, then DuckDB's queries; the
# first logistic regression fit added ~40 MiB that stayed, pandas, which sqlnb never uses:
# pyarrow's ``ChunkedArray.to_numpy`` imports it (to check for it) when
# :func:`sqlnb.models.dense.read_rows` turned the rows into numpy. The columns are now read
# from their Arrow buffers (:func:`sqlnb.models.dense.to_numpy`), the same doubles.
# Checked here: that conversion against pyarrow's (chunks, slices, empty, NULLs), that a
# logistic fit and the ``compare`` command leave pandas unimported, and that compare's
# figures are the same with the conversion as with pyarrow's (``--threads 1``: with more
# DuckDB threads the last digits of a log loss vary from run to run on any commit).
# --------------------------------------------------------------------------------------------


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
