"""The fit at the floor: what a fit process does besides its scan.

No timing here (benchmarks are not timed tests; ``benchmarks/fit_floor.py --processes``
measures): what is checked is what a fit imports and how many statements read the data.

* A ``sqlnb fit`` that saves its model imports neither pandas nor scikit-learn nor SciPy
  (every naive Bayes family, LDA, QDA, logistic regression).
  pyarrow's ``pa.array`` and ``Array.to_numpy`` import pandas on first use when it is
  installed (0.30 CPU s, a third of a bare scan of 10M rows × 20 DOUBLE columns); the
  parameter parts are built from Arrow buffers (:mod:`sqlnb.store.arrow`) and the
  fingerprint reads column buffers.
* :func:`sqlnb.store.arrow.array` gives what ``pa.array`` gives (type and values), and the
  fingerprint's bytes are those of ``to_numpy()``.
* A Gaussian fit reads the data in a fixed number of statements: the shift read and the
  one statistics scan (and the screening sample when screening is on); no exact second
  pass on well-conditioned columns.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import sqlnb
from sqlnb.store.catalog import _column_bytes
from support.statements import reads, write_parquet

HEAVY = ("pandas", "sklearn", "scipy")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("floor")
    con = duckdb.connect()
    rows = "FROM range(3000) t(i)"
    wide = write_parquet(con, d / "wide.parquet", "SELECT (i % 3)::BIGINT AS label, "
                         + ", ".join(f"sin(i * {j + 1}.7) * 3 + (i % 3) AS x{j}" for j in range(6)) + f" {rows}")
    counts = write_parquet(con, d / "counts.parquet", "SELECT ['a', 'b', 'c'][i % 3 + 1] AS label, "
                           + ", ".join(f"floor(abs(sin(i * {j + 1}.3)) * 5)::DOUBLE AS c{j}" for j in range(5))
                           + f" {rows}")
    mixed = write_parquet(con, d / "mixed.parquet", "SELECT ['a', 'b'][i % 2 + 1] AS label, sin(i) + (i % 2) AS x, "
                          "['u', 'v', 'w', 'z'][(i * 7) % 4 + 1] AS colour, (i % 5)::INTEGER AS grade "
                          f"{rows}")
    return {"wide": wide, "counts": counts, "mixed": mixed, "dir": d}


def test_cli_fits_and_saves_without_pandas_sklearn_or_scipy(files):
    store = str(files["dir"] / "models.duckdb")
    fits = [[files["wide"], "--kind", "gaussian", "--model", f"{store}:g"],
            [files["counts"], "--kind", "multinomial", "--model", f"{store}:m"],
            [files["counts"], "--kind", "bernoulli", "--model", f"{store}:b"],
            [files["mixed"], "--model", f"{store}:mixed"],
            [files["mixed"], "--features", "colour,grade", "--kind", "categorical", "--model", f"{store}:c"],
            [files["wide"], "--kind", "lda", "--model", f"{store}:lda"],
            [files["wide"], "--kind", "qda", "--model", f"{store}:qda"],
            [files["wide"], "--kind", "logistic", "--model", f"{store}:logistic"]]
    code = ("import sys\nfrom sqlnb.cli import main\n"
            f"for args in {fits!r}:\n"
            "    try:\n        main(['fit', args[0], '--label', 'label', '--replace', *args[1:]])\n"
            "    except SystemExit as e:\n        assert not e.code, e.code\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "[]", done.stdout
    # and the models saved so are read back whole
    for name in ("g", "m", "b", "mixed", "c", "lda", "qda", "logistic"):
        assert sqlnb.load(store, name).classes


@pytest.mark.parametrize("values, type_", [
    ([1.5, None, float("nan"), -0.0, 1e308, 5e-324], pa.float64()),
    ([1, 2, None, 3], pa.float64()),  # integers given as DOUBLE
    ([np.float64(2.5), np.int64(3), np.float32(0.1)], pa.float64()),
    (range(5), pa.int32()),
    ([0, -(2 ** 31), 2 ** 31 - 1, None], pa.int32()),
    ([np.int64(7), 2 ** 62], pa.int64()),
    (["x0", "é", "", None, "a\u4e2dz"], pa.string()),
    ([], pa.float64()),
    ([], pa.string()),
    ([1, 2, -(2 ** 63), 2 ** 63 - 1], None),
    ([1.0, None, 2.5], None),
    (["b", None, "a"], None),
    ([True, False, None], None),  # booleans: pyarrow.array itself
    ([1, 2.5], None),  # mixed: pyarrow.array itself
    ([None, None], None),
    ([], None),
    (np.array([0.5, np.nan, -np.inf]), pa.float64()),  # numpy arrays, as LDA, QDA and logistic give them
    (np.array([0.5, 2.0], dtype=np.float32), pa.float64()),
    (np.arange(4).reshape(2, 2)[:, 1], pa.int32()),  # strided
    (np.array([3, -1], dtype=np.int64), pa.int64()),
    (np.array([1, 2]), pa.float64()),
    (np.array([], dtype=float), pa.float64()),
])
def test_arrow_array_is_pyarrow_array(values, type_):
    from sqlnb.store import arrow  # new in this change: imported here so the other tests run without it

    got, want = arrow.array(values, type_), pa.array(list(values), type_)
    assert got.type == want.type
    assert got.null_count == want.null_count
    assert [None if isinstance(v, float) and math.isnan(v) else v for v in got.to_pylist()] == \
           [None if isinstance(v, float) and math.isnan(v) else v for v in want.to_pylist()]
    assert [isinstance(v, float) and math.isnan(v) for v in got.to_pylist()] == \
           [isinstance(v, float) and math.isnan(v) for v in want.to_pylist()]
    got.validate(full=True)


def test_arrow_array_refuses_what_pyarrow_refuses():
    from sqlnb.store import arrow

    with pytest.raises(pa.ArrowInvalid):
        arrow.array([2 ** 31], pa.int32())
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError)):
        arrow.array(["x"], pa.float64())
    with pytest.raises(OverflowError):  # past INT64, as pyarrow.array
        arrow.array([2 ** 64])
    with pytest.raises(pa.ArrowInvalid):
        arrow.array([2 ** 63, None], pa.float64())
    with pytest.raises(pa.ArrowInvalid):
        arrow.array(np.array([2 ** 40]), pa.int32())


@pytest.mark.parametrize("column", [
    pa.chunked_array([pa.array([1.5, 2.5, -3.0]), pa.array([4.0])]),
    pa.chunked_array([pa.array(np.arange(10, dtype=np.int32)).slice(3, 4), pa.array([7], pa.int32())]),
    pa.array(np.arange(6, dtype=np.uint16)).slice(2),
    pa.array(np.array([0.1, 0.2], dtype=np.float32)),
    pa.chunked_array([], pa.float64()),
    pa.array([1.0, None]),  # with a NULL: JSON, as before
])
def test_fingerprint_bytes_are_those_of_to_numpy(column):
    if column.null_count == 0:
        values = column.to_numpy()
        want = values.astype(values.dtype.newbyteorder("<"), copy=False).tobytes()
    else:
        want = b"[1.0, null]"
    assert _column_bytes(column) == want


def test_numbers_reads_what_to_numpy_gives():
    from sqlnb.store import arrow

    column = pa.chunked_array([pa.array([1.5, -2.0, 3.25]).slice(1), pa.array([4.0])])
    assert arrow.numbers(column).tolist() == column.to_numpy().tolist() == [-2.0, 3.25, 4.0]
    assert arrow.numbers(pa.array(np.arange(5, dtype=np.int16))).dtype == np.int16
    with pytest.raises(ValueError):
        arrow.numbers(pa.array([1.0, None]))


# With screening, 3,000 rows are the whole source: the floats' MIN and MAX (constants) are read
# by a second screening query once the first has counted the rows (on a source larger than
# the sample they are not read at all: tests/test_screening_reads.py).
@pytest.mark.parametrize("screen, expected", [(False, 2), (True, 4)])
def test_a_gaussian_fit_reads_the_data_in_its_few_statements(files, monkeypatch, screen, expected):
    seen = reads(monkeypatch, files["wide"])
    m = sqlnb.fit(files["wide"], "label", kind="gaussian", con=duckdb.connect(), screen=screen)
    assert len(m.features) == 6
    # the shift read (its first rows), the statistics scan; with screening its two sample reads first
    assert len(seen) == expected, seen
    assert sum("GROUP BY" in s for s in seen) == 1, seen  # one per-class scan: no second pass
    assert all("LIMIT" in s for s in seen if "GROUP BY" not in s), seen


# --------------------------------------------------------------------------------------------
# pyarrow is imported when a step needs it, not when sqlnb's fit path is imported.
#
# The in-process fits of benchmarks/fit_floor.py (``sqlnb.fit`` in a fresh
# process, no model saved) of the count families, categorical and mixed had become 0.03–0.05 s
# slower than at af124e1, where their floors were documented: the store's modules imported
# pyarrow at module level (for saving, fingerprints and binned columns' counts), and
# pyarrow costs ~0.08 s to import (it brings cloudpickle and Cython's runtime). A fit that saves
# nothing needs none of it, nor does any CLI command's ``--help``.
# --------------------------------------------------------------------------------------------


ROOT = Path(__file__).resolve().parents[1]


def _run(code: str, tmp_path: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


@pytest.fixture(scope="module")
def parquet(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("floor40") / "d.parquet"
    duckdb.sql("SELECT CASE i % 3 WHEN 0 THEN 'a' WHEN 1 THEN 'b' ELSE 'c' END AS label, "
               "(i * 7919 % 1000) / 100.0 AS x0, (i * 104729 % 997) / 10.0 AS x1, "
               "(i * 31 % 17)::DOUBLE AS n0, (i * 13 % 5)::DOUBLE AS n1, "
               "CASE i % 4 WHEN 0 THEN 'p' WHEN 1 THEN 'q' ELSE 'r' END AS c0 "
               "FROM range(3000) t(i)").write_parquet(str(path))
    return str(path)


@pytest.mark.parametrize("kind, columns", [
    ("gaussian", ["x0", "x1"]),
    ("multinomial", ["n0", "n1"]),
    ("bernoulli", ["n0", "n1"]),
    ("complement", ["n0", "n1"]),
    ("categorical", ["c0"]),
    ("auto", ["x0", "c0"]),
])
def test_a_fit_that_saves_nothing_imports_no_pyarrow(parquet, tmp_path, kind, columns):
    code = ("import sys, sqlnb\n"
            f"m = sqlnb.fit({parquet!r}, 'label', features={columns!r}, kind={kind!r}, screen=False)\n"
            "print(len(m.classes), sorted(k for k in sys.modules if k.split('.')[0] in ('pyarrow', 'cloudpickle')))\n")
    assert _run(code, tmp_path).split(None, 1) == ["3", "[]\n"]


def test_cli_help_imports_no_pyarrow(tmp_path):
    code = ("import sys\n"
            "from sqlnb.cli import main\n"
            "sys.argv = ['sqlnb', 'fit', '--help']\n"
            "try:\n"
            "    main()\n"
            "except SystemExit:\n"
            "    pass\n"
            "print('MODS', sorted(k for k in sys.modules if k.split('.')[0] == 'pyarrow'))\n")
    out = _run(code, tmp_path)
    assert "Fit a model on DATA" in out
    assert out.rstrip().endswith("MODS []")


def test_a_saved_fit_still_saves_and_loads(parquet, tmp_path):
    """The store imports pyarrow when it writes: the model round-trips as before."""
    db = tmp_path / "m.duckdb"
    out = subprocess.run([sys.executable, "-m", "sqlnb", "fit", parquet, "--label", "label", "--model",
                          f"{db}:m", "--features", "x0,c0"], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    import sqlnb

    con = duckdb.connect(str(db))
    try:
        m = sqlnb.load(con, "m")
        fresh = sqlnb.fit(parquet, "label", features=["x0", "c0"])
        assert m.classes == fresh.classes
        got = m.score(parquet, con).fetchall()
        want = fresh.score(parquet, duckdb.connect()).fetchall()
        assert got == want
    finally:
        con.close()


def test_deferred_module_behaves_as_pyarrow():
    from sqlnb.store.arrow import array, pa

    import pyarrow

    assert pa.float64() == pyarrow.float64()
    assert isinstance(array([1.0, None], pa.float64()), pyarrow.Array)
    assert array([1, 2], pa.int32()).type == pyarrow.int32()
    assert array(["a", None], pa.string()).to_pylist() == ["a", None]
    with pytest.raises(AttributeError):
        pa.__wrapped__  # dunder probes do not import or invent anything


def test_fit_parts_benchmark_runs_at_a_tiny_size(tmp_path):
    """benchmarks/fit_parts.py names each step of a fit process; its steps add up to the whole."""
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "fit_parts.py"), "--rows", "3000", "--repeat", "1",
                          "--family", "gaussian", "--data-dir", str(tmp_path)], capture_output=True, text=True,
                         cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = {line.split(" | ")[0].strip("| "): [float(v) for v in line.strip(" |").split(" | ")[1:3]]
            for line in out.stdout.splitlines() if line.startswith("| ") and not line.startswith("| step")}
    assert {"bare scan (its process start subtracted)", "the data's connection", "statement 1", "save",
            "sqlnb.api.fit"} <= set(rows)
    whole = rows["whole `main()` (≈ the fit's process less its start)"][0]
    parts = sum(rows[k][0] for k in ("the data's connection", "sqlnb.api.fit", "save",
                                     "the rest (CLI, imports after the start, output)"))
    assert abs(parts - whole) < 2e-3  # rounding of the printed figures only
